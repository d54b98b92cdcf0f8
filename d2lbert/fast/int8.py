"""int8 matrix products: an encoder's products on oneDNN's integer kernels, calibrated.

    calibration = calibrate(net, batches)     # on the float32 model, some batches of text
    net8 = int8_model(net, calibration)       # a new model; net is left as it was

An int8 product rounds both of its operands to 8-bit integers, multiplies and sums them
exactly in 32-bit integers, and scales the sums back to float32. BERT's layer inputs
have a few columns (channels) far larger than the rest, which one scale for a whole row
serves badly; so the product x W^T is computed as (x / c)(W c)^T for a scale c_k per
input column k, c_k = max|x_k|^a / max|W_k|^(1 - a) ("smoothing", as SmoothQuant does,
Xiao et al. 2023): the large columns shrink in the input and grow in the weight, where
each row has its own scale. `calibrate` measures max|x_k| on some texts and picks each
layer's a among SMOOTHINGS (0: no smoothing), the one whose int8 product is nearest the
float32 one. The weight W c is rounded once, row by row: row j (output j) as
`w_j = round(W_j c / s_j)`, s_j = max|W_j c| / 127, integers within +-127 (or with
neighbouring weights bounded in pairs, below). The input x / c is rounded row by row
too, each row (token) r with a scale t_r and a zero point z_r of its own, measured as
it is read ("dynamic", per token, as in Yao et al. 2022's ZeroQuant): its values span
[lo_r, hi_r] (0 included), t_r = (hi_r - lo_r) / 255, z_r = round(-lo_r / t_r), and
`q_r = round(x_r / (c t_r)) + z_r`, integers within [0, 255] (unsigned: a row of mostly
positive values, such as GELU's outputs, gets its levels where its values are). Output
j of row r is then `t_r s_j (sum_k q_rk w_jk - z_r sum_k w_jk)` plus the bias, in
float32.

oneDNN multiplies 8-bit matrices on AVX2's and AVX-512's integer dot products, an
unsigned input times a signed weight. Without VNNI (AVX2 CPUs: AMD Zen 1-3, Intel before
Ice Lake), they add each pair of neighbouring products (columns 2m and 2m + 1) in 16-bit
integers, which overflow when both are large: 255 x 127 x 2 > 2^15 (oneDNN's "nuances
of int8 computations"). Where a probe of the product overflows (`pairs_bounded`), each
row of weights is rounded with its pairs bounded instead: s_j = max_m (|V_j,2m| +
|V_j,2m+1|) / 127 for V = W c, so that |w_j,2m| + |w_j,2m+1| <= 128 and a pair's sum
stays within 255 x 128 < 2^15. A row's largest weight gets 64 to 127 levels (the more,
the smaller its neighbour), where bounding every weight within +-63 would give it 63: on
MiniLM held to AVX2, the products' mean error fell from 1.6% to 1.2%
(docs/performance.md). MXNet 1.9 calls oneDNN's product
(`quantized_fully_connected`) between d2lbert's kernels `d2lbert_quantize` and
`d2lbert_dequantize`, one pass over the input and one over the output. Between a
feed-forward block's two products one pass does both, with GELU between them
(`d2lbert_requantize`, `Int8FeedForward`): the widest layer's float32 output never
goes to memory. Nor does the Q/K/V projection's: its sums go to the attention kernel
(`d2lbert_int8_attention`, `Int8Attention`), which scales each example's rows back as
it reads them.

The encoder's four products per block are int8: the attention's Q/K/V projection and
output layer, the feed-forward block's two layers. The rest stays float32: LayerNorm,
softmax, the attention's small batched products, GELU, and the heads (the pooler and
output layer of a task model, a few outputs per text). A layer whose int8 error on the
calibration texts stays above MAX_ERROR is kept float32
(`Int8Calibration.int8_layers`): a measured choice (chapter_bert/studies/int8_accuracy.py,
docs/performance.md).
"""
import dataclasses
import functools
from typing import Dict, List

import mxnet as mx
import numpy as onp
from mxnet import gluon
from mxnet.gluon import nn

