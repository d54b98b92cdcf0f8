"""A corpus as three NumPy arrays of token ids instead of nested Python lists.

The book keeps ``paragraphs[i][j][k]``, the k-th token string of sentence j
of paragraph i: for WikiText-103 that is tens of millions of Python objects.
Here the same information is three flat arrays::

    token_ids          uint16 or int32 (num_tokens,)  all sentences, back to back
    sentence_offsets   int64 (num_sentences + 1,)   sentence s is
                       token_ids[sentence_offsets[s]:sentence_offsets[s + 1]]
    paragraph_offsets  int64 (num_paragraphs + 1,)  paragraph p holds sentences
                       paragraph_offsets[p] .. paragraph_offsets[p + 1] - 1

``token_ids`` is written to disk while the text is read and memory-mapped
afterwards, so encoding a corpus of any size needs little memory. Its type is
the smallest that holds every id (:func:`token_dtype`): uint16 for a vocabulary
of at most 65,536 tokens (half the disk and page cache of int32), else int32.
"""
import array
import collections
import mmap
import os

import numpy as np

from .corpus import read_paragraphs
from .ragged import offsets_from_lengths
from .subwords import sentence_encoder
from .vocab import Vocab
from .words import word_tokenize


def token_dtype(vocab_size):
    """uint16 if every id of a vocabulary of ``vocab_size`` tokens fits, else int32."""
    return np.dtype(np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32)


def count_tokens(paragraphs):
    """Token -> count over an iterable of paragraphs (lists of sentences), tokenized
    as the words of a word vocabulary are (`words.word_tokenize`)."""
    counts = collections.Counter()
    for paragraph in paragraphs:
        for sentence in paragraph:
            counts.update(word_tokenize(sentence))
    return counts


def build_vocab(path, min_freq=5, file_format='auto', lowercase=True):
    """Vocabulary of the usable paragraphs of the corpus file ``path``."""
    counts = count_tokens(read_paragraphs(path, file_format, lowercase))
    return Vocab(counts, min_freq=min_freq)


class TokenizedCorpus:
    """Sentences and paragraphs of a corpus as flat id arrays (see module doc).

    Attributes:
        token_ids: uint16 or int32 (num_tokens,), memory-mapped from ``directory``.
        sentence_offsets: int64 (num_sentences + 1,).
        paragraph_offsets: int64 (num_paragraphs + 1,).
    """
    FILES = ('token_ids', 'sentence_lengths.npy', 'paragraph_lengths.npy')
    DTYPES = ('uint16', 'int32')  # token_ids.uint16 or token_ids.int32

    def __init__(self, directory):
        """Open a corpus that :meth:`write` saved in ``directory``."""
        sentence_file, paragraph_file = (os.path.join(directory, name)
                                         for name in self.FILES[1:])
        self.sentence_offsets = offsets_from_lengths(np.load(sentence_file))
        self.paragraph_offsets = offsets_from_lengths(np.load(paragraph_file))
        num_tokens = int(self.sentence_offsets[-1])
        dtype = next(dtype for dtype in self.DTYPES if os.path.isfile(
            os.path.join(directory, f'{self.FILES[0]}.{dtype}')))
        token_file = os.path.join(directory, f'{self.FILES[0]}.{dtype}')
        self.token_ids, self._mapping = np.zeros(0, dtype), None
        if num_tokens:
            with open(token_file, 'rb') as f:
                self._mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self.token_ids = np.frombuffer(self._mapping, dtype, count=num_tokens)

    def release_pages(self):
        """Let go of the token pages this process has read: they leave its resident
        memory (RSS) but stay in the system's page cache, so reading them again is fast.
        Training reads random sentences; without this, over hours the whole token file
        would come to count in the process's memory."""
        if self._mapping is not None:
            self._mapping.madvise(mmap.MADV_DONTNEED)

    @property
    def num_sentences(self):
        return len(self.sentence_offsets) - 1

    @property
    def num_paragraphs(self):
        return len(self.paragraph_offsets) - 1

    def sentence_paragraphs(self):
        """int64 (num_sentences,): the paragraph index of every sentence."""
        return np.repeat(np.arange(self.num_paragraphs),
                         np.diff(self.paragraph_offsets))

    @classmethod
    def write(cls, paragraphs, vocab, directory, flush_every=1 << 20):
        """Encode ``paragraphs`` with ``vocab`` into ``directory``: split at
        whitespace (the book's words), or into word pieces for a ``WordPieceVocab``
        (:func:`.subwords.sentence_encoder`).

        Token ids are flushed to disk every ``flush_every`` tokens, as
        :func:`token_dtype` of the vocabulary, so memory stays bounded whatever
        the corpus size.
        """
        encode = sentence_encoder(vocab)
        dtype = token_dtype(len(vocab))
        sentence_lengths = array.array('i')
        paragraph_lengths = array.array('i')
        token_path = os.path.join(directory, f'{cls.FILES[0]}.{dtype.name}')
        buffer = array.array('i')
        with open(token_path, 'wb') as token_file:
            for paragraph in paragraphs:
                paragraph_lengths.append(len(paragraph))
                for sentence in paragraph:
                    ids = encode(sentence)
                    sentence_lengths.append(len(ids))
                    buffer.extend(ids)
                    if len(buffer) >= flush_every:  # within a paragraph: it may be long
                        _flush(buffer, token_file, dtype)
            _flush(buffer, token_file, dtype)
        np.save(os.path.join(directory, cls.FILES[1]),
                np.frombuffer(sentence_lengths, dtype=np.int32))
        np.save(os.path.join(directory, cls.FILES[2]),
                np.frombuffer(paragraph_lengths, dtype=np.int32))
        return cls(directory)


def _flush(buffer, file, dtype):
    """Append the ids of ``buffer`` to ``file`` as ``dtype`` and empty it."""
    np.frombuffer(buffer, dtype=np.int32).astype(dtype).tofile(file)
    del buffer[:]
