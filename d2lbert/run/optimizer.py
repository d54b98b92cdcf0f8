"""Optimizers and the trainer that runs them."""
from mxnet import gluon

# adam: MXNet's Adam (weight decay added to the gradient); bertadam: GluonNLP's
# BERTAdam (decoupled weight decay, as Google's BERT); lamb: MXNet's LAMB
# (layer-wise adaptive rates, for large batches).
OPTIMIZERS = ('adam', 'bertadam', 'lamb')


def no_decay(name):
    """Biases and LayerNorm scales/shifts get no weight decay (as in Google's BERT)."""
    return name.endswith(('bias', 'gamma', 'beta'))


def make_trainer(net, optimizer='adam', lr=1e-3, weight_decay=0.01, kvstore='device',
                 fast_path=None):
    """A Gluon Trainer whose update does not depend on the number of devices.

    `update_on_kvstore=False` lets us all-reduce (sum) the gradients, clip them and
    then update, in three explicit steps (see `step.optimizer_step`). fast_path: the
    fast path that switched net (`d2lbert.fast`, handed in by whoever switched it, see
    `setup.py`), or None; a model on it gets its fused variant of Adam and BERTAdam
    (`fast.optimizer`): the same update, clipping and zeroing in one pass.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f'--optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}')
    params = net.collect_params()
    for name, param in params.items():
        if no_decay(name):
            param.wd_mult = 0.0
    import gluonnlp  # noqa: F401  (registers the 'bertadam' optimizer)
    options = {'learning_rate': lr, 'wd': weight_decay}
    fused = (fast_path.fused_optimizer(optimizer, **options)
             if fast_path is not None and fast_path.is_fast(net) else None)
    if fused is not None:
        return gluon.Trainer(params, fused, kvstore=kvstore, update_on_kvstore=False)
    return gluon.Trainer(params, optimizer, options, kvstore=kvstore,
                         update_on_kvstore=False)


def load_trainer_states(trainer, path):
    """`trainer.load_states(path)`, keeping the trainer's optimizer class.

    The file holds the optimizer it was saved with, fused or not (`make_trainer`):
    both have the same states and settings, so the run goes on with the class it
    chose itself (a run on the book's model can resume a fast run's checkpoint), and
    with its aggregate_num (how many parameters each update call takes), which its
    `Updater` was set up for.
    """
    chosen, aggregate_num = type(trainer.optimizer), trainer.optimizer.aggregate_num
    trainer.load_states(path)
    trainer.optimizer.__class__ = chosen
    trainer.optimizer.aggregate_num = aggregate_num
