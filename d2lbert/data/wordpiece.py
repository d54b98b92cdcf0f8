"""`WordPieceVocab`: Google BERT's vocabulary (a `vocab.txt`) and its WordPiece tokenizer.

A `vocab.txt` lists one token per line; the line number (from 0) is the token's id.
Whole words and word beginnings are plain (`play`), word continuations start with
`##` (`##ing`). The special tokens are `[PAD] [UNK] [CLS] [SEP] [MASK]` (in the
English BERTs at ids 0, 100, 101, 102, 103), followed or preceded by `[unusedN]`
placeholders.

`WordPieceVocab` has the interface of `d2lbert.data.Vocab`, so the data pipeline and
`get_bert_encoding` work with it unchanged: `vocab[tokens]`, `vocab.to_tokens(ids)`,
`pad_id unk_id cls_id sep_id mask_id` (here the `vocab.txt` ids), and d2lbert's own
special-token names `<pad> <unk> <cls> <sep> <mask>` look up the same ids as
`[PAD] [UNK] [CLS] [SEP] [MASK]`. It also tokenizes text, with GluonNLP's
`BERTTokenizer`, exactly like Hugging Face's `BertTokenizer`:

>>> vocab.tokenize('Unaffable, [MASK]!')          # doctest: +SKIP
['un', '##aff', '##able', ',', '[MASK]', '!']

`tokenize_with_offsets` also says where each token comes from in the original text
(question answering cuts its answers from there), as Hugging Face's
`BertTokenizerFast(...)(text, return_offsets_mapping=True)` does:

>>> vocab.tokenize_with_offsets('Café!')          # doctest: +SKIP
(['cafe', '!'], [(0, 4), (4, 5)])
"""
import hashlib
import re
import unicodedata

import gluonnlp
from gluonnlp.data.fast_bert_tokenizer import _step1, is_punctuation

SPECIAL_TOKENS = {'pad': '[PAD]', 'unk': '[UNK]', 'cls': '[CLS]', 'sep': '[SEP]',
                  'mask': '[MASK]'}
_PLACEHOLDER = re.compile(r'^\[unused\d+\]$')
# Hugging Face's WordpieceTokenizer default: longer words become [UNK].
MAX_INPUT_CHARS_PER_WORD = 100


def read_vocab_txt(path):
    """The tokens of a vocab.txt, in id order."""
    with open(path, encoding='utf-8') as f:
        return [line.rstrip('\n') for line in f]


def gluonnlp_vocab(idx_to_token, source):
    """A `gluonnlp.vocab.BERTVocab` with exactly the given ids (as GluonNLP's own
    conversion scripts build one from a vocab.txt: the token -> id dict is given)."""
    missing = [t for t in SPECIAL_TOKENS.values() if t not in idx_to_token]
    if missing:
        raise ValueError(f'{source} lacks the BERT special token(s) {missing}')
    token_to_idx = {token: i for i, token in enumerate(idx_to_token)}
    if len(token_to_idx) != len(idx_to_token):
        duplicate = next(t for i, t in enumerate(idx_to_token) if token_to_idx[t] != i)
        raise ValueError(f'{source} lists the token {duplicate!r} twice')
    bert_vocab = gluonnlp.vocab.BERTVocab(gluonnlp.data.count_tokens(idx_to_token),
                                          token_to_idx=token_to_idx)
    assert bert_vocab.idx_to_token == list(idx_to_token)
    return bert_vocab


class CasedBasicTokenizer:
    """Google's basic tokenization for the cased BERTs: like GluonNLP's, but accents stay.

    GluonNLP 0.10's `BasicTokenizer` always decomposes characters (NFD) and drops the
    accents, even with lower=False; Google's and Hugging Face's cased tokenizers keep
    them ('café' stays 'café'). Steps: compose characters (NFC, as Hugging Face does),
    drop control characters, turn any whitespace into ' ' and put spaces around CJK
    characters (GluonNLP's `_step1`), then around punctuation, and split on spaces.
    """

    def tokenize(self, text):
        text = ''.join(_step1(unicodedata.normalize('NFC', text)))
        return ''.join(f' {ch} ' if is_punctuation(ch, unicodedata.category(ch)) else ch
                       for ch in text).split()


def aligned_characters(text):
    """The characters of text, each with the span of text it stands for: a list of
    (char, start, end). The normalization steps below keep these spans up to date."""
    return [(ch, i, i + 1) for i, ch in enumerate(text)]


