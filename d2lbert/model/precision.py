"""Mixed precision: the model's matrix products in bfloat16 or float16, everything
else in float32.

    model = compute_in(net, 'bfloat16')   # a new model, the same parameters; net as it was

A matrix product is where reduced precision pays: a CPU with avx512_bf16 multiplies
bfloat16 matrices about twice as fast as float32 ones, a GPU's tensor cores float16
ones many times faster, and each number is half the bytes. Softmax, LayerNorm, the
losses and their sums stay float32: they are cheap, and their sums need float32's
23-bit mantissa (bfloat16 keeps 7). So does the next-sentence head (its pooler and 2-way
output, two products of one vector per pair): nothing to gain there, and in bfloat16
its rounding delayed the default job's NSP learning past step 500 on one seed. So do
the fine-tuning models' heads (`TASK_MODELS`: their output layers, a few outputs per
example or token, and the classifiers' pooler), for the same reason.

`compute_in` leaves the parameters float32 (the "master weights": the optimizer
updates them, checkpoints save them) and casts around each product instead: its
inputs and parameters to the compute type, its output back to float32. The cast's
backward casts the gradient back, so every gradient arrives in float32 too. Each
block keeps its class's parameters and names; `compute_in` gives the blocks that
multiply matrices a subclass that casts (`book_class` sees through it) and records
the compute type on every block (`compute_dtype`), all on a copy of the model's
blocks (`util.shared_blocks`): the caller's model is left as it was, and the new one
trains the same parameters. A block whose layers can pass values to each other in the
compute type, without casting them to float32 and back, sets that up in its method
`link_reduced_layers` (`ReducedPrecisionFFN`), which `compute_in` calls last.
"""
import math

import mxnet as mx
import numpy as onp
from mxnet.gluon import nn

from ..util.numpy_mode import numpy_mode_block
from ..util.shared_blocks import copy_sharing_parameters
from .attention import MultiHeadAttention, masked_softmax
from .classifier import BERTClassifier
from .heads import MaskLMDecoder, NextSentenceClassifier, gather_positions
from .question_answering import BERTForQuestionAnswering
from .tagger import BERTTagger
from .transformer import PositionWiseFFN

# MXNet 1.9 names bfloat16 with this NumPy structured type (mxnet.contrib.amp too)
BFLOAT16 = onp.dtype([('bfloat16', onp.uint16)])
COMPUTE_DTYPES = {'float32': onp.dtype(onp.float32), 'bfloat16': BFLOAT16,
                  'float16': onp.dtype(onp.float16)}


def compute_dtype(block):
    """The type `block`'s matrix products compute in: float32 unless `compute_in`
    chose another."""
    return getattr(block, 'compute_dtype', COMPUTE_DTYPES['float32'])


def cast(dtype, *arrays, parameters=False):
    """`arrays` (NumPy-interface arrays or symbols; None stays None) cast to `dtype`,
    as a list.

    MXNet 1.9's NumPy `astype` does not know bfloat16; the legacy `amp_cast` does,
    on oneDNN (its `Cast` is 40x slower from bfloat16 to float32), and its backward
    casts the gradient back to the input's type. That backward writes nothing where
    it should add, as into parameters whose gradients add up (grad_req='add', how
    d2lbert trains): `parameters=True` puts an `identity`, whose backward adds, first
    (a copy of each parameter)."""
    casts = []
    for array in arrays:
        if array is not None:
            legacy = array.as_nd_ndarray()
            module = mx.sym if isinstance(legacy, mx.sym.Symbol) else mx.nd
            if parameters:
                legacy = module.identity(legacy)
            array = module.amp_cast(legacy, dtype=dtype).as_np_ndarray()
        casts.append(array)
    return casts


def fully_connected(F, dtype, X, weight, bias, cast_input=True, cast_output=True,
                    parameters=True, **kwargs):
    """`F.npx.fully_connected(X, weight, bias, **kwargs)` computed in `dtype`;
    returns float32. cast_input=False: X is in `dtype` already; cast_output=False:
    returns `dtype`; parameters=False: weight and bias are computed arrays (e.g. a
    slice of a parameter), not parameters (see `cast`)."""
    if dtype == COMPUTE_DTYPES['float32']:
        return F.npx.fully_connected(X, weight, bias, **kwargs)
    if cast_input:
        X, = cast(dtype, X)
    weight, bias = cast(dtype, weight, bias, parameters=parameters)
    Y = F.npx.fully_connected(X, weight, bias, **kwargs)
    return cast('float32', Y)[0] if cast_output else Y


