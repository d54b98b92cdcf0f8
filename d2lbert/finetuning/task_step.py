"""One fine-tuning step's forward and backward pass, data-parallel over devices.

Every task model (`BERTClassifier`, `BERTTagger`, ...) is called as
`net(tokens, segments, valid_lens)` and has `net.loss(outputs, labels)`, the loss
of each example (batch_size,). As in pretraining (`step.py`), each device's mean
loss is weighted by its share of the batch, so the summed gradients are those of
the whole batch's mean loss however many devices share it; the update is
`step.optimizer_step`.
"""
from mxnet import autograd, np

from ..run.devices import to_device
from ..run.step import split_batch


def device_arrays(batch, ctx):
    """The arrays of a host `TaskBatch` (labels None: no labels) on ctx."""
    return [None if array is None else to_device(array, ctx) for array in batch]


def task_forward_backward(net, batch, ctxs, loss_scale=1.0):
    """Add to the parameters' gradients (grad_req='add') the gradient of the mean loss
    of `batch`, a host `TaskBatch` with labels, split over ctxs, times loss_scale
    (reduced precision: `run.loss_scale.DynamicLossScale`).

    returns: the batch's mean loss, a scalar device array on ctxs[0].
    """
    batch_size = len(batch.valid_lens)
    total = np.zeros((), ctx=ctxs[0])
    for shard, ctx in zip(split_batch(batch, len(ctxs)), ctxs):
        tokens, segments, valid_lens, labels = device_arrays(shard, ctx)
        share = len(shard.valid_lens) / batch_size
        with autograd.record():
            outputs = net(tokens, segments, valid_lens)
            loss = net.loss(outputs, labels).mean() * share
            scaled = loss * loss_scale
        scaled.backward()
        total = total + loss.as_in_ctx(ctxs[0])
    return total


def task_outputs(net, batch, ctx):
    """The model's outputs (e.g. logits) for a host `TaskBatch`, no gradient."""
    tokens, segments, valid_lens, _ = device_arrays(batch, ctx)
    return net(tokens, segments, valid_lens)
