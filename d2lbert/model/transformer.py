"""The Transformer encoder block that BERT stacks."""
from typing import Optional

from mxnet.gluon import nn

from ..util.numpy_mode import numpy_mode_block
from .attention import MultiHeadAttention
from .add_norm import AddNorm


def activation(name):
    """The FFN's nonlinearity: 'relu' (the d2l book) or 'gelu' (exact, with erf)."""
    if name == 'gelu':
        return nn.GELU()
    if name == 'relu':
        return nn.Activation('relu')
    raise ValueError(f"hidden_act must be 'relu' or 'gelu', got {name!r}")


@numpy_mode_block
class PositionWiseFFN(nn.HybridBlock):
    """Two dense layers on every position: (batch, seq_len, num_hiddens) -> the same."""
    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, hidden_act: str = 'relu',
                 **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense1 = nn.Dense(ffn_num_hiddens, flatten=False, in_units=num_hiddens)
            self.activation = activation(hidden_act)
            self.dense2 = nn.Dense(num_hiddens, flatten=False, in_units=ffn_num_hiddens)

    def hybrid_forward(self, F, X):
        return self.dense2(self.activation(self.dense1(X)))


@numpy_mode_block
class TransformerEncoderBlock(nn.HybridBlock):
    """Attention and FFN, each with AddNorm: (batch, seq_len, num_hiddens), (batch,) -> X's."""
    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                 dropout: float, attention_dropout: Optional[float] = None,
                 hidden_act: str = 'relu', layer_norm_eps: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        if attention_dropout is None:
            attention_dropout = dropout
        with self.name_scope():
            self.attention = MultiHeadAttention(num_hiddens, num_heads, attention_dropout)
            self.norm1 = AddNorm(num_hiddens, dropout, layer_norm_eps)
            self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, hidden_act)
            self.norm2 = AddNorm(num_hiddens, dropout, layer_norm_eps)

    def hybrid_forward(self, F, X, valid_lens):
        Y = self.norm1(X, self.attention(X, valid_lens))  # LayerNorm(X + dropout(...))
        return self.norm2(Y, self.ffn(Y))
