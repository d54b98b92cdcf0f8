"""LayerNorm and add & norm on d2lbert's kernels, and the encoder block that hands its
add & norms bfloat16 inputs."""
from mxnet.gluon import nn

from ..model.add_norm import AddNorm
from ..model.precision import COMPUTE_DTYPES, ReducedPrecisionDense, cast, compute_dtype
from ..model.transformer import TransformerEncoderBlock
from ..util.numpy_mode import numpy_mode_block
from . import kernels


@numpy_mode_block
class FusedLayerNorm(nn.LayerNorm):
    """`gluon.nn.LayerNorm` (same parameters, same results) on the `d2lbert_layer_norm`
    kernel (`kernels/layer_norm.cc`), faster than MXNet 1.9's, whose backward pass sums
    gamma's and beta's gradients with slow generic reductions."""
    def hybrid_forward(self, F, X, gamma, beta):
        if not kernels.usable(self.gamma):
            return super().hybrid_forward(F, X, gamma, beta)
        # identity: the kernel overwrites its gradients, identity's backward adds
        # where MXNet asks it to (grad_req='add'); in a hybridized graph it costs nothing
        X, gamma, beta = (F.identity(a) for a in kernels.as_legacy(X, gamma, beta))
        return F.d2lbert_layer_norm(X, gamma, beta, eps=self._epsilon)[0].as_np_ndarray()


@numpy_mode_block
class FusedAddNorm(AddNorm):
    """`AddNorm` (same parameters, same results) on the `d2lbert_add_layer_norm` kernel:
    the dropout, the sum and the normalization in one pass over the rows (MXNet: three
    operators forward, three backward).

    Y, the sublayer's output, may be bfloat16 (`takes_reduced`, set by
    `LinkedEncoderBlock`): the kernel reads it as it is and forms the sum
    in float32; where the kernel can't run, Y is cast to float32 first."""
    takes_reduced = False

    def hybrid_forward(self, F, X, Y, gamma, beta):
        if not kernels.usable(self.gamma):
            if self.takes_reduced:
                Y, = cast('float32', Y)
            return super().hybrid_forward(F, X, Y, gamma, beta)
        training = kernels.training_flag(F, gamma)
        X, Y, gamma, beta = (F.identity(a) for a in kernels.as_legacy(X, Y, gamma, beta))
        Z = F.d2lbert_add_layer_norm(X, Y, gamma, beta, training.as_nd_ndarray(),
                                     eps=self._epsilon, dropout=self.dropout_rate)[0]
        return Z.as_np_ndarray()


@numpy_mode_block
class LinkedEncoderBlock(TransformerEncoderBlock):
    """`TransformerEncoderBlock` (same parameters, same forward) whose two sublayers
    (attention, FFN) hand their output layer's bfloat16 product to the block's
    `FusedAddNorm` as it is, under bfloat16: the cast of a (tokens, num_hiddens) array
    fewer after each sublayer, and of its gradient before."""
    def link_reduced_layers(self):
        """Set that up if the block computes in bfloat16, and undo it if not or no
        longer (for `model.precision.link_reduced_layers`, which `compute_in`,
        `keep_float32` and `accelerate` call, whichever comes last)."""
        bfloat16 = compute_dtype(self) == COMPUTE_DTYPES['bfloat16']
        for dense, norm in ((self.attention.output, self.norm1),
                            (self.ffn.dense2, self.norm2)):
            linked = (bfloat16 and isinstance(dense, ReducedPrecisionDense)
                      and isinstance(norm, FusedAddNorm))
            dense.casts_output = not linked
            norm.takes_reduced = linked
