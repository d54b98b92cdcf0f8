"""`BERTForQuestionAnswering`: the pretrained encoder shared, a new Dense(2) on every
token; against NumPy, padding masked, hybridized and fast path equal, the loss."""
import mxnet as mx
import numpy as onp
from mxnet import autograd, np

from conftest import make_batch, make_model, to_numpy
from d2lbert import BERTForQuestionAnswering, fast
from d2lbert.data import Vocab
from d2lbert.data.squad import Answer, SquadExample, make_windows, qa_batch
from d2lbert.finetuning.task_step import task_forward_backward
from d2lbert.model.question_answering import PADDING_LOGIT


def qa_model(arch='d2l', seed=0, accelerated=False):
    bert = make_model(arch, seed=seed)
    net = BERTForQuestionAnswering(bert)
    net.output.initialize()
    net.output.weight.set_data(np.array(
        onp.random.default_rng(seed + 1).normal(size=net.output.weight.shape), dtype='float32'))
    if accelerated:
        net = fast.accelerate(net)
    return bert, net


def inputs(batch):
    return batch['tokens'], batch['segments'], batch['valid_lens']


def test_shares_the_encoder_and_matches_numpy_on_valid_positions(arch):
    bert, net = qa_model(arch)
    assert net.encoder is bert.encoder
    assert [name for name, _ in net._children.items()] == ['encoder', 'output']
    batch = make_batch(seed=1)
    start, end = to_numpy(*net(*inputs(batch)))
    encoded = to_numpy(bert.encoder(*inputs(batch)))
    weight, bias = to_numpy(net.output.weight.data(), net.output.bias.data())
    expected = encoded @ weight.T + bias  # (batch, seq, 2)
    valid = onp.arange(10) < batch['valid_lens'].asnumpy()[:, None]
    assert start.shape == end.shape == (4, 10)
    assert onp.abs(start[valid] - expected[..., 0][valid]).max() < 1e-5
    assert onp.abs(end[valid] - expected[..., 1][valid]).max() < 1e-5
    assert (start[~valid] == PADDING_LOGIT).all() and (end[~valid] == PADDING_LOGIT).all()


def test_loss_is_the_mean_of_start_and_end_cross_entropy_and_ignores_padding():
    _, net = qa_model()
    batch = make_batch(seed=2)
    labels = onp.array([[0, 0], [1, 2], [2, 2], [1, 1]])
    start, end = net(*inputs(batch))
    loss = net.loss((start, end), np.array(labels, dtype='int32')).asnumpy()
    valid_lens = batch['valid_lens'].asnumpy()
    expected = []
    for i, length in enumerate(valid_lens):  # softmax over the valid positions only
        s, e = to_numpy(start[i, :length], end[i, :length])
        log_s = s - onp.log(onp.exp(s - s.max()).sum()) - s.max()
        log_e = e - onp.log(onp.exp(e - e.max()).sum()) - e.max()
        expected.append(-(log_s[labels[i, 0]] + log_e[labels[i, 1]]) / 2)
    assert loss.shape == (4,)
    assert onp.allclose(loss, expected, atol=1e-5)


def test_padding_does_not_change_the_logits_or_the_loss():
    _, net = qa_model()
    batch = make_batch(seed=3)
    labels = np.array([[0, 0], [1, 1], [2, 1], [0, 0]], dtype='int32')
    before = net(*inputs(batch))
    tokens = batch['tokens'].asnumpy()
    for i, length in enumerate(batch['valid_lens'].asnumpy()):
        tokens[i, length:] = 7  # garbage in the padding
    after = net(np.array(tokens, dtype='int32'), batch['segments'], batch['valid_lens'])
    for a, b in zip(before, after):
        assert onp.abs(a.asnumpy() - b.asnumpy()).max() == 0.0
    loss_before, loss_after = net.loss(before, labels), net.loss(after, labels)
    assert onp.abs(loss_before.asnumpy() - loss_after.asnumpy()).max() == 0


def test_fast_path_and_hybridized_give_the_same_logits_and_gradients():
    batch = make_batch(seed=4)
    labels = np.array([[0, 0], [1, 2], [2, 3], [1, 1]], dtype='int32')
    results = []
    for accelerated, hybridize in ((False, False), (False, True), (True, True)):
        _, net = qa_model('original', seed=5, accelerated=accelerated)
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        with autograd.record():
            outputs = net(*inputs(batch))
            net.loss(outputs, labels).mean().backward()
        grads = {k: p.grad().asnumpy() for k, p in net._collect_params_with_prefix().items()}
        results.append(([o.asnumpy() for o in outputs], grads))
    for outputs, grads in results[1:]:
        for got, expected in zip(outputs, results[0][0]):
            assert onp.abs(got - expected).max() < 1e-5
        for name, grad in results[0][1].items():
            tolerance = 1e-4 if name.endswith('key_bias') else 1e-5 * (1 + onp.abs(grad).max())
            assert onp.abs(grads[name] - grad).max() < tolerance, name


def test_without_valid_lens_every_position_is_scored():
    _, net = qa_model()
    batch = make_batch(seed=6)
    start, end = net(batch['tokens'], batch['segments'], None)
    assert (start.asnumpy() > PADDING_LOGIT / 2).all()
    assert (end.asnumpy() > PADDING_LOGIT / 2).all()


def test_a_squad_batch_runs_through_the_fine_tuning_step():
    """qa_batch gives a TaskBatch the task step takes: its loss is the model's mean loss."""
    context = 'the cat sat on the mat and the dog sat on the log .'
    examples = [SquadExample('a', 'where did the dog sit ?', context,
                             (Answer('the log', context.index('the log')),)),
                SquadExample('b', 'where did the cow sit ?', context, (), True)]
    vocab = Vocab({word: 1 for word in (context + ' where did cow sit ?').split()})
    windows = make_windows(examples, vocab, max_len=16, doc_stride=4, max_query_len=6)
    batch = qa_batch(windows, vocab.pad_id)
    assert batch.labels.shape == (len(windows), 2) and max(batch.valid_lens) <= 16
    _, net = qa_model()
    for param in net.collect_params().values():
        param.grad_req = 'add'
    net.collect_params().zero_grad()
    loss = float(task_forward_backward(net, batch, [mx.cpu()]))
    outputs = net(*(np.array(a, dtype='int32') for a in batch[:3]))
    expected = net.loss(outputs, np.array(batch.labels, dtype='int32')).mean()
    assert abs(loss - float(expected)) < 1e-5
    assert abs(net.output.weight.grad().asnumpy()).sum() > 0
