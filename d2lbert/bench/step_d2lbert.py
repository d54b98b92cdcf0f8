"""One pretraining step of d2lbert, exactly as its trainer (`d2lbert pretrain`) runs it.

`forward_backward` calls the fast path's `pretraining_loss` (forward, masked-LM and
next-sentence losses, the batch packed) under `autograd.record()` and runs the backward
pass, adding into the gradients (grad_req='add'); `optimizer_step` applies Adam and
zeroes them. The model is set up by the function the trainer calls
(`run.setup.prepare_training`). The step is the trainer's usual one, without the
training-accuracy argmax it adds on the steps it logs (every 10th by default).
"""


def d2lbert_model(config, max_len):
    """A d2lbert `BERTModel` (the book's architecture) of the benchmark's size."""
    from ..model import BERTConfig, BERTModel
    return BERTModel.from_config(BERTConfig.d2l(
        config.vocab_size, 'book', num_hiddens=config.num_hiddens,
        ffn_num_hiddens=config.ffn_num_hiddens, num_heads=config.num_heads,
        num_layers=config.num_layers, dropout=config.dropout,
        attention_dropout=config.dropout, max_len=max_len))


def prepare_for_training(net, ctx, lr=1e-4, precision='fp32'):
    """Initialize, then set up as `d2lbert pretrain` does (`run.setup.prepare_training`:
    the fast path, the precision, gradients added, hybridized with static memory and
    shapes, the trainer); D2LBERT_FUSED_KERNELS=0: the book's model. Returns (the model
    to train, its trainer)."""
    from mxnet import init
    from .. import fast
    from ..run.setup import prepare_training
    net.initialize(init.Normal(0.02), ctx=ctx)
    return prepare_training(net, 'adam', lr, precision=precision, fast_path=fast,
                            static_shape=True)


def train_step(net, params, trainer, batch, ctx):
    """forward + both losses + backward + Adam update, on one host batch (params:
    net's `run.step.trainable_parameters`)."""
    from ..pretraining.step import forward_backward
    from ..run.step import optimizer_step
    forward_backward(net, [batch], [ctx], with_accuracy=False)
    optimizer_step(params, trainer, clip=None)


def build_step(config, arrays, ctx, precision='fp32'):
    """A zero-argument function running one training step on `arrays` (the dict of
    `configs.random_batch`) on the MXNet context `ctx`."""
    from ..data import PretrainingBatch
    from ..run.step import trainable_parameters
    net = d2lbert_model(config, max_len=config.seq_len)
    net, trainer = prepare_for_training(net, ctx, precision=precision)
    batch, params = PretrainingBatch(**arrays), trainable_parameters(net)
    return lambda: train_step(net, params, trainer, batch, ctx)
