"""Mixed precision (`--precision`, `d2lbert.model.precision`, `d2lbert.run.precision`):
a bf16 step agrees with float32, runs bf16 primitives, keeps float32 weights; the fp16
graph casts where it should; hardware that lacks a precision is refused in one line."""
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import mxnet as mx
import numpy as onp
import pytest
from mxnet import init, npx

from d2lbert.bench.configs import CONFIGS, random_batch
from d2lbert.bench.report import evaluate_targets
from d2lbert.bench.step_d2lbert import d2lbert_model
from d2lbert.data import PretrainingBatch
from d2lbert.model import BERTConfig, BERTModel
from d2lbert.model.precision import BFLOAT16, cast, compute_in
from d2lbert.pretraining.pretrain import PretrainOptions, pretrain
from d2lbert.run import precision as run_precision
from d2lbert.run.optimizer import make_trainer
from d2lbert.pretraining.step import forward_backward
from test_cli_flags import run_main

npx.set_np()

HAS_BF16 = bool(run_precision.cpu_flags() & set(run_precision.CPU_BF16_FLAGS))
needs_bf16 = pytest.mark.skipif(not HAS_BF16, reason='this CPU has neither avx512_bf16 nor '
                                'amx_bf16: bfloat16 steps cannot run here')
# A bf16 product keeps 8 significant bits (relative rounding 2^-9 = 0.2%) of each input;
# sums stay float32. Measured on the 'quick' model: losses within 0.05%, the whole
# gradient within about 1% (relative L2), the worst single parameter about 6%.
PRECISION_FLAGS = {dtype: flag for flag, dtype in run_precision.PRECISIONS.items()}
LOSS_TOLERANCE = 0.01
GRADIENT_TOLERANCE = 0.05
PARAMETER_TOLERANCE = 0.2


def losses_and_gradients(dtype, accelerated):
    """A step of the bench's 'quick' model without dropout: (losses, {name: gradient})."""
    config = dataclasses.replace(CONFIGS['quick'], dropout=0.0)
    batch = PretrainingBatch(**random_batch(config))
    mx.random.seed(0)
    net = d2lbert_model(config, config.seq_len)
    net.initialize(init.Normal(0.02))
    if accelerated:
        from d2lbert import fast
        net = fast.accelerate(net)
    net = run_precision.use_precision(net, PRECISION_FLAGS[dtype])
    net.collect_params().setattr('grad_req', 'add')
    net.hybridize(static_alloc=True, static_shape=True)
    losses = forward_backward(net, [batch], [mx.cpu()], with_accuracy=False)
    grads = {name: param.grad().asnumpy()
             for name, param in net._collect_params_with_prefix().items()}
    return [float(loss) for loss in losses], grads


@needs_bf16
@pytest.mark.parametrize('accelerated', [False, True], ids=['book', 'fast'])
def test_a_bf16_step_matches_float32(accelerated):
    """Losses within 1%, the whole gradient within 5% (relative L2), each parameter's
    within 20% of the larger of its norm and 1% of the whole gradient's (a bias
    whose gradient is nearly 0, e.g. the keys', is compared at that floor)."""
    losses, grads = losses_and_gradients('float32', accelerated)
    bf16_losses, bf16_grads = losses_and_gradients('bfloat16', accelerated)
    assert onp.allclose(bf16_losses, losses, rtol=LOSS_TOLERANCE), (bf16_losses, losses)
    total = onp.sqrt(sum((g ** 2).sum() for g in grads.values()))
    difference = onp.sqrt(sum(((bf16_grads[k] - g) ** 2).sum() for k, g in grads.items()))
    assert difference / total < GRADIENT_TOLERANCE
    for name, grad in grads.items():
        assert bf16_grads[name].dtype == onp.float32
        error = onp.linalg.norm(bf16_grads[name] - grad)
        assert error <= PARAMETER_TOLERANCE * max(onp.linalg.norm(grad), 0.01 * total), name


STEP_SCRIPT = '''
import sys
sys.argv = ['test']
from test_precision import losses_and_gradients
losses_and_gradients('bfloat16', accelerated=True)
'''


