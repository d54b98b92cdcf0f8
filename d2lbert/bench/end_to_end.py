"""End to end on real text: from a WikiText file to trained steps, data pipeline included.

Both sides start from the raw `wiki.*.tokens` file and are timed from there to the end
of `num_steps` optimizer steps (batch 512, max_len 64 and the book's model size for
the full benchmark):

* d2lbert: `load_data_wiki` (with an empty, temporary `D2LBERT_HOME`, so nothing
  cached by an earlier run is reused) and the trainer's step (`forward_backward` +
  `optimizer_step`, hybridized model).
* the book: d2l's `_read_wiki` (for one file), `_WikiTextDataset`, a
  `gluon.data.DataLoader(shuffle=True, num_workers=0)` and the `train_bert` loop.

The figure of merit is real (non-padding) tokens trained per second of total wall time;
the data-building and training times are reported separately too.
"""
import os
import random
import tempfile
import time
from unittest import mock


def _cycle_batches(data_iter, num_steps):
    """The first `num_steps` batches of d2lbert's iterator, epoch after epoch."""
    epoch, taken = 0, 0
    while taken < num_steps:
        for batch in data_iter.batches(epoch):
            if taken == num_steps:
                return
            yield batch
            taken += 1
        epoch += 1


def _summary(build_seconds, total_seconds, real_tokens, num_steps, num_examples):
    train_seconds = total_seconds - build_seconds
    return {'build_seconds': build_seconds, 'train_seconds': train_seconds,
            'total_seconds': total_seconds, 'steps': num_steps, 'real_tokens': real_tokens,
            'examples': num_examples,
            'tokens_per_s': real_tokens / total_seconds,
            'train_tokens_per_s': real_tokens / train_seconds}


def d2lbert_end_to_end(path, config, num_steps, ctx, batch_size=512, max_len=64, seed=0):
    """Build d2lbert's pipeline on `path` from scratch and train `num_steps` steps."""
    import mxnet as mx
    from ..data import load_data_wiki
    from ..run.step import trainable_parameters
    from .step_d2lbert import d2lbert_model, prepare_for_training, train_step
    with tempfile.TemporaryDirectory() as home, \
            mock.patch.dict(os.environ, {'D2LBERT_HOME': home}):
        start = time.perf_counter()
        data_iter, vocab = load_data_wiki(batch_size, max_len, data=path, seed=seed)
        build_seconds = time.perf_counter() - start
        config = config.__class__(**{**config.to_dict(), 'vocab_size': len(vocab)})
        net = d2lbert_model(config, max_len)
        net, trainer = prepare_for_training(net, ctx)
        params = trainable_parameters(net)
        real_tokens = 0
        for batch in _cycle_batches(data_iter, num_steps):
            train_step(net, params, trainer, batch, ctx)
            real_tokens += int(batch.valid_lens.sum())
        mx.nd.waitall()
        total_seconds = time.perf_counter() - start
        return _summary(build_seconds, total_seconds, real_tokens, num_steps,
                        len(data_iter.examples))


def book_end_to_end(path, config, num_steps, ctx, batch_size=512, max_len=64, seed=0):
    """The book's pipeline and `train_bert` loop on `path`, for `num_steps` steps."""
    import mxnet as mx
    from d2l import mxnet as d2l
    from mxnet import gluon
    from .data_pipeline import read_wiki_paragraphs_like_d2l
    from .step_d2l import book_step, d2l_model
    devices = [ctx]
    random.seed(seed)
    start = time.perf_counter()
    train_set = d2l._WikiTextDataset(read_wiki_paragraphs_like_d2l(path), max_len)
    train_iter = gluon.data.DataLoader(train_set, batch_size, shuffle=True, num_workers=0)
    build_seconds = time.perf_counter() - start
    vocab_size = len(train_set.vocab)
    config = config.__class__(**{**config.to_dict(), 'vocab_size': vocab_size})
    net = d2l_model(config, max_len, ctx)
    loss = gluon.loss.SoftmaxCELoss()
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 0.01})
    step, real_tokens = 0, 0
    while step < num_steps:
        for batch in train_iter:
            book_step(net, loss, trainer, vocab_size, batch, devices)
            real_tokens += int(batch[2].sum())
            step += 1
            if step == num_steps:
                break
    mx.nd.waitall()
    total_seconds = time.perf_counter() - start
    return _summary(build_seconds, total_seconds, real_tokens, num_steps, len(train_set))
