"""Multi-head attention on d2lbert's attention kernel.

`FusedMultiHeadAttention` has `MultiHeadAttention`'s parameters and computes its
results: X (batch_size, seq_len, num_hiddens), or packed (num_rows, num_hiddens)
(`d2lbert.fast.encoder`), to X's shape. The Q/K/V projections are one product, its
columns interleaved per head [q_1 k_1 v_1 ...]; where the kernel can't run (GPU,
float16) the book's computation runs; under bfloat16 it takes the projection and gives
the context in bfloat16, no casts.
"""
from ..model.attention import MultiHeadAttention
from ..model.precision import COMPUTE_DTYPES, compute_dtype, fully_connected
from ..util.numpy_mode import numpy_mode_block
from . import kernels


@numpy_mode_block
class FusedMultiHeadAttention(MultiHeadAttention):
    """`MultiHeadAttention` whose scores, masked softmax, dropout and weighted sum run
    in one operator: X (batch_size, seq_len, H) or packed (num_rows, H) -> X's shape."""
    first_query_only = False  # True: position 0 alone attended and output, (B, 1, H)

    def hybrid_forward(self, F, X, valid_lens, query_weight, key_weight, value_weight,
                       query_bias, key_bias, value_bias):
        if not kernels.usable(self.query_weight):
            return super().hybrid_forward(F, X, valid_lens, query_weight, key_weight,
                                          value_weight, query_bias, key_bias, value_bias)
        weight, bias = self.interleaved_projection(
            F, (query_weight, key_weight, value_weight), (query_bias, key_bias, value_bias))
        dtype = compute_dtype(self)
        in_bfloat16 = dtype == COMPUTE_DTYPES['bfloat16']  # the kernel takes it
        qkv = fully_connected(F, dtype, X, weight, bias, cast_output=not in_bfloat16,
                              num_hidden=3 * self.num_hiddens,
                              flatten=False)  # (..., 3 * num_hiddens)
        return self.attend(F, X, qkv, valid_lens, in_bfloat16)

    def attend(self, F, X, qkv, valid_lens, in_bfloat16=False):
        """The attention of the projections `qkv` (..., 3 * num_hiddens), interleaved
        per head (in bfloat16 if in_bfloat16), of X, through the output layer."""
        if valid_lens is None:  # every key is valid
            valid_lens = F.np.ones_like(X[:, :, 0]).sum(axis=1)
        training = kernels.training_flag(F, X)
        qkv, valid_lens, training = kernels.as_legacy(qkv, valid_lens.astype('int32'), training)
        context = F.d2lbert_attention(
            qkv, valid_lens, training, heads=self.num_heads, dropout=self.dropout_rate,
            first_query_only=int(self.first_query_only))[0].as_np_ndarray()
        self.output.casts_input = not in_bfloat16  # a ReducedPrecisionDense then
        return self.output(context[:, :1, :] if self.first_query_only else context)

    def interleaved_projection(self, F, weights, biases):
        """The Q/K/V weights as one (3 * num_hiddens, num_hiddens) matrix and biases
        (3 * num_hiddens,), rows interleaved per head: each split into its heads' rows,
        then head j's rows of Q, K and V side by side (one concatenation, whose backward
        is one split; no transpose)."""
        heads, hiddens = self.num_heads, self.num_hiddens
        weight = F.np.concatenate([w.reshape(heads, hiddens // heads, hiddens)
                                   for w in weights], axis=1)
        bias = F.np.concatenate([b.reshape(heads, hiddens // heads) for b in biases],
                                axis=1)
        return weight.reshape(3 * hiddens, hiddens), bias.reshape(3 * hiddens)