@pytest.fixture(scope='module')
def onednn_log():
    """The exec lines of oneDNN's verbose log of a bf16 step (fast path, 'quick')."""
    env = dict(os.environ, ONEDNN_VERBOSE='1', MKLDNN_VERBOSE='1',
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                           os.environ.get('PYTHONPATH', '')]))
    result = subprocess.run([sys.executable, '-c', STEP_SCRIPT], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if ',exec,' in line]


@needs_bf16
def test_bf16_primitives_execute(onednn_log):
    """oneDNN's log of a bf16 step: the inner products (forward, backward to the data
    and to the weights) run on bfloat16 inputs."""
    executed = [line for line in onednn_log if 'inner_product' in line]
    for kind in ('forward_training', 'backward_data', 'backward_weights'):
        assert any(kind in line and 'src_bf16' in line and 'wei_bf16' in line
                   for line in executed), kind


@needs_bf16
def test_the_mlm_products_are_never_cast(onednn_log):
    """The masked-LM products (slots x part of the vocabulary) stay bfloat16 from the
    inner product through the log-sum-exp kernel and back: no reorder (oneDNN's cast)
    of an array of their shape in the log, though the inner products ran."""
    config = CONFIGS['quick']
    slots, part = config.batch_size * config.num_preds, config.vocab_size // 8
    shape = f'{slots}x{part}'
    assert any(f'mb{slots}ic{config.num_hiddens}oc{part}' in line and 'src_bf16' in line
               for line in onednn_log)
    assert not [line for line in onednn_log
                if 'reorder' in line and line.split(',')[-2] == shape]


@needs_bf16
def test_the_attention_projection_is_never_cast(onednn_log):
    """The attention kernel takes the Q/K/V projection (rows x 3 hiddens) in
    bfloat16 and gives the context in bfloat16: no reorder of an array 3 hiddens wide
    in the log, though the projection's inner products ran in bfloat16."""
    width = 3 * CONFIGS['quick'].num_hiddens
    assert any(f'oc{width},' in line and 'src_bf16' in line for line in onednn_log)
    assert not [line for line in onednn_log
                if 'reorder' in line and line.split(',')[-2].endswith(f'x{width}')]


@needs_bf16
@pytest.mark.parametrize('seq_len, hidden, valid', [(6, 8, [6, 3]), (77, 128, [77, 57])],
                         ids=['tiny', 'several-tiles'])
def test_attention_kernel_takes_and_gives_bfloat16(seq_len, hidden, valid):
    """`d2lbert_attention` on a bfloat16 projection (two padded examples, one
    shorter; 'several-tiles': more queries and keys than one tile of the products,
    head size 64): the context, and the projection's gradient from a bfloat16 context
    gradient, are the float32 kernel's on the same numbers, rounded to bfloat16 (the
    bfloat16 dot products of s Q K^T and dC V^T sum in float32 as the float32 kernel
    does)."""
    from d2lbert.fast import kernels
    assert kernels.available()
    rng = onp.random.default_rng(5)

    def representable(*shape):
        return cast('float32', *cast(BFLOAT16, mx.np.array(rng.normal(0, 1, shape),
                                                           dtype='float32')))[0]
    qkv, dcontext = representable(2, seq_len, 3 * hidden), representable(2, seq_len, hidden)
    valid_lens = mx.np.array(valid, dtype='int32')
    not_training = mx.np.ones((1,), dtype='float32')

    def run(dtype):
        x = qkv.copy()
        x.attach_grad()
        with mx.autograd.record():
            context = mx.nd.d2lbert_attention(
                *kernels.as_legacy(*cast(dtype, x), valid_lens, not_training), heads=2,
                dropout=0.0)[0].as_np_ndarray()
        context.backward(cast(dtype, dcontext)[0])
        return cast('float32', context)[0].asnumpy(), x.grad.asnumpy(), context.dtype

    context32, dqkv32, _ = run('float32')
    context16, dqkv16, context_type = run(BFLOAT16)
    assert context_type == BFLOAT16
    onp.testing.assert_allclose(context16, context32, rtol=2 ** -8, atol=1e-6)
    onp.testing.assert_allclose(dqkv16, dqkv32, rtol=2 ** -8, atol=1e-6)
    assert not onp.array_equal(context16, context32)  # rounded to bfloat16 on the way


