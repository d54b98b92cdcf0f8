"""--precision int8 (issue 60): the encoder's products in int8 close to float32's (a tiny
model, every product int8), the caller's model unchanged, the calibration kept and
reused (one for another model ignored), `auto` never int8, one line and exit 2 where
oneDNN has no int8 kernel, and the summary line naming what ran in int8."""
import numpy as onp
import pytest

from conftest import make_batch, make_model, run_main
from test_inputs import minilm_folder, one_line_error, workdir  # noqa: F401 (a fixture)


SENTENCES = ['a gripping , beautifully acted film', 'it never quite takes off .', 'wow',
             'the plot is thin but the actors make it work', 'an awful , boring mess',
             'one of the best movies of the year , funny and warm', 'thank you',
             'the director loses the thread halfway through and never finds it again',
             'charming', 'a dull , lifeless remake of a much better original']


def tiny_encoder():
    """A float32 `SentenceEncoder` (mean pooling) of a tiny model on the fast path."""
    from d2lbert.interop.sentence_vectors import sentence_encoder
    return sentence_encoder(make_model(num_layers=2), 'mean', False, 'int8')


def batches(count=4):
    return [[make_batch(seed, batch_size=8, seq_len=12)[name] for name in
             ('tokens', 'segments', 'valid_lens')] for seed in range(count)]


def all_int8(calibration):
    """A calibration with every product in int8 (their errors set to 0)."""
    from d2lbert.fast import Int8Calibration
    return Int8Calibration({name: 0.0 for name in calibration.errors},
                           calibration.column_scales, calibration.pairs_bounded)


def test_int8_products_are_close_to_float32():
    """Every product in int8: each vector within 5% of float32's (a NumPy check of the
    layers' own errors: `relative_error` below 3% for each on the calibration data), and
    the int8 blocks are in the model."""
    from d2lbert import fast
    model = tiny_encoder()
    calibration = fast.calibrate(model, batches())
    assert len(calibration.errors) == 8 and max(calibration.errors.values()) < 0.03
    int8 = fast.int8_model(model, all_int8(calibration))
    int8.hybridize(static_alloc=True)
    kinds = []
    int8.apply(lambda block: kinds.append(type(block).__name__))
    assert kinds.count('Int8Attention') == 2 and kinds.count('Int8Dense') == 2  # outputs
    assert kinds.count('Int8FeedForward') == 2
    for batch in batches(2):
        expected, got = model(*batch).asnumpy(), int8(*batch).asnumpy()
        error = onp.linalg.norm(got - expected, axis=1) / onp.linalg.norm(expected, axis=1)
        assert 0 < error.max() < 0.05


def test_the_callers_model_is_unchanged():
    from d2lbert import fast
    model = tiny_encoder()
    classes = []
    model.apply(lambda block: classes.append(type(block)))
    before = model(*batches(1)[0]).asnumpy()
    fast.int8_model(model, all_int8(fast.calibrate(model, batches(1))))
    after = []
    model.apply(lambda block: after.append(type(block)))
    assert after == classes
    assert (model(*batches(1)[0]).asnumpy() == before).all()


def test_the_calibration_is_kept_reused_and_another_models_ignored(tmp_path, monkeypatch):
    """Kept on the first run, reused on the second; one for another model's checksum, or
    measured on fewer texts than a calibration takes, is measured again."""
    import json
    from d2lbert import fast
    from d2lbert.run import calibration
    from d2lbert.run.calibration import int8_inference
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path))
    monkeypatch.setattr(calibration, 'CALIBRATION_TEXTS', 32)  # the batches' texts
    model = tiny_encoder()
    calls = []

    def counted():
        calls.append(1)
        return batches()
    _, line = int8_inference(model, counted, fast)
    assert len(calls) == 1 and 'calibrated on 32 texts' in line
    files = list((tmp_path / 'int8').iterdir())
    assert len(files) == 1
    _, line = int8_inference(model, counted, fast)
    assert len(calls) == 1 and f'calibration kept in {files[0]}' in line
    kept = json.loads(files[0].read_text())
    files[0].write_text(json.dumps({**kept, 'model_sha1': '0' * 40}))  # another model's
    int8_inference(model, counted, fast)
    assert len(calls) == 2 and json.loads(files[0].read_text())['model_sha1'] != '0' * 40
    monkeypatch.setattr(calibration, 'CALIBRATION_TEXTS', 64)  # kept: on too few texts
    int8_inference(model, counted, fast)
    assert len(calls) == 3


