"""d2lbert's own CPU kernels: MXNet extension operators written in C++.

MXNet can load operators from a shared library at run time (`mx.library.load`,
its `lib_api` interface), so a kernel that MXNet does slowly can be replaced without
rebuilding MXNet. d2lbert's, each forward and backward:

* `d2lbert_layer_norm` (`layer_norm.cc`): LayerNorm, about 10x faster than MXNet 1.9's
  on the CPU (its backward does the gamma/beta sums with slow generic reductions);
* `d2lbert_add_layer_norm` (`layer_norm.cc`): LayerNorm(x + dropout(z)), the "add &
  norm" of every Transformer block, in one pass over the rows;
* `d2lbert_attention` (`attention.cc`): the scaled dot products, masked softmax and
  dropout of multi-head self-attention, with the small per-head matrix products done
  by a register-blocked micro-kernel (`gemm.h`); `d2lbert_int8_attention`, the same
  (inference only) on the integer sums of an int8 Q/K/V projection, scaled back as it
  reads them;
* `d2lbert_dropout` (`dropout.cc`): dropout (MXNet's draws a Mersenne-Twister number
  per element);
* `d2lbert_embedding` (`embedding.cc`): BERT's input embedding, the sum of three
  lookups, and its dropout;
* `d2lbert_log_sum_exp` (`log_sum_exp.cc`): the log-sum-exp of each row plus a bias,
  the backward recomputing the softmax (the masked-LM loss);
* `d2lbert_quantize`, `d2lbert_dequantize` (`quantize.cc`, `dequantize.cc`): an int8
  product's input rounded to int8 with a scale per column, and its integer sums scaled
  per output and its bias added, each in one pass (inference only: `d2lbert.fast.int8`);
* `d2lbert_requantize` (`requantize.cc`): between a feed-forward block's two int8
  products, the first's sums scaled back, GELU (or ReLU), and the result rounded for the
  second, in one pass (inference only);
* `d2lbert_sum_squares`, `d2lbert_adam_update` (`adam.cc`): the optimizer's step, the
  global gradient norm in one read and clipping + Adam + zeroing the gradient in one
  pass (no backward: they run outside autograd).

`d2lbert_attention` and `d2lbert_log_sum_exp` also take (and give) bfloat16 under
`--precision bf16`, computing in float32 inside (the attention's products of two
bfloat16 operands on the CPU's bfloat16 dot products), and `d2lbert_add_layer_norm`
takes its sublayer's output (and gives its gradient) so; MXNet 1.9's extension API does not
name bfloat16, so the library is built with a copy of its `lib_api.cc` that lets it
through (`LIB_API_BFLOAT16`).

Dropout inside a kernel draws no random stream: its mask is a hash of a seed and the
element's position (`common.h`), so the backward pass recomputes it from the seed
instead of storing it. MXNet does not tell extension operators whether it is
training; `training_flag` asks MXNet's own Dropout instead.

The library is compiled with the system's C++ compiler (`g++`, or `$CXX`) the first
time it is needed, against the headers that ship in the MXNet wheel, and cached in
``$D2LBERT_KERNEL_CACHE`` (default ``~/.cache/d2lbert/kernels``) under a key of the
sources, the compiler flags, the MXNet installation and the CPU (they are compiled
for it, `-march=native`; ``$D2LBERT_KERNEL_MARCH`` names another target, e.g.
``haswell`` to run AVX2 code, as an AVX2 CPU would, on a CPU with AVX-512). Where they
cannot be built (no compiler, a failed build) `available()` is False, with one
warning saying why, and the blocks fall back to MXNet's own operators (same results,
slower);
``D2LBERT_FUSED_KERNELS=0`` chooses that fallback on purpose, without a warning.
"""
import concurrent.futures
import ctypes
import functools
import os
import platform
import shutil
import subprocess
import sys
import warnings

import mxnet as mx
import numpy as onp

from ...util.files import atomic_directory
from ...util.hashing import sha1_of_file, sha1_of_strings

SOURCES = ('library.cc', 'layer_norm.cc', 'attention.cc', 'dropout.cc', 'embedding.cc',
           'log_sum_exp.cc', 'adam.cc', 'quantize.cc', 'dequantize.cc', 'requantize.cc')
