"""The fused masked-LM loss (`d2lbert.fast.mlm_loss`: FullyConnected and the
`d2lbert_softmax_cross_entropy` kernel) and the fast path's pretraining loss
(`PretrainingObjective`, through `FastBERTModel.pretraining_loss`) give the
cross-entropy and exactly its gradient: compared with a float64 NumPy cross-entropy
and with the plain `log_softmax` formulation run through autograd.
"""
import os
import subprocess
import sys

import numpy as onp
import pytest

import d2lbert
import mxnet as mx
from mxnet import autograd, np, npx

from conftest import REPO_ROOT, make_batch, make_model
from test_hybridize import pretraining_targets

from d2lbert.fast import accelerate, kernels
from d2lbert.fast.mlm_loss import masked_lm_loss

SLOTS, HIDDENS, VOCAB = 7, 5, 11


@pytest.fixture(autouse=True)
def loaded_kernels():
    """CI has a compiler: the kernels must build (this also loads them into MXNet)."""
    assert kernels.available()


def random_inputs(seed=0, vocab=VOCAB):
    rng = onp.random.default_rng(seed)
    hidden = rng.normal(0, 1, (SLOTS, HIDDENS))
    weight = rng.normal(0, 1, (vocab, HIDDENS))
    bias = rng.normal(0, 1, vocab)
    labels = rng.integers(0, vocab, SLOTS)
    slot_weights = onp.ones(SLOTS)
    slot_weights[[2, 5]] = 0  # padding slots
    return hidden, weight, bias, labels, slot_weights


def numpy_loss_and_gradients(hidden, weight, bias, labels, slot_weights):
    """Weighted mean cross-entropy and its gradients, in float64 NumPy."""
    logits = hidden @ weight.T + bias
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - onp.log(onp.exp(logits).sum(axis=1, keepdims=True))
    probs = onp.exp(log_probs)
    share = slot_weights / slot_weights.sum()
    loss = -(share * log_probs[onp.arange(SLOTS), labels]).sum()
    dlogits = probs.copy()
    dlogits[onp.arange(SLOTS), labels] -= 1
    dlogits *= share[:, None]
    return loss, dlogits @ weight, dlogits.T @ hidden, dlogits.sum(axis=0)


def fused_loss_and_gradients(hidden, weight, bias, labels, slot_weights, scale=1.0):
    arrays = [np.array(a, dtype='float32') for a in (hidden, weight, bias)]
    for array in arrays:
        array.attach_grad()
    with autograd.record():
        loss, _ = masked_lm_loss(mx.nd, *arrays, np.array(labels, dtype='int32'),
                                 np.array(slot_weights, dtype='float32'), len(bias))
        (loss * scale).backward()
    return (float(loss),) + tuple(a.grad.asnumpy() for a in arrays)


@pytest.mark.parametrize('vocab', [VOCAB, 1031])  # 1031: vector loops and a remainder
def test_fused_loss_equals_numpy_cross_entropy_and_its_gradients(vocab):
    inputs = random_inputs(vocab=vocab)
    expected = numpy_loss_and_gradients(*inputs)
    actual = fused_loss_and_gradients(*inputs)
    assert abs(actual[0] - expected[0]) < 1e-5
    for a, e, name in zip(actual[1:], expected[1:], ('hidden', 'weight', 'bias')):
        assert onp.abs(a - e).max() < 1e-5, name
    # Padding slots get no gradient; real slots do.
    assert onp.abs(actual[1][[2, 5]]).max() == 0
    assert onp.abs(actual[1][[0, 1, 3]]).min() > 1e-4


def test_fused_gradient_follows_the_head_gradient():
    """Scaling the loss (as data-parallel training does) scales its gradient."""
    inputs = random_inputs(seed=1)
    once, thrice = fused_loss_and_gradients(*inputs), fused_loss_and_gradients(*inputs, 3.0)
    for a, b in zip(once[1:], thrice[1:]):
        assert onp.allclose(3 * a, b, atol=1e-6)


def test_underflowed_probability_keeps_the_exact_loss_and_gradient():
    """The correct word 200 nats below the best: its probability is 0 in float32, but
    the loss is log-sum-exp minus the logit, finite and exact; the gradient is still
    p - onehot(y)."""
    hidden, weight, bias, labels, slot_weights = random_inputs(seed=2)
    bias[labels[0]] -= 200
    loss, grad_hidden, _, grad_bias = fused_loss_and_gradients(hidden, weight, bias, labels,
                                                              slot_weights)
    expected = numpy_loss_and_gradients(hidden, weight, bias, labels, slot_weights)
    assert onp.isfinite(loss) and abs(loss - expected[0]) < 1e-5 * expected[0]
    assert onp.abs(grad_hidden - expected[1]).max() < 1e-5
    assert onp.abs(grad_bias - expected[3]).max() < 1e-5


BIAS_GRADIENT_WITH_THREE_THREADS = r'''
import mxnet as mx, numpy as onp
from mxnet import autograd, np
from d2lbert.fast import kernels
assert kernels.available()
rng = onp.random.default_rng(4)
z, b, dlse = rng.normal(0, 3, (300, 517)), rng.normal(0, 1, 517), rng.normal(0, 1, 300)

def bias_gradient(z, dlse):
    z, bias = np.array(z, dtype='float32'), np.array(b, dtype='float32')
    bias.attach_grad()
    with autograd.record():
        lse = kernels.log_sum_exp(mx.nd, z, bias)
    lse.backward(np.array(dlse, dtype='float32'))
    return bias.grad.asnumpy()

padded = bias_gradient(onp.concatenate([z, rng.normal(0, 3, (200, 517))]),
                       onp.concatenate([dlse, onp.zeros(200)]))
exact = bias_gradient(z, dlse)
logits = z + b
softmax = onp.exp(logits - logits.max(1, keepdims=True))
expected = (dlse[:, None] * softmax / softmax.sum(1, keepdims=True)).sum(0)
print('equal', onp.array_equal(padded, exact), 'error', onp.abs(exact - expected).max())
'''


