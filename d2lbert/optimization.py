"""Optimizer, learning-rate schedule and gradient clipping for pretraining."""
import numpy as onp
from mxnet import gluon, np

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
    then update, in three explicit steps (see `DataParallelStep`).
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


def clip_global_norm(grads, max_norm):
    """Scale the gradients of one device so their global L2 norm is at most max_norm.

    Stays on the device (no host sync); returns the norm before clipping (a scalar array).
    """
    total = np.sqrt(sum((g.astype('float32') ** 2).sum() for g in grads))
    scale = np.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        g *= scale.astype(g.dtype)
    return total


class DynamicLossScale:
    """Dynamic loss scaling, for float16 mixed precision (`d2lbert pretrain --amp`).

    Small float16 gradients underflow to 0, so the loss is multiplied by `scale`
    before the backward pass and the update divides the gradients by it. After a
    step whose gradients overflowed (inf or NaN), the update is skipped and the
    scale halved; after `window` good steps in a row it doubles. (MXNet's own
    `amp` LossScaler checks the gradients with a legacy operator that fails on the
    NumPy-interface arrays d2lbert uses.)
    """
    def __init__(self, scale=2.0 ** 16, window=2000, max_scale=2.0 ** 24):
        self.scale, self.window, self.max_scale = scale, window, max_scale
        self._good_steps = 0

    def overflowed(self, grads):
        """Did any of these gradients overflow? Adjusts the scale (one host sync)."""
        total = sum(g.astype('float32').sum() for g in grads)
        if not onp.isfinite(float(total)):
            self.scale, self._good_steps = max(self.scale / 2, 1.0), 0
            return True
        self._good_steps += 1
        if self._good_steps == self.window:
            self.scale, self._good_steps = min(self.scale * 2, self.max_scale), 0
        return False
