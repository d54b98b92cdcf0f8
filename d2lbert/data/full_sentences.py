"""RoBERTa's FULL-SENTENCES inputs, for the masked LM alone (``--objective mlm``).

Next sentence prediction needs sentence pairs; the masked LM does not. Liu et al.
(2019, RoBERTa, section 4.2) pack each input with consecutive texts up to the full
length instead, crossing document boundaries::

    <cls> text 1 <sep> text 2 <sep> text 3 <sep>     (at most max_len tokens)

so that no position is spent on padding and short texts (a review, a tweet, one of
SST-2's sentences) need no partner. Here the corpus's texts, in order, each
followed by ``<sep>``, are cut into sequences of whole texts: a sequence takes the
next texts while ``<cls>`` and they fit in ``max_len``. A text longer than
``max_len - 3`` tokens is first cut into pieces of ``max_len - 3`` (the last
shorter), each then placed as a text (so every sequence has at most
``max_len - 3`` tokens that are not ``<cls>``/``<sep>``, as a sentence pair
has, and `batches.max_predictions` holds). Nothing is dropped; all segment ids
are 0.

Everything is NumPy on the flat arrays of :mod:`.encoding`, the cut points
included (`fill_sequences`): no Python loop runs once per text or sequence.
"""
import numpy as np

from .ragged import concat_ranges, offsets_from_lengths


def text_pieces(sentence_offsets, max_piece):
    """``(starts, lengths)``, int64 (num_pieces,): where in the corpus's
    ``token_ids`` each piece begins and how long it is: every text in order, a
    text longer than ``max_piece`` cut into pieces of ``max_piece`` tokens (the
    last shorter), empty texts left out."""
    lengths = np.diff(sentence_offsets)
    pieces_per_text = -(-lengths // max_piece)
    text = np.repeat(np.arange(len(lengths)), pieces_per_text)
    offset = concat_ranges(np.zeros_like(pieces_per_text), pieces_per_text) * max_piece
    return sentence_offsets[text] + offset, np.minimum(max_piece, lengths[text] - offset)


def fill_sequences(piece_lengths, max_len):
    """int64 (num_sequences + 1,): the first piece of every sequence (and the number
    of pieces at the end). Each sequence takes the next pieces, each with its
    ``<sep>``, while they fit with ``<cls>`` in ``max_len`` (every piece must be at
    most ``max_len - 2`` tokens).

    Vectorised: one binary search finds, for every piece, where a sequence starting
    there would end (`next_starts`); the chain of sequences from piece 0 is then
    followed by pointer doubling (`chain_from_zero`), a few NumPy steps per doubling
    instead of a Python step per sequence."""
    cost_before = offsets_from_lengths(np.asarray(piece_lengths, dtype=np.int64) + 1)
    next_starts = np.searchsorted(cost_before, cost_before + max_len - 1, side='right') - 1
    return chain_from_zero(next_starts)


def chain_from_zero(next_starts):
    """``[0, next_starts[0], next_starts[next_starts[0]], ...]`` up to the first
    ``n = len(next_starts) - 1`` (int64), for ``next_starts`` (n + 1,) with
    ``next_starts[i] > i`` (a ValueError otherwise) and ``next_starts[n] == n``.

    After step k, ``chain`` holds the first 2**k links and ``jump[i]`` is the link
    2**k steps on from ``i``; appending ``jump[chain]`` doubles the chain."""
    end = len(next_starts) - 1
    if (next_starts[:end] <= np.arange(end)).any():
        raise ValueError('a piece does not fit in a sequence: the chain would not advance')
    chain, jump = np.zeros(1, dtype=np.int64), next_starts
    while chain[-1] < end:
        chain = np.concatenate([chain, jump[chain]])
        jump = jump[jump]
    return chain[:np.count_nonzero(chain < end) + 1]  # through the first link to end


def full_sentence_sequences(token_ids, starts, lengths, bounds, vocab):
    """``(tokens, sequence lengths)`` of the sequences ``<cls> piece <sep> piece <sep>
    ...`` that ``bounds`` (see `fill_sequences`, here counted from the first piece
    given) cut from the pieces ``(starts, lengths)`` of the corpus's ``token_ids``:
    int32 tokens back to back, int32 (num_sequences,) lengths."""
    num_sequences = len(bounds) - 1
    cost_before = offsets_from_lengths(np.asarray(lengths, dtype=np.int64) + 1)
    sequence_starts = cost_before[bounds[:-1]] + np.arange(num_sequences)
    sequence_of_piece = np.repeat(np.arange(num_sequences), np.diff(bounds))
    placed = cost_before[:-1] + sequence_of_piece + 1  # after the <cls> of each sequence
    tokens = np.empty(int(cost_before[-1]) + num_sequences, dtype=np.int32)
    tokens[sequence_starts] = vocab.cls_id
    tokens[placed + lengths] = vocab.sep_id
    tokens[concat_ranges(placed, lengths)] = token_ids[concat_ranges(starts, lengths)]
    sequence_lengths = cost_before[bounds[1:]] - cost_before[bounds[:-1]] + 1
    return tokens, sequence_lengths.astype(np.int32)


class PackedSequences:
    """The FULL-SENTENCES sequences of a :class:`.encoding.TokenizedCorpus` as
    pieces of its ``token_ids`` (found from its text lengths, never stored: a
    cache holds no copy of the corpus's tokens).

    Attributes:
        lengths: int16 (int32 for a ``max_len`` over 32,767) (num_sequences,):
            each sequence's tokens, ``<cls>`` and ``<sep>``s included.
    """

    def __init__(self, corpus, max_len):
        self.token_ids = corpus.token_ids
        self.starts, self.piece_lengths = text_pieces(corpus.sentence_offsets, max_len - 3)
        if not len(self.starts):
            raise ValueError("the corpus's texts hold no token")
        self.bounds = fill_sequences(self.piece_lengths, max_len)
        cost_before = offsets_from_lengths(self.piece_lengths + 1)
        dtype = np.int16 if max_len <= np.iinfo(np.int16).max else np.int32
        self.lengths = (cost_before[self.bounds[1:]] - cost_before[self.bounds[:-1]]
                        + 1).astype(dtype)

    def __len__(self):
        return len(self.lengths)

    def tokens(self, indices, vocab):
        """``(tokens, lengths)`` of sequences ``indices`` (an int array): int32
        tokens back to back, int32 (len(indices),) lengths."""
        indices = np.asarray(indices, dtype=np.int64)
        counts = self.bounds[indices + 1] - self.bounds[indices]
        pieces = concat_ranges(self.bounds[indices], counts)
        return full_sentence_sequences(self.token_ids, self.starts[pieces],
                                       self.piece_lengths[pieces],
                                       offsets_from_lengths(counts), vocab)
