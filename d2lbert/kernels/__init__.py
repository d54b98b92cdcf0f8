"""d2lbert's own CPU kernels: MXNet extension operators written in C++.

MXNet can load operators from a shared library at run time (`mx.library.load`,
its `lib_api` interface), so a kernel that MXNet does slowly can be replaced without
rebuilding MXNet. d2lbert has one: `d2lbert_layer_norm` (`layer_norm.cc`), LayerNorm
forward and backward, about 10x faster than MXNet 1.9's on the CPU (its backward does the gamma/beta sums
with slow generic reductions).

The library is compiled with the system's C++ compiler (`g++`, or `$CXX`) the first
time it is needed, against the headers that ship in the MXNet wheel, and cached in
``$D2LBERT_KERNEL_CACHE`` (default ``~/.cache/d2lbert/kernels``) under a key of the
source, the compiler flags and the MXNet version. Where it cannot be built (no
compiler, a failed build) `available()` is False, with one warning saying why, and the
blocks fall back to MXNet's own operators (same results, slower);
``D2LBERT_FUSED_KERNELS=0`` chooses that fallback on purpose, without a warning.
"""
import functools
import os
import shutil
import subprocess
import sys
import warnings

import mxnet as mx

from ..data.cache import atomic_directory, sha1_of_file, sha1_of_strings

SOURCES = ('layer_norm.cc',)
CXXFLAGS = ['-O3', '-std=c++17', '-shared', '-fPIC', '-fopenmp']


def cache_dir():
    """Where compiled kernel libraries are kept."""
    return os.environ.get('D2LBERT_KERNEL_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'd2lbert', 'kernels')


def _mxnet_dir():
    return os.path.dirname(mx.__file__)


def _sources():
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, name) for name in SOURCES] + [
        os.path.join(_mxnet_dir(), 'src', 'lib_api.cc')]


def _library_path(compiler):
    key = sha1_of_strings([sha1_of_file(path) for path in _sources()],
                          compiler, CXXFLAGS, mx.__version__)
    return os.path.join(cache_dir(), key[:16], 'd2lbert_kernels.so')


def build(compiler):
    """Compile the kernels (if not cached) and return the library's path.

    The library is built in a temporary directory renamed into place at the end
    (`atomic_directory`), so processes building at the same time never load a
    half-written file."""
    path = _library_path(compiler)
    if os.path.exists(path):
        return path
    print(f"d2lbert: compiling its CPU kernels into {path} (once, about 10 s)",
          file=sys.stderr, flush=True)
    with atomic_directory(os.path.dirname(path)) as tmp:
        command = [compiler, *CXXFLAGS, '-I', os.path.join(_mxnet_dir(), 'include'),
                   *_sources(), '-o', os.path.join(tmp, os.path.basename(path))]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f'{" ".join(command)} failed:\n{result.stderr[-2000:]}')
    return path


@functools.lru_cache(maxsize=None)
def available():
    """True once the kernels are compiled and loaded into MXNet (once per process)."""
    if os.environ.get('D2LBERT_FUSED_KERNELS', '1') == '0':
        return False
    compiler = os.environ.get('CXX') or 'g++'
    try:
        if shutil.which(compiler) is None:
            raise RuntimeError(f'no C++ compiler ({compiler!r}) on PATH')
        mx.library.load(build(compiler), False)
    except (RuntimeError, OSError, mx.base.MXNetError) as error:
        warnings.warn(f"d2lbert: could not build its CPU kernels ({error}); using MXNet's "
                      f'own LayerNorm, which gives the same results more slowly.')
        return False
    return True
