"""d2lbert's attention kernel (`d2lbert_attention`) against a float64 NumPy attention:
padded and packed layouts, dropout with the kernel's own mask (recomputed in NumPy
from its seed), gradients; and `FusedMultiHeadAttention` against the book's
`MultiHeadAttention`.
"""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, np

from d2lbert.fast import accelerate, kernels
from d2lbert.model import MultiHeadAttention
from d2lbert.model.precision import BFLOAT16, cast
from d2lbert.run import precision as run_precision
from dropout_masks import dropout_mask

TRAINING, NOT_TRAINING = 2.0, 1.0  # values of the training flag (kernels.training_flag)


@pytest.fixture(autouse=True)
def loaded_kernels():
    """CI has a compiler: the kernels must build (this also loads them into MXNet)."""
    assert kernels.available()


def example_rows(lens, seq_len, packed):
    """First row of each example and its number of query rows."""
    counts = onp.asarray(lens) if packed else onp.full(len(lens), seq_len)
    return onp.concatenate([[0], onp.cumsum(counts)[:-1]]), counts


def numpy_attention(qkv, lens, heads, seq_len, packed, dcontext, mask=None):
    """Context and d qkv in float64. qkv: (rows, 3H) interleaved per head;
    mask(mask_rows, columns): the dropout mask, or None."""
    rows, hidden = qkv.shape[0], qkv.shape[1] // 3
    d = hidden // heads
    context, dqkv = onp.zeros((rows, hidden)), onp.zeros_like(qkv)
    for b, (first, count) in enumerate(zip(*example_rows(lens, seq_len, packed))):
        L = int(lens[b])
        for j in range(heads):
            block = qkv[first:first + count, j * 3 * d:(j + 1) * 3 * d]
            Q, K, V = block[:, :d], block[:L, d:2 * d], block[:L, 2 * d:]
            scores = Q @ K.T / onp.sqrt(d)
            P = onp.exp(scores - scores.max(axis=1, keepdims=True))
            P /= P.sum(axis=1, keepdims=True)
            M = (onp.ones_like(P) if mask is None
                 else mask((first + onp.arange(count)) * heads + j, L))
            W = P * M
            context[first:first + count, j * d:(j + 1) * d] = W @ V
            dC = dcontext[first:first + count, j * d:(j + 1) * d]
            dP = (dC @ V.T) * M
            dZ = P * (dP - (dP * P).sum(axis=1, keepdims=True))
            grad = dqkv[first:first + count, j * 3 * d:(j + 1) * 3 * d]
            grad[:, :d] = dZ @ K / onp.sqrt(d)
            grad[:L, d:2 * d] = dZ.T @ Q / onp.sqrt(d)
            grad[:L, 2 * d:] = W.T @ dC
    return context, dqkv


def run_kernel(qkv, lens, heads, rate=0.0, flag=TRAINING, dcontext=None, dtype='float32',
               first_query_only=0):
    """The kernel's context, d qkv and dropout seed (imperative, with autograd), its
    input, output and their gradients in `dtype` (float32 or bfloat16)."""
    x = np.array(qkv, dtype='float32')
    x.attach_grad()
    with autograd.record():
        context, _, seed = mx.nd.d2lbert_attention(
            cast(dtype, x)[0].as_nd_ndarray(), np.array(lens, dtype='int32').as_nd_ndarray(),
            mx.nd.array([flag]), heads=heads, dropout=rate, first_query_only=first_query_only)
    context.backward(cast(dtype, np.array(dcontext, dtype='float32'))[0].as_nd_ndarray())
    return (cast('float32', context.as_np_ndarray())[0].asnumpy(), x.grad.asnumpy(),
            seed.asnumpy())


def random_case(batch, seq_len, hidden, packed, seed=0, extra_rows=3):
    rng = onp.random.default_rng(seed)
    lens = rng.integers(1, seq_len + 1, size=batch)
    lens[0], lens[-1] = 1, seq_len  # the extremes
    rows = int(lens.sum()) + extra_rows if packed else batch * seq_len
    qkv = rng.normal(size=(rows, 3 * hidden))
    dcontext = rng.normal(size=(rows, hidden))
    return lens, qkv, dcontext


def assert_close(actual, expected, rtol=2e-5):
    assert actual.shape == expected.shape
    assert onp.abs(actual - expected).max() <= rtol * (1.0 + onp.abs(expected).max())


# head_dim 8 and 40 leave remainders of the micro-kernel's 2-vector tiles, 64 fills
# them; seq 70 gives more than one tile of keys.
SHAPES = [(4, 7, 8, 1), (3, 20, 16, 2), (3, 70, 80, 2), (2, 33, 256, 4)]


