"""int8 matrix products: an encoder's products on oneDNN's integer kernels, calibrated.

    ranges = calibrate(net, batches)         # on the float32 model, some batches of text
    net8 = int8_model(net, ranges)           # a new model; net is left as it was

An int8 product rounds both of its operands to 8-bit integers, multiplies and sums them
exactly in 32-bit integers, and scales the sums back to float32. A weight matrix is
rounded once, row by row: row j (output j) as `round(W_j / s_j)`, s_j = max|W_j| / 127.
Its input is rounded with one scale, fixed in advance ("static"): s_x = r / 127 for a
range r measured on the model's inputs over some texts (`calibrate`), values beyond r
clipped. Output j is then `s_x * s_j * sum_k round(x_k / s_x) round(W_jk / s_j)` plus
the bias, in float32. oneDNN multiplies int8 matrices on AVX2's and AVX-512's integer
dot products (VNNI where the CPU has it); MXNet 1.9 calls it through `quantize_v2` and
`quantized_fully_connected`.

The encoder's four products per block are int8: the attention's Q/K/V projection and
output layer, the feed-forward block's two layers. The rest stays float32: LayerNorm,
softmax, the attention's small batched products, GELU, and the heads (the pooler and
output layer of a task model, a few outputs per text).

A range r trades clipping (r too small) against resolution (r too large: the many
small values round to few integers). `calibrate` tries a few quantiles of each layer's
inputs and keeps the one whose int8 product is nearest the float32 one; a layer whose
error stays above MAX_ERROR is kept float32 (`Int8Ranges.float32_layers`), a measured
choice (chapter_bert/tools/int8_accuracy.py, docs/performance.md).
"""
import copy
import dataclasses
from typing import Dict, List

import mxnet as mx
import numpy as onp
from mxnet.gluon import nn

from ..model.transformer import PositionWiseFFN
from .attention import FusedMultiHeadAttention
from . import kernels

# the quantiles of |input| tried as a layer's range; 1.0 is its largest value
RANGE_QUANTILES = (1.0, 0.9999, 0.999)
# a layer whose int8 output's relative error (`relative_error`) exceeds this stays float32
MAX_ERROR = 0.03
ERROR_ROWS = 1024  # the most input rows of a layer its error is measured on


@dataclasses.dataclass
class Int8Ranges:
    """A calibration: each layer's input range and int8 error (`calibrate`).

    ranges: {layer name: r}, the range of the layer's input (`layer_names`)
    errors: {layer name: relative error of its int8 output over the calibration texts}
    """
    ranges: Dict[str, float]
    errors: Dict[str, float]

    def int8_layers(self) -> List[str]:
        return [name for name in self.ranges if self.errors[name] <= MAX_ERROR]

    def float32_layers(self) -> List[str]:
        return [name for name in self.ranges if self.errors[name] > MAX_ERROR]


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
    """A copy of `net`'s blocks that shares its parameters (not hybridized); changing
    the copy's blocks leaves net's as they were."""
    shared = {id(param): param for param in net.collect_params().values()}

    def forget_graph(block):
        if isinstance(block, nn.HybridBlock):
            shared[id(block._cached_graph)] = ()
            shared[id(block._cached_op)] = None
    net.apply(forget_graph)
    copied = copy.deepcopy(net, shared)
    copied.hybridize(False)
    return copied


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
    ranges, errors = {}, {}
    rng = onp.random.RandomState(0)
    for name, layer in quantizable_layers(net).items():
        X = onp.concatenate(inputs.pop(name))
        if len(X) > max_rows:
            X = X[rng.choice(len(X), max_rows, replace=False)]
        weight, _ = layer_weight(layer)
        exact = X @ weight.T  # float32: its rounding is far below int8's
        errors[name], ranges[name] = min(
            (relative_error(X, weight, r, exact), r) for r in candidate_ranges(X))
    return Int8Ranges(ranges, errors)


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


