"""Layer normalization, with d2lbert's fused CPU kernel where it can run."""
import numpy as onp
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

    def __call__(self, X):
        if not checks.is_symbol(X) and X.shape[-1:] != self.gamma.shape:
            raise ValueError(f'LayerNorm({self.gamma.shape[0]}) needs inputs with a last '
                             f'axis of size {self.gamma.shape[0]}, got shape {X.shape}')
        return super().__call__(X)

    def __repr__(self):
        return f'{self.__class__.__name__}({self.gamma.shape[0]}, epsilon={self.epsilon})'

    def hybrid_forward(self, F, X, gamma, beta):
        if not self._use_fused_kernel():
            return F.npx.layer_norm(X, gamma, beta, axis=-1, eps=self.epsilon)
        # identity: the kernel overwrites its gradients, identity's backward adds
        # where MXNet asks it to (grad_req='add'); in a hybridized graph it costs nothing
        X, gamma, beta = (F.identity(a.as_nd_ndarray()) for a in (X, gamma, beta))
        Y = F.d2lbert_layer_norm(X, gamma, beta, eps=self.epsilon)[0]
        return Y.as_np_ndarray()

    def _use_fused_kernel(self):
        on_cpu = all(ctx.device_type == 'cpu' for ctx in self.gamma.list_ctx())
        return on_cpu and onp.dtype(self.gamma.dtype) == onp.float32 and kernels.available()