def test_a_cpu_whose_int8_product_overflows_either_way_is_one_line_and_exit_2(
        workdir, capsys, monkeypatch):
    """Where no rounding of the weights sums exactly (`pairs_bounded` raises): one line
    naming --precision int8, exit 2, no file."""
    from d2lbert import fast

    def overflowing():
        raise RuntimeError("oneDNN's int8 product on this CPU overflows")
    monkeypatch.setattr(fast, 'pairs_bounded', overflowing)
    (workdir / 'sents.txt').write_text('a fine film\nan awful one\n')
    code, _, err = run_main(['encode', '--model', minilm_folder(), '--data', 'sents.txt',
                             '--out', 'e.npy', '--precision', 'int8'], capsys)
    assert '--precision int8' in one_line_error(code, err) and 'overflows' in err
    assert not (workdir / 'e.npy').exists()


def test_auto_never_chooses_int8():
    import mxnet as mx
    from d2lbert.run.precision import inference_precision
    assert inference_precision('auto', mx.cpu()) in ('fp32', 'bf16')


def test_int8_without_kernels_is_one_line_and_exit_2(workdir, capsys, monkeypatch):
    (workdir / 'sents.txt').write_text('a fine film\nan awful one\n')
    monkeypatch.setenv('DNNL_MAX_CPU_ISA', 'SSE41')
    code, _, err = run_main(['encode', '--model', minilm_folder(), '--data', 'sents.txt',
                             '--out', 'e.npy', '--precision', 'int8'], capsys)
    assert code == 2
    assert '--precision int8' in one_line_error(code, err) and 'AVX2' in err
    assert not (workdir / 'e.npy').exists()


def test_encode_int8_says_so_and_stays_near_fp32(workdir, capsys, monkeypatch):
    monkeypatch.setenv('D2LBERT_HOME', str(workdir / 'home'))
    (workdir / 'sents.txt').write_text('\n'.join(SENTENCES * 4) + '\n')
    vectors = {}
    for precision in ('fp32', 'int8'):
        code, out, err = run_main(['encode', '--model', minilm_folder(), '--data',
                                   'sents.txt', '--out', f'{precision}.npy', '--normalize',
                                   '--precision', precision], capsys)
        assert code == 0, err
        vectors[precision] = onp.load(workdir / f'{precision}.npy')
    assert 'int8: ' in out and 'encoder products' in out and 'calibrated on 40 texts' in out
    cosines = (vectors['fp32'] * vectors['int8']).sum(axis=1)
    assert cosines.min() > 0.96 and cosines.mean() > 0.99  # calibrated on 10 texts only


def numpy_int8_product(X, weight, bias, columns, pairs_bounded):
    """The module doc's int8 product in NumPy (float64): X (..., num_inputs) with its
    columns divided by `columns` (c), each row rounded within [0, 255] with a scale and
    zero point of its own (its values, 0 included, spanning them); the weight W c rounded
    row by row within +-127, or with each row's largest sum of neighbours |w_2m| +
    |w_2m+1| at 127 (pairs_bounded); the integer sums less the zero points' share,
    scaled back, the bias added. Returns (the product, the rounded input q)."""
    W = weight.astype('float32') * columns
    largest = (abs(W[:, 0::2]) + abs(W[:, 1::2]) if pairs_bounded else abs(W)).max(axis=1)
    weight_scales = largest / 127
    W_int8 = onp.round(W / weight_scales[:, None])
    assert abs(W_int8).max() == 127 or pairs_bounded
    X = X / columns
    lo = onp.minimum(X.min(axis=-1, keepdims=True), 0)
    hi = onp.maximum(X.max(axis=-1, keepdims=True), 0)
    row_scales = (hi - lo) / 255
    zero_points = onp.round(-lo / onp.maximum(row_scales, 1e-30))
    q = onp.round(X / onp.maximum(row_scales, 1e-30)) + zero_points
    return (q - zero_points) @ W_int8.T * row_scales * weight_scales + bias, q


def dense_with(weight, bias):
    """A `nn.Dense` (flatten=False) with the float32 weight (units, in_units) and bias."""
    from mxnet import np
    from mxnet.gluon import nn
    dense = nn.Dense(len(weight), flatten=False, in_units=weight.shape[1])
    dense.initialize()
    dense.weight.set_data(np.array(weight, dtype='float32'))
    dense.bias.set_data(np.array(bias, dtype='float32'))
    return dense


