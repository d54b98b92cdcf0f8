"""Reading table-like text files (TSV, CSV, JSON lines, JSON) row by row, keeping
line numbers so that every reader can say exactly where a file is wrong.

A *record* is one row as a dict ``{column name: value}``; the readers call
``records`` with the file's header, or with the column names of a file
without one (CoLA's train and dev files).

TSV files are read with quoting switched off (``csv.QUOTE_NONE``): a quote
character is an ordinary character, as the GLUE baselines and Hugging Face
read GLUE's files. (GLUE's sentences contain unbalanced quotes; with the
default quoting, csv would glue many lines into one field.) A field may be as long
as a whole article: ``csv.field_size_limit``, whose default is 131,072 characters, is
raised to ``MAX_FIELD_CHARS`` while a row is read, and put back after it (the limit
is the whole process's: other code reading CSV files keeps its own).

A ``.json`` file is read as Hugging Face's ``run_mlm`` reads it: JSON lines, or one
JSON array of records (``[{"text": ...}, ...]``, read whole into memory).
"""
import csv
import itertools
import json
import re

# the longest field a CSV or TSV file may hold (csv's default, 131,072 characters,
# refuses a row holding a whole article); the row is in memory anyway
MAX_FIELD_CHARS = 1 << 30
JSON_WHITESPACE = re.compile(r'[ \t\n\r]*')


def line_error(path, line_number, message):
    """A ValueError saying ``path, line N: message``."""
    return ValueError(f'{path}, line {line_number}: {message}')


def not_utf8(path, error):
    """The ValueError for a file that is not UTF-8 text."""
    return ValueError(f'{path} is not UTF-8 text (byte {error.object[error.start]:#x} at '
                      f'offset {error.start} of a chunk); save it as UTF-8')


def utf8_lines(f, path):
    """The lines of a text file opened as UTF-8, a ValueError naming it if it is not."""
    try:
        yield from f
    except UnicodeDecodeError as error:
        raise not_utf8(path, error) from None


def delimited_rows(path, delimiter='\t', quoting=csv.QUOTE_NONE):
    """Yield ``(line number, list of fields)`` for every non-blank row.

    A byte-order mark at the start of the file is dropped (``utf-8-sig``).
    """
    with open(path, encoding='utf-8-sig', newline='') as f:
        reader = csv.reader(f, delimiter=delimiter, quoting=quoting)
        try:
            for fields in long_field_rows(reader):
                if fields:
                    yield reader.line_num, fields
        except csv.Error as error:  # e.g. a field longer than MAX_FIELD_CHARS
            raise line_error(path, reader.line_num, f'a field longer than '
                             f'{MAX_FIELD_CHARS} characters, or broken quoting '
                             f'({error})') from None
        except UnicodeDecodeError as error:
            raise not_utf8(path, error) from None


def long_field_rows(reader):
    """Yield the rows of a csv reader, each read with ``csv.field_size_limit`` raised to
    ``MAX_FIELD_CHARS`` and put back as it was right after."""
    while True:
        previous = csv.field_size_limit(MAX_FIELD_CHARS)
        try:
            fields = next(reader, None)
        finally:
            csv.field_size_limit(previous)
        if fields is None:
            return
        yield fields


def records(path, rows, column_names=None):
    """Yield ``(line number, {column: value})`` for the ``rows`` of ``path``.

    Args:
        rows: ``(line number, fields)`` pairs, as :func:`delimited_rows`.
        column_names: the columns of a file without a header; by default the
            first row is the header.
    Raises:
        ValueError: an empty file, or a row whose number of fields differs
            from the header's (a tab inside a field would shift the columns).
    """
    rows = iter(rows)
    if column_names is None:
        first = next(rows, None)
        if first is None:
            raise ValueError(f'{path} is empty: expected a header row')
        header_line, column_names = first
        where = f'the header (line {header_line})'
    else:
        where = 'this file\'s layout'
    for line_number, fields in rows:
        if len(fields) != len(column_names):
            raise line_error(path, line_number,
                             f'{len(fields)} fields, but {where} has '
                             f'{len(column_names)}: {list(column_names)}')
        yield line_number, dict(zip(column_names, fields))


def jsonl_records(path):
    """Yield ``(line number, dict)`` for every non-blank line of a JSON lines
    file (one JSON object per line)."""
    with open(path, encoding='utf-8-sig') as f:
        for line_number, line in enumerate(utf8_lines(f, path), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise line_error(path, line_number,
                                 f'not valid JSON ({error})') from None
            if not isinstance(record, dict):
                raise line_error(path, line_number,
                                 'expected a JSON object {"column": value}')
            yield line_number, record


def json_records(path):
    """Yield ``(line number, dict)`` for every record of a ``.json`` file: a JSON
    array of objects (the file starts with ``[``), else JSON lines."""
    with open(path, encoding='utf-8-sig') as f:
        first = next((line for line in utf8_lines(f, path) if line.strip()), '')
    if not first.lstrip().startswith('['):
        yield from jsonl_records(path)
        return
    with open(path, encoding='utf-8-sig') as f:
        text = ''.join(utf8_lines(f, path))
    yield from json_array_records(path, text)


def json_array_records(path, text):
    """Yield ``(line number, dict)`` for every object of the JSON array ``text``
    (the content of ``path``), each at the line where it starts."""
    decoder = json.JSONDecoder()
    position = JSON_WHITESPACE.match(text, text.index('[') + 1).end()
    line_number = text.count('\n', 0, position) + 1
    while not text.startswith(']', position):
        try:
            record, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise line_error(path, error.lineno, f'not valid JSON ({error.msg})') from None
        if not isinstance(record, dict):
            raise line_error(path, line_number, 'expected a JSON object {"column": value}')
        yield line_number, record
        after = JSON_WHITESPACE.match(text, end).end()
        if text.startswith(',', after):
            after = JSON_WHITESPACE.match(text, after + 1).end()
        elif not text.startswith(']', after):
            raise line_error(path, text.count('\n', 0, after) + 1,
                             'expected "," or "]" after a record of the JSON array')
        line_number += text.count('\n', position, after)
        position = after
    if text[position + 1:].strip():
        raise line_error(path, text.count('\n', 0, position) + 1,
                         'text after the end of the JSON array')


def field(record, column, path, line_number):
    """``record[column]``, or a ValueError naming the file and line."""
    if column not in record:
        raise line_error(path, line_number,
                         f'no {column!r} column (found {sorted(record)})')
    return record[column]


def first_row(rows):
    """``(first row or None, the same rows again)`` for any iterator."""
    rows = iter(rows)
    first = next(rows, None)
    return first, (rows if first is None else itertools.chain([first], rows))
