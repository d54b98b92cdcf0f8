"""The vocabulary: a two-way map between tokens and integer ids.

BERT needs five special tokens, and they always get the same ids so that
code can rely on them (padding is id 0, which is what the batches pad with)::

    <pad> 0    <unk> 1    <cls> 2    <sep> 3    <mask> 4

Extra reserved tokens, if any, come next; then the corpus tokens that occur
at least ``min_freq`` times, most frequent first, ties broken by the token
string, so that the same corpus gives the same ids on every run and machine.
All reserved tokens are *special*: they are never chosen for masked-language-
model prediction and never used as a random replacement token.
"""
import hashlib
import json

SPECIAL_TOKENS = ('<pad>', '<unk>', '<cls>', '<sep>', '<mask>')


class Vocab:
    """Token <-> id map with the BERT special tokens at fixed ids 0..4.

    >>> vocab = Vocab({'the': 3, 'cat': 2, 'sat': 1}, min_freq=2)
    >>> vocab['the'], vocab[['cat', 'dog']]
    (5, [6, 1])
    >>> vocab.to_tokens([2, 5, 6, 3])
    ['<cls>', 'the', 'cat', '<sep>']
    """

    def __init__(self, token_counts=None, min_freq=1, reserved_tokens=()):
        """Build from ``token_counts``, a mapping token -> count."""
        extra = [t for t in reserved_tokens if t not in SPECIAL_TOKENS]
        reserved = list(SPECIAL_TOKENS) + extra
        counted = sorted((-count, token)
                         for token, count in (token_counts or {}).items()
                         if count >= min_freq and token not in reserved)
        self._init_from_list(reserved + [token for _, token in counted],
                             num_reserved=len(reserved))

    @classmethod
    def from_idx_to_token(cls, idx_to_token, num_reserved=len(SPECIAL_TOKENS)):
        """Rebuild a vocabulary from its id -> token list."""
        if tuple(idx_to_token[:len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(f'a vocabulary must start with {SPECIAL_TOKENS}, '
                             f'got {idx_to_token[:len(SPECIAL_TOKENS)]}')
        vocab = cls.__new__(cls)
        vocab._init_from_list(list(idx_to_token), num_reserved)
        return vocab

    def _init_from_list(self, idx_to_token, num_reserved):
        self.idx_to_token = idx_to_token
        self.token_to_idx = {t: i for i, t in enumerate(idx_to_token)}
        if len(self.token_to_idx) != len(idx_to_token):
            raise ValueError('a vocabulary cannot contain a token twice')
        self.num_reserved = num_reserved

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        """One token -> its id, a list/tuple of tokens -> a list of ids.

        Tokens missing from the vocabulary map to the ``<unk>`` id.
        """
        if isinstance(tokens, (list, tuple)):
            get, unk = self.token_to_idx.get, self.unk_id
            return [get(token, unk) for token in tokens]
        return self.token_to_idx.get(tokens, self.unk_id)

    def to_tokens(self, indices):
        """One id -> its token, a sequence of ids -> a list of tokens."""
        if hasattr(indices, '__len__'):
            return [self.idx_to_token[int(i)] for i in indices]
        return self.idx_to_token[int(indices)]

    pad_id = property(lambda self: 0, doc='id of <pad> (always 0)')
    unk_id = property(lambda self: 1, doc='id of <unk> (always 1)')
    cls_id = property(lambda self: 2, doc='id of <cls> (always 2)')
    sep_id = property(lambda self: 3, doc='id of <sep> (always 3)')
    mask_id = property(lambda self: 4, doc='id of <mask> (always 4)')

    @property
    def reserved_tokens(self):
        """The special tokens: ids ``0 .. num_reserved - 1``."""
        return self.idx_to_token[:self.num_reserved]

    def to_json(self):
        return json.dumps({'idx_to_token': self.idx_to_token,
                           'num_reserved': self.num_reserved},
                          ensure_ascii=False)

    def fingerprint(self):
        """A short hash that changes whenever any id changes."""
        return hashlib.sha1(self.to_json().encode('utf-8')).hexdigest()[:16]

    def save(self, path):
        with open(path, 'w', encoding='utf-8') as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path):
        with open(path, encoding='utf-8') as f:
            state = json.load(f)
        return cls.from_idx_to_token(state['idx_to_token'],
                                     state['num_reserved'])

    def __eq__(self, other):
        return (isinstance(other, Vocab)
                and self.idx_to_token == other.idx_to_token
                and self.num_reserved == other.num_reserved)

    def __repr__(self):
        return f'Vocab(size={len(self)}, num_reserved={self.num_reserved})'
