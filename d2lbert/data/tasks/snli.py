"""SNLI: does a premise entail, contradict or say nothing about a hypothesis?

The Stanford Natural Language Inference corpus (``snli_1.0.zip``) holds each
split twice, in two layouts that :func:`read_snli` both reads:

* ``snli_1.0_{train,dev,test}.jsonl``: one JSON object per line with the
  fields ``gold_label``, ``sentence1`` (premise), ``sentence2`` (hypothesis)
  and others (parses, annotator labels, ids);
* ``snli_1.0_{train,dev,test}.txt``: tab-separated, a header row naming the
  same columns (among others).

``gold_label`` is the majority of the annotators' labels, or ``-`` when there
was no majority; those pairs are dropped (and counted), as in the book.
Unlike the book, which rebuilds the sentences from their binary parses, the
raw ``sentence1`` / ``sentence2`` texts are kept, since a WordPiece tokenizer
wants raw text.
"""
import os

from .examples import TaskData, TaskExample, check_label
from .tables import delimited_rows, field, jsonl_records, records

SNLI_LABELS = ('entailment', 'contradiction', 'neutral')
NO_MAJORITY = '-'
SNLI_SPLITS = ('train', 'dev', 'test')


def snli_file_name(split):
    """'train' -> 'snli_1.0_train.jsonl' (splits: train, dev, test)."""
    if split not in SNLI_SPLITS:
        raise ValueError(f'SNLI has the splits {SNLI_SPLITS}, not {split!r}')
    return f'snli_1.0_{split}.jsonl'


def snli_file_names(split):
    """The names the file of ``split`` may have: the ``.jsonl`` or ``.txt`` layout."""
    return snli_file_name(split), snli_file_name(split).replace('.jsonl', '.txt')


def read_snli(path):
    """Read an SNLI split (``.jsonl``, or the ``.txt`` layout) into a
    :class:`TaskData` of premise/hypothesis :class:`TaskExample` s.

    ``num_dropped`` counts the pairs labelled ``-`` (no majority).
    Raises:
        ValueError: naming the file and line of a missing column or a label
            that is neither an SNLI label nor ``-``.
    """
    if os.path.splitext(path)[1] == '.jsonl':
        rows = jsonl_records(path)
    else:
        rows = records(path, delimited_rows(path))
    examples, num_dropped = [], 0
    for line_number, record in rows:
        label = field(record, 'gold_label', path, line_number)
        if label == NO_MAJORITY:
            num_dropped += 1
            continue
        check_label(label, SNLI_LABELS, path, line_number)
        examples.append(TaskExample(
            field(record, 'sentence1', path, line_number),
            field(record, 'sentence2', path, line_number), label))
    return TaskData(examples, SNLI_LABELS, num_dropped)
