"""int8 matrix products: an encoder's products on oneDNN's integer kernels, calibrated.

    ranges = calibrate(net, batches)         # on the float32 model, some batches of text
    net8 = int8_model(net, ranges)           # a new model; net is left as it was

An int8 product rounds both of its operands to 8-bit integers, multiplies and sums them
exactly in 32-bit integers, and scales the sums back to float32. BERT's layer inputs
have a few columns (channels) far larger than the rest, which one scale for the whole
input serves badly; so the product x W^T is computed as (x / c)(W c)^T for a scale c_k
per input column k, c_k = max|x_k|^0.75 / max|W_k|^0.25 ("smoothing", as SmoothQuant
does; 0.75 gave MiniLM's layers the smallest errors of 0, 0.5 and 0.75): the large
columns shrink in the input and grow in the weight, where each row has its own scale.
The weight W c is rounded once, row by row: row j (output j) as `round(W_j c / s_j)`,
s_j = max|W_j c| / 127. The input x / c is rounded with one scale fixed in advance
("static"): s_x = r / 127 for a range r measured on the model's inputs over some texts
(`calibrate`), values beyond r clipped. Output j is then `s_x s_j sum_k round(x_k / (c_k
s_x)) round(W_jk c_k / s_j)` plus the bias, in float32. oneDNN multiplies int8 matrices
on AVX2's and AVX-512's integer dot products (VNNI where the CPU has it); MXNet 1.9 calls
it (`quantized_fully_connected`) between d2lbert's kernels `d2lbert_quantize` and
`d2lbert_dequantize`, one pass over the input and one over the output.

The encoder's four products per block are int8: the attention's Q/K/V projection and
output layer, the feed-forward block's two layers. The rest stays float32: LayerNorm,
softmax, the attention's small batched products, GELU, and the heads (the pooler and
output layer of a task model, a few outputs per text).

A range r trades clipping (r too small) against resolution (r too large: the many
small values round to few integers). `calibrate` tries a few quantiles of each layer's
inputs and keeps the one whose int8 product is nearest the float32 one; a layer whose
error stays above MAX_ERROR is kept float32 (`Int8Ranges.int8_layers`), and so are the
kinds of layers that moved a task model's labels (TASK_MODEL_KINDS): measured choices
(chapter_bert/studies/int8_accuracy.py, docs/performance.md).
"""
import dataclasses
from typing import Dict, List

import mxnet as mx
import numpy as onp
from mxnet.gluon import nn

from ..model.transformer import PositionWiseFFN
from .attention import FusedMultiHeadAttention
from ..util.numpy_mode import in_numpy_mode, numpy_mode_block
from ..util.shared_blocks import copy_sharing_parameters
from . import kernels

# the quantiles of |input / c| tried as a layer's range; 1.0 is its largest value
RANGE_QUANTILES = (1.0, 0.9999, 0.999)
SMOOTHING = 0.75  # c_k = max|x_k|^SMOOTHING / max|W_k|^(1 - SMOOTHING) (see above)
# a layer whose int8 output's relative error (`relative_error`) exceeds this stays float32
MAX_ERROR = 0.025
ERROR_ROWS = 1024  # the most input rows of a layer its error is measured on
# the kinds of products that may run in int8 (`quantizable_layers`' names end with them):
# all for sentence vectors; a task model's labels moved with Q/K/V or the feed-forward
# second layers in int8 (a MiniLM SST-2 classifier, labels equal to fp32's on 98.7% and
# 98.5%), not with the first layers and the attention output (99.3%): docs/performance.md
SENTENCE_VECTOR_KINDS = ('qkv', 'output', 'dense1', 'dense2')
TASK_MODEL_KINDS = ('output', 'dense1')