from ..model.transformer import PositionWiseFFN
from .attention import FusedMultiHeadAttention
from ..util.numpy_mode import in_numpy_mode, numpy_mode_block
from ..util.shared_blocks import copy_sharing_parameters
from . import kernels

# the smoothing exponents a tried per layer (c_k = max|x_k|^a / max|W_k|^(1 - a)): on
# MiniLM, 0.75 suits most layers and 0 some feed-forward second layers (docs/performance.md)
SMOOTHINGS = (0.0, 0.5, 0.75)
# a layer whose int8 output's relative error (`relative_error`) exceeds this stays float32:
# MiniLM's layers err at most 1.9% held to AVX2 (2.6% with every weight within +-63); one at
# 3.0% in int8 moved its vectors' mean cosine to float32's by less than 0.0001
# (docs/performance.md)
MAX_ERROR = 0.035
INPUT_LEVELS = 255  # the inputs rounded to integers within [0, INPUT_LEVELS]
WEIGHT_LEVELS = 127  # the weights within +-WEIGHT_LEVELS (a row's largest pair within 128)
ERROR_ROWS = 512  # the most input rows of a layer its error is measured on


@dataclasses.dataclass
class Int8Calibration:
    """A calibration (`calibrate`): each layer's column scales and int8 error.

    errors: {layer name (`quantizable_layers`): relative error of its int8 output over
      the calibration texts}
    column_scales: {layer name: c, a list of num_inputs numbers}
    pairs_bounded: whether the weights are rounded with their neighbours bounded in
      pairs (`pairs_bounded`, `int8_weight`)
    """
    errors: Dict[str, float]
    column_scales: Dict[str, List[float]]
    pairs_bounded: bool

    def int8_layers(self) -> List[str]:
        """The layers whose error is at most MAX_ERROR."""
        return [name for name, error in self.errors.items() if error <= MAX_ERROR]


@functools.lru_cache(maxsize=None)
def pairs_bounded():
    """Whether oneDNN's int8 product on this CPU adds neighbouring products in 16 bits
    (the module doc): then 64 products of 255 x 127 overflow, and weights bounded in
    pairs (|w_2m| + |w_2m+1| = 128, `int8_weight`) must sum exactly instead."""
    full_levels = onp.full(64, WEIGHT_LEVELS)
    if integer_product_is_exact(full_levels):
        return False
    if not integer_product_is_exact(onp.tile([1, 127, 127, 1], 16)):
        raise RuntimeError("oneDNN's int8 product on this CPU overflows even with weights "
                           'bounded in pairs: use float32')
    return True


def integer_product_is_exact(weights):
    """Whether oneDNN's int8 product of 255s (1, n) and `weights` (n,) within +-127 is
    their exact sum."""
    one = mx.nd.ones((1,))
    sums = mx.nd.contrib.quantized_fully_connected(
        data=mx.nd.full((1, len(weights)), 255, dtype='uint8'),
        weight=mx.nd.array(weights[None], dtype='int8'), min_data=-one, max_data=one,
        min_weight=-one, max_weight=one, no_bias=True, num_hidden=1)[0]
    return int(sums.asnumpy()[0, 0]) == 255 * int(onp.sum(weights))


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
    """The `Int8Calibration` of net's quantizable layers (`quantizable_layers`),
    measured on `batches`: an iterable of (tokens, segments, valid_lens) arrays, as net
    takes them. net runs in float32 (a copy of it, imperatively); each layer's inputs are
    kept on the device, their columns' largest magnitudes measured there, and up to
    max_rows rows of them (at random beyond that) copied to the host for the error."""
    probe = copy_of_model(net)
    inputs = {name: [] for name in quantizable_layers(probe)}

    def keep(name):
        return lambda block, args: inputs[name].append(
            args[0].reshape(-1, args[0].shape[-1]))
    hooks = [layer.register_forward_pre_hook(keep(name))
             for name, layer in quantizable_layers(probe).items()]
    for batch in batches:
        probe(*batch)
    for hook in hooks:
        hook.detach()
    errors, column_scales, pairs = {}, {}, pairs_bounded()
    rng = onp.random.RandomState(0)
    for name, layer in quantizable_layers(net).items():
        X = mx.np.concatenate(inputs.pop(name))
        weight, _ = layer_weight(layer)
        largest_inputs = mx.np.abs(X).max(axis=0).asnumpy()
        if len(X) > max_rows:
            X = X[mx.np.array(rng.choice(len(X), max_rows, replace=False), dtype='int64')]
        errors[name], scales = best_smoothing(X.asnumpy(), largest_inputs, weight, pairs)
        column_scales[name] = scales.tolist()
    return Int8Calibration(errors, column_scales, pairs)


