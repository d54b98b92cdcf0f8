"""chapter_bert/studies/first_steps_study.py: the held-out split it makes of WikiText-2's
lines, a tiny run of it end to end on text this test writes, the docs table it prints
(checked by tests/quoted_numbers.py as the book's numbers are) and its one-line refusals."""
import json
import os
import subprocess
import sys

import pytest

from quoted_numbers import check_text, find_markers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY = os.path.join(ROOT, 'chapter_bert', 'studies', 'first_steps_study.py')
sys.path.insert(0, os.path.dirname(STUDY))
from first_steps_study import wikitext_lines  # noqa: E402

ANIMALS = ['cat', 'dog', 'bird', 'fish', 'horse', 'cow', 'sheep', 'goat']


def write_wikitext(path, articles=12):
    """A file in WikiText's layout: headings, blank lines, one paragraph per line."""
    lines = []
    for a in range(articles):
        lines += [' \n', f' = Article {a} = \n', ' \n']
        for p in range(4):
            words = [ANIMALS[(a * 7 + p * 3 + w) % len(ANIMALS)] for w in range(30)]
            lines.append(' ' + ' the '.join(words) + ' . \n')
    path.write_text(''.join(lines), encoding='utf-8')
    return str(path)


def study(*flags):
    return subprocess.run([sys.executable, STUDY, *flags], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))


def test_the_held_out_lines_are_the_last_fifth_as_json_lines(tmp_path):
    wikitext = write_wikitext(tmp_path / 'wiki.valid.tokens', articles=5)
    train, valid = wikitext_lines(wikitext, str(tmp_path))
    paragraphs = [line.strip() for line in open(wikitext, encoding='utf-8')
                  if line.strip() and not line.strip().startswith('=')]
    with open(train, encoding='utf-8') as f:
        train_lines = f.read().splitlines()
    with open(valid, encoding='utf-8') as f:
        valid_lines = [json.loads(line)['text'] for line in f]
    assert train_lines + valid_lines == paragraphs  # in order, no heading, nothing lost
    assert len(valid_lines) == 4  # a fifth of 20


@pytest.mark.parametrize('flags, message', [
    (['--recipe', 'no-equals-sign'], "--recipe 'no-equals-sign' must be NAME=FLAGS"),
    (['--texts', 'tweets'], '--texts tweets: not one of'),
    (['--seeds', '0,one'], '--seeds 0,one must be numbers'),
    (['--texts', 'wikitext-lines', '--wikitext', 'no-such-file'],
     '--wikitext no-such-file: no such file')])
def test_bad_input_is_one_line_and_nothing_written(tmp_path, flags, message):
    out = tmp_path / 'first-steps-study.json'
    done = study(*flags, '--out', str(out))
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr.count('\n') == 1 and message in done.stderr
    assert not out.exists()


def test_a_tiny_study_records_each_runs_held_out_curve(tmp_path):
    out = str(tmp_path / 'first-steps-study.json')
    tiny = '--preset book --batch-size 8 --max-len 16'
    done = study('--texts', 'wikitext-lines', '--seeds', '0,1', '--steps', '2',
                 '--wikitext', write_wikitext(tmp_path / 'wiki.valid.tokens'),
                 '--recipe', f'tiny={tiny}', '--recipe', f'tiny-lr=--lr 3e-3 {tiny}',
                 '--out', out)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out, encoding='utf-8') as f:
        results = json.load(f)
    assert results['machine'] and results['date'] and '--recipe' in results['command']
    assert list(results['recipes']) == ['tiny', 'tiny-lr']
    assert results['recipes']['tiny-lr']['flags'] == f'--lr 3e-3 {tiny}'
    for recipe in results['recipes'].values():
        seeds = recipe['texts']['wikitext-lines']
        assert sorted(seeds) == ['0', '1']
        for seed, run in seeds.items():
            assert run['options']['seed'] == int(seed) and run['options']['max_len'] == 16
            assert run['curve'][-1]['step'] == 2
            last = run['curve'][-1]
            assert 0 <= last['accuracy'] <= 1 and 0 < last['baseline'] < 1
    assert results['recipes']['tiny-lr']['texts']['wikitext-lines']['0']['options']['lr'] == 3e-3
    assert results['recipes']['tiny']['texts']['wikitext-lines']['0']['options']['optimizer'] \
        == 'adamw'  # the defaults filled in
    table = study('--readme', '--out', out).stdout
    assert len(find_markers(table)) == 2 * 2 * 2 == table.count('<!-- result first-steps')
    assert check_text(table, 'readme', {'first-steps-study.json': results}.get) == []


def test_an_out_the_study_cannot_write_is_refused_like_bad_input(tmp_path):
    """The shared results-file check (`runner.check_results_file`) refuses as the
    argument checks do: one line, exit code 2."""
    (tmp_path / 'link').symlink_to(tmp_path / 'elsewhere.json')
    for out, message in ((tmp_path, 'is a folder'), (tmp_path / 'link', 'link')):
        done = study('--out', str(out))
        assert done.returncode == 2 and done.stdout == ''
        assert done.stderr.count('\n') == 1 and message in done.stderr
    assert not (tmp_path / 'elsewhere.json').exists()