@dataclasses.dataclass
class Int8Ranges:
    """A calibration: each layer's input range and int8 error (`calibrate`).

    ranges: {layer name: r}, the range of the layer's input x / c (`quantizable_layers`)
    errors: {layer name: relative error of its int8 output over the calibration texts}
    column_scales: {layer name: c, a list of num_inputs numbers}
    """
    ranges: Dict[str, float]
    errors: Dict[str, float]
    column_scales: Dict[str, List[float]]

    def int8_layers(self, kinds=SENTENCE_VECTOR_KINDS) -> List[str]:
        """The layers of `kinds` whose error is at most MAX_ERROR."""
        return [name for name in self.ranges if self.errors[name] <= MAX_ERROR
                and name.split('.')[1] in kinds]


def quantizable_layers(net):
    """{name: block} of net's encoder products that can run in int8: per encoder block
    i, 'i.qkv' (the attention block, on d2lbert's attention kernel), 'i.output' (its
    output layer), 'i.dense1', 'i.dense2' (its feed-forward block's)."""
    layers = {}
    for i, block in enumerate(net.encoder.blocks):
        if isinstance(block.attention, FusedMultiHeadAttention) and kernels.usable(
                block.attention.query_weight):
            layers[f'{i}.qkv'] = block.attention
        layers[f'{i}.output'] = block.attention.output
        if isinstance(block.ffn, PositionWiseFFN):
            layers[f'{i}.dense1'], layers[f'{i}.dense2'] = block.ffn.dense1, block.ffn.dense2
    return layers


def layer_weight(layer):
    """The float32 weight (num_outputs, num_inputs) and bias (num_outputs,) of a
    quantizable layer as host arrays; the attention's Q/K/V interleaved per head as
    `FusedMultiHeadAttention.interleaved_projection` does."""
    if isinstance(layer, nn.Dense):
        return layer.weight.data().asnumpy(), layer.bias.data().asnumpy()
    weight, bias = layer.interleaved_projection(
        mx.nd, [p.data().as_np_ndarray() for p in (layer.query_weight, layer.key_weight,
                                                   layer.value_weight)],
        [p.data().as_np_ndarray() for p in (layer.query_bias, layer.key_bias,
                                            layer.value_bias)])
    return weight.asnumpy(), bias.asnumpy()


def copy_of_model(net):
    """A copy of `net`'s blocks that shares its parameters (`copy_sharing_parameters`),
    not hybridized; changing the copy's blocks leaves net's as they were."""
    copied = copy_sharing_parameters(net)
    copied.hybridize(False)
    return copied


@in_numpy_mode
def calibrate(net, batches, max_rows=ERROR_ROWS):
    """The `Int8Ranges` of net's quantizable layers (`quantizable_layers`), measured on
    `batches`: an iterable of (tokens, segments, valid_lens) arrays, as net takes them.
    net runs in float32 (a copy of it, imperatively); each layer's inputs are kept, up
    to max_rows rows of them for the error (at random beyond that)."""
    probe = copy_of_model(net)
    inputs = {name: [] for name in quantizable_layers(probe)}

    def keep(name):
        return lambda block, args: inputs[name].append(
            args[0].asnumpy().reshape(-1, args[0].shape[-1]))
    hooks = [layer.register_forward_pre_hook(keep(name))
             for name, layer in quantizable_layers(probe).items()]
    for batch in batches:
        probe(*batch)
    for hook in hooks:
        hook.detach()
    ranges, errors, column_scales = {}, {}, {}
    rng = onp.random.RandomState(0)
    for name, layer in quantizable_layers(net).items():
        X = onp.concatenate(inputs.pop(name))
        weight, _ = layer_weight(layer)
        scales = smoothing_scales(X, weight)
        if len(X) > max_rows:
            X = X[rng.choice(len(X), max_rows, replace=False)]
        exact = X @ weight.T  # float32: its rounding is far below int8's
        X, weight = X / scales, weight * scales
        errors[name], ranges[name] = min(
            (relative_error(X, weight, r, exact), r) for r in candidate_ranges(X))
        column_scales[name] = scales.tolist()
    return Int8Ranges(ranges, errors, column_scales)


