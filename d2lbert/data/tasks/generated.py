"""Two small labelled tasks made from d2lbert's bundled corpus, for offline demos and
tests of fine-tuning (no download, no shared data).

* :func:`next_sentence_task`: sentence pairs labelled 'next' when the second sentence
  follows the first in its article, 'other' when it comes from another article: the
  book's next-sentence pairs, from held-out articles for 'dev'.
* :func:`entity_task`: sentences with a tag per word, CoNLL-style IOB2 tags of places
  ('LOC': countries, cities, rivers, mountains, seas), people ('PER') and languages
  ('MISC'). The invented names are rare words (``<unk>`` in the vocabulary of a
  model pretrained on the training articles), so the type must come from the
  context: "born in X", "X River". A sentence naming something of unknown type (a person without an article) is left
  out, so that every name in the task is tagged.

The pair task's 'train' split comes from the corpus's training articles, 'dev' from
its validation articles; the tagging task uses validation and test articles (see
:func:`entity_task`).
"""
import os
import random

from ..bundled import bundled_corpus_directory
from ..corpus import is_wikitext_heading
from ..make_bundled_corpus import COLORS, COUNTRIES, SEAS
from .examples import TaggedSentence, TaskData, TaskExample

SPLIT_FILES = {'train': 'wiki.train.tokens', 'dev': 'wiki.valid.tokens',
               'test': 'wiki.test.tokens'}
NEXT_LABELS = ('other', 'next')
ENTITY_TAGS = ('O', 'B-PER', 'I-PER', 'B-LOC', 'I-LOC', 'B-MISC', 'I-MISC')


def read_articles(split):
    """[(title, [sentence, ...]), ...] of the bundled corpus's split ('train', 'dev' (its
    validation articles) or 'test');
    a sentence is a list of tokens, its final '.' included."""
    if split not in SPLIT_FILES:
        raise ValueError(f'split must be one of {tuple(SPLIT_FILES)}, got {split!r}')
    path = os.path.join(bundled_corpus_directory(), SPLIT_FILES[split])
    articles = []
    with open(path, encoding='utf-8') as f:
        for line in f:
            line = line.strip()
            if line.startswith('= ') and not line.startswith('= ='):
                articles.append((line.strip('= '), []))
            elif line and not is_wikitext_heading(line):
                articles[-1][1].extend(split_sentences(line.split()))
    return articles


def split_sentences(tokens):
    sentences, current = [], []
    for token in tokens:
        current.append(token)
        if token == '.':
            sentences.append(current)
            current = []
    return sentences + ([current] if current else [])


def next_sentence_task(split='train', num_pairs=2000, seed=0):
    """A `TaskData` of `num_pairs` sentence pairs, half 'next' (the second sentence
    follows the first in its article), half 'other' (the second comes from another
    article), as the book builds next-sentence pairs; drawn from held-out articles for
    'dev'."""
    rng = random.Random(seed)
    articles = [sentences for _, sentences in read_articles(split) if len(sentences) > 1]
    examples = []
    for i in range(num_pairs):
        first = rng.randrange(len(articles))
        a = rng.randrange(len(articles[first]) - 1)
        label = NEXT_LABELS[i % 2]
        if label == 'next':
            second = articles[first][a + 1]
        else:
            other = rng.choice([j for j in range(len(articles)) if j != first])
            second = rng.choice(articles[other])
        examples.append(TaskExample(' '.join(articles[first][a]), ' '.join(second), label))
    return TaskData(examples, NEXT_LABELS)


def entity_types(articles):
    """{name as a tuple of tokens: type}: the corpus's countries, languages and seas,
    and every article's subject except animals (its type from the title's form)."""
    types = {(country,): 'LOC' for country in COUNTRIES}
    types.update({(language,): 'MISC' for language, _ in COUNTRIES.values()})
    types.update({tuple(sea.split()): 'LOC' for sea in SEAS})
    for title, _ in articles:
        words = title.split()
        if words[-1] == 'River':
            types[tuple(words[:-1])] = 'LOC'
        elif words[0] == 'Mount':
            types[tuple(words)] = 'LOC'
        elif len(words) == 2 and words[0].lower() not in COLORS:
            types[tuple(words)] = types[(words[1],)] = 'PER'  # full and last name
        elif len(words) == 1:
            types[tuple(words)] = 'LOC'  # a city
    return types


def tag_sentence(tokens, types, longest):
    """IOB2 tags of the tokens (longest match first), or None if the sentence has a
    capitalized word that is neither a known name nor an ordinary word."""
    tags, i = [], 0
    while i < len(tokens):
        for length in range(min(longest, len(tokens) - i), 0, -1):
            kind = types.get(tuple(tokens[i:i + length]))
            if kind:
                tags += [f'B-{kind}'] + [f'I-{kind}'] * (length - 1)
                i += length
                break
        else:
            if tokens[i][:1].isupper() and not (i == 0 and tokens[i] in SENTENCE_STARTS):
                return None
            tags.append('O')
            i += 1
    return tags


SENTENCE_STARTS = {'The', 'In', 'An', 'A', 'Many', 'Most', 'Today', 'There', 'Its'}


TAGGING_ARTICLES = {'train': 'dev', 'dev': 'test'}


def entity_task(split='train', max_sentences=None, seed=0):
    """A `TaskData` of tagged sentences (see the module doc), shuffled with seed.

    Its 'train' sentences come from the corpus's validation articles and its 'dev'
    sentences from the test articles (625 and 631 sentences): the names there are
    rare words that a vocabulary built from the training articles doesn't know, so a
    tagger must learn the contexts that make a word a name, not the names themselves
    (the training articles' names are in that vocabulary).
    """
    if split not in TAGGING_ARTICLES:
        raise ValueError(f'split must be one of {tuple(TAGGING_ARTICLES)}, got {split!r}')
    articles = read_articles(TAGGING_ARTICLES[split])
    types = entity_types([article for name in SPLIT_FILES for article in read_articles(name)])
    longest = max(len(name) for name in types)
    examples = []
    for _, sentences in articles:
        for tokens in sentences:
            tags = tag_sentence(tokens, types, longest)
            if tags is not None:
                examples.append(TaggedSentence(tokens, tags))
    random.Random(seed).shuffle(examples)
    return TaskData(examples[:max_sentences], ENTITY_TAGS)


def write_conll(task_data, path):
    """Write tagged sentences as a CoNLL-2003 file (word, two placeholder columns, tag)."""
    with open(path, 'w', encoding='utf-8') as f:
        f.write('-DOCSTART- -X- -X- O\n\n')
        for sentence in task_data.examples:
            f.writelines(f'{word} - - {tag}\n' for word, tag in zip(sentence.words,
                                                                    sentence.tags))
            f.write('\n')
