"""Adam and BERTAdam whose step is one pass over each parameter, all parameters in
one operator (`kernels/adam.cc`).

MXNet's optimizers update one parameter at a time after the gradients were clipped,
and the training loop then zeroes the gradients: five passes over every gradient
(squares and sum, the clipping product, the update, zeroing). On the fine-tuning
benchmark that was 40% of the step, mostly on the 30522 x 256 token embedding. Here
the global norm is one read of the gradients (`d2lbert_sum_squares`) and the update
applies the clipping factor, updates weight and moments and zeroes the gradient in
one pass (`d2lbert_adam_update`), for every parameter of a device in one call (the
optimizer's aggregate_num). Same algorithm, same states and hyper-parameters
as the classes they extend, so a checkpoint's trainer states load into either.

    optimizer.clip_on_update(grads_by_device, max_norm)   # or max_norm=None
    trainer.update(scale)                                  # also zeroes the gradients
"""
import math

import mxnet as mx

from ..util.bert_adam import BERTAdam
from . import kernels

# aggregate_num: how many parameters `mx.optimizer.Updater` hands the optimizer at once
ALL_PARAMETERS = 2 ** 31 - 1


class FusedUpdate:
    """The fused step, for a subclass of an Adam-like optimizer: `decoupled` says how
    weight decay enters (False: added to the gradient as MXNet's Adam; True: to the
    update, as BERTAdam) and `bias_correction` whether lr is scaled by
    sqrt(1 - beta2^t) / (1 - beta1^t) (MXNet's Adam) or not (BERTAdam)."""
    decoupled = False
    bias_correction = True
    clip_scales = None       # {device: (1,) clipping factor}, set by clip_on_update

    def clip_on_update(self, grads_by_device, max_norm):
        """Have the next update scale each device's gradients (a list of lists of
        float32 arrays, one list per device) so their global L2 norm is at most
        max_norm (None: no clipping). Returns the norms before clipping, (1,) arrays."""
        self.clip_scales, norms = {}, []
        for grads in grads_by_device:
            if max_norm is None:
                continue
            legacy = [grad.as_nd_ndarray() for grad in grads]
            norm = mx.nd.sqrt(mx.nd.d2lbert_sum_squares(*legacy, num_arrays=len(legacy)))
            self.clip_scales[legacy[0].context] = mx.nd.minimum(max_norm / (norm + 1e-6), 1.0)
            norms.append(norm)
        return norms

    def __init__(self, **options):
        super().__init__(**options)
        self.aggregate_num = ALL_PARAMETERS

    def update(self, index, weight, grad, state):
        self.update_multi_precision(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        """What `mx.optimizer.Updater` calls: one parameter, or (aggregate_num) all of a
        device's parameters as lists, updated by one `d2lbert_adam_update`."""
        if not isinstance(index, (tuple, list)):
            index, weight, grad, state = [index], [weight], [grad], [state]
        rates, decays = [], []
        for i in index:
            self._update_count(i)
            lr = self._get_lr(i)
            if self.bias_correction:
                t = self._index_update_count[i]
                lr *= math.sqrt(1. - self.beta2 ** t) / (1. - self.beta1 ** t)
            rates.append(lr)
            decays.append(self._get_wd(i))
        arrays = [array.as_nd_ndarray() for one in zip(weight, grad, state)
                  for array in (one[0], one[1], *one[2])]
        mx.nd.d2lbert_adam_update(*arrays, self.clip_scale_on(arrays[0].context),
                                  num_params=len(index), lr=numbers(rates),
                                  wd=numbers(decays), rescale=self.rescale_grad,
                                  beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
                                  decoupled=int(self.decoupled))

    def clip_scale_on(self, ctx):
        scales = self.clip_scales or {}
        if ctx not in scales:
            scales[ctx] = mx.nd.ones((1,), ctx=ctx)
            self.clip_scales = scales
        return scales[ctx]

    def __getstate__(self):
        state = super().__getstate__()
        state.pop('clip_scales', None)
        return state


class FusedAdam(FusedUpdate, mx.optimizer.Adam):
    """MXNet's `Adam` (weight decay added to the gradient, bias correction)."""


class FusedBERTAdam(FusedUpdate, BERTAdam):
    """`BERTAdam` (`util.bert_adam`: decoupled weight decay, no bias correction)."""
    decoupled = True
    bias_correction = False


class FusedAdamW(FusedUpdate, BERTAdam):
    """d2lbert's `AdamW` (`run.optimizer`: decoupled weight decay, bias correction)."""
    decoupled = True


def numbers(values):
    """Numbers as an operator attribute: comma-separated, each as Python writes it."""
    return ','.join(repr(float(value)) for value in values)


FUSED_OPTIMIZERS = {'adam': FusedAdam, 'adamw': FusedAdamW, 'bertadam': FusedBERTAdam}


def fused_optimizer(name, **options):
    """The fused variant of optimizer `name` ('adam', 'adamw' or 'bertadam') made with `options`
    (learning_rate, wd, ...), or None if it has none or the kernels can't run."""
    if name not in FUSED_OPTIMIZERS or not kernels.available():
        return None
    return FUSED_OPTIMIZERS[name](**options)
