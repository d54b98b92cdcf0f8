"""What ``pretrain --data`` and ``--valid`` name: a text file and how it is read.

A file is read as *documents*, each a list of *texts*:

* a plain text file, in one of the layouts of :mod:`.corpus` (WikiText, a
  paragraph per line, Google BERT's sentence per line with blank lines
  between documents, or ``--line-by-line``: each line one text);
* a table (``.tsv``, ``.csv``, ``.jsonl``, ``.json``, read by :mod:`.tasks.custom`): each
  row's ``text_column`` (``--text-column``, default ``text``) is one text and
  a document of its own; blank values are skipped.

``encode --data`` reads a file otherwise (:func:`texts_by_row`): every line, or every
row's value, is a text, a blank one too, so that its vector i is that of line (row) i.

Without ``--valid``, the last 5% of a file's documents (at least one) are held
out (:func:`split_held_out`): a tail, not a random sample, so that the text
held out is a different stretch of the file. A file of related rows still
leaks: SST-2's 67k training rows are phrases cut from ~8.5k sentences, so
pieces of one sentence may land on both sides; give ``--valid`` for studies.
Reading is a generator: no file is held in memory.
"""
import dataclasses
import os

from .corpus import (document_breaks, guess_file_format, is_wikitext_name, read_paragraphs,
                     read_utf8_lines, text_layout)
from .tasks.custom import FILE_FORMATS, file_records
from .tasks.tables import line_error

HELD_OUT_SHARE = 0.05
# the most of a file's words its held-out documents may be (`pretraining.text_data`
# refuses more): of a file of 2 documents, the last is half the text
MAX_HELD_OUT_SHARE = 2 * HELD_OUT_SHARE
# a table's extension and its format's name ('tsv'), as `custom.file_records` takes it
TABLE_FORMATS = {extension: extension[1:] for extension in FILE_FORMATS}
DEFAULT_TEXT_COLUMN = 'text'
LAYOUT_NAMES = {
    'wikitext': "WikiText (a paragraph per line, sentences ending at ' . ')",
    'paragraphs': 'a paragraph per line (sentences ending at . ! or ?)',
    'sentences': "Google BERT's layout (a sentence per line, a blank line between "
                 'documents)',
    'lines': 'one text per line (--line-by-line)',
}


@dataclasses.dataclass(frozen=True)
class TextSource:
    """A text file and how to read it.

    path: the file. file_format: a layout of ``corpus.FILE_FORMATS`` or a table
    format ('tsv', 'csv', 'jsonl'). text_column: the column of a table.
    documents: ``(first, end)``, read only documents first .. end - 1 (None: all).
    guessed_from: ``(text_lines, breaks)`` (`corpus.document_breaks`) when the
    layout was guessed from the file's blank lines (None: stated or named).
    """
    path: str
    file_format: str
    text_column: str = None
    documents: tuple = None
    guessed_from: tuple = None

    @property
    def is_table(self):
        return self.file_format in TABLE_FORMATS.values()

    def key(self):
        """Everything but the file's content that decides what is read."""
        return (self.file_format, self.text_column, self.documents)

    def describe(self):
        """How the file is read, in words."""
        if self.is_table:
            return (f'column {self.text_column!r} of a {self.file_format.upper()} file, '
                    'one text per row')
        if self.guessed_from is None:
            return LAYOUT_NAMES[self.file_format]
        text_lines, breaks = self.guessed_from
        return (f'{LAYOUT_NAMES[self.file_format]}, guessed from {breaks:,} blank-line '
                f'breaks in {text_lines:,} lines of text (--layout states it)')


@dataclasses.dataclass(frozen=True)
class TextCounts:
    """What a `TextSource` holds: documents (with at least one text), texts,
    words (whitespace-separated), and documents with two texts or more (the ones
    that give next sentence prediction a pair)."""
    documents: int = 0
    texts: int = 0
    words: int = 0
    paired_documents: int = 0

    def describe(self):
        return f'{self.documents:,} documents, {self.texts:,} texts, {self.words:,} words'


def is_table_file(path):
    """Whether the extension of ``path`` names a table: .tsv, .csv, .jsonl or .json."""
    return os.path.splitext(path)[1].lower() in TABLE_FORMATS