def best_smoothing(X, largest_inputs, weight, pairs_bounded=False):
    """(the least relative error, the column scales c giving it) of the int8 product of
    a layer's inputs X (rows, num_inputs) and weight (num_outputs, num_inputs) (rounded
    with its pairs bounded or not, `int8_weight`), over the smoothings SMOOTHINGS
    (`smoothing_scales` of the inputs' largest_inputs)."""
    exact = float32_product(X, weight)  # its rounding is far below int8's
    tried = []
    for smoothing in SMOOTHINGS:
        scales = smoothing_scales(largest_inputs, weight, smoothing)
        tried.append((relative_error(X / scales, weight * scales, pairs_bounded, exact),
                      scales))
    return min(tried, key=lambda error_and_scales: error_and_scales[0])


def smoothing_scales(largest_inputs, weight, smoothing):
    """c (num_inputs,) float32 for a layer whose inputs' columns reach largest_inputs
    (num_inputs,) and whose weight is (num_outputs, num_inputs), c_k = largest_inputs_k
    ^ smoothing / max|W_k| ^ (1 - smoothing) (the module doc)."""
    largest_inputs = onp.maximum(largest_inputs, 1e-5)
    largest_weight = onp.maximum(onp.abs(weight).max(axis=0), 1e-5)
    return (largest_inputs ** smoothing / largest_weight ** (1 - smoothing)).astype('float32')


def relative_error(X, weight, pairs_bounded=False, exact=None):
    """|int8 product - float32 product| / |float32 product| (Frobenius norms) of X
    (rows, num_inputs) times weight (num_outputs, num_inputs).T, X rounded row by row
    (`quantized_rows`) and the weight by `int8_weight`, in NumPy, the products by
    `float32_product`; exact: the float32 product, if computed already."""
    weight_int8, weight_scales = int8_weight(weight, pairs_bounded)
    q, row_scales, zero_points = quantized_rows(X)
    exact = float32_product(X, weight) if exact is None else exact
    product = float32_product(q - zero_points[:, None], weight_int8.astype('float32'))
    product *= row_scales[:, None]  # the sums, scaled back in place, in float32
    product *= weight_scales.astype('float32')
    product -= exact
    return float(onp.linalg.norm(product) / max(onp.linalg.norm(exact), 1e-30))


def float32_product(X, weight):
    """X (rows, num_inputs) times weight (num_outputs, num_inputs).T, host arrays, in
    float32 on oneDNN (MXNet's FullyConnected). NumPy's product would run on OpenBLAS,
    whose kernels a user may hold to an older core (OPENBLAS_CORETYPE), several times
    slower (docs/performance.md)."""
    return mx.nd.FullyConnected(mx.nd.array(X, dtype='float32'),
                                mx.nd.array(weight, dtype='float32'), no_bias=True,
                                num_hidden=len(weight)).asnumpy()


def quantized_rows(X, levels=INPUT_LEVELS):
    """(q, row_scales, zero_points): X (rows, num_inputs) rounded row by row to integers
    within [0, levels] (as float32), with each row's scale and zero point (rows,), as
    `d2lbert_quantize` rounds them (the module doc)."""
    lo, hi = onp.minimum(X.min(axis=1), 0), onp.maximum(X.max(axis=1), 0)
    row_scales = (hi - lo) / levels
    to_integers = 1 / onp.maximum(row_scales, 1e-30)
    zero_points = onp.round(-lo * to_integers)
    q = onp.clip(onp.round(X * to_integers[:, None]) + zero_points[:, None], 0, levels)
    return q, row_scales, zero_points


