"""d2lbert's `BERTAdam` (`util.bert_adam`) against GluonNLP 0.10's, which it replaces:
the same parameters after a few steps (GluonNLP stays a test reference)."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np, npx

from d2lbert.run.optimizer import make_trainer, no_decay
from d2lbert.util.bert_adam import BERTAdam

SETTINGS = [{'learning_rate': 0.01, 'wd': 0.1},
            {'learning_rate': 0.003, 'wd': 0.02, 'beta1': 0.8, 'beta2': 0.99, 'epsilon': 1e-4,
             'clip_gradient': 0.05}]


def small_net():
    """Dense, LayerNorm, Dense: weights with weight decay, biases and LayerNorm without."""
    npx.set_np()
    mx.random.seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(37, in_units=53), gluon.nn.LayerNorm(in_channels=37),
            gluon.nn.Dense(3, in_units=37))
    net.initialize(mx.init.Normal(0.5))
    for name, param in net.collect_params().items():
        if no_decay(name):
            param.wd_mult = 0.0
    return net


def trained_weights(optimizer, steps=5, batch_size=8):
    """The weights of `small_net` after steps of a squared loss on random batches."""
    net = small_net()
    trainer = gluon.Trainer(net.collect_params(), optimizer, update_on_kvstore=False)
    rng = onp.random.RandomState(0)
    for _ in range(steps):
        x = np.array(rng.randn(batch_size, 53).astype('float32'))
        y = np.array(rng.randn(batch_size, 3).astype('float32'))
        with autograd.record():
            loss = ((net(x) - y) ** 2).sum()
        loss.backward()
        trainer.step(batch_size)
    return [param.data().asnumpy() for param in net.collect_params().values()]


@pytest.mark.parametrize('aggregation,tolerance', [('4', 0.0), ('1', 2e-5)])
@pytest.mark.parametrize('settings', SETTINGS)
def test_same_parameters_as_gluonnlp_bert_adam(settings, aggregation, tolerance,
                                               monkeypatch):
    """Bit for bit with MXNet's default of 4 parameters per update; with 1, GluonNLP
    calls MXNet's one-parameter operator, which rounds differently (measured 7e-6)."""
    gluonnlp = pytest.importorskip('gluonnlp')
    monkeypatch.setenv('MXNET_OPTIMIZER_AGGREGATION_SIZE', aggregation)
    ours = trained_weights(BERTAdam(**settings))
    theirs = trained_weights(gluonnlp.optimizer.BERTAdam(**settings))
    assert len(ours) == 6
    for a, b in zip(ours, theirs):
        onp.testing.assert_allclose(a, b, rtol=0, atol=tolerance)
    assert not any(onp.array_equal(a, b) for a, b in zip(ours, trained_weights(
        BERTAdam(**settings), steps=0)))  # every parameter moved


def test_make_trainer_makes_d2lbert_bert_adam_whatever_the_registry_holds(monkeypatch):
    """Importing GluonNLP registers its own 'bertadam', over d2lbert's."""
    gluonnlp = pytest.importorskip('gluonnlp')
    monkeypatch.setitem(mx.optimizer.Optimizer.opt_registry, 'bertadam',
                        gluonnlp.optimizer.BERTAdam)
    assert type(make_trainer(small_net(), 'bertadam').optimizer) is BERTAdam


def test_registered_as_bertadam():
    assert mx.optimizer.create('bertadam', learning_rate=0.1).__class__.__name__ == 'BERTAdam'


def test_no_multi_precision():
    with pytest.raises(ValueError, match='multi_precision'):
        BERTAdam(multi_precision=True)