HEADERS = ('common.h', 'gemm.h', 'int8_rows.h')
# -march=native: vector instructions of this CPU (the CPU is part of the cache key).
# -fno-trapping-math: without it GCC 12 keeps the loops of exp_nonpositive (common.h)
# scalar on AVX2 CPUs (a compare-and-select "could trap"), vectorizing them only with
# AVX-512's masks: measured on a Zen 1, 210 -> 780 million exp/s per thread. The
# kernels never rely on floating-point exceptions.
# -fno-math-errno: without it GCC 12 follows each vectorized sqrt with a check for a
# negative argument (to set errno) and a scalar call: Adam's update of a 30522 x 256
# embedding (kernels/adam.cc) took 9.0 ms instead of 3.3 (Zen 5, 2 threads). Nothing
# reads errno; square roots are exact either way.
CXXFLAGS = ['-O3', '-fno-trapping-math', '-fno-math-errno', '-std=c++17', '-shared', '-fPIC',
            '-fopenmp']


def compiler_flags():
    """CXXFLAGS with the target CPU: -march=native, or $D2LBERT_KERNEL_MARCH."""
    return [*CXXFLAGS, '-march=' + (os.environ.get('D2LBERT_KERNEL_MARCH') or 'native')]


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


# MXNet 1.9's lib_api.cc (compiled into the library: the library's side of the
# extension API) throws "Invalid dtype flag: 12" for a bfloat16 tensor, a type its
# MXTensor does not name, though MXNet hands the operator the tensor's data pointer and
# type flag like any other's. The copy compiled here describes it as DLPack's bfloat
# (code 4, 16 bits) instead, so that `d2lbert_log_sum_exp` can take the masked-LM
# products in bfloat16 (common.h reads the raw bits).
LIB_API_DEFAULT = '  default:\n    dltensor.dtype.code = 0;'
LIB_API_BFLOAT16 = ('  case 12:  // bfloat16 (d2lbert)\n    dltensor.dtype.code = 4;\n'
                    '    dltensor.dtype.bits = 16;\n    break;\n')


def _patched_lib_api(path, directory):
    """A copy of MXNet's lib_api.cc at `path`, in `directory`, whose MXTensor takes
    bfloat16 (type flag 12); its path."""
    with open(path, encoding='utf-8') as f:
        text = f.read()
    if LIB_API_DEFAULT not in text:
        raise RuntimeError(f'{path}: not the lib_api.cc of MXNet 1.9 (its dtype switch '
                           'was not found), cannot let bfloat16 through')
    patched = os.path.join(directory, 'lib_api.cc')
    with open(patched, 'w', encoding='utf-8') as f:
        f.write(text.replace(LIB_API_DEFAULT, LIB_API_BFLOAT16 + LIB_API_DEFAULT, 1))
    return patched


def _cpu_signature():
    """The CPU's model and instruction-set flags (what -march=native compiles for)."""
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as f:
            return ''.join(sorted({line for line in f
                                   if line.startswith(('model name', 'flags'))}))
    except OSError:
        return platform.machine()


def _library_path(compiler):
    here = os.path.dirname(os.path.abspath(__file__))
    key = sha1_of_strings([sha1_of_file(path) for path in _sources()],
                          [sha1_of_file(os.path.join(here, name)) for name in HEADERS],
                          compiler, compiler_flags(), mx.__version__, LIB_API_BFLOAT16,
                          _cpu_signature())
    return os.path.join(cache_dir(), key[:16], 'd2lbert_kernels.so')


def build(compiler):
    """Compile the kernels (if not cached) and return the library's path.

    The sources are compiled in parallel, one compiler process per CPU, then linked.
    The library is built in a temporary directory renamed into place at the end
    (`atomic_directory`), so processes building at the same time never load a
    half-written file."""
    path = _library_path(compiler)
    if os.path.exists(path):
        return path
    print(f"d2lbert: compiling its CPU kernels into {path} (once, about 10 s)",
          file=sys.stderr, flush=True)
    include = ['-I', os.path.join(_mxnet_dir(), 'include')]
    flags = compiler_flags()
    with atomic_directory(os.path.dirname(path)) as tmp:
        *own, lib_api = _sources()
        sources = [*own, _patched_lib_api(lib_api, tmp)]
        objects = [os.path.join(tmp, f'{i}.o') for i in range(len(sources))]
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(_compile, ([compiler, *flags, *include, '-c', source, '-o', obj]
                                     for source, obj in zip(sources, objects))))
        _compile([compiler, *flags, *objects, '-o', os.path.join(tmp, os.path.basename(path))])
        for obj in objects + [os.path.join(tmp, 'lib_api.cc')]:  # only what this made
            os.remove(obj)
    return path


def _compile(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f'{" ".join(command)} failed:\n{result.stderr[-2000:]}')


def enabled():
    """False if the user switched the kernels off (D2LBERT_FUSED_KERNELS=0)."""
    return os.environ.get('D2LBERT_FUSED_KERNELS', '1') != '0'


