"""One data-parallel optimizer step, shared by pretraining (`pretraining.step`) and
fine-tuning (`finetuning.task_step`): a host batch split over the devices, the gradients
summed across them, clipped and applied, the step's random draws seeded.
"""
import mxnet as mx
import numpy as onp
from mxnet import np


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


def trainable_parameters(net):
    """The parameters of net that have gradients (grad_req not 'null'): what
    `optimizer_step` updates. Collected once per run: `net.collect_params()` walks the
    blocks and builds a new dictionary each call (a millisecond of Python at BERT's
    size, time a step does not need to spend)."""
    return [p for p in net.collect_params().values() if p.grad_req != 'null']


def optimizer_step(params, trainer, clip=None, loss_scale=None):
    """Sum gradients across devices, clip their global norm, update, zero them.

    params: the `trainable_parameters` of the model, the trainer's.

    loss_scale: the `DynamicLossScale` whose scale forward_backward multiplied the
    loss by (mixed precision), or None. The gradients are then clipped at
    clip * scale (the true gradient's norm at clip) and divided by the scale in the
    update; if one overflowed, the update is skipped. Returns whether it updated.

    An optimizer that clips in its update says so with a method `clip_on_update(grads,
    max_norm)` (the fast path's fused ones, `d2lbert.fast.optimizer`): it then clips,
    updates and zeroes each gradient in one pass.
    """
    trainer.allreduce_grads()
    scale = 1.0 if loss_scale is None else loss_scale.scale
    skip = loss_scale is not None and loss_scale.overflowed(
        [g for p in params for g in p.list_grad()])
    clip_on_update = getattr(trainer.optimizer, 'clip_on_update', None)
    if clip_on_update is not None and not skip:  # a fused optimizer (`d2lbert.fast`)
        clip_on_update([[p.grad(ctx) for p in params] for ctx in params[0].list_ctx()],
                       clip * scale if clip else None)
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
