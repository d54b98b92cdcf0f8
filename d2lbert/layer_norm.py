"""Layer normalization, and the "add & norm" step of a Transformer block, with
d2lbert's fused CPU kernels where they can run."""
from mxnet.gluon import nn

from . import checks, kernels


class LayerNorm(nn.HybridBlock):
    """Normalizes each vector along the last axis, then scales and shifts it.

    forward(X): (..., num_hiddens) -> (..., num_hiddens)
      Y = (X - mean) / sqrt(var + epsilon) * gamma + beta, with the mean and variance
      of each vector over its num_hiddens entries.

    The same parameters (gamma, beta) and results as `gluon.nn.LayerNorm`. On CPU
    it runs d2lbert's `d2lbert_layer_norm` kernel (see `d2lbert.kernels`), ~10x faster
    than MXNet's in the backward pass; on a GPU, in float16, or where the kernel can't
    be built, MXNet's own LayerNorm.
    """
    def __init__(self, in_channels, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        with self.name_scope():
            self.gamma = self.params.get('gamma', shape=(in_channels,), init='ones')
            self.beta = self.params.get('beta', shape=(in_channels,), init='zeros')

    def __call__(self, X, *args):
        if not checks.is_symbol(X) and X.shape[-1:] != self.gamma.shape:
            raise ValueError(f'{self.__class__.__name__}({self.gamma.shape[0]}) needs '
                             f'inputs with a last axis of size {self.gamma.shape[0]}, '
                             f'got shape {X.shape}')
        return super().__call__(X, *args)

    def __repr__(self):
        return f'{self.__class__.__name__}({self.gamma.shape[0]}, epsilon={self.epsilon})'

    def hybrid_forward(self, F, X, gamma, beta):
        if not kernels.usable(self.gamma):
            return F.npx.layer_norm(X, gamma, beta, axis=-1, eps=self.epsilon)
        # identity: the kernel overwrites its gradients, identity's backward adds
        # where MXNet asks it to (grad_req='add'); in a hybridized graph it costs nothing
        X, gamma, beta = (F.identity(a) for a in kernels.as_legacy(X, gamma, beta))
        Y = F.d2lbert_layer_norm(X, gamma, beta, eps=self.epsilon)[0]
        return Y.as_np_ndarray()


class AddNorm(LayerNorm):
    """Residual connection, then LayerNorm: the "add & norm" of a Transformer block.

    forward(X, Y): X, Y (..., num_hiddens) -> LayerNorm(X + dropout(Y)),
      X: the block's input, Y: what its sublayer (attention or FFN) made of it.

    The parameters are LayerNorm's (gamma, beta). On CPU, d2lbert's
    `d2lbert_add_layer_norm` kernel does the dropout, the sum and the normalization in
    one pass (MXNet: three operators forward, three backward); elsewhere MXNet's
    Dropout, + and LayerNorm.
    """
    def __init__(self, in_channels, dropout, epsilon=1e-5, **kwargs):
        super().__init__(in_channels, epsilon, **kwargs)
        self.dropout_rate = dropout
        with self.name_scope():
            self.dropout = nn.Dropout(dropout)

    def __call__(self, X, Y):
        if not checks.is_symbol(X) and X.shape != Y.shape:
            raise ValueError(f'AddNorm needs X and Y of one shape, got {X.shape} and '
                             f'{Y.shape}')
        return super().__call__(X, Y)

    def hybrid_forward(self, F, X, Y, gamma, beta):
        if not kernels.usable(self.gamma):
            return super().hybrid_forward(F, X + self.dropout(Y), gamma, beta)
        training = kernels.training_flag(F, gamma)
        X, Y, gamma, beta = (F.identity(a) for a in kernels.as_legacy(X, Y, gamma, beta))
        Z = F.d2lbert_add_layer_norm(X, Y, gamma, beta, training.as_nd_ndarray(),
                                     eps=self.epsilon, dropout=self.dropout_rate)[0]
        return Z.as_np_ndarray()
