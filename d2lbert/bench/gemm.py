"""What fp32 matrix-multiply rate does MXNet reach on this machine?

The ceiling for any BERT step: nearly all of its FLOPs are matrix products (see
`flops.py`). We time one large `npx.fully_connected` (the operator behind
`gluon.nn.Dense`), X (m x k) times Wᵀ (k x n), best of several runs, and divide its
2·m·k·n FLOPs by the time. Run in the same process set-up (thread count) as the
models, so "model FLOP/s / GEMM FLOP/s" says how close a model gets to the hardware.
"""
from .timing import best_time


def gemm_rate(m=4096, k=1024, n=4096, repeats=5, ctx=None):
    """FLOP/s of X (m, k) · W (n, k)ᵀ on `ctx` (default: the CPU), the best of `repeats`
    after one warm-up call."""
    import mxnet as mx
    from mxnet import np, npx
    npx.set_np()
    x = np.random.uniform(-1, 1, size=(m, k), ctx=ctx)
    w = np.random.uniform(-1, 1, size=(n, k), ctx=ctx)
    multiply = lambda: npx.fully_connected(x, w, num_hidden=n, no_bias=True)
    multiply()
    seconds = best_time(multiply, repeats, mx.nd.waitall)
    return {'shape': [m, k, n], 'seconds': seconds, 'flops_per_s': 2 * m * k * n / seconds}