def int8_weight(weight, pairs_bounded=False):
    """(weight (num_outputs, num_inputs) rounded row by row to int8, the rows' scales
    (num_outputs,) float64): a row's scale is its largest |weight| / WEIGHT_LEVELS, or
    with pairs_bounded its largest sum of a pair of neighbours, |w_2m| + |w_2m+1|, over
    WEIGHT_LEVELS, so that each pair is within 128 once rounded (the module doc)."""
    magnitudes = onp.abs(weight).astype('float64')
    if pairs_bounded:
        magnitudes = neighbour_sums(magnitudes)
    scales = onp.maximum(magnitudes.max(axis=1), 1e-30) / WEIGHT_LEVELS
    return onp.round(weight / scales[:, None]).astype('int8'), scales


def neighbour_sums(magnitudes):
    """(rows, ceil(n / 2)): magnitudes (rows, n) summed in pairs of columns 2m and
    2m + 1 (an odd last column alone)."""
    padded = onp.pad(magnitudes, ((0, 0), (0, magnitudes.shape[1] % 2)))
    return padded[:, 0::2] + padded[:, 1::2]


def int8_product(F, X, weight_int8, input_scales, weight_scales, weight_sums, bias,
                 num_outputs):
    """X (..., num_inputs) float32 times the int8 weight (num_outputs, num_inputs),
    returning float32 (..., num_outputs): X times input_scales (num_inputs,) (1 / c_k)
    rounded row by row within [0, INPUT_LEVELS] (`quantized_input`), the integer product
    (`integer_sums`) less the zero points' share (weight_sums (num_outputs,), int32),
    scaled by the rows' scales and weight_scales (num_outputs,) (s_j), and the bias added
    (see the module doc). Needs d2lbert's kernels (`kernels.available()`): MXNet's
    `quantize_v2` has one scale per tensor, and oneDNN's graph pass fuses it with the
    product into one that rescales the sums by the ranges."""
    module = mx.sym if isinstance(X, mx.sym.Symbol) else mx.nd
    weight_scales, weight_sums, bias = kernels.as_legacy(weight_scales, weight_sums, bias)
    q, row_scales, zero_points = quantized_input(module, X, input_scales)
    sums = integer_sums(module, q, weight_int8, num_outputs)
    Y = module.d2lbert_dequantize(sums, row_scales, zero_points, weight_scales, weight_sums,
                                  bias)
    return shaped_like_input(module, Y, X)


def quantized_input(module, X, input_scales):
    """(q, row_scales, zero_points) of `d2lbert_quantize`: X (..., num_inputs) float32 as
    rows (rows, num_inputs), times input_scales (num_inputs,), rounded row by row within
    [0, INPUT_LEVELS]; module: mx.nd or mx.sym."""
    rows = module.reshape(X.as_nd_ndarray(), shape=(-1, 0), reverse=True)  # 2 axes
    return module.d2lbert_quantize(rows, kernels.as_legacy(input_scales)[0],
                                   levels=INPUT_LEVELS)


def integer_sums(module, q, weight_int8, num_outputs):
    """oneDNN's int8 product: q (rows, num_inputs) uint8 times weight_int8 (num_outputs,
    num_inputs) int8, transposed; returns the exact sums (rows, num_outputs) int32."""
    span = module.ones(shape=(1,))  # the operands' ranges: they change no sum, so one
    return module.contrib.quantized_fully_connected(  # array serves as all four
        data=q, weight=weight_int8.as_nd_ndarray(), min_data=span, max_data=span,
        min_weight=span, max_weight=span, no_bias=True, num_hidden=num_outputs)[0]


def shaped_like_input(module, Y, X):
    """Y (rows, num_outputs) as (..., num_outputs), X's leading axes."""
    return module.reshape_like(Y, X.as_nd_ndarray(), lhs_begin=0, lhs_end=1, rhs_begin=0,
                               rhs_end=-1).as_np_ndarray()


def int8_constants(block, weight, column_scales, pairs_bounded, prefix=''):
    """Give `block` (in its name scope) the constants of an int8 product with the float32
    `weight` (num_outputs, num_inputs), rounded by `int8_weight`, and its input's
    column_scales (c, num_inputs): weight_int8, input_scales, weight_scales, weight_sums
    (see `int8_product`), each named prefix + its name."""
    column_scales = onp.asarray(column_scales, dtype='float64')
    weight_int8, weight_scales = int8_weight(weight * column_scales, pairs_bounded)
    values = {'weight_int8': weight_int8,
              'input_scales': (1 / column_scales).astype('float32'),
              'weight_scales': weight_scales.astype('float32'),
              'weight_sums': weight_int8.sum(axis=1, dtype='int32')}
    with block.name_scope():
        for name, value in values.items():
            setattr(block, prefix + name, block.params.get_constant(prefix + name, value))


