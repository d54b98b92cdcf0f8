"""Multi-head self-attention with exact valid-length masking."""
import mxnet as mx
from mxnet.gluon import nn

from . import checks


def masked_softmax(scores, valid_lens):
    """Softmax over the last axis that ignores keys beyond each example's valid length.

    scores: (batch_size, num_heads, num_queries, num_keys)
    valid_lens: (batch_size,) integers in [1, num_keys]
    returns: (batch_size, num_heads, num_queries, num_keys); weights on keys at
    positions >= valid_lens[i] are exactly 0 for example i in every head.

    MXNet's softmax with `use_length=True` takes the maximum and the sum over the
    first `length` entries only, so scores at padded keys cannot leak in at all (an
    additive -1e6 mask, as the book uses, still lets them shift the result).
    """
    F = checks.namespace(scores)
    if valid_lens is None:
        return F.npx.softmax(scores, axis=-1)
    lengths = F.np.zeros_like(scores[:, :, :, 0], dtype='int32')  # (batch, heads, queries)
    lengths = lengths + valid_lens.astype('int32').reshape(-1, 1, 1)
    return F.npx.softmax(scores, lengths, axis=-1, use_length=True)


class MultiHeadAttention(nn.HybridBlock):
    """Multi-head scaled dot-product self-attention with valid-length masking.

    forward(X, valid_lens):
      X: (batch_size, seq_len, num_hiddens); valid_lens: (batch_size,) or None
      returns: (batch_size, seq_len, num_hiddens)

    The query, key and value projections are kept as separate parameters (as in
    every BERT checkpoint) but applied as one matrix multiplication. Their rows are
    interleaved per head, [q_1 k_1 v_1 q_2 k_2 v_2 ...], which is the layout MXNet's
    fused `interleaved_matmul_selfatt_qk/valatt` operators expect: they compute all
    heads' Q K^T / sqrt(head_dim) and weights @ V without splitting heads by hand.
    """
    def __init__(self, num_hiddens, num_heads, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        if num_hiddens % num_heads:
            raise ValueError(f'num_hiddens ({num_hiddens}) must be divisible by '
                             f'num_heads ({num_heads})')
        self.num_hiddens, self.num_heads = num_hiddens, num_heads
        with self.name_scope():
            for name in ('query', 'key', 'value'):
                setattr(self, f'{name}_weight', self.params.get(
                    f'{name}_weight', shape=(num_hiddens, num_hiddens)))
                setattr(self, f'{name}_bias', self.params.get(
                    f'{name}_bias', shape=(num_hiddens,), init='zeros'))
            self.dropout = nn.Dropout(dropout)
            self.output = nn.Dense(num_hiddens, flatten=False, in_units=num_hiddens)

    def hybrid_forward(self, F, X, valid_lens, query_weight, key_weight, value_weight,
                       query_bias, key_bias, value_bias):
        qkv = self._project(F, X, (query_weight, key_weight, value_weight),
                            (query_bias, key_bias, value_bias))
        weights = self.dropout(self._weights(F, qkv, valid_lens))
        weights = F.npx.reshape(weights, (-5, -2, -2))  # (batch * heads, seq, seq)
        context = F.contrib.interleaved_matmul_selfatt_valatt(
            qkv.as_nd_ndarray(), weights.as_nd_ndarray(), heads=self.num_heads)
        return self.output(F.np.swapaxes(context.as_np_ndarray(), 0, 1))

    def attention_weights(self, X, valid_lens=None):
        """The attention weights (batch_size, num_heads, seq_len, seq_len), for inspection."""
        params = [getattr(self, f'{name}_{kind}').data(X.ctx)
                  for kind in ('weight', 'bias') for name in ('query', 'key', 'value')]
        qkv = self._project(mx.nd, X, params[:3], params[3:])
        return self._weights(mx.nd, qkv, valid_lens)

    def _project(self, F, X, weights, biases):
        """Interleaved Q/K/V projection: (seq_len, batch_size, 3 * num_hiddens)."""
        heads, hiddens = self.num_heads, self.num_hiddens
        weight = F.np.stack(weights).reshape(3, heads, hiddens // heads, hiddens)
        weight = weight.transpose(1, 0, 2, 3).reshape(3 * hiddens, hiddens)
        bias = F.np.stack(biases).reshape(3, heads, hiddens // heads)
        bias = bias.transpose(1, 0, 2).reshape(3 * hiddens)
        return F.npx.fully_connected(F.np.swapaxes(X, 0, 1), weight, bias,
                                     num_hidden=3 * hiddens, flatten=False)

    def _weights(self, F, qkv, valid_lens):
        """Masked attention weights (batch_size, num_heads, seq_len, seq_len)."""
        scores = F.contrib.interleaved_matmul_selfatt_qk(qkv.as_nd_ndarray(),
                                                         heads=self.num_heads)
        scores = F.npx.reshape(scores.as_np_ndarray(), (-6, -1, self.num_heads, -2, -2))
        return masked_softmax(scores, valid_lens)
