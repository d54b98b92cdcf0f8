"""The masked-LM output layer and its cross-entropy, every matrix product on oneDNN.

In the book's configuration the output layer is by far the largest part of a
pretraining step: 5,120 prediction slots x 20,256 words = 104 million logits
(415 MB), 80 of the step's 138 GFLOP. Written the plain way (`log_softmax`, `pick`,
autograd), MXNet walks over those logits about ten times per step, and its CPU
kernels for log_softmax's backward and for full reductions are slow (measured: 1.9 s
of a 4.6 s step).

Here the cross-entropy of slot i with label y_i is written as

    nll_i = logsumexp(z_i) - z_i[y_i],   z = h W^T + b,   z_i[y_i] = h_i . W[y_i] + b[y_i]

The products h W^T come from MXNet's FullyConnected, which runs on oneDNN, in
`VOCABULARY_PARTS` parts of the vocabulary; d2lbert's `d2lbert_log_sum_exp` kernel
(`kernels/log_sum_exp.cc`) adds the part's bias and reduces each row in one pass, and
its backward writes the part's gradient, dL/dz = dL/dlse * softmax, in one more pass,
recomputing the softmax from the products, and sums the bias gradient on the way.
(FullyConnected's own bias costs a pass over the logits forward and another backward:
9 ms of each 170 ms part at book size.) FullyConnected's backward then computes
dL/dh = dL/dz W and dL/dW = dL/dz^T h, again on oneDNN (MXNet's np.dot runs on
OpenBLAS, which on CPUs it does not know falls back to slow generic code). Each part's
rows of W are a `slice` (a copy of contiguous rows, its backward adding into its rows
only): MXNet's `split` is 40 times slower here (110 ms forward and 110 ms backward for
30,522 x 256 rows). Parts keep memory down: the backward pass holds one part's
gradient at a time next to the logits, not a second copy of all of them. The loss is
an ordinary node of the graph: scaling it or adding other losses scales or adds its
gradient.

Under `--precision bf16` the products stay in bfloat16: the kernel reads them so,
computing in float32, and writes their gradient so for FullyConnected's bfloat16
backward. Cast to float32 and back instead, they cost the step two passes over the
logits (1.0 s of 3 book-size steps in oneDNN's log) and a float32 copy kept for the
backward pass beside the bfloat16 one (measured: peak memory above float32's).
"""
from ..model.precision import COMPUTE_DTYPES, cast, fully_connected
from . import kernels

VOCABULARY_PARTS = 8


def masked_lm_loss(F, hidden, weight, bias, labels, slot_weights, vocab_size,
                   dtype=COMPUTE_DTYPES['float32']):
    """Weighted mean cross-entropy of the masked-LM output layer.

    hidden: (num_slots, num_hiddens), the MLM transform's output at the slots
    weight: (vocab_size, num_hiddens); bias: (vocab_size,): the output layer
    labels: (num_slots,) int32; slot_weights: (num_slots,), 1 real slot, 0 padding
    vocab_size: the number of rows of `weight`
    dtype: the type the products h W^T compute in (`d2lbert.model.precision`) and are
      returned in; the kernel reduces them in float32
    returns: (loss, products): the scalar sum(w_i * nll_i) / sum(w_i), and the logits
      without the bias, h W^T, as a list of (num_slots, part size) arrays of `dtype`,
      one for each part of the vocabulary (`predictions` turns them into each slot's
      most likely token)
    """
    bounds = part_bounds(vocab_size)
    parts = list(zip(bounds[:-1], bounds[1:]))
    products = [fully_connected(F, dtype, hidden,
                                F.npx.slice(weight, (start, None), (end, None)), None,
                                parameters=False,  # a slice: its backward adds
                                cast_output=False,  # the kernel reads bfloat16
                                num_hidden=end - start, no_bias=True, flatten=False)
                for start, end in parts]
    part_lse = F.np.stack([kernels.log_sum_exp(F, z, F.npx.slice(bias, (start,), (end,)))
                           for z, (start, end) in zip(products, parts)], axis=1)
    label_logit = ((hidden * F.np.take(weight, labels, axis=0)).sum(axis=-1)
                   + F.np.take(bias, labels))
    nll = combine_parts(F, part_lse) - label_logit           # (num_slots,)
    share = slot_weights / (slot_weights.sum() + 1e-8)       # c_i, the slot's weight
    return (share * nll).sum(), products


def part_bounds(vocab_size, parts=VOCABULARY_PARTS):
    """[0, ..., vocab_size]: where each part of the vocabulary starts, then its end."""
    parts = min(parts, vocab_size)
    return [vocab_size * i // parts for i in range(parts + 1)]


def combine_parts(F, X):
    """The log-sum-exp of whole rows from their parts', log sum_j exp(X[:, j]), for the
    small (num_slots, parts) array X, with MXNet's operators."""
    top = F.np.max(X, axis=1, keepdims=True)
    return F.np.log(F.np.exp(X - top).sum(axis=1)) + top[:, 0]


def predictions(F, products, bias, vocab_size, dtype=COMPUTE_DTYPES['float32']):
    """(num_slots,) int32: the token with the largest logit of each slot, from the
    parts' products that `masked_lm_loss` returns (in `dtype`) and the output layer's
    bias."""
    bounds = part_bounds(vocab_size, len(products))
    if dtype != COMPUTE_DTYPES['float32']:
        products = cast('float32', *products)
    logits = [z + F.npx.slice(bias, (start,), (end,))
              for z, start, end in zip(products, bounds[:-1], bounds[1:])]
    best = F.np.stack([z.max(axis=1) for z in logits], axis=1)        # (slots, parts)
    index = F.np.stack([F.np.argmax(z, axis=1).astype('int32') + start
                        for z, start in zip(logits, bounds)], axis=1)
    part = F.np.argmax(best, axis=1).astype('int32')
    return F.npx.pick(index, part, axis=1)
