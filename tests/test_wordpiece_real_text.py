"""d2lbert's own WordPiece tokenizer (`data.basic_tokenizer`, `data.wordpiece`) on real
text and a real vocabulary: all-MiniLM-L6-v2's vocab.txt (30522 tokens, Google's English
uncased BERT's), against transformers' BertTokenizer."""
import json
import os
import random

import pytest

from d2lbert.data import WordPieceVocab
from d2lbert.data.basic_tokenizer import basic_tokenize
from test_inputs import minilm_folder
from test_interop_wordpiece import fast_tokenizer, slow_tokenizer

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'data')
SST2_DEV = os.path.join(SHARED, 'sst-2', 'dev.tsv')
SQUAD_SAMPLE = os.path.join(SHARED, 'finetune-samples', 'squad_v1.1_sample.json')
HARD_TEXTS = [
    "Zürich's CAFÉ «Le Sphinx» — crème brûlée at $1,250.50 (U.S.-based)!",
    'ΟΔΟΣ Σίσυφος İstanbul ﬁne Ǆemal ß Ærø ŉ',            # case mappings
    'cafe\u0301 e\u0301cole Zu\u0308rich \u212b',                 # decomposed accents
    '東京と北京市 中国你好 ソウル 서울 (한국어) ｆｕｌｌｗｉｄｔｈ',      # CJK, kana, hangul
    'العَرَبِيَّة हिन्दी ภาษาไทย Tiếng Việt',                      # marks of other scripts
    'tab\there\nnew\rline\u00a0nbsp\u2003em\u3000ideo\u2028line\u2029para',
    'a\x00b\x07c\x1fd\x7fe\u200bf\u200dg\u00adh\ufeffi\ufffdj\ue000k',  # control, format,
    'emoji 🙂👍🏽 math ∑∞≠ ¿¡ ‘single’ “double” …',                       # private use
    'the [MASK] is [CLS]a[SEP] but [mask] is not, [UNK]##s ## #hash',
    'x' * 100 + ' ' + 'y' * 101 + ' antidisestablishmentarianism',
]


def sst2_sentences(count=200, seed=0):
    """count sentences of SST-2's dev set (lower-cased, with spaces around punctuation)."""
    if not os.path.isfile(SST2_DEV):
        pytest.skip(f'{SST2_DEV} is absent')
    with open(SST2_DEV, encoding='utf-8') as f:
        sentences = [line.split('\t')[0] for line in list(f)[1:]]
    return random.Random(seed).sample(sentences, count)


def squad_texts():
    """The contexts and questions of the SQuAD sample (cased prose, accents), if present."""
    if not os.path.isfile(SQUAD_SAMPLE):
        return []
    with open(SQUAD_SAMPLE, encoding='utf-8') as f:
        articles = json.load(f)['data']
    return [text for article in articles for paragraph in article['paragraphs']
            for text in [paragraph['context']] + [qa['question'] for qa in paragraph['qas']]]


@pytest.fixture(scope='module')
def vocab_file():
    return os.path.join(minilm_folder(), 'vocab.txt')


@pytest.mark.parametrize('lowercase', [True, False])
def test_tokens_equal_transformers_bert_tokenizer(vocab_file, lowercase):
    vocab = WordPieceVocab.load(vocab_file, lowercase)
    reference = slow_tokenizer(vocab_file, lowercase)
    for text in sst2_sentences() + squad_texts() + HARD_TEXTS:
        tokens = vocab.tokenize(text)
        assert tokens == reference.tokenize(text), text
        assert vocab[tokens] == reference.encode(text, add_special_tokens=False), text


@pytest.mark.parametrize('lowercase', [True, False])
def test_ascii_text_equals_transformers_bert_tokenizer(vocab_file, lowercase):
    # ASCII text takes a path of its own (`basic_tokenizer.ASCII_STEPS`): every ASCII
    # character, control characters and punctuation among them, in random texts
    vocab = WordPieceVocab.load(vocab_file, lowercase)
    reference = slow_tokenizer(vocab_file, lowercase)
    rng = random.Random(0)
    letters = 'aAeEzZ09 '  # more of these, so that words form
    texts = [''.join(map(chr, range(128)))] + [
        ''.join(rng.choice(letters) if rng.random() < 0.7 else chr(rng.randrange(128))
                for _ in range(40)) for _ in range(300)]
    for text in texts:
        assert vocab.tokenize(text) == reference.tokenize(text), repr(text)


def test_offsets_equal_transformers_fast_tokenizer(vocab_file):
    vocab = WordPieceVocab.load(vocab_file, lowercase=True)
    reference = fast_tokenizer(vocab_file, lowercase=True)
    for text in sst2_sentences() + squad_texts():
        tokens, offsets = vocab.tokenize_with_offsets(text)
        encoded = reference(text, add_special_tokens=False, return_offsets_mapping=True)
        assert tokens == reference.convert_ids_to_tokens(encoded['input_ids']), text
        assert offsets == [tuple(offset) for offset in encoded['offset_mapping']], text


def test_basic_tokenize_examples():
    assert basic_tokenize('Héllo,\tWORLD!\x00 中国', lowercase=True) == [
        'hello', ',', 'world', '!', '中', '国']
    assert basic_tokenize('e\u0301cole $5', lowercase=False) == ['école', '$', '5']
    assert basic_tokenize('private\ue000use zero\u200bwidth', lowercase=True) == [
        'privateuse', 'zerowidth']