def test_bias_gradient_is_independent_of_threads_and_padding_rows():
    """The kernel sums the bias gradient over the rows in fixed blocks (common.h): with
    3 threads, 200 more rows of zero gradient (padding slots) give the same bits, and
    both agree with a float64 NumPy softmax."""
    result = subprocess.run([sys.executable, '-c', BIAS_GRADIENT_WITH_THREE_THREADS],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, 'PYTHONPATH': REPO_ROOT, 'OMP_NUM_THREADS': '3'})
    assert result.returncode == 0, result.stderr
    equal, error = result.stdout.split()[1], float(result.stdout.split()[3])
    assert equal == 'True' and error < 1e-5, result.stdout


def plain_pretraining_loss(net, batch, targets):
    """The textbook formulation: logits from the model, then log_softmax and pick."""
    _, mlm_logits, nsp_logits = net(**batch)
    weights = targets['mlm_weights']
    mlm_nll = -npx.pick(npx.log_softmax(mlm_logits), targets['mlm_labels'])
    mlm_loss = (mlm_nll * weights).sum() / weights.sum()
    nsp_loss = -npx.pick(npx.log_softmax(nsp_logits), targets['nsp_labels']).mean()
    return mlm_loss, nsp_loss


def gradients(net, loss_function, batch, targets):
    params = net.collect_params()
    params.zero_grad()
    with autograd.record(train_mode=False):
        mlm_loss, nsp_loss = loss_function(batch, targets)[:2]
        (0.7 * mlm_loss + 1.3 * nsp_loss).backward()
    return [float(mlm_loss), float(nsp_loss)], {
        name: p.grad().asnumpy().copy() for name, p in params.items()}


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_pretraining_loss_gradients_equal_the_plain_formulation(arch, hybridize):
    """Every parameter's gradient, tied output weight included ('original')."""
    net = accelerate(make_model(arch))
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    batch = make_batch(seed=20)
    targets = pretraining_targets(batch, seed=20)
    fused = gradients(net, lambda b, t: net.pretraining_loss(**b, **t), batch, targets)
    plain = gradients(net, lambda b, t: plain_pretraining_loss(net, b, t), batch, targets)
    assert onp.allclose(fused[0], plain[0], atol=1e-5)
    for name, grad in plain[1].items():
        scale = max(onp.abs(grad).max(), 1e-3)
        assert onp.abs(fused[1][name] - grad).max() <= 1e-4 * scale, name
    assert any(onp.abs(g).max() > 0 for n, g in fused[1].items() if 'output_weight' in n
               or 'embedding' in n)


def test_accuracy_and_evaluation_graphs_give_the_same_losses():
    """with_accuracy adds the accuracies; outside autograd (evaluation) the loss is the
    same as the training graph's. The output layer's bias is large enough to decide
    most predictions (the kernel adds it, the accuracy's argmax must too)."""
    net = accelerate(make_model('d2l'))
    bias = net.mlm.output_bias
    bias.set_data(np.array(onp.random.default_rng(21).normal(0, 1, bias.shape),
                           dtype='float32'))
    net.hybridize()
    batch = make_batch(seed=21)
    targets = pretraining_targets(batch, seed=21)
    # Make about half of the slots correct, so that the accuracies are not trivially 0.
    _, mlm, nsp = net(**batch)
    labels = targets['mlm_labels'].asnumpy()
    labels[:, ::2] = mlm.asnumpy().argmax(-1)[:, ::2]
    targets['mlm_labels'] = np.array(labels, dtype='int32')
    targets['nsp_labels'] = np.array(nsp.asnumpy().argmax(-1) * [1, 1, 1, 0] + [0, 0, 0, 1] *
                                     (1 - nsp.asnumpy().argmax(-1)), dtype='int32')
    evaluated = [float(v) for v in net.pretraining_loss(**batch, **targets,
                                                        with_accuracy=True)]
    with autograd.record(train_mode=False):
        trained = [float(v) for v in net.pretraining_loss(**batch, **targets)]
    assert onp.allclose(evaluated[:2], trained, atol=1e-6)
    weights = targets['mlm_weights'].asnumpy()
    correct = mlm.asnumpy().argmax(-1) == labels
    assert 0.3 < (correct * weights).sum() / weights.sum() < 1
    assert abs(evaluated[2] - (correct * weights).sum() / weights.sum()) < 1e-6
    nsp_correct = nsp.asnumpy().argmax(-1) == targets['nsp_labels'].asnumpy()
    assert nsp_correct.mean() == 0.75
    assert abs(evaluated[3] - nsp_correct.mean()) < 1e-6


@pytest.mark.parametrize('field, value, message', [
    ('mlm_labels', 64, 'mlm_labels'), ('nsp_labels', 2, 'nsp_labels'),
    ('mlm_weights', 'shape', 'mlm_weights shape')])
def test_bad_targets_give_a_clear_error(field, value, message):
    net = accelerate(make_model('d2l'))
    batch = make_batch(seed=22)
    targets = pretraining_targets(batch, seed=22)
    array = targets[field].asnumpy()
    if value == 'shape':
        array = array[:, :-1]
    else:
        array.flat[0] = value
    targets[field] = np.array(array, dtype=array.dtype)
    with d2lbert.check_values(), pytest.raises(ValueError, match=message):
        net.pretraining_loss(**batch, **targets)