def initialized(int8_block):
    """The int8 block with its constants initialized, hybridized."""
    import mxnet as mx
    from d2lbert.fast import int8
    int8.initialize_constants(int8_block, mx.cpu())
    int8_block.hybridize(static_alloc=True)
    return int8_block


@pytest.mark.parametrize('pairs_bounded', [False, True])
def test_an_int8_layer_is_the_numpy_int8_product(pairs_bounded):
    """`Int8Dense` against the module doc's formula in NumPy (`numpy_int8_product`),
    on a row of positive values (its span widened to 0) and a row of zeros (scale 0:
    outputs the bias) among others (d2lbert's kernels `d2lbert_quantize`,
    `d2lbert_dequantize` around oneDNN's int8 product)."""
    from mxnet import np
    from d2lbert.fast import int8, kernels
    assert kernels.available()  # they are loaded
    if int8.pairs_bounded() and not pairs_bounded:
        pytest.skip('no VNNI: oneDNN adds pairs of 8-bit products in 16 bits, so only '
                    'weights bounded in pairs are exact here (d2lbert bounds them)')
    rng = onp.random.default_rng(0)
    weight, bias = rng.normal(size=(24, 16)), rng.normal(size=24)
    X = rng.normal(size=(2, 5, 16)) * onp.where(onp.arange(16) == 3, 20.0, 1.0)
    X[0, 1] = onp.abs(X[0, 1]) + 1  # a row of positive values: its span widened to 0
    X[1, 2] = 0  # a row of zeros: scale 0, outputs the bias
    columns = int8.smoothing_scales(onp.abs(X).reshape(-1, 16).max(axis=0),
                                    weight.astype('float32'), 0.75)
    layer = initialized(int8.Int8Dense(dense_with(weight, bias), columns.tolist(),
                                       pairs_bounded))
    got = layer(np.array(X, dtype='float32')).asnumpy()
    expected, q = numpy_int8_product(X, weight, bias, columns, pairs_bounded)
    assert q.min() == 0 and q.max() == 255
    assert got.shape == (2, 5, 24)
    onp.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)
    assert (got[1, 2] == bias.astype('float32')).all()


@pytest.mark.parametrize('pairs_bounded', [False, True])
def test_the_calibrations_error_is_that_of_the_numpy_int8_product(pairs_bounded):
    """`relative_error` (float32, the calibration's measure) against the module doc's
    product in float64 (`numpy_int8_product`, no smoothing): |int8 - exact| / |exact|."""
    from d2lbert.fast import int8
    rng = onp.random.default_rng(2)
    X = (rng.normal(size=(300, 384)) * onp.where(onp.arange(384) == 7, 30.0, 1.0))
    weight = rng.normal(size=(1536, 384)) * 0.05
    expected_product, _ = numpy_int8_product(X, weight, onp.zeros(1536), onp.ones(384),
                                             pairs_bounded)
    exact = X @ weight.astype('float32').T
    expected = onp.linalg.norm(expected_product - exact) / onp.linalg.norm(exact)
    got = int8.relative_error(X.astype('float32'), weight.astype('float32'), pairs_bounded)
    assert 0.005 < got < 0.05
    onp.testing.assert_allclose(got, expected, rtol=1e-4)


