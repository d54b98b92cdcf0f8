"""d2lbert's kernels with dropout inside: add & norm (`d2lbert_add_layer_norm`), dropout
(`d2lbert_dropout`) and the input embedding (`d2lbert_embedding`), each against a
float64 NumPy version with the kernel's own mask (recomputed from its seed); the
training flag; and the blocks built on them against MXNet's operators.
"""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from conftest import make_batch, make_model
from d2lbert.fast import FusedAddNorm, accelerate, kernels
from d2lbert.model import AddNorm
from dropout_masks import dropout_mask
from test_layer_norm import assert_close, numpy_layer_norm

TRAINING, NOT_TRAINING = 2.0, 1.0


@pytest.fixture(autouse=True)
def loaded_kernels():
    assert kernels.available()


def record(function, inputs, head_gradient):
    """Outputs of function(*inputs) (legacy arrays) and the inputs' gradients for the
    head gradient of output 0."""
    arrays = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    for array in arrays:
        if array.dtype == onp.float32:
            array.attach_grad()
    with autograd.record():
        outputs = function(*arrays)
    outputs[0].backward(mx.nd.array(head_gradient))
    grads = [a.grad.asnumpy() if a.dtype == onp.float32 else None for a in arrays]
    return [o.asnumpy() for o in outputs], grads


@pytest.mark.parametrize('rate, flag', [(0.0, TRAINING), (0.3, TRAINING), (0.3, NOT_TRAINING)],
                         ids=['no-dropout', 'training', 'not-training'])
def test_add_layer_norm_matches_numpy(rate, flag):
    rng = onp.random.default_rng(0)
    x, z, dy = (rng.normal(size=(5, 7, 48)).astype('float32') for _ in range(3))
    gamma, beta = (rng.normal(1.0, 0.5, 48).astype('float32'),
                   rng.normal(0.0, 0.5, 48).astype('float32'))
    (y, _, _, seed), (dx, dz, dgamma, dbeta, _) = record(
        lambda *a: mx.nd.d2lbert_add_layer_norm(*a, eps=1e-5, dropout=rate),
        [x, z, gamma, beta, onp.array([flag], dtype='float32')], dy)
    active = rate > 0 and flag == TRAINING
    mask = (dropout_mask(seed, onp.arange(35), 48, rate).reshape(x.shape) if active
            else onp.ones(x.shape))
    f64 = [a.astype('float64') for a in (x, z, gamma, beta, dy)]
    expected_y, ds, expected_dgamma, expected_dbeta = numpy_layer_norm(
        f64[0] + f64[1] * mask, *f64[2:], 1e-5)
    assert_close([y, dx, dz, dgamma, dbeta],
                 [expected_y, ds, ds * mask, expected_dgamma, expected_dbeta])
    if active:
        assert 0.5 < (mask > 0).mean() < 0.9


def test_dropout_kernel_matches_its_mask_and_keeps_1_minus_p():
    rng = onp.random.default_rng(1)
    x, dy = rng.normal(size=(2, 300, 128)).astype('float32'), rng.normal(size=(2, 300, 128))
    (y, seed), (dx, _) = record(lambda *a: mx.nd.d2lbert_dropout(*a, dropout=0.2),
                                [x, onp.array([TRAINING], dtype='float32')], dy)
    mask = dropout_mask(seed, onp.arange(600), 128, 0.2).reshape(x.shape)
    assert_close([y, dx], [x * mask, dy * mask])
    assert abs((mask > 0).mean() - 0.8) < 0.01   # 76,800 elements
    (y, _), (dx, _) = record(lambda *a: mx.nd.d2lbert_dropout(*a, dropout=0.2),
                             [x, onp.array([NOT_TRAINING], dtype='float32')], dy)
    assert (y == x).all() and onp.allclose(dx, dy)


def test_embedding_kernel_matches_numpy():
    """token vectors + segment and position embeddings, dropout; the tables' gradients
    sum over every row that looked them up (ids repeat)."""
    rng = onp.random.default_rng(2)
    shape, H, rate = (6, 9), 40, 0.25
    vectors, dx = rng.normal(size=shape + (H,)).astype('float32'), rng.normal(size=shape + (H,))
    segments = rng.integers(0, 2, size=shape).astype('int32')
    positions = onp.tile(onp.arange(9, dtype='int32'), (6, 1))
    segment_table, position_table = (rng.normal(size=(2, H)).astype('float32'),
                                     rng.normal(size=(12, H)).astype('float32'))
    (x, seed), grads = record(
        lambda *a: mx.nd.d2lbert_embedding(*a, dropout=rate),
        [vectors, segments, positions, segment_table, position_table,
         onp.array([TRAINING], dtype='float32')], dx)
    mask = dropout_mask(seed, onp.arange(54), H, rate).reshape(x.shape)
    summed = vectors + segment_table[segments] + position_table[positions]
    dsum = dx * mask
    dsegment, dposition = onp.zeros((2, H)), onp.zeros((12, H))
    onp.add.at(dsegment, segments.reshape(-1), dsum.reshape(-1, H))
    onp.add.at(dposition, positions.reshape(-1), dsum.reshape(-1, H))
    assert_close([x, grads[0], grads[3], grads[4]], [summed * mask, dsum, dsegment, dposition])


def test_training_flag_follows_mxnets_training_mode():
    one = np.ones((4,))
    assert float(kernels.training_flag(mx.nd, one)) == 1.0   # inference
    with autograd.train_mode():
        assert float(kernels.training_flag(mx.nd, one)) in (0.0, 2.0)
    with autograd.record():
        assert float(kernels.training_flag(mx.nd, one)) in (0.0, 2.0)
    with autograd.record(train_mode=False):
        assert float(kernels.training_flag(mx.nd, one)) == 1.0