def int8_product(F, X, weight_int8, output_scales, bias, input_range, num_outputs):
    """X (..., num_inputs) float32 times the int8 weight (num_outputs, num_inputs),
    returning float32 (..., num_outputs): X rounded to int8 with `input_range` (a
    number), the integer product, scaled by output_scales (num_outputs,) (s_x * s_j:
    see the module doc) and the bias added."""
    module = mx.sym if isinstance(X, mx.sym.Symbol) else mx.nd
    rows = module.reshape(X.as_nd_ndarray(), shape=(-1, 0), reverse=True)  # 2 axes
    X_int8, low, high = module.contrib.quantize_v2(
        rows, out_type='int8', min_calib_range=-input_range, max_calib_range=input_range)
    sums = module.contrib.quantized_fully_connected(  # int32; the weight's range given
        data=X_int8, weight=weight_int8.as_nd_ndarray(), min_data=low, max_data=high,
        min_weight=low, max_weight=high, no_bias=True,  # changes no sum, only the
        num_hidden=num_outputs)[0]                       # range reported
    if kernels.available():  # one pass
        Y = module.d2lbert_dequantize(sums, *kernels.as_legacy(output_scales, bias))
    else:
        Y = (sums.as_np_ndarray().astype('float32') * output_scales + bias).as_nd_ndarray()
    return module.reshape_like(Y, X.as_nd_ndarray(), lhs_begin=0, lhs_end=1, rhs_begin=0,
                               rhs_end=-1).as_np_ndarray()


class Int8Dense(nn.HybridBlock):
    """A `nn.Dense` (flatten=False) whose product is int8 (`int8_product`): its weight
    rounded once, its input with the range `input_range`; shares the Dense's bias.

    forward(X): X (..., in_units) float32; returns (..., units) float32"""
    def __init__(self, dense, input_range):
        super().__init__(prefix=dense.prefix, params=dense.params)  # names as the Dense's
        weight_int8, scales = int8_weight(dense.weight.data().asnumpy())
        self.units, self.input_range, self.act = dense._units, input_range, dense.act
        with self.name_scope():
            self.bias = self.params.get('bias')  # the Dense's
            self.weight_int8 = self.params.get_constant('weight_int8', weight_int8)
            self.output_scales = self.params.get_constant(
                'output_scales', (scales * input_range / 127).astype('float32'))

    def hybrid_forward(self, F, X, bias, weight_int8, output_scales):
        Y = int8_product(F, X, weight_int8, output_scales, bias, self.input_range,
                         self.units)
        return self.act(Y) if self.act is not None else Y


class Int8Attention(nn.HybridBlock):
    """A `FusedMultiHeadAttention` whose Q/K/V projection is int8 (`int8_product`),
    its interleaved weight rounded once; shares the attention's biases and output
    layer, and computes the rest as it does (`FusedMultiHeadAttention.attend`).

    forward(X, valid_lens): as `FusedMultiHeadAttention`'s"""
    def __init__(self, attention, input_range):
        super().__init__(prefix=attention.prefix, params=attention.params)
        weight_int8, scales = int8_weight(layer_weight(attention)[0])
        self.num_heads, self.num_hiddens = attention.num_heads, attention.num_hiddens
        self.dropout_rate, self.input_range = attention.dropout_rate, input_range
        self.output = attention.output
        with self.name_scope():
            self.query_bias, self.key_bias, self.value_bias = (
                self.params.get(name) for name in ('query_bias', 'key_bias', 'value_bias'))
            self.weight_int8 = self.params.get_constant('qkv_weight_int8', weight_int8)
            self.output_scales = self.params.get_constant(
                'qkv_output_scales', (scales * input_range / 127).astype('float32'))

    def hybrid_forward(self, F, X, valid_lens, query_bias, key_bias, value_bias,
                       weight_int8, output_scales):
        heads, hiddens = self.num_heads, self.num_hiddens
        bias = F.np.concatenate([b.reshape(heads, hiddens // heads) for b in
                                 (query_bias, key_bias, value_bias)], axis=1)
        qkv = int8_product(F, X, weight_int8, output_scales, bias.reshape(3 * hiddens),
                           self.input_range, 3 * hiddens)
        return FusedMultiHeadAttention.attend(self, F, X, qkv, valid_lens)


def int8_model(net, calibration, ctx=None):
    """A new model computing as `net` (float32, on the fast path) but with the layers
    `calibration.int8_layers()` in int8; net's blocks are left unchanged, its float32
    parameters shared. Hybridize it before use."""
    copied = copy_of_model(net)
    ctx = ctx or net.collect_params().list_ctx()[0]
    layers = quantizable_layers(copied)
    for name in calibration.int8_layers():
        layer, input_range = layers[name], calibration.ranges[name]
        int8_class = Int8Attention if name.endswith('.qkv') else Int8Dense
        int8_layer = int8_class(layer, input_range)
        replace_child(copied, layer, int8_layer)
        int8_layer.weight_int8.initialize(ctx=ctx)
        int8_layer.output_scales.initialize(ctx=ctx)
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
