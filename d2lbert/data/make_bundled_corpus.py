"""Generate the bundled corpus: encyclopedia-style articles in WikiText format.

Every article describes one invented entity -- an animal, a city, a river, a
person or a mountain -- in two paragraphs, each following a fixed *script*
of sentence types for its topic (e.g. for an animal: what it is, what it
looks like, how it moves and eats, its size, who described it, ...). The
facts are drawn at random but tied together:

* attributes are correlated (birds have feathers and fly, fish have scales
  and swim; a city's country fixes its language; a person's occupation fixes
  what they made), so a masked word can often be guessed from the others;
* every sentence names the entity it is about, and places and people are
  shared between articles (a painter is born in one of the cities);
* sentences follow the script in order, so a sentence taken from another
  paragraph is easy to tell from the true next one.

The vocabulary stays around 1,500 words, so a small BERT learns both
tasks in a few hundred steps. The output is a pure function of the seed
(``random.Random`` with an int seed is stable across Python versions).

:func:`d2lbert.data.bundled_corpus_directory` runs it on first use; run
``python -m d2lbert.data.make_bundled_corpus OUTPUT_DIRECTORY`` to write
``wiki.{train,valid,test}.tokens`` somewhere yourself.
"""
import os
import random
import sys

SEED = 2024
NUM_ARTICLES = {'train': 1020, 'valid': 80, 'test': 80}

SYLLABLES = ['va', 'ren', 'del', 'mor', 'tin', 'ka', 'lo', 'bri', 'sa', 'nor',
             'el', 'gar', 'thu', 'mi', 'dan', 'ose', 'ria', 'bel', 'cor', 'fen',
             'ha', 'ist', 'jun', 'lam', 'pe', 'quin', 'ros', 'tev', 'ul', 'wen']
COUNTRIES = {  # country: (language, region of the world)
    'Arvenia': ('Arvenian', 'north'), 'Belmora': ('Belmoran', 'south'),
    'Castrel': ('Castrelian', 'west'), 'Dovania': ('Dovanian', 'east'),
    'Elsmere': ('Elsmerian', 'north'), 'Fernholt': ('Fernish', 'west'),
}
COLORS = ['red', 'grey', 'black', 'white', 'brown', 'golden', 'green',
          'blue', 'spotted', 'striped']
ANIMAL_KINDS = {  # kind: (covering, body, movement, diets, habitats, unit)
    'bird': ('feathers', 'two long wings', 'flies', ['seeds', 'insects',
             'berries'], ['forests', 'marshes', 'cliffs'], 'centimetres'),
    'fish': ('scales', 'a pair of wide fins', 'swims', ['plankton', 'shrimp',
             'smaller fish'], ['lakes', 'rivers', 'reefs'], 'centimetres'),
    'mammal': ('thick fur', 'four strong legs', 'runs', ['grass', 'roots',
               'small animals'], ['plains', 'forests', 'hills'], 'metres'),
    'reptile': ('hard scales', 'four short legs', 'crawls', ['insects',
                'eggs', 'small animals'], ['deserts', 'swamps', 'rocks'],
                'centimetres'),
    'insect': ('a hard shell', 'six thin legs', 'crawls', ['leaves', 'nectar',
               'wood'], ['gardens', 'meadows', 'forests'], 'millimetres'),
}
YOUNG = {'bird': 'lays {} eggs in a nest of {}', 'fish': 'lays {} eggs among'
         ' {}', 'mammal': 'gives birth to {} young in a den of {}',
         'reptile': 'buries {} eggs under {}', 'insect': 'lays {} eggs on {}'}
NEST = ['twigs', 'moss', 'grass', 'mud', 'stones', 'leaves']
STATUS = {'common': 'its numbers are stable', 'rare': 'its habitat is '
          'shrinking', 'endangered': 'it is hunted for its {}'}
INDUSTRIES = {  # landscape: industries
    'coast': ['fishing', 'shipbuilding', 'trade'],
    'mountains': ['mining', 'forestry', 'tourism'],
    'plains': ['farming', 'milling', 'weaving'],
}
LANDMARKS = ['cathedral', 'harbour', 'castle', 'bridge', 'market', 'tower',
             'university', 'library']
DISASTERS = ['fire', 'flood', 'earthquake', 'storm']
OCCUPATIONS = {  # occupation: (verb, works, place of work, prize subject)
    'painter': ('painted', 'portraits', 'studio', 'art'),
    'composer': ('composed', 'symphonies', 'conservatory', 'music'),
    'physicist': ('discovered', 'laws of motion', 'laboratory', 'physics'),
    'poet': ('wrote', 'poems', 'library', 'literature'),
    'architect': ('designed', 'bridges', 'office', 'architecture'),
}
SEAS = ['Northern Sea', 'Silver Sea', 'Western Ocean', 'Bay of Morra']
ROCKS = ['granite', 'limestone', 'basalt', 'sandstone']
SEASONS = ['spring', 'summer', 'autumn', 'winter']
ORDINALS = ['second', 'third', 'fourth', 'fifth', 'sixth']