@functools.lru_cache(maxsize=None)
def available():
    """True once the kernels are compiled and loaded into MXNet (once per process)."""
    if not enabled():
        return False
    compiler = os.environ.get('CXX') or 'g++'
    try:
        if shutil.which(compiler) is None:
            raise RuntimeError(f'no C++ compiler ({compiler!r}) on PATH')
        load_library(build(compiler))
    except (RuntimeError, OSError, mx.base.MXNetError) as error:
        warnings.warn(f"d2lbert: could not build its CPU kernels ({error}); using MXNet's "
                      f'own operators, which give the same results more slowly.')
        return False
    return True


OPERATORS = ('d2lbert_layer_norm', 'd2lbert_add_layer_norm', 'd2lbert_attention',
             'd2lbert_int8_attention', 'd2lbert_dropout', 'd2lbert_embedding',
             'd2lbert_log_sum_exp', 'd2lbert_sum_squares', 'd2lbert_adam_update',
             'd2lbert_quantize', 'd2lbert_dequantize', 'd2lbert_requantize')


def load_library(path):
    """Load the kernel library into MXNet and make its operators `mx.nd.*` / `mx.sym.*`.

    What `mx.library.load` does, except that it regenerates the Python functions of
    all ~1000 MXNet operators (0.6 s); this makes only d2lbert's.
    """
    from mxnet.base import _LIB, OpHandle, c_str, check_call, mx_uint
    from mxnet.ndarray.register import _make_ndarray_function
    from mxnet.symbol.register import _make_symbol_function
    check_call(_LIB.MXLoadLib(c_str(path), mx_uint(0)))
    for name in OPERATORS:
        handle = OpHandle()
        check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(handle)))
        for module, make_function in (('ndarray', _make_ndarray_function),
                                      ('symbol', _make_symbol_function)):
            function = make_function(handle, name, name)
            function.__module__ = f'mxnet.{module}'
            setattr(sys.modules[f'mxnet.{module}'], name, function)
            setattr(sys.modules[f'mxnet.{module}.op'], name, function)


def usable(parameter):
    """Can a block whose parameters are like `parameter` run d2lbert's kernels? Only
    on CPU contexts, in float32, and where the kernels could be built."""
    on_cpu = all(ctx.device_type == 'cpu' for ctx in parameter.list_ctx())
    return on_cpu and onp.dtype(parameter.dtype) == onp.float32 and available()


def training_flag(F, like):
    """A (1,) float32 array that is 1 outside training and 0 or 2 while training.

    MXNet's Dropout knows whether MXNet is training (it drops only then); applied
    with p = 0.5 to a 1, it keeps the 1 outside training and makes it 0 or 2 while
    training. The kernels read this flag. `like`: any array of the graph, whose device
    the flag is made on (a Symbol has none: the graph's). Two operators a call: a graph
    runs one per block that asks, and each operator's launch costs more than its work.
    """
    one = F.np.ones((1,), ctx=getattr(like, 'ctx', None))
    return F.npx.dropout(one, p=0.5)


def dropout(F, X, rate):
    """Dropout of X (..., n) with d2lbert's `d2lbert_dropout` kernel, for a
    hybrid_forward whose block runs the kernels (see `usable`)."""
    training = training_flag(F, X)
    return F.d2lbert_dropout(X.as_nd_ndarray(), training.as_nd_ndarray(),
                             dropout=rate)[0].as_np_ndarray()


def embedding(F, token_vectors, segments, positions, segment_table, position_table, rate):
    """dropout(token_vectors + segment_table[segments] + position_table[positions]) with
    d2lbert's `d2lbert_embedding` kernel: (..., H) from (..., H) vectors, (...) ids and
    (rows, H) tables."""
    training = training_flag(F, token_vectors)
    ids = [a.astype('int32') for a in (segments, positions)]
    # identity: the kernel overwrites the tables' gradients (see LayerNorm)
    tables = [F.identity(table) for table in as_legacy(segment_table, position_table)]
    return F.d2lbert_embedding(token_vectors.as_nd_ndarray(), *as_legacy(*ids), *tables,
                               training.as_nd_ndarray(), dropout=rate)[0].as_np_ndarray()


def log_sum_exp(F, z, b):
    """log sum_c exp(z[n, c] + b[c]) of each row with d2lbert's `d2lbert_log_sum_exp`
    kernel: (N,) from (N, C) and (C,)."""
    return F.d2lbert_log_sum_exp(*as_legacy(z, b)).as_np_ndarray()


def as_legacy(*arrays):
    """The arrays as MXNet's legacy NDArrays/Symbols, which extension operators take."""
    return [array.as_nd_ndarray() for array in arrays]
