"""chapter_bert/studies/scale_study.py: the corpora it makes, its quick mode on the shared
WikiText-2 file (skipped when ../shared/data, or $D2LBERT_DATA, is absent), the
docs table it prints (checked by tests/quoted_numbers.py as the book's numbers are) and
its one-line refusals of bad input."""
import json
import os
import subprocess
import sys

import pytest

from quoted_numbers import check_text, find_markers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get('D2LBERT_DATA', os.path.join(ROOT, '..', 'shared', 'data'))
WIKITEXT = os.path.join(DATA, 'wikitext-2', 'wiki.valid.tokens')
STUDY = os.path.join(ROOT, 'chapter_bert', 'studies', 'scale_study.py')
sys.path.insert(0, os.path.dirname(STUDY))
from scale_study import make_corpus  # noqa: E402


COLUMN_KEYS = {
    'corpus': ['corpus.mb', 'corpus.million_words'],
    'first step, cold': ['cold.first_step_seconds'],
    'first step, warm': ['warm.first_step_seconds'],
    'peak RSS (cold)': ['cold.peak_rss_mib', 'rss_over_smallest'],
    'cache': ['cold.cache_mb', 'cache_over_corpus'],
    'pairs/s (median, cold)': ['cold.pairs_per_second']}


def study(*flags):
    return subprocess.run([sys.executable, STUDY, *flags], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))


def test_a_corpus_repeats_the_shuffled_lines_until_it_has_the_words(tmp_path):
    source = [f'= Article {i} =\n' if i % 5 == 0 else f'word{i} and more words .\n'
              for i in range(40)]
    corpus = make_corpus(source, 0.001, 7, str(tmp_path / 'corpus'))
    with open(tmp_path / 'corpus' / 'wiki.train.tokens', encoding='utf-8') as f:
        train = f.readlines()
    with open(tmp_path / 'corpus' / 'wiki.valid.tokens', encoding='utf-8') as f:
        valid = f.readlines()
    words = sum(len(line.split()) for line in train)
    assert corpus['words'] == words and 1000 <= words < 1000 + 5
    assert corpus['mb'] == os.path.getsize(tmp_path / 'corpus' / 'wiki.train.tokens') / 1e6
    assert sorted(train[:40]) == sorted(source) and train[:40] != source  # shuffled whole
    assert train[40:80] != train[:40] and set(train) == set(source)  # reshuffled
    assert valid == train[:7]
    again = make_corpus(source, 0.001, 7, str(tmp_path / 'again'))
    assert again == corpus and (tmp_path / 'again' / 'wiki.train.tokens').read_text() == \
        ''.join(train)


@pytest.mark.parametrize('flags, message', [
    (['--sizes', '2,ten'], '--sizes must be'), (['--sizes', '0'], '--sizes must be'),
    (['--threads', '0'], '--threads must be'),
    (['--wikitext', 'no-such-file'], '--wikitext no-such-file: No such file')])
def test_bad_input_is_one_line_and_nothing_written(tmp_path, flags, message):
    out = tmp_path / 'scale-study.json'
    done = study('--wikitext', WIKITEXT, *flags, '--out', str(out))
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr.count('\n') == 1 and message in done.stderr
    assert not out.exists()


@pytest.mark.skipif(not os.path.isfile(WIKITEXT), reason='the shared WikiText-2 is absent')
def test_the_quick_study_measures_cold_and_warm_starts(tmp_path):
    out = str(tmp_path / 'scale-study.json')
    done = study('--quick', '--threads', '1', '--wikitext', WIKITEXT, '--out', out)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    with open(out, encoding='utf-8') as f:
        results = json.load(f)
    assert results['quick'] and '--quick' in results['command'] and results['threads'] == 1
    assert results['machine'] and results['date'] and '--steps' in results['pretrain']
    assert list(results['corpora']) == ['0.05M', '0.1M']
    smallest = results['corpora']['0.05M']['cold']['peak_rss_mib']
    for name, result in results['corpora'].items():
        corpus, cold, warm = result['corpus'], result['cold'], result['warm']
        assert 0 <= corpus['words'] - float(name[:-1]) * 1e6 < 1000  # within a paragraph
        for run in (cold, warm):
            assert 0 < run['first_step_seconds'] <= run['seconds']
            assert 100 < run['peak_rss_mib'] < 4000 and run['cpu_seconds'] > 0
            assert run['pairs_per_second'] > 0
        assert warm['first_step_seconds'] <= cold['first_step_seconds'] + 3
        assert 0 < cold['cache_mb'] < corpus['mb']
        assert cold['cache_mb_before'] == 0  # a new home
        assert warm['cache_mb_before'] == warm['cache_mb'] == cold['cache_mb']  # read, kept
        assert result['cache_over_corpus'] == cold['cache_mb'] / corpus['mb']
        assert result['rss_over_smallest'] == cold['peak_rss_mib'] / smallest
    table = study('--readme', '--out', out).stdout
    assert len(find_markers(table)) == 9 * 2 == table.count('<!-- result scale-study.json')
    assert check_text(table, 'readme', {'scale-study.json': results}.get) == []
    rows = [[cell.strip() for cell in line.strip('|').split('|')]
            for line in table.splitlines() if line.startswith('|')]
    assert len(rows) == 2 + 2  # the header, the separator, a row per size
    for name, row in zip(results['corpora'], rows[2:]):
        cells = dict(zip(rows[0], row))  # {header: cell}: each column shows its own number
        for header, keys in COLUMN_KEYS.items():
            assert [marker.path for marker in find_markers(cells[header])] == \
                [f'corpora.{name}.{key}' for key in keys], header