@needs_bf16
def test_add_layer_norm_takes_a_bfloat16_branch():
    """`d2lbert_add_layer_norm` with the sublayer's output z in bfloat16: y, dx and the
    parameters' gradients are the float32 kernel's on the same numbers (z exactly
    representable), dz is bfloat16, that float32 dz rounded (within 2^-8 relative)."""
    from d2lbert.fast import kernels
    assert kernels.available()
    rng = onp.random.default_rng(7)
    x = mx.np.array(rng.normal(0, 1, (5, 7, 16)), dtype='float32')
    z, = cast('float32', *cast(BFLOAT16, mx.np.array(rng.normal(0, 1, (5, 7, 16)),
                                                      dtype='float32')))
    gamma = mx.np.array(rng.normal(1, 0.3, 16), dtype='float32')
    beta = mx.np.array(rng.normal(0, 0.3, 16), dtype='float32')
    dy = mx.np.array(rng.normal(0, 1, (5, 7, 16)), dtype='float32')
    not_training = mx.np.ones((1,), dtype='float32')

    def run(dtype):
        inputs = [x.copy(), z.copy(), gamma.copy(), beta.copy()]
        for array in inputs:
            array.attach_grad()
        with mx.autograd.record():
            branch, = cast(dtype, inputs[1])
            y = mx.nd.d2lbert_add_layer_norm(
                *kernels.as_legacy(inputs[0], branch, inputs[2], inputs[3], not_training),
                eps=1e-5, dropout=0.0)[0].as_np_ndarray()
        y.backward(dy)
        return [y.asnumpy()] + [a.grad.asnumpy() for a in inputs], branch.dtype

    (y32, dx32, dz32, dg32, db32), _ = run('float32')
    (y16, dx16, dz16, dg16, db16), branch_type = run(BFLOAT16)
    assert branch_type == BFLOAT16
    for ours, reference in ((y16, y32), (dx16, dx32), (dg16, dg32), (db16, db32)):
        onp.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6)
    onp.testing.assert_allclose(dz16, dz32, rtol=2 ** -8, atol=1e-30)
    assert not onp.array_equal(dz16, dz32)  # rounded to bfloat16 on the way


def test_the_fast_add_norms_take_the_sublayers_bfloat16_outputs():
    """`--precision bf16` on the fast path: each encoder block's attention output
    layer and FFN output layer keep their bfloat16 product for the block's add & norm
    kernel (no cast between them); float32 and the book's blocks keep their casts."""
    from d2lbert import fast
    from d2lbert.fast.layer_norm import FusedAddNorm

    def blocks(accelerated, precision):
        net = BERTModel.from_config(BERTConfig.d2l(100, num_hiddens=16, ffn_num_hiddens=32,
                                                   num_heads=2, num_layers=2))
        if accelerated:
            net = fast.accelerate(net)
        return run_precision.use_precision(net, precision).encoder.blocks

    for block in blocks(True, 'bf16'):
        assert isinstance(block.norm1, FusedAddNorm) and block.norm1.takes_reduced
        assert block.norm2.takes_reduced
        assert not block.attention.output.casts_output and not block.ffn.dense2.casts_output
    for accelerated, precision in ((True, 'fp32'), (False, 'bf16'), (True, 'fp16')):
        for block in blocks(accelerated, precision):
            assert not getattr(block.norm1, 'takes_reduced', False)
            assert getattr(block.attention.output, 'casts_output', True)
            assert getattr(block.ffn.dense2, 'casts_output', True)