@pytest.mark.parametrize('hidden_act', ['gelu', 'relu'])
def test_an_int8_feed_forward_block_is_two_numpy_int8_products(hidden_act):
    """`Int8FeedForward` (its two products handing over in 8 bits through
    `d2lbert_requantize`) against NumPy: the first int8 product, the exact activation
    (GELU with SciPy's erf), the second int8 product (`numpy_int8_product`)."""
    from mxnet import np
    from scipy.special import erf
    from d2lbert.fast import int8, kernels
    from d2lbert.model.transformer import PositionWiseFFN
    assert kernels.available()  # they are loaded
    rng = onp.random.default_rng(1)
    ffn = PositionWiseFFN(16, 40, hidden_act)
    ffn.initialize()
    weights = [(rng.normal(size=(40, 16)), rng.normal(size=40)),
               (rng.normal(size=(16, 40)) * 0.3, rng.normal(size=16))]
    for dense, (weight, bias) in zip((ffn.dense1, ffn.dense2), weights):
        dense.weight.set_data(np.array(weight, dtype='float32'))
        dense.bias.set_data(np.array(bias, dtype='float32'))
    X = rng.normal(size=(3, 7, 16)) * onp.where(onp.arange(16) == 5, 15.0, 1.0)
    activate = {'gelu': lambda h: 0.5 * h * (1 + erf(h / onp.sqrt(2))),
                'relu': lambda h: onp.maximum(h, 0)}[hidden_act]
    columns1 = int8.smoothing_scales(onp.abs(X).reshape(-1, 16).max(axis=0),
                                     weights[0][0].astype('float32'), 0.75)
    pairs = int8.pairs_bounded()
    H = activate(numpy_int8_product(X, *weights[0], columns1, pairs)[0])
    columns2 = int8.smoothing_scales(onp.abs(H).reshape(-1, 40).max(axis=0),
                                     weights[1][0].astype('float32'), 0.5)
    expected = numpy_int8_product(H, *weights[1], columns2, pairs)[0]
    block = initialized(int8.Int8FeedForward(ffn, columns1.tolist(), columns2.tolist(),
                                             pairs))
    got = block(np.array(X, dtype='float32')).asnumpy()
    assert got.shape == (3, 7, 16)
    onp.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize('first_query_only', [0, 1])
@pytest.mark.parametrize('packed', [False, True])
def test_int8_attention_is_the_attention_of_the_dequantized_sums(packed, first_query_only):
    """d2lbert_int8_attention on an int8 product's sums (padded, or packed with two
    unused rows) is d2lbert_attention outside training on what d2lbert_dequantize makes
    of them (each example's first query only, or all): the same numbers, scaled back in
    the kernel's memory; sizes that disagree are an error."""
    import mxnet as mx
    from d2lbert.fast import kernels
    assert kernels.available()
    rng = onp.random.default_rng(0)
    heads, hidden, lengths, seq = 2, 16, [5, 1, 3], 5
    rows, width = (sum(lengths) + 2 if packed else len(lengths) * seq), 3 * hidden
    arrays = [rng.integers(-20000, 20000, (rows, width)), rng.uniform(1e-4, 1e-3, rows),
              rng.integers(0, 256, rows), rng.uniform(1e-3, 1e-2, width),
              rng.integers(-500, 500, width), rng.normal(size=width)]
    sums, *rest = [mx.nd.array(a, dtype='int32' if a.dtype.kind == 'i' else 'float32')
                   for a in arrays]
    shape = (rows, width) if packed else (len(lengths), seq, width)
    valid_lens = mx.nd.array(lengths, dtype='int32')
    qkv = mx.nd.d2lbert_dequantize(sums, *rest).reshape(shape)
    expected = mx.nd.d2lbert_attention(qkv, valid_lens, mx.nd.ones((1,)), heads=heads,
                                       dropout=0.1, first_query_only=first_query_only)
    context = mx.nd.d2lbert_int8_attention(sums.reshape(shape), *rest, valid_lens,
                                           heads=heads, first_query_only=first_query_only)
    context, expected = context[0].asnumpy(), expected[0].asnumpy()
    assert context.shape == expected.shape and (context == expected).all()
    with pytest.raises(mx.base.MXNetError, match='row_scales'):
        mx.nd.d2lbert_int8_attention(sums.reshape(shape), rest[0][1:], *rest[1:],
                                     valid_lens, heads=heads).wait_to_read()


