"""From task examples to BERT's inputs: token ids, segments, valid length.

As in the book's ``get_tokens_and_segments``, one text or a pair becomes::

    tokens    <cls>  a1  a2  <sep>          <cls>  a1  <sep>  b1  b2  <sep>
    segments    0     0   0    0              0     0    0     1   1    1

**Tokenizers.** The text is split into the tokens of the vocabulary it is
looked up in:

* the book's word-level :class:`..vocab.Vocab`: :func:`..words.word_tokenize`
  (lower-cased words; punctuation marks are tokens of their own, as in
  WikiText; the same as pretraining's),
* a ``WordPieceVocab`` (:mod:`d2lbert.data.wordpiece`): its own
  ``tokenize`` method (WordPiece, as Hugging Face's ``BertTokenizer``),
* anything else: pass ``tokenize``, a function str -> list of str, or an
  object with such a ``tokenize`` method.

**Truncation.** A text or pair longer than ``max_len`` tokens (specials
included) is cut *longest first*: the last token of the longer text (of the
second one when they are equally long) is dropped until it fits, as in
Google's BERT, the book's ``_truncate_pair_of_tokens`` and Hugging Face's
``BertTokenizer``. (Its Rust-backed ``BertTokenizerFast`` differs in one
detail: when an odd number of tokens is left to share, the spare one goes
to the text that was longer before cutting, the second one on a tie, not
always to the first.)

**Tagging.** Words may be split into several pieces ('Blackburn' -> 'black',
'##burn'): the first piece carries the word's tag, the others, ``<cls>``,
``<sep>`` and padding get :data:`IGNORE_LABEL`, which the loss and the
decoding skip (:func:`word_predictions`).
"""
from typing import NamedTuple, Union

from ..words import word_tokenize
from .examples import TaggedSentence

IGNORE_LABEL = -1


class EncodedExample(NamedTuple):
    """One example as model inputs (before padding).

    token_ids: list of int, ``<cls> a <sep> [b <sep>]``, at most max_len.
    segments: list of int, 0 for ``<cls> a <sep>``, 1 for ``b <sep>``.
    label: int (class id), float (regression score), None (no label), or
        for tagging a list of int, one per token: the tag id at each word's
        first piece, :data:`IGNORE_LABEL` elsewhere.
    """
    token_ids: list
    segments: list
    label: Union[int, float, list, None]

    @property
    def valid_len(self):
        return len(self.token_ids)


def tokenizer_for(vocab, tokenize=None):
    """The function text -> tokens (a list of str) to use with ``vocab``.

    ``tokenize`` if given (a function, or an object with a ``tokenize``
    method); else ``vocab.tokenize`` if the vocabulary has one (a
    ``WordPieceVocab``); else :func:`word_tokenize` (the book's ``Vocab``).
    """
    if tokenize is None:
        tokenize = vocab if hasattr(vocab, 'tokenize') else word_tokenize
    return tokenize.tokenize if hasattr(tokenize, 'tokenize') else tokenize


