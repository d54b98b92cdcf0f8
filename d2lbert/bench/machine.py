"""What machine a benchmark ran on: the CPU, its instruction sets, and which kernels
OpenBLAS and oneDNN chose for it.

MXNet 1.9.1's bundled OpenBLAS picks its kernels by CPU model at load time; on a CPU
it does not know (seen: an Intel Xeon of the Sapphire Rapids family) it falls back to
generic ones ("Prescott") and runs `np.dot` 3-5x slower. oneDNN, behind
`FullyConnected`, picks by instruction set. Both report their choice when asked
(OPENBLAS_VERBOSE=2, DNNL_VERBOSE=1); each probe runs in a fresh process with the
benchmark's environment, so an OPENBLAS_CORETYPE set for the run is reflected.
"""
import os
import re
import subprocess
import sys

from ..util.blas import PRE_AVX2_CORES, cpu_fields

# instruction sets that matter for the kernels (from /proc/cpuinfo's flags)
ISA_FLAGS = ('sse4_2', 'avx', 'avx2', 'fma', 'avx512f', 'avx512bw', 'avx512vl', 'avx512_vnni',
             'avx512_bf16', 'amx_tile')

OPENBLAS_PROBE = ('import mxnet as mx; '
                  'mx.nd.dot(mx.nd.ones((64, 64)), mx.nd.ones((64, 64))).wait_to_read()')
ONEDNN_PROBE = ('import mxnet as mx; mx.nd.FullyConnected(mx.nd.ones((64, 64)), '
                'mx.nd.ones((64, 64)), no_bias=True, num_hidden=64).wait_to_read()')


def cpu_description():
    """{'model', 'vendor', 'family', 'model_number', 'isa': [flags]} of the first CPU."""
    fields = cpu_fields()
    flags = fields.get('flags', [])
    return {'model': fields.get('model name', 'unknown'), 'vendor': fields.get('vendor_id'),
            'family': fields.get('cpu family'), 'model_number': fields.get('model'),
            'isa': [flag for flag in ISA_FLAGS if flag in flags]}


def probe_output(code, extra_env):
    """stdout + stderr of `python -c code` with extra_env set ('' if it failed)."""
    env = dict(os.environ, **extra_env)
    try:
        done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                              env=env, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return ''
    return done.stdout + done.stderr


def openblas_core():
    """The core OpenBLAS runs ('Haswell', 'Zen', 'Prescott', ...), or None."""
    found = re.search(r'Core:\s*(\w+)', probe_output(OPENBLAS_PROBE, {'OPENBLAS_VERBOSE': '2'}))
    return found.group(1) if found else None


def onednn_isa():
    """The instruction set oneDNN chose ('Intel AVX2', ...), or None."""
    output = probe_output(ONEDNN_PROBE, {'DNNL_VERBOSE': '1', 'MKLDNN_VERBOSE': '1'})
    found = re.search(r'isa:([^,\n]+)', output)
    return found.group(1).strip() if found else None


def describe_machine():
    """The CPU, OpenBLAS's core and oneDNN's ISA, with a warning if OpenBLAS falls back."""
    cpu = cpu_description()
    machine = {'cpu': cpu, 'openblas_core': openblas_core(), 'onednn_isa': onednn_isa(),
               'openblas_coretype_env': os.environ.get('OPENBLAS_CORETYPE'),
               'warnings': []}
    if machine['openblas_core'] in PRE_AVX2_CORES and 'avx2' in cpu['isa']:
        machine['warnings'].append(
            f"OpenBLAS runs its generic '{machine['openblas_core']}' kernels on this AVX2 CPU "
            f"({cpu['model']}): np.dot is several times slower than it could be (set "
            'OPENBLAS_CORETYPE, or let `import d2lbert` set it). d2lbert\'s fast path does '
            'not use OpenBLAS; the d2l and GluonNLP baselines do.')
    return machine


def machine_line(machine):
    """One line for the README: CPU, ISA, OpenBLAS core, oneDNN ISA."""
    cpu = machine['cpu']
    forced = (f" (OPENBLAS_CORETYPE={machine['openblas_coretype_env']})"
              if machine.get('openblas_coretype_env') else '')
    return (f"{cpu['model']} (family {cpu.get('family')} model {cpu.get('model_number')}; "
            f"{' '.join(cpu['isa'])}), OpenBLAS core {machine['openblas_core']}{forced}, "
            f"oneDNN {machine['onednn_isa']}")
