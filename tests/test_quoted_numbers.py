"""Numbers quoted in the book (chapter_bert/*.md, README.md, docs/*.md) with a
`<!-- result FILE KEY.PATH -->` marker equal the results file's value, rounded to the
decimals shown, and come from the newest dated record of that measurement in the file
unless the marker names the older record's date with @DATE (see quoted_numbers.py).

While a results file is not in the repository yet, D2LBERT_ALLOW_MISSING_RESULTS=1
skips its markers; without it, a missing file fails.
"""
import json
import os

import pytest

from quoted_numbers import (Marker, check_repository, check_text, find_markers, lookup,
                            markdown_files)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = {'bench.json': {
    'steps': {'book': {'d2lbert': {'step_seconds': 0.9512, 'pairs_per_s': 538.4}}},
    'finetune': {'bert.small': {'d2lbert': {'pairs_per_s': 210.0}}},
    'rounds': [{'seconds': 1.25}, {'seconds': -0.224}],
    'cpu': 'AMD EPYC', 'flag': True}}


def check(text, allow_missing=False):
    return check_text(text, 'chapter.md', RESULTS.get, allow_missing)


def test_a_matching_number_passes():
    text = ('intro\n\nA step took 0.95 s<!-- result bench.json '
            'steps.book.d2lbert.step_seconds --> and trained\n'
            '538 pairs/s<!-- result bench.json steps.book.d2lbert.pairs_per_s -->.\n')
    assert check(text) == []


def test_a_wrong_number_fails_naming_the_file_line_and_both_numbers():
    text = 'line one\nA step took 0.96 s<!-- result bench.json ' \
           'steps.book.d2lbert.step_seconds -->.\n'
    [problem] = check(text)
    assert (problem.source, problem.line) == ('chapter.md', 2)
    message = str(problem)
    assert message.startswith('chapter.md:2: ')
    assert '0.96' in message and '0.9512' in message and '0.95 to the 2 decimals' in message


@pytest.mark.parametrize('quoted, ok', [
    ('0.95', True), ('0.951', True), ('1', True), ('0.9', False), ('0.952', False),
    ('0.9512', True), ('0.96', False)])
def test_the_number_is_compared_to_the_decimals_it_shows(quoted, ok):
    text = f'{quoted} s<!-- result bench.json steps.book.d2lbert.step_seconds -->'
    assert (check(text) == []) == ok


def test_a_missing_key_fails():
    [problem] = check('took 0.95 s<!-- result bench.json steps.book.d2l.step_seconds -->')
    assert "no key 'd2l' in steps.book" in problem.message


def test_a_marker_without_a_number_or_with_a_non_number_fails():
    assert 'no number' in check('fast<!-- result bench.json steps -->')[0].message
    assert 'not a number' in check('1<!-- result bench.json cpu -->')[0].message
    assert 'not a number' in check('1<!-- result bench.json flag -->')[0].message


def test_list_indices_negative_numbers_and_keys_with_dots():
    text = ('1.25 s<!-- result bench.json rounds.0.seconds --> and '
            '-0.22<!-- result bench.json rounds.1.seconds -->;\n'
            '210 pairs/s<!-- result bench.json finetune.bert.small.d2lbert.pairs_per_s -->\n'
            '1,000<!-- result bench.json rounds.2.seconds -->')
    [problem] = check(text)
    assert problem.line == 3 and "no index '2'" in problem.message


def test_a_missing_file_fails_unless_allowed():
    text = '3.3x<!-- result seeds.json median -->'
    [problem] = check(text)
    assert 'seeds.json not found' in problem.message
    assert check(text, allow_missing=True) == []


def test_find_markers_reads_the_number_and_the_unit():
    text = ('x 3.28\u00d7<!-- result a.json r --> y 41.3 GFLOP/s<!-- result a.json g -->\n'
            '21,500 tokens/s<!-- result a.json t -->')
    assert find_markers(text) == [Marker(1, '3.28', 'a.json', 'r'),
                                  Marker(1, '41.3', 'a.json', 'g'),
                                  Marker(2, '21,500', 'a.json', 't')]
    assert lookup({'a': [{'b.c': 4}]}, 'a.0.b.c') == 4


def test_a_key_with_a_space_is_read_and_checked():
    """Bench rows such as 'd2lbert bf16' are keys with a space: a marker naming one is
    found (and so checked), not passed over as no marker at all."""
    text = '1.5<!-- result bench.json steps.small.d2lbert bf16.pairs_per_s -->'
    assert find_markers(text) == [Marker(1, '1.5', 'bench.json',
                                         'steps.small.d2lbert bf16.pairs_per_s')]
    [problem] = check(text)
    assert 'd2lbert bf16' in problem.message