def truncate_pair(tokens_a, tokens_b, max_num_tokens):
    """Copies of two token lists, the longer one's last token dropped until both fit."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    return tokens_a, tokens_b


def encode_text_pair(text, text_pair, vocab, max_len, tokenize=None, truncate=truncate_pair):
    """``(token_ids, segments, valid_len)`` of one text or a pair of texts.

    Args:
        text: a str; text_pair: a str or None.
        vocab: a ``Vocab`` or ``WordPieceVocab`` (anything with
            ``vocab[list of tokens] -> ids``, ``cls_id`` and ``sep_id``).
        max_len: the most tokens, ``<cls>`` and ``<sep>`` included.
        tokenize: see :func:`tokenizer_for`.
        truncate: how a pair too long is cut (:func:`truncate_pair`: Google's rule).
    Returns:
        token_ids, segments: lists of int of length valid_len <= max_len.
    """
    tokenize = tokenizer_for(vocab, tokenize)
    num_specials = 2 if text_pair is None else 3
    if max_len < num_specials:
        raise ValueError(f'max_len={max_len} leaves no room for a token')
    tokens_a, tokens_b = truncate(
        tokenize(text), [] if text_pair is None else tokenize(text_pair),
        max_len - num_specials)
    token_ids = [vocab.cls_id, *vocab[tokens_a], vocab.sep_id]
    segments = [0] * len(token_ids)
    if text_pair is not None:
        token_ids += [*vocab[tokens_b], vocab.sep_id]
        segments += [1] * (len(tokens_b) + 1)
    return token_ids, segments, len(token_ids)


def encode_tagged_words(words, tag_ids, vocab, max_len, tokenize=None):
    """``(token_ids, segments, valid_len, piece_labels)`` of a tagged sentence.

    Every word is tokenized on its own (a word giving no token at all becomes
    ``<unk>``); its first piece gets its tag id, the other pieces, ``<cls>``
    and ``<sep>`` get :data:`IGNORE_LABEL`. Pieces beyond ``max_len - 2`` are
    cut off, and with them the tags of the words they start: a model cannot
    tag those words (use a larger max_len, or count them as missed).
    Args:
        words: list of str; tag_ids: list of int, one per word.
    """
    if len(words) != len(tag_ids):
        raise ValueError(f'{len(words)} words but {len(tag_ids)} tags')
    if max_len < 2:
        raise ValueError(f'max_len={max_len} leaves no room for <cls> <sep>')
    tokenize = tokenizer_for(vocab, tokenize)
    piece_ids, piece_labels = [], []
    for word, tag_id in zip(words, tag_ids):
        ids = vocab[tokenize(word)] or [vocab.unk_id]
        piece_ids += ids
        piece_labels += [tag_id] + [IGNORE_LABEL] * (len(ids) - 1)
    del piece_ids[max_len - 2:], piece_labels[max_len - 2:]
    token_ids = [vocab.cls_id, *piece_ids, vocab.sep_id]
    labels = [IGNORE_LABEL, *piece_labels, IGNORE_LABEL]
    return token_ids, [0] * len(token_ids), len(token_ids), labels


def encode_example(example, label_ids, vocab, max_len, tokenize=None):
    """The :class:`EncodedExample` of a ``TaskExample`` or ``TaggedSentence``.

    Args:
        label_ids: ``{class name or tag: id}``, or None for regression.
    """
    if isinstance(example, TaggedSentence):
        tag_ids = [label_ids[tag] for tag in example.tags]
        token_ids, segments, _, labels = encode_tagged_words(
            example.words, tag_ids, vocab, max_len, tokenize)
        return EncodedExample(token_ids, segments, labels)
    token_ids, segments, _ = encode_text_pair(
        example.text, example.text_pair, vocab, max_len, tokenize)
    label = example.label
    if label is not None:
        label = float(label) if label_ids is None else label_ids[label]
    return EncodedExample(token_ids, segments, label)


def encode_task(task_data, vocab, max_len, tokenize=None):
    """A list of :class:`EncodedExample`, one per example of ``task_data``
    (a :class:`.examples.TaskData`); class ids follow ``task_data.labels``."""
    label_ids = (None if task_data.labels is None else
                 {label: i for i, label in enumerate(task_data.labels)})
    tokenize = tokenizer_for(vocab, tokenize)
    return [encode_example(example, label_ids, vocab, max_len, tokenize)
            for example in task_data.examples]


def word_predictions(piece_predictions, piece_labels):
    """The predictions at the words' first pieces: one per (kept) word.

    Args:
        piece_predictions: a sequence of predicted tag ids, one per token.
        piece_labels: the example's labels (see :func:`encode_tagged_words`),
            :data:`IGNORE_LABEL` where no word starts.
    """
    return [int(prediction) for prediction, label
            in zip(piece_predictions, piece_labels) if label != IGNORE_LABEL]