def add_norm_outputs(X, Y, dropout, hybridize, fast):
    mx.random.seed(0)
    block = AddNorm(X.shape[-1], dropout)
    block.initialize()
    if fast:
        block = accelerate(block)
    block.gamma.set_data(np.array(onp.linspace(0.5, 1.5, X.shape[-1]), dtype='float32'))
    block.collect_params().setattr('grad_req', 'add')
    if hybridize:
        block.hybridize(static_alloc=True, static_shape=True)
    X, Y = X.copy(), Y.copy()
    X.attach_grad(grad_req='add')
    for _ in range(2):  # gradients must add up over two passes
        with autograd.record():
            Z = block(X, Y)
        Z.backward(np.array(onp.random.default_rng(3).normal(size=Z.shape), dtype='float32'))
    return [Z.asnumpy(), X.grad.asnumpy(), block.gamma.grad().asnumpy(),
            block.beta.grad().asnumpy()]


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_add_norm_block_matches_the_books(hybridize):
    """AddNorm = LayerNorm(X + dropout(Y)): the kernel and MXNet's Dropout, + and
    LayerNorm agree (dropout 0, so that the masks play no part), also with
    grad_req='add'."""
    rng = onp.random.default_rng(4)
    X, Y = (np.array(rng.normal(size=(3, 5, 24)), dtype='float32') for _ in range(2))
    fused = add_norm_outputs(X, Y, 0.0, hybridize, fast=True)
    assert_close(fused, add_norm_outputs(X, Y, 0.0, hybridize, fast=False))


def test_add_norm_block_drops_only_while_training():
    block = accelerate(AddNorm(16, 0.5))
    assert isinstance(block, FusedAddNorm)
    block.initialize()
    rng = onp.random.default_rng(6)
    x, y = rng.normal(size=(4, 16)), rng.normal(size=(4, 16))
    X, Y = np.array(x, dtype='float32'), np.array(y, dtype='float32')
    plain = numpy_layer_norm(x + y, onp.ones(16), onp.zeros(16), onp.zeros((4, 16)), 1e-5)[0]
    assert_close([block(X, Y).asnumpy()], [plain])  # inference: no dropout
    with autograd.record():
        trained = block(X, Y)
    assert onp.abs(trained.asnumpy() - plain).max() > 0.1


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_encoder_with_kernels_matches_the_books(arch, hybridize):
    """The whole encoder (fused embedding, attention, add & norm; for Google's
    architecture also the embedding LayerNorm) against MXNet's operators: outputs at
    every valid position and every parameter's gradient, with grad_req='add'."""
    batch = make_batch(seed=5)
    valid = onp.arange(10)[None, :] < batch['valid_lens'].asnumpy()[:, None]

    def run(fast):
        net = make_model(arch, seed=1)
        if fast:
            net = accelerate(net)
        net.collect_params().setattr('grad_req', 'add')
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        with autograd.record():
            encoded = net.encoder(batch['tokens'], batch['segments'], batch['valid_lens'])
        encoded.backward(np.array(valid[:, :, None] * onp.linspace(-1, 1, 32),
                                  dtype='float32'))
        grads = {name: p.grad().asnumpy()
                 for name, p in net.encoder._collect_params_with_prefix().items()}
        return encoded.asnumpy() * valid[:, :, None], grads

    fused, fused_grads = run(fast=True)
    plain, plain_grads = run(fast=False)
    assert_close([fused], [plain])
    for name in plain_grads:
        assert_close([fused_grads[name]], [plain_grads[name]])


ROW_COUNT_SCRIPT = r'''
import sys
sys.path.insert(0, sys.argv[1])
import numpy as onp
import mxnet as mx
from mxnet import autograd
from d2lbert.fast import kernels
assert kernels.available()
rng = onp.random.default_rng(0)
x, z, dy = (rng.normal(size=(300, 64)).astype('float32') for _ in range(3))
gamma, beta = onp.ones(64, dtype='float32'), onp.zeros(64, dtype='float32')
grads = []
for extra in (0, 77):
    pad = lambda a, value: onp.concatenate([a, onp.full((extra, 64), value, dtype='float32')])
    arrays = [mx.nd.array(a) for a in (pad(x, 1.0), pad(z, 2.0), gamma, beta, [2.0])]
    for a in arrays[:4]:
        a.attach_grad()
    mx.random.seed(3)
    with autograd.record():
        y = mx.nd.d2lbert_add_layer_norm(*arrays, dropout=0.1)[0]
    y.backward(mx.nd.array(pad(dy, 0.0)))
    grads.append([a.grad.asnumpy() for a in arrays[2:4]])
print('equal', all((a == b).all() for a, b in zip(*grads)))
'''


def test_parameter_gradients_do_not_depend_on_the_row_count_or_threads():
    """dgamma and dbeta are summed in fixed blocks of rows: rows with zero gradient
    appended (what rounding a packed batch up adds) leave them bit-for-bit the same,
    with several threads too."""
    import os
    import subprocess
    import sys
    from conftest import REPO_ROOT
    result = subprocess.run([sys.executable, '-c', ROW_COUNT_SCRIPT, REPO_ROOT],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, 'OMP_NUM_THREADS': '3'})
    assert result.returncode == 0, result.stderr
    assert 'equal True' in result.stdout
