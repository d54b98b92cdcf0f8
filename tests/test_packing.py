"""Packing: the encoder on the valid tokens only (`d2lbert.fast`, with the index the
data pipeline computes, `d2lbert.data.packing`) gives the same losses and gradients as
on the padded batch, hardly depends on how far the row count was rounded up, and is
used only where it is exact."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from conftest import VOCAB_SIZE, make_batch, make_model
from d2lbert.data import PretrainingBatch, packing
from d2lbert.data.batches import plan_epoch
from d2lbert.fast import accelerate


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


def test_slot_index_lists_the_real_slots_then_a_padding_one():
    weights = onp.array([[1, 1, 0], [1, 0, 0]], dtype='float32')
    # 6 slots, granule 1: the 3 real ones
    assert packing.slot_index(weights).tolist() == [0, 1, 3]
    weights = onp.ones((64, 4), dtype='float32')  # 256 slots, granule 8
    assert packing.slot_index(weights).tolist() == list(range(256))
    weights[5, 1:] = 0  # 253 real slots -> 256 entries, the last 3 a padding slot
    index = packing.slot_index(weights)
    assert len(index) == 256 and index[252] == 255 and (index[253:] == 21).all()
    assert weights.reshape(-1)[index[:253]].all() and not weights.reshape(-1)[21]
    # no real slot at all: one entry, on a padding slot
    assert packing.slot_index(onp.zeros((2, 3), dtype='float32')).tolist() == [0]


def test_packing_many_padding_slots_changes_nothing(arch):
    """Half of the slots are padding, with labels and positions that would count if
    the head computed them: the packed head, on the real half only, gives the padded
    batch's losses and gradients."""
    net = fast_model(arch, seed=12)
    batch = pretraining_batch(seed=13)
    batch.mlm_weights[:, ::2] = 0
    assert len(batch.slot_index()) == batch.mlm_weights.sum()
    assert_packed_equals_padded(net, batch)


def test_a_slot_on_padding_is_not_packable():
    lengths = onp.array([3, 2])
    assert packing.packable(lengths, onp.array([[1, 2], [1, 0]]))
    assert not packing.packable(lengths, onp.array([[1, 2], [1, 2]]))


def pretraining_batch(seed=0, **options):
    """A host `PretrainingBatch` (NumPy arrays) with one padding slot."""
    batch = make_batch(seed=seed, **options)
    rng = onp.random.default_rng(seed)
    shape = batch['pred_positions'].shape
    weights = onp.ones(shape, dtype='float32')
    weights[0, -1] = 0  # a padding slot
    return PretrainingBatch(
        *(batch[key].asnumpy() for key in ('tokens', 'segments', 'valid_lens',
                                           'pred_positions')),
        weights, rng.integers(1, VOCAB_SIZE, size=shape).astype('int32'),
        rng.integers(0, 2, size=shape[0]).astype('int32'))


def on_device(batch):
    return [np.array(array, dtype=array.dtype) for array in batch]


def losses_and_gradients(net, objective, inputs):
    for param in net.collect_params().values():
        param.grad()[:] = 0
    with autograd.record():
        mlm, nsp = objective(*inputs)
        (mlm + nsp).backward()
    return [float(mlm), float(nsp)], {name: p.grad().asnumpy()
                                      for name, p in net._collect_params_with_prefix().items()}


def packed_inputs(batch, extra_rows=0):
    index = onp.concatenate([batch.token_index(), onp.zeros(extra_rows, dtype='int32')])
    return on_device(batch) + [np.array(index, dtype='int32'),
                               np.array(batch.slot_index(), dtype='int32')]


def assert_packed_equals_padded(net, batch):
    """The packed objective's losses and gradients equal the padded one's (1e-5)."""
    padded = losses_and_gradients(net, net.objective(packed=False), on_device(batch))
    packed = losses_and_gradients(net, net.objective(packed=True), packed_inputs(batch))
    assert onp.allclose(padded[0], packed[0], rtol=1e-5)
    for name, grad in padded[1].items():
        scale = 1.0 + onp.abs(grad).max()
        assert onp.abs(packed[1][name] - grad).max() <= 1e-5 * scale, name


def fast_model(arch='d2l', seed=0, **overrides):
    return accelerate(make_model(arch, seed, **overrides))


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_packed_equals_padded(arch, hybridize):
    net = fast_model(arch, seed=2)
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    batch = pretraining_batch(seed=3)
    assert_packed_equals_padded(net, batch)


def test_rounding_the_rows_up_changes_only_rounding_even_with_dropout():
    """Rows added to round the count up hold no token anybody reads: with dropout the
    results stay equal within float rounding (the dropout masks of a row don't depend
    on the row count); the same rows twice give bit-identical results, so a resumed
    run, whose row count is a function of the batch, computes what an uninterrupted
    one did."""
    net = fast_model('d2l', seed=4, dropout=0.3, attention_dropout=0.3)
    net.hybridize(static_alloc=True, static_shape=True)
    batch, objective, results = pretraining_batch(seed=5), net.objective(packed=True), []
    for extra in (0, 9, 0):
        mx.random.seed(11)
        results.append(losses_and_gradients(net, objective, packed_inputs(batch, extra)))
    (losses, grads), (rounded_losses, rounded_grads), (again, grads_again) = results
    assert again == losses
    assert all((grads_again[name] == grad).all() for name, grad in grads.items())
    assert onp.allclose(rounded_losses, losses, rtol=1e-6)
    for name, grad in grads.items():
        assert onp.abs(rounded_grads[name] - grad).max() <= 1e-5 * (1 + onp.abs(grad).max())


@pytest.mark.parametrize('weight', [1.0, 0.0], ids=['real-slot', 'padding-slot'])
def test_a_batch_with_a_slot_on_padding_runs_padded(weight):
    """A slot on padding (even one that counts for nothing) would read another
    example's row, or past the last row, packed: the batch gives no packing index,
    runs padded, and gives what the book's model gives."""
    batch = pretraining_batch(seed=7, valid_lens=[10, 9, 8, 4])
    assert batch.token_index() is not None
    batch.mlm_weights[3, -1], batch.pred_positions[3, -1] = weight, 9  # length 4
    assert batch.token_index() is None
    net = fast_model('d2l', seed=6)
    losses = [float(loss) for loss in net.pretraining_loss(*on_device(batch))]
    assert set(net.objectives()) == {(False, False)}
    expected = [float(loss) for loss in make_model('d2l', seed=6).pretraining_loss(
        *on_device(batch))]
    assert onp.allclose(losses, expected, rtol=1e-5)


def test_pretraining_loss_packs_given_the_index():
    net = fast_model('d2l', seed=8)
    batch = pretraining_batch(seed=9)
    index = np.array(batch.token_index(), dtype='int32')
    slots = np.array(batch.slot_index(), dtype='int32')
    net.pretraining_loss(*on_device(batch), token_index=index, slot_index=slots)
    assert set(net.objectives()) == {(False, True)}
    with pytest.raises(ValueError, match='slot_index'):
        net.pretraining_loss(*on_device(batch), token_index=index)


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
