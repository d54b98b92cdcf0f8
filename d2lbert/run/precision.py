"""`--precision fp32|bf16|fp16`: the type a command's matrix products compute in.

    precision = resolve_precision(options.precision, options.amp)   # --amp: fp16
    check_hardware(precision, ctxs)      # RunError (exit 2): one line, what is missing
    net = use_precision(net, precision)  # a new model (`setup.prepare_model` calls it)

bf16 (bfloat16) runs on CPUs with avx512_bf16 or AMX and on GPUs of compute
capability 8.0 or more; fp16 (float16) on GPUs (MXNet 1.9 has no float16 matrix
product on a CPU) and adds dynamic loss scaling (`needs_loss_scaling`): float16's
smallest numbers are far larger than bfloat16's, so small gradients would underflow.
int8 (inference on a CPU only) computes the encoder's products in 8-bit integers on
oneDNN (`d2lbert.fast.int8`, `run.calibration`), on CPUs with AVX2 or more; `auto`
never chooses it, since it changes the results more than bf16 does.
`d2lbert.model.precision` says what computes in which type.
"""
import os

import mxnet as mx

from ..model.precision import compute_in
from .errors import RunError

PRECISIONS = {'fp32': 'float32', 'bf16': 'bfloat16', 'fp16': 'float16'}
# inference runs on the CPU, where MXNet has no float16 matrix product; int8: the
# encoder's products on oneDNN's integer kernels, calibrated (`run.calibration`)
INFERENCE_PRECISIONS = ('auto', 'fp32', 'bf16', 'int8')  # auto: `inference_precision`
CPU_BF16_FLAGS = ('avx512_bf16', 'amx_bf16')
# $DNNL_MAX_CPU_ISA values under which oneDNN has no int8 (AVX2), or no bf16 (AVX-512),
# kernel: with AVX, AVX2 or AVX2_VNNI its bf16 product fails to build (measured)
ONEDNN_WITHOUT_INT8 = ('SSE41', 'SSE4_1')
ONEDNN_WITHOUT_BF16 = ONEDNN_WITHOUT_INT8 + ('AVX', 'AVX2', 'AVX2_VNNI', 'AVX2_VNNI_2')
MIN_BF16_GPU = (8, 0)


def resolve_precision(precision, amp=False):
    """--precision, or 'fp16' for --amp (its older name); both: they must agree."""
    if amp and precision not in ('fp32', 'fp16'):
        raise RunError(f'--amp means --precision fp16: drop it or --precision {precision}')
    return 'fp16' if amp else precision


def inference_precision(precision, ctx):
    """The precision an inference command runs in: 'auto' is bf16 where the device
    computes it (a CPU with avx512_bf16 or AMX), else fp32 (never int8); the others
    as given."""
    if precision != 'auto':
        return precision
    return 'fp32' if missing_hardware('bf16', [ctx]) else 'bf16'


def check_hardware(precision, ctxs):
    """Raise a RunError naming what is missing if the devices `ctxs` can't compute
    in `precision`."""
    missing = missing_hardware(precision, ctxs)
    if missing:
        raise RunError(f'--precision {precision}: {missing}; use --precision fp32')


def missing_hardware(precision, ctxs):
    """What the devices lack for `precision`, or None."""
    if precision == 'fp32':
        return None
    device = ctxs[0]
    if device.device_type != 'gpu':
        if precision == 'fp16':
            return 'float16 computes on GPUs only (MXNet has no float16 CPU matrix product)'
        if precision == 'int8':
            return missing_int8_kernels()
        flags = cpu_flags()
        if not flags & set(CPU_BF16_FLAGS):
            return 'this CPU has neither avx512_bf16 nor amx_bf16 (see /proc/cpuinfo)'
        limit = onednn_isa_limit()
        if limit in ONEDNN_WITHOUT_BF16:
            return (f"oneDNN is held to {limit} (DNNL_MAX_CPU_ISA); its bf16 kernels "
                    "need AVX-512")
        return None
    if precision == 'bf16':
        capability = gpu_capability(device)
        if capability is not None and capability < MIN_BF16_GPU:
            return (f'GPU {device.device_id} has compute capability '
                    f'{capability[0]}.{capability[1]}; bfloat16 needs 8.0 or more')
    return None


def missing_int8_kernels():
    """Why oneDNN has no int8 kernel to run here, or None: MXNet built without oneDNN,
    a CPU without AVX2, or oneDNN held below AVX2 (DNNL_MAX_CPU_ISA)."""
    if not mx.runtime.Features().is_enabled('MKLDNN'):
        return 'this MXNet is built without oneDNN, which computes the int8 products'
    if 'avx2' not in cpu_flags():
        return "this CPU has no AVX2, which oneDNN's int8 kernels need (see /proc/cpuinfo)"
    limit = onednn_isa_limit()
    if limit in ONEDNN_WITHOUT_INT8:
        return f"oneDNN is held to {limit} (DNNL_MAX_CPU_ISA); its int8 kernels need AVX2"
    return None


def onednn_isa_limit():
    """The instruction set oneDNN is held to ($DNNL_MAX_CPU_ISA, upper case), or 'ALL'."""
    return (os.environ.get('DNNL_MAX_CPU_ISA') or os.environ.get('MKLDNN_MAX_CPU_ISA')
            or 'ALL').upper()


def cpu_flags():
    """The CPU's feature flags (/proc/cpuinfo; an empty set where there is none)."""
    try:
        with open('/proc/cpuinfo') as info:
            for line in info:
                if line.startswith('flags'):
                    return set(line.split(':', 1)[1].split())
    except OSError:
        pass
    return set()


def gpu_capability(device):
    """(major, minor) compute capability of a GPU context, or None if unknown."""
    try:
        major_minor = mx.util.get_cuda_compute_capability(device)
    except (AttributeError, ValueError, RuntimeError, OSError):
        return None
    return divmod(int(major_minor), 10)


def use_precision(net, precision):
    """A new model: `net` with its matrix products in `precision`; its parameters
    (shared with `net`) stay float32, and `net` stays as it was
    (`d2lbert.model.precision.compute_in`; before or after the fast path's switch,
    the same model). int8 is float32 here: its int8 model is made from the float32
    one (`run.calibration.int8_inference`)."""
    return compute_in(net, PRECISIONS.get(precision, 'float32'))


def needs_loss_scaling(precision):
    """fp16 trains with dynamic loss scaling; bf16 has float32's range and does not."""
    return precision == 'fp16'