def test_the_handovers_gelu_rounds_as_numpys_exact_gelu():
    """d2lbert_requantize's GELU (its erf a rational function) of 8,192 values from -2
    to 6 (exact in float32: integer sums scaled by 2^-10), rounded row by row as
    `quantized_rows` does: the same levels as NumPy's float64 GELU with SciPy's erf,
    except within 2e-4 of a level's edge (where float32 rounding may decide). GELU's
    tanh approximation in its place moved 92 of them across an edge. (Below -2, GELU's
    float32 1 + erf(x) loses too many digits to a cancellation for rows of such values
    alone.)"""
    import mxnet as mx
    from scipy.special import erf
    from d2lbert.fast import int8, kernels
    assert kernels.available()
    rows, n = 64, 128
    sums = onp.arange(-2048, 6144).reshape(rows, n)
    y = sums / 1024
    gelu = 0.5 * y * (1 + erf(y / onp.sqrt(2)))
    q, _, _ = mx.nd.d2lbert_requantize(
        mx.nd.array(sums, dtype='int32'), mx.nd.ones((rows,)),
        mx.nd.zeros((rows,), dtype='int32'), mx.nd.full((n,), 2.0 ** -10),
        mx.nd.zeros((n,), dtype='int32'), mx.nd.zeros((n,)), mx.nd.ones((n,)),
        act='gelu', levels=int8.INPUT_LEVELS)
    lo, hi = onp.minimum(gelu.min(axis=1), 0), onp.maximum(gelu.max(axis=1), 0)
    levels = gelu * (int8.INPUT_LEVELS / (hi - lo))[:, None]
    clear = onp.abs(levels - onp.floor(levels) - 0.5) > 2e-4
    expected = onp.round(levels) + onp.round(-lo * int8.INPUT_LEVELS / (hi - lo))[:, None]
    assert clear.mean() > 0.99
    onp.testing.assert_array_equal(q.asnumpy()[clear], expected[clear])


def test_the_handover_refuses_an_activation_it_does_not_compute():
    """d2lbert_requantize computes GELU or ReLU; another `act` is an error naming it,
    not GELU under another name."""
    import mxnet as mx
    from d2lbert.fast import kernels
    assert kernels.available()
    rows, n = 2, 8
    inputs = [mx.nd.zeros((rows, n), dtype='int32'), mx.nd.ones((rows,)),
              mx.nd.zeros((rows,), dtype='int32'), mx.nd.ones((n,)),
              mx.nd.zeros((n,), dtype='int32'), mx.nd.zeros((n,)), mx.nd.ones((n,))]
    for act in ('gelu', 'relu'):
        mx.nd.d2lbert_requantize(*inputs, act=act, levels=255)[0].wait_to_read()
    with pytest.raises(mx.base.MXNetError, match="act must be 'gelu' or 'relu', not 'tanh'"):
        mx.nd.d2lbert_requantize(*inputs, act='tanh', levels=255)[0].wait_to_read()


def test_weights_bounded_in_pairs_keep_each_pair_within_128():
    """`int8_weight` with pairs_bounded: every weight within +-127, each row's pairs of
    neighbours (columns 2m, 2m + 1; an odd last column alone) within 128 in magnitude
    and its largest pair at 127 or 128 (no level wasted); the rounding of the row
    scaled back is within half a level of the weight. Without: the largest at 127."""
    from d2lbert.fast import int8
    rng = onp.random.default_rng(0)
    for width in (384, 37):
        weight = rng.standard_t(2, size=(64, width)).astype('float32')
        rounded, scales = int8.int8_weight(weight, pairs_bounded=True)
        magnitudes = onp.abs(rounded.astype(int))
        pairs = onp.pad(magnitudes, ((0, 0), (0, width % 2))).reshape(64, -1, 2).sum(-1)
        assert magnitudes.max() <= 127 and pairs.max() <= 128
        assert set(pairs.max(axis=1)) <= {127, 128}
        assert (abs(rounded * scales[:, None] - weight) <= scales[:, None] / 2 + 1e-6).all()
        rounded, _ = int8.int8_weight(weight)
        assert (abs(rounded.astype(int)).max(axis=1) == 127).all()


def int8_product_script(pairs_bounded):
    """A Python script printing whether oneDNN's int8 product of inputs near 255 and
    weights rounded by `int8_weight(..., pairs_bounded)` is NumPy's exact product."""
    return f"""
import mxnet as mx, numpy as onp
from d2lbert.fast import int8
rng = onp.random.default_rng(0)
X = rng.integers(200, 256, size=(64, 256))
W, _ = int8.int8_weight(rng.standard_t(2, size=(32, 256)), {pairs_bounded})
one = mx.nd.ones((1,))
sums = mx.nd.contrib.quantized_fully_connected(
    data=mx.nd.array(X, dtype='uint8'), weight=mx.nd.array(W, dtype='int8'),
    min_data=-one, max_data=one, min_weight=-one, max_weight=one, no_bias=True,
    num_hidden=32)[0].asnumpy()
print(int8.pairs_bounded(), bool((sums == X @ W.T.astype(int)).all()))
"""


