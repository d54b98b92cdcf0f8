"""Held-out evaluation of a pretraining run."""
import math

import numpy as onp
from mxnet import np

from ..data.subwords import continuation_ids
from ..run.devices import to_device
from .step import shard_losses


def evaluate(net, data_iter, ctx, max_batches=None):
    """Held-out MLM accuracy and perplexity, NSP accuracy, in inference mode, on the
    batches of `data_iter`'s epoch 0: all of them, or a sample of max_batches drawn at
    random once (`data_iter.sample`: every batch as likely, the same at every call).

    Also reports what a model that ignores its input scores: the accuracy of always
    predicting the most frequent masked token (`mlm_baseline_accuracy`) and that of
    always predicting the more frequent NSP label (`nsp_majority_accuracy`).

    With a vocabulary of word pieces (whole words are masked, see `data.masking`),
    `mlm_accuracy` counts pieces, and `word_mlm_accuracy` the masked words whose every
    piece is predicted right: the number to compare with a vocabulary of words.
    """
    continuation = continuation_ids(data_iter.examples.vocab)
    sums = onp.zeros(4)
    label_counts = onp.zeros(0)
    slots = pairs = next_pairs = words = right_words = 0
    batches = data_iter.batches(0) if max_batches is None else data_iter.sample(max_batches)
    for batch in batches:
        values = shard_losses(net, batch, ctx, with_accuracy=True)
        n_slots, n_pairs = float(batch.mlm_weights.sum()), len(batch.nsp_labels)
        sums += [float(v) * w for v, w in zip(values, (n_slots, n_pairs, n_slots, n_pairs))]
        slots, pairs = slots + n_slots, pairs + n_pairs
        next_pairs += int(onp.sum(batch.nsp_labels))
        labels = batch.mlm_labels[batch.mlm_weights > 0]
        counts = onp.bincount(labels, minlength=len(label_counts))
        label_counts = onp.pad(label_counts, (0, len(counts) - len(label_counts))) + counts
        if continuation is not None:
            correct = masked_predictions(net, batch, ctx) == batch.mlm_labels
            n_words, n_right = whole_words_right(correct, batch.mlm_labels,
                                                 batch.mlm_weights, continuation)
            words, right_words = words + n_words, right_words + n_right
    record = {'mlm_loss': sums[0] / slots,
              'mlm_perplexity': math.exp(min(sums[0] / slots, 50)),
              'nsp_loss': sums[1] / pairs, 'mlm_accuracy': sums[2] / slots,
              'nsp_accuracy': sums[3] / pairs,
              'mlm_baseline_accuracy': float(label_counts.max() / slots),
              'nsp_majority_accuracy': max(next_pairs, pairs - next_pairs) / pairs}
    if continuation is not None:
        record['word_mlm_accuracy'] = right_words / max(words, 1)
    return record


def masked_predictions(net, batch, ctx):
    """int NumPy (batch_size, num_preds): the model's token at every prediction slot."""
    inputs = [to_device(batch[i], ctx, dtype=onp.int32) for i in range(4)]
    _, mlm_logits, _ = net(*inputs)
    return np.argmax(mlm_logits, axis=-1).asnumpy().astype(onp.int64)


def whole_words_right(correct, labels, weights, continuation):
    """(masked words, words with every piece right) of one batch.

    correct, labels, weights: (batch_size, num_preds) NumPy arrays of the prediction
    slots (in increasing position within each row); continuation: bool (vocab_size,).
    A word is a slot whose label does not continue a word (or a row's first slot) with
    the slots of continuing pieces after it (whole words are masked together).
    """
    real = weights > 0
    first_in_row = onp.zeros_like(real)
    first_in_row[:, 0] = True
    starts = (~continuation[labels] | first_in_row)[real]
    if not starts.size:
        return 0, 0
    word_right = onp.logical_and.reduceat(correct[real], onp.flatnonzero(starts))
    return int(starts.sum()), int(word_right.sum())