def compose(chars):
    """NFC, as the cased tokenizer starts: a character and the combining marks after
    it (or the characters it composes with, like Hangul jamo) become one character
    (e + U+0301 -> é) that stands for all of them."""
    units = []
    for ch, start, end in chars:
        if units and (unicodedata.combining(ch) or composes(units[-1][0], ch)):
            units[-1] = (units[-1][0] + ch, units[-1][1], end)
        else:
            units.append((ch, start, end))
    return [(c, start, end) for unit, start, end in units
            for c in unicodedata.normalize('NFC', unit)]


def composes(unit, ch):
    """Does NFC join the character ch with the characters before it?"""
    def nfc_len(text):
        return len(unicodedata.normalize('NFC', text))
    return nfc_len(unit + ch) < nfc_len(unit) + nfc_len(ch)


def clean(chars):
    """GluonNLP's first step: control characters dropped, any whitespace -> ' ', and
    spaces around CJK characters (so each is a word of its own)."""
    return [(c, start, end) for ch, start, end in chars for c in _step1(ch)]


def lower(chars):
    """Lower case, of the whole text at once as GluonNLP does (a final 'Σ' -> 'ς'); a
    character whose lower case is longer ('İ' -> 'i' + U+0307) stands for all of it."""
    lowered = iter(''.join(ch for ch, _, _ in chars).lower())
    return [(next(lowered), start, end) for ch, start, end in chars for _ in ch.lower()]


def strip_accents(chars):
    """NFD, then the non-spacing marks (accents) dropped: é -> e. The character before
    a dropped mark then stands for the mark too, so 'café' keeps its accent when cut
    from the original text whether the é was written as one character or two."""
    stripped = []
    for ch, start, end in chars:
        for c in unicodedata.normalize('NFD', ch):
            if unicodedata.category(c) != 'Mn':
                stripped.append((c, start, end))
            elif stripped:
                previous, first, _ = stripped[-1]
                stripped[-1] = (previous, first, end)
    return stripped


def basic_words(text, lowercase):
    """The words of Google's basic tokenization of text, with where they come from.

    returns: a list of (word, starts, ends): word a str, and word[k] comes from
    text[starts[k]:ends[k]]. Words are split at whitespace; punctuation marks and
    CJK characters are words of their own.
    """
    chars = aligned_characters(text)
    chars = strip_accents(lower(clean(chars))) if lowercase else clean(compose(chars))
    words, word = [], []
    for char in chars:
        ch = char[0]
        if ch == ' ' or is_punctuation(ch, unicodedata.category(ch)):
            words += [word, [] if ch == ' ' else [char]]
            word = []
        else:
            word.append(char)
    words.append(word)
    return [(''.join(ch for ch, _, _ in word), [start for _, start, _ in word],
             [end for _, _, end in word]) for word in words if word]


