"""Numbers quoted in the book's prose, checked against the results files they come from.

A measured number in a chapter (chapter_bert/*.md), README.md or docs/*.md that no code
cell prints carries a marker right after it; its unit may sit in between:

    a book-size step took 0.95 s<!-- result bench.json steps.book.d2lbert.step_seconds -->

FILE (here bench.json) is relative to chapter_bert/results/. KEY.PATH is dict keys and
list indices separated by dots; a key that itself holds dots ('bert.small') is found
too, the longest key first, and so is one with a space ('d2lbert bf16'). The number
right before the marker (digits, with an optional sign, thousands commas and decimal
point) must equal the file's value rounded to the decimals shown: 0.95 matches 0.9512
but not 0.9561.

A results file may keep several dated records: a record is a dict with a "date" (an
ISO date, "2026-11-27"; the file's top level usually is one, and so may be the rounds,
runs or arms it keeps). The record a marker quotes is the innermost record its path
passes through, and its key is the rest of the path, below that record. The number must
come from the newest record of its kind: it fails if another record of the file (not
one that encloses the quoted record) holds the same key under a later date, the same
measurement made again, as when a list of rounds gains a newer round. A text that quotes an older record on purpose says so in the prose (its date and
why) and in the marker, with the record's date after an @:

    attention took 0.51 of the GEMM's time<!-- result bench.json rounds.0.att @2026-11-25 -->

and then the record must carry that date, whatever is newer.

`check_text` checks one text against a loader of results files, `check_repository`
every such file of the repository; both return a list of `Problem`, empty when all is
well.
"""
import dataclasses
import glob
import json
import os
import re

RESULTS_DIR = os.path.join('chapter_bert', 'results')
MARKER = re.compile(r'<!--\s*result\s+(?P<file>\S+)\s+(?P<path>[^<>]*?\S)'
                    r'(?:\s+@(?P<as_of>\d{4}-\d{2}-\d{2}\S*))?\s*-->')
# The number, then at most one short unit (×, %, s, ms, MB, GFLOP/s, pairs/s ...),
# then the marker.
NUMBER_BEFORE = re.compile(
    r'(?P<number>[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<decimals>\d+))?)'
    r'(?:\s?[^\s\d<>()]{1,10})?$')


@dataclasses.dataclass(frozen=True)
class Problem:
    """What is wrong with one marker, where."""
    source: str  # the markdown file, as given
    line: int    # 1-based
    message: str

    def __str__(self):
        return f'{self.source}:{self.line}: {self.message}'


@dataclasses.dataclass(frozen=True)
class Marker:
    """One marker and the number quoted before it (None: no number there)."""
    line: int
    number: str
    file: str
    path: str
    as_of: str = None  # the date after @: an older record quoted on purpose


def find_markers(text):
    """The markers of a markdown text, in order."""
    markers = []
    for match in MARKER.finditer(text):
        line = text.count('\n', 0, match.start()) + 1
        before = text[text.rfind('\n', 0, match.start()) + 1:match.start()]
        number = NUMBER_BEFORE.search(before)
        markers.append(Marker(line, number.group('number') if number else None,
                              match.group('file'), match.group('path'), match.group('as_of')))
    return markers


def lookup(data, path):
    """The value at a dot-separated path of dict keys and list indices; KeyError naming
    the first part that is not there."""
    return walk(data, path)[-1][1]


def walk(data, path):
    """[(path so far, value)] from the top of `data` down to the value at `path`; KeyError
    as `lookup`."""
    parts, value, done = path.split('.'), data, 0
    visited = [('', data)]
    while done < len(parts):
        if isinstance(value, list):
            index = parts[done]
            if not (index.isdigit() and int(index) < len(value)):
                raise KeyError(f'no index {index!r} in a list of {len(value)} after '
                               f'{".".join(parts[:done]) or "the top"}')
            value, done = value[int(index)], done + 1
            visited.append(('.'.join(parts[:done]), value))
            continue
        if not isinstance(value, dict):
            raise KeyError(f'{".".join(parts[:done])} is not a dict or a list')
        for end in range(len(parts), done, -1):  # the longest key first: 'bert.small'
            key = '.'.join(parts[done:end])
            if key in value:
                value, done = value[key], end
                visited.append(('.'.join(parts[:done]), value))
                break
        else:
            raise KeyError(f'no key {parts[done]!r} in '
                           f'{".".join(parts[:done]) or "the top level"}')
    return visited


