"""Packing, the host side: where a batch's valid tokens and real prediction slots
are, computed with the batch's other NumPy arrays (`PretrainingBatch.token_index`,
`PretrainingBatch.slot_index`), so that a training step needs no copy from the
device. The model's side is `FusedBERTEncoder.packed` (`d2lbert.fast.encoder`) and
`d2lbert.fast.objective`.

Packing means computing on the valid tokens of a batch only, not on its padding.

A padded batch (batch_size, seq_len) spends the same work on padding as on real
tokens; with lengths spread between seq_len / 2 and seq_len, a quarter of it. The
encoder can instead run on the valid tokens one after another ("packed": example b's
valid_lens[b] tokens, then the next example's), a (num_rows, num_hiddens) matrix:
dense layers, LayerNorm and dropout treat rows independently, and d2lbert's attention
kernel knows from valid_lens which rows form which example.

The masked-LM head, the largest part of a step, likewise runs on the real prediction
slots only: a batch pads every example's slots to its bucket's most predictions
(`batches.max_predictions`), and on WikiText-2 23% of them are padding, which
the loss weighs 0 but the output layer would compute anyway.

A hybridized graph plans its memory for each new input shape (the first batch of
a shape costs a one-time setup), so the number of rows is rounded up to a multiple
of 1/32 of batch_size * seq_len, and the number of slots to one of 1/32 of
batch_size * num_preds: a few shapes per batch shape. (d2lbert's batches come
largest first, so that memory is planned for the largest shape at once.)
The counts are a function of the batch alone: the results must not depend
on what ran before (a resumed run computes exactly what an uninterrupted one does;
oneDNN's weight gradients differ in rounding with the number of rows).
"""
import numpy as onp

ROW_GRANULARITY = 32   # rows rounded up to a multiple of (batch_size * seq_len) / 32


def rounded_up(count, padded):
    """count rounded up to a multiple of ceil(padded / ROW_GRANULARITY), at most padded."""
    granule = -(-padded // ROW_GRANULARITY)
    return min(padded, -(-count // granule) * granule)


def packed_rows(valid_lens, seq_len):
    """The number of rows of the packed batch: sum(valid_lens), rounded up."""
    return rounded_up(int(valid_lens.sum()), len(valid_lens) * seq_len)


def packable(valid_lens, pred_positions):
    """Can this batch be packed? Not if a prediction slot, even a padding one, points
    at padding: packed, it would read another example's token, or past the last row.
    (d2lbert's batches put padding slots at position 0.) Host NumPy arrays."""
    return bool((onp.asarray(pred_positions) < onp.asarray(valid_lens)[:, None]).all())


def token_index(valid_lens, seq_len):
    """Where each packed row comes from.

    valid_lens: (batch_size,) host NumPy array
    returns: int32 (num_rows,), the flat index b * seq_len + t of each packed row's
      token: the valid tokens of example 0, then of example 1, ...; then 0 for the
      rows that only round num_rows up
    """
    valid_lens = onp.asarray(valid_lens).astype(onp.int64)
    index = onp.zeros(packed_rows(valid_lens, seq_len), dtype=onp.int32)
    flat = onp.flatnonzero(onp.arange(seq_len)[None, :] < valid_lens[:, None])
    index[:len(flat)] = flat
    return index


def slot_index(mlm_weights):
    """Which prediction slots the packed masked-LM head computes.

    mlm_weights: (batch_size, num_preds) host NumPy array, 0 in padding slots
    returns: int32 (num_slots,), the flat index b * num_preds + j of every real slot
      (weight not 0), in order; then, for the entries that only round the count up
      (at least one entry), the index of a padding slot, which weighs nothing
    """
    weights = onp.asarray(mlm_weights).reshape(-1)
    real = onp.flatnonzero(weights != 0)
    index = onp.zeros(rounded_up(max(len(real), 1), len(weights)), dtype=onp.int32)
    index[:len(real)] = real
    if len(index) > len(real):
        index[len(real):] = onp.flatnonzero(weights == 0)[0]
    return index
