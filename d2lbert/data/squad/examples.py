"""Reading SQuAD files: questions about passages, with the answers' text and place.

A SQuAD file (1.1 or 2.0, the same JSON layout) holds articles, each with
paragraphs, each a passage (``context``) and its questions (``qas``)::

    {"version": "v2.0",
     "data": [{"title": "...",
               "paragraphs": [{"context": "The passage ...",
                               "qas": [{"id": "...", "question": "...",
                                        "answers": [{"text": "...", "answer_start": 4}],
                                        "is_impossible": false}]}]}]}

``answer_start`` is the character offset of the answer in the passage. SQuAD 2.0
adds ``is_impossible`` questions: their ``answers`` are empty (the training file
lists ``plausible_answers`` instead, which a model must *not* give). Evaluation
files may give several answers per question (one per annotator); training uses
the first.

Some real answers' ``answer_start`` does not point at their text; as the
reference scripts (Google's BERT, Hugging Face) do, they are counted and
reported, and training skips their questions (:meth:`SquadData.training_examples`);
evaluation still compares predictions with their text.
"""
import json
import logging
from typing import List, NamedTuple, Optional

logger = logging.getLogger('d2lbert')


class SquadFormatError(ValueError):
    """A file that is not a valid SQuAD file; the message names the file and place."""


class Answer(NamedTuple):
    """An answer's text and the character offset where it starts in the passage."""
    text: str
    start: int

    @property
    def end(self):
        """The offset just past the answer's last character."""
        return self.start + len(self.text)


class SquadExample(NamedTuple):
    """One question about one passage.

    qas_id: the question's id; question, context: str (context the passage).
    answers: a tuple of :class:`Answer` (empty for an unanswerable question, or when
        the file gives none, as for a question to answer).
    is_impossible: SQuAD 2.0's flag: the passage does not answer the question.
    """
    qas_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False

    def answer_matches(self, answer):
        """Do the passage's characters at the answer's offset read its text?"""
        return self.context[answer.start:answer.end] == answer.text


class SquadData(NamedTuple):
    """A SQuAD file's questions, in file order.

    examples: a list of :class:`SquadExample`.
    version: the file's ``version`` field ('1.1', 'v2.0', ...) or None.
    mismatched: a list of (qas_id, Answer): the answers whose ``answer_start`` does
        not point at their text.
    source: the file's path (for messages).
    """
    examples: List[SquadExample]
    version: Optional[str]
    mismatched: list
    source: str

    @property
    def has_unanswerable(self):
        return any(example.is_impossible for example in self.examples)

    def training_examples(self):
        """The examples to train on: the unanswerable ones, and the answerable ones
        whose first answer (the training target) is where answer_start says (and
        not just blanks)."""
        return [e for e in self.examples if e.is_impossible or (
            e.answers and e.answer_matches(e.answers[0]) and e.answers[0].text.strip())]

    def summary(self):
        """One line for the log: how many questions, unanswerable, mismatched."""
        unanswerable = sum(e.is_impossible for e in self.examples)
        line = f'{self.source}: {len(self.examples)} questions, {unanswerable} unanswerable'
        if self.mismatched:
            qas_id, answer = self.mismatched[0]
            line += (f'; {len(self.mismatched)} answer(s) whose answer_start does not '
                     f'point at their text (first: question {qas_id!r}, {answer.text!r} '
                     f'at {answer.start}), training skips their questions')
        return line


def read_squad(path):
    """Read a SQuAD 1.1 or 2.0 JSON file into a :class:`SquadData`.

    Logs (logger 'd2lbert') a warning counting the answers whose answer_start does
    not point at their text.
    Raises:
        SquadFormatError: not JSON, not SQuAD's layout (naming the first bad place,
            e.g. ``data[3].paragraphs[0].qas[2]: no 'question'``), an empty passage or
            question, an answerable question without answers where answers are
            given, no question at all, or two questions with the same id.
    """
    try:
        with open(path, encoding='utf-8') as f:
            document = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SquadFormatError(f'{path} is not a SQuAD file (not JSON: {error})') from None
    if not isinstance(document, dict) or not isinstance(document.get('data'), list):
        raise SquadFormatError(f'{path} is not a SQuAD file: it has no "data" list of '
                               f'articles at the top (SQuAD JSON: {{"version": ..., '
                               f'"data": [{{"title": ..., "paragraphs": [...]}}]}})')
    examples = []
    for a, article in enumerate(document['data']):
        for p, paragraph in enumerate(field(article, 'paragraphs', list, path, f'data[{a}]')):
            place = f'data[{a}].paragraphs[{p}]'
            context = field(paragraph, 'context', str, path, place)
            if not context.strip():
                raise SquadFormatError(f'{path}: {place} has an empty passage ("context")')
            for q, qa in enumerate(field(paragraph, 'qas', list, path, place)):
                examples.append(read_question(qa, context, path, f'{place}.qas[{q}]'))
    if not examples:
        raise SquadFormatError(f'{path} holds no question')
    seen = set()
    for example in examples:
        if example.qas_id in seen:
            raise SquadFormatError(f'{path}: the question id {example.qas_id!r} appears '
                                   'twice (each answer is looked up by its id)')
        seen.add(example.qas_id)
    mismatched = [(e.qas_id, answer) for e in examples for answer in e.answers
                  if not e.answer_matches(answer)]
    data = SquadData(examples, document.get('version'), mismatched, str(path))
    if mismatched:
        logger.warning('%s', data.summary())
    return data


def read_question(qa, context, path, place):
    """The :class:`SquadExample` of one entry of a paragraph's ``qas``."""
    qas_id = str(field(qa, 'id', (str, int), path, place))
    question = field(qa, 'question', str, path, place)
    if not question.strip():
        raise SquadFormatError(f'{path}: {place} (id {qas_id!r}) has an empty question')
    is_impossible = bool(qa.get('is_impossible', False))
    answers = []
    for i, answer in enumerate(qa.get('answers', [])):
        text = field(answer, 'text', str, path, f'{place}.answers[{i}]')
        start = field(answer, 'answer_start', int, path, f'{place}.answers[{i}]')
        answers.append(Answer(text, start))
    if 'answers' in qa and not answers and not is_impossible:
        raise SquadFormatError(f'{path}: {place} (id {qas_id!r}) has no answer and is not '
                               f'marked "is_impossible": true')
    return SquadExample(qas_id, question, context, tuple(answers), is_impossible)


def field(entry, name, kind, path, place):
    """entry[name], checked to be of `kind`, or a SquadFormatError naming the place."""
    if not isinstance(entry, dict) or name not in entry:
        raise SquadFormatError(f'{path} is not a SQuAD file: {place} has no {name!r}')
    value = entry[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = kind.__name__ if isinstance(kind, type) else ' or '.join(
            k.__name__ for k in kind)
        raise SquadFormatError(f'{path}: {place}.{name} should be a {expected}, '
                               f'not {type(value).__name__}')
    return value
