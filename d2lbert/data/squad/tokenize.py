"""Tokens with their character offsets in the original text, for either vocabulary.

Question answering predicts a span of tokens but must answer with the passage's
own characters, so each passage token carries ``(start, end)``: the token came
from ``text[start:end]``.

* a ``WordPieceVocab``: its ``tokenize_with_offsets`` (as Hugging Face's
  ``BertTokenizerFast`` with ``return_offsets_mapping=True``);
* the book's word-level ``Vocab``: :func:`word_tokenize_with_offsets`, the
  offsets of :func:`..words.word_tokenize`'s tokens.
"""
from ..words import WORD_TOKEN


def word_tokenize_with_offsets(text):
    """``(word_tokenize(text), offsets)``: offsets a list of (start, end), one per token.

    >>> word_tokenize_with_offsets("A man's hat.")
    (['a', 'man', "'", 's', 'hat', '.'], [(0, 1), (2, 5), (5, 6), (6, 7), (8, 11), (11, 12)])
    """
    lowered = text.lower()
    # A character whose lower case is longer ('İ' -> 'i' + U+0307) stands for all of it.
    origin = [i for i, ch in enumerate(text) for _ in ch.lower()]
    tokens, offsets = [], []
    for match in WORD_TOKEN.finditer(lowered):
        tokens.append(match.group())
        offsets.append((origin[match.start()], origin[match.end() - 1] + 1))
    return tokens, offsets


def tokenize_with_offsets_for(vocab):
    """The function text -> (tokens, offsets) to use with ``vocab``: its own
    ``tokenize_with_offsets`` if it has one (a ``WordPieceVocab``), else
    :func:`word_tokenize_with_offsets` (the book's ``Vocab``)."""
    return getattr(vocab, 'tokenize_with_offsets', word_tokenize_with_offsets)