def make_name(rng, used, syllables=(2, 3)):
    """A new capitalized invented name, e.g. ``Varendel``."""
    while True:
        name = ''.join(rng.choice(SYLLABLES)
                       for _ in range(rng.choice(syllables))).capitalize()
        if name not in used:
            used.add(name)
            return name


def script(rng, sentences):
    """Keep each optional (``?``-marked) sentence with probability 0.8."""
    return [s.lstrip('?') for s in sentences
            if not s.startswith('?') or rng.random() < 0.8]


def animal(rng, world):
    name = f'{rng.choice(COLORS)} {world.new_name().lower()}'
    kind = rng.choice(sorted(ANIMAL_KINDS))
    covering, body, moves, diets, habitats, unit = ANIMAL_KINDS[kind]
    habitat, diet = rng.choice(habitats), rng.choice(diets)
    country, person = rng.choice(world.countries), rng.choice(world.people)
    status = rng.choice(sorted(STATUS))
    title = name.title()
    intro = script(rng, [
        f'The {name} is a species of {kind} that lives in the {habitat} of '
        f'{country} .',
        f'The {name} has {covering} and {body} .',
        f'?The {name} {moves} slowly and feeds mainly on {diet} .',
        f'?An adult {name} grows to {rng.randint(2, 60)} {unit} .',
        f'The {name} was first described by {person} in '
        f'{rng.randint(1750, 1900)} .',
        f'The {name} is listed as {status} because '
        + STATUS[status].format(covering.split()[-1]) + ' .',
    ])
    young = YOUNG[kind].format(rng.randint(2, 9), rng.choice(NEST))
    behaviour = script(rng, [
        f'In {rng.choice(SEASONS)} , the {name} gathers in large groups in '
        f'the {habitat} .',
        f'The female {name} {young} .',
        f'?The young of the {name} stay with their mother for '
        f'{rng.randint(2, 12)} weeks .',
        f'The enemies of the {name} are the '
        f'{rng.choice(world.animals or [name])} and the hunters of {country} .',
        f'?In {world.language(country)} folklore , the {name} is a sign of '
        f'{rng.choice(["luck", "rain", "danger", "wisdom"])} .',
    ])
    world.animals.append(name)
    return title, [('', intro), ('Behaviour', behaviour)]


def city(rng, world):
    name, country = world.new_name(), rng.choice(world.countries)
    landscape = rng.choice(sorted(INDUSTRIES))
    first, second = rng.sample(INDUSTRIES[landscape], 2)
    landmark, river = rng.choice(LANDMARKS), rng.choice(world.rivers)
    founded = rng.randint(900, 1500)
    intro = script(rng, [
        f'{name} is the {rng.choice(ORDINALS)} largest city of {country} .',
        f'{name} lies on the {river} river , near the {landscape} of the '
        f'{COUNTRIES[country][1]} .',
        f'?{name} was founded in {founded} by {world.language(country)} '
        f'settlers .',
        f'The economy of {name} is based on {first} and {second} .',
        f'?Most people in {name} speak {world.language(country)} .',
        f'The city of {name} is known for its old {landmark} .',
    ])
    history = script(rng, [
        f'In {founded + rng.randint(50, 300)} , {name} was captured by the '
        f'army of {rng.choice(world.countries)} .',
        f'The {landmark} of {name} was destroyed by a '
        f'{rng.choice(DISASTERS)} in {founded + rng.randint(310, 500)} .',
        f'?{name} was rebuilt by the architect '
        f'{rng.choice(world.people)} .',
        f'Today {name} is a centre of {first} in {country} .',
    ])
    world.cities.append(name)
    return name, [('', intro), ('History', history)]


def river(rng, world):
    name, country = world.new_name(), rng.choice(world.countries)
    length = rng.randint(40, 900)
    sea = rng.choice(SEAS)
    intro = script(rng, [
        f'The {name} is a river of {country} , {length} kilometres long .',
        f'The {name} rises in the '
        f'{rng.choice(world.mountains or ["northern"])} mountains and flows into the {sea} .',
        f'?The {name} passes through {rng.choice(world.cities or [country])} '
        f'and {rng.randint(2, 9)} smaller towns .',
        f'The water of the {name} is used for '
        f'{rng.choice(["farming", "drinking", "mills"])} and transport .',
    ])
    nature = script(rng, [
        f'The {name} is home to the {rng.choice(world.animals or ["salmon"])} '
        f'.',
        f'?In {rng.choice(SEASONS)} the {name} often floods the valley .',
        f'The first bridge over the {name} was built in '
        f'{rng.randint(1100, 1800)} .',
        f'?The {name} gave its name to the {world.language(country)} '
        f'province of {name} .',
    ])
    world.rivers.append(name)
    return f'{name} River', [('', intro), ('Nature', nature)]


