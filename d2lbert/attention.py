"""Multi-head self-attention with exact valid-length masking."""
import mxnet as mx
from mxnet.gluon import nn

from . import checks, kernels


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
    interleaved per head, [q_1 k_1 v_1 q_2 k_2 v_2 ...]: the layout of MXNet's fused
    `interleaved_matmul_selfatt_qk/valatt` operators, which compute all heads'
    Q K^T / sqrt(head_dim) and weights @ V without splitting heads by hand. On CPU,
    d2lbert's `d2lbert_attention` kernel takes the same layout and does the products,
    the masked softmax and the dropout in one operator (see `d2lbert.kernels`).
    """
    def __init__(self, num_hiddens, num_heads, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        if num_hiddens % num_heads:
            raise ValueError(f'num_hiddens ({num_hiddens}) must be divisible by '
                             f'num_heads ({num_heads})')
        self.num_hiddens, self.num_heads, self.dropout_rate = num_hiddens, num_heads, dropout
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
        weight, bias = self._interleaved_projection(
            F, (query_weight, key_weight, value_weight), (query_bias, key_bias, value_bias))
        if kernels.usable(self.query_weight):
            context = self._fused_attention(F, X, valid_lens, weight, bias)
        else:
            context = self._mxnet_attention(F, X, valid_lens, weight, bias)
        return self.output(context)

    def attention_weights(self, X, valid_lens=None):
        """The attention weights (batch_size, num_heads, seq_len, seq_len), for inspection."""
        params = [getattr(self, f'{name}_{kind}').data(X.ctx)
                  for kind in ('weight', 'bias') for name in ('query', 'key', 'value')]
        weight, bias = self._interleaved_projection(mx.nd, params[:3], params[3:])
        return self._weights(mx.nd, self._project(mx.nd, X.swapaxes(0, 1), weight, bias),
                             valid_lens)

    def _interleaved_projection(self, F, weights, biases):
        """The Q/K/V weights (3 * num_hiddens, num_hiddens) and biases, rows interleaved
        per head."""
        heads, hiddens = self.num_heads, self.num_hiddens
        weight = F.np.stack(weights).reshape(3, heads, hiddens // heads, hiddens)
        weight = weight.transpose(1, 0, 2, 3).reshape(3 * hiddens, hiddens)
        bias = F.np.stack(biases).reshape(3, heads, hiddens // heads)
        bias = bias.transpose(1, 0, 2).reshape(3 * hiddens)
        return weight, bias

    def _project(self, F, X, weight, bias):
        """(d1, d2, num_hiddens) -> (d1, d2, 3 * num_hiddens), interleaved Q/K/V."""
        return F.npx.fully_connected(X, weight, bias, num_hidden=3 * self.num_hiddens,
                                     flatten=False)

    def _fused_attention(self, F, X, valid_lens, weight, bias):
        """d2lbert's kernel: (batch_size, seq_len, num_hiddens)."""
        qkv = self._project(F, X, weight, bias)  # (batch_size, seq_len, 3 * num_hiddens)
        if valid_lens is None:  # every key is valid
            valid_lens = F.np.ones_like(X[:, :, 0]).sum(axis=1)
        training = kernels.training_flag(F, qkv)
        qkv, valid_lens, training = kernels.as_legacy(qkv, valid_lens.astype('int32'),
                                                      training)
        context = F.d2lbert_attention(qkv, valid_lens, training, heads=self.num_heads,
                                      dropout=self.dropout_rate)[0]
        return context.as_np_ndarray()

    def _mxnet_attention(self, F, X, valid_lens, weight, bias):
        """MXNet's operators: (batch_size, seq_len, num_hiddens)."""
        qkv = self._project(F, F.np.swapaxes(X, 0, 1), weight, bias)  # (seq, batch, 3h)
        weights = self.dropout(self._weights(F, qkv, valid_lens))
        weights = F.npx.reshape(weights, (-5, -2, -2))  # (batch * heads, seq, seq)
        context = F.contrib.interleaved_matmul_selfatt_valatt(
            qkv.as_nd_ndarray(), weights.as_nd_ndarray(), heads=self.num_heads)
        return F.np.swapaxes(context.as_np_ndarray(), 0, 1)

    def _weights(self, F, qkv, valid_lens):
        """Masked attention weights (batch_size, num_heads, seq_len, seq_len) from the
        (seq_len, batch_size, 3 * num_hiddens) projections."""
        scores = F.contrib.interleaved_matmul_selfatt_qk(qkv.as_nd_ndarray(),
                                                         heads=self.num_heads)
        scores = F.npx.reshape(scores.as_np_ndarray(), (-6, -1, self.num_heads, -2, -2))
        return masked_softmax(scores, valid_lens)
