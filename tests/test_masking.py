"""Valid-length masking is exact: padding can never influence a real token.

A padded batch is only correct if what sits in the padding is invisible. These tests
change the padding and require the outputs at valid positions to stay *bit-identical*
(maximum absolute difference exactly 0.0), and check the attention weights directly.
"""
import numpy as onp
import pytest
from mxnet import autograd, np

import d2lbert
from conftest import make_batch, make_model, to_numpy


def numpy_masked_softmax(scores, valid_lens):
    """Reference: softmax over the last axis using only the first valid_lens[i] keys of
    example i; the other keys get weight 0."""
    weights = onp.zeros_like(scores)
    for i, length in enumerate(valid_lens):
        kept = scores[i, ..., :length]
        exp = onp.exp(kept - kept.max(axis=-1, keepdims=True))
        weights[i, ..., :length] = exp / exp.sum(axis=-1, keepdims=True)
    return weights


def scramble_padding(batch, seed=1):
    """A copy of the batch with random token ids and segment ids at every padded
    position (the valid positions are unchanged)."""
    rng = onp.random.default_rng(seed)
    tokens, segments = batch['tokens'].asnumpy(), batch['segments'].asnumpy()
    for i, length in enumerate(batch['valid_lens'].asnumpy()):
        pad = tokens.shape[1] - length
        tokens[i, length:] = rng.integers(0, 64, size=pad)
        segments[i, length:] = rng.integers(0, 2, size=pad)
    return dict(batch, tokens=np.array(tokens, dtype='int32'),
                segments=np.array(segments, dtype='int32'))


def max_abs_diff_at_valid_positions(a, b, valid_lens):
    """max |a - b| over the valid positions of each example of (batch, seq, ...) arrays."""
    return max(onp.abs(a[i, :n] - b[i, :n]).max() for i, n in enumerate(valid_lens))


def test_masked_softmax_matches_numpy_reference():
    """`masked_softmax` equals a plain NumPy masked softmax, with a different valid
    length per example, on (batch, heads, queries, keys) scores."""
    rng = onp.random.default_rng(0)
    scores = rng.normal(0, 3, size=(3, 2, 5, 6)).astype('float32')
    valid_lens = onp.array([2, 6, 4])
    weights = d2lbert.masked_softmax(np.array(scores), np.array(valid_lens, dtype='int32'))
    onp.testing.assert_allclose(weights.asnumpy(),
                                numpy_masked_softmax(scores.astype('float64'), valid_lens),
                                rtol=1e-6, atol=1e-7)


def test_masked_softmax_ignores_huge_scores_at_padded_keys():
    """Scores at padded keys do not enter the maximum or the sum: even 1e30 there leaves
    the valid weights unchanged (an additive -1e6 mask would not be exact)."""
    rng = onp.random.default_rng(1)
    scores = rng.normal(size=(3, 2, 4, 6)).astype('float32')
    valid_lens = np.array([1, 3, 5], dtype='int32')
    huge = scores.copy()
    for i, length in enumerate([1, 3, 5]):
        huge[i, ..., length:] = 1e30
    a = d2lbert.masked_softmax(np.array(scores), valid_lens).asnumpy()
    b = d2lbert.masked_softmax(np.array(huge), valid_lens).asnumpy()
    assert onp.abs(a - b).max() == 0.0


def test_masked_softmax_without_valid_lens_is_plain_softmax():
    """`valid_lens=None` means no key is masked."""
    scores = onp.random.default_rng(2).normal(size=(2, 2, 3, 4)).astype('float32')
    weights = d2lbert.masked_softmax(np.array(scores), None).asnumpy()
    onp.testing.assert_allclose(weights, numpy_masked_softmax(scores, [4, 4]),
                                rtol=1e-6, atol=1e-7)


def attention_weights_of_first_layer(arch, valid_lens, batch_size=4, seed=0):
    """Attention weights of layer 0 of a tiny model on random inputs of 7 positions."""
    net = make_model(arch, seed=seed)
    attention = net.encoder.blocks[0].attention
    X = np.array(onp.random.default_rng(seed).normal(size=(batch_size, 7, 32)),
                 dtype='float32')
    lens = None if valid_lens is None else np.array(valid_lens, dtype='int32')
    return attention.attention_weights(X, lens).asnumpy()


def test_attention_weights_are_zero_on_padded_keys_in_every_head(arch):
    """For every example i, head h and query q, the weights on keys >= valid_lens[i] are
    exactly 0, those on valid keys are positive, and each row sums to 1.

    Each example has a different length and there are 2 heads, so repeating valid_lens
    in the wrong order across heads (d2l's bug before its PR #1548: example i's head h
    got another example's length) would put non-zero weights on padding here.
    """
    valid_lens = [3, 7, 1, 5]
    weights = attention_weights_of_first_layer(arch, valid_lens)
    batch_size, num_heads, num_queries, num_keys = weights.shape
    assert (batch_size, num_heads, num_queries, num_keys) == (4, 2, 7, 7)
    for i, length in enumerate(valid_lens):
        for h in range(num_heads):
            assert onp.all(weights[i, h, :, length:] == 0.0), (i, h)
            assert onp.all(weights[i, h, :, :length] > 0.0), (i, h)
    onp.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-6)


