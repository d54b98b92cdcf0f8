"""Reading table-like text files (TSV, CSV, JSON lines) row by row, keeping
line numbers so that every reader can say exactly where a file is wrong.

A *record* is one row as a dict ``{column name: value}``; the readers call
``records`` with the file's header, or with the column names of a file
without one (CoLA's train and dev files).

TSV files are read with quoting switched off (``csv.QUOTE_NONE``): a quote
character is an ordinary character, as the GLUE baselines and Hugging Face
read GLUE's files. (GLUE's sentences contain unbalanced quotes; with the
default quoting, csv would glue many lines into one field.)
"""
import csv
import itertools
import json


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
            for fields in reader:
                if fields:
                    yield reader.line_num, fields
        except csv.Error as error:  # e.g. a field longer than csv.field_size_limit()
            raise line_error(path, reader.line_num, f'a field longer than '
                             f'{csv.field_size_limit()} characters, or broken quoting '
                             f'({error})') from None
        except UnicodeDecodeError as error:
            raise not_utf8(path, error) from None


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
