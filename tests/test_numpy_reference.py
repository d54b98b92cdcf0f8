"""d2lbert's numbers equal a plain-NumPy BERT written from the math.

The reference below reads the weights out of a d2lbert model and recomputes everything
in float64 with nothing but NumPy and `math.erf`: embeddings, per-head scaled
dot-product attention with masking, post-LayerNorm residual blocks, ReLU or exact GELU,
the masked-LM head and the pooler + next-sentence head. It splits the heads the
textbook way (head h owns columns h*d ... (h+1)*d - 1 of Q, K and V), so it also checks
d2lbert's interleaved Q/K/V layout.
"""
import math

import numpy as onp
import pytest

from conftest import make_batch, make_model, to_numpy

TOLERANCE = 1e-5
erf = onp.vectorize(math.erf)


def weights_of(dense):
    """(W, b) of a Gluon Dense layer, which computes x @ W.T + b."""
    return to_numpy(dense.weight.data(), dense.bias.data())


def dense(x, layer):
    W, b = weights_of(layer)
    return x @ W.T + b


def layer_norm(x, norm, eps):
    gamma, beta = to_numpy(norm.gamma.data(), norm.beta.data())
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / onp.sqrt(var + eps) * gamma + beta


def activation(x, name):
    if name == 'relu':
        return onp.maximum(x, 0)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))  # exact GELU


def softmax_with_length(scores, length):
    """Softmax over the last axis using only the first `length` keys."""
    weights = onp.zeros_like(scores)
    kept = scores[..., :length]
    exp = onp.exp(kept - kept.max(axis=-1, keepdims=True))
    weights[..., :length] = exp / exp.sum(axis=-1, keepdims=True)
    return weights


def attention(X, valid_len, layer, num_heads):
    """Multi-head self-attention of one example X (seq_len, num_hiddens).
    Returns (output, weights of shape (num_heads, seq_len, seq_len))."""
    Wq, Wk, Wv, bq, bk, bv = to_numpy(
        layer.query_weight.data(), layer.key_weight.data(), layer.value_weight.data(),
        layer.query_bias.data(), layer.key_bias.data(), layer.value_bias.data())
    Q, K, V = X @ Wq.T + bq, X @ Wk.T + bk, X @ Wv.T + bv
    d = X.shape[-1] // num_heads
    heads, all_weights = [], []
    for h in range(num_heads):
        cols = slice(h * d, (h + 1) * d)
        scores = Q[:, cols] @ K[:, cols].T / math.sqrt(d)
        weights = softmax_with_length(scores, valid_len)
        heads.append(weights @ V[:, cols])
        all_weights.append(weights)
    return dense(onp.concatenate(heads, axis=-1), layer.output), onp.stack(all_weights)


def numpy_bert(net, config, tokens, segments, valid_lens, pred_positions):
    """The whole model, one example at a time. Returns (encoded, nsp_logits,
    mlm_logits, attention weights of layer 0)."""
    encoder = net.encoder
    token_table, segment_table, position_table = to_numpy(
        encoder.token_embedding.weight.data(), encoder.segment_embedding.weight.data(),
        encoder.position_embedding.weight.data())
    encoded, nsp, mlm, first_layer_weights = [], [], [], []
    for x, s, n, p in zip(tokens, segments, valid_lens, pred_positions):
        X = token_table[x] + segment_table[s] + position_table[:len(x)]
        if config.embedding_layer_norm:
            X = layer_norm(X, encoder.embedding_norm, config.layer_norm_eps)
        for i, block in enumerate(encoder.blocks):
            attended, weights = attention(X, n, block.attention, config.num_heads)
            if i == 0:
                first_layer_weights.append(weights)
            Y = layer_norm(X + attended, block.norm1, config.layer_norm_eps)
            ffn = dense(activation(dense(Y, block.ffn.dense1), config.hidden_act),
                        block.ffn.dense2)
            X = layer_norm(Y + ffn, block.norm2, config.layer_norm_eps)
        encoded.append(X)
        # Next sentence prediction: pooler (Dense + tanh) on <cls>, then 2 logits.
        pooled = onp.tanh(dense(X[0], net.nsp.pooler))
        nsp.append(dense(pooled, net.nsp.output))
        # Masked LM: Dense -> activation -> LayerNorm, then the output layer, whose
        # weight is the token embedding table when the decoder is tied.
        transform = net.mlm.transform
        hidden = layer_norm(activation(dense(X[p], transform[0]), config.hidden_act),
                            transform[2], config.layer_norm_eps)
        output_weight = (token_table if config.tie_decoder
                         else to_numpy(net.mlm.output_weight.data()))
        mlm.append(hidden @ output_weight.T + to_numpy(net.mlm.output_bias.data()))
    return (onp.stack(encoded), onp.stack(nsp), onp.stack(mlm),
            onp.stack(first_layer_weights))


def inputs_of(batch):
    return [batch[k].asnumpy() for k in ('tokens', 'segments', 'valid_lens',
                                         'pred_positions')]


@pytest.mark.parametrize('hidden_act', ['relu', 'gelu'])
def test_model_matches_numpy_reference(arch, hidden_act):
    """Sequence output (at every position, padded ones included), NSP logits and MLM
    logits equal the NumPy reference within 1e-5 on a padded two-segment batch, for
    the book's and Google's architecture (embedding LayerNorm, eps 1e-12, tied
    decoder) and for both activations."""
    net = make_model(arch, hidden_act=hidden_act)
    batch = make_batch(seed=5, batch_size=4, seq_len=11)
    actual = to_numpy(*net(**batch))  # encoded, mlm_logits, nsp_logits
    encoded, nsp_logits, mlm_logits = numpy_bert(net, net.config, *inputs_of(batch))[:3]
    expected = [encoded, mlm_logits, nsp_logits]
    for name, a, e in zip(['encoded', 'mlm_logits', 'nsp_logits'], actual, expected):
        assert a.shape == e.shape, name
        assert onp.abs(a - e).max() < TOLERANCE, name


def test_attention_weights_match_numpy_reference(arch):
    """`MultiHeadAttention.attention_weights` of layer 0 equals the reference's
    per-head weights: same head order, same per-example masking."""
    net = make_model(arch)
    batch = make_batch(seed=6, batch_size=3, seq_len=9)
    expected = numpy_bert(net, net.config, *inputs_of(batch))[3]
    encoder = net.encoder
    X = (encoder.token_embedding(batch['tokens']) + encoder.segment_embedding(batch['segments'])
         + encoder.position_embedding.weight.data()[:9])
    if encoder.embedding_norm is not None:
        X = encoder.embedding_norm(X)
    actual = to_numpy(encoder.blocks[0].attention.attention_weights(X, batch['valid_lens']))
    assert actual.shape == (3, 2, 9, 9)
    assert onp.abs(actual - expected).max() < TOLERANCE


def test_untied_decoder_has_its_own_output_weight():
    """With tie_decoder=False the MLM output weight is a separate parameter; with True
    it *is* the token embedding (one parameter, shared)."""
    untied = make_model('d2l')
    tied = make_model('original')
    assert untied.mlm.output_weight is not untied.encoder.token_embedding.weight
    assert tied.mlm.output_weight is tied.encoder.token_embedding.weight
    assert tied.mlm.output_weight.name in tied.collect_params()
