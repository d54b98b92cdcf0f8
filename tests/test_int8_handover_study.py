"""chapter_bert/studies/int8_handover.py: a tiny run end to end (the two blocks it
times compute the same outputs, and it writes what it measured)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, 'chapter_bert', 'studies', 'int8_handover.py')


def test_a_tiny_run_writes_both_times_and_near_equal_outputs(tmp_path):
    out = tmp_path / 'handover.json'
    done = subprocess.run([sys.executable, TOOL, '--rows', '40', '--rounds', '2', '--out',
                           str(out)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    times = results['milliseconds']
    assert set(times) == {'handover', 'three operators'} and min(times.values()) > 0
    assert results['speedup'] == pytest.approx(times['three operators'] / times['handover'])
    # the same block: they differ where GELU's rounding moves an input level by one
    assert results['largest_difference_over_largest_output'] < 0.01
    assert results['command'].endswith(f'--rows 40 --rounds 2 --out {out}')
