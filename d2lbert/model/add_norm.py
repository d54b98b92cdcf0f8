"""The "add & norm" step of a Transformer block."""
from mxnet.gluon import nn

from ..util.numpy_mode import numpy_mode_block


@numpy_mode_block
class AddNorm(nn.LayerNorm):
    """LayerNorm(X + dropout(Y)): X, Y (..., num_hiddens) -> (..., num_hiddens)."""
    def __init__(self, num_hiddens: int, dropout: float, epsilon: float = 1e-5, **kwargs):
        super().__init__(epsilon=epsilon, in_channels=num_hiddens, **kwargs)
        self.dropout_rate = dropout
        with self.name_scope():
            self.dropout = nn.Dropout(dropout)

    def hybrid_forward(self, F, X, Y, gamma, beta):
        return super().hybrid_forward(F, X + self.dropout(Y), gamma, beta)
