"""OpenBLAS must run kernels made for the CPU; it is told which before MXNet loads it.

MXNet 1.9.1 bundles OpenBLAS 0.3.13 (2020), which picks its kernels by CPU model. On a
CPU newer than itself (seen: an Intel Xeon of the Sapphire Rapids family, AVX-512) it
falls back to its generic "Prescott" kernels, and `np.dot` runs 3-5x slower (52-62
against 99-152 GFLOP/s with the right kernels). d2lbert's fast path computes no
matrix product with OpenBLAS, but the book's model and MXNet's `np.dot` do, so
`set_blas_core` (run by the commands before MXNet loads, like the thread count:
`util.process.configure_cpu`) asks OpenBLAS in a separate process which core it would
choose and, if that is a fallback without AVX2 on a CPU with AVX2, sets
OPENBLAS_CORETYPE to the core the CPU's instruction sets support. A value the user set is never changed. The answer is cached per CPU and
OpenBLAS library (`~/.cache/d2lbert/blas`, or `$D2LBERT_KERNEL_CACHE/../blas`).
"""
import hashlib
import importlib.util
import os
import subprocess
import sys

# OpenBLAS cores without AVX2 kernels: on a CPU with AVX2 they are a fallback
PRE_AVX2_CORES = ('Prescott', 'Core2', 'Penryn', 'Dunnington', 'Nehalem', 'Atom', 'Katmai',
                  'Coppermine', 'Northwood', 'Banias', 'Opteron', 'Barcelona', 'Bobcat',
                  'Sandybridge', 'Bulldozer', 'Piledriver', 'Steamroller')
CORE_PROBE = ('import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); '
              'lib.openblas_get_corename.restype = ctypes.c_char_p; '
              'print(lib.openblas_get_corename().decode())')


def cpu_fields(cpuinfo_path='/proc/cpuinfo'):
    """{'vendor_id': ..., 'flags': [...], ...} of the first CPU; {} where unknown."""
    fields = {}
    try:
        with open(cpuinfo_path, encoding='utf-8') as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(':')
                fields[key.strip()] = value.strip()
    except OSError:
        return {}
    fields['flags'] = fields.get('flags', '').split()
    return fields


def proper_core(fields):
    """The OpenBLAS core for a CPU's instruction sets, or None without AVX2."""
    flags = set(fields.get('flags', ()))
    if {'avx512f', 'avx512bw', 'avx512vl', 'avx512dq'} <= flags:
        return 'SkylakeX'
    if {'avx2', 'fma'} <= flags:
        return 'Zen' if fields.get('vendor_id') == 'AuthenticAMD' else 'Haswell'
    return None


def openblas_library():
    """The path of MXNet's bundled OpenBLAS, found without importing MXNet; or None."""
    spec = importlib.util.find_spec('mxnet')
    if spec is None or spec.origin is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), 'libopenblas.so.0')
    return path if os.path.isfile(path) else None


def chosen_core(library, fields):
    """The core OpenBLAS picks on its own here (with OPENBLAS_CORETYPE unset), cached."""
    key = hashlib.sha1(repr((library, os.path.getmtime(library), fields.get('model name'),
                             fields.get('model'), fields.get('flags'))).encode()).hexdigest()
    cache = os.path.join(cache_dir(), key[:16])
    try:
        with open(cache, encoding='utf-8') as f:
            return f.read().strip()
    except OSError:
        pass
    env = {k: v for k, v in os.environ.items() if k != 'OPENBLAS_CORETYPE'}
    try:
        core = subprocess.run([sys.executable, '-c', CORE_PROBE, library], env=env,
                              capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if core:
        remember_core(cache, core)
    return core or None


def remember_core(cache, core):
    """Write the probe's answer to the cache file, atomically; a cache that cannot be
    written (a read-only HOME, HOME=/proc) only means the probe runs again next time."""
    temporary = f'{cache}.{os.getpid()}'
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(temporary, 'w', encoding='utf-8') as f:
            f.write(core)
        os.replace(temporary, cache)
    except OSError:
        pass


def cache_dir():
    kernels = os.environ.get('D2LBERT_KERNEL_CACHE')
    if kernels:
        return os.path.join(os.path.dirname(os.path.abspath(kernels)), 'blas')
    return os.path.join(os.path.expanduser('~'), '.cache', 'd2lbert', 'blas')


def set_blas_core():
    """Set OPENBLAS_CORETYPE where OpenBLAS would fall back on this CPU; returns the
    core set, or None. Has no effect once MXNet is imported."""
    if os.environ.get('OPENBLAS_CORETYPE') or not sys.platform.startswith('linux'):
        return None
    fields, library = cpu_fields(), openblas_library()
    better = proper_core(fields)
    if better is None or library is None:
        return None
    if chosen_core(library, fields) not in PRE_AVX2_CORES:
        return None
    os.environ['OPENBLAS_CORETYPE'] = better
    return better
