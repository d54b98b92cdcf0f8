"""Which devices can run MXNet here: GPUs where the installed MXNet can use them,
otherwise the CPU, with one clear warning that says why."""
import subprocess
import warnings

import mxnet as mx
import numpy as onp
from mxnet.ndarray import from_numpy

from ..util.options import check_text

# The official mxnet-cu117 1.9.1 wheel ships kernels for sm_50 ... sm_86 and no PTX:
# sm_89 (Ada) runs the sm_86 binaries, Hopper (9.0) and newer cannot run it at all.
MAX_COMPUTE_CAPABILITY = (8, 9)


def visible_gpus():
    """[(name, (major, minor))] of the NVIDIA GPUs the driver reports, [] without one."""
    try:
        out = subprocess.run(
            ['nvidia-smi', '--query-gpu=name,compute_cap', '--format=csv,noheader'],
            capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        name, _, capability = line.rpartition(',')
        major, _, minor = capability.strip().partition('.')
        if major.isdigit() and minor.isdigit():
            gpus.append((name.strip(), (int(major), int(minor))))
    return gpus


def mxnet_has_cuda():
    return mx.runtime.Features().is_enabled('CUDA')


def usable_gpu_ids():
    """Ids of the GPUs this MXNet build can run on; warns once about each one it can't."""
    gpus = visible_gpus()
    if not gpus:
        return []
    if not mxnet_has_cuda():
        warnings.warn(f'{len(gpus)} GPU(s) found ({gpus[0][0]}), but the installed MXNet is a '
                      'CPU-only build: running on the CPU. For the GPU, '
                      '`pip uninstall mxnet && pip install mxnet-cu117==1.9.1` '
                      '(needs the CUDA 11 runtime, GPUs of compute capability 5.0-8.9).')
        return []
    usable = []
    for i, (name, capability) in enumerate(gpus[:mx.context.num_gpus()]):
        if capability > MAX_COMPUTE_CAPABILITY:
            warnings.warn(f'GPU {i} ({name}, compute capability {capability[0]}.{capability[1]}) '
                          'cannot run MXNet 1.9.1: its newest GPU wheel, mxnet-cu117, has '
                          'kernels up to compute capability 8.6 (8.9 compatible) and no PTX. '
                          'Skipping it; running on the CPU if no other GPU is usable.')
        else:
            usable.append(i)
    return usable


def to_device(array, ctx, dtype=None):
    """A host NumPy array (as `dtype` if given) as an `mxnet.np` array on ctx, without
    waiting for the engine.

    `np.array(array, ctx=ctx)` copies through MXNet's engine and waits for the copy,
    which the engine runs after the operators queued before it: a step's inputs then
    wait for the whole previous step (its backward pass and update) before the step
    can be queued, and the engine idles while Python sets it up (3 ms of a 37 ms
    fine-tuning step on a 2-core CPU). Here a private copy of the array is wrapped as
    it is (`from_numpy`, no engine operator) and moved to ctx by an asynchronous copy
    when ctx is not that memory's device."""
    wrapped = from_numpy(onp.array(array, dtype=dtype, order='C'), array_cls=mx.np.ndarray)
    return wrapped.as_in_ctx(ctx)


def try_gpu(i: int = 0) -> mx.Context:
    """`mx.gpu(i)` if that GPU is usable, else `mx.cpu()`, as the d2l book's:
    `net.initialize(ctx=d2lbert.try_gpu())`."""
    return mx.gpu(i) if i in usable_gpu_ids() else mx.cpu()


def try_all_gpus() -> list:
    """All usable GPUs, or `[mx.cpu()]` when there is none (never an empty list), as
    the d2l book's: `net.initialize(ctx=d2lbert.try_all_gpus())`."""
    return [mx.gpu(i) for i in usable_gpu_ids()] or [mx.cpu()]


def parse_gpu_ids(gpus):
    """'0,1' -> [0, 1]; anything else than comma-separated GPU ids is a ValueError."""
    ids = [part.strip() for part in gpus.split(',')]
    if not all(part.isdigit() for part in ids):
        raise ValueError(f'--gpus must be comma-separated GPU ids like 0,1, got {gpus!r}')
    return [int(part) for part in ids]


def check_gpu_ids(name, gpus):
    """The check of a --gpus option: None (every usable GPU) or GPU ids like '0,1'."""
    check_text(name, gpus, optional=True)
    if gpus is not None:
        parse_gpu_ids(gpus)
    return gpus


def check_devices(cpu, gpus):
    """--cpu and --gpus exclude each other (a ValueError naming both)."""
    if cpu and gpus is not None:
        raise ValueError(f'--cpu trains on the CPU, --gpus {gpus} on GPUs: choose one')


def training_contexts(cpu=False, gpus=None):
    """The devices to train on: the CPU if `cpu`, the GPUs of `gpus` ('0,1'), or every
    usable GPU else the CPU. Raises ValueError (naming the flag) for GPUs that can't be
    used."""
    if cpu or gpus is None:
        ctxs = [mx.cpu()] if cpu else ([mx.gpu(i) for i in usable_gpu_ids()] or [mx.cpu()])
    else:
        wanted = parse_gpu_ids(gpus)
        usable = usable_gpu_ids()
        missing = [i for i in wanted if i not in usable]
        if missing:
            raise ValueError(f'--gpus {gpus}: GPU id(s) {missing} not usable here '
                             f'(usable GPUs: {usable or "none"}); use --cpu')
        ctxs = [mx.gpu(i) for i in wanted]
    return ctxs
