"""`import d2lbert` sets OPENBLAS_CORETYPE where MXNet's OpenBLAS would fall back to its
generic kernels (`d2lbert.util.blas`), and `d2lbert bench` reports the cores in use."""
import os

import pytest

from d2lbert.bench import machine
from d2lbert.util import blas

SAPPHIRE_RAPIDS = {'vendor_id': 'GenuineIntel', 'model': '143',
                   'flags': ['avx', 'avx2', 'fma', 'avx512f', 'avx512bw', 'avx512vl', 'avx512dq',
                             'avx512_bf16', 'amx_tile']}
ZEN = {'vendor_id': 'AuthenticAMD', 'flags': ['avx', 'avx2', 'fma']}
OLD = {'vendor_id': 'GenuineIntel', 'flags': ['sse4_2', 'avx']}
CORE_BEFORE_THESE_TESTS = os.environ.get('OPENBLAS_CORETYPE')


@pytest.mark.parametrize('fields, core', [(SAPPHIRE_RAPIDS, 'SkylakeX'), (ZEN, 'Zen'),
                                          ({**ZEN, 'vendor_id': 'GenuineIntel'}, 'Haswell'),
                                          (OLD, None)])
def test_the_proper_core_follows_the_instruction_sets(fields, core):
    assert blas.proper_core(fields) == core


@pytest.mark.parametrize('fields, chosen, preset, expected', [
    (SAPPHIRE_RAPIDS, 'Prescott', None, 'SkylakeX'),   # the Intel case of the issue
    (ZEN, 'Zen', None, None),                          # OpenBLAS knows the CPU
    (SAPPHIRE_RAPIDS, 'Prescott', 'Haswell', 'Haswell'),  # the user's choice stays
    (OLD, 'Prescott', None, None),                     # no AVX2: nothing better
])
def test_set_blas_core(fields, chosen, preset, expected, monkeypatch):
    # setenv first, so that monkeypatch restores the variable's absence afterwards (a
    # leaked OPENBLAS_CORETYPE=SkylakeX makes later subprocesses die of SIGILL here)
    monkeypatch.setenv('OPENBLAS_CORETYPE', 'placeholder')
    monkeypatch.delenv('OPENBLAS_CORETYPE')
    if preset:
        monkeypatch.setenv('OPENBLAS_CORETYPE', preset)
    monkeypatch.setattr(blas, 'cpu_fields', lambda: fields)
    monkeypatch.setattr(blas, 'openblas_library', lambda: '/lib/libopenblas.so.0')
    monkeypatch.setattr(blas, 'chosen_core', lambda library, fields: chosen)
    blas.set_blas_core()
    assert os.environ.get('OPENBLAS_CORETYPE') == expected


def test_the_probe_agrees_with_what_mxnet_reports(tmp_path, monkeypatch):
    """The core found without importing MXNet is the one MXNet's OpenBLAS prints
    (OPENBLAS_VERBOSE=2), and a second call reads it from the cache."""
    monkeypatch.setenv('D2LBERT_KERNEL_CACHE', str(tmp_path / 'kernels'))
    monkeypatch.setenv('OPENBLAS_CORETYPE', 'placeholder')
    monkeypatch.delenv('OPENBLAS_CORETYPE')
    library, fields = blas.openblas_library(), blas.cpu_fields()
    core = blas.chosen_core(library, fields)
    assert core and core == machine.openblas_core()
    assert os.listdir(tmp_path / 'blas')
    monkeypatch.setattr(blas.subprocess, 'run', None)  # cached: no second probe
    assert blas.chosen_core(library, fields) == core


def test_bench_describes_the_machine_and_warns_about_a_fallback(monkeypatch):
    monkeypatch.setenv('OPENBLAS_CORETYPE', 'Prescott')
    described = machine.describe_machine()
    assert described['openblas_core'] == 'Prescott'
    assert described['onednn_isa']
    line = machine.machine_line(described)
    assert 'OpenBLAS core Prescott (OPENBLAS_CORETYPE=Prescott)' in line
    if 'avx2' in described['cpu']['isa']:
        assert described['warnings'] and 'Prescott' in described['warnings'][0]



def test_no_core_setting_leaks_out_of_these_tests():
    """Runs after the others in this file (pytest keeps file order)."""
    assert os.environ.get('OPENBLAS_CORETYPE') == CORE_BEFORE_THESE_TESTS
