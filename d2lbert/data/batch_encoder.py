"""`encode_batch`: texts (or text pairs) straight to a padded batch of BERT's inputs,
as Hugging Face's `tokenizer(texts, text_pairs, padding=True, truncation=True)`."""
from typing import Optional, Sequence, Union

import mxnet as mx
import numpy as onp
from mxnet import np

from ..util.numpy_mode import in_numpy_mode
from .tasks.encoding import encode_text_pair


@in_numpy_mode
def encode_batch(vocab, texts: Union[str, Sequence[str]],
                 text_pairs: Optional[Sequence[str]] = None, max_len: int = 128,
                 ctx: Optional[mx.Context] = None):
    """Tokenize, truncate and pad a batch of texts or text pairs.

    vocab: a `WordPieceVocab` (Google's and Hugging Face's BERTs: WordPiece, as
        Hugging Face's `BertTokenizer`) or the book's word-level `Vocab` (lower-cased
        words and punctuation marks, as fine-tuning splits them:
        `data.tasks.encoding.word_tokenize`).
    texts: a list of str (or one str); text_pairs: None, or a list of str as long.
    max_len: the most tokens of one example, `<cls>` and `<sep>` included; longer
        ones are cut longest first, as in fine-tuning (`data.tasks.encoding`).
    ctx: the device of the arrays (default: the CPU).
    Returns (tokens, segments, valid_lens), `mxnet.np` arrays:
        tokens, segments: (batch_size, seq_len) int32, padded with `vocab.pad_id` and
            0 to seq_len, the longest example's length;
        valid_lens: (batch_size,) int32, each example's length before padding.

        tokens, segments, valid_lens = d2lbert.encode_batch(
            vocab, ['The movie was great.', 'Awful.'], max_len=64)
        encoded, _, _ = net(tokens, segments, valid_lens)
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise ValueError('encode_batch: texts is empty')
    pairs = [None] * len(texts) if text_pairs is None else list(text_pairs)
    if len(pairs) != len(texts):
        raise ValueError(f'encode_batch: {len(texts)} texts but {len(pairs)} text_pairs')
    examples = [encode_text_pair(text, pair, vocab, max_len)
                for text, pair in zip(texts, pairs)]
    seq_len = max(valid_len for _, _, valid_len in examples)
    tokens = onp.full((len(examples), seq_len), vocab.pad_id, dtype='int32')
    segments = onp.zeros((len(examples), seq_len), dtype='int32')
    for row, (token_ids, segment_ids, valid_len) in enumerate(examples):
        tokens[row, :valid_len], segments[row, :valid_len] = token_ids, segment_ids
    valid_lens = onp.array([valid_len for _, _, valid_len in examples], dtype='int32')
    ctx = ctx or mx.cpu()
    return (np.array(tokens, ctx=ctx), np.array(segments, ctx=ctx),
            np.array(valid_lens, ctx=ctx))
