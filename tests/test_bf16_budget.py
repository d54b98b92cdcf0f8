"""chapter_bert/studies/bf16_budget.py: its arithmetic (the ceiling of the bfloat16
speedup and the rest a target leaves), a tiny run end to end, and its refusals."""
import json
import os
import subprocess
import sys

import pytest

from d2lbert.run import precision as run_precision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, 'chapter_bert', 'studies', 'bf16_budget.py')
sys.path.insert(0, os.path.dirname(TOOL))
from bf16_budget import bounds, budget  # noqa: E402

HAS_BF16 = bool(run_precision.cpu_flags() & set(run_precision.CPU_BF16_FLAGS))


def tool(*flags):
    return subprocess.run([sys.executable, TOOL, *flags], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, PYTHONPATH=ROOT))


def test_the_ceiling_keeps_the_float32_rest_and_the_bfloat16_products():
    fp32 = budget([{'ms_per_step': 100.0, 'faults_per_step': 1}, {'ms_per_step': 90.0,
                   'faults_per_step': 1}, {'ms_per_step': 130.0, 'faults_per_step': 1}],
                  {'ms_per_step': 110.0, 'operators': {'FullyConnected': 20.0,
                                                       '_backward_FullyConnected': 40.0,
                                                       'd2lbert_attention': 9.0}})
    bf16 = budget([{'ms_per_step': 70.0, 'faults_per_step': 1}],
                  {'ms_per_step': 75.0, 'operators': {'FullyConnected': 11.0,
                                                      '_backward_FullyConnected': 21.0,
                                                      'amp_cast': 3.0}})
    assert (fp32['products_ms'], fp32['rest_ms']) == (60.0, 40.0)  # the median round
    assert (bf16['products_ms'], bf16['rest_ms']) == (32.0, 38.0)
    found = bounds(fp32, bf16, 1.6)
    assert found['ratio'] == pytest.approx(100 / 70)
    assert found['products_ratio'] == pytest.approx(60 / 32)
    assert found['ceiling'] == pytest.approx(100 / 72)      # 32 ms of products + 40 of rest
    assert found['rest_budget_ms'] == pytest.approx(62.5 - 32)  # 100 / 1.6 - 32


@pytest.mark.skipif(not HAS_BF16, reason='this CPU has neither avx512_bf16 nor amx_bf16')
def test_a_tiny_budget_end_to_end(tmp_path):
    out = tmp_path / 'budget.json'
    done = tool('--quick', '--steps', '2', '--rounds', '2', '--out', str(out))
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert results['command'].endswith(f'--quick --steps 2 --rounds 2 --out {out}')
    assert set(results['steps_measured']) == {'small', 'finetune'}
    for step in results['steps_measured'].values():
        for precision in ('fp32', 'bf16'):
            split = step[precision]
            assert split['products_ms'] > 0 and 'FullyConnected' in split['operators']
            assert split['products_ms'] + split['rest_ms'] == pytest.approx(split['step_ms'])
            assert len(split['rounds_ms']) == len(split['rounds_faults_per_step']) == 2
        assert 'amp_cast' in step['bf16']['operators']       # bf16 casts around products
        assert 'amp_cast' not in step['fp32']['operators']
    assert '| small (quick) |' in done.stdout and '| finetune (quick) |' in done.stdout


@pytest.mark.parametrize('spelling', ['a link', 'a folder', 'no rounds'])
def test_refusals_are_one_line_and_touch_nothing(tmp_path, spelling):
    victim = tmp_path / 'notes.txt'
    victim.write_text('my notes\n')
    os.symlink(victim, tmp_path / 'link.json')
    out = {'a link': tmp_path / 'link.json', 'a folder': tmp_path}.get(
        spelling, tmp_path / 'budget.json')
    done = tool('--out', str(out), *(['--rounds', '0'] if spelling == 'no rounds' else []))
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr.count('\n') == 1 and done.stderr.startswith('bf16_budget: --')
    assert victim.read_text() == 'my notes\n'
    assert sorted(os.listdir(tmp_path)) == ['link.json', 'notes.txt']
