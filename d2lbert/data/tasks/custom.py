"""Your own data: a CSV, TSV, JSON lines or JSON file with named columns.

Columns (or JSON keys): ``text``; optionally ``text_pair`` (a second text,
for pair tasks; missing or empty means none) and ``label``::

    text,text_pair,label                     {"text": "Great!", "label": "pos"}
    A man sleeps.,A person rests.,entailment {"text": "Awful.", "label": "neg"}

``label`` is a class name, or a number for regression: say which with
``label_type``. Guessing from the values would be unreliable, since class
names are often digits ('0', '1') and scores are sometimes whole numbers.
A file without a ``label`` column (a test set) gives labels None.

CSV files use the usual CSV quoting (``"a, b"`` is one field); TSV files,
like GLUE's, have no quoting (see :mod:`.tables`). A ``.json`` file is JSON lines
or one JSON array of records, as Hugging Face's ``run_mlm`` reads it.
"""
import csv
import os

from .examples import TaskData, TaskExample, check_label, parse_score
from .tables import (delimited_rows, field, json_records, jsonl_records, line_error,
                     records)

LABEL_TYPES = ('class', 'number')


def read_task_file(path, label_type='class', labels=None, file_format=None):
    """Read your own task file into a :class:`TaskData`.

    Args:
        path: a ``.csv``, ``.tsv``, ``.jsonl`` or ``.json`` file (see the module doc).
        label_type: 'class' (labels are class names, strings: a JSON number
            1 becomes '1') or 'number' (float regression targets).
        labels: the task's class names in id order; by default the sorted
            names found in this file. Pass the training file's labels when
            reading its dev or test file, so that the ids agree.
        file_format: csv, tsv, jsonl or json (a key of :data:`FILE_FORMATS`
            without its dot); by default from the extension.
    Raises:
        ValueError: naming the file and line of a missing ``text`` column, a
            label outside ``labels``, a score that is not a number, or a
            row without a label in a file whose other rows have one.
    """
    if label_type not in LABEL_TYPES:
        raise ValueError(f'label_type must be one of {LABEL_TYPES}, '
                         f'got {label_type!r}')
    numbered = [(line_number, task_example(record, label_type, path,
                                           line_number))
                for line_number, record in file_records(path, file_format)]
    check_all_or_none_labelled(numbered, path)
    examples = [example for _, example in numbered]
    if label_type == 'number':
        return TaskData(examples, None)
    if labels is None:
        labels = sorted({e.label for e in examples if e.label is not None})
    for line_number, example in numbered:
        if example.label is not None:
            check_label(example.label, labels, path, line_number)
    return TaskData(examples, tuple(labels))


def file_records(path, file_format=None):
    """``(line number, record)`` of a CSV, TSV or JSON lines file."""
    if file_format is not None:
        if '.' + file_format not in FILE_FORMATS:
            raise ValueError(f'unknown file_format {file_format!r}')
        return FILE_FORMATS['.' + file_format](path)
    extension = os.path.splitext(path)[1].lower()
    if extension not in FILE_FORMATS:
        raise ValueError(f'cannot tell the format of {path} from its '
                         f'extension: it must be one of '
                         f'{", ".join(sorted(FILE_FORMATS))}')
    return FILE_FORMATS[extension](path)


def csv_records(path):
    return records(path, delimited_rows(path, ',', csv.QUOTE_MINIMAL))


def tsv_records(path):
    return records(path, delimited_rows(path))


# the readers of the file formats, by extension
FILE_FORMATS = {'.csv': csv_records, '.tsv': tsv_records, '.jsonl': jsonl_records,
                '.json': json_records}


def task_example(record, label_type, path, line_number):
    """The :class:`TaskExample` of one record; empty labels become None."""
    label = record.get('label')
    if label in ('', None):
        label = None
    elif label_type == 'number':
        label = parse_score(label, path, line_number)
    else:
        label = str(label)
    text, text_pair = field(record, 'text', path, line_number), record.get('text_pair')
    for name, value in (('text', text), ('text_pair', text_pair)):
        if value is not None and not isinstance(value, str):
            raise line_error(path, line_number, f'{name} must be a string, got {value!r}')
    return TaskExample(text, text_pair or None, label)


def check_all_or_none_labelled(numbered_examples, path):
    """Refuse a file in which some rows have a label and others not."""
    labelled = [e.label is not None for _, e in numbered_examples]
    if any(labelled) and not all(labelled):
        line_number = numbered_examples[labelled.index(False)][0]
        raise line_error(path, line_number,
                         'no label, but other rows of this file have one')