class WordPieceVocab:
    """Token <-> id map of a vocab.txt, plus WordPiece tokenization.

    lowercase=True (the "uncased" BERTs) lower-cases the text and strips accents
    before splitting it into word pieces; lowercase=False keeps it as it is.
    """

    def __init__(self, idx_to_token, lowercase=True, source='vocab.txt'):
        bert_vocab = gluonnlp_vocab(idx_to_token, source)
        self.idx_to_token = list(idx_to_token)
        self.token_to_idx = {token: i for i, token in enumerate(self.idx_to_token)}
        self.lowercase = lowercase
        self._tokenizer = gluonnlp.data.BERTTokenizer(
            bert_vocab, lower=lowercase, max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD)
        if not lowercase:
            self._tokenizer.basic_tokenizer = CasedBasicTokenizer()
        d2lbert_names = {f'<{kind}>': self.token_to_idx[token]
                         for kind, token in SPECIAL_TOKENS.items()}
        self._lookup = {**d2lbert_names, **self.token_to_idx}
        self._specials = re.compile('(' + '|'.join(map(re.escape, SPECIAL_TOKENS.values()))
                                    + ')')
        self.num_reserved = self._count_reserved()

    def _count_reserved(self):
        """The length of the leading run of special and [unusedN] tokens."""
        special = set(SPECIAL_TOKENS.values())
        for i, token in enumerate(self.idx_to_token):
            if token not in special and not _PLACEHOLDER.match(token):
                return i
        return len(self.idx_to_token)

    def tokenize(self, text):
        """Split text into word pieces (a list of str), as `transformers.BertTokenizer`.

        The special tokens written in the text ('[CLS]', '[MASK]', ...) are kept
        whole; the rest goes through GluonNLP's `BERTTokenizer` (clean-up, accent
        stripping and lower-casing if `lowercase`, CJK characters and punctuation
        split off, then greedy longest-match-first WordPiece; unknown words -> [UNK]).
        """
        pieces = self._specials.split(text)  # text, special, text, special, ..., text
        tokens = []
        for i, piece in enumerate(pieces):
            tokens.extend([piece] if i % 2 else self._tokenizer(piece))
        return tokens

    def tokenize_with_offsets(self, text):
        """The tokens of `tokenize(text)` and where each comes from in text.

        returns: (tokens, offsets): tokens a list of str; offsets a list of
        (start, end), one per token, so that text[start:end] is the token's original
        characters: accents, case, ligatures and spacing as written ('Café' ->
        'cafe', (0, 4)); an [UNK] covers its whole word. As Hugging Face's
        `BertTokenizerFast` with `return_offsets_mapping=True`, except that an
        accent written as a separate combining mark after a word's last letter is
        included in the word's span (Hugging Face leaves it out).
        """
        tokens, offsets, position = [], [], 0
        for i, piece in enumerate(self._specials.split(text)):
            if i % 2:  # a special token written in the text
                tokens.append(piece)
                offsets.append((position, position + len(piece)))
            else:
                for token, (start, end) in self.word_pieces_with_offsets(piece):
                    tokens.append(token)
                    offsets.append((position + start, position + end))
            position += len(piece)
        return tokens, offsets

    def word_pieces_with_offsets(self, text):
        """Yield (token, (start, end)) for the word pieces of text (no special
        tokens in it): each word of `basic_words` split by greedy WordPiece."""
        for word, starts, ends in basic_words(text, self.lowercase):
            pieces = self._tokenizer.wordpiece_tokenizer.tokenize(word)
            if pieces == [self._tokenizer.wordpiece_tokenizer.unk_token]:
                yield pieces[0], (starts[0], ends[-1])
                continue
            first = 0
            for piece in pieces:
                length = len(piece) - 2 if first else len(piece)  # without '##'
                yield piece, (starts[first], ends[first + length - 1])
                first += length

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        """One token -> its id, a list/tuple of tokens -> a list of ids ([UNK] if absent)."""
        if isinstance(tokens, (list, tuple)):
            get, unk = self._lookup.get, self.unk_id
            return [get(token, unk) for token in tokens]
        return self._lookup.get(tokens, self.unk_id)

    def to_tokens(self, indices):
        """One id -> its token, a sequence of ids -> a list of tokens."""
        if hasattr(indices, '__len__'):
            return [self.idx_to_token[int(i)] for i in indices]
        return self.idx_to_token[int(indices)]

    pad_id = property(lambda self: self.token_to_idx['[PAD]'], doc='id of [PAD]')
    unk_id = property(lambda self: self.token_to_idx['[UNK]'], doc='id of [UNK]')
    cls_id = property(lambda self: self.token_to_idx['[CLS]'], doc='id of [CLS]')
    sep_id = property(lambda self: self.token_to_idx['[SEP]'], doc='id of [SEP]')
    mask_id = property(lambda self: self.token_to_idx['[MASK]'], doc='id of [MASK]')

    @property
    def reserved_tokens(self):
        """The tokens never masked nor used as random replacements: ids 0 .. num_reserved-1,
        the leading run of special and [unusedN] tokens."""
        return self.idx_to_token[:self.num_reserved]

    def fingerprint(self):
        """A short hash that changes whenever any id or the lower-casing changes."""
        text = '\n'.join(self.idx_to_token) + f'\nlowercase={self.lowercase}'
        return hashlib.sha1(text.encode('utf-8')).hexdigest()[:16]

    def save(self, path):
        """Write the tokens as a vocab.txt (the lower-casing is not part of this file)."""
        with open(path, 'w', encoding='utf-8') as f:
            f.writelines(token + '\n' for token in self.idx_to_token)

    @classmethod
    def load(cls, path, lowercase=True):
        """Read a vocab.txt."""
        return cls(read_vocab_txt(path), lowercase, source=path)

    def __eq__(self, other):
        return (isinstance(other, WordPieceVocab) and self.lowercase == other.lowercase
                and self.idx_to_token == other.idx_to_token)

    def __repr__(self):
        return f'WordPieceVocab(size={len(self)}, lowercase={self.lowercase})'
