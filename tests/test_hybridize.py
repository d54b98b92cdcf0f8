"""The model hybridizes, exports, back-propagates into every parameter, and trains.

`hybridize()` turns the Python forward into one MXNet graph; a block that only works
imperatively (Python control flow on array values, NumPy calls) would fail or give
different numbers here.
"""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np

from conftest import make_batch, make_model, to_numpy


def pretraining_targets(batch, seed=0):
    """Random MLM labels/weights and NSP labels for a batch (the last prediction slot
    of the first example is padding: weight 0)."""
    rng = onp.random.default_rng(seed)
    batch_size, num_preds = batch['pred_positions'].shape
    mlm_weights = onp.ones((batch_size, num_preds), dtype='float32')
    mlm_weights[0, -1] = 0
    return dict(mlm_weights=np.array(mlm_weights),
                mlm_labels=np.array(rng.integers(0, 64, (batch_size, num_preds)),
                                    dtype='int32'),
                nsp_labels=np.array(rng.integers(0, 2, batch_size), dtype='int32'))


def assert_same(actual, expected, atol=1e-6):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if e is None:
            assert a is None
        else:
            assert a.shape == e.shape
            assert onp.abs(a - e).max() <= atol


@pytest.mark.parametrize('with_mlm', [True, False], ids=['with_pred_positions', 'mlm_none'])
def test_hybridized_equals_imperative(arch, with_mlm):
    """`hybridize(static_alloc=True, static_shape=True)` gives the imperative outputs,
    with pred_positions (all three outputs) and without (mlm_logits is None). A second
    call, which reuses the cached graph, gives them again."""
    net = make_model(arch)
    batch = make_batch(seed=10)
    if not with_mlm:
        batch['pred_positions'] = None
    expected = to_numpy(*net(**batch))
    net.hybridize(static_alloc=True, static_shape=True)
    assert_same(to_numpy(*net(**batch)), expected)
    assert_same(to_numpy(*net(**batch)), expected)
    if not with_mlm:
        assert expected[1] is None


def test_hybridized_model_handles_changing_shapes():
    """One hybridized model serves batches of different sizes and lengths (training,
    then evaluation on other shapes), alternating with and without pred_positions, and
    always gives the imperative outputs."""
    net = make_model('original')
    batches = [make_batch(seed=16, batch_size=4, seq_len=10),
               make_batch(seed=17, batch_size=2, seq_len=7),
               make_batch(seed=18, batch_size=1, seq_len=5, num_preds=2)]
    expected = [to_numpy(*net(**batch)) for batch in batches]
    net.hybridize(static_alloc=True, static_shape=True)
    for _ in range(2):
        for batch, outputs in zip(batches, expected):
            assert_same(to_numpy(*net(**batch)), outputs)
            without_mlm = to_numpy(*net(batch['tokens'], batch['segments'],
                                        batch['valid_lens']))
            assert_same(without_mlm, [outputs[0], None, outputs[2]])


# SymbolBlock.imports cannot infer the dtype of the integer inputs from the graph file
# and says so; the outputs are checked below.
@pytest.mark.filterwarnings('ignore:Cannot decide type')
def test_export_and_symbolblock_imports_reproduce_outputs(tmp_path):
    """`export` writes the graph and the weights; `SymbolBlock.imports` loads them back
    as a model (no d2lbert code involved) that computes the same outputs."""
    net = make_model('original')
    net.hybridize(static_alloc=True, static_shape=True)
    batch = make_batch(seed=11)
    args = [batch[k] for k in ('tokens', 'segments', 'valid_lens', 'pred_positions')]
    expected = to_numpy(*net(*args))
    prefix = str(tmp_path / 'bert')
    net.export(prefix, epoch=0)

    imported = gluon.SymbolBlock.imports(f'{prefix}-symbol.json',
                                         ['data0', 'data1', 'data2', 'data3'],
                                         f'{prefix}-0000.params')
    assert_same(to_numpy(*imported(*args)), expected)


def backward_of_pretraining_loss(net, batch):
    with autograd.record():
        mlm_loss, nsp_loss = net.pretraining_loss(**batch, **pretraining_targets(batch))
        loss = mlm_loss + nsp_loss
    loss.backward()
    return loss


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
def test_every_parameter_gets_a_nonzero_gradient(arch, hybridize):
    """One backward pass of the MLM + NSP pretraining loss reaches every parameter
    (dropout 0): nothing is disconnected from the loss, including the tied decoder
    weight and every query/value projection.

    The one exception is a fact of attention, not a bug: the key bias adds q . b_k to
    *every* score of query q, and softmax ignores a constant shift, so its gradient is
    mathematically 0 (here only rounding noise, ~1e-8). BERT checkpoints carry it anyway.
    """
    net = make_model(arch)
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    backward_of_pretraining_loss(net, make_batch(seed=12))
    for name, param in net.collect_params().items():
        grad = onp.abs(param.grad().asnumpy())
        assert onp.isfinite(grad).all(), name
        if name.endswith('key_bias'):
            assert grad.max() < 1e-6, name
        else:
            assert grad.max() > 1e-4, f'{name} gets (almost) no gradient'


def test_gradients_agree_between_imperative_and_hybridized():
    """Hybridizing changes neither the loss nor the gradients."""
    losses, grads = [], []
    for hybridize in (False, True):
        net = make_model('original')
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        losses.append(float(backward_of_pretraining_loss(net, make_batch(seed=13))))
        grads.append([p.grad().asnumpy() for _, p in sorted(net.collect_params().items())])
    assert abs(losses[0] - losses[1]) < 1e-5
    for a, b in zip(*grads):
        onp.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_few_adam_steps_lower_the_pretraining_loss(arch):
    """Training works end to end: 10 Adam steps on one fixed batch lower the loss."""
    net = make_model(arch)
    net.hybridize(static_alloc=True, static_shape=True)
    batch = make_batch(seed=14)
    targets = pretraining_targets(batch, seed=14)
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 1e-2})
    losses = []
    for _ in range(10):
        with autograd.record():
            mlm_loss, nsp_loss = net.pretraining_loss(**batch, **targets)
            loss = mlm_loss + nsp_loss
        loss.backward()
        trainer.step(1)
        losses.append(float(loss))
    assert all(onp.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], losses


def test_pretraining_loss_matches_numpy_cross_entropy():
    """`pretraining_loss` is the MLM cross-entropy averaged over the real prediction
    slots (weight 1) and the NSP cross-entropy averaged over the examples."""
    net = make_model('d2l')
    batch = make_batch(seed=15)
    targets = pretraining_targets(batch, seed=15)
    mlm_loss, nsp_loss = net.pretraining_loss(**batch, **targets)
    _, mlm, nsp = to_numpy(*net(**batch))

    def nll(logits, labels):
        logits = logits - logits.max(axis=-1, keepdims=True)
        log_probs = logits - onp.log(onp.exp(logits).sum(axis=-1, keepdims=True))
        return -onp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]

    weights = targets['mlm_weights'].asnumpy()
    expected_mlm = (nll(mlm, targets['mlm_labels'].asnumpy()) * weights).sum() / weights.sum()
    expected_nsp = nll(nsp, targets['nsp_labels'].asnumpy()).mean()
    assert abs(float(mlm_loss) - expected_mlm) < 1e-5
    assert abs(float(nsp_loss) - expected_nsp) < 1e-5
