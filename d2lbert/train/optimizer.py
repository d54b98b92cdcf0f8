"""Optimizer and learning-rate schedule."""
from mxnet import gluon

# adam: MXNet's Adam (weight decay added to the gradient); bertadam: GluonNLP's
# BERTAdam (decoupled weight decay, as Google's BERT); lamb: MXNet's LAMB
# (layer-wise adaptive rates, for large batches).
OPTIMIZERS = ('adam', 'bertadam', 'lamb')


def no_decay(name):
    """Biases and LayerNorm scales/shifts get no weight decay (as in Google's BERT)."""
    return name.endswith(('bias', 'gamma', 'beta'))


def make_trainer(net, optimizer='adam', lr=1e-3, weight_decay=0.01, kvstore='device'):
    """A Gluon Trainer whose update does not depend on the number of devices.

    `update_on_kvstore=False` lets us all-reduce (sum) the gradients, clip them and
    then update, in three explicit steps (see `step.optimizer_step`).
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f'--optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}')
    params = net.collect_params()
    for name, param in params.items():
        if no_decay(name):
            param.wd_mult = 0.0
    import gluonnlp  # noqa: F401  (registers the 'bertadam' optimizer)
    return gluon.Trainer(params, optimizer,
                         {'learning_rate': lr, 'wd': weight_decay},
                         kvstore=kvstore, update_on_kvstore=False)


def learning_rate(step, base_lr, warmup_steps, total_steps):
    """Linear warmup to base_lr over warmup_steps, then linear decay to 0 at total_steps.

    step counts from 1 (the first update).
    """
    if warmup_steps and step <= warmup_steps:
        return base_lr * step / warmup_steps
    remaining = max(total_steps - step, 0) / max(total_steps - warmup_steps, 1)
    return base_lr * remaining
