"""The kernels compile for the CPU named by $D2LBERT_KERNEL_MARCH (default: this one).

An AVX2 CPU runs the kernels' AVX2 code; to see on a CPU with AVX-512 what such a CPU
computes, D2LBERT_KERNEL_MARCH=haswell must build a library with no AVX-512 instruction
(no zmm register) and keep it apart from the native build in the cache."""
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(shutil.which('g++') is None or shutil.which('objdump') is None,
                                reason='needs g++ and objdump')

BUILD = ('import sys; from d2lbert.fast import kernels; '
         'sys.stdout.write(kernels.build("g++"))')


def built_library(cache, march=None):
    env = dict(os.environ, D2LBERT_KERNEL_CACHE=str(cache))
    env.pop('D2LBERT_KERNEL_MARCH', None)
    if march:
        env['D2LBERT_KERNEL_MARCH'] = march
    done = subprocess.run([sys.executable, '-c', BUILD], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout


def uses_avx512(library):
    code = subprocess.run(['objdump', '-d', library], capture_output=True, text=True,
                          check=True).stdout
    return '%zmm' in code


def test_haswell_target_has_no_avx512_and_its_own_cache_entry(tmp_path):
    haswell = built_library(tmp_path, 'haswell')
    assert not uses_avx512(haswell)
    if 'avx512f' in open('/proc/cpuinfo', encoding='utf-8').read():
        native = built_library(tmp_path)
        assert native != haswell
        assert uses_avx512(native)