@pytest.mark.parametrize('isa', [None, 'AVX2', 'AVX512_CORE'])
def test_the_rounded_weights_are_those_the_cpus_int8_product_sums_exactly(isa):
    """oneDNN's int8 product of inputs near 255 and weights rounded for this CPU
    (`pairs_bounded`) equals NumPy's integer product, here and held to AVX2 or to
    AVX-512 without VNNI (Skylake's: where the probe bounds the pairs), in processes of
    their own; held there, the same weights rounded within +-127 one by one overflow."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, **({'DNNL_MAX_CPU_ISA': isa} if isa else {}))

    def run(script):
        return subprocess.run([sys.executable, '-c', script], env=env, capture_output=True,
                              text=True, check=True).stdout.split()
    probe = run('from d2lbert.fast import int8; print(int8.pairs_bounded())')
    assert run(int8_product_script(probe == ['True'])) == [probe[0], 'True']
    if isa is not None:
        assert probe == ['True']
        assert run(int8_product_script(False)) == ['True', 'False']


POSITIVE = {0, 2, 3, 5, 6, 8}  # the indices of SENTENCES that praise


@pytest.fixture(scope='module')
def minilm_classifier(tmp_path_factory):
    """(MiniLM fine-tuned for two epochs on SENTENCES as a `--task csv` run, the CSV
    file of SENTENCES)."""
    import csv
    from d2lbert.cli import main
    folder = tmp_path_factory.mktemp('int8-classifier')
    with open(folder / 'train.csv', 'w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f)
        writer.writerow(['text', 'label'])
        writer.writerows([text, 'pos' if i in POSITIVE else 'neg']
                         for i, text in enumerate(SENTENCES))
    code = main(['finetune', '--task', 'csv', '--model', minilm_folder(), '--data',
                 str(folder / 'train.csv'), '--out', str(folder / 'run'), '--epochs', '2',
                 '--batch-size', '4', '--max-len', '32', '--no-progress'])
    assert code == 0
    return str(folder / 'run'), str(folder / 'train.csv')


def test_predict_int8_says_so_and_stays_near_fp32(minilm_classifier, tmp_path, capsys,
                                                  monkeypatch):
    """`predict --precision int8` on a fine-tuned MiniLM classifier (its last block for
    <cls> alone): the summary line says
    how many products ran in int8, and each text's probability of 'pos' stays within a
    fifth of the spread of fp32's over the texts."""
    import json
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))
    run, data = minilm_classifier
    positive, lines = {}, {}
    for precision in ('fp32', 'int8'):
        out = tmp_path / f'{precision}.jsonl'
        code, lines[precision], err = run_main(['predict', '--model', run, '--data', data,
                                                '--out', out, '--precision', precision],
                                               capsys)
        assert code == 0, err
        positive[precision] = onp.array([json.loads(line)['probabilities']['pos']
                                         for line in out.read_text().splitlines()])
    assert 'int8: ' in lines['int8'] and 'encoder products' in lines['int8']
    spread = positive['fp32'].max() - positive['fp32'].min()
    assert spread > 0.01 and len(positive['int8']) == len(SENTENCES)
    assert onp.abs(positive['int8'] - positive['fp32']).max() < spread / 5


def write_csv(path, texts):
    """A `--task csv` file of texts, labelled as SENTENCES are (POSITIVE)."""
    import csv
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f)
        writer.writerow(['text', 'label'])
        writer.writerows([text, 'pos' if SENTENCES.index(text) in POSITIVE else 'neg']
                         for text in texts)


def test_predict_calibrates_on_the_calibration_file(minilm_classifier, tmp_path, capsys,
                                                    monkeypatch):
    """`predict --calibration FILE` calibrates on FILE's examples: the calibration it
    keeps is the one measured when they are --data's first examples, and not the one
    of --data's own first examples; the summary counts them."""
    import json
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))
    monkeypatch.chdir(tmp_path)
    run, _ = minilm_classifier
    write_csv(tmp_path / 'first.csv', SENTENCES[:5])
    write_csv(tmp_path / 'last.csv', SENTENCES[5:])
    write_csv(tmp_path / 'one.csv', SENTENCES[:1])
    kept = {}
    for name, args in (('first', ['--data', 'first.csv']),
                       ('last', ['--data', 'last.csv']),
                       ('last, calibrated on first', ['--data', 'last.csv', '--calibration',
                                                      'first.csv'])):
        before = set((tmp_path / 'home' / 'int8').glob('*.json'))
        code, out, err = run_main(['predict', '--model', run, *args, '--out',
                                   f'{len(kept)}.jsonl', '--precision', 'int8'], capsys)
        assert code == 0, err
        assert 'calibrated on 5 texts' in out
        (made,) = set((tmp_path / 'home' / 'int8').glob('*.json')) - before
        kept[name] = {key: json.loads(made.read_text())[key]
                      for key in ('errors', 'column_scales')}
    assert kept['last, calibrated on first'] == kept['first']
    assert kept['last'] != kept['first']
    code, out, err = run_main(['predict', '--model', run, '--data', 'last.csv', '--out',
                               'one.jsonl', '--precision', 'int8', '--calibration',
                               'one.csv'], capsys)
    assert code == 0 and 'calibrated on 1 text,' in out, err


