"""A small SQuAD 2.0-style task made from d2lbert's bundled corpus, for offline demos
and tests of question answering (no download, no shared data).

Each article of the corpus becomes a passage. Its sentences that state a fact in a
known form ("X died in 1867 .", "Most people in X speak Y .") give questions whose
answer is a span of the passage ("When did X die?" -> "1867"). The same questions
about *another* article's subject, asked of this passage, are unanswerable: the
passage is about someone or somewhere else (SQuAD 2.0's "plausible" questions, whose
answer type is in the passage but not their answer). A model must so read the
subject, not only the kind of answer: the first sentence or the all-null answer score
poorly (:func:`baseline_predictions`).

The train split comes from the corpus's training articles, 'dev' from its validation
articles; the output is a dict in SQuAD's JSON layout (:func:`write_squad_json`
writes it), a pure function of (split, seed).
"""
import json
import random
import re

from ..tasks.generated import read_articles

# (sentence pattern, question): the pattern's group 'subject' names what the sentence
# is about, group 'answer' is the answer; sentences are space-separated tokens.
QUESTION_FORMS = [
    (r'^The (?P<subject>\w+ \w+) was first described by (?P<answer>\w+) in \d+ \.$',
     'Who first described the {}?'),
    (r'^The (?P<subject>\w+ \w+) was first described by \w+ in (?P<answer>\d+) \.$',
     'When was the {} first described?'),
    (r'^An adult (?P<subject>\w+ \w+) grows to (?P<answer>\d+ \w+) \.$',
     'How big does an adult {} grow?'),
    (r'^Most people in (?P<subject>\w+) speak (?P<answer>\w+) \.$',
     'What language do people in {} speak?'),
    (r'^(?P<subject>\w+) was rebuilt by the architect (?P<answer>\w+) \.$',
     'Who rebuilt {}?'),
    (r'^The (?P<subject>\w+) is a river of \w+ , (?P<answer>\d+ kilometres) long \.$',
     'How long is the {}?'),
    (r'^(?P<subject>Mount \w+) is (?P<answer>\d+ metres) high',
     'How high is {}?'),
    (r'^The first climber to reach the top of (?P<subject>Mount \w+) was (?P<answer>\w+)',
     'Who first climbed {}?'),
    (r'^(?P<subject>\w+) died in (?P<answer>\d+) \.$', 'When did {} die?'),
    (r'^(?P<subject>\w+) was born in (?P<answer>\w+) ', 'Where was {} born?'),
]


def passage_questions(sentences):
    """The passage (the sentences joined by spaces) and its answerable questions: a
    list of (form index, subject, question, answer text, answer start)."""
    context, questions = '', []
    for tokens in sentences:
        sentence = ' '.join(tokens)
        offset = len(context) + (1 if context else 0)
        context = f'{context} {sentence}' if context else sentence
        for form, (pattern, question) in enumerate(QUESTION_FORMS):
            match = re.match(pattern, sentence)
            if match:
                questions.append((form, match['subject'], question.format(match['subject']),
                                  match['answer'], offset + match.start('answer')))
    return context, questions


def bundled_squad_task(split='train', unanswerable=0.5, seed=0):
    """A SQuAD 2.0 dict: one article per corpus article, its answerable questions and
    about `unanswerable` as many unanswerable ones (per answerable question, with that
    probability, the same form asked about another article's subject).

    Question ids are f'{split}-{article}-{k}'.
    """
    rng = random.Random(seed)
    titles, passages = [], []
    for title, sentences in read_articles(split):
        titles.append(title)
        passages.append(passage_questions(sentences))
    subjects_by_form = {}
    for _, questions in passages:
        for form, subject, *_ in questions:
            subjects_by_form.setdefault(form, []).append(subject)
    articles = []
    for a, (title, (context, questions)) in enumerate(zip(titles, passages)):
        qas = []
        for form, subject, question, answer, start in questions:
            qas.append({'id': f'{split}-{a}-{len(qas)}', 'question': question,
                        'answers': [{'text': answer, 'answer_start': start}],
                        'is_impossible': False})
            others = [s for s in subjects_by_form[form] if s not in context]
            if others and rng.random() < unanswerable:
                other = rng.choice(others)
                qas.append({'id': f'{split}-{a}-{len(qas)}',
                            'question': QUESTION_FORMS[form][1].format(other),
                            'answers': [], 'is_impossible': True})
        if qas:
            articles.append({'title': title, 'paragraphs': [{'context': context,
                                                             'qas': qas}]})
    return {'version': 'v2.0', 'data': articles}


def baseline_predictions(squad):
    """The two baselines a QA model must beat, as {id: answer} dicts: 'null' answers
    nothing, 'first_sentence' answers every question with its passage's first sentence."""
    null, first_sentence = {}, {}
    for article in squad['data']:
        for paragraph in article['paragraphs']:
            first = paragraph['context'].split(' . ')[0] + ' .'
            for qa in paragraph['qas']:
                null[qa['id']] = ''
                first_sentence[qa['id']] = first
    return {'null': null, 'first_sentence': first_sentence}


def write_squad_json(squad, path):
    """Write a SQuAD dict as a JSON file (UTF-8)."""
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(squad, f, ensure_ascii=False)
