"""The dropout masks of d2lbert's kernels, recomputed in NumPy from their seed.

The kernels keep element (row, column) iff a hash of (seed, row, column) is at least
p * 2^32 (`d2lbert/kernels/common.h`); this is the same hash written independently
with NumPy's wrapping uint32 arithmetic, so the tests can check the kernels' dropout
against a NumPy forward and backward pass with exactly their mask.
"""
import numpy as onp


def mix32(x):
    """'lowbias32' integer mixer, on uint32 arrays."""
    x = onp.asarray(x, dtype=onp.uint32)
    x = x ^ (x >> onp.uint32(16))
    x = x * onp.uint32(0x7feb352d)
    x = x ^ (x >> onp.uint32(15))
    x = x * onp.uint32(0x846ca68b)
    return x ^ (x >> onp.uint32(16))


def dropout_mask(seed, rows, columns, rate):
    """(len(rows), columns) float64: 1 / (1 - rate) where kept, 0 where dropped.

    seed: the (2,) int32 seed output of a kernel; rows: the mask rows (int64)."""
    seed = onp.asarray(seed).astype(onp.int64).astype(onp.uint32)
    rows = onp.asarray(rows, dtype=onp.int64)
    low = (rows & 0xFFFFFFFF).astype(onp.uint32)
    high = (rows >> 32).astype(onp.uint32)
    key = mix32(mix32(low ^ seed[0]) + (high ^ seed[1]))
    column = onp.arange(columns, dtype=onp.uint32) * onp.uint32(0x9e3779b9)
    hashes = mix32(key[:, None] + column[None, :])
    threshold = onp.uint32(min(float(onp.float32(rate)) * 2.0 ** 32, 2.0 ** 32 - 1))
    return onp.where(hashes >= threshold, 1.0 / (1.0 - float(onp.float32(rate))), 0.0)