def batch_dtype(dtype):
    """The type attention's batched products (`npx.batch_dot`) compute in: MXNet 1.9
    has float16 ones (on a GPU) but no bfloat16 one, so under bfloat16 they stay
    float32."""
    return dtype if dtype == COMPUTE_DTYPES['float16'] else COMPUTE_DTYPES['float32']


@numpy_mode_block
class ReducedPrecisionDense(nn.Dense):
    """`nn.Dense` whose product computes in its `compute_dtype`; its activation, if
    any, in float32. It takes and returns float32 unless told its input is in the
    compute type already (`casts_input = False`) or its output may stay so
    (`casts_output = False`): `ReducedPrecisionFFN` tells its two layers."""
    casts_input = casts_output = True

    def hybrid_forward(self, F, x, weight, bias=None):
        Y = fully_connected(F, compute_dtype(self), x, weight, bias, self.casts_input,
                            self.casts_output, no_bias=bias is None,
                            num_hidden=self._units, flatten=self._flatten)
        return self.act(Y) if self.act is not None else Y


@numpy_mode_block
class ReducedPrecisionFFN(PositionWiseFFN):
    """`PositionWiseFFN` whose hidden layer, the widest activations of the block,
    stays in the compute type from `dense1` through ReLU (oneDNN has a bfloat16 ReLU)
    to `dense2`: two casts fewer each way. With GELU (no bfloat16 GELU in MXNet 1.9)
    the dense layers cast around themselves, as everywhere."""
    def link_reduced_layers(self):
        """Tell the two dense layers to pass the hidden layer in the compute type, if
        both compute in it (one may have been kept float32: `keep_float32`)."""
        linked = (isinstance(self.activation, nn.Activation)  # ReLU
                  and compute_dtype(self.dense1) == compute_dtype(self.dense2)
                  != COMPUTE_DTYPES['float32'])
        self.dense1.casts_output = self.dense2.casts_input = not linked


@numpy_mode_block
class ReducedPrecisionAttention(MultiHeadAttention):
    """`MultiHeadAttention` whose projections compute in its `compute_dtype`, and
    its two batched products in `batch_dtype` of it; the softmax in float32."""
    def hybrid_forward(self, F, X, valid_lens, query_weight, key_weight, value_weight,
                       query_bias, key_bias, value_bias):
        queries = self.split_heads(F, self.project(F, X, query_weight, query_bias))
        keys = self.split_heads(F, self.project(F, X, key_weight, key_bias))
        values = self.split_heads(F, self.project(F, X, value_weight, value_bias))
        weights = self.dropout(self.weights(F, queries, keys, valid_lens))
        weights = F.npx.reshape(weights, (-5, -2, -2))  # (batch * heads, seq, seq)
        return self.output(self.merge_heads(F, self.batch_dot(F, weights, values)))

    def project(self, F, X, weight, bias):
        return fully_connected(F, compute_dtype(self), X, weight, bias,
                               num_hidden=self.num_hiddens, flatten=False)

    def weights(self, F, queries, keys, valid_lens):
        head_dim = self.num_hiddens // self.num_heads
        scores = self.batch_dot(F, queries, keys, transpose_b=True) / math.sqrt(head_dim)
        scores = F.npx.reshape(scores, (-6, -1, self.num_heads, -2, -2))
        return masked_softmax(scores, valid_lens)

    def batch_dot(self, F, A, B, **kwargs):
        """`F.npx.batch_dot(A, B, **kwargs)` in `batch_dtype`; returns float32."""
        dtype = batch_dtype(compute_dtype(self))
        if dtype == COMPUTE_DTYPES['float32']:
            return F.npx.batch_dot(A, B, **kwargs)
        return cast('float32', F.npx.batch_dot(*cast(dtype, A, B), **kwargs))[0]


@numpy_mode_block
class ReducedPrecisionMaskLMDecoder(MaskLMDecoder):
    """`MaskLMDecoder` whose output layer computes in its `compute_dtype`."""
    def hybrid_forward(self, F, X, pred_positions, output_weight, output_bias):
        hidden = self.transform(gather_positions(X, pred_positions))
        return fully_connected(F, compute_dtype(self), hidden, output_weight, output_bias,
                               num_hidden=self.vocab_size, flatten=False)