@pytest.mark.parametrize('packed', [False, True], ids=['padded', 'packed'])
@pytest.mark.parametrize('batch, seq_len, hidden, heads', SHAPES)
def test_matches_numpy_attention(batch, seq_len, hidden, heads, packed):
    lens, qkv, dcontext = random_case(batch, seq_len, hidden, packed)
    shape = (-1, 3 * hidden) if packed else (batch, seq_len, 3 * hidden)
    context, dqkv, _ = run_kernel(qkv.reshape(shape), lens, heads,
                                  dcontext=dcontext.reshape(shape[:-1] + (hidden,)))
    expected_context, expected_dqkv = numpy_attention(qkv, lens, heads, seq_len, packed,
                                                      dcontext)
    assert_close(context.reshape(-1, hidden), expected_context)
    assert_close(dqkv.reshape(-1, 3 * hidden), expected_dqkv)


@pytest.mark.parametrize('packed', [False, True], ids=['padded', 'packed'])
def test_first_query_only_is_the_first_rows_of_numpy_attention(packed):
    """first_query_only=1 (a sentence classifier's last block): each example's first
    row of context is NumPy's, its other rows 0; d qkv is NumPy's for a dcontext that is
    0 beyond the first rows (the other rows' dcontext is ignored: they are constants)."""
    batch, seq_len, hidden, heads = 3, 20, 16, 2
    lens, qkv, dcontext = random_case(batch, seq_len, hidden, packed)
    first_rows = onp.zeros(len(qkv), dtype=bool)
    first_rows[example_rows(lens, seq_len, packed)[0]] = True
    shape = (-1, 3 * hidden) if packed else (batch, seq_len, 3 * hidden)
    context, dqkv, _ = run_kernel(qkv.reshape(shape), lens, heads, first_query_only=1,
                                  dcontext=dcontext.reshape(shape[:-1] + (hidden,)))
    expected_context, expected_dqkv = numpy_attention(qkv, lens, heads, seq_len, packed,
                                                      dcontext * first_rows[:, None])
    expected_context[~first_rows] = 0
    assert_close(context.reshape(-1, hidden), expected_context)
    assert_close(dqkv.reshape(-1, 3 * hidden), expected_dqkv)


def test_scores_hundreds_apart_match_numpy_attention():
    """Each row's softmax subtracts the row's true maximum: with scores hundreds apart,
    any smaller shift overflows exp (inf, then nan)."""
    lens, qkv, dcontext = random_case(3, 40, 32, packed=True, seed=1)
    qkv *= 12.0  # scores q.k / sqrt(d) with a spread of about 144 * 4 / 4 = 144
    context, dqkv, _ = run_kernel(qkv, lens, 2, dcontext=dcontext)
    expected_context, expected_dqkv = numpy_attention(qkv, lens, 2, 40, True, dcontext)
    assert_close(context, expected_context, rtol=1e-4)
    assert_close(dqkv, expected_dqkv, rtol=1e-4)


@pytest.mark.parametrize('packed', [False, True], ids=['padded', 'packed'])
def test_dropout_is_the_hashed_mask(packed):
    """While training, the weights are dropped with the mask that the seed output
    determines; forward and backward use the same mask."""
    batch, seq_len, hidden, heads, rate = 3, 20, 16, 2, 0.3
    lens, qkv, dcontext = random_case(batch, seq_len, hidden, packed, seed=1)
    shape = (-1, 3 * hidden) if packed else (batch, seq_len, 3 * hidden)
    context, dqkv, seed = run_kernel(qkv.reshape(shape), lens, heads, rate,
                                     dcontext=dcontext.reshape(shape[:-1] + (hidden,)))
    expected_context, expected_dqkv = numpy_attention(
        qkv, lens, heads, seq_len, packed, dcontext,
        mask=lambda rows, columns: dropout_mask(seed, rows, columns, rate))
    assert_close(context.reshape(-1, hidden), expected_context)
    assert_close(dqkv.reshape(-1, 3 * hidden), expected_dqkv)
    no_dropout, _ = numpy_attention(qkv, lens, heads, seq_len, packed, dcontext)
    assert onp.abs(context.reshape(-1, hidden) - no_dropout).max() > 0.1


HAS_BF16 = bool(run_precision.cpu_flags() & set(run_precision.CPU_BF16_FLAGS))


def bfloat16_representable(x):
    """x (float64) rounded to bfloat16's 8 significant bits, so that the bfloat16
    kernel reads exactly the numbers the reference does."""
    return cast('float32', *cast(BFLOAT16, np.array(x, dtype='float32')))[0].asnumpy()


# Valid lengths around the blocks the kernel works in (vectors of 16 or 8 keys, tiles
# of 32 or 16 columns and 8 or 6 rows, 16 x 16 transposes): one short of, at, and one
# past a multiple, several tiles of queries and keys, head size 64.
BLOCK_EDGE_LENS = [1, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100]