@pytest.mark.parametrize('args, named', [
    (['--calibration', 'first.csv'], '--calibration applies to --precision int8'),
    (['--calibration', 'none.csv', '--precision', 'int8'], '--calibration none.csv'),
    (['--calibration', 'first.csv', '--precision', 'int8', '--out', 'first.csv',
      '--overwrite'], '--out first.csv is the input --calibration'),
    (['--calibration', 'empty.csv', '--precision', 'int8'], '--calibration empty.csv: holds'),
    (['--data', 'empty.csv', '--precision', 'int8'], '--data empty.csv: holds no example'),
])
def test_predict_calibration_mistakes_are_one_line(minilm_classifier, workdir, capsys,
                                                   args, named):
    """Each mistake: one line naming its flag, exit 2, the files as they were."""
    run, data = minilm_classifier
    write_csv(workdir / 'first.csv', SENTENCES[:5])
    write_csv(workdir / 'empty.csv', [])
    before = (workdir / 'first.csv').read_bytes()
    code, _, err = run_main(['predict', '--model', run, '--data', data, '--out', 'p.jsonl',
                             *args], capsys)
    assert named in one_line_error(code, err)
    assert (workdir / 'first.csv').read_bytes() == before
    assert not (workdir / 'p.jsonl').exists()


def test_the_predict_call_never_writes_over_its_input(minilm_classifier, tmp_path):
    """`finetuning.predict.predict`, the call beneath the command, refuses --out that is
    its --data, or a file that exists (as the command does without --overwrite), and
    leaves the files as they were; with overwrite=True it replaces the latter."""
    from d2lbert.finetuning.predict import predict
    from d2lbert.run.errors import RunError
    run, _ = minilm_classifier
    write_csv(tmp_path / 'data.csv', SENTENCES)
    before = (tmp_path / 'data.csv').read_bytes()
    with pytest.raises(RunError, match='never writes over its input'):
        predict(run, str(tmp_path / 'data.csv'), str(tmp_path / 'data.csv'))
    assert (tmp_path / 'data.csv').read_bytes() == before
    kept = tmp_path / 'kept.jsonl'
    kept.write_text('a file of the user\n')
    with pytest.raises(RunError, match='already exists'):
        predict(run, str(tmp_path / 'data.csv'), str(kept))
    assert kept.read_text() == 'a file of the user\n'
    assert predict(run, str(tmp_path / 'data.csv'), str(kept), overwrite=True)['examples']
    assert len(kept.read_text().splitlines()) == len(SENTENCES)


def test_encode_never_writes_over_its_calibration_file(workdir, capsys):
    (workdir / 'sents.txt').write_text('a fine film\nan awful one\n')
    (workdir / 'cal.txt').write_text('a fine film\n')
    code, _, err = run_main(['encode', '--model', minilm_folder(), '--data', 'sents.txt',
                             '--calibration', 'cal.txt', '--out', 'cal.txt', '--overwrite',
                             '--precision', 'int8'], capsys)
    assert '--out cal.txt is the input --calibration' in one_line_error(code, err)
    assert (workdir / 'cal.txt').read_text() == 'a fine film\n'


def test_predict_options_refuse_calibration_without_int8():
    """The flags' own check, before any model is read (a question-answering model's
    --data never reaches the calibrating call, which checks it too)."""
    from d2lbert.finetuning.predict import PredictOptions
    with pytest.raises(ValueError, match='--calibration applies to --precision int8'):
        PredictOptions(model='run', data='dev.json', out='out', calibration='c.json',
                       precision='fp32')
    PredictOptions(model='run', data='dev.json', out='out', calibration='c.json',
                   precision='int8')
