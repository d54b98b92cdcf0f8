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
`[PAD] [UNK] [CLS] [SEP] [MASK]`. It also tokenizes text exactly like Hugging
Face's `BertTokenizer`: Google BERT's basic tokenization (`basic_tokenizer`), then
each word split into the longest pieces of the vocabulary, from the left:

>>> vocab.tokenize('Unaffable, [MASK]!')          # doctest: +SKIP
['un', '##aff', '##able', ',', '[MASK]', '!']

`tokenize_with_offsets` also says where each token comes from in the original text
(question answering cuts its answers from there), as Hugging Face's
`BertTokenizerFast(...)(text, return_offsets_mapping=True)` does:

>>> vocab.tokenize_with_offsets('Café!')          # doctest: +SKIP
(['cafe', '!'], [(0, 4), (4, 5)])
"""
import collections
import hashlib
import re

from .basic_tokenizer import basic_tokenize, basic_words

SPECIAL_TOKENS = {'pad': '[PAD]', 'unk': '[UNK]', 'cls': '[CLS]', 'sep': '[SEP]',
                  'mask': '[MASK]'}
_PLACEHOLDER = re.compile(r'^\[unused\d+\]$')
# Hugging Face's WordpieceTokenizer default: longer words become [UNK].
MAX_INPUT_CHARS_PER_WORD = 100


def read_vocab_txt(path):
    """The tokens of a vocab.txt, in id order."""
    with open(path, encoding='utf-8') as f:
        return [line.rstrip('\n') for line in f]


def check_tokens(idx_to_token, source):
    """Raise ValueError, naming source, if a special token is missing or a token is
    listed twice."""
    missing = [t for t in SPECIAL_TOKENS.values() if t not in idx_to_token]
    if missing:
        raise ValueError(f'{source} lacks the BERT special token(s) {missing}')
    twice = [token for token, count in collections.Counter(idx_to_token).items() if count > 1]
    if twice:
        raise ValueError(f'{source} lists the token {twice[0]!r} twice')


class WordPieceVocab:
    """Token <-> id map of a vocab.txt, plus WordPiece tokenization.

    lowercase=True (the "uncased" BERTs) lower-cases the text and strips accents
    before splitting it into word pieces; lowercase=False keeps it as it is.

        vocab = WordPieceVocab.load('bert-base-uncased/vocab.txt')
        vocab.tokenize('Unaffable!')         # ['un', '##aff', '##able', '!']
        vocab[['un', '##aff']], vocab.cls_id  # [4895, 10354], 101
    """

    def __init__(self, idx_to_token, lowercase=True, source='vocab.txt'):
        check_tokens(idx_to_token, source)
        self.idx_to_token = list(idx_to_token)
        self.token_to_idx = {token: i for i, token in enumerate(self.idx_to_token)}
        self.lowercase = lowercase
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
        whole; the rest is split into words by `basic_tokenize` (clean-up, accent
        stripping and lower-casing if `lowercase`, CJK characters and punctuation
        split off), and each word into its `word_pieces`.
        """
        pieces = self._specials.split(text)  # text, special, text, special, ..., text
        tokens = []
        for i, piece in enumerate(pieces):
            if i % 2:
                tokens.append(piece)
            else:
                for word in basic_tokenize(piece, self.lowercase):
                    tokens.extend(self.word_pieces(word))
        return tokens

    def word_pieces(self, word):
        """WordPiece, greedy longest-match-first: the longest beginning of word that
        is a token, then the longest continuation ('##' + the next characters) that is
        a token, and so on; ['[UNK]'] if some part has no token, or word has more than
        MAX_INPUT_CHARS_PER_WORD characters.

        >>> vocab.word_pieces('unaffable')          # doctest: +SKIP
        ['un', '##aff', '##able']
        """
        if len(word) > MAX_INPUT_CHARS_PER_WORD:
            return [SPECIAL_TOKENS['unk']]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else '##' + word[start:end]
                if piece in self.token_to_idx:
                    break
            else:
                return [SPECIAL_TOKENS['unk']]
            pieces.append(piece)
            start = end
        return pieces

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
            pieces = self.word_pieces(word)
            if pieces == [SPECIAL_TOKENS['unk']]:
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