@pytest.mark.parametrize('precision', ['bf16', 'fp16'])
def test_precision_and_the_fast_path_commute(precision):
    """`use_precision` before `fast.accelerate` makes the model that after makes: every
    block's class, compute type and casts (the FFN's hidden layer and the add & norms'
    inputs left reduced); under bf16 (where the CPU has it) the same outputs."""
    from d2lbert import fast
    from d2lbert.model import BERTClassifier
    from d2lbert.model.precision import COMPUTE_DTYPES, compute_dtype

    def model(precision_first):
        mx.random.seed(0)
        bert = BERTModel.from_config(BERTConfig.d2l(100, num_hiddens=16, ffn_num_hiddens=32,
                                                    num_heads=2, num_layers=2, dropout=0.0))
        net = BERTClassifier(bert, 3, 0.0)
        net.initialize(init.Normal(0.02))
        switches = [lambda net: run_precision.use_precision(net, precision),
                    fast.accelerate]
        for switch in switches if precision_first else reversed(switches):
            net = switch(net)
        return net

    def blocks(net):
        found = []
        net.apply(lambda block: found.append((
            type(block).__name__, str(compute_dtype(block)),
            *(getattr(block, flag, None)
              for flag in ('casts_input', 'casts_output', 'takes_reduced')))))
        return found

    first, second = model(True), model(False)
    assert blocks(first) == blocks(second)
    dtype = str(COMPUTE_DTYPES[run_precision.PRECISIONS[precision]])
    assert ('FusedMultiHeadAttention', dtype) in [
        found[:2] for found in blocks(first)]
    if precision == 'bf16':
        assert any(found[0] == 'FusedAddNorm' and found[4] for found in blocks(first))
    if precision == 'bf16' and HAS_BF16:
        tokens = mx.np.array(onp.random.default_rng(0).integers(0, 100, (2, 8)),
                             dtype='int32')
        segments, valid_lens = mx.np.zeros_like(tokens), mx.np.array([8, 5])
        onp.testing.assert_array_equal(first(tokens, segments, valid_lens).asnumpy(),
                                       second(tokens, segments, valid_lens).asnumpy())


@needs_bf16
def test_log_sum_exp_takes_and_gives_bfloat16():
    """`d2lbert_log_sum_exp` on bfloat16 logits: the log-sum-exps and the bias
    gradient as the float32 kernel's on the same (bfloat16-representable) numbers
    (up to float32 rounding),
    the logits' gradient in bfloat16, that float32 gradient rounded (8 significant
    bits: within 2^-8 relative)."""
    from d2lbert.fast import kernels
    assert kernels.available()
    rng = onp.random.default_rng(3)
    logits, = cast('float32', *cast(BFLOAT16, mx.np.array(rng.normal(0, 3, (70, 131)),
                                                            dtype='float32')))
    bias = mx.np.array(rng.normal(0, 1, 131), dtype='float32')
    dlse = mx.np.array(rng.normal(0, 1, 70), dtype='float32')

    def run(dtype):
        z, b = logits.copy(), bias.copy()
        z.attach_grad()
        b.attach_grad()
        with mx.autograd.record():
            lse = kernels.log_sum_exp(mx.nd, *cast(dtype, z), b)
        lse.backward(dlse)
        return lse.asnumpy(), z.grad.asnumpy(), b.grad.asnumpy(), lse.dtype

    lse32, dz32, db32, _ = run('float32')
    lse16, dz16, db16, lse_type = run(BFLOAT16)
    assert lse_type == onp.float32
    onp.testing.assert_allclose(lse16, lse32, rtol=1e-6)
    onp.testing.assert_allclose(db16, db32, rtol=1e-4, atol=1e-5)  # float32 rounding
    onp.testing.assert_allclose(dz16, dz32, rtol=2 ** -8, atol=1e-30)
    assert not onp.array_equal(dz16, dz32)  # rounded to bfloat16 on the way


@needs_bf16
def test_bf16_training_accuracy_matches_float32():
    """The MLM accuracy of a bf16 step (its argmax reads the bfloat16 products) is
    the float32 step's, on the bench's 'quick' model (equal logits up to bfloat16
    rounding: the same argmax but for near ties)."""
    config = dataclasses.replace(CONFIGS['quick'], dropout=0.0)
    batch = PretrainingBatch(**random_batch(config))

    def accuracies(dtype):
        from d2lbert import fast
        mx.random.seed(0)
        net = d2lbert_model(config, config.seq_len)
        net.initialize(init.Normal(0.02))
        net = compute_in(fast.accelerate(net), dtype)
        net.collect_params().setattr('grad_req', 'add')
        net.hybridize(static_alloc=True, static_shape=True)
        outputs = forward_backward(net, [batch], [mx.cpu()], with_accuracy=True)
        return [float(value) for value in outputs[2:]]

    assert onp.allclose(accuracies('bfloat16'), accuracies('float32'), atol=0.1)


