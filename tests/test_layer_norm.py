"""The fast path's LayerNorm (`d2lbert.fast.FusedLayerNorm`) and its C++ kernel
(`d2lbert.fast.kernels`): values and gradients against a float64 NumPy LayerNorm,
gradient accumulation (grad_req='add'), several OpenMP threads, and the book's
LayerNorm (MXNet's) where the kernel can't run.
"""
import os
import subprocess
import sys

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from mxnet.gluon import nn

from conftest import REPO_ROOT
from d2lbert.fast import FusedLayerNorm, accelerate, kernels


def numpy_layer_norm(x, gamma, beta, dy, eps):
    """float64 LayerNorm over the last axis: y and the gradients of sum(y * dy)
    w.r.t. x, gamma and beta (the textbook formulas)."""
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / onp.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    rows = tuple(range(x.ndim - 1))
    return xhat * gamma + beta, dx, (dy * xhat).sum(axis=rows), dy.sum(axis=rows)


def random_case(shape, seed=0):
    rng = onp.random.default_rng(seed)
    hiddens = shape[-1]
    x = rng.normal(0.5, 2.0, size=shape)
    gamma = 1.0 + rng.normal(0.0, 0.5, size=hiddens)
    beta = rng.normal(0.0, 0.5, size=hiddens)
    dy = rng.normal(0.0, 1.0, size=shape)
    return x, gamma, beta, dy


def run_block(x, gamma, beta, dy, eps, hybridize, passes=1, grad_req='write', fast=True):
    """y and the gradients of a LayerNorm, accelerated (fast) or the book's (MXNet's),
    after `passes` backward passes."""
    norm = nn.LayerNorm(epsilon=eps, in_channels=x.shape[-1])
    norm.initialize()
    if fast:
        norm = accelerate(norm)
    norm.gamma.set_data(np.array(gamma, dtype='float32'))
    norm.beta.set_data(np.array(beta, dtype='float32'))
    norm.collect_params().setattr('grad_req', grad_req)
    if hybridize:
        norm.hybridize(static_alloc=True, static_shape=True)
    X = np.array(x, dtype='float32')
    X.attach_grad(grad_req=grad_req)
    for _ in range(passes):
        with autograd.record():
            Y = norm(X)
        Y.backward(np.array(dy, dtype='float32'))
    return [a.asnumpy() for a in (Y, X.grad, norm.gamma.grad(), norm.beta.grad())]


def assert_close(actual, expected, rtol=1e-5):
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert onp.abs(a - e).max() <= rtol * (1.0 + onp.abs(e).max())


def test_the_kernel_builds_and_is_used():
    """CI has a compiler: the fast path must be the one the other tests exercise."""
    assert kernels.available()
    norm = accelerate(nn.LayerNorm(in_channels=8))
    assert isinstance(norm, FusedLayerNorm)
    norm.initialize()
    norm.hybridize()
    norm(np.ones((2, 8)))
    symbol = norm._cached_graph[1]
    assert 'd2lbert_layer_norm' in symbol.tojson()


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
@pytest.mark.parametrize('shape,eps', [((4, 7, 32), 1e-5), ((5, 37), 1e-12), ((3, 2, 2, 256), 1e-5)])
def test_matches_numpy_layer_norm(shape, eps, hybridize):
    x, gamma, beta, dy = random_case(shape)
    actual = run_block(x, gamma, beta, dy, eps, hybridize)
    assert_close(actual, numpy_layer_norm(x, gamma, beta, dy, eps))


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_gradients_accumulate_with_grad_req_add(hybridize):
    """The kernel overwrites its outputs; with grad_req='add' two backward passes must
    still give twice the gradient, for the input and for gamma and beta."""
    x, gamma, beta, dy = random_case((3, 5, 16), seed=1)
    y, dx, dgamma, dbeta = numpy_layer_norm(x, gamma, beta, dy, 1e-5)
    actual = run_block(x, gamma, beta, dy, 1e-5, hybridize, passes=2, grad_req='add')
    assert_close(actual, [y, 2 * dx, 2 * dgamma, 2 * dbeta])