def smoothing_scales(X, weight):
    """c (num_inputs,) float32 for a layer's inputs X (rows, num_inputs) and weight
    (num_outputs, num_inputs): see the module doc."""
    largest_input = onp.maximum(onp.abs(X).max(axis=0), 1e-5)
    largest_weight = onp.maximum(onp.abs(weight).max(axis=0), 1e-5)
    return (largest_input ** SMOOTHING / largest_weight ** (1 - SMOOTHING)).astype('float32')


def candidate_ranges(X):
    """The ranges a layer's input X (rows, num_inputs) may be given: RANGE_QUANTILES of
    |X| (no larger than needed, never 0)."""
    magnitudes = onp.abs(X).ravel()
    return sorted({max(float(onp.quantile(magnitudes, q)), 1e-6) for q in RANGE_QUANTILES})


def relative_error(X, weight, input_range, exact=None):
    """|int8 product - float32 product| / |float32 product| (Frobenius norms) of X
    (rows, num_inputs) times weight (num_outputs, num_inputs).T, X rounded with the range
    `input_range` and weight by rows (see the module doc), in NumPy; exact: the float32
    product, if computed already."""
    weight_int8, weight_scales = int8_weight(weight)
    x_scale = input_range / 127
    X_int8 = onp.clip(onp.round(X / x_scale), -127, 127)
    product = (X_int8 @ weight_int8.T.astype('float32')) * (x_scale * weight_scales)
    exact = X @ weight.T if exact is None else exact
    return float(onp.linalg.norm(product - exact) / max(onp.linalg.norm(exact), 1e-30))


def int8_weight(weight):
    """(weight rounded to int8 row by row, the rows' scales (num_outputs,) float64)."""
    scales = onp.maximum(onp.abs(weight).max(axis=1), 1e-30).astype('float64') / 127
    return onp.round(weight / scales[:, None]).astype('int8'), scales


def int8_product(F, X, weight_int8, input_scales, output_scales, bias, num_outputs):
    """X (..., num_inputs) float32 times the int8 weight (num_outputs, num_inputs),
    returning float32 (..., num_outputs): X times input_scales (num_inputs,) (1 / (c_k
    s_x)) rounded to int8, the integer product, scaled by output_scales (num_outputs,)
    (s_x s_j) and the bias added (see the module doc). Needs d2lbert's kernels
    (`kernels.available()`): MXNet's `quantize_v2` has one scale per tensor, and oneDNN's
    graph pass fuses it with the product into one that rescales the sums by the ranges.
    """
    module = mx.sym if isinstance(X, mx.sym.Symbol) else mx.nd
    rows = module.reshape(X.as_nd_ndarray(), shape=(-1, 0), reverse=True)  # 2 axes
    input_scales, output_scales, bias = kernels.as_legacy(input_scales, output_scales, bias)
    X_int8 = module.d2lbert_quantize(rows, input_scales)
    span = module.ones(shape=(1,))  # the operands' ranges: they change no sum
    sums = module.contrib.quantized_fully_connected(  # int32
        data=X_int8, weight=weight_int8.as_nd_ndarray(), min_data=-span, max_data=span,
        min_weight=-span, max_weight=span, no_bias=True, num_hidden=num_outputs)[0]
    Y = module.d2lbert_dequantize(sums, output_scales, bias)
    return module.reshape_like(Y, X.as_nd_ndarray(), lhs_begin=0, lhs_end=1, rhs_begin=0,
                               rhs_end=-1).as_np_ndarray()


def int8_constants(block, weight, input_range, column_scales, prefix=''):
    """Give `block` (in its name scope) the constants of an int8 product with the float32
    `weight` (num_outputs, num_inputs), the range of its input divided by column_scales
    (c, num_inputs): weight_int8, input_scales, output_scales (see `int8_product`)."""
    column_scales = onp.asarray(column_scales, dtype='float64')
    weight_int8, row_scales = int8_weight(weight * column_scales)
    input_scale = input_range / 127
    values = {'weight_int8': weight_int8,
              'input_scales': (1 / (column_scales * input_scale)).astype('float32'),
              'output_scales': (row_scales * input_scale).astype('float32')}
    with block.name_scope():
        for name, value in values.items():
            setattr(block, name, block.params.get_constant(prefix + name, value))


