"""The book's model (`d2lbert.model`) and the fast path (`d2lbert.fast.accelerate`)
compute the same thing: outputs, losses and every parameter's gradient agree within
1e-5 with dropout 0 (padded and packed batches, both architectures); a checkpoint
saved by one loads into the other; a training step copies nothing from the device."""
import logging

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from conftest import make_model
from d2lbert import fast
from d2lbert.model import BERTModel
from d2lbert.run.optimizer import make_trainer
from d2lbert.run.setup import prepare_inference, prepare_training
from d2lbert.pretraining.step import forward_backward
from d2lbert.run.step import optimizer_step, trainable_parameters
from test_packing import on_device, pretraining_batch


def assert_close(actual, expected, name=''):
    actual, expected = onp.asarray(actual), onp.asarray(expected)
    assert actual.shape == expected.shape, name
    assert onp.abs(actual - expected).max() <= 1e-5 * (1 + onp.abs(expected).max()), name


def same_parameters(net, other):
    """Do the two models hold the very same Parameter objects, under the same names?"""
    params, others = net.collect_params(), other.collect_params()
    return (list(params.keys()) == list(others.keys())
            and all(params[name] is others[name] for name in params.keys()))


def gradients(net):
    return {name: p.grad().asnumpy() for name, p in net._collect_params_with_prefix().items()}


def loss_and_gradients(net, batch, packed=False):
    """The pretraining losses of a host batch and the gradients of their sum."""
    options = {}
    if packed:
        options = {'token_index': np.array(batch.token_index(), dtype='int32'),
                   'slot_index': np.array(batch.slot_index(), dtype='int32')}
    with autograd.record():
        mlm, nsp = net.pretraining_loss(*on_device(batch), **options)
        (mlm + nsp).backward()
    return [float(mlm), float(nsp)], gradients(net)


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
@pytest.mark.parametrize('packed', [False, True], ids=['padded', 'packed'])
def test_fast_losses_and_gradients_equal_the_books(arch, packed, hybridize):
    batch = pretraining_batch(seed=3)
    book = make_model(arch, seed=2)
    quick = fast.accelerate(make_model(arch, seed=2))
    assert type(book) is BERTModel and isinstance(quick, fast.FastBERTModel)
    for net in (book, quick):
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
    expected_losses, expected_grads = loss_and_gradients(book, batch)
    losses, grads = loss_and_gradients(quick, batch, packed)
    assert set(quick.objectives()) == {(False, packed)}
    assert_close(losses, expected_losses)
    assert set(grads) == set(expected_grads)
    for name, grad in expected_grads.items():
        assert_close(grads[name], grad, name)


def test_fast_forward_equals_the_books(arch):
    """The sequence output (at valid positions), NSP and MLM logits."""
    batch = pretraining_batch(seed=4)
    inputs = on_device(batch)[:4]
    book, quick = make_model(arch, seed=5), fast.accelerate(make_model(arch, seed=5))
    valid = onp.arange(batch.tokens.shape[1]) < batch.valid_lens[:, None]
    for expected, actual in zip(book(*inputs), quick(*inputs)):
        expected, actual = expected.asnumpy(), actual.asnumpy()
        if expected.ndim == 3 and expected.shape[1] == valid.shape[1]:
            expected, actual = expected[valid], actual[valid]
        assert_close(actual, expected)


@pytest.mark.parametrize('direction', ['book-to-fast', 'fast-to-book'])
def test_a_checkpoint_loads_into_either_path(arch, direction, tmp_path):
    inputs = on_device(pretraining_batch(seed=6))[:4]
    source = make_model(arch, seed=7)
    target = make_model(arch, seed=8)  # other weights, until loaded
    if direction == 'fast-to-book':
        source = fast.accelerate(source)
    else:
        target = fast.accelerate(target)
    path = str(tmp_path / 'model.params')
    source.save_parameters(path)
    target.load_parameters(path)
    for expected, actual in zip(source(*inputs), target(*inputs)):
        assert_close(actual.asnumpy(), expected.asnumpy())


def test_a_training_step_copies_nothing_from_the_device(monkeypatch):
    """The packing index comes from the host batch; losses stay on the device."""
    net = fast.accelerate(make_model('d2l', seed=9))
    net.hybridize(static_alloc=True, static_shape=True)
    net.collect_params().setattr('grad_req', 'add')
    trainer = make_trainer(net, 'bertadam', 1e-3, fast_path=fast)
    batch = pretraining_batch(seed=10)
    forward_backward(net, [batch], [mx.cpu()], with_accuracy=False)  # warm up
    optimizer_step(trainable_parameters(net), trainer, clip=1.0)
    mx.nd.waitall()
    copies = []
    for cls in (mx.np.ndarray, mx.nd.NDArray):
        real = cls.asnumpy
        monkeypatch.setattr(cls, 'asnumpy', lambda self, real=real: copies.append(1) or real(self))
    losses = forward_backward(net, [batch], [mx.cpu()], with_accuracy=False)
    optimizer_step(trainable_parameters(net), trainer, clip=1.0)
    assert copies == []
    assert set(net.objectives()) >= {(False, True)}  # it ran packed
    assert onp.isfinite(float(losses[0]))


def test_what_cannot_run_fast_stays_the_books_model_and_says_why(caplog):
    net = make_model('d2l', seed=11)
    net.cast('float16')
    with caplog.at_level(logging.WARNING, logger='d2lbert'):
        model = fast.accelerate(net)
    assert model is not net and same_parameters(model, net)
    assert type(model) is BERTModel and type(model.encoder.blocks[0].attention).__name__ == \
        'MultiHeadAttention'
    assert len(caplog.records) == 1 and 'float32' in caplog.records[0].getMessage()


def test_switched_off_on_purpose_it_stays_silent(caplog, monkeypatch):
    monkeypatch.setenv('D2LBERT_FUSED_KERNELS', '0')
    net = make_model('d2l', seed=12)
    with caplog.at_level(logging.WARNING, logger='d2lbert'):
        model = fast.accelerate(net)
    assert type(model) is BERTModel and caplog.records == []


@pytest.mark.parametrize('fast_path', [None, fast], ids=['book', 'fast'])
def test_the_setup_switches_to_the_fast_path_it_is_handed(fast_path):
    """`run.setup` (every command's and the bench's setup) runs the fast path only when
    handed it: its blocks, its fused optimizer; gradients add up; the same outputs."""
    book = make_model('d2l', seed=13)
    net = make_model('d2l', seed=13)
    net, trainer = prepare_training(net, 'bertadam', 1e-3, fast_path=fast_path)
    assert fast.is_fast(net) == (fast_path is not None)
    assert isinstance(trainer.optimizer, fast.FusedBERTAdam) == (fast_path is not None)
    assert {param.grad_req for param in net.collect_params().values()} == {'add'}
    inputs = on_device(pretraining_batch(seed=14))[:4]
    _, *expected = book(*inputs)  # the MLM and NSP logits (the encodings differ at padding)
    _, *actual = prepare_inference(net, 'fp32')(*inputs)
    for ours, reference in zip(actual, expected):
        assert_close(ours.asnumpy(), reference.asnumpy())