def test_attention_without_valid_lens_equals_full_lengths():
    """`valid_lens=None` is the same as every example having the full length: for the
    attention weights (up to float32 rounding: MXNet's softmax with and without lengths
    are different kernels) and exactly for the whole model (which replaces None by the
    full lengths)."""
    full = attention_weights_of_first_layer('d2l', [7, 7, 7], batch_size=3)
    unmasked = attention_weights_of_first_layer('d2l', None, batch_size=3)
    onp.testing.assert_allclose(full, unmasked, rtol=1e-6, atol=1e-7)

    net = make_model('original')
    batch = make_batch(valid_lens=[10, 10, 10, 10])
    with_lens = to_numpy(*net(batch['tokens'], batch['segments'], batch['valid_lens'],
                              batch['pred_positions']))
    without = to_numpy(*net(batch['tokens'], batch['segments'], None,
                            batch['pred_positions']))
    for a, b in zip(with_lens, without):
        assert onp.abs(a - b).max() == 0.0


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_padding_does_not_change_outputs_at_valid_positions(arch, hybridize):
    """Changing token ids and segment ids at padded positions leaves the encoder output
    at every valid position, the NSP logits and the MLM logits (at prediction positions
    inside the valid length) bit-identical: max abs difference exactly 0.0."""
    net = make_model(arch)
    if hybridize:
        net.hybridize()
    batch = make_batch(seed=3)
    scrambled = scramble_padding(batch)
    assert (scrambled['tokens'] != batch['tokens']).sum() > 0
    lens = batch['valid_lens'].asnumpy()

    encoded, mlm, nsp = to_numpy(*net(**batch))
    encoded2, mlm2, nsp2 = to_numpy(*net(**scrambled))
    assert max_abs_diff_at_valid_positions(encoded, encoded2, lens) == 0.0
    assert onp.abs(nsp - nsp2).max() == 0.0
    assert onp.abs(mlm - mlm2).max() == 0.0

    # The same holds for the encoder called on its own.
    alone = to_numpy(net.encoder(batch['tokens'], batch['segments'], batch['valid_lens']))
    alone2 = to_numpy(net.encoder(scrambled['tokens'], scrambled['segments'],
                                  scrambled['valid_lens']))
    assert max_abs_diff_at_valid_positions(alone, alone2, lens) == 0.0


def test_changing_a_valid_token_does_change_outputs(arch):
    """The converse, so that the test above cannot pass by accident: change one *valid*
    token and the outputs of that example change."""
    net = make_model(arch)
    batch = make_batch(seed=3)
    tokens = batch['tokens'].asnumpy()
    tokens[0, 1] = (tokens[0, 1] + 1) % 64
    changed = dict(batch, tokens=np.array(tokens, dtype='int32'))
    encoded, mlm, nsp = to_numpy(*net(**batch))
    encoded2, mlm2, nsp2 = to_numpy(*net(**changed))
    assert onp.abs(encoded[0] - encoded2[0]).min(axis=-1).max() > 0
    assert onp.abs(nsp[0] - nsp2[0]).max() > 0
    assert onp.abs(mlm[0] - mlm2[0]).max() > 0


def test_padding_gets_no_gradient_through_valid_outputs():
    """A loss on the valid positions only gives zero gradient to the embeddings of the
    token ids that appear only in the padding: padding cannot leak during training
    either."""
    net = make_model('original')
    batch = make_batch(seed=4, batch_size=3, valid_lens=[4, 6, 8])
    tokens = batch['tokens'].asnumpy()
    padding_id = 63
    tokens[tokens == padding_id] = 62  # id 63 appears in the padding only
    for i, length in enumerate([4, 6, 8]):
        tokens[i, length:] = padding_id
    mask = onp.zeros(tokens.shape + (1,), dtype='float32')
    for i, length in enumerate([4, 6, 8]):
        mask[i, :length] = 1
    with autograd.record():
        encoded = net.encoder(np.array(tokens, dtype='int32'), batch['segments'],
                              batch['valid_lens'])
        loss = (encoded * np.array(mask)).sum()
    loss.backward()
    grad = net.encoder.token_embedding.weight.grad().asnumpy()
    assert onp.abs(grad[padding_id]).max() == 0.0
    assert onp.abs(grad[tokens[0, 0]]).max() > 0.0