def types_by_operator(symbol, **input_types):
    """{operator: [output type of each node running it]} of `symbol`, by type
    inference."""
    internals = symbol.get_internals()
    _, out_types, _ = internals.infer_type_partial(**input_types)
    type_of = dict(zip(internals.list_outputs(), out_types))
    found = {}
    for node in json.loads(symbol.tojson())['nodes']:
        if node['op'] != 'null':  # an output is NAME_output, or NAME_out (np.matmul's)
            output = type_of.get(node['name'] + '_output', type_of.get(node['name'] + '_out'))
            found.setdefault(node['op'], []).append(output)
    return found


def test_fp16_graph_casts_around_the_matrix_products():
    """Type inference of the hybridized book model under fp16 (it runs on a CPU; no
    GPU here runs MXNet 1.9): every dense layer but the NSP head's and both attention
    products compute in float16; softmax, LayerNorm and the outputs are float32; the parameters too."""
    net = BERTModel.from_config(BERTConfig.d2l(100, num_hiddens=16, ffn_num_hiddens=32,
                                               num_heads=2, num_layers=1))
    net.initialize(init.Normal(0.02))
    net = compute_in(net, 'float16')
    net.hybridize()
    names = ('tokens', 'segments', 'valid_lens', 'pred_positions')
    outputs = net(*[mx.sym.var(name).as_np_ndarray() for name in names])
    symbol = mx.sym.Group([out.as_nd_ndarray() for out in outputs])
    inputs = {name: 'float32' for name in names}
    types = types_by_operator(symbol, **inputs)
    # Q, K, V, output; FFN x 2 in float16; MLM transform, MLM output in float16; the
    # NSP head's pooler and output float32 (the graph's order: the outputs' order)
    assert types['FullyConnected'] == ([onp.float16] * 6 + [onp.float16] * 2
                                       + [onp.float32] * 2)
    assert types['batch_dot'] == [onp.float16] * 2
    for op in ('softmax', 'LayerNorm'):
        assert set(types[op]) == {onp.float32}, op
    arg_types, out_types, _ = symbol.infer_type_partial(**inputs)
    assert set(out_types) == {onp.float32}
    params = dict(zip(symbol.list_arguments(), arg_types))
    assert {params[name] for name in net.collect_params()} == {onp.float32}


def test_a_layer_kept_float32_computes_in_float32():
    """`keep_float32` on the first layer of a ReLU feed-forward block (whose two layers
    pass the hidden layer uncast when both are reduced): that layer computes in
    float32, its partner still in float16, the graph's types consistent."""
    from d2lbert.model.precision import keep_float32
    net = BERTModel.from_config(BERTConfig.d2l(100, num_hiddens=16, ffn_num_hiddens=32,
                                               num_heads=2, num_layers=1))
    net.initialize(init.Normal(0.02))
    net = compute_in(net, 'float16')
    net = keep_float32(net, [net.encoder.blocks[0].ffn.dense1])
    net.hybridize()
    names = ('tokens', 'segments', 'valid_lens', 'pred_positions')
    outputs = net(*[mx.sym.var(name).as_np_ndarray() for name in names])
    symbol = mx.sym.Group([out.as_nd_ndarray() for out in outputs])
    types = types_by_operator(symbol, **{name: 'float32' for name in names})
    # Q, K, V, output in float16, the FFN's first layer float32, its second float16
    assert types['FullyConnected'][:6] == [onp.float16] * 4 + [onp.float32, onp.float16]


