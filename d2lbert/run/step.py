"""One data-parallel pretraining step: forward, backward, clipping, update.

The gradient of a step must not depend on how many devices share the batch (the
book's loop sums per-device mean losses, so its update grows with the device
count). Each device's loss is weighted by its share of the batch's prediction
slots (MLM) and sentence pairs (NSP); the Trainer then sums the gradients across
devices, which gives exactly the gradient of the whole batch's mean loss. (In a job of
several processes the shares are of the whole job's step, and the kvstore also sums
over the processes: see `distributed.py`.)
"""
import mxnet as mx
import numpy as onp
from mxnet import autograd, np

from ..util.checks import skip_value_checks
from .accelerated import is_fast_model, is_fused_optimizer
from .devices import to_device


def split_batch(batch, num_parts):
    """Split a host batch (a `PretrainingBatch` or `TaskBatch`: a named tuple of NumPy
    arrays, batch first, or None) into num_parts shards of the same type."""
    batch_size = len(batch[0])
    if batch_size < num_parts:
        raise ValueError(f'batch of {batch_size} examples cannot be split over '
                         f'{num_parts} devices')
    bounds = onp.linspace(0, batch_size, num_parts + 1).astype(int)
    return [type(batch)(*(None if array is None else array[lo:hi] for array in batch))
            for lo, hi in zip(bounds, bounds[1:])]


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
    """`net.pretraining_loss` of a host `PretrainingBatch` copied to ctx. A model on
    the fast path (`d2lbert.fast`) also gets the batch's packing indices, computed on
    the host with the batch: the step never copies from the device."""
    arrays = [to_device(array, ctx) for array in shard]
    options = {'with_accuracy': with_accuracy}
    if is_fast_model(net):
        token_index = shard.token_index()
        if token_index is not None:
            options['token_index'] = to_device(token_index, ctx)
            options['slot_index'] = to_device(shard.slot_index(), ctx)
    with skip_value_checks():  # the data pipeline's batches are valid
        return net.pretraining_loss(*arrays, **options)


def optimizer_step(net, trainer, clip=None, loss_scale=None):
    """Sum gradients across devices, clip their global norm, update, zero them.

    loss_scale: the `DynamicLossScale` whose scale forward_backward multiplied the
    loss by (mixed precision), or None. The gradients are then clipped at
    clip * scale (the true gradient's norm at clip) and divided by the scale in the
    update; if one overflowed, the update is skipped. Returns whether it updated.
    """
    trainer.allreduce_grads()
    params = [p for p in net.collect_params().values() if p.grad_req != 'null']
    scale = 1.0 if loss_scale is None else loss_scale.scale
    skip = loss_scale is not None and loss_scale.overflowed(
        [g for p in params for g in p.list_grad()])
    if is_fused_optimizer(trainer.optimizer) and not skip:
        grads = [[p.grad(ctx) for p in params] for ctx in params[0].list_ctx()]
        trainer.optimizer.clip_on_update(grads, clip * scale if clip else None)
        trainer.update(scale)  # clips, updates and zeroes the gradients in one pass
        return True
    if clip and not skip:
        for ctx in params[0].list_ctx():
            clip_global_norm([p.grad(ctx) for p in params], clip * scale)
    if not skip:
        trainer.update(scale)  # rescales the gradients by 1 / scale
    for param in params:
        for grad in param.list_grad():
            grad[:] = 0
    return not skip


def seed_step(seed, step, worker=0):
    """Re-seed MXNet's RNG (dropout) from (seed, step), so a resumed run draws the same
    dropout masks as an uninterrupted one; the workers of a job (worker: the rank, see
    `distributed.py`) each draw their own."""
    mx.random.seed((seed * 1_000_003 + step + worker * 1_000_000_007) % (2 ** 31))


def clip_global_norm(grads, max_norm):
    """Scale the gradients of one device so their global L2 norm is at most max_norm.

    Stays on the device (no host sync); returns the norm before clipping (a scalar array).
    Each squared norm is a dot product of the flattened gradient with itself: on a CPU
    about 5 times as fast as `(g ** 2).sum()` and as exact (MXNet's `multi_sum_sq`, faster
    still, was 1% off on a 30522 x 256 gradient).
    """
    flat = [g.reshape(-1).astype('float32', copy=False) for g in grads]
    total = np.sqrt(sum(np.dot(f, f) for f in flat))
    scale = np.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        g *= scale.astype(g.dtype)
    return total
