"""Device selection falls back to the CPU with one clear warning, and the CPU thread
count is set before MXNet loads.

The GPU cases are simulated by replacing what d2lbert asks the system
(`visible_gpus`: what nvidia-smi reports; `mxnet_has_cuda`: whether the installed MXNet
is a GPU build; `mx.context.num_gpus`: the GPUs MXNet sees), so they run anywhere.
"""
import os
import subprocess
import sys
import warnings

import mxnet as mx
import numpy as onp
import pytest

import d2lbert
from d2lbert.run import devices
from conftest import REPO_ROOT


def simulate(monkeypatch, gpus, cuda_build):
    """Pretend the driver reports `gpus` [(name, (major, minor))] and the installed
    MXNet is a CUDA build or not."""
    monkeypatch.setattr(devices, 'visible_gpus', lambda: gpus)
    monkeypatch.setattr(devices, 'mxnet_has_cuda', lambda: cuda_build)
    monkeypatch.setattr(mx.context, 'num_gpus', lambda: len(gpus) if cuda_build else 0)


def call_and_collect_warnings(function):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = function()
    return result, [str(w.message) for w in caught]


def test_this_machine_runs_on_the_cpu():
    """On this CPU-only test machine: `[mx.cpu()]`, never an empty list, no warning."""
    result, messages = call_and_collect_warnings(d2lbert.try_all_gpus)
    assert result == [mx.cpu()]
    assert d2lbert.try_gpu() == mx.cpu()
    if not devices.visible_gpus():
        assert messages == []


def test_no_gpu_means_cpu_without_warning(monkeypatch):
    simulate(monkeypatch, gpus=[], cuda_build=False)
    result, messages = call_and_collect_warnings(d2lbert.try_all_gpus)
    assert result == [mx.cpu()]
    assert messages == []


def test_cpu_only_mxnet_with_a_gpu_warns_once_and_uses_the_cpu(monkeypatch):
    """A GPU is present but the installed MXNet is the CPU-only build: one warning that
    says so and that the CPU is used."""
    simulate(monkeypatch, gpus=[('NVIDIA A100-SXM4-40GB', (8, 0))], cuda_build=False)
    result, messages = call_and_collect_warnings(d2lbert.try_all_gpus)
    assert result == [mx.cpu()]
    assert len(messages) == 1
    assert 'CPU-only build' in messages[0]
    assert 'running on the CPU' in messages[0]
    assert 'A100' in messages[0]


def test_hopper_gpu_warns_about_compute_capability_and_uses_the_cpu(monkeypatch):
    """An H100 (compute capability 9.0) with a CUDA build of MXNet 1.9.1: the wheel has
    no kernels for it, so one warning naming compute capability 9.0, and the CPU."""
    simulate(monkeypatch, gpus=[('NVIDIA H100 80GB HBM3', (9, 0))], cuda_build=True)
    result, messages = call_and_collect_warnings(d2lbert.try_all_gpus)
    assert result == [mx.cpu()]
    assert len(messages) == 1
    assert 'compute capability 9.0' in messages[0]
    assert 'H100' in messages[0]
    assert 'CPU' in messages[0]
    result, _ = call_and_collect_warnings(d2lbert.try_gpu)
    assert result == mx.cpu()


def test_ampere_gpu_is_used(monkeypatch):
    """An RTX 3090 (compute capability 8.6) with a CUDA build: `[mx.gpu(0)]`, quietly."""
    simulate(monkeypatch, gpus=[('NVIDIA GeForce RTX 3090', (8, 6))], cuda_build=True)
    result, messages = call_and_collect_warnings(d2lbert.try_all_gpus)
    assert result == [mx.gpu(0)]
    assert messages == []
    assert d2lbert.try_gpu(0) == mx.gpu(0)
    assert d2lbert.try_gpu(1) == mx.cpu()


def test_mixed_gpus_keep_only_the_usable_ones(monkeypatch):
    """GPU 0 is an H100, GPU 1 an A100: only GPU 1 is used, with one warning for GPU 0."""
    simulate(monkeypatch, gpus=[('NVIDIA H100', (9, 0)), ('NVIDIA A100', (8, 0))],
             cuda_build=True)
    result, messages = call_and_collect_warnings(d2lbert.try_all_gpus)
    assert result == [mx.gpu(1)]
    assert len(messages) == 1 and 'GPU 0' in messages[0]


