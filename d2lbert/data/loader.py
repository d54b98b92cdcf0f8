"""``load_data_wiki``: from a corpus name or path to BERT pretraining batches.

The pipeline, each step in its own module::

    text file --corpus--> paragraphs of sentences --vocab--> Vocab
              --encoding--> TokenizedCorpus (flat token ids)
              --examples--> PretrainingExamples (NSP pairs + MLM masks)
              --batches--> PretrainingBatches (bucketed, padded batches)

The vocabulary, the encoded corpus and the examples are cached on disk in
``$D2LBERT_HOME/cache`` (default ``~/.d2lbert/cache``), under keys made of
the corpus file's SHA-1 and every option that changes them (file format,
lowercasing, min_freq / the vocabulary's own hash, max_len, seed, masking
probabilities, dynamic masking, the data format version), so a second run
with the same arguments only memory-maps the result (after checking the
files' sizes and SHA-1s: an entry that fails the check is rebuilt, see
:mod:`.cache`).

Memory stays bounded for any corpus size: the text is streamed (twice: once
to learn the vocabulary, once to encode it, each pass printing a progress line
on stderr, see :mod:`.progress`), token ids are written to disk as they are
produced (uint16 when the vocabulary fits) and memory-mapped, and examples are
stored as sentence indices into them, built in chunks of
``examples.PAIRS_PER_CHUNK`` pairs. The cache of a corpus is about half the
size of its text; sizes, times and memory for 2M to 100M words are in
docs/pretraining.md ("A corpus of 100M words").
"""
import dataclasses
import os

from .bundled import bundled_corpus_directory
from .batches import PretrainingBatches
from ..util.files import atomic_directory, sweep_temporaries
from ..util.hashing import remembered_sha1_of_file, sha1_of_strings
from .cache import data_home, discard, is_intact, prepared_in_turn, seal
from .corpus import guess_file_format
from .download import WIKITEXT_ARCHIVES, wikitext_directory
from .encoding import TokenizedCorpus, count_tokens
from .examples import (FORMAT_VERSION, ExampleOptions, PretrainingExamples,
                       write_examples)
from .progress import ReadProgress, paragraphs_with_progress
from .subwords import DEFAULT_VOCAB_SIZE, train_wordpiece
from .text_sources import TextSource, read_documents
from .vocab import Vocab
from .vocab_files import read_wordpiece, save_vocab

SPLITS = ('train', 'valid', 'test')
VOCABULARIES = ('words', 'wordpiece')  # the kinds of vocabulary built from a corpus


def corpus_file(data=None, split='train', base_url=None):
    """The text file that ``data`` and ``split`` name.

    ``data`` is ``None`` or ``'bundled'`` (the small corpus d2lbert
    generates, works offline), ``'wikitext-2'`` or ``'wikitext-103'``
    (downloaded once, see :mod:`.download`), a directory holding
    ``wiki.{split}.tokens``, or a single text file or a
    :class:`.text_sources.TextSource` (``split`` is ignored: returned as is).
    """
    if split not in SPLITS:
        raise ValueError(f'split must be one of {SPLITS}, got {split!r}')
    if isinstance(data, TextSource):
        return data
    if data is None or data == 'bundled':
        directory = bundled_corpus_directory()
    elif data in WIKITEXT_ARCHIVES:
        directory = wikitext_directory(data, base_url)
    elif os.path.isdir(data):
        directory = data
    elif os.path.isfile(data):
        return data
    else:
        raise FileNotFoundError(
            f"the data {data!r} is neither 'bundled', 'wikitext-2', "
            f"'wikitext-103' nor an existing file or directory")
    path = os.path.join(directory, f'wiki.{split}.tokens')
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{path!r} not found: the data {data!r} must '
                                f'be a folder holding wiki.{split}.tokens')
    return path


