"""Masked language model targets, for many sequences at once.

In every sequence, BERT chooses 15% of the *non-special* tokens (at least one;
``max(1, round(0.15 * n))`` as in the d2l book, ``n`` counting the tokens that
can be chosen) and asks the model to predict the original token there. Of the
chosen tokens

* 80% are replaced by ``<mask>``,
* 10% by a random token, drawn uniformly from the non-special tokens (the
  book draws from the whole vocabulary and so can insert ``<pad>``, ``<cls>``
  or ``<sep>``),
* 10% are left unchanged.

Special tokens (``<pad> <unk> <cls> <sep> <mask>`` and any extra reserved
token, i.e. ids below ``vocab.num_reserved``) are never chosen: there is
nothing to learn from predicting them.

**Whole words.** With a vocabulary of word pieces, masking pieces one by one lets the
model see 'bomb' and guess '##arded' from it; Google's later BERTs mask *whole words*
instead (:func:`mask_whole_words`): given ``continuation`` (which ids are '##' pieces),
the words of a sequence are taken in random order while their pieces fit in the same
budget of ``max(1, round(0.15 * n))`` predictions (a word that does not fit is skipped,
so a sequence may get fewer predictions, or none if every word is longer than its
budget), and every piece of a chosen word is predicted. The 80/10/10 corruption is then
drawn for each piece, as Google's ``create_pretraining_data.py`` does.

The sequences are a ragged array (see :mod:`.ragged`): ``token_ids`` holds
them back to back and ``lengths`` says how long each one is. The work is a
handful of vectorized NumPy calls, whatever the number of sequences.
"""
import collections

import numpy as np

from .ragged import offsets_from_lengths, row_ids

MaskedTokens = collections.namedtuple(
    'MaskedTokens', ['token_ids', 'num_preds', 'pred_positions', 'labels'])
MaskedTokens.__doc__ = """Result of :func:`mask_tokens`.

token_ids: int32 (num_tokens,), the input with chosen tokens replaced.
num_preds: int32 (num_sequences,), number of predictions per sequence.
pred_positions: int32 (sum(num_preds),), position of each prediction inside
    its sequence, increasing within a sequence; sequences back to back.
labels: int32 (sum(num_preds),), the original token at each position.
"""


def num_predictions(num_candidates, mask_prob=0.15):
    """``min(n, max(1, round(mask_prob * n)))`` for each candidate count n."""
    num_candidates = np.asarray(num_candidates)
    wanted = np.maximum(1, np.round(num_candidates * mask_prob))
    return np.minimum(num_candidates, wanted).astype(np.int32)


def mask_tokens(token_ids, lengths, rng, vocab_size, num_reserved, mask_id,
                mask_prob=0.15, mask_token_prob=0.8, random_token_prob=0.1):
    """`MaskedTokens` of sequences (num_tokens,) back to back with lengths (num_sequences,)."""
    if vocab_size <= num_reserved:
        raise ValueError('the vocabulary has no non-special token to predict '
                         '(is min_freq too large for this corpus?)')
    token_ids = np.asarray(token_ids, dtype=np.int32)
    starts = offsets_from_lengths(lengths)[:-1]
    is_candidate = token_ids >= num_reserved
    num_candidates = np.add.reduceat(is_candidate.astype(np.int64), starts) \
        if len(starts) else np.zeros(0, np.int64)
    num_preds = num_predictions(num_candidates, mask_prob)
    chosen = choose_targets(is_candidate, lengths, num_preds, rng)
    corrupted = corrupt(token_ids, chosen, rng, vocab_size, num_reserved, mask_id,
                        mask_token_prob, random_token_prob)
    pred_positions = (chosen - starts[row_ids(lengths)[chosen]]).astype(np.int32)
    return MaskedTokens(corrupted, num_preds, pred_positions, token_ids[chosen])


def choose_targets(is_candidate, lengths, num_preds, rng):
    """Sorted flat indices (sum(num_preds),) of num_preds[i] random candidates per sequence."""
    starts = offsets_from_lengths(lengths)[:-1]
    sort_key = row_ids(lengths) + np.where(
        is_candidate, 0.5 * rng.random(len(is_candidate)), 0.75)
    order = np.argsort(sort_key, kind='stable')
    rank_in_sequence = np.arange(len(order)) - np.repeat(starts, lengths)
    return np.sort(order[rank_in_sequence < np.repeat(num_preds, lengths)])