@pytest.mark.parametrize('head', ['classifier', 'mean', 'tagger', 'qa'])
def test_fine_tuning_heads_stay_float32(head):
    """A fine-tuning model under fp16 (type inference of the hybridized graph, on a
    CPU): the encoder's six dense layers compute in float16, the task head's layers
    (output, and the classifiers' pooler) in float32, as the NSP head's do."""
    from d2lbert import BERTTagger, BERTForQuestionAnswering, MeanPooledClassifier
    from d2lbert.model import BERTClassifier
    bert = BERTModel.from_config(BERTConfig.d2l(100, num_hiddens=16, ffn_num_hiddens=32,
                                                num_heads=2, num_layers=1))
    bert.initialize(init.Normal(0.02))
    net = {'classifier': lambda: BERTClassifier(bert, 3),
           'mean': lambda: MeanPooledClassifier(bert, 3), 'tagger': lambda: BERTTagger(bert, 5),
           'qa': lambda: BERTForQuestionAnswering(bert)}[head]()
    net.output.initialize(init.Normal(0.02))
    net = compute_in(net, 'float16')
    net.hybridize()
    names = ('tokens', 'segments', 'valid_lens')
    outputs = net(*[mx.sym.var(name).as_np_ndarray() for name in names])
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    symbol = mx.sym.Group([out.as_nd_ndarray() for out in outputs])
    types = types_by_operator(symbol, **{name: 'float32' for name in names})
    head_layers = 2 if head in ('classifier', 'mean') else 1
    assert types['FullyConnected'] == [onp.float16] * 6 + [onp.float32] * head_layers


@needs_bf16
def test_a_bf16_checkpoint_is_float32_and_resumes_exactly(tmp_path):
    """A bf16 run's checkpoints hold float32 weights; resumed from its checkpoint of
    step 2 (the later one deleted, as if it had stopped there), it ends with the same
    weights at step 4."""
    common = dict(batch_size=16, eval_every=1000, save_every=2, progress=False,
                  precision='bf16')
    whole, halves = str(tmp_path / 'whole'), str(tmp_path / 'halves')
    pretrain(PretrainOptions(out=whole, steps=4, **common))
    shutil.copytree(whole, halves)
    last = os.path.join('checkpoints', 'step-000004')
    shutil.rmtree(os.path.join(halves, last))
    pretrain(PretrainOptions(out=halves, steps=4, resume=True, **common))
    final = [mx.nd.load(os.path.join(out, last, 'model.params')) for out in (whole, halves)]
    assert all(array.dtype == onp.float32 for array in final[0].values())
    assert all((final[0][k].asnumpy() == final[1][k].asnumpy()).all() for k in final[0])


@pytest.mark.parametrize('args, message', [
    (['pretrain', '--precision', 'bf16'], 'neither avx512_bf16 nor amx_bf16'),
    (['pretrain', '--precision', 'fp16'], 'float16 computes on GPUs only'),
    (['pretrain', '--amp', '--precision', 'bf16'], '--amp means --precision fp16'),
])
def test_missing_hardware_is_one_line_exit_2(args, message, tmp_path, capsys, monkeypatch):
    """A CPU without bfloat16 (pretended), fp16 on a CPU: exit 2, one line naming what
    is missing, and no run folder."""
    monkeypatch.setattr(run_precision, 'cpu_flags', lambda: {'avx2', 'avx512f'})
    out = str(tmp_path / 'o')
    code, stderr = run_main([*args, '--cpu', '--steps', '1', '--out', out], capsys)
    assert code == 2, stderr
    assert message in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert not os.path.exists(out)
    code, stderr = run_main(['bench', '--quick', '--precision', 'bf16'], capsys)
    assert code == 2 and 'neither avx512_bf16 nor amx_bf16' in stderr, stderr


def test_onednn_held_to_avx2_runs_fp32_not_bf16(tmp_path):
    """oneDNN held to AVX2 ($DNNL_MAX_CPU_ISA, read once, so in processes of their own)
    has no bf16 kernel even on a CPU with avx512_bf16: auto runs fp32 and says so, and
    --precision bf16 is one line, exit 2 (not oneDNN's error)."""
    from test_inputs import minilm_folder
    (tmp_path / 'sents.txt').write_text('a fine film\nan awful one\n')
    env = dict(os.environ, DNNL_MAX_CPU_ISA='AVX2')

    def encode(precision):
        return subprocess.run([sys.executable, '-m', 'd2lbert', 'encode', '--model',
                               minilm_folder(), '--data', 'sents.txt', '--out',
                               f'{precision}.npy', '--precision', precision], cwd=tmp_path,
                              env=env, capture_output=True, text=True)
    auto, bf16 = encode('auto'), encode('bf16')
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.strip().endswith('matrix products in fp32'), auto.stdout
    assert bf16.returncode == 2 and len(bf16.stderr.strip().splitlines()) == 1, bf16.stderr
    # the line names what stops bf16: the variable, or a CPU without bf16 (an AVX2 CPU)
    reason = 'DNNL_MAX_CPU_ISA' if HAS_BF16 else 'neither avx512_bf16 nor amx_bf16'
    assert reason in bf16.stderr and not (tmp_path / 'bf16.npy').exists()


