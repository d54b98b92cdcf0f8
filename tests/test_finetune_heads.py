"""`BERTClassifier`, `MeanPooledClassifier` and `BERTTagger`: the pretrained encoder
(and pooler) shared, new output layers; against NumPy, padding-invariant, the same on
the fast path."""
import numpy as onp
import pytest
from mxnet import autograd, gluon, np

from conftest import make_batch, make_model, to_numpy
from d2lbert import BERTClassifier, BERTTagger, MeanPooledClassifier, fast
from d2lbert.model.tagger import IGNORED


def classifier(arch='d2l', num_classes=3, seed=0, accelerated=False, cls=BERTClassifier):
    bert = make_model(arch, seed=seed)
    net = cls(bert, num_classes, dropout=0.0)
    net.output.initialize()
    if accelerated:
        net = fast.accelerate(net)
    return bert, net


def inputs(batch):
    return batch['tokens'], batch['segments'], batch['valid_lens']


def test_classifier_reuses_the_pretrained_blocks_and_matches_numpy(arch):
    bert, net = classifier(arch)
    assert net.encoder is bert.encoder and net.pooler is bert.nsp.pooler
    batch = make_batch(seed=1)
    logits = to_numpy(net(*inputs(batch)))
    encoded = to_numpy(bert.encoder(*inputs(batch)))
    pooler_w, pooler_b, out_w, out_b = to_numpy(
        bert.nsp.pooler.weight.data(), bert.nsp.pooler.bias.data(),
        net.output.weight.data(), net.output.bias.data())
    expected = onp.tanh(encoded[:, 0] @ pooler_w.T + pooler_b) @ out_w.T + out_b
    assert logits.shape == (4, 3)
    assert onp.abs(logits - expected).max() < 1e-5


def test_mean_pooled_classifier_reads_the_mean_of_the_valid_tokens(arch):
    bert, net = classifier(arch, cls=MeanPooledClassifier)
    batch = make_batch(seed=1)
    logits = to_numpy(net(*inputs(batch)))
    encoded = to_numpy(bert.encoder(*inputs(batch)))
    valid_lens = to_numpy(batch['valid_lens'])
    assert valid_lens.min() < encoded.shape[1]  # some rows are padded
    means = onp.stack([encoded[i, :int(n)].mean(axis=0) for i, n in enumerate(valid_lens)])
    pooler_w, pooler_b, out_w, out_b = to_numpy(
        bert.nsp.pooler.weight.data(), bert.nsp.pooler.bias.data(),
        net.output.weight.data(), net.output.bias.data())
    expected = onp.tanh(means @ pooler_w.T + pooler_b) @ out_w.T + out_b
    assert onp.abs(logits - expected).max() < 1e-5


@pytest.mark.parametrize('cls', [BERTClassifier, MeanPooledClassifier])
def test_padding_does_not_change_the_logits(cls):
    _, net = classifier(cls=cls)
    batch = make_batch(seed=2)
    before = to_numpy(net(*inputs(batch)))
    tokens = batch['tokens'].asnumpy()
    valid = batch['valid_lens'].asnumpy()
    for i, length in enumerate(valid):
        tokens[i, length:] = 7  # garbage in the padding
    after = to_numpy(net(np.array(tokens, dtype='int32'), batch['segments'], batch['valid_lens']))
    assert onp.abs(after - before).max() == 0.0


@pytest.mark.parametrize('head', ['classifier', 'mean_pooled', 'tagger'])
def test_fast_path_and_hybridized_give_the_same_logits_and_gradients(head):
    batch = make_batch(seed=3)
    results = []
    for accelerated, hybridize in ((False, False), (False, True), (True, True)):
        bert = make_model('original', seed=4)
        net = {'classifier': BERTClassifier, 'mean_pooled': MeanPooledClassifier,
               'tagger': BERTTagger}[head](bert, 2 if head != 'tagger' else 5, 0.0)
        net.output.initialize()
        net.output.weight.set_data(np.array(
            onp.random.default_rng(5).normal(size=net.output.weight.shape), dtype='float32'))
        if accelerated:
            net = fast.accelerate(net)
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        with autograd.record():
            logits = net(*inputs(batch))
            (logits * logits).sum().backward()
        grads = {k: p.grad().asnumpy() for k, p in net._collect_params_with_prefix().items()}
        results.append((logits.asnumpy(), grads))
    if head == 'tagger':  # compare the valid positions only
        valid = onp.arange(10) < batch['valid_lens'].asnumpy()[:, None]
        results = [(logits[valid], grads) for logits, grads in results]
    for logits, grads in results[1:]:
        assert onp.abs(logits - results[0][0]).max() < 1e-5
        for name, grad in results[0][1].items():
            # the key bias's gradient is 0 but for rounding (softmax ignores a shift)
            tolerance = 1e-4 if name.endswith('key_bias') else 1e-5 * (1 + onp.abs(grad).max())
            assert onp.abs(grads[name] - grad).max() < tolerance, name


def test_regression_loss_is_the_squared_error():
    _, net = classifier(num_classes=1)
    logits = np.array([[0.5], [2.0]])
    loss = net.loss(logits, np.array([1.0, -1.0]))
    assert onp.allclose(loss.asnumpy(), [0.25, 9.0])


def test_tagger_loss_skips_untagged_positions():
    bert = make_model('d2l', seed=6)
    net = BERTTagger(bert, 4, dropout=0.0)
    net.output.initialize()
    rng = onp.random.default_rng(7)
    logits = rng.normal(size=(2, 5, 4))
    labels = onp.array([[IGNORED, 1, 3, IGNORED, IGNORED], [IGNORED, 0, IGNORED, 2, 2]])
    x = np.array(logits, dtype='float32')
    x.attach_grad()
    with autograd.record():
        loss = net.loss(x, np.array(labels, dtype='int32'))
    loss.backward()
    log_probs = logits - onp.log(onp.exp(logits).sum(-1, keepdims=True))
    expected = [-onp.mean([log_probs[b, t, labels[b, t]] for t in range(5)
                           if labels[b, t] != IGNORED]) for b in range(2)]
    assert onp.allclose(loss.asnumpy(), expected, atol=1e-5)
    assert onp.abs(x.grad.asnumpy()[labels == IGNORED]).max() == 0


def test_a_classifier_learns_a_pair_task():
    """A few Adam steps on a fixed batch: is sentence B's first token the same as A's?"""
    bert, net = classifier(num_classes=2, seed=8, accelerated=True)
    net.hybridize()
    rng = onp.random.default_rng(9)
    tokens = rng.integers(5, 64, size=(16, 8))
    labels = rng.integers(0, 2, size=16)
    tokens[:, 5] = onp.where(labels == 1, tokens[:, 1], (tokens[:, 1] + 7) % 59 + 5)
    segments = onp.array([[0] * 4 + [1] * 4] * 16)
    batch = (np.array(tokens, dtype='int32'), np.array(segments, dtype='int32'),
             np.array([8] * 16, dtype='int32'))
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 3e-3})
    losses = []
    for _ in range(30):
        with autograd.record():
            loss = net.loss(net(*batch), np.array(labels, dtype='int32')).mean()
        loss.backward()
        trainer.step(1)
        losses.append(float(loss))
    assert losses[-1] < 0.3 * losses[0], losses
