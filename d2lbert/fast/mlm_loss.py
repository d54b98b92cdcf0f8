"""The masked-LM output layer and its cross-entropy, computed together.

In the book's configuration the output layer is by far the largest part of a
pretraining step: 5,120 prediction slots x 20,256 words = 104 million logits
(415 MB), 80 of the step's 138 GFLOP. Written the plain way (`log_softmax`,
`pick`, autograd), MXNet walks over those logits about ten times per step, and its
CPU kernels for `log_softmax`'s backward and for full reductions are slow
(measured: 1.9 s of a 4.6 s step).

Here the gradient of the loss is computed in the forward pass, where the
probabilities already are, with the same three matrix products as backprop would
use and one softmax:

    z = h W^T + b                 logits                       (slots, vocab)
    p = softmax(z)                probabilities                (slots, vocab)
    dL/dz = c * (p - onehot(y))   c_i = w_i / sum(w): slot weight over the real slots
    dL/dh = c * (p W) - c * W[y]                                (slots, hiddens)
    dL/dW = p^T (c * h) - scatter of c * h into the rows y      (vocab, hiddens)
    dL/db = p^T c - scatter of c into y                         (vocab,)

Backprop only needs those small products, not the logits, so the backward pass is
cheap. They reach the parameters through a surrogate scalar whose gradient is
exactly them (`S` below), added as `S - stop_gradient(S)` (zero in value), so the
result still behaves like any loss: scaling it or adding other losses scales or
adds its gradient. (MXNet's `SoftmaxOutput` also fuses softmax and cross-entropy, but
its backward ignores the incoming gradient, which the data-parallel loss weighting in
`training.py` needs.)
"""

# The smallest normal float32: a probability below it has underflowed to 0 (the
# correct word's logit is >87 below the largest). The reported loss of such a slot
# saturates at -log(FLOAT32_TINY) = 87.3; its gradient stays exact.
FLOAT32_TINY = 1.1754944e-38


def stop_gradient(F, x):
    """x, with no gradient flowing back through it."""
    return F.stop_gradient(x.as_nd_ndarray()).as_np_ndarray()


def masked_lm_loss(F, hidden, weight, bias, labels, slot_weights, vocab_size,
                   with_gradient=True):
    """Weighted mean cross-entropy of the masked-LM output layer.

    hidden: (num_slots, num_hiddens), the MLM transform's output at the slots
    weight: (vocab_size, num_hiddens); bias: (vocab_size,): the output layer
    labels: (num_slots,) int32; slot_weights: (num_slots,), 1 real slot, 0 padding
    vocab_size: the number of rows of `weight`
    with_gradient: compute the gradient in the forward pass (training); False is
      the plain forward pass, for evaluation
    returns: (loss, probabilities): the scalar sum(w_i * nll_i) / sum(w_i), and
      (num_slots, vocab_size) softmax probabilities (for accuracy)
    """
    share = slot_weights / (slot_weights.sum() + 1e-8)  # c_i, (num_slots,)
    logits = F.npx.fully_connected(stop_gradient(F, hidden), stop_gradient(F, weight),
                                   stop_gradient(F, bias), num_hidden=vocab_size,
                                   flatten=False)
    probs = F.npx.softmax(logits, axis=-1)
    nll = -F.np.log(F.np.maximum(F.npx.pick(probs, labels), FLOAT32_TINY))
    loss = (share * nll).sum()
    if not with_gradient:
        return loss, probs
    surrogate = _gradient_surrogate(F, hidden, weight, bias, labels, share, probs)
    return loss + surrogate - stop_gradient(F, surrogate), probs


def _gradient_surrogate(F, hidden, weight, bias, labels, share, probs):
    """A scalar whose gradient w.r.t. (hidden, weight, bias) is the cross-entropy's.

    S = sum(h * A) + sum(W * G) + sum(b * g) - sum_i c_i (h_i . W[y_i] + b[y_i]),
    with A = c * (p W), [G, g] = p^T [c * h, c] held constant (stop_gradient).
    """
    share = share.reshape(-1, 1)                                       # (slots, 1)
    probs = stop_gradient(F, probs)
    into_hidden = stop_gradient(F, F.np.dot(probs, stop_gradient(F, weight)) * share)
    scaled = F.np.concatenate([stop_gradient(F, hidden) * share, share], axis=1)
    # p^T [c*h, c] in one product, as ([c*h, c]^T p)^T: BLAS runs this layout at 124
    # GFLOP/s against 90 for p^T [c*h, c] (book size); (vocab, hiddens + 1)
    into_output = stop_gradient(F, F.np.dot(scaled.T, probs).T)
    into_weight, into_bias = into_output[:, :-1], into_output[:, -1]
    label_weight = F.np.take(weight, labels, axis=0)                  # (slots, hiddens)
    label_logit = (hidden * label_weight).sum(axis=-1) + F.np.take(bias, labels)
    return (_inner(F, hidden, into_hidden) + _inner(F, weight, into_weight)
            + _inner(F, bias, into_bias) - (share[:, 0] * label_logit).sum())


def _inner(F, x, y):
    """sum(x * y) as one BLAS dot product: twice as fast as MXNet's elementwise product
    and CPU sum (31 vs 64 ms for 30,522 x 256)."""
    return F.np.dot(x.reshape(-1), y.reshape(-1))
