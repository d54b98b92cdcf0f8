"""How fast is each of d2lbert's kernels on this CPU (`d2lbert bench`)?

Each kernel runs forward and backward (autograd) on the book's benchmark shapes:
the batch of `configs.random_batch('book')` packed to its valid tokens, 128 hidden
units, 2 heads; the masked-LM log-sum-exp on one eighth of a 20,256-word vocabulary
for 5,120 slots; the optimizer's step (norm, then the fused Adam update) on a
30,522 x 256 token embedding (`bert.small`'s, the largest parameter fine-tuning
updates). The attention kernel does matrix products, so it is reported in GFLOP/s
(forward 4 L^2 d per example and head, backward 10 L^2 d with the recomputed scores)
against the GEMM rate of the same run; the others only stream memory, so they are
reported in GB/s (every input and output read or written once, forward and backward)
against a large array copy measured in the same process.

A shared machine's speed drifts (`rounds.py`), here within seconds: five timings of one
kernel in a row, all in one slow moment, once gave dropout 23% of the copy rate and
74% in another run. So every kernel and the copy are timed once per round, over
`repeats` rounds (`interleaved_best_times`), and each keeps its best time.
"""
import numpy as onp

from .configs import get_config, random_batch
from .timing import interleaved_best_times


def kernel_rates(repeats=15):
    """{kernel: {'seconds', 'gflops_per_s' or 'gb_per_s'}} and the copy bandwidth, each
    the best of `repeats` interleaved rounds."""
    from mxnet import np, npx
    from ..fast import kernels
    npx.set_np()
    if not kernels.available():
        return {'error': "d2lbert's kernels could not be built"}
    config = get_config('book')
    lengths = random_batch(config)['valid_lens']
    rows, hidden, heads = int(lengths.sum()), config.num_hiddens, config.num_heads
    rng = onp.random.default_rng(0)

    def array(*shape):
        return np.array(rng.normal(size=shape), dtype='float32')

    training = np.array([2.0])
    lens = np.array(lengths, dtype='int32')
    qkv, x, z, gamma, beta = (array(rows, 3 * hidden), array(rows, hidden),
                              array(rows, hidden), array(hidden), array(hidden))
    logits, logit_bias = array(5120, config.vocab_size // 8), array(config.vocab_size // 8)
    legacy = kernels.as_legacy
    activation_bytes = rows * hidden * 4
    runs = {  # name: (a forward and backward call, the bytes it streams or None)
        'attention': (forward_backward(lambda F, q, n, t: F.d2lbert_attention(
            *legacy(q, n, t), heads=heads, dropout=0.1)[0], [qkv, lens, training], array), None),
        # forward: x, z in, y out; backward: dy, x, z in, dx, dz out
        'add_layer_norm': (forward_backward(lambda F, a, b, g, c, t:
                                            F.d2lbert_add_layer_norm(
            *legacy(a, b, g, c, t), dropout=0.1)[0], [x, z, gamma, beta, training], array),
            8 * activation_bytes),
        # forward: x in, y out; backward: dy, x in, dx out
        'layer_norm': (forward_backward(lambda F, a, g, c: F.d2lbert_layer_norm(
            *legacy(a, g, c))[0], [x, gamma, beta], array), 5 * activation_bytes),
        'dropout': (forward_backward(lambda F, a, t: F.d2lbert_dropout(
            *legacy(a, t), dropout=0.1)[0], [x, training], array), 4 * activation_bytes),
        # forward: logits in; backward: logits in, dlogits out
        'log_sum_exp': (forward_backward(kernels.log_sum_exp, [logits, logit_bias], array),
                        3 * logits.size * 4),
        'adam_step': (adam_step(array), 9 * 30522 * 256 * 4),
        'copy': copy_of_large_array(array),  # read once, written once
    }
    import mxnet as mx
    seconds = interleaved_best_times({name: run for name, (run, _) in runs.items()},
                                     repeats, mx.nd.waitall)
    attention_flops = 14 * hidden * float((lengths ** 2).sum())
    return {name: {'seconds': seconds[name], 'gflops_per_s': attention_flops / seconds[name]
                   / 1e9} if num_bytes is None else stream(seconds[name], num_bytes)
            for name, (_, num_bytes) in runs.items()}


def forward_backward(function, inputs, array):
    """A call of forward + backward of function(F, *inputs), hybridized with static
    memory as in training (imperatively, every call would touch freshly allocated
    memory), the output's gradient one random array made once by `array(*shape)`, as
    a later layer's would be (`backward()` without it fills a new array of ones each
    call: a pass over memory that no kernel makes); called once before it is returned.

    The gradient is made like the inputs, from NumPy's numbers: one drawn by MXNet's
    own sampler (`np.random.normal`) left LayerNorm and dropout at half their speed in
    most fresh processes on an AVX-512 CPU, though the same numbers copied into an
    array made like the inputs ran at full speed."""
    from mxnet import autograd
    block = kernel_block(function)
    block.hybridize(static_alloc=True, static_shape=True)
    for x in inputs:
        x.attach_grad()
    output_gradient = array(*block(*inputs).shape)

    def run():
        with autograd.record():
            out = block(*inputs)
        out.backward(output_gradient)
    run()
    return run


def copy_of_large_array(array):
    """(a call copying a 256 MB array, the bytes it reads and writes)."""
    big, copied = array(64, 1 << 20), array(64, 1 << 20)  # 256 MB each
    return (lambda: big.copyto(copied)), 2 * big.size * 4


def adam_step(array):
    """A call of the fused optimizer's norm and update of one 30522 x 256 parameter:
    the norm reads the gradient, the update reads weight, gradient and both moments
    and writes all four (9 arrays' bytes)."""
    import mxnet as mx
    weight, grad, mean, var = (array(30522, 256).as_nd_ndarray() for _ in range(4))

    def run():
        norm = mx.nd.sqrt(mx.nd.d2lbert_sum_squares(grad, num_arrays=1))
        scale = mx.nd.minimum(1.0 / (norm + 1e-6), 1.0)
        mx.nd.d2lbert_adam_update(weight, grad, mean, var, scale, lr=1e-4, wd=0.01,
                                  decoupled=1)
    return run


def kernel_block(function):
    """A hybridizable block computing function(F, *inputs)."""
    from mxnet.gluon import nn

    class KernelBlock(nn.HybridBlock):
        def hybrid_forward(self, F, *inputs):
            return function(F, *inputs).as_np_ndarray()
    return KernelBlock()


def stream(seconds, num_bytes):
    return {'seconds': seconds, 'gb_per_s': num_bytes / seconds / 1e9}
