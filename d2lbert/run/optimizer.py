"""Optimizers and the trainer that runs them."""
import math

import mxnet as mx
from mxnet import gluon

from ..util.bert_adam import BERTAdam

@mx.optimizer.register
class AdamW(BERTAdam):
    """BERTAdam with Adam's bias correction: step t's learning rate is scaled by
    sqrt(1 - beta2^t) / (1 - beta1^t), as MXNet's Adam scales it (the decay term too,
    as the two share BERTAdam's rate). Without the correction, BERTAdam's first steps
    are several times the learning rate; with the decay added to the gradient (MXNet's
    Adam), a word absent from the batches still moves by about the learning rate each
    step, towards 0: Adam divides the tiny decay gradient by its own tiny size."""

    def _get_lrs(self, indices):
        counts = [self._index_update_count[index] for index in indices]
        return [lr * math.sqrt(1. - self.beta2 ** t) / (1. - self.beta1 ** t)
                for lr, t in zip(super()._get_lrs(indices), counts)]


# --optimizer: its class. adam: MXNet's Adam (weight decay added to the gradient);
# bertadam: `util.bert_adam`'s BERTAdam (decoupled weight decay, as Google's BERT, no
# bias correction); adamw: both (decoupled weight decay and Adam's bias correction, as
# Loshchilov & Hutter's AdamW and PyTorch's); lamb: MXNet's LAMB (layer-wise adaptive
# rates, for large batches).
OPTIMIZERS = {'adam': mx.optimizer.Adam, 'adamw': AdamW, 'bertadam': BERTAdam,
              'lamb': mx.optimizer.LAMB}


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
    (`fast.optimizer`): the same update, clipping and zeroing in one pass. The
    optimizer is made from its class in OPTIMIZERS, not by name from MXNet's registry,
    where GluonNLP, imported later, puts its own 'bertadam'.
    The trainer holds the parameters that have gradients (grad_req not 'null'): the
    others are never updated, not even decayed.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f'--optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}')
    params = {name: param for name, param in net.collect_params().items()
              if param.grad_req != 'null'}
    for name, param in params.items():
        if no_decay(name):
            param.wd_mult = 0.0
    options = {'learning_rate': lr, 'wd': weight_decay}
    fused = (fast_path.fused_optimizer(optimizer, **options)
             if fast_path is not None and fast_path.is_fast(net) else None)
    chosen = OPTIMIZERS[optimizer](**options) if fused is None else fused
    return gluon.Trainer(params, chosen, kvstore=kvstore, update_on_kvstore=False)


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
