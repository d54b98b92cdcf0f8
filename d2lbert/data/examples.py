"""BERT pretraining examples: sentence pairs for NSP, masked tokens for MLM.

An example is built from two consecutive sentences ``a`` and ``b`` of one
paragraph (the book's ``_get_nsp_data_from_paragraph``):

* next sentence prediction: with probability 1/2 ``b`` stays the true next
  sentence (label 1), otherwise it is replaced by a sentence drawn uniformly
  from the *other* paragraphs (label 0). The book draws from all paragraphs,
  its own included, so some of its "not next" pairs are in fact neighbours.
* the input is ``<cls> a <sep> b <sep>`` with segment ids 0 up to and
  including the first ``<sep>`` and 1 after it. A pair longer than
  ``max_len`` is truncated longest-first -- tokens are removed from the end
  of the longer sentence until it fits, as Google's
  ``create_pretraining_data.py`` does (which also drops tokens from the
  front at random; we always drop from the end) -- where the book drops it.
* masked language model targets come from :func:`.masking.mask_tokens`; with a
  ``WordPieceVocab`` (subwords, :mod:`.subwords`) whole words are masked.

Everything is computed for tens of thousands of pairs at once with NumPy
(the book loops over every token in Python), in chunks of
``PAIRS_PER_CHUNK`` pairs so memory stays bounded, optionally in worker
processes. Each chunk uses random generators seeded by ``(seed, chunk)``, so
the result depends on the seed only, never on ``num_workers``. The results
are written to a directory and memory-mapped (see :class:`PretrainingExamples`).
"""
import concurrent.futures
import dataclasses
import json
import os

import numpy as np

from .cache import append_array, open_arrays
from .encoding import TokenizedCorpus, token_dtype
from .full_sentences import PackedSequences
from .masking import MaskedTokens, mask_corpus_tokens
from .subwords import continuation_ids
from .ragged import concat_ranges, offsets_from_lengths

PAIRS_PER_CHUNK = 1 << 14
# 3: Google BERT's layout, a sentence per line; FULL-SENTENCES. 4: examples as indices
# into the corpus, never copies of its tokens (`PretrainingExamples`). 5: a word
# vocabulary's words split as every command splits them (`words.word_tokenize`)
FORMAT_VERSION = 5


@dataclasses.dataclass(frozen=True)
class ExampleOptions:
    """Everything besides the corpus and vocabulary that changes examples."""
    max_len: int = 128
    seed: int = 0
    mask_prob: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    dynamic_masking: bool = False
    full_sentences: bool = False  # RoBERTa's FULL-SENTENCES, no pairs (:mod:`.full_sentences`)

    def __post_init__(self):
        if not isinstance(self.max_len, (int, np.integer)) or self.max_len < 5:
            raise ValueError(
                f'max_len={self.max_len!r} is too small: an example needs at '
                f'least 5 tokens, <cls> a <sep> b <sep> with one token in '
                f'each sentence')
        if not 0 < self.mask_prob <= 1:
            raise ValueError(f'mask_prob must be in (0, 1], got '
                             f'{self.mask_prob!r}')
        if (min(self.mask_token_prob, self.random_token_prob) < 0
                or self.mask_token_prob + self.random_token_prob > 1):
            raise ValueError('mask_token_prob and random_token_prob must be '
                             '>= 0 with a sum <= 1')


