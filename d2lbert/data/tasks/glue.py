"""The GLUE tasks, each in its own TSV layout.

GLUE (gluebenchmark.com) ships every task as ``train.tsv``, ``dev.tsv`` and
``test.tsv`` (MNLI: ``dev_matched.tsv``, ``dev_mismatched.tsv``,
``test_matched.tsv``, ``test_mismatched.tsv``). All files but CoLA's train
and dev sets start with a header row; the columns used here are::

    task  text column  pair column  label column  labels
    cola  sentence     -            label         0 1 (1: acceptable)
    sst2  sentence     -            label         0 1 (1: positive)
    mrpc  #1 String    #2 String    Quality       0 1 (1: paraphrase)
    stsb  sentence1    sentence2    score         a float in [0, 5]
    qqp   question1    question2    is_duplicate  0 1 (1: duplicate)
    mnli  sentence1    sentence2    gold_label    entailment contradiction
                                                  neutral
    qnli  question     sentence     label         entailment not_entailment
    rte   sentence1    sentence2    label         entailment not_entailment
    wnli  sentence1    sentence2    label         0 1

CoLA's train and dev files have no header; their four columns are the
sentence's source, the label, the original acceptability mark and the
sentence. The test files have no label column: their examples get label None.
Files are read with quoting off, see :mod:`.tables`.
"""
import dataclasses
from typing import Optional, Tuple

from .examples import TaskData, TaskExample, check_label, parse_score
from .tables import delimited_rows, field, first_row, records

NLI_LABELS = ('entailment', 'contradiction', 'neutral')  # as SNLI's
BINARY_LABELS = ('0', '1')


@dataclasses.dataclass(frozen=True)
class GlueLayout:
    """Where a GLUE task keeps its texts and labels (see the module doc)."""
    text: str
    text_pair: Optional[str]
    label: str
    labels: Optional[Tuple[str, ...]]  # None: a float score (regression)
    columns_without_header: Optional[Tuple[str, ...]] = None
    splits: Tuple[str, ...] = ('train', 'dev', 'test')
    archive: Optional[str] = None  # the zip GLUE's site serves; None: none (MRPC)


GLUE_LAYOUTS = {
    'cola': GlueLayout('sentence', None, 'label', BINARY_LABELS,
                       ('source', 'label', 'original_label', 'sentence'),
                       archive='CoLA.zip'),
    'sst2': GlueLayout('sentence', None, 'label', BINARY_LABELS, archive='SST-2.zip'),
    'mrpc': GlueLayout('#1 String', '#2 String', 'Quality', BINARY_LABELS),
    'stsb': GlueLayout('sentence1', 'sentence2', 'score', None, archive='STS-B.zip'),
    'qqp': GlueLayout('question1', 'question2', 'is_duplicate', BINARY_LABELS,
                      archive='QQP-clean.zip'),
    'mnli': GlueLayout('sentence1', 'sentence2', 'gold_label', NLI_LABELS,
                       splits=('train', 'dev_matched', 'dev_mismatched',
                               'test_matched', 'test_mismatched'),
                       archive='MNLI.zip'),
    'qnli': GlueLayout('question', 'sentence', 'label',
                       ('entailment', 'not_entailment'), archive='QNLIv2.zip'),
    'rte': GlueLayout('sentence1', 'sentence2', 'label',
                      ('entailment', 'not_entailment'), archive='RTE.zip'),
    'wnli': GlueLayout('sentence1', 'sentence2', 'label', BINARY_LABELS,
                       archive='WNLI.zip'),
}


def glue_layout(task):
    if task not in GLUE_LAYOUTS:
        raise ValueError(f'unknown GLUE task {task!r}; choose one of '
                         f'{sorted(GLUE_LAYOUTS)}')
    return GLUE_LAYOUTS[task]


def glue_file_name(task, split):
    """'train' -> 'train.tsv'; MNLI's 'dev_matched' -> 'dev_matched.tsv'."""
    splits = glue_layout(task).splits
    if split not in splits:
        raise ValueError(f'GLUE {task} has the splits {splits}, not {split!r}')
    return f'{split}.tsv'


def read_glue(task, path):
    """Read one GLUE file of ``task`` (a key of :data:`GLUE_LAYOUTS`) into a :class:`TaskData`.

    Labels are class names (e.g. '1', 'entailment'), an STS-B score a float,
    and None in test files (which have no label column).
    Raises:
        ValueError: naming the file and line of a row in the wrong layout or
            a label outside the task's labels.
    """
    layout = glue_layout(task)
    first, rows = first_row(delimited_rows(path))
    if first is None:
        raise ValueError(f'{path} is empty')
    if layout.text in first[1] or layout.columns_without_header is None:
        rows = records(path, rows)
    else:
        rows = records(path, rows, layout.columns_without_header)
    examples = [glue_example(layout, record, path, line_number)
                for line_number, record in rows]
    return TaskData(examples, layout.labels)


def glue_example(layout, record, path, line_number):
    """The :class:`TaskExample` of one record (a row as a dict)."""
    text = field(record, layout.text, path, line_number)
    text_pair = (field(record, layout.text_pair, path, line_number)
                 if layout.text_pair else None)
    label = record.get(layout.label)
    if label is not None and layout.labels is None:
        label = parse_score(label, path, line_number)
    elif label is not None:
        check_label(label, layout.labels, path, line_number)
    return TaskExample(text, text_pair, label)