def person(rng, world):
    first_name, last_name = world.new_name(), world.new_name()
    name, occupation = f'{first_name} {last_name}', rng.choice(
        sorted(OCCUPATIONS))
    verb, works, workplace, subject = OCCUPATIONS[occupation]
    country = rng.choice(world.countries)
    born = rng.randint(1700, 1900)
    birthplace = rng.choice(world.cities or [country])
    intro = script(rng, [
        f'{name} ( born {born} ) was a {world.language(country)} '
        f'{occupation} .',
        f'{last_name} was born in {birthplace} and studied {subject} in '
        f'{rng.choice(world.cities or [country])} .',
        f'?{last_name} {verb} more than {rng.randint(10, 90)} {works} .',
        f'{last_name} died in {born + rng.randint(30, 80)} .',
    ])
    career = script(rng, [
        f'In {born + rng.randint(20, 29)} , {last_name} opened a {workplace} '
        f'in {birthplace} .',
        f'?There {last_name} {verb} the {works} that made the {occupation} '
        f'famous .',
        f'{last_name} received the {country} prize for {subject} in '
        f'{born + 30} .',
        f'?Many {works} by {last_name} are kept in {birthplace} today .',
    ])
    world.people.append(last_name)
    return name, [('', intro), ('Career', career)]


def mountain(rng, world):
    name, country = world.new_name(), rng.choice(world.countries)
    rock = rng.choice(ROCKS)
    height = rng.randint(900, 4800)
    intro = script(rng, [
        f'Mount {name} is a mountain in the {COUNTRIES[country][1]} of '
        f'{country} .',
        f'Mount {name} is {height} metres high and made of {rock} .',
        f'?The slopes of Mount {name} are covered with {rng.choice(NEST)} '
        f'and snow .',
        f'The first climber to reach the top of Mount {name} was '
        f'{rng.choice(world.people)} '
        f'in {rng.randint(1780, 1950)} .',
    ])
    geology = script(rng, [
        f'The {rock} of Mount {name} formed millions of years ago .',
        f'?Mines on Mount {name} produced '
        f'{rng.choice(["iron", "silver", "copper", "salt"])} for '
        f'{rng.choice(world.cities or [country])} .',
        f'Today Mount {name} is a protected area of {country} .',
    ])
    world.mountains.append(name)
    return f'Mount {name}', [('', intro), ('Geology', geology)]


class World:
    """Everything generated so far, so later articles can refer to it."""

    def __init__(self, rng):
        self.rng, self.used_names = rng, set()
        self.countries = sorted(COUNTRIES)
        self.animals, self.cities, self.rivers = [], [], []
        self.mountains = []
        self.people = [self.new_name() for _ in range(12)]
        self.rivers = [self.new_name() for _ in range(6)]

    def new_name(self):
        return make_name(self.rng, self.used_names)

    @staticmethod
    def language(country):
        return COUNTRIES[country][0]


def wikitext_article(title, sections):
    """Lines in WikiText layout: `` = Title = ``, blank lines, paragraphs."""
    lines = [f' = {title} = ', ' ']
    for heading, sentences in sections:
        if heading:
            lines += [f' = = {heading} = = ', ' ']
        lines += [' ' + ' '.join(sentences) + ' ', ' ']
    return lines


def generate_corpus(seed=SEED, num_articles=None):
    """``{split: text}`` of the whole corpus, a pure function of ``seed``."""
    rng = random.Random(seed)
    world = World(rng)
    topics = [animal, city, river, person, mountain]
    texts = {}
    for split, count in (num_articles or NUM_ARTICLES).items():
        lines = [' ']
        for index in range(count):
            lines += wikitext_article(*topics[index % len(topics)](rng, world))
        texts[split] = '\n'.join(lines) + '\n'
    return texts


def main(directory):
    """Write ``wiki.{train,valid,test}.tokens`` into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    for split, text in generate_corpus().items():
        with open(os.path.join(directory, f'wiki.{split}.tokens'), 'w',
                  encoding='utf-8', newline='\n') as f:
            f.write(text)


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: python -m d2lbert.data.make_bundled_corpus OUTPUT_DIRECTORY')
    main(sys.argv[1])