@numpy_mode_block
class Int8Dense(nn.HybridBlock):
    """A `nn.Dense` (flatten=False) whose product is int8 (`int8_product`): its weight
    times column_scales rounded once (`int8_weight`), its input's columns divided by
    column_scales; shares the Dense's bias.

    forward(X): X (..., in_units) float32; returns (..., units) float32"""
    def __init__(self, dense, column_scales, pairs_bounded=False):
        super().__init__(prefix=dense.prefix, params=dense.params)  # names as the Dense's
        self.units, self.act = dense._units, dense.act
        with self.name_scope():
            self.bias = self.params.get('bias')  # the Dense's
        int8_constants(self, dense.weight.data().asnumpy(), column_scales, pairs_bounded)

    def hybrid_forward(self, F, X, bias, weight_int8, input_scales, weight_scales,
                       weight_sums):
        Y = int8_product(F, X, weight_int8, input_scales, weight_scales, weight_sums, bias,
                         self.units)
        return self.act(Y) if self.act is not None else Y


@numpy_mode_block
class Int8Attention(nn.HybridBlock):
    """A `FusedMultiHeadAttention` whose Q/K/V projection is int8 (`int8_product`),
    its interleaved weight rounded once and its interleaved bias taken once (constants,
    as `layer_weight` makes them); shares the attention's output layer, and computes
    the rest as it does (`FusedMultiHeadAttention.attend`), on the projection's integer
    sums (`d2lbert_int8_attention`: each example's rows scaled back to float32 in the
    kernel's working memory, as `d2lbert_dequantize` would write them).

    forward(X, valid_lens): as `FusedMultiHeadAttention`'s"""
    def __init__(self, attention, column_scales, pairs_bounded=False):
        super().__init__(prefix=attention.prefix, params=attention.params)
        self.num_heads, self.num_hiddens = attention.num_heads, attention.num_hiddens
        self.dropout_rate, self.output = attention.dropout_rate, attention.output
        self.first_query_only = attention.first_query_only
        weight, bias = layer_weight(attention)
        int8_constants(self, weight, column_scales, pairs_bounded, 'qkv_')
        with self.name_scope():
            self.qkv_bias = self.params.get_constant('qkv_bias', bias)

    def hybrid_forward(self, F, X, valid_lens, qkv_weight_int8, qkv_input_scales,
                       qkv_weight_scales, qkv_weight_sums, qkv_bias):
        module = mx.sym if isinstance(X, mx.sym.Symbol) else mx.nd
        q, row_scales, zero_points = quantized_input(module, X, qkv_input_scales)
        sums = integer_sums(module, q, qkv_weight_int8, 3 * self.num_hiddens)
        if valid_lens is None:  # every key is valid
            valid_lens = F.np.ones_like(X[:, :, 0]).sum(axis=1)
        sums, valid_lens, weight_scales, weight_sums, bias = kernels.as_legacy(
            shaped_like_input(module, sums, X), valid_lens.astype('int32'),
            qkv_weight_scales, qkv_weight_sums, qkv_bias)
        context = module.d2lbert_int8_attention(
            sums, row_scales, zero_points, weight_scales, weight_sums, bias, valid_lens,
            heads=self.num_heads, first_query_only=int(self.first_query_only))[0]
        context = context.as_np_ndarray()
        return self.output(context[:, :1, :] if self.first_query_only else context)


def handover_activation(ffn):
    """'gelu' or 'relu': the activation of a `PositionWiseFFN` that `d2lbert_requantize`
    computes; None for another."""
    if isinstance(ffn.activation, nn.GELU):
        return 'gelu'
    if isinstance(ffn.activation, nn.Activation) and ffn.activation._act_type == 'relu':
        return 'relu'
    return None