# The fine-tuning models, whose heads (output layer, and pooler) stay float32 like the
# next-sentence head: a few outputs per example, where the casts would cost more than
# the reduced type saves.
TASK_MODELS = (BERTClassifier, BERTTagger, BERTForQuestionAnswering)

REDUCED_PRECISION_BLOCKS = {nn.Dense: ReducedPrecisionDense,
                            PositionWiseFFN: ReducedPrecisionFFN,
                            MultiHeadAttention: ReducedPrecisionAttention,
                            MaskLMDecoder: ReducedPrecisionMaskLMDecoder}
BOOK_CLASSES = {casting: book for book, casting in REDUCED_PRECISION_BLOCKS.items()}


def book_class(block):
    """The class `block` had before `compute_in` gave it a casting subclass: its own
    class if it has none."""
    return BOOK_CLASSES.get(type(block), type(block))


def compute_in(net, dtype):
    """A new model: `net` with its matrix products computing in `dtype` ('float32',
    'bfloat16' or 'float16'); its parameters, shared with `net` (the same Parameter
    objects: `util.shared_blocks`), stay float32, and `net` stays as it was.

    The copies of blocks of the book's classes get their casting subclass; every block
    records `compute_dtype`, which any block may read; the next-sentence head and the
    task heads' output layers (and poolers) compute in float32; then
    `link_reduced_layers`."""
    dtype = COMPUTE_DTYPES[dtype]
    model = copy_sharing_parameters(net)

    def record(block):
        block.compute_dtype = dtype
        if dtype != COMPUTE_DTYPES['float32']:
            block.__class__ = REDUCED_PRECISION_BLOCKS.get(type(block), type(block))

    model.apply(record)
    for block in blocks_of(model, NextSentenceClassifier):
        to_float32(block)
    for head in blocks_of(model, TASK_MODELS):
        for layer in (head.output, getattr(head, 'pooler', None)):
            if layer is not None:
                to_float32(layer)
    return link_reduced_layers(model)


def keep_float32(net, blocks):
    """A new model: `net` (made by `compute_in`) with `blocks`, blocks of `net`, and
    the blocks inside them computing in float32; the same parameters, and `net` stays
    as it was.

        model = keep_float32(net, [block.attention for block in net.encoder.blocks])
    """
    copies = {}
    model = copy_sharing_parameters(net, copies)
    for block in blocks:
        if id(block) not in copies:
            raise ValueError(f'keep_float32: {block.name} is not a block of {net.name}')
        to_float32(copies[id(block)])
    return link_reduced_layers(model)


def to_float32(block):
    """Have `block` (and the blocks inside it), of a model being made, compute in
    float32."""
    def to_float32_block(inner):
        inner.compute_dtype = COMPUTE_DTYPES['float32']
        if isinstance(inner, ReducedPrecisionDense):
            inner.__class__ = nn.Dense
    block.apply(to_float32_block)


def feed_forward_inputs_in_float32(net):
    """A new model: `net` (made by `compute_in`, in bfloat16) with the first layer of
    each feed-forward block in float32 (sentence vectors: `d2lbert encode`); the same
    parameters, and `net` stays as it was.

    Its output goes through GELU (or ReLU) into the block's widest layer, and its
    rounding is what moves a short text's vector most: over MiniLM's vectors of 20,000
    SST-2 sentences the least cosine to sentence-transformers' is 0.99990 all in
    bfloat16 and 0.99994 so, at about a quarter of bfloat16's gain given up
    (chapter_bert/results/encode-precision.json, docs/performance.md)."""
    return keep_float32(net, [ffn.dense1 for ffn in blocks_of(net, PositionWiseFFN)])


def link_reduced_layers(net):
    """Call `link_reduced_layers()` of every block of `net` that has that method (a
    block whose layers pass values to each other in the compute type, uncast), in
    place; returns net. `compute_in`, `keep_float32` and whatever else gives a model
    other classes call it last on the model they make."""
    net.apply(lambda block: block.link_reduced_layers()
              if hasattr(block, 'link_reduced_layers') else None)
    return net


def blocks_of(net, cls):
    """The blocks of `net` (itself included) that are instances of `cls`."""
    found = []
    net.apply(lambda block: found.append(block) if isinstance(block, cls) else None)
    return found
