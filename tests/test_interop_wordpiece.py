"""`WordPieceVocab`: ids of a vocab.txt, and tokenization equal to transformers'."""
import pytest

from d2lbert.interop import WordPieceVocab

# A vocab.txt in the layout of Google's English BERTs: [PAD], placeholders, the other
# specials, more placeholders, then words and word pieces (cased and accented forms
# too, for lowercase=False).
TOKENS = (['[PAD]', '[unused0]', '[unused1]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[unused2]']
          + list('abcdefghijklmnopqrstuvwxyz0123456789.,!?;:\'"()-$%&')
          + ['the', 'The', 'un', '##aff', '##able', 'cafe', 'café', 'Café', 'naive', 'naïve',
             'resume', 'résumé', 'über', 'uber', 'hello', 'Hello', 'world', 'play', '##s',
             '##ing', '##ed', '##a', 'is', 'token', '##izer', 'mask', '中', '国', '你', '好',
             '日', '本', 'ecole', 'école', 'zurich', 'Zürich'])
TEXTS = [
    "Hello, world! The unaffable café's naïve résumé (über) plays.",
    'Zürich: ÉCOLE Ecole école; Ecole.',
    '中国你好 hello世界 日本-ok',
    'A tokenizer is playing... $100 & 50% "quoted" it\'s',
    'the [MASK] is [CLS]a[SEP] but [mask] is not special',
    'tabs\tand\nnew lines\u00a0nbsp \u200bzero\x00width \ufffd replacement',
    'unknownwordsxyzzy qqq ' + 'a' * 100 + ' ' + 'a' * 101,  # over 100 chars: [UNK]
    '',
]
# 'é' written as 'e' + a combining accent: the Python tokenizer first composes it (NFC),
# the Rust one keeps it apart (and in cased mode then finds no 'école' in vocab.txt).
DECOMPOSED = 'e\u0301cole Zu\u0308rich'


@pytest.fixture(scope='module')
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('wordpiece') / 'vocab.txt'
    path.write_text(''.join(token + '\n' for token in TOKENS), encoding='utf-8')
    return str(path)


def slow_tokenizer(vocab_file, lowercase):
    """Hugging Face's pure-Python BertTokenizer, the reference for Google's BERT."""
    transformers = pytest.importorskip('transformers')
    try:  # transformers >= 5 calls it BertTokenizerLegacy
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    except ImportError:
        BertTokenizerLegacy = transformers.BertTokenizer
    return BertTokenizerLegacy(vocab_file, do_lower_case=lowercase)


def fast_tokenizer(vocab_file, lowercase):
    """Hugging Face's Rust-backed BertTokenizerFast."""
    transformers = pytest.importorskip('transformers')
    return transformers.BertTokenizerFast(vocab_file, do_lower_case=lowercase)


def assert_same_tokens(vocab, tokenizer, texts):
    for text in texts:
        assert vocab.tokenize(text) == tokenizer.tokenize(text), text
        assert vocab[vocab.tokenize(text)] == tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize('lowercase', [True, False])
def test_tokenize_equals_transformers(vocab_file, lowercase):
    vocab = WordPieceVocab.load(vocab_file, lowercase)
    assert_same_tokens(vocab, slow_tokenizer(vocab_file, lowercase), TEXTS + [DECOMPOSED])
    assert_same_tokens(vocab, fast_tokenizer(vocab_file, lowercase), TEXTS)


def test_tokenize_examples(vocab_file):
    uncased = WordPieceVocab.load(vocab_file, lowercase=True)
    cased = WordPieceVocab.load(vocab_file, lowercase=False)
    assert uncased.tokenize('Unaffable café, [MASK]!') == [
        'un', '##aff', '##able', 'cafe', ',', '[MASK]', '!']
    assert cased.tokenize('Unaffable Café 中国') == ['[UNK]', 'Café', '中', '国']
    assert cased.tokenize(DECOMPOSED) == ['école', 'Zürich']


def test_ids_follow_the_lines_of_vocab_txt(vocab_file):
    vocab = WordPieceVocab.load(vocab_file)
    assert len(vocab) == len(TOKENS) and vocab.idx_to_token == TOKENS
    assert vocab.token_to_idx == {token: i for i, token in enumerate(TOKENS)}
    assert [vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id] == [
        0, 3, 4, 5, 6]
    assert vocab['the'] == TOKENS.index('the') and vocab['never-seen'] == vocab.unk_id
    assert vocab[['[CLS]', 'the', '[SEP]']] == [4, TOKENS.index('the'), 5]
    assert vocab.to_tokens([4, 5]) == ['[CLS]', '[SEP]'] and vocab.to_tokens(6) == '[MASK]'


def test_d2lbert_special_names_look_up_the_same_ids(vocab_file):
    vocab = WordPieceVocab.load(vocab_file)
    assert vocab[['<pad>', '<unk>', '<cls>', '<sep>', '<mask>']] == [0, 3, 4, 5, 6]


def test_reserved_tokens_are_the_leading_specials_and_placeholders(vocab_file):
    vocab = WordPieceVocab.load(vocab_file)
    assert vocab.num_reserved == 8
    assert vocab.reserved_tokens == TOKENS[:8]


def test_save_load_round_trip(vocab_file, tmp_path):
    vocab = WordPieceVocab.load(vocab_file, lowercase=False)
    vocab.save(str(tmp_path / 'vocab.txt'))
    assert (tmp_path / 'vocab.txt').read_text(encoding='utf-8') == ''.join(
        token + '\n' for token in TOKENS)
    assert WordPieceVocab.load(str(tmp_path / 'vocab.txt'), lowercase=False) == vocab
    assert vocab.fingerprint() != WordPieceVocab.load(vocab_file).fingerprint()


def test_vocab_errors_name_the_file(tmp_path):
    path = tmp_path / 'vocab.txt'
    path.write_text('[PAD]\n[UNK]\n[CLS]\n[SEP]\nword\n', encoding='utf-8')
    with pytest.raises(ValueError, match=r"vocab.txt lacks the BERT special token\(s\) "
                                         r"\['\[MASK\]'\]"):
        WordPieceVocab.load(str(path))
    path.write_text('[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\nword\n', encoding='utf-8')
    with pytest.raises(ValueError, match="vocab.txt lists the token 'word' twice"):
        WordPieceVocab.load(str(path))
