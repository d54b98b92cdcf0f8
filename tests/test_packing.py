"""Packing (`d2lbert.packing`): the encoder on the valid tokens only gives the same
losses and gradients as on the padded batch, does not depend on how far the row count
was rounded up, and is used by `pretraining_loss` only where it is exact."""
import numpy as onp
import pytest
from mxnet import autograd, np

from conftest import VOCAB_SIZE, make_batch, make_model
from d2lbert import kernels, packing
from d2lbert.data.batches import plan_epoch


def test_token_index_lists_the_valid_tokens_then_pads():
    lengths = onp.array([2, 3, 1])
    # 3 x 4 = 12 padded tokens, granule ceil(12 / 32) = 1: 6 rows
    assert packing.packed_rows(lengths, 4) == 6
    assert packing.token_index(lengths, 4).tolist() == [0, 1, 4, 5, 6, 8]
    lengths = onp.array([5] * 64)  # 64 x 8 = 512 tokens, granule 16: 320 -> 320
    assert packing.packed_rows(lengths, 8) == 320
    assert packing.packed_rows(onp.array([5] * 63 + [6]), 8) == 336
    index = packing.token_index(onp.array([5] * 63 + [6]), 8)
    assert len(index) == 336 and (index[321:] == 0).all() and index[320] == 63 * 8 + 5


def test_a_slot_on_padding_is_not_packable():
    lengths = onp.array([3, 2])
    assert packing.packable(lengths, onp.array([[1, 2], [1, 0]]))
    assert not packing.packable(lengths, onp.array([[1, 2], [1, 2]]))


def pretraining_batch(seed=0, **options):
    batch = make_batch(seed=seed, **options)
    rng = onp.random.default_rng(seed)
    shape = batch['pred_positions'].shape
    weights = onp.ones(shape, dtype='float32')
    weights[0, -1] = 0  # a padding slot
    return [batch['tokens'], batch['segments'], batch['valid_lens'], batch['pred_positions'],
            np.array(weights), np.array(rng.integers(1, VOCAB_SIZE, size=shape), dtype='int32'),
            np.array(rng.integers(0, 2, size=shape[0]), dtype='int32')]


def losses_and_gradients(net, objective, inputs):
    for param in net.collect_params().values():
        param.grad()[:] = 0
    with autograd.record():
        mlm, nsp = objective(*inputs)
        (mlm + nsp).backward()
    return [float(mlm), float(nsp)], {name: p.grad().asnumpy()
                                      for name, p in net._collect_params_with_prefix().items()}


def packed_inputs(inputs, extra_rows=0):
    index = packing.token_index(inputs[2].asnumpy(), inputs[0].shape[1])
    index = onp.concatenate([index, onp.zeros(extra_rows, dtype='int32')])
    return inputs + [np.array(index, dtype='int32')]


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_packed_equals_padded(arch, hybridize):
    net = make_model(arch, seed=2)
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    inputs = pretraining_batch(seed=3)
    padded = losses_and_gradients(net, net.objective(packed=False), inputs)
    packed = losses_and_gradients(net, net.objective(packed=True), packed_inputs(inputs))
    assert onp.allclose(padded[0], packed[0], rtol=1e-5)
    for name, grad in padded[1].items():
        scale = 1.0 + onp.abs(grad).max()
        assert onp.abs(packed[1][name] - grad).max() <= 1e-5 * scale, name


def test_rounding_the_rows_up_changes_nothing_even_with_dropout():
    """Results depend on the batch only: a resumed run must compute what an
    uninterrupted one did, whatever the row count."""
    import mxnet as mx
    net = make_model('d2l', seed=4, dropout=0.3, attention_dropout=0.3)
    net.hybridize(static_alloc=True, static_shape=True)
    inputs, objective, results = pretraining_batch(seed=5), net.objective(packed=True), []
    for extra in (0, 9, 0):
        mx.random.seed(11)
        results.append(losses_and_gradients(net, objective, packed_inputs(inputs, extra)))
    for losses, grads in results[1:]:
        assert losses == results[0][0]
        assert all((grads[name] == grad).all() for name, grad in results[0][1].items())


@pytest.mark.parametrize('weight', [1.0, 0.0], ids=['real-slot', 'padding-slot'])
def test_pretraining_loss_packs_where_it_is_exact(weight):
    """A slot on padding (even one that counts for nothing) would read another
    example's row, or past the last row, packed: that batch runs padded, and gives
    what MXNet's operators give."""
    net = make_model('d2l', seed=6)
    inputs = pretraining_batch(seed=7, valid_lens=[10, 9, 8, 4])
    net.pretraining_loss(*inputs)
    assert set(net._objectives.blocks) == {(False, False, True)}
    weights, positions = inputs[4].asnumpy(), inputs[3].asnumpy()
    weights[3, -1], positions[3, -1] = weight, 9  # the last example is 4 tokens long
    inputs[3], inputs[4] = np.array(positions, dtype='int32'), np.array(weights)
    losses = [float(loss) for loss in net.pretraining_loss(*inputs)]
    assert (False, False, False) in net._objectives.blocks
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, 'available', lambda: False)
        expected = [float(loss) for loss in make_model('d2l', seed=6).pretraining_loss(*inputs)]
    assert onp.allclose(losses, expected, rtol=1e-5)


def test_pretraining_loss_does_not_pack_without_kernels(monkeypatch):
    monkeypatch.setattr(kernels, 'available', lambda: False)
    net = make_model('d2l', seed=8)
    net.pretraining_loss(*pretraining_batch(seed=9))
    assert set(net._objectives.blocks) == {(False, False, False)}


def test_the_largest_batch_comes_first():
    rng = onp.random.default_rng(0)
    lengths = rng.integers(5, 65, size=1000)
    bucket_of = onp.searchsorted([16, 32, 48, 64], lengths)
    for epoch in range(3):
        batches = plan_epoch(bucket_of, 64, onp.random.default_rng([0, epoch]),
                             lengths=lengths)
        sizes = [lengths[batch].sum() for batch in batches]
        assert sizes[0] == max(sizes)
        assert sorted(onp.concatenate(batches).tolist()) == list(range(1000))
