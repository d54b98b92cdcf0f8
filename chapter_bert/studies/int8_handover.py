"""What handing a feed-forward block's first int8 product to its second in 8 bits saves:
one block of MiniLM's shape as `Int8FeedForward` against `Int8Dense`, GELU, `Int8Dense`.

    python chapter_bert/studies/int8_handover.py [--rows 896] [--rounds 30]

Both compute the same block (384 -> 1536 -> 384 units, GELU; random weights, no
smoothing) on --rows tokens (896: 64 SST-2 sentences of 14 tokens, a batch of
`encode`), each hybridized. `Int8FeedForward` scales the first product's sums back,
applies GELU and rounds the result for the second product in one pass
(`d2lbert_requantize`); the other takes three operators (`d2lbert_dequantize`, MXNet's
GELU, `d2lbert_quantize`), writing the float32 (rows, 1536) output twice and reading
it three times. Each is timed once per round over --rounds interleaved rounds (a
shared machine's speed drifts within seconds), its best time kept, with
OMP_NUM_THREADS as set (MXNet runs one thread without it). DNNL_MAX_CPU_ISA and
D2LBERT_KERNEL_MARCH are recorded. Written to --out, whole or not at all.
"""
import os
import sys

import numpy as onp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import (check_results_file, fail, run_record, study_parser,  # noqa: E402
                    write_results)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, 'chapter_bert', 'results', 'int8-handover.json')
HIDDEN, FFN_HIDDEN = 384, 1536  # MiniLM's


def feed_forward_blocks(pairs_bounded):
    """{name: a function of the input} of one feed-forward block with random weights:
    'handover' (`Int8FeedForward`) and 'three operators' (`Int8Dense`, GELU,
    `Int8Dense`), hybridized; the weights rounded with their pairs bounded or not
    (`d2lbert.fast.int8.int8_weight`)."""
    import mxnet as mx
    from mxnet import np
    from d2lbert.fast import Int8Dense, Int8FeedForward
    from d2lbert.fast.int8 import initialize_constants
    from d2lbert.model.transformer import PositionWiseFFN
    rng = onp.random.default_rng(0)
    ffn = PositionWiseFFN(HIDDEN, FFN_HIDDEN, 'gelu')
    ffn.initialize()
    for dense in (ffn.dense1, ffn.dense2):
        dense.weight.set_data(np.array(rng.normal(size=dense.weight.shape) * 0.05,
                                       dtype='float32'))
    ones = [1.0] * HIDDEN, [1.0] * FFN_HIDDEN  # column scales c: no smoothing
    handover = Int8FeedForward(ffn, *ones, pairs_bounded)
    dense1 = Int8Dense(ffn.dense1, ones[0], pairs_bounded)
    dense2 = Int8Dense(ffn.dense2, ones[1], pairs_bounded)
    for block in (handover, dense1, dense2):
        initialize_constants(block, mx.cpu())
    for block in (handover, dense1, dense2, ffn.activation):
        block.hybridize(static_alloc=True)
    return {'handover': handover,
                 'three operators': lambda X: dense2(ffn.activation(dense1(X)))}


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--rows', type=int, default=896)
    parser.add_argument('--rounds', type=int, default=30)
    parser.add_argument('--out', default=RESULTS)
    args = parser.parse_args(argv)
    check_results_file('int8_handover', args.out, {})
    from mxnet import np, npx
    from d2lbert.bench.timing import interleaved_best_times
    from d2lbert.fast import kernels, pairs_bounded
    npx.set_np()
    if not kernels.available():
        fail('int8_handover', "d2lbert's kernels could not be built")
    blocks = feed_forward_blocks(pairs_bounded())
    X = np.array(onp.random.default_rng(1).normal(size=(args.rows, HIDDEN)), dtype='float32')
    outputs = {name: block(X).asnumpy() for name, block in blocks.items()}
    seconds = interleaved_best_times({name: (lambda block=block: block(X))
                                      for name, block in blocks.items()}, args.rounds,
                                     npx.waitall)
    scale = onp.abs(outputs['three operators']).max()
    write_results('int8_handover', args.out, {
        'what': "one int8 feed-forward block of MiniLM's shape: its products handing over "
                'in 8 bits in one pass, against three operators (best of interleaved '
                'rounds)',
        **run_record('int8_handover', argv),
        **{name: os.environ.get(name) for name in ('DNNL_MAX_CPU_ISA',
                                                  'D2LBERT_KERNEL_MARCH',
                                                  'OMP_NUM_THREADS')},
        'rows': args.rows, 'rounds': args.rounds, 'pairs_bounded': pairs_bounded(),
        'milliseconds': {name: 1e3 * time for name, time in seconds.items()},
        'speedup': seconds['three operators'] / seconds['handover'],
        'largest_difference_over_largest_output': float(
            onp.abs(outputs['handover'] - outputs['three operators']).max() / scale)})


if __name__ == '__main__':
    main()