def test_the_books_layer_norm_gives_the_same_results():
    """The book's model runs MXNet's LayerNorm (GPU, no compiler, --plain)."""
    x, gamma, beta, dy = random_case((4, 6, 24), seed=2)
    fused = run_block(x, gamma, beta, dy, 1e-5, hybridize=True)
    plain = run_block(x, gamma, beta, dy, 1e-5, hybridize=True, fast=False)
    assert_close(fused, plain)


def test_parameter_gradients_over_many_rows_stay_accurate():
    """dgamma and dbeta sum every row. Over 65,536 rows whose gradients share a sign, a
    float32 running sum is off by 5e-6, and float32 sums of 64 rows added in float32 by
    9e-7 (NumPy); added in double, as the kernel does, they stay within 2e-7."""
    x, gamma, beta, dy = random_case((65536, 16), seed=4)
    dy = onp.abs(dy)
    _, _, dgamma, dbeta = run_block(x, gamma, beta, dy, 1e-5, hybridize=True)
    _, _, expected_dgamma, expected_dbeta = numpy_layer_norm(x, gamma, beta, dy, 1e-5)
    assert onp.abs(dbeta / expected_dbeta - 1).max() < 2e-7
    assert onp.abs(dgamma - expected_dgamma).max() < 1e-7 * onp.abs(dy * x).sum(axis=0).max()


SEVERAL_THREADS = r'''
import sys, warnings
sys.path.insert(0, sys.argv[1])
from test_layer_norm import numpy_layer_norm, random_case, run_block, assert_close
from d2lbert.fast import kernels
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    available = kernels.available()
print('available', available, [str(w.message) for w in caught])
x, gamma, beta, dy = random_case((7, 11, 64), seed=3)   # 77 rows over 3 threads
assert_close(run_block(x, gamma, beta, dy, 1e-5, hybridize=True),
             numpy_layer_norm(x, gamma, beta, dy, 1e-5))
print('ok')
'''


def run_script(tmp_path, **env):
    env = {**os.environ, 'PYTHONPATH': REPO_ROOT, **env}
    return subprocess.run([sys.executable, '-c', SEVERAL_THREADS,
                           os.path.join(REPO_ROOT, 'tests')],
                          capture_output=True, text=True, env=env, timeout=300)


def test_three_openmp_threads_agree_with_numpy(tmp_path):
    """The gamma/beta sums are partial sums over blocks of rows: check them with 3 threads."""
    result = run_script(tmp_path, OMP_NUM_THREADS='3')
    assert result.returncode == 0, result.stderr
    assert 'available True' in result.stdout and 'ok' in result.stdout


def test_no_compiler_warns_and_falls_back(tmp_path):
    result = run_script(tmp_path, CXX=str(tmp_path / 'no-such-compiler'),
                        D2LBERT_KERNEL_CACHE=str(tmp_path / 'cache'))
    assert result.returncode == 0, result.stderr
    assert 'available False' in result.stdout and 'ok' in result.stdout
    assert 'no C++ compiler' in result.stdout and "MXNet's own operators" in result.stdout


def test_switched_off_on_purpose_without_a_warning(tmp_path):
    result = run_script(tmp_path, D2LBERT_FUSED_KERNELS='0')
    assert result.returncode == 0, result.stderr
    assert 'available False []' in result.stdout and 'ok' in result.stdout


def test_float16_runs_mxnets_layer_norm():
    """The kernel is float32 only; a float16 model stays the book's."""
    x, gamma, beta, dy = random_case((2, 3, 16), seed=4)
    norm = nn.LayerNorm(in_channels=16)
    norm.initialize()
    norm.cast('float16')
    norm = accelerate(norm)
    assert type(norm) is nn.LayerNorm
    norm.hybridize()
    Y = norm(np.array(x, dtype='float16'))
    expected = numpy_layer_norm(x, onp.ones(16), onp.zeros(16), dy, 1e-5)[0]
    assert Y.dtype == onp.float16
    assert onp.abs(Y.asnumpy() - expected).max() < 1e-2
