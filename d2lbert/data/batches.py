"""From examples to padded minibatches: bucketing, padding, the iterator.

The book pads every example to ``max_len`` and every prediction list to
``round(0.15 * max_len)``. Here a batch is padded only as far as it needs:

* **Length buckets.** Sequence lengths are rounded up to a few fixed bucket
  lengths, multiples of ``bucket_step`` (16 by default) capped by
  ``max_len``: for ``max_len=64`` the buckets are 16, 32, 48 and 64. The
  sampler puts examples of one bucket together, so a batch is padded only
  to its bucket length. A hybridized model (``static_shape=True``) then sees
  one token shape per bucket plus, at most, one for the last, partial batch.
* **Prediction slots.** ``pred_positions`` is padded to
  :func:`max_predictions` of the batch's bucket length, the most
  predictions any sequence that long can have, so the prediction shape is a
  function of the token shape and adds no new shapes.

Padding uses id 0 (``<pad>``) in tokens and segments; padded prediction slots
have position 0, label 0 and weight 0 (so they drop out of the weighted MLM
loss).

gluonnlp's ``FixedBucketSampler`` groups by length too, but it shuffles with
NumPy's global random state; the sampler here draws from a generator seeded
by ``(seed, epoch)``, which makes every epoch reproducible and resumable from
any batch without replaying the earlier ones.
"""
import collections

import numpy as np

from .masking import num_predictions
from .packing import packable, slot_index, token_index
from .ragged import concat_ranges, row_ids


class PretrainingBatch(collections.namedtuple('PretrainingBatch', [
        'tokens', 'segments', 'valid_lens', 'pred_positions', 'mlm_weights',
        'mlm_labels', 'nsp_labels'])):
    """One minibatch, the book's 7-tuple, of host NumPy arrays.

    tokens: int32 (batch_size, seq_len), padded with 0.
    segments: int32 (batch_size, seq_len), 0 for <cls> a <sep>, 1 for b <sep>,
        0 for padding.
    valid_lens: int32 (batch_size,), the unpadded lengths.
    pred_positions: int32 (batch_size, num_preds), 0 in padding slots.
    mlm_weights: float32 (batch_size, num_preds), 1 real slot, 0 padding.
    mlm_labels: int32 (batch_size, num_preds), original tokens, 0 in padding.
    nsp_labels: int32 (batch_size,), 1 if b is the next sentence of a.
    """
    __slots__ = ()

    def token_index(self):
        """int32 (num_rows,): the flat index of every valid token in ``tokens``,
        rows rounded up (:func:`.packing.token_index`); None if a prediction
        slot points at padding, when the batch cannot be packed."""
        if not packable(self.valid_lens, self.pred_positions):
            return None
        return token_index(self.valid_lens, self.tokens.shape[1])

    def slot_index(self):
        """int32 (num_slots,): the flat index of every real prediction slot, the
        count rounded up (:func:`.packing.slot_index`), for a packed step."""
        return slot_index(self.mlm_weights)


def bucket_lengths(max_len, step=16):
    """``[step, 2 * step, ...]`` below ``max_len``, then ``max_len``."""
    return np.array(list(range(step, max_len, step)) + [max_len])


def max_predictions(seq_len, mask_prob=0.15):
    """The most MLM predictions a sequence of ``seq_len`` tokens can have.

    At most ``seq_len - 3`` tokens are not ``<cls>``/``<sep>``, and the
    number of predictions never decreases with the number of candidates.
    """
    return int(num_predictions(seq_len - 3, mask_prob))


def make_batch(examples, indices, seq_len, num_slots, masking_rng=None):
    """Gather and pad examples ``indices`` into a :class:`PretrainingBatch`.

    Args:
        examples: a :class:`.examples.PretrainingExamples`.
        indices: int array (batch_size,).
        seq_len: the padded sequence length, >= every example's length.
        num_slots: the padded number of prediction slots.
        masking_rng: a ``numpy.random.Generator``, used (and required) only
            when the examples use dynamic masking (see
            :meth:`.examples.PretrainingExamples.masked_tokens`).
    """
    lengths = examples.lengths[indices]
    token_ids, num_preds, pred_positions, labels = examples.masked_tokens(
        indices, masking_rng)

    batch_size = len(indices)
    tokens = np.zeros((batch_size, seq_len), dtype=np.int32)
    tokens[row_ids(lengths), concat_ranges(np.zeros_like(lengths),
                                           lengths)] = token_ids
    column = np.arange(seq_len)
    first_segment_lengths = examples.first_segment_lengths[indices]
    segments = ((column >= first_segment_lengths[:, None])
                & (column < lengths[:, None])).astype(np.int32)

    slot_rows = row_ids(num_preds)
    slot_columns = concat_ranges(np.zeros_like(num_preds), num_preds)
    padded_positions = np.zeros((batch_size, num_slots), dtype=np.int32)
    padded_positions[slot_rows, slot_columns] = pred_positions
    mlm_weights = np.zeros((batch_size, num_slots), dtype=np.float32)
    mlm_weights[slot_rows, slot_columns] = 1
    mlm_labels = np.zeros((batch_size, num_slots), dtype=np.int32)
    mlm_labels[slot_rows, slot_columns] = labels
    return PretrainingBatch(
        tokens, segments, np.asarray(lengths, dtype=np.int32),
        padded_positions, mlm_weights, mlm_labels,
        np.asarray(examples.nsp_labels[indices], dtype=np.int32))