def test_bench_reports_bf16_rows_against_float32_and_transformers():
    """The bf16 targets are ratios of rows of the same run; a float32 run has none."""
    def run(pairs_per_s, rss=1000.0):
        return {'pairs_per_s': pairs_per_s, 'step_seconds': 1 / pairs_per_s,
                'peak_rss_mb': rss, 'mean_width': 32.0, 'real_share': 0.8}
    results = {'options': {'precision': 'bf16'}, 'steps': {'small': {
        'config': {}, 'flops': {'total': 1e9},
        'd2lbert': run(10.0), 'd2lbert bf16': run(17.0, 900.0)}},
        'finetune': {'bert.small': {'config': {}, 'd2lbert': run(10.0),
                                    'd2lbert bf16': run(12.0), 'transformers bf16': run(4.0)}}}
    measured = {row['target']: (row['value'], row['passed'])
                for row in evaluate_targets(results)}
    assert measured['small: d2lbert bf16 pairs/s vs its fp32'] == (1.7, True)
    assert measured['book: d2lbert bf16 pairs/s vs its fp32'] == (None, None)
    assert measured['small: peak RSS of d2lbert fp32 / bf16 (memory)'][1] is True
    assert measured['fine-tuning (bert.small): d2lbert bf16 vs its fp32'][1] is False
    assert measured['fine-tuning (bert.small): d2lbert bf16 vs transformers bf16 '
                    'autocast'] == (3.0, True)
    results['options']['precision'] = 'fp32'
    assert not any('bf16' in row['target'] for row in evaluate_targets(results))


@needs_bf16
def test_bf16_inference_matches_float32():
    """What predict and encode compute (the encoder's vectors, the heads' logits) in
    bf16: within 5% (relative L2) of float32."""
    net = BERTModel.from_config(BERTConfig.d2l(100, num_hiddens=32, ffn_num_hiddens=64,
                                               num_heads=2, num_layers=2, dropout=0.0))
    net.initialize(init.Normal(0.02))
    tokens = mx.np.array(onp.random.RandomState(0).randint(1, 100, (4, 12)), dtype='int32')
    segments = mx.np.zeros((4, 12), dtype='int32')
    reference = [out.asnumpy() for out in net(tokens, segments) if out is not None]
    net = compute_in(net, 'bfloat16')
    net.hybridize()
    reduced = [out.asnumpy() for out in net(tokens, segments) if out is not None]
    for ours, theirs in zip(reduced, reference):
        assert ours.dtype == onp.float32
        assert onp.linalg.norm(ours - theirs) < 0.05 * onp.linalg.norm(theirs)


# What the default job must reach at its last evaluation (step 500): tests/test_pretrain.py
THRESHOLDS = {'mlm_accuracy': 0.45, 'nsp_accuracy': 0.75}


@needs_bf16
def test_the_default_job_in_bf16_learns(tmp_path):
    """`d2lbert pretrain --precision bf16` with every other default (500 steps, several
    minutes) meets the float32 job's thresholds, and saves float32 weights."""
    out = str(tmp_path / 'run')
    final = pretrain(PretrainOptions(out=out, precision='bf16', progress=False))['eval']
    for name, threshold in THRESHOLDS.items():
        assert final[name] >= threshold, final
    saved = mx.nd.load(os.path.join(out, 'checkpoints', 'step-000500', 'model.params'))
    assert {array.dtype for array in saved.values()} == {onp.float32}
