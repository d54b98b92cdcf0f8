"""Tokens with character offsets into the original text: `WordPieceVocab.tokenize_with_offsets`
against transformers' BertTokenizerFast, and the book's word-level tokenizer's offsets."""
import random
import unicodedata

import pytest

from d2lbert.data import WordPieceVocab
from d2lbert.data.squad import word_tokenize_with_offsets
from d2lbert.data.tasks import word_tokenize
from test_interop_wordpiece import TEXTS, TOKENS, fast_tokenizer

MORE_TEXTS = [
    'Ÿ ÀÉÎÕÜ àéîõü ñ ç Ærø ß Ǆemal ﬁne İstanbul ΟΔΟΣ',  # case and accents
    'Tōkyō 東京 and 北京市, ソウル 서울 (한국어)',  # CJK, kana, hangul
    ' leading\u2003em\u3000ideographic\u2009thin\u202fnarrow trailing  ',
    '$1,250.50 (U.S.-based) «quoted» — dash… “curly” ‘single’',
    'a\x01b\u200dc\u00ad\ufeffd',                                   # control, format chars
]
POOL = (list('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')
        + list('.,!?;:\'"()-$%&#@[]{}<>/\\|^`~') + list('éèüñçÉÜÀöÖßæ')
        + list('中国你好日本')
        + [' '] * 12 + list('\t\n\u00a0\u3000\u2003') + ['\x00', '\u200b', '\ufffd', '\x07']
        + ['[MASK]', '[CLS]', '[mask]', '[UNK]'] + TOKENS[8:] * 2 + ['##', '###'])


def random_texts(count, seed):
    rng = random.Random(seed)
    return [''.join(rng.choice(POOL) for _ in range(rng.randrange(0, 40))) for _ in range(count)]


@pytest.fixture(scope='module')
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('offsets') / 'vocab.txt'
    path.write_text(''.join(token + '\n' for token in TOKENS), encoding='utf-8')
    return str(path)


@pytest.mark.parametrize('lowercase', [True, False])
def test_offsets_equal_transformers_fast_tokenizer(vocab_file, lowercase):
    vocab = WordPieceVocab.load(vocab_file, lowercase)
    reference = fast_tokenizer(vocab_file, lowercase)
    for text in TEXTS + MORE_TEXTS + random_texts(300, seed=int(lowercase)):
        tokens, offsets = vocab.tokenize_with_offsets(text)
        encoded = reference(text, add_special_tokens=False, return_offsets_mapping=True)
        assert tokens == vocab.tokenize(text), text
        assert tokens == reference.convert_ids_to_tokens(encoded['input_ids']), text
        assert offsets == [tuple(offset) for offset in encoded['offset_mapping']], text


def test_offsets_cut_the_original_characters(vocab_file):
    vocab = WordPieceVocab.load(vocab_file, lowercase=True)
    text = 'The unaffable Café (ÜBER) 中国, naïve!'
    tokens, offsets = vocab.tokenize_with_offsets(text)
    assert [text[start:end] for start, end in offsets] == [
        'The', 'un', 'aff', 'able', 'Café', '(', 'ÜBER', ')', '中', '国', ',', 'naïve', '!']
    assert tokens[:4] == ['the', 'un', '##aff', '##able'] and tokens[4] == 'cafe'


def test_a_combining_accent_after_the_last_letter_belongs_to_the_word(vocab_file):
    """Hugging Face leaves the mark out of the word's span ('cafe' of 'cafe\u0301');
    the original text of the word is the whole of it."""
    for lowercase in (True, False):
        vocab = WordPieceVocab.load(vocab_file, lowercase)
        text = 'cafe\u0301 e\u0301cole'
        tokens, offsets = vocab.tokenize_with_offsets(text)
        assert tokens == vocab.tokenize(text)
        assert [text[start:end] for start, end in offsets] == ['cafe\u0301', 'e\u0301cole']


def test_word_tokenize_offsets_give_the_same_tokens():
    for text in TEXTS + MORE_TEXTS + random_texts(300, seed=2) + ['İİ x\x1cy Σ ΟΔΟΣ.']:
        tokens, offsets = word_tokenize_with_offsets(text)
        assert tokens == word_tokenize(text), text
        # (a token is its original characters lower-cased, or part of them: 'İ' -> 'i' + U+0307
        # gives two tokens, 'i' and the dot above, both from the one 'İ')
        assert all(token in text[start:end].lower()
                   for token, (start, end) in zip(tokens, offsets)), text
        assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(offsets, offsets[1:])), text
    assert word_tokenize_with_offsets('İ.') == (['i', '\u0307', '.'], [(0, 1), (0, 1), (1, 2)])


def test_cased_composition_beyond_combining_marks(tmp_path):
    """NFC also joins characters that are not combining marks (Hangul jamo): the
    offsets' tokens still equal tokenize's."""
    path = tmp_path / 'vocab.txt'
    path.write_text('[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n한\n##국\nᄒ\n##ᅡ\n##ᆫ\n', encoding='utf-8')
    text = unicodedata.normalize('NFD', '한국 한') + ' 한'
    for lowercase in (True, False):
        vocab = WordPieceVocab.load(str(path), lowercase)
        tokens, offsets = vocab.tokenize_with_offsets(text)
        assert tokens == vocab.tokenize(text)
        words = [text[start:end] for start, end in offsets]
        if not lowercase:  # jamo composed back into syllables
            assert tokens == ['한', '##국', '한', '한'] and words == [text[0:3], text[3:6],
                                                               text[7:10], '한']
