"""Multi-head self-attention with exact valid-length masking."""
import math

import mxnet as mx
from mxnet.gluon import nn

from ..util import checks
from ..util.numpy_mode import numpy_mode_block


def masked_softmax(scores, valid_lens):
    """Softmax of scores (batch, heads, queries, keys) over each example's valid keys."""
    F = checks.namespace(scores)
    if valid_lens is None:
        return F.npx.softmax(scores, axis=-1)
    lengths = F.np.zeros_like(scores[:, :, :, 0], dtype='int32')  # (batch, heads, queries)
    lengths = lengths + valid_lens.astype('int32').reshape(-1, 1, 1)
    return F.npx.softmax(scores, lengths, axis=-1, use_length=True)


@numpy_mode_block
class AttentionHeads(nn.HybridBlock):
    """The parameters of multi-head attention and the steps `MultiHeadAttention` chains."""
    def __init__(self, num_hiddens: int, num_heads: int, dropout: float = 0.0, **kwargs):
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

    def project(self, F, X, weight, bias):
        """X @ weight.T + bias: (batch_size, seq_len, num_hiddens)."""
        return F.npx.fully_connected(X, weight, bias, num_hidden=self.num_hiddens,
                                     flatten=False)

    def split_heads(self, F, X):
        """(batch_size, seq_len, num_hiddens) -> (batch_size * num_heads, seq_len,
        num_hiddens / num_heads): each head's columns, heads after examples."""
        X = F.npx.reshape(X, (-2, -2, self.num_heads, -1))  # (batch, seq, heads, head)
        return F.npx.reshape(F.np.transpose(X, (0, 2, 1, 3)), (-5, -2, -2))

    def merge_heads(self, F, X):
        """The inverse of split_heads: (batch_size, seq_len, num_hiddens)."""
        X = F.npx.reshape(X, (-6, -1, self.num_heads, -2, -2))  # (batch, heads, seq, head)
        return F.npx.reshape(F.np.transpose(X, (0, 2, 1, 3)), (-2, -2, -5))


@numpy_mode_block
class MultiHeadAttention(AttentionHeads):
    """Self-attention: (batch_size, seq_len, num_hiddens), (batch_size,) -> like X."""
    def hybrid_forward(self, F, X, valid_lens, query_weight, key_weight, value_weight,
                       query_bias, key_bias, value_bias):
        queries = self.split_heads(F, self.project(F, X, query_weight, query_bias))
        keys = self.split_heads(F, self.project(F, X, key_weight, key_bias))
        values = self.split_heads(F, self.project(F, X, value_weight, value_bias))
        weights = self.dropout(self.weights(F, queries, keys, valid_lens))
        weights = F.npx.reshape(weights, (-5, -2, -2))  # (batch * heads, seq, seq)
        return self.output(self.merge_heads(F, F.npx.batch_dot(weights, values)))

    def weights(self, F, queries, keys, valid_lens):
        """softmax(Q K^T / sqrt(head_dim)) over the valid keys: (batch, heads, seq, seq)."""
        head_dim = self.num_hiddens // self.num_heads
        scores = F.npx.batch_dot(queries, keys, transpose_b=True) / math.sqrt(head_dim)
        scores = F.npx.reshape(scores, (-6, -1, self.num_heads, -2, -2))
        return masked_softmax(scores, valid_lens)

    def attention_weights(self, X, valid_lens=None):
        """The attention weights (batch_size, num_heads, seq_len, seq_len), for inspection."""
        F = mx.nd
        queries, keys = (self.split_heads(F, self.project(
            F, X, getattr(self, f'{name}_weight').data(X.ctx),
            getattr(self, f'{name}_bias').data(X.ctx))) for name in ('query', 'key'))
        return self.weights(F, queries, keys, valid_lens)
