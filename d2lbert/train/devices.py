"""Which devices can run MXNet here: GPUs where the installed MXNet can use them,
otherwise the CPU, with one clear warning that says why."""
import subprocess
import warnings

import mxnet as mx

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


def try_gpu(i=0):
    """`mx.gpu(i)` if that GPU is usable, else `mx.cpu()`."""
    return mx.gpu(i) if i in usable_gpu_ids() else mx.cpu()


def try_all_gpus():
    """All usable GPUs, or `[mx.cpu()]` when there is none (never an empty list)."""
    return [mx.gpu(i) for i in usable_gpu_ids()] or [mx.cpu()]