def plan_epoch(bucket_of, batch_size, rng, shuffle=True, last_batch='keep',
               lengths=None):
    """Split example indices into batches of one bucket each, for one epoch.

    Within each bucket the examples are shuffled and cut into full batches;
    the leftovers of all buckets are pooled, in bucket order, into the
    remaining batches (so there is at most one partial batch, and at most
    ``ceil(n / batch_size)`` batches as with the book's DataLoader). The
    batch order is then shuffled, except that, given the examples'
    ``lengths``, the batch with the most tokens goes first: a hybridized model
    plans its memory for the largest batch at once, and the others reuse that
    memory (growing it later costs fresh memory, slow to touch the first time;
    a batch too large for the device fails at once, not mid-epoch). With
    ``last_batch='discard'`` the partial batch is dropped.

    Returns a list of int32 index arrays (int64 beyond 2**31 examples).
    """
    order = rng.permutation(len(bucket_of)) if shuffle else np.arange(
        len(bucket_of))
    order = order[np.argsort(bucket_of[order], kind='stable')].astype(
        np.int32 if len(order) <= np.iinfo(np.int32).max else np.int64)  # half the memory
    bucket_sizes = np.bincount(bucket_of)
    batches, leftovers, start = [], [], 0
    for size in bucket_sizes:
        members, start = order[start:start + size], start + size
        num_full = size // batch_size * batch_size
        batches += [members[i:i + batch_size]
                    for i in range(0, num_full, batch_size)]
        leftovers.append(members[num_full:])
    leftovers = np.concatenate(leftovers)
    for start in range(0, len(leftovers), batch_size):
        batch = leftovers[start:start + batch_size]
        if len(batch) == batch_size or last_batch == 'keep':
            batches.append(batch)
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    if lengths is not None and batches:
        largest = int(np.argmax([lengths[batch].sum() for batch in batches]))
        batches.insert(0, batches.pop(largest))
    return batches


class PretrainingBatches:
    """The ``data_iter`` of :func:`.loader.load_data_wiki`.

    * ``len(data_iter)``: number of batches per epoch (the same every epoch).
    * ``data_iter.batches(epoch, start=0)``: that epoch's batches from index
      ``start`` on, as :class:`PretrainingBatch` tuples of host NumPy arrays.
      The order (and, with dynamic masking, the masks) is a function of
      ``(seed, epoch)`` only; starting at ``start`` costs nothing for the
      skipped batches, and yields exactly the tail of ``batches(epoch)``.
    * ``for batch in data_iter``: like the book, tuples of ``mxnet.np``
      arrays on the CPU. The first pass over ``data_iter`` is epoch 0, the
      next pass epoch 1, and so on, so a book-style training loop sees a
      fresh shuffle each pass (as it would with a shuffling DataLoader).
    """

    def __init__(self, examples, batch_size, shuffle=True, bucket_step=16,
                 last_batch='keep'):
        if batch_size < 1:
            raise ValueError(f'batch_size must be >= 1, got {batch_size!r}')
        if last_batch not in ('keep', 'discard'):
            raise ValueError(f"last_batch must be 'keep' or 'discard', got "
                             f'{last_batch!r}')
        self.examples, self.batch_size = examples, batch_size
        self.shuffle, self.last_batch = shuffle, last_batch
        self.seed = examples.options.seed
        self.bucket_lengths = bucket_lengths(examples.options.max_len,
                                             bucket_step)
        self._bucket_of = np.searchsorted(self.bucket_lengths, examples.lengths).astype(
            np.min_scalar_type(len(self.bucket_lengths)))  # one byte per example
        self._num_batches = len(self.plan(0))
        self._passes = 0

    def plan(self, epoch):
        """The example indices of every batch of ``epoch``."""
        rng = np.random.default_rng([self.seed, 3, epoch])
        return plan_epoch(self._bucket_of, self.batch_size, rng,
                          self.shuffle, self.last_batch, self.examples.lengths)

    def __len__(self):
        return self._num_batches

    def batches(self, epoch=0, start=0, every=1):
        """Yield the batches of ``epoch`` from batch ``start`` on (host NumPy);
        ``every=k`` yields only batches ``start, start + k, ...`` (one worker's
        share, see ``train/distributed.py``) without building the others."""
        plan = self.plan(epoch)
        yield from self.planned_batches(epoch, plan, range(start, len(plan), every))

    def sample(self, num_batches, epoch=0):
        """Yield ``num_batches`` batches of ``epoch`` (all of them if it has no more)
        drawn at random, every batch as likely as any other, in their order in the
        epoch: the same sample at every call (it is seeded by the seed and epoch).
        A batch is what ``batches(epoch)`` yields at its place, masks included."""
        plan = self.plan(epoch)
        rng = np.random.default_rng([self.seed, 4, epoch])
        chosen = rng.choice(len(plan), min(num_batches, len(plan)), replace=False)
        yield from self.planned_batches(epoch, plan, np.sort(chosen))

    def planned_batches(self, epoch, plan, places):
        """Yield the batches at ``places`` (ints) of ``plan``, the plan of ``epoch``."""
        mask_prob = self.examples.options.mask_prob
        for index in places:
            indices = plan[index]
            seq_len = int(self.bucket_lengths[self._bucket_of[indices].max()])
            masking_rng = np.random.default_rng([self.seed, 2, epoch, index])
            yield make_batch(self.examples, indices, seq_len,
                             max_predictions(seq_len, mask_prob), masking_rng)

    def __iter__(self):
        from mxnet import np as mxnp
        epoch, self._passes = self._passes, self._passes + 1
        for batch in self.batches(epoch):
            yield tuple(mxnp.array(array, dtype=array.dtype)
                        for array in batch)