@pytest.mark.parametrize('dtype', ['float32', BFLOAT16], ids=['float32', 'bfloat16'])
def test_block_edges_match_numpy_attention(dtype):
    """Lengths at the edges of the kernel's blocks, head size 64, with dropout: the
    context and every gradient equal the float64 reference's (in bfloat16: on numbers
    bfloat16 represents, within its rounding of the outputs)."""
    if dtype == BFLOAT16 and not HAS_BF16:
        pytest.skip('this CPU has neither avx512_bf16 nor amx_bf16')
    lens, heads, hidden, rate = onp.array(BLOCK_EDGE_LENS), 2, 128, 0.2
    rng = onp.random.default_rng(8)
    qkv = bfloat16_representable(rng.normal(size=(int(lens.sum()) + 5, 3 * hidden)))
    dcontext = bfloat16_representable(rng.normal(size=(qkv.shape[0], hidden)))
    context, dqkv, seed = run_kernel(qkv, lens, heads, rate, dcontext=dcontext, dtype=dtype)
    expected_context, expected_dqkv = numpy_attention(
        qkv, lens, heads, None, True, dcontext,
        mask=lambda rows, columns: dropout_mask(seed, rows, columns, rate))
    rtol = 2e-5 if dtype == 'float32' else 2 ** -8
    assert_close(context, expected_context, rtol)
    assert_close(dqkv, expected_dqkv, rtol)


def test_no_dropout_outside_training():
    lens, qkv, dcontext = random_case(3, 12, 16, packed=True, seed=2)
    context, dqkv, _ = run_kernel(qkv, lens, 2, rate=0.5, flag=NOT_TRAINING,
                                  dcontext=dcontext)
    expected_context, expected_dqkv = numpy_attention(qkv, lens, 2, 12, True, dcontext)
    assert_close(context, expected_context)
    assert_close(dqkv, expected_dqkv)


def test_packed_rows_after_the_examples_are_zero_and_change_nothing():
    """Rows beyond sum(valid_lens) (packing rounds the row count up) get zero context
    and zero gradient, and every other row is bit-for-bit the same (the dropout mask
    of a row depends on the row only)."""
    lens, qkv, dcontext = random_case(4, 10, 16, packed=True, seed=3, extra_rows=0)
    used = int(lens.sum())
    results = []
    for extra in (0, 7):
        x = onp.concatenate([qkv, onp.ones((extra, qkv.shape[1]))])
        dc = onp.concatenate([dcontext, onp.ones((extra, dcontext.shape[1]))])
        mx.random.seed(5)
        results.append(run_kernel(x, lens, 2, rate=0.3, dcontext=dc))
    (context, dqkv, seed), (context_extra, dqkv_extra, seed_extra) = results
    assert (seed == seed_extra).all()
    assert (context_extra[:used] == context).all() and (dqkv_extra[:used] == dqkv).all()
    assert (context_extra[used:] == 0).all() and (dqkv_extra[used:] == 0).all()


def test_same_seed_same_mask_other_seed_other_mask():
    lens, qkv, dcontext = random_case(2, 16, 16, packed=True, seed=4)
    def context(seed):
        mx.random.seed(seed)
        return run_kernel(qkv, lens, 2, rate=0.3, dcontext=dcontext)[0]
    assert (context(1) == context(1)).all()
    assert (context(1) != context(2)).any()


def test_too_few_packed_rows_is_an_error():
    """The kernel refuses (instead of reading past the rows) when the examples need
    more rows than qkv has (its backward checks the same)."""
    qkv, lens, flag = mx.nd.ones((5, 12)), mx.nd.array([3, 3], dtype='int32'), mx.nd.array([1.0])
    with pytest.raises(mx.base.MXNetError, match='fewer than sum'):
        mx.nd.d2lbert_attention(qkv, lens, flag, heads=2)[0].asnumpy()


def attention_block_outputs(X, valid_lens, hybridize, fast, seed=0):
    """Output and parameter gradients of a MultiHeadAttention with random weights,
    accelerated (fast) or the book's."""
    mx.random.seed(seed)
    block = MultiHeadAttention(32, 4)
    block.initialize(mx.init.Normal(0.3))
    if fast:
        block = accelerate(block)
    if hybridize:
        block.hybridize(static_alloc=True, static_shape=True)
    with autograd.record():
        Y = block(X, valid_lens)
    Y.backward(np.array(onp.random.default_rng(seed).normal(size=Y.shape), dtype='float32'))
    params = block.collect_params()
    return Y.asnumpy(), {name[len(block.prefix):]: p.grad().asnumpy()
                         for name, p in params.items()}


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_fused_block_matches_the_books_block(hybridize):
    """The block with the kernel and the book's (MXNet's operators, the GPU path)
    give the same output and parameter gradients at every valid position."""
    X = np.array(onp.random.default_rng(7).normal(size=(3, 9, 32)), dtype='float32')
    valid_lens = np.array([9, 4, 1], dtype='int32')
    fused, fused_grads = attention_block_outputs(X, valid_lens, hybridize, fast=True)
    plain, plain_grads = attention_block_outputs(X, valid_lens, hybridize, fast=False)
    assert_close(fused, plain)
    for name in plain_grads:
        assert_close(fused_grads[name], plain_grads[name])


def test_block_uses_the_kernel():
    block = accelerate(MultiHeadAttention(16, 2))
    block.initialize()
    block.hybridize()
    block(np.ones((2, 3, 16)), np.array([3, 2]))
    assert 'd2lbert_attention' in block._cached_graph[1].tojson()
