"""Subwords learned from the pretraining text: a WordPiece vocabulary trained with
Hugging Face's `tokenizers` library, and the tokenization of the corpus with it.

A vocabulary of words keeps the words seen `min_freq` times: built from the 48
WikiText-2 articles the study trains on, it has 4,211 words and leaves a quarter of
GLUE SST-2's dev tokens `<unk>`. A WordPiece vocabulary of the same text splits a rare
word into pieces it knows ('bombarded' -> 'bomb', '##arded'), down to single
characters if need be, so nearly every word of any English text gets tokens that mean
something::

    text --prepare_sentence--> '... the [UNK] - year ...' --WordPieceVocab.tokenize-->
    ['the', '[UNK]', '-', 'year']

`train_wordpiece` learns the vocabulary as Google's BERT did (WordPiece, lower-cased,
accents stripped, punctuation split off, continuation pieces written '##...') with the
special tokens `[PAD] [UNK] [CLS] [SEP] [MASK]` at ids 0..4; `data.wordpiece.
WordPieceVocab` then tokenizes, in pretraining and in every later command, exactly
as Hugging Face's `BertTokenizer` does.

The library's trainer breaks ties between equally frequent pairs in hash order, which
changes from one process to the next: two trainings on the same text give slightly
different vocabularies. So a vocabulary is learned once per corpus and size, kept in
the data cache (`loader`), and every run folder carries the one its model was trained
with.
"""
import functools

import numpy as np

from .wordpiece import SPECIAL_TOKENS, WordPieceVocab
from .words import word_tokenize

DEFAULT_VOCAB_SIZE = 8000
# WikiText's markup: '<unk>' for its rare words, '@-@' '@,@' '@.@' for the hyphens,
# thousands separators and decimal points it split off ('1 @,@ 000').
WIKITEXT_MARKUP = (('<unk>', SPECIAL_TOKENS['unk']), (' @-@ ', ' - '), (' @,@ ', ','),
                   (' @.@ ', '.'))


def prepare_sentence(sentence):
    """A corpus sentence as a WordPiece tokenizer reads it: WikiText's '<unk>' becomes
    the '[UNK]' token, its '@-@' '@,@' '@.@' the characters they stand for."""
    for markup, plain in WIKITEXT_MARKUP:
        sentence = sentence.replace(markup, plain)
    return sentence


def train_wordpiece(sentences, vocab_size=DEFAULT_VOCAB_SIZE, lowercase=True):
    """A `WordPieceVocab` of at most vocab_size tokens learned from sentences (an
    iterable of str, each passed through `prepare_sentence`), with Hugging Face's
    `tokenizers` (BERT's normalization and pre-tokenization, `WordPieceTrainer`)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    specials = list(SPECIAL_TOKENS.values())
    tokenizer = Tokenizer(models.WordPiece(unk_token=SPECIAL_TOKENS['unk']))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials,
                                        show_progress=False)
    tokenizer.train_from_iterator((prepare_sentence(s) for s in sentences), trainer)
    token_to_id = tokenizer.get_vocab()
    return WordPieceVocab(sorted(token_to_id, key=token_to_id.get), lowercase)


def sentence_encoder(vocab, cache_size=1 << 18):
    """The function sentence -> token ids (list of int) that encodes a corpus for vocab:
    WordPiece for a `WordPieceVocab`, else the book's words (`words.word_tokenize`, as
    every other command tokenizes for a word vocabulary).

    WordPiece tokenizes each space-separated word on its own (BERT's basic tokenizer
    splits at every space first), so the ids of the `cache_size` most recently seen
    words are kept: a corpus's frequent words are tokenized once, not at every
    occurrence (ten times faster on WikiText), in memory bounded by `cache_size`.
    """
    if not isinstance(vocab, WordPieceVocab):
        return lambda sentence: vocab[word_tokenize(sentence)]

    @functools.lru_cache(maxsize=cache_size)
    def word_ids(word):
        return vocab[vocab.tokenize(word)]

    def encode(sentence):
        ids = []
        for word in prepare_sentence(sentence).split(' '):
            if word:
                ids += word_ids(word)
        return ids
    return encode


def continuation_ids(vocab):
    """bool NumPy array (len(vocab),): which ids continue a word ('##...' pieces); None
    for a vocabulary of whole words."""
    if not isinstance(vocab, WordPieceVocab):
        return None
    return np.array([token.startswith('##') for token in vocab.idx_to_token])