def truncate_longest_first(len_a, len_b, max_num_tokens):
    """Lengths after removing tokens from the longer sentence until they fit.

    Vectorized closed form of Google's loop ``while len_a + len_b > max:
    shorten the longer one (b on a tie)``: if the shorter sentence fits in
    half the budget it is kept and the longer one gets the rest; otherwise
    a gets ``ceil(max / 2)`` and b ``floor(max / 2)``.
    """
    len_a, len_b = np.asarray(len_a), np.asarray(len_b)
    shorter = np.minimum(len_a, len_b)
    keep_shorter = 2 * shorter <= max_num_tokens
    new_a = np.where(len_a <= len_b, len_a, max_num_tokens - len_b)
    new_b = np.where(len_a <= len_b, max_num_tokens - len_a, len_b)
    new_a = np.where(keep_shorter, new_a, (max_num_tokens + 1) // 2)
    new_b = np.where(keep_shorter, new_b, max_num_tokens // 2)
    fits = len_a + len_b <= max_num_tokens
    return np.where(fits, len_a, new_a), np.where(fits, len_b, new_b)


def pair_first_sentences(corpus):
    """int64: every sentence that has a next sentence in its paragraph."""
    has_next = np.ones(corpus.num_sentences, dtype=bool)
    has_next[corpus.paragraph_offsets[1:] - 1] = False
    return np.flatnonzero(has_next)


def choose_second_sentences(first, corpus, sentence_paragraphs, rng):
    """(second, is_next) like first: the next sentence or one of another paragraph, 50/50."""
    is_next = rng.random(len(first)) < 0.5
    paragraph = sentence_paragraphs[first]
    paragraph_start = corpus.paragraph_offsets[paragraph]
    paragraph_size = corpus.paragraph_offsets[paragraph + 1] - paragraph_start
    # Uniform over the sentences outside the paragraph: draw among the
    # num_sentences - paragraph_size others and skip over the paragraph.
    other = rng.integers(0, corpus.num_sentences - paragraph_size)
    other += np.where(other >= paragraph_start, paragraph_size, 0)
    second = np.where(is_next, first + 1, other)
    return second, is_next.astype(np.int32)


def assemble_pairs(corpus, first, second, max_len, vocab):
    """Token ids of ``<cls> a <sep> b <sep>`` for each pair, back to back.

    Returns ``(token_ids, lengths, first_segment_lengths)``: int32 flat
    tokens, int32 (num_pairs,) lengths (the valid_lens), and int32
    (num_pairs,) ``len(a) + 2``, the number of tokens with segment id 0.
    """
    offsets = corpus.sentence_offsets
    len_a, len_b = truncate_longest_first(
        offsets[first + 1] - offsets[first],
        offsets[second + 1] - offsets[second], max_len - 3)
    lengths = len_a + len_b + 3
    starts = offsets_from_lengths(lengths)[:-1]
    token_ids = np.empty(int(lengths.sum()), dtype=np.int32)
    token_ids[starts] = vocab.cls_id
    token_ids[starts + len_a + 1] = vocab.sep_id
    token_ids[starts + lengths - 1] = vocab.sep_id
    token_ids[concat_ranges(starts + 1, len_a)] = corpus.token_ids[
        concat_ranges(offsets[first], len_a)]
    token_ids[concat_ranges(starts + len_a + 2, len_b)] = corpus.token_ids[
        concat_ranges(offsets[second], len_b)]
    return (token_ids, lengths.astype(np.int32),
            (len_a + 2).astype(np.int32))


def build_chunk(corpus, sentence_paragraphs, first, chunk_index, vocab,
                options):
    """What is stored of the examples whose first sentences are ``first``:
    their second sentences and, with static masking, their masks."""
    nsp_rng = np.random.default_rng([options.seed, 0, chunk_index])
    second, _ = choose_second_sentences(first, corpus, sentence_paragraphs,
                                        nsp_rng)
    chunk = {'second_sentences': second.astype(index_dtype(corpus.num_sentences))}
    if options.dynamic_masking:
        return chunk
    token_ids, lengths, _ = assemble_pairs(corpus, first, second,
                                           options.max_len, vocab)
    return with_stored_masks(chunk, token_ids, lengths, chunk_index, vocab, options)


def with_stored_masks(chunk, token_ids, lengths, chunk_index, vocab, options):
    """``chunk`` (a dict of arrays) with the masks of its examples, drawn once
    (static masking): ``num_preds``, ``pred_positions`` and what the masks put
    there, ``masked_ids``; ``token_ids`` (back to back) and ``lengths`` are the
    examples' unmasked tokens."""
    mask_rng = np.random.default_rng([options.seed, 1, chunk_index])
    masked = mask_corpus_tokens(token_ids, lengths, mask_rng, vocab, options,
                                continuation_ids(vocab))
    chosen = (np.repeat(offsets_from_lengths(lengths)[:-1], masked.num_preds)
              + masked.pred_positions)
    chunk.update(num_preds=masked.num_preds,
                 pred_positions=masked.pred_positions.astype(np.int16),
                 masked_ids=masked.token_ids[chosen].astype(token_dtype(len(vocab))))
    return chunk


def full_sentence_chunks(corpus, vocab, options):
    """Yield what is stored of the corpus's FULL-SENTENCES sequences
    (:class:`.full_sentences.PackedSequences`, found again when the examples
    are opened): nothing with dynamic masking, else their masks,
    ``PAIRS_PER_CHUNK`` sequences at a time."""
    packed = PackedSequences(corpus, options.max_len)  # a ValueError if no token
    if options.dynamic_masking:
        return
    for chunk_index, first in enumerate(range(0, len(packed), PAIRS_PER_CHUNK)):
        indices = np.arange(first, min(first + PAIRS_PER_CHUNK, len(packed)))
        token_ids, lengths = packed.tokens(indices, vocab)
        yield with_stored_masks({}, token_ids, lengths, chunk_index, vocab, options)


def pair_lengths(corpus, first, second, max_len, pairs_per_part=1 << 20):
    """``(lengths, first_segment_lengths)``, int16 (int32 for a ``max_len`` over
    32,767) (num_pairs,): the tokens of
    ``<cls> a <sep> b <sep>`` after truncation, and those of ``<cls> a <sep>``,
    computed ``pairs_per_part`` pairs at a time (the temporaries of
    :func:`truncate_longest_first` stay small whatever the corpus size)."""
    sentence_lengths = np.diff(corpus.sentence_offsets).astype(np.int32)
    dtype = np.int16 if max_len <= np.iinfo(np.int16).max else np.int32
    lengths = np.empty(len(first), dtype=dtype)
    first_segment_lengths = np.empty(len(first), dtype=dtype)
    for start in range(0, len(first), pairs_per_part):
        part = slice(start, start + pairs_per_part)
        len_a, len_b = truncate_longest_first(sentence_lengths[first[part]],
                                              sentence_lengths[second[part]],
                                              max_len - 3)
        lengths[part] = len_a + len_b + 3
        first_segment_lengths[part] = len_a + 2
    return lengths, first_segment_lengths


def index_dtype(size):
    """int32 if it holds every index below ``size``, else int64."""
    return np.dtype(np.int32 if size <= np.iinfo(np.int32).max else np.int64)


class PretrainingExamples:
    """All pretraining examples of a corpus: sentence indices into its
    :class:`.encoding.TokenizedCorpus`, never copies of its tokens.

    Stored on disk (``n`` = number of examples), memory-mapped:

    * sentence pairs only: ``second_sentences`` int32 (n,): sentence b of every
      example (sentence a, every sentence with a next one in its paragraph, is
      not stored). FULL-SENTENCES examples (``options.full_sentences``) store
      no index: :class:`.full_sentences.PackedSequences` finds them again.
    * static masking only: ``num_preds`` int32 (n,), and flat
      ``pred_positions`` int16 and ``masked_ids`` (the corpus's token type)
      (sum(num_preds),) indexed by ``pred_offsets``: the positions the masks
      chose and what they put there. With ``dynamic_masking`` the batches
      mask the tokens afresh every epoch.

    Computed when opened, from the corpus's sentence lengths (per example):
    ``first_sentences`` (as ``second_sentences``), ``nsp_labels`` int8 (1 if b
    follows a),
    ``lengths`` int16 (the ``valid_len``, after truncation to ``max_len``)
    and ``first_segment_lengths`` int16 (tokens with segment id 0); the
    batches are int32. The
    tokens of examples are put together when asked, by :meth:`masked_tokens`.

    This is also a Gluon-style dataset: ``len(examples)`` and
    ``examples[i]``, the book's 7-tuple for one example padded to ``max_len``
    (see :meth:`__getitem__`), for people who build their own loaders.
    """

    def __init__(self, directory, vocab):
        """Open the examples that :func:`write_examples` put in ``directory``
        (a folder inside the corpus's)."""
        with open(os.path.join(directory, 'options.json')) as f:
            self.options = ExampleOptions(**json.load(f))
        self.vocab = vocab
        self.continuation = continuation_ids(vocab)  # None: mask tokens, not whole words
        self.directory = directory
        self.corpus = TokenizedCorpus(os.path.dirname(directory))
        for name, values in open_arrays(directory).items():
            setattr(self, name, values)
        if self.options.full_sentences:
            self.open_full_sentences()
        else:
            self.open_pairs()
        if not self.options.dynamic_masking:
            self.pred_offsets = offsets_from_lengths(self.num_preds)

    def open_pairs(self):
        """The arrays of sentence-pair examples (see the class doc)."""
        self.first_sentences = pair_first_sentences(self.corpus).astype(
            self.second_sentences.dtype)
        self.nsp_labels = (self.second_sentences == self.first_sentences + 1
                           ).astype(np.int8)
        self.lengths, self.first_segment_lengths = pair_lengths(
            self.corpus, self.first_sentences, self.second_sentences,
            self.options.max_len)

    def open_full_sentences(self):
        """The arrays of FULL-SENTENCES examples: every segment id 0, the NSP
        labels 0 (unused: the masked LM alone trains on them)."""
        self.packed = PackedSequences(self.corpus, self.options.max_len)
        self.lengths = self.first_segment_lengths = self.packed.lengths
        self.nsp_labels = np.zeros(len(self.lengths), np.int8)

    def __len__(self):
        return len(self.lengths)

    def tokens(self, indices):
        """``(token ids back to back, int32 lengths)`` of examples ``indices``,
        unmasked, put together from the corpus."""
        if self.options.full_sentences:
            token_ids, lengths = self.packed.tokens(indices, self.vocab)
        else:
            token_ids, lengths, _ = assemble_pairs(
                self.corpus, np.asarray(self.first_sentences[indices], dtype=np.int64),
                np.asarray(self.second_sentences[indices], dtype=np.int64),
                self.options.max_len, self.vocab)
        self.corpus.release_pages()
        return token_ids, lengths

    def masked_tokens(self, indices, rng=None):
        """The tokens of examples ``indices``, masked: a :class:`.masking.MaskedTokens`
        (token ids back to back, num_preds, pred_positions, labels). With dynamic
        masking the masks are drawn with ``rng``, else they are the stored ones."""
        indices = np.asarray(indices)
        token_ids, lengths = self.tokens(indices)
        if self.options.dynamic_masking:
            return mask_corpus_tokens(token_ids, lengths, rng, self.vocab,
                                      self.options, self.continuation)
        num_preds = np.asarray(self.num_preds[indices])
        stored = concat_ranges(self.pred_offsets[indices], num_preds)
        pred_positions = self.pred_positions[stored].astype(np.int32)
        chosen = np.repeat(offsets_from_lengths(lengths)[:-1], num_preds) + pred_positions
        labels = token_ids[chosen]
        token_ids[chosen] = self.masked_ids[stored]
        return MaskedTokens(token_ids, num_preds, pred_positions, labels)

    def __getitem__(self, index):
        """The book's tuple for one example, as host NumPy arrays:
        ``(tokens (max_len,), segments (max_len,), valid_len (),
        pred_positions (P,), mlm_weights (P,), mlm_labels (P,), nsp_label ())``
        with ``P = max_predictions(max_len)``. With dynamic masking the mask
        is a fixed function of ``(seed, index)``.
        """
        from .batches import make_batch, max_predictions
        index = range(len(self))[index]
        rng = np.random.default_rng([self.options.seed, 4, index])
        batch = make_batch(self, np.array([index]), self.options.max_len,
                           max_predictions(self.options.max_len,
                                           self.options.mask_prob), rng)
        return tuple(array[0] for array in batch)


def write_examples(corpus_directory, vocab, options, directory,
                   num_workers=0):
    """Build the examples of the corpus in ``corpus_directory`` into
    ``directory``, with ``num_workers`` processes (0: in this process)."""
    corpus = TokenizedCorpus(corpus_directory)
    if options.full_sentences:
        chunks = full_sentence_chunks(corpus, vocab, options)
    else:
        chunks = pair_chunks(corpus_directory, corpus, vocab, options, num_workers)
    for chunk in chunks:
        for name, values in chunk.items():
            append_array(directory, name, values)
    with open(os.path.join(directory, 'options.json'), 'w') as f:
        json.dump(dataclasses.asdict(options), f)
    return PretrainingExamples(directory, vocab)


def pair_chunks(corpus_directory, corpus, vocab, options, num_workers):
    """The arrays of the corpus's sentence pairs, ``PAIRS_PER_CHUNK`` pairs at a
    time (`build_chunk`), an iterator; a ValueError if there is no pair."""
    firsts = pair_first_sentences(corpus)
    if len(firsts) == 0:
        raise ValueError('the corpus has no paragraph with at least two '
                         'sentences, so there is no sentence pair')
    if corpus.num_paragraphs < 2:
        raise ValueError('the corpus has a single usable paragraph; next '
                         'sentence prediction needs at least two')
    chunks = [firsts[start:start + PAIRS_PER_CHUNK]
              for start in range(0, len(firsts), PAIRS_PER_CHUNK)]
    return _map_chunks(corpus_directory, chunks, vocab, options, num_workers)


def _map_chunks(corpus_directory, chunks, vocab, options, num_workers):
    """Yield ``build_chunk`` of every chunk, in order."""
    if num_workers == 0:
        _open_corpus(corpus_directory)
        try:
            for index, first in enumerate(chunks):
                yield _build_chunk_in_process(first, index, vocab, options)
        finally:
            _worker_corpus.clear()  # not kept for the rest of the run (tens of MB)
        return
    try:
        with concurrent.futures.ProcessPoolExecutor(
                num_workers, initializer=_open_corpus,
                initargs=(corpus_directory,)) as pool:
            # At most 2 chunks per worker in flight, to bound memory. An
            # exception raised in a worker is re-raised here by result().
            pending = []
            for index, first in enumerate(chunks):
                pending.append(pool.submit(_build_chunk_in_process, first,
                                           index, vocab, options))
                if len(pending) >= 2 * num_workers:
                    yield pending.pop(0).result()
            for future in pending:
                yield future.result()
    except concurrent.futures.process.BrokenProcessPool as error:
        raise RuntimeError(
            'a worker process building examples died (out of memory?); '
            'retry with fewer worker processes, or none') from error


_worker_corpus = {}


def _open_corpus(corpus_directory):
    corpus = TokenizedCorpus(corpus_directory)
    _worker_corpus.update(corpus=corpus,
                          sentence_paragraphs=corpus.sentence_paragraphs())


def _build_chunk_in_process(first, chunk_index, vocab, options):
    return build_chunk(_worker_corpus['corpus'],
                       _worker_corpus['sentence_paragraphs'], first,
                       chunk_index, vocab, options)