@numpy_mode_block
class Int8FeedForward(nn.HybridBlock):
    """A `PositionWiseFFN` whose two products are int8 (`int8_product`), the first one's
    output handed to the second in 8 bits: its sums scaled back, the activation and the
    rounding for the second product in one pass over them (`d2lbert_requantize`), where
    `Int8Dense`, the activation and `Int8Dense` take three. Its weights rounded once and
    its biases taken once (constants, as `layer_weight` makes them); its activation
    `handover_activation(ffn)`.

    forward(X): X (..., num_hiddens) float32; returns (..., num_hiddens) float32"""
    def __init__(self, ffn, column_scales1, column_scales2, pairs_bounded=False):
        super().__init__(prefix=ffn.prefix, params=ffn.params)
        self.act = handover_activation(ffn)
        self.num_outputs = {'dense1_': ffn.dense1._units, 'dense2_': ffn.dense2._units}
        for prefix, dense, column_scales in (('dense1_', ffn.dense1, column_scales1),
                                             ('dense2_', ffn.dense2, column_scales2)):
            weight, bias = layer_weight(dense)
            int8_constants(self, weight, column_scales, pairs_bounded, prefix)
            with self.name_scope():
                setattr(self, prefix + 'bias', self.params.get_constant(prefix + 'bias', bias))

    def hybrid_forward(self, F, X, **constants):
        module = mx.sym if isinstance(X, mx.sym.Symbol) else mx.nd
        first, second = ({name[len(prefix):]: value for name, value in constants.items()
                          if name.startswith(prefix)} for prefix in ('dense1_', 'dense2_'))
        q, row_scales, zero_points = quantized_input(module, X, first['input_scales'])
        sums = integer_sums(module, q, first['weight_int8'], self.num_outputs['dense1_'])
        q, row_scales, zero_points = module.d2lbert_requantize(
            sums, row_scales, zero_points, *kernels.as_legacy(
                first['weight_scales'], first['weight_sums'], first['bias'],
                second['input_scales']), act=self.act, levels=INPUT_LEVELS)
        sums = integer_sums(module, q, second['weight_int8'], self.num_outputs['dense2_'])
        Y = module.d2lbert_dequantize(sums, row_scales, zero_points, *kernels.as_legacy(
            second['weight_scales'], second['weight_sums'], second['bias']))
        return shaped_like_input(module, Y, X)


@in_numpy_mode
def int8_model(net, calibration, ctx=None):
    """A new model computing as `net` (float32, on the fast path) but with the layers
    `calibration.int8_layers()` in int8 (a feed-forward block with both of its layers
    there: `Int8FeedForward`); net's blocks are left unchanged, its float32 parameters
    shared. Hybridize it before use."""
    copied = copy_of_model(net)
    ctx = ctx or net.collect_params().list_ctx()[0]
    pairs, scales = calibration.pairs_bounded, calibration.column_scales
    layers, remaining = quantizable_layers(copied), calibration.int8_layers()
    for i, block in enumerate(copied.encoder.blocks):
        pair = [f'{i}.dense1', f'{i}.dense2']
        if set(pair) <= set(remaining) and handover_activation(block.ffn):
            int8_ffn = Int8FeedForward(block.ffn, scales[pair[0]], scales[pair[1]], pairs)
            put_in_place(copied, block.ffn, int8_ffn, ctx)
            remaining = [name for name in remaining if name not in pair]
    for name in remaining:
        int8_class = Int8Attention if name.endswith('.qkv') else Int8Dense
        put_in_place(copied, layers[name], int8_class(layers[name], scales[name], pairs),
                     ctx)
    return copied


def put_in_place(net, old, new, ctx):
    """Put the int8 block `new` where block `old` is in net (`replace_child`), its
    constants initialized on ctx."""
    replace_child(net, old, new)
    initialize_constants(new, ctx)


def initialize_constants(int8_block, ctx):
    """Initialize the constants of an int8 block (`Int8Dense`, `Int8Attention`,
    `Int8FeedForward`: its rounded weights, scales and sums) on ctx."""
    for parameter in int8_block.params.values():
        if isinstance(parameter, gluon.Constant):
            parameter.initialize(ctx=ctx)


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