def test_every_result_comment_of_the_book_is_a_marker():
    """No `<!-- result ...` in the chapters, README or docs escapes the check."""
    for name in markdown_files(ROOT):
        with open(os.path.join(ROOT, name), encoding='utf-8') as f:
            text = f.read()
        assert text.count('<!-- result ') == len(find_markers(text)), name


def test_the_book_quotes_its_results_files():
    """The real chapters, README and docs against chapter_bert/results/."""
    assert 'chapter_bert/bert-fast.md' in markdown_files(ROOT)
    allow_missing = os.environ.get('D2LBERT_ALLOW_MISSING_RESULTS') == '1'
    problems, count = check_repository(ROOT, allow_missing)
    assert count > 0, 'no result markers found: the book quotes no measured number?'
    assert not problems, 'numbers in the text differ from their results files:\n' + \
        '\n'.join(map(str, problems))


# Dated records: a newer record of the same measurement makes an older quote fail.
ROUNDS = {'date': '2026-11-27', 'what': 'a step, measured in rounds',
          'rounds': [{'date': '2026-11-25', 'seconds': 1.04, 'note': 'first'},
                     {'date': '2026-11-27', 'seconds': 0.91}],
          'sst2': {'date': '2026-11-26', 'accuracy': 0.81}}


def check_rounds(text):
    return check_text(text, 'chapter.md', {'rounds.json': ROUNDS}.get)


def test_a_quote_of_an_older_round_fails_naming_the_newer_one():
    [problem] = check_rounds('line\nA step took 1.04 s<!-- result rounds.json '
                             'rounds.0.seconds -->.\n')
    assert problem.line == 2
    assert 'record of 2026-11-25 (rounds.0)' in problem.message
    assert 'rounds.1 holds seconds too and is newer (2026-11-27)' in problem.message
    assert '@2026-11-25' in problem.message
    assert check_rounds('0.91 s<!-- result rounds.json rounds.1.seconds -->') == []


def test_records_that_measure_something_else_or_enclose_the_quote_do_not_count():
    """sst2 is older than the file and its rounds, but nothing newer holds its
    accuracy; rounds.1 is as new as the file that encloses it."""
    assert check_rounds('81%: 0.81<!-- result rounds.json sst2.accuracy -->') == []
    assert check_rounds('0.91<!-- result rounds.json rounds.1.seconds -->') == []


def test_an_older_top_level_with_a_newer_round_inside_fails():
    data = {'date': '2026-11-25', 'attention_of_gemm': 0.51,
            'third_round': {'date': '2026-11-27', 'attention_of_gemm': 0.46}}
    [problem] = check_text('0.51<!-- result a.json attention_of_gemm -->', 'c.md',
                           {'a.json': data}.get)
    assert 'the top level' in problem.message and 'third_round' in problem.message


def test_an_older_record_quoted_on_purpose_carries_its_date():
    text = 'then 1.04 s<!-- result rounds.json rounds.0.seconds @2026-11-25 -->'
    assert find_markers(text)[0] == Marker(1, '1.04', 'rounds.json', 'rounds.0.seconds',
                                           '2026-11-25')
    assert check_rounds(text) == []
    [wrong] = check_rounds(text.replace('11-25', '11-24'))
    assert 'says @2026-11-24, but its record (rounds.0) is dated 2026-11-25' in wrong.message
    [undated] = check_text('1<!-- result bench.json rounds.0.seconds @2026-11-25 -->',
                           'c.md', RESULTS.get)
    assert 'sits in no dated record' in undated.message


def test_the_repository_check_reads_dated_results_files(tmp_path):
    """A tiny repository: a chapter quoting an older round of a results file fails."""
    results = tmp_path / 'chapter_bert' / 'results'
    results.mkdir(parents=True)
    (results / 'tiny.json').write_text(json.dumps(ROUNDS), encoding='utf-8')
    chapter = tmp_path / 'chapter_bert' / 'tiny.md'
    chapter.write_text('# Tiny\n\nIt took 0.91 s<!-- result tiny.json rounds.1.seconds -->.\n',
                       encoding='utf-8')
    assert check_repository(str(tmp_path)) == ([], 1)
    chapter.write_text('# Tiny\n\nIt took 1.04 s<!-- result tiny.json rounds.0.seconds -->.\n',
                       encoding='utf-8')
    problems, count = check_repository(str(tmp_path))
    assert count == 1 and [(p.source, p.line) for p in problems] == [
        (os.path.join('chapter_bert', 'tiny.md'), 3)]
