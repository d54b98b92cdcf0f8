"""Held-out evaluation of a pretraining run."""
import math

import numpy as onp

from ..run.step import shard_losses


def evaluate(net, data_iter, ctx, max_batches=None):
    """Held-out MLM accuracy and perplexity, NSP accuracy, in inference mode.

    Also reports what a model that ignores its input scores: the accuracy of always
    predicting the most frequent masked token (`mlm_baseline_accuracy`) and that of
    always predicting the more frequent NSP label (`nsp_majority_accuracy`).
    """
    sums = onp.zeros(4)
    label_counts = onp.zeros(0)
    slots = pairs = next_pairs = 0
    for i, batch in enumerate(data_iter.batches(0)):
        if max_batches is not None and i >= max_batches:
            break
        values = shard_losses(net, batch, ctx, with_accuracy=True)
        n_slots, n_pairs = float(batch.mlm_weights.sum()), len(batch.nsp_labels)
        sums += [float(v) * w for v, w in zip(values, (n_slots, n_pairs, n_slots, n_pairs))]
        slots, pairs = slots + n_slots, pairs + n_pairs
        next_pairs += int(onp.sum(batch.nsp_labels))
        labels = batch.mlm_labels[batch.mlm_weights > 0]
        counts = onp.bincount(labels, minlength=len(label_counts))
        label_counts = onp.pad(label_counts, (0, len(counts) - len(label_counts))) + counts
    return {'mlm_loss': sums[0] / slots, 'mlm_perplexity': math.exp(min(sums[0] / slots, 50)),
            'nsp_loss': sums[1] / pairs, 'mlm_accuracy': sums[2] / slots,
            'nsp_accuracy': sums[3] / pairs,
            'mlm_baseline_accuracy': float(label_counts.max() / slots),
            'nsp_majority_accuracy': max(next_pairs, pairs - next_pairs) / pairs}
