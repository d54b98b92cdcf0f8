"""chapter_bert/studies/warm_reads.py: how its strace log is added up, and what it
measures, on a small file: a warm start of `d2lbert pretrain --data FILE` opens and
reads the file once, to hash it (skipped without strace or the WikiText-2 file)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get('D2LBERT_DATA', os.path.join(ROOT, '..', 'shared', 'data'))
WIKITEXT = os.path.join(DATA, 'wikitext-2', 'wiki.valid.tokens')
TOOL = os.path.join(ROOT, 'chapter_bert', 'studies', 'warm_reads.py')
sys.path.insert(0, os.path.dirname(TOOL))
from warm_reads import reads_of  # noqa: E402


def test_the_reads_of_one_file_are_added_up(tmp_path):
    data, other = str(tmp_path / 'data.txt'), str(tmp_path / 'other.txt')
    log = tmp_path / 'trace'
    log.write_text(
        f'101 openat(AT_FDCWD, "{data}", O_RDONLY|O_CLOEXEC) = 3<{data}>\n'
        f'101 read(3<{data}>, "abc"..., 65536) = 65536\n'
        f'102 read(4<{other}>, "x"..., 10) = 10\n'
        f'101 pread64(3<{data}>, "d"..., 100, 0) = 100\n'
        f'101 read(3<{data}>, "", 65536) = 0\n'
        f'101 openat(AT_FDCWD, "{data}.gz", O_RDONLY) = -1 ENOENT (No such file)\n'
        f'101 openat(AT_FDCWD, "{data}", O_RDONLY) = -1 EACCES (Permission denied)\n',
        encoding='utf-8')
    assert reads_of(str(log), data) == (65636, 1)


def test_a_warm_start_reads_its_data_file_once(tmp_path):
    if shutil.which('strace') is None:
        pytest.skip('strace not found (apt-get install strace)')
    if not os.path.isfile(WIKITEXT):
        pytest.skip(f'WikiText-2 not found at {WIKITEXT}')
    out = tmp_path / 'warm-reads.json'
    done = subprocess.run([sys.executable, TOOL, '--words', '0.1', '--steps', '1',
                           '--wikitext', WIKITEXT, '--out', str(out)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(out.read_text(encoding='utf-8'))
    assert results['traced_warm']['opens'] == 1
    assert results['traced_warm']['bytes_read'] == results['file']['bytes'] > 500_000
    assert results['warm']['cache_mb_before'] == results['cold']['cache_mb'] > 0