def is_record(value):
    return isinstance(value, dict) and isinstance(value.get('date'), str)


def records(data, path=''):
    """(path, record) of every dated record in `data`, the enclosing ones first."""
    if isinstance(data, dict):
        if is_record(data):
            yield path, data
        items = data.items()
    elif isinstance(data, list):
        items = ((str(i), item) for i, item in enumerate(data))
    else:
        return
    for key, item in items:
        yield from records(item, f'{path}.{key}' if path else key)


def holds_number(record, key):
    try:
        value = lookup(record, key)
    except KeyError:
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_date(marker, data, visited):
    """What is wrong with the date of the record a marker quotes, or None."""
    where = f'{marker.file} {marker.path}'
    enclosing = [(path, value) for path, value in visited[:-1] if is_record(value)]
    if not enclosing:
        if marker.as_of:
            return f'{where} sits in no dated record, yet the marker says @{marker.as_of}'
        return None
    path, record = enclosing[-1]
    name = path or 'the top level'
    if marker.as_of:
        if record['date'] != marker.as_of:
            return (f'the marker of {where} says @{marker.as_of}, but its record '
                    f'({name}) is dated {record["date"]}')
        return None
    key = marker.path[len(path) + 1:] if path else marker.path
    skip = {id(value) for _, value in enclosing}
    newer = [(other['date'], other_path) for other_path, other in records(data)
             if id(other) not in skip and other['date'] > record['date']
             and holds_number(other, key)]
    if newer:
        date, other_path = max(newer)
        return (f'{where} quotes the record of {record["date"]} ({name}), but '
                f'{other_path or "the top level"} holds {key} too and is newer '
                f'({date}): quote the newest '
                f'record, or say in the text that the number is older and why and end '
                f'the marker with @{record["date"]}')
    return None


def as_float(number):
    return float(number.replace(',', '').replace('\u2212', '-'))


def check_marker(marker, data):
    """The message of what is wrong with a marker whose file holds `data`, or None."""
    where = f'{marker.file} {marker.path}'
    if marker.number is None:
        return f'no number right before the marker of {where}'
    try:
        visited = walk(data, marker.path)
    except KeyError as error:
        return f'{where}: {error.args[0]}'
    value = visited[-1][1]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f'{where} is {value!r}, not a number'
    decimals = len(marker.number.split('.', 1)[1]) if '.' in marker.number else 0
    expected = f'{value:.{decimals}f}'
    if f'{as_float(marker.number):.{decimals}f}' != expected:
        return (f'the text says {marker.number}, {where} is {value!r} '
                f'({expected} to the {decimals} decimals shown)')
    return check_date(marker, data, visited)


def check_text(text, source, load, allow_missing=False):
    """Problems of the markers of one markdown text.

    load(file) returns the parsed JSON results file, or None if it does not exist;
    allow_missing: skip the markers of missing files instead of reporting them.
    """
    problems = []
    for marker in find_markers(text):
        data = load(marker.file)
        if data is None:
            if not allow_missing:
                problems.append(Problem(source, marker.line, f'results file {marker.file} '
                                        f'not found (in {RESULTS_DIR})'))
            continue
        message = check_marker(marker, data)
        if message:
            problems.append(Problem(source, marker.line, message))
    return problems


def markdown_files(root):
    """The repository's files that may quote results, relative to root."""
    patterns = (os.path.join('chapter_bert', '*.md'), 'README.md', os.path.join('docs', '*.md'))
    return sorted(os.path.relpath(path, root) for pattern in patterns
                  for path in glob.glob(os.path.join(root, pattern)))


def results_loader(root):
    """load(file) for `check_text`: the JSON of root/chapter_bert/results/file, or None."""
    cache = {}

    def load(name):
        if name not in cache:
            path = os.path.join(root, RESULTS_DIR, name)
            if os.path.isfile(path):
                with open(path, encoding='utf-8') as f:
                    cache[name] = json.load(f)
            else:
                cache[name] = None
        return cache[name]
    return load


def check_repository(root, allow_missing=False):
    """(problems, number of markers checked) of every markdown file of the repository."""
    load, problems, count = results_loader(root), [], 0
    for name in markdown_files(root):
        with open(os.path.join(root, name), encoding='utf-8') as f:
            text = f.read()
        count += len(find_markers(text))
        problems += check_text(text, name, load, allow_missing)
    return problems, count