@numpy_mode_block
class Int8Dense(nn.HybridBlock):
    """A `nn.Dense` (flatten=False) whose product is int8 (`int8_product`): its weight
    rounded once, its input's columns divided by column_scales and rounded with the range
    `input_range`; shares the Dense's bias.

    forward(X): X (..., in_units) float32; returns (..., units) float32"""
    def __init__(self, dense, input_range, column_scales):
        super().__init__(prefix=dense.prefix, params=dense.params)  # names as the Dense's
        self.units, self.act = dense._units, dense.act
        with self.name_scope():
            self.bias = self.params.get('bias')  # the Dense's
        int8_constants(self, dense.weight.data().asnumpy(), input_range, column_scales)

    def hybrid_forward(self, F, X, bias, weight_int8, input_scales, output_scales):
        Y = int8_product(F, X, weight_int8, input_scales, output_scales, bias, self.units)
        return self.act(Y) if self.act is not None else Y


@numpy_mode_block
class Int8Attention(nn.HybridBlock):
    """A `FusedMultiHeadAttention` whose Q/K/V projection is int8 (`int8_product`),
    its interleaved weight rounded once; shares the attention's biases and output
    layer, and computes the rest as it does (`FusedMultiHeadAttention.attend`).

    forward(X, valid_lens): as `FusedMultiHeadAttention`'s"""
    def __init__(self, attention, input_range, column_scales):
        super().__init__(prefix=attention.prefix, params=attention.params)
        self.num_heads, self.num_hiddens = attention.num_heads, attention.num_hiddens
        self.dropout_rate, self.output = attention.dropout_rate, attention.output
        with self.name_scope():
            self.query_bias, self.key_bias, self.value_bias = (
                self.params.get(name) for name in ('query_bias', 'key_bias', 'value_bias'))
        int8_constants(self, layer_weight(attention)[0], input_range, column_scales, 'qkv_')

    def hybrid_forward(self, F, X, valid_lens, query_bias, key_bias, value_bias,
                       weight_int8, input_scales, output_scales):
        heads, hiddens = self.num_heads, self.num_hiddens
        bias = F.np.concatenate([b.reshape(heads, hiddens // heads) for b in
                                 (query_bias, key_bias, value_bias)], axis=1)
        qkv = int8_product(F, X, weight_int8, input_scales, output_scales,
                           bias.reshape(3 * hiddens), 3 * hiddens)
        return FusedMultiHeadAttention.attend(self, F, X, qkv, valid_lens)


@in_numpy_mode
def int8_model(net, calibration, kinds=SENTENCE_VECTOR_KINDS, ctx=None):
    """A new model computing as `net` (float32, on the fast path) but with the layers
    `calibration.int8_layers(kinds)` in int8; net's blocks are left unchanged, its float32
    parameters shared. Hybridize it before use."""
    copied = copy_of_model(net)
    ctx = ctx or net.collect_params().list_ctx()[0]
    layers = quantizable_layers(copied)
    for name in calibration.int8_layers(kinds):
        layer, input_range = layers[name], calibration.ranges[name]
        int8_class = Int8Attention if name.endswith('.qkv') else Int8Dense
        int8_layer = int8_class(layer, input_range, calibration.column_scales[name])
        replace_child(copied, layer, int8_layer)
        for constant in (int8_layer.weight_int8, int8_layer.input_scales,
                         int8_layer.output_scales):
            constant.initialize(ctx=ctx)
    return copied


def replace_child(net, old, new):
    """Put block `new` where `old` is a child of a block of net (its attribute and its
    entry among the children)."""
    def swap(block):
        for key, child in list(block._children.items()):
            if child is old:
                block._children[key] = new
                for attribute, value in list(vars(block).items()):
                    if value is old:
                        object.__setattr__(block, attribute, new)
    net.apply(swap)
