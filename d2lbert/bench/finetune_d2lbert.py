"""One fine-tuning step of d2lbert on sentence pairs, as `d2lbert finetune` runs it.

The model is `BERTClassifier(bert, 3, dropout)` on a `BERTModel` of the benchmark's
size, set up by the function `d2lbert finetune` calls (`run.setup.prepare_training`:
the fast path, hybridized with static memory, gradients added, a BERTAdam trainer). The
batches are the fine-tuning loop's (`training_batches`, which sorts lengths into
buckets and pads each batch to about its longest pair). `finetune_step` is the body of
the loop for one batch, without the learning-rate schedule and the logging: keep it in
line with `d2lbert.finetuning.finetune`. The SQuAD line (`squad_d2lbert`) sets up and
steps its model with the same functions.
"""
CLIP = 1.0   # `d2lbert finetune --clip`'s default


def d2lbert_bert(config, ctx):
    """A `BERTModel` of `config`'s size, initialized as `d2lbert pretrain` does."""
    from mxnet import init
    from ..model import BERTConfig, BERTModel
    bert = BERTModel.from_config(BERTConfig.d2l(
        config.vocab_size, 'book', num_hiddens=config.num_hiddens,
        ffn_num_hiddens=config.ffn_num_hiddens, num_heads=config.num_heads,
        num_layers=config.num_layers, dropout=config.dropout,
        max_len=config.num_positions))
    bert.initialize(init.Normal(0.02), ctx=ctx)
    return bert


def ready_to_train(net, ctx, lr=1e-4, precision='fp32'):
    """A model of `net` (a task model on an initialized BERT) and its trainer, set up as
    `d2lbert finetune` does: the new output layer initialized, then
    `run.setup.prepare_training` (the fast path, matrix products in `precision`,
    hybridized, gradients added, BERTAdam)."""
    from mxnet import init
    from .. import fast
    from ..run.setup import prepare_training
    net.output.initialize(init.Normal(0.02), ctx=ctx)
    return prepare_training(net, 'bertadam', lr, precision=precision, fast_path=fast)


def d2lbert_classifier(config, ctx, lr=1e-4, precision='fp32'):
    """An initialized `BERTClassifier` of `config`'s size ready to train, and its
    trainer, set up as `d2lbert finetune` does."""
    from ..model import BERTClassifier
    return ready_to_train(BERTClassifier(d2lbert_bert(config, ctx), 3, config.dropout),
                          ctx, lr, precision)


def host_batches(config, pairs, seed=0):
    """The fine-tuning loop's batches of `pairs` (one epoch)."""
    from ..data.tasks import training_batches
    from .finetune_pairs import PAD_ID
    return list(training_batches(pairs, config.batch_size, 0, seed, config.max_len,
                                 PAD_ID))


def finetune_step(net, params, trainer, batch, ctxs, step, clip=CLIP, seed=0):
    """Dropout seeded for the step, forward + loss + backward, clipping + update +
    zeroing, on one host `TaskBatch` with labels (params: net's
    `run.step.trainable_parameters`)."""
    from ..run.step import optimizer_step, seed_step
    from ..finetuning.task_step import task_forward_backward
    seed_step(seed, step)
    task_forward_backward(net, batch, ctxs)
    optimizer_step(params, trainer, clip)


def training_steps(net, trainer, batches, ctx):
    """A zero-argument function running one `finetune_step` of `net` on the next of
    `batches` (host `TaskBatch`es, taken in turn)."""
    import itertools
    from ..run.step import trainable_parameters
    turns = zip(itertools.count(1), itertools.cycle(batches))
    params = trainable_parameters(net)

    def step():
        number, batch = next(turns)
        finetune_step(net, params, trainer, batch, [ctx], number)
    return step


def build_step(config, batches, ctx, precision='fp32'):
    """A zero-argument function running one classifier step on the next of `batches`
    (host `TaskBatch`es, taken in turn)."""
    return training_steps(*d2lbert_classifier(config, ctx, precision=precision), batches,
                          ctx)