def build_pretraining_examples(path, max_len=128, seed=0, vocab=None,
                               min_freq=5, file_format='auto', lowercase=True,
                               num_workers=0, vocab_kind='words',
                               vocab_size=DEFAULT_VOCAB_SIZE, **masking_options):
    """The :class:`PretrainingExamples` of one corpus file, cached.

    Args:
        path: a WikiText ``wiki.*.tokens`` file or a plain text file, read in
            the layout ``file_format`` (see :mod:`.corpus`), or a
            :class:`.text_sources.TextSource` (a table's column, a range of
            documents).
        vocab: a :class:`Vocab` or ``WordPieceVocab``; by default built from
            ``path`` itself: with ``vocab_kind='words'`` the tokens seen at
            least ``min_freq`` times, with ``'wordpiece'`` a WordPiece
            vocabulary of ``vocab_size`` pieces (:mod:`.subwords`). (To
            prepare a validation split, pass the training split's vocabulary.)
        num_workers: processes building examples (0: this process). The
            examples are the same whatever this is.
        masking_options: ``mask_prob``, ``mask_token_prob``,
            ``random_token_prob``, ``dynamic_masking``, ``full_sentences``
            (RoBERTa's packed texts instead of sentence pairs), see
            :class:`.examples.ExampleOptions`.
    """
    options = ExampleOptions(max_len=max_len, seed=seed, **masking_options)
    if vocab_kind not in VOCABULARIES:
        raise ValueError(f'vocab_kind must be one of {VOCABULARIES}, got {vocab_kind!r}')
    source = path if isinstance(path, TextSource) else None
    path = source.path if source else path
    if not os.path.isfile(path):
        raise FileNotFoundError(f'corpus file not found: {path!r}')
    if os.path.getsize(path) == 0:
        raise ValueError(f'corpus file {path!r} is empty')
    source = source or TextSource(path, guess_file_format(path, file_format))
    min_texts = 1 if options.full_sentences else 2
    corpus_key = sha1_of_strings(remembered_sha1_of_file(path), *source.key(), lowercase,
                                 min_texts, FORMAT_VERSION)
    corpus_cache = os.path.join(data_home(), 'cache', corpus_key)
    with prepared_in_turn(corpus_cache, path):  # once per machine, not once per process
        sweep_temporaries(corpus_cache)  # what a killed preparation left
        paragraphs = lambda task: paragraphs_with_progress(
            read_documents(source, lowercase, min_texts), ReadProgress(path, task))
        if vocab is None and vocab_kind == 'wordpiece':
            vocab = _cached_wordpiece(corpus_cache, vocab_size, lowercase, paragraphs)
        elif vocab is None:
            vocab = _cached_vocab(corpus_cache, min_freq, paragraphs, path, min_texts)
        encoded = os.path.join(corpus_cache, f'corpus-{vocab.fingerprint()}')
        if not is_intact(encoded):
            discard(encoded)  # with the examples made of it
            with atomic_directory(encoded) as tmp:
                TokenizedCorpus.write(paragraphs('encoding'), vocab, tmp)
                seal(tmp)
        if TokenizedCorpus(encoded).num_sentences == 0:
            raise ValueError(_no_pairs_message(path, min_texts))
        return _cached_examples(encoded, vocab, options, num_workers)


def _cached_examples(encoded, vocab, options, num_workers):
    """The `PretrainingExamples` of the encoded corpus in folder `encoded` and
    `options`, written (in a folder of their own inside it) unless intact there."""
    examples = os.path.join(encoded, 'examples-' + sha1_of_strings(
        dataclasses.astuple(options))[:16])
    sweep_temporaries(encoded)
    if not is_intact(examples):
        discard(examples)
        with atomic_directory(examples) as tmp:
            write_examples(encoded, vocab, options, tmp, num_workers)
            seal(tmp)
    return PretrainingExamples(examples, vocab)


def _cached_vocab(corpus_cache, min_freq, paragraphs, path, min_texts):
    vocab_file = os.path.join(corpus_cache, f'vocab-min_freq{min_freq}.json')
    if os.path.isfile(vocab_file):
        try:
            return Vocab.load(vocab_file)
        except (ValueError, KeyError, TypeError):  # not the JSON it wrote: rebuilt
            pass
    counts = count_tokens(paragraphs('counting words'))
    if not counts:
        raise ValueError(_no_pairs_message(path, min_texts))
    vocab = Vocab(counts, min_freq=min_freq)
    os.makedirs(corpus_cache, exist_ok=True)
    tmp_file = f'{vocab_file}.{os.getpid()}.tmp'
    vocab.save(tmp_file)
    os.replace(tmp_file, vocab_file)
    return vocab


def _cached_wordpiece(corpus_cache, vocab_size, lowercase, paragraphs):
    folder = os.path.join(corpus_cache, f'wordpiece-{vocab_size}-lowercase{lowercase}')
    if not os.path.isdir(folder):
        vocab = train_wordpiece((s for p in paragraphs('learning word pieces') for s in p),
                                vocab_size, lowercase)
        with atomic_directory(folder) as tmp:
            save_vocab(vocab, tmp)
    return read_wordpiece(folder)


def _no_pairs_message(path, min_texts):
    if min_texts == 1:
        return f'{path!r} holds no text'
    return (f'{path!r} has no paragraph with at least two sentences, so no '
            f'sentence pair can be made (is it a WikiText/plain text file?)')


def load_data_wiki(batch_size, max_len, data=None, split='train', vocab=None,
                   num_workers=0, seed=0, shuffle=True, bucket_step=16,
                   last_batch='keep', base_url=None, **options):
    """(data_iter, vocab) like the d2l book's; batches are its 7-tuple (docs/inputs.md)."""
    path = corpus_file(data, split, base_url)
    examples = build_pretraining_examples(path, max_len, seed, vocab,
                                          num_workers=num_workers, **options)
    data_iter = PretrainingBatches(examples, batch_size, shuffle, bucket_step,
                                   last_batch)
    return data_iter, examples.vocab