def mask_whole_words(token_ids, lengths, rng, vocab_size, num_reserved, mask_id,
                     continuation, mask_prob=0.15, mask_token_prob=0.8,
                     random_token_prob=0.1):
    """`mask_tokens` for word pieces: whole words are chosen (see the module doc).

    continuation: bool (vocab_size,), the ids of the pieces that continue a word.
    Returns a :class:`MaskedTokens`; num_preds may be below the budget.
    """
    token_ids = np.asarray(token_ids, dtype=np.int32)
    starts = offsets_from_lengths(lengths)[:-1]
    is_candidate = token_ids >= num_reserved
    num_candidates = np.add.reduceat(is_candidate.astype(np.int64), starts) \
        if len(starts) else np.zeros(0, np.int64)
    chosen = choose_whole_words(is_candidate, continuation[token_ids], lengths,
                                num_predictions(num_candidates, mask_prob), rng)
    num_preds = np.bincount(row_ids(lengths)[chosen], minlength=len(lengths))
    corrupted = corrupt(token_ids, chosen, rng, vocab_size, num_reserved, mask_id,
                        mask_token_prob, random_token_prob)
    pred_positions = (chosen - starts[row_ids(lengths)[chosen]]).astype(np.int32)
    return MaskedTokens(corrupted, num_preds.astype(np.int32), pred_positions,
                        token_ids[chosen])


def mask_corpus_tokens(token_ids, lengths, rng, vocab, options, continuation):
    """The masks of a corpus's examples: `mask_tokens`, or `mask_whole_words` when the
    vocabulary has word pieces (continuation not None). options: an `ExampleOptions`."""
    probabilities = (options.mask_prob, options.mask_token_prob, options.random_token_prob)
    if continuation is None:
        return mask_tokens(token_ids, lengths, rng, len(vocab), vocab.num_reserved,
                           vocab.mask_id, *probabilities)
    return mask_whole_words(token_ids, lengths, rng, len(vocab), vocab.num_reserved,
                            vocab.mask_id, continuation, *probabilities)


def choose_whole_words(is_candidate, is_continuation, lengths, num_preds, rng):
    """The flat indices (int64, increasing) of the pieces of randomly chosen whole
    words: in every sequence i, words in random order while their pieces add up to at
    most num_preds[i] (a word too long for what is left is skipped).

    is_candidate, is_continuation: bool (num_tokens,), the sequences back to back; a
    word is a candidate piece that does not continue a word (or follows a
    non-candidate), with the continuing candidate pieces after it.
    lengths, num_preds: int (num_sequences,).
    """
    starts = offsets_from_lengths(lengths)[:-1]
    follows_candidate = np.zeros(len(is_candidate), dtype=bool)
    follows_candidate[1:] = is_candidate[:-1]
    follows_candidate[starts] = False
    word_start = is_candidate & ~(is_continuation & follows_candidate)
    first_piece = np.flatnonzero(word_start)
    word_of_piece = np.cumsum(word_start) - 1  # for candidate pieces
    word_lengths = np.bincount(word_of_piece[is_candidate], minlength=len(first_piece))
    budget = num_preds[row_ids(lengths)[first_piece]]
    sequence = row_ids(lengths)[first_piece]
    # words in random order within each sequence, the ones longer than the budget last
    order = np.lexsort((rng.random(len(first_piece)), word_lengths > budget, sequence))
    taken = np.cumsum(word_lengths[order])
    sequence_start = np.searchsorted(sequence[order], sequence[order])
    before = np.concatenate([[0], taken])[sequence_start]
    chosen_words = np.zeros(len(first_piece), dtype=bool)
    chosen_words[order] = taken - before <= budget[order]
    return np.flatnonzero(is_candidate & chosen_words[word_of_piece])


def corrupt(token_ids, chosen, rng, vocab_size, num_reserved, mask_id,
            mask_token_prob=0.8, random_token_prob=0.1):
    """A copy of token_ids (num_tokens,) with the chosen tokens masked, randomized or kept."""
    corrupted = token_ids.copy()
    action = rng.random(len(chosen))
    to_mask = action < mask_token_prob
    to_random = ~to_mask & (action < mask_token_prob + random_token_prob)
    corrupted[chosen[to_mask]] = mask_id
    corrupted[chosen[to_random]] = rng.integers(
        num_reserved, vocab_size, size=int(to_random.sum()))
    return corrupted