def text_source(path, line_by_line=False, text_column=None, layout=None,
                count_breaks=document_breaks):
    """The `TextSource` of a file: a table by its extension (`is_table_file`), else a
    plain text file in ``layout`` (one of `corpus.FILE_FORMATS`; 'lines' with
    ``line_by_line``), by default WikiText for a ``wiki.*.tokens`` file, else the
    layout its blank lines give (`corpus.text_layout` of ``count_breaks(path)``)."""
    if is_table_file(path):
        extension = os.path.splitext(path)[1].lower()
        return TextSource(path, TABLE_FORMATS[extension],
                          text_column or DEFAULT_TEXT_COLUMN)
    layout = 'lines' if line_by_line else layout
    if layout is None and not is_wikitext_name(path):
        guessed_from = tuple(count_breaks(path))
        return TextSource(path, text_layout(*guessed_from), guessed_from=guessed_from)
    return TextSource(path, guess_file_format(path, layout or 'auto'))


def read_documents(source, lowercase=True, min_texts=1):
    """Yield the documents of ``source`` (in its range) with at least
    ``min_texts`` texts, each a list of text strings.

    Raises ValueError naming the file (and line) for text that is not UTF-8, a
    binary file, a missing column, a value that is not text."""
    first, end = source.documents or (0, None)
    for index, document in enumerate(all_documents(source, lowercase)):
        if end is not None and index >= end:
            return
        if index >= first and len(document) >= min_texts:
            yield document


def all_documents(source, lowercase):
    """Every document of the file with at least one text."""
    if not source.is_table:
        yield from read_paragraphs(source.path, source.file_format, lowercase, 1)
        return
    for line_number, record in file_records(source.path, source.file_format):
        value = table_text(source, line_number, record)
        if value.strip():
            yield [value.strip().lower() if lowercase else value.strip()]


def table_text(source, line_number, record):
    """The text of a table's row: its ``text_column``, '' for an empty value (a JSON
    null); a ValueError naming the file and line for a missing column or a value that
    is not text."""
    if source.text_column not in record:
        raise line_error(source.path, line_number, f'no column '
                         f'{source.text_column!r} (it has {sorted(record)}): name the '
                         "text's column with --text-column")
    value = record[source.text_column]
    if value is not None and not isinstance(value, str):
        raise line_error(source.path, line_number,
                         f'{source.text_column!r} is {value!r}, not a text')
    return value or ''


def texts_by_row(source):
    """Yield the text of every line of a plain text file, or of every row of a table,
    blank ones included (stripped, so as ''), as ``encode --data`` reads them: its
    vector i is that of line (row) i. (`read_documents` skips blank lines, which
    separate a corpus's documents.) A ValueError naming the file as for
    `read_documents`."""
    if not source.is_table:
        for line in read_utf8_lines(source.path):
            yield line.strip()
        return
    for line_number, record in file_records(source.path, source.file_format):
        yield table_text(source, line_number, record).strip()


def count_rows(source):
    """How many texts `texts_by_row` yields (one pass over the file); a ValueError
    naming the file if it has no line (no row) at all."""
    rows = sum(1 for _ in texts_by_row(source))
    if not rows:
        raise ValueError(f'{source.path} holds no text (it is empty)')
    return rows


def count_texts(source, lowercase=True):
    """The `TextCounts` of ``source`` (one pass over the file); a ValueError
    naming the file if it holds no text."""
    documents = texts = words = paired = 0
    for document in read_documents(source, lowercase):
        documents += 1
        texts += len(document)
        words += sum(len(text.split()) for text in document)
        paired += len(document) >= 2
    if not texts:
        raise ValueError(f'{source.path} holds no text (it is empty, or blank lines or '
                         'empty values only)')
    return TextCounts(documents, texts, words, paired)


def split_held_out(source, counts):
    """``(training part, held-out part)`` of ``source``: the held-out part is the
    last ``HELD_OUT_SHARE`` of its documents (at least one). A ValueError if it
    has a single document."""
    if counts.documents < 2:
        raise ValueError(f'{source.path} holds a single document: nothing to hold out '
                         'for evaluation (give a held-out file with --valid)')
    held_out = max(1, round(HELD_OUT_SHARE * counts.documents))
    split = counts.documents - held_out
    return (dataclasses.replace(source, documents=(0, split)),
            dataclasses.replace(source, documents=(split, counts.documents)))