def test_visible_gpus_parses_nvidia_smi(monkeypatch):
    """`visible_gpus` reads name and compute capability from nvidia-smi's CSV output
    (names may contain commas) and returns [] when nvidia-smi is missing."""
    def fake_run(*args, **kwargs):
        return subprocess.CompletedProcess(args, 0, stdout='NVIDIA H100 80GB HBM3, 9.0\n'
                                                           'Odd, Name, 8.6\n')
    monkeypatch.setattr(devices.subprocess, 'run', fake_run)
    assert devices.visible_gpus() == [('NVIDIA H100 80GB HBM3', (9, 0)), ('Odd, Name', (8, 6))]

    def missing(*args, **kwargs):
        raise FileNotFoundError('nvidia-smi')
    monkeypatch.setattr(devices.subprocess, 'run', missing)
    assert devices.visible_gpus() == []


def import_d2lbert_in_subprocess(omp_num_threads,
                                 code='import d2lbert; d2lbert.configure_cpu()'):
    """Run `code` (by default what a program calls to run as the d2lbert command does)
    in a fresh interpreter and report OMP_NUM_THREADS afterwards."""
    env = {k: v for k, v in os.environ.items() if k != 'OMP_NUM_THREADS'}
    if omp_num_threads is not None:
        env['OMP_NUM_THREADS'] = omp_num_threads
    env['PYTHONPATH'] = REPO_ROOT + os.pathsep + env.get('PYTHONPATH', '')
    code = f'import os; {code}; print(os.environ.get("OMP_NUM_THREADS"))'
    out = subprocess.run([sys.executable, '-W', 'ignore', '-c', code], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


def test_configure_cpu_sets_omp_num_threads_to_available_cores():
    """Unset, OMP_NUM_THREADS becomes the number of cores this process may use."""
    assert import_d2lbert_in_subprocess(None) == str(len(os.sched_getaffinity(0)))


def test_a_plain_import_sets_no_thread_count():
    assert import_d2lbert_in_subprocess(None, 'import d2lbert; d2lbert.BERTModel') == 'None'


def modules_loaded_by(code):
    """(whether scikit-learn, SciPy's statistics and SciPy's sparse matrices were loaded,
    whether each loads afterwards) after `code` in a fresh interpreter."""
    code = (f'import sys; {code}; print(*(name in sys.modules for name in '
            '("sklearn", "scipy.stats", "scipy.sparse"))); import sklearn.base, scipy.stats, '
            'scipy.sparse; print(sklearn.base.BaseEstimator.__name__, scipy.stats.norm.cdf(0), '
            'scipy.sparse.eye(2).nnz)')
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    out = subprocess.run([sys.executable, '-W', 'ignore', '-c', code], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()


def test_a_command_loads_mxnet_without_the_modules_it_does_not_use():
    """MXNet imports scikit-learn for its legacy FeedForward, SciPy's statistics for its
    entropy calibration and test utilities, SciPy's sparse matrices to convert them:
    the command's process (importing d2lbert.cli) skips them and can still import them;
    a library import leaves MXNet's own imports as they are."""
    pytest.importorskip('sklearn')
    loaded_after = ['BaseEstimator', '0.5', '2']
    assert modules_loaded_by('import d2lbert.cli') == ['False'] * 3 + loaded_after
    assert modules_loaded_by('import d2lbert; d2lbert.BERTModel') == ['True'] * 3 + loaded_after


def test_configure_cpu_keeps_the_users_omp_num_threads():
    """Set by the user, it is kept."""
    assert import_d2lbert_in_subprocess('3') == '3'


@pytest.mark.skipif(not hasattr(os, 'sched_getaffinity'), reason='Linux only')
def test_default_num_threads_respects_cpu_affinity():
    """In a container limited to some cores, the affinity mask counts, not the host's
    total core count."""
    from d2lbert.util.threads import default_num_threads
    assert default_num_threads() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize('ctx', [mx.cpu(0), mx.cpu(1)])
def test_to_device_gives_the_hosts_values_on_the_device_from_a_private_copy(ctx):
    """`to_device` is `np.array(host, ctx=ctx)` (values, dtype, device) without the wait
    on the engine: the device array is backed by a copy, so the caller's array stays
    writable and changing it later changes nothing on the device."""
    base = onp.arange(24, dtype=onp.int32).reshape(6, 4)
    for host in (base, base[1:5], base[:, 1:3], base.astype(onp.float32)):
        expected = host.copy()
        on_device = devices.to_device(host, ctx)
        assert isinstance(on_device, mx.np.ndarray) and on_device.ctx == ctx
        assert on_device.dtype == host.dtype and on_device.shape == host.shape
        assert host.flags.writeable
        host[...] = -1
        onp.testing.assert_array_equal(on_device.asnumpy(), expected)
        host[...] = expected
    as_int64 = devices.to_device(base.astype(onp.float32), ctx, dtype=onp.int64)
    assert as_int64.dtype == onp.int64
    onp.testing.assert_array_equal(as_int64.asnumpy(), base)

