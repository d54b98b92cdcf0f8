"""`BERTAdam`: the Adam variant Google's BERT trains with (weight decay decoupled from
the gradient, no bias correction).

It computes what GluonNLP 0.10's `gluonnlp.optimizer.BERTAdam` computes (Apache 2.0,
as d2lbert), written anew so that d2lbert runs without GluonNLP. It is registered
under the same name, 'bertadam': `gluon.Trainer(params, 'bertadam', {...})` and the
commands' `--optimizer bertadam` make one.
"""
import os

import mxnet as mx


def aggregate_num():
    """How many parameters one update (one operator call) takes: MXNet's setting
    MXNET_OPTIMIZER_AGGREGATION_SIZE (default 4), kept between 1 and 50 as GluonNLP's."""
    return max(1, min(50, int(os.getenv('MXNET_OPTIMIZER_AGGREGATION_SIZE', '4'))))


@mx.optimizer.register
class BERTAdam(mx.optimizer.Optimizer):
    """Adam with decoupled weight decay and without bias correction.

    For each weight w (any shape) with gradient g and moments m and v (w's shape,
    zeros at first), at learning rate lr and weight decay wd (the parameter's wd_mult
    times the optimizer's wd), one step is

        g = clip(rescale_grad * g, -clip_gradient, clip_gradient)   # if clip_gradient
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g ** 2
        w = w - lr * (m / (sqrt(v) + epsilon) + wd * w)

    MXNet's `Adam` instead adds wd * w to g (Adam's scaling then divides the decay
    too) and multiplies lr by sqrt(1 - beta2^t) / (1 - beta1^t) at step t. A step
    whose rescale_grad is not finite (an overflow of float16 loss scaling) changes
    neither w, m nor v.

    >>> trainer = gluon.Trainer(net.collect_params(), 'bertadam',   # doctest: +SKIP
    ...                         {'learning_rate': 1e-4, 'wd': 0.01})
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        if self.multi_precision:
            raise ValueError('BERTAdam updates the weights in their own type: '
                             'no multi_precision (float32 copies of float16 weights)')
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.aggregate_num = aggregate_num()

    def create_state(self, index, weight):
        """The moments (m, v) of weight: zeros of its shape, type and device."""
        return (mx.nd.zeros(weight.shape, weight.context, dtype=weight.dtype),
                mx.nd.zeros(weight.shape, weight.context, dtype=weight.dtype))

    def update(self, index, weight, grad, state):
        """One step of one parameter (index, weight, grad and state of `create_state`)
        or of several in one operator call (lists of them, at most aggregate_num: what
        `mx.optimizer.Updater` hands over)."""
        if not isinstance(index, (tuple, list)):
            index, weight, grad, state = [index], [weight], [grad], [state]
        self._update_count(index)
        clipping = {'clip_gradient': self.clip_gradient} if self.clip_gradient else {}
        # the operator's w - eta * (lr * m / (sqrt(v) + epsilon) + wd * w), with eta = lr, lr = 1
        mx.nd.contrib.multi_adamw_update(
            weight, grad, [m for m, _ in state], [v for _, v in state],
            rescale_grad=self.rescale_grad, lrs=[1.0] * len(weight), wds=self._get_wds(index),
            etas=self._get_lrs(index), out=weight, size=len(weight), beta1=self.beta1,
            beta2=self.beta2, epsilon=self.epsilon, **clipping)
