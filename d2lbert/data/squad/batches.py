"""Padded minibatches of question-answering windows: ``TaskBatch`` es whose labels are
the answers' (start, end) token positions, int32 (batch_size, 2), or None.

They are padded exactly like the other tasks' (:mod:`..tasks.batches`), so the
fine-tuning step (``d2lbert.finetuning.task_step``) runs them unchanged.
"""
import numpy as np

from ..tasks.batches import make_task_batch, training_batches
from ..tasks.encoding import EncodedExample


def window_labels(windows):
    """The labels of windows as int32 (len(windows), 2), or None if they have none."""
    if any(window.label is None for window in windows):
        return None
    return np.array([window.label for window in windows], dtype=np.int32).reshape(-1, 2)


def qa_batch(windows, pad_id=0, seq_len=None):
    """A ``TaskBatch`` of a list of ``QAWindow`` s, padded to seq_len (default: the
    longest)."""
    encoded = [EncodedExample(w.token_ids, w.segments, None) for w in windows]
    return make_task_batch(encoded, pad_id, seq_len)._replace(labels=window_labels(windows))


def qa_batches(windows, batch_size, pad_id=0, seq_len=None):
    """Yield the ``TaskBatch`` es of windows in order, batch_size windows each (the last
    may be smaller): for prediction, row i of the outputs is windows[i]."""
    for start in range(0, len(windows), batch_size):
        yield qa_batch(windows[start:start + batch_size], pad_id, seq_len)


def qa_training_batches(windows, batch_size, epoch, seed, max_len, pad_id=0, start=0):
    """Yield epoch `epoch`'s training batches from batch number `start` on, in the
    order and with the padding of ``tasks.batches.training_batches`` (shuffled by
    (seed, epoch), similar lengths together): each window goes through it with its
    index as label, which is then replaced by the window's (start, end)."""
    indexed = [EncodedExample(w.token_ids, w.segments, i) for i, w in enumerate(windows)]
    for batch in training_batches(indexed, batch_size, epoch, seed, max_len, pad_id, start):
        yield batch._replace(labels=window_labels([windows[i] for i in batch.labels]))
