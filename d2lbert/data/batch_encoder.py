"""`encode_batch`: texts (or text pairs) straight to a padded batch of BERT's inputs,
as Hugging Face's `tokenizer(texts, text_pairs, padding=True, truncation=True)`.

**Pair truncation.** A pair longer than `max_len` is cut longest first, by one of two
rules that differ only in where the spare token of an odd budget goes:

* `'google'`: Google's BERT, the book and d2lbert's fine-tuning (`truncate_pair`): the
  last token of the longer text (the second one on a tie) is dropped until the pair
  fits, so the first text gets the spare token;
* `'transformers'`: transformers' fast tokenizer (`AutoTokenizer`, `BertTokenizerFast`,
  `truncation=True`): the spare token goes to the text that was longer before cutting
  (the second one on a tie).
"""
from typing import Optional, Sequence, Union

import mxnet as mx
import numpy as onp
from mxnet import np

from ..util.numpy_mode import in_numpy_mode
from .tasks.encoding import encode_text_pair, truncate_pair
from .wordpiece import WordPieceVocab

TRUNCATIONS = ('auto', 'google', 'transformers')


def truncate_as_transformers(tokens_a, tokens_b, max_num_tokens):
    """Copies of two token lists cut to at most `max_num_tokens` tokens together as
    transformers' fast tokenizer cuts them: if the shorter text (the first one on a tie)
    fits in half the budget it is kept and the longer one gets the rest; otherwise the
    shorter one gets `max_num_tokens // 2` and the longer one the rest."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    if len(tokens_a) + len(tokens_b) <= max_num_tokens:
        return tokens_a, tokens_b
    shorter = min(len(tokens_a), len(tokens_b))
    kept = shorter if 2 * shorter <= max_num_tokens else max_num_tokens // 2
    if len(tokens_a) <= len(tokens_b):
        return tokens_a[:kept], tokens_b[:max_num_tokens - kept]
    return tokens_a[:max_num_tokens - kept], tokens_b[:kept]


def truncation_rule(vocab, truncation):
    """The function that cuts a pair by `truncation` (one of TRUNCATIONS); `'auto'` is
    the rule of the vocabulary's origin: `'transformers'` for a `WordPieceVocab` (Hugging
    Face's tokenizer), `'google'` for the book's word-level `Vocab`."""
    if truncation not in TRUNCATIONS:
        raise ValueError(f'encode_batch: truncation must be one of {TRUNCATIONS}, '
                         f'got {truncation!r}')
    if truncation == 'auto':
        truncation = 'transformers' if isinstance(vocab, WordPieceVocab) else 'google'
    return truncate_as_transformers if truncation == 'transformers' else truncate_pair


@in_numpy_mode
def encode_batch(vocab, texts: Union[str, Sequence[str]],
                 text_pairs: Optional[Sequence[str]] = None, max_len: int = 128,
                 ctx: Optional[mx.Context] = None, truncation: str = 'auto'):
    """Tokenize, truncate and pad a batch of texts or text pairs.

    vocab: a `WordPieceVocab` (Google's and Hugging Face's BERTs: WordPiece, as
        Hugging Face's `BertTokenizer`) or the book's word-level `Vocab` (lower-cased
        words and punctuation marks, as fine-tuning splits them:
        `data.tasks.encoding.word_tokenize`).
    texts: a list of str (or one str); text_pairs: None, or a list of str as long.
    max_len: the most tokens of one example, `<cls>` and `<sep>` included; longer
        ones are cut longest first.
    ctx: the device of the arrays (default: the CPU).
    truncation: how a pair is cut (see the module doc): `'transformers'` (as
        transformers' fast tokenizer with `truncation=True`), `'google'` (as Google's
        BERT and d2lbert's fine-tuning), or `'auto'`, the rule of the vocabulary's
        origin: `'transformers'` for a `WordPieceVocab`, `'google'` for a `Vocab`. The
        rules differ only in which text of a pair gets the spare token of an odd budget.
    Returns (tokens, segments, valid_lens), `mxnet.np` arrays:
        tokens, segments: (batch_size, seq_len) int32, padded with `vocab.pad_id` and
            0 to seq_len, the longest example's length;
        valid_lens: (batch_size,) int32, each example's length before padding.

        tokens, segments, valid_lens = d2lbert.encode_batch(
            vocab, ['The movie was great.', 'Awful.'], max_len=64)
        encoded, _, _ = net(tokens, segments, valid_lens)
    """
    truncate = truncation_rule(vocab, truncation)
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise ValueError('encode_batch: texts is empty')
    pairs = [None] * len(texts) if text_pairs is None else list(text_pairs)
    if len(pairs) != len(texts):
        raise ValueError(f'encode_batch: {len(texts)} texts but {len(pairs)} text_pairs')
    if max_len < (2 if text_pairs is None else 3):
        raise ValueError(f'encode_batch: max_len={max_len} leaves no room for a token')
    examples = [encode_text_pair(text, pair, vocab, max_len, truncate=truncate)[:2]
                for text, pair in zip(texts, pairs)]
    valid_lens = onp.array([len(token_ids) for token_ids, _ in examples], dtype='int32')
    tokens = onp.full((len(examples), valid_lens.max()), vocab.pad_id, dtype='int32')
    segments = onp.zeros_like(tokens)
    for row, (token_ids, segment_ids) in enumerate(examples):
        tokens[row, :len(token_ids)], segments[row, :len(token_ids)] = token_ids, segment_ids
    ctx = ctx or mx.cpu()
    return (np.array(tokens, ctx=ctx), np.array(segments, ctx=ctx),
            np.array(valid_lens, ctx=ctx))
