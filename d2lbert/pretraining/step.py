"""One data-parallel pretraining step's forward and backward pass (the update is
`run.step.optimizer_step`, which fine-tuning shares).

The gradient of a step must not depend on how many devices share the batch (the
book's loop sums per-device mean losses, so its update grows with the device
count). Each device's loss is weighted by its share of the batch's prediction
slots (MLM) and sentence pairs (NSP); the Trainer then sums the gradients across
devices, which gives exactly the gradient of the whole batch's mean loss. (In a job of
several processes the shares are of the whole job's step, and the kvstore also sums
over the processes: see `distributed.py`.)
"""
from mxnet import autograd, np

from ..run.devices import to_device
from ..run.step import split_batch


def forward_backward(net, batches, ctxs, with_accuracy=True, loss_scale=1.0,
                     step_totals=None, nsp_weight=1.0):
    """Add to the parameters' gradients (grad_req='add') the gradient of the mean pretraining
    loss over `batches` (host batches that together form one optimizer step), times
    loss_scale (mixed precision: `loss_scale.DynamicLossScale`). The loss is the MLM
    loss plus nsp_weight times the NSP loss (0: the masked LM alone; the NSP values
    are still computed and returned).

    step_totals: (prediction slots, sentence pairs) of the whole step when `batches` are only
    this worker's part of it (`distributed.Worker.step_totals`); the gradient and the
    returned values are then this worker's part of the sums over the step.

    returns: device arrays on ctxs[0]: (mlm_loss, nsp_loss, mlm_accuracy, nsp_accuracy),
    each the average over all real prediction slots or sentence pairs of the step;
    with_accuracy=False (faster: no argmax over the logits) returns the two losses.
    """
    if step_totals is None:
        step_totals = (sum(float(batch.mlm_weights.sum()) for batch in batches),
                       sum(len(batch.nsp_labels) for batch in batches))
    total_slots, total_pairs = max(step_totals[0], 1.0), step_totals[1]
    totals = [np.zeros((), ctx=ctxs[0]) for _ in range(4 if with_accuracy else 2)]
    for batch in batches:
        for shard, ctx in zip(split_batch(batch, len(ctxs)), ctxs):
            slot_share = float(shard.mlm_weights.sum()) / total_slots
            pair_share = len(shard.nsp_labels) / total_pairs
            with autograd.record():
                values = shard_losses(net, shard, ctx, with_accuracy)
                loss = (values[0] * slot_share
                        + values[1] * (nsp_weight * pair_share)) * loss_scale
            loss.backward()
            for i, (value, share) in enumerate(zip(
                    values, (slot_share, pair_share, slot_share, pair_share))):
                totals[i] = totals[i] + value.as_in_ctx(ctxs[0]) * share
    return totals


def shard_losses(net, shard, ctx, with_accuracy):
    """`net.pretraining_loss` of a host `PretrainingBatch` copied to ctx. A model whose
    loss takes more inputs says which with a method `packing_inputs(batch)` ({name: host
    array}; the fast path's `FastBERTModel`: the batch's packing indices, computed on the
    host with the batch, so the step never copies from the device)."""
    arrays = [to_device(array, ctx) for array in shard]
    options = {'with_accuracy': with_accuracy}
    packing_inputs = getattr(net, 'packing_inputs', None)
    if packing_inputs is not None:
        options.update((name, to_device(array, ctx))
                       for name, array in packing_inputs(shard).items())
    return net.pretraining_loss(*arrays, **options)
