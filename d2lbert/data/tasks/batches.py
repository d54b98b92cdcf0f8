"""Padded minibatches of encoded task examples, as host NumPy arrays.

A batch is padded to its longest example (or to a fixed ``seq_len``, which
gives a hybridized model a single input shape): token id ``pad_id``,
segment 0, and for tagging label :data:`.encoding.IGNORE_LABEL`.

For training, :func:`training_batches` puts examples of similar lengths
together (padding costs compute) and rounds the padded length up to a
multiple of 8 (a hybridized model compiles each new shape once).
For predictions, :func:`length_sorted_batches` sorts them all by length and
says where each example came from, so that the results go back in order.
"""
from typing import NamedTuple, Optional

import numpy as np

from .encoding import IGNORE_LABEL


class TaskBatch(NamedTuple):
    """One minibatch of host NumPy arrays.

    tokens: int32 (batch_size, seq_len), padded with pad_id.
    segments: int32 (batch_size, seq_len), padded with 0.
    valid_lens: int32 (batch_size,), the unpadded lengths.
    labels: int32 (batch_size,) class ids, float32 (batch_size,) scores,
        int32 (batch_size, seq_len) tag ids (IGNORE_LABEL where no word
        starts and in padding), or None if the examples have no labels.
    """
    tokens: np.ndarray
    segments: np.ndarray
    valid_lens: np.ndarray
    labels: Optional[np.ndarray]


def make_task_batch(encoded, pad_id=0, seq_len=None):
    """Pad a list of :class:`.encoding.EncodedExample` into a
    :class:`TaskBatch` of ``seq_len`` (default: the longest) columns."""
    if not encoded:
        raise ValueError('a batch needs at least one example')
    valid_lens = np.array([e.valid_len for e in encoded], dtype=np.int32)
    seq_len = int(valid_lens.max()) if seq_len is None else seq_len
    if valid_lens.max() > seq_len:
        raise ValueError(f'an example has {valid_lens.max()} tokens, more '
                         f'than seq_len={seq_len}')
    tokens = np.full((len(encoded), seq_len), pad_id, dtype=np.int32)
    segments = np.zeros((len(encoded), seq_len), dtype=np.int32)
    for row, example in enumerate(encoded):
        tokens[row, :example.valid_len] = example.token_ids
        segments[row, :example.valid_len] = example.segments
    return TaskBatch(tokens, segments, valid_lens,
                     batch_labels([e.label for e in encoded], seq_len))


def batch_labels(labels, seq_len):
    """The labels of a batch as one array (see :class:`TaskBatch`)."""
    kinds = {type(label) for label in labels}
    if len(kinds) != 1:
        raise ValueError(f'a batch mixes labels of types '
                         f'{sorted(kind.__name__ for kind in kinds)}')
    kind = kinds.pop()
    if kind is type(None):
        return None
    if kind is float:
        return np.array(labels, dtype=np.float32)
    if kind is list:
        padded = np.full((len(labels), seq_len), IGNORE_LABEL, dtype=np.int32)
        for row, piece_labels in enumerate(labels):
            padded[row, :len(piece_labels)] = piece_labels
        return padded
    if kind is int:
        return np.array(labels, dtype=np.int32)
    raise TypeError(f'labels must be int, float, list or None, not {kind}')


def task_batches(encoded, batch_size, pad_id=0, shuffle=False, seed=0,
                 seq_len=None):
    """Yield the :class:`TaskBatch` es of ``encoded`` (a list of
    :class:`.encoding.EncodedExample`), ``batch_size`` examples each (the
    last batch may be smaller), in order or shuffled with ``seed``."""
    order = np.arange(len(encoded))
    if shuffle:
        np.random.default_rng(seed).shuffle(order)
    for start in range(0, len(order), batch_size):
        batch = [encoded[i] for i in order[start:start + batch_size]]
        yield make_task_batch(batch, pad_id, seq_len)


PAD_TO_MULTIPLE = 8
BUCKET_BATCHES = 50  # examples are sorted by length within windows of 50 batches


def padded_length(encoded, max_len):
    """The longest of the examples rounded up to a multiple of PAD_TO_MULTIPLE, but
    not beyond max_len (nor below the longest)."""
    longest = max(example.valid_len for example in encoded)
    rounded = -(-longest // PAD_TO_MULTIPLE) * PAD_TO_MULTIPLE
    return max(min(rounded, max_len), longest)


def training_batches(encoded, batch_size, epoch, seed, max_len, pad_id=0, start=0):
    """Yield epoch `epoch`'s :class:`TaskBatch` es from batch number `start` on.

    The order depends only on (seed, epoch), so a resumed run sees the same
    batches: the examples are shuffled, sorted by length within windows of
    BUCKET_BATCHES batches, cut into batches (the last may be smaller), and the
    batches shuffled; each is padded to :func:`padded_length`.
    """
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(encoded))
    window = batch_size * BUCKET_BATCHES
    lengths = np.array([example.valid_len for example in encoded])
    for lo in range(0, len(order), window):
        part = order[lo:lo + window]
        order[lo:lo + window] = part[np.argsort(lengths[part], kind='stable')]
    batches = [order[lo:lo + batch_size] for lo in range(0, len(order), batch_size)]
    for index in rng.permutation(len(batches))[start:]:
        chunk = [encoded[i] for i in batches[index]]
        yield make_task_batch(chunk, pad_id, padded_length(chunk, max_len))


def length_sorted_batches(encoded, batch_size, pad_id=0):
    """Yield ``(indices, batch)``: the examples of ``encoded`` (a list of
    :class:`.encoding.EncodedExample`) sorted by length, longest first, cut
    into :class:`TaskBatch` es of ``batch_size`` (the last may be smaller),
    each padded to its own longest example; ``indices`` (int array,
    (len(batch),)) are the batch's examples' positions in ``encoded``.

    In file order a batch of SST-2 sentences is padded to its longest, about
    three times its mean (a third of the work is real); sorted, the examples
    of a batch are nearly equally long. Consecutive batches mostly share a
    shape, which a hybridized model reuses. Longest first: the memory a
    hybridized graph plans for the first batch fits every later one.
    """
    lengths = np.array([example.valid_len for example in encoded])
    order = np.argsort(-lengths, kind='stable')
    for start in range(0, len(order), batch_size):
        indices = order[start:start + batch_size]
        yield indices, make_task_batch([encoded[i] for i in indices], pad_id)
