"""Ragged arrays: many variable-length rows stored as one flat array.

Row ``i`` of a ragged array is ``flat[offsets[i]:offsets[i + 1]]``. These two
helpers are what lets the pipeline handle millions of sentences with a few
NumPy calls instead of a Python loop per sentence.
"""
import numpy as np


def offsets_from_lengths(lengths):
    """Row lengths -> row offsets: ``[3, 2] -> [0, 3, 5]`` (int64)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def concat_ranges(starts, lengths):
    """``[arange(s, s + n) for s, n in zip(starts, lengths)]``, concatenated.

    >>> concat_ranges(np.array([10, 0]), np.array([3, 2]))
    array([10, 11, 12,  0,  1])
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    row_offsets = offsets_from_lengths(lengths)
    shift = np.asarray(starts, dtype=np.int64) - row_offsets[:-1]
    return np.arange(row_offsets[-1], dtype=np.int64) + np.repeat(shift,
                                                                 lengths)


def row_ids(lengths):
    """The row of every flat element: ``[3, 2] -> [0, 0, 0, 1, 1]``."""
    return np.repeat(np.arange(len(lengths)), lengths)
