"""Fine-tuning data: task readers (real samples, GLUE layouts), IOB tags, encoding
into BERT inputs (compared with Hugging Face's tokenizers) and padded batches."""
import json
import os

import numpy as np
import pytest

from d2lbert.data import DownloadError, Vocab
from d2lbert.data.tasks import (CONLL2003_TAGS, IGNORE_LABEL, SNLI_LABELS, TASKS,
                                TaggedSentence, TaskData, TaskExample, encode_tagged_words,
                                encode_task, encode_text_pair, iob1_to_iob2, load_task,
                                make_task_batch, read_conll2003, read_glue, read_snli,
                                read_task_file, task_batches, truncate_pair,
                                word_predictions, word_tokenize, write_sample)
from d2lbert.interop import WordPieceVocab

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared',
                       'data', 'finetune-samples')
needs_samples = pytest.mark.skipif(not os.path.isdir(SAMPLES),
                                   reason='../shared/data/finetune-samples is absent')


def sample(name):
    return os.path.join(SAMPLES, name)


def write(path, lines, bom=False):
    """Write ``lines`` (lists are joined with tabs) as a UTF-8 file; return its path."""
    text = ''.join(('\t'.join(line) if isinstance(line, list) else line) + '\n'
                   for line in lines)
    path.write_text(('\ufeff' if bom else '') + text, encoding='utf-8')
    return str(path)


# ----------------------------------------------------------------------------- SNLI

SNLI_TXT_HEADER = ['gold_label', 'sentence1_binary_parse', 'sentence2_binary_parse',
                   'sentence1_parse', 'sentence2_parse', 'sentence1', 'sentence2',
                   'captionID', 'pairID', 'label1', 'label2', 'label3', 'label4', 'label5']


def snli_txt_row(record):
    """A row of snli_1.0_*.txt made from a row of snli_1.0_*.jsonl."""
    labels = record['annotator_labels'] + [''] * (5 - len(record['annotator_labels']))
    return [record[c] for c in SNLI_TXT_HEADER[:9]] + labels


@needs_samples
def test_snli_sample_jsonl():
    data = read_snli(sample('snli_sample.jsonl'))
    assert data.labels == SNLI_LABELS == ('entailment', 'contradiction', 'neutral')
    assert data.num_dropped == 0
    assert [e.label for e in data.examples] == ['neutral', 'contradiction', 'entailment']
    assert data.examples[0] == TaskExample(
        'A person on a horse jumps over a broken down airplane.',
        'A person is training his horse for a competition.', 'neutral')


@needs_samples
def test_snli_txt_layout_and_unlabelled_pairs(tmp_path):
    with open(sample('snli_sample.jsonl'), encoding='utf-8') as f:
        records = [json.loads(line) for line in f]
    no_majority = dict(records[0], gold_label='-')
    jsonl = write(tmp_path / 'snli_1.0_dev.jsonl',
                  [json.dumps(r) for r in [records[0], no_majority, *records[1:]]])
    txt = write(tmp_path / 'snli_1.0_dev.txt',
                [SNLI_TXT_HEADER] + [snli_txt_row(r) for r in
                                     [records[0], no_majority, *records[1:]]])
    expected = read_snli(sample('snli_sample.jsonl')).examples
    for path in (jsonl, txt):
        data = read_snli(path)
        assert data.examples == expected and data.num_dropped == 1


def test_snli_errors_name_file_and_line(tmp_path):
    good = json.dumps({'gold_label': 'neutral', 'sentence1': 'a', 'sentence2': 'b'})
    path = write(tmp_path / 'bad.jsonl', [good, good.replace('neutral', 'maybe')])
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: label 'maybe' is not one"):
        read_snli(path)
    path = write(tmp_path / 'bad.jsonl', [good, '', '{"gold_label": "neutral"}'])
    with pytest.raises(ValueError, match=r"bad.jsonl, line 3: no 'sentence1' column"):
        read_snli(path)
    path = write(tmp_path / 'bad.jsonl', ['{"gold_label": "neutral",'])
    with pytest.raises(ValueError, match=r'bad.jsonl, line 1: not valid JSON'):
        read_snli(path)


# ----------------------------------------------------------------------------- GLUE

QUOTED = 'it \'s a " charming and often affecting journey . '  # an unbalanced quote
GLUE_FILES = {  # task: (file name, rows in GLUE's layout, expected (text, pair, label)s)
    'cola': ('train.tsv', [
        ['gj04', '1', '', "Our friends won't buy this analysis, let alone the next one."],
        ['gj04', '0', '*', 'They drank the pub "dry.'],
    ], [("Our friends won't buy this analysis, let alone the next one.", None, '1'),
        ('They drank the pub "dry.', None, '0')]),
    'sst2': ('dev.tsv', [
        ['sentence', 'label'], [QUOTED, '1'], ['unflinchingly bleak and desperate ', '0'],
    ], [(QUOTED, None, '1'), ('unflinchingly bleak and desperate ', None, '0')]),
    'mrpc': ('train.tsv', [
        ['Quality', '#1 ID', '#2 ID', '#1 String', '#2 String'],
        ['1', '702876', '702977', 'Amrozi accused his brother , whom he called " the '
         'witness " , of deliberately distorting his evidence .', 'Referring to him as '
         'only " the witness " , Amrozi accused his brother .'],
        ['0', '2108705', '2108831', "Yucaipa owned Dominick 's before selling the chain .",
         "Yucaipa bought Dominick 's in 1995 ."],
    ], [('Amrozi accused his brother , whom he called " the witness " , of deliberately '
         'distorting his evidence .', 'Referring to him as only " the witness " , Amrozi '
         'accused his brother .', '1'),
        ("Yucaipa owned Dominick 's before selling the chain .",
         "Yucaipa bought Dominick 's in 1995 .", '0')]),
    'stsb': ('train.tsv', [
        ['index', 'genre', 'filename', 'year', 'old_index', 'source1', 'source2',
         'sentence1', 'sentence2', 'score'],
        ['0', 'main-captions', 'MSRvid', '2012test', '0001', 'none', 'none',
         'A plane is taking off.', 'An air plane is taking off.', '5.000'],
        ['1', 'main-news', 'headlines', '2013', '0', 'none', 'none',
         '"Obama signs', 'Obama signs bill', '3.200'],
    ], [('A plane is taking off.', 'An air plane is taking off.', 5.0),
        ('"Obama signs', 'Obama signs bill', 3.2)]),
    'qqp': ('dev.tsv', [
        ['id', 'qid1', 'qid2', 'question1', 'question2', 'is_duplicate'],
        ['201359', '303345', '303346', 'Why are African-Americans so beautiful?',
         'Why are hispanics so beautiful?', '0'],
        ['402555', '536040', '536041', 'How do I control my "horny emotions?',
         'How do you control your horniness?', '1'],
    ], [('Why are African-Americans so beautiful?', 'Why are hispanics so beautiful?', '0'),
        ('How do I control my "horny emotions?', 'How do you control your horniness?',
         '1')]),
    'mnli': ('dev_matched.tsv', [
        ['index', 'promptID', 'pairID', 'genre', 'sentence1_binary_parse',
         'sentence2_binary_parse', 'sentence1_parse', 'sentence2_parse', 'sentence1',
         'sentence2', 'label1', 'label2', 'label3', 'label4', 'label5', 'gold_label'],
        ['0', '63735', '63735n', 'slate',
         '( ( The ( new rights ) ) ( are ( nice enough ) ) )',
         '( Everyone ( really ( likes ( the ( newest benefits ) ) ) ) )',
         '(ROOT (S (NP (DT The) (JJ new) (NNS rights)) (VP (VBP are) (ADJP (JJ nice) '
         '(RB enough)))))',
         '(ROOT (S (NP (NN Everyone)) (VP (ADVP (RB really)) (VBZ likes) (NP (DT the) '
         '(JJS newest) (NNS benefits)))))',
         'The new rights are nice enough',
         'Everyone really likes the newest benefits ', 'neutral', 'entailment', 'neutral',
         'neutral', 'neutral', 'neutral'],
    ], [('The new rights are nice enough', 'Everyone really likes the newest benefits ',
         'neutral')]),
    'qnli': ('train.tsv', [
        ['index', 'question', 'sentence', 'label'],
        ['0', 'When did the third Digimon series begin?', 'Unlike the two seasons before '
         'it, it was "darker.', 'not_entailment'],
    ], [('When did the third Digimon series begin?',
         'Unlike the two seasons before it, it was "darker.', 'not_entailment')]),
    'rte': ('dev.tsv', [
        ['index', 'sentence1', 'sentence2', 'label'],
        ['0', 'Dana Reeve, the widow of the actor, died at 44.',
         'Christopher Reeve had an accident.', 'not_entailment'],
        ['1', 'Yet, we now are discovering that antibiotics are losing their '
         'effectiveness.', 'Bacteria is winning the war against antibiotics.',
         'entailment'],
    ], [('Dana Reeve, the widow of the actor, died at 44.',
         'Christopher Reeve had an accident.', 'not_entailment'),
        ('Yet, we now are discovering that antibiotics are losing their effectiveness.',
         'Bacteria is winning the war against antibiotics.', 'entailment')]),
    'wnli': ('train.tsv', [
        ['index', 'sentence1', 'sentence2', 'label'],
        ['0', 'I stuck a pin through a carrot. When I pulled the pin out, it had a hole.',
         'The carrot had a hole.', '1'],
    ], [('I stuck a pin through a carrot. When I pulled the pin out, it had a hole.',
         'The carrot had a hole.', '1')]),
}
NLI_TEST_HEADER = ['index', 'sentence1', 'sentence2']
GLUE_TEST_FILES = {  # the test files have no label column: (header, text and pair columns)
    'cola': (['index', 'sentence'], 'sentence', None),
    'sst2': (['index', 'sentence'], 'sentence', None),
    'mrpc': (['index', '#1 ID', '#2 ID', '#1 String', '#2 String'], '#1 String',
             '#2 String'),
    'stsb': (['index', 'genre', 'filename', 'year', 'old_index', 'source1', 'source2',
              'sentence1', 'sentence2'], 'sentence1', 'sentence2'),
    'qqp': (['id', 'question1', 'question2'], 'question1', 'question2'),
    'mnli': (['index', 'promptID', 'pairID', 'genre', 'sentence1_binary_parse',
              'sentence2_binary_parse', 'sentence1_parse', 'sentence2_parse', 'sentence1',
              'sentence2'], 'sentence1', 'sentence2'),
    'qnli': (['index', 'question', 'sentence'], 'question', 'sentence'),
    'rte': (NLI_TEST_HEADER, 'sentence1', 'sentence2'),
    'wnli': (NLI_TEST_HEADER, 'sentence1', 'sentence2'),
}


@pytest.mark.parametrize('task', sorted(GLUE_FILES))
def test_glue_layouts(task, tmp_path):
    file_name, rows, expected = GLUE_FILES[task]
    data = read_glue(task, write(tmp_path / file_name, rows, bom=task == 'mrpc'))
    assert [(e.text, e.text_pair, e.label) for e in data.examples] == expected
    if task == 'stsb':
        assert data.labels is None
    else:
        assert all(e.label in data.labels for e in data.examples)
    # the same texts in the test file's layout: labels None
    header, text_column, pair_column = GLUE_TEST_FILES[task]
    test_rows = [[{text_column: text, pair_column: pair}.get(column, '7')
                  for column in header] for text, pair, _ in expected]
    data = read_glue(task, write(tmp_path / 'test.tsv', [header] + test_rows))
    assert [(e.text, e.text_pair, e.label) for e in data.examples] == [
        (text, pair, None) for text, pair, _ in expected]


@needs_samples
def test_stsb_sample():
    data = read_glue('stsb', sample('stsb_dev_sample.tsv'))
    assert len(data.examples) == 9 and data.labels is None
    assert data.examples[3] == TaskExample('A woman is playing the guitar.',
                                           'A man is playing guitar.', 2.4)
    assert [e.label for e in data.examples][-2:] == [2.333, 3.75]


def test_glue_errors_name_file_and_line(tmp_path):
    rows = [['sentence', 'label'], ['good', '1'], ['a\ttab inside', '0']]
    with pytest.raises(ValueError, match=r"sst.tsv, line 3: 3 fields, but the header "
                                         r"\(line 1\) has 2"):
        read_glue('sst2', write(tmp_path / 'sst.tsv', rows))
    rows = [['sentence', 'label'], ['good', '1'], ['bad', '2']]
    with pytest.raises(ValueError, match=r"sst.tsv, line 3: label '2' is not one of "
                                         r"the task's labels \('0', '1'\)"):
        read_glue('sst2', write(tmp_path / 'sst.tsv', rows))
    rows = [['gj04', '1', '', 'Fine.'], ['gj04', '1', 'Missing a column.']]
    with pytest.raises(ValueError, match=r"cola.tsv, line 2: 3 fields, but this file's "
                                         r"layout has 4"):
        read_glue('cola', write(tmp_path / 'cola.tsv', rows))
    _, rows, _ = GLUE_FILES['stsb']
    with pytest.raises(ValueError, match=r"sts.tsv, line 2: the score 'n/a' is not"):
        read_glue('stsb', write(tmp_path / 'sts.tsv', [rows[0], rows[1][:-1] + ['n/a']]))
    with pytest.raises(ValueError, match=r"rte.tsv, line 2: no 'sentence2' column"):
        read_glue('rte', write(tmp_path / 'rte.tsv', [['index', 'sentence1', 'label'],
                                                      ['0', 'A.', 'entailment']]))
    with pytest.raises(ValueError, match='unknown GLUE task'):
        read_glue('sts-b', write(tmp_path / 'rte.tsv', []))


# ----------------------------------------------------------------------------- CoNLL-2003

@needs_samples
def test_conll2003_samples():
    data = read_conll2003(sample('conll2003_sample_allennlp.txt'))  # tabs, IOB1
    assert data.labels == CONLL2003_TAGS and len(data.examples) == 2
    assert data.examples[0] == TaggedSentence(
        ['U.N.', 'official', 'Ekeus', 'heads', 'for', 'Baghdad', '.'],
        ['B-ORG', 'O', 'B-PER', 'O', 'O', 'B-LOC', 'O'])
    data = read_conll2003(sample('conll2003_sample_gluonnlp.txt'), to_iob2=False)
    assert [s.words for s in data.examples] == [
        ['EU', 'rejects', 'German', 'call', 'to', 'boycott', 'British', 'lamb', '.'],
        ['Peter', 'Blackburn']]  # the sentence cut short by the end of the file is kept
    assert data.examples[1].tags == ['I-PER', 'I-PER']
    assert read_conll2003(sample('conll2003_sample_gluonnlp.txt')).examples[1].tags == [
        'B-PER', 'I-PER']


def test_conll2003_errors_name_file_and_line(tmp_path):
    path = write(tmp_path / 'eng.train', ['-DOCSTART- -X- -X- O', '', 'EU NNP I-NP I-ORG',
                                          'rejects VBZ I-VP I-FOO'])
    with pytest.raises(ValueError, match=r"eng.train, line 4: label 'I-FOO' is not one"):
        read_conll2003(path)
    path = write(tmp_path / 'eng.train', ['EU NNP I-NP I-ORG', 'rejects'])
    with pytest.raises(ValueError, match=r'eng.train, line 2: expected "word ... tag"'):
        read_conll2003(path)


def test_iob1_to_iob2():
    assert iob1_to_iob2(['I-PER', 'I-PER', 'O', 'I-LOC', 'B-LOC', 'I-LOC', 'I-ORG']) == [
        'B-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC', 'I-LOC', 'B-ORG']
    iob2 = ['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC', 'B-ORG', 'I-ORG']
    assert iob1_to_iob2(iob2) == iob2
    assert iob1_to_iob2([]) == [] and iob1_to_iob2(['O', 'O']) == ['O', 'O']
    with pytest.raises(ValueError, match="'E-PER' is not an IOB tag"):
        iob1_to_iob2(['O', 'E-PER'])


def test_iob1_and_iob2_give_the_same_entities():
    from seqeval.metrics.sequence_labeling import get_entities
    rng = np.random.default_rng(0)
    tags = ['O', 'B-PER', 'I-PER', 'B-LOC', 'I-LOC']
    for _ in range(200):
        sentence = list(rng.choice(tags, size=rng.integers(0, 12)))
        converted = iob1_to_iob2(sentence)
        assert get_entities(converted) == get_entities(sentence)
        assert all(not t.startswith('I-') or (p != 'O' and p[2:] == t[2:])
                   for p, t in zip(['O'] + converted, converted))  # valid IOB2


# ----------------------------------------------------------------------------- own files

def test_own_csv_tsv_jsonl(tmp_path):
    csv_path = tmp_path / 'train.csv'
    csv_path.write_text('text,text_pair,label\n"A man, asleep.",A person rests.,yes\n'
                        'Cats.,,no\n', encoding='utf-8')
    expected = [TaskExample('A man, asleep.', 'A person rests.', 'yes'),
                TaskExample('Cats.', None, 'no')]
    tsv = write(tmp_path / 'train.tsv', [['label', 'text', 'text_pair'],
                                         ['yes', 'A man, asleep.', 'A person rests.'],
                                         ['no', 'Cats.', '']])
    jsonl = write(tmp_path / 'train.jsonl', [
        '{"text": "A man, asleep.", "text_pair": "A person rests.", "label": "yes"}',
        '{"text": "Cats.", "label": "no"}'])
    for path in (str(csv_path), tsv, jsonl):
        assert read_task_file(path) == TaskData(expected, ('no', 'yes'))
    assert read_task_file(jsonl, labels=('yes', 'no', 'maybe')).labels == (
        'yes', 'no', 'maybe')


def test_own_file_regression_and_unlabelled(tmp_path):
    jsonl = write(tmp_path / 'scores.jsonl', ['{"text": "a", "label": 4}',
                                              '{"text": "b", "label": "0.5"}'])
    assert read_task_file(jsonl, label_type='number') == TaskData(
        [TaskExample('a', None, 4.0), TaskExample('b', None, 0.5)], None)
    assert read_task_file(jsonl).labels == ('0.5', '4')  # class names, as strings
    test = write(tmp_path / 'test.csv', ['text', 'a', 'b'])
    assert read_task_file(test, labels=('neg', 'pos')) == TaskData(
        [TaskExample('a'), TaskExample('b')], ('neg', 'pos'))


def test_own_file_errors_name_file_and_line(tmp_path):
    path = write(tmp_path / 'dev.csv', ['text,label', 'a,pos', 'b,meh'])
    with pytest.raises(ValueError, match=r"dev.csv, line 3: label 'meh' is not one"):
        read_task_file(path, labels=('neg', 'pos'))
    path = write(tmp_path / 'dev.csv', ['text,label', 'a,pos', 'b,'])
    with pytest.raises(ValueError, match=r'dev.csv, line 3: no label, but other rows'):
        read_task_file(path)
    path = write(tmp_path / 'dev.csv', ['sentence,label', 'a,pos'])
    with pytest.raises(ValueError, match=r"dev.csv, line 2: no 'text' column"):
        read_task_file(path)
    path = write(tmp_path / 'dev.jsonl', ['{"text": "a", "label": "high"}'])
    with pytest.raises(ValueError, match=r"dev.jsonl, line 1: the score 'high' is not"):
        read_task_file(path, label_type='number')
    with pytest.raises(ValueError, match='cannot tell the format'):
        read_task_file(str(tmp_path / 'dev.xlsx'))
    with pytest.raises(ValueError, match='label_type must be one of'):
        read_task_file(path, label_type='float')


# ----------------------------------------------------------------------------- load_task

def test_load_task_from_a_folder_or_file(tmp_path):
    for task, split in (('rte', 'dev'), ('mnli', 'dev_matched')):
        file_name, rows, expected = GLUE_FILES[task]
        (tmp_path / task).mkdir()
        write(tmp_path / task / file_name, rows)
        data = load_task(task, split, data=str(tmp_path / task))
        assert [e.text for e in data.examples] == [text for text, _, _ in expected]
    with pytest.raises(FileNotFoundError, match=r"holds none of \['test.tsv'\]"):
        load_task('rte', 'test', data=str(tmp_path / 'rte'))
    with pytest.raises(ValueError, match=r"splits \('train', 'dev_matched'"):
        load_task('mnli', 'dev', data=str(tmp_path / 'mnli'))
    conll = tmp_path / 'conll'
    conll.mkdir()
    write(conll / 'eng.testa', ['-DOCSTART- -X- O O', '', 'Peter NNP I-NP I-PER'])
    assert load_task('conll2003', 'dev', data=str(conll)).examples == [
        TaggedSentence(['Peter'], ['B-PER'])]
    with pytest.raises(ValueError, match='unknown task'):
        load_task('squad')
    assert TASKS == ('snli', 'cola', 'sst2', 'mrpc', 'stsb', 'qqp', 'mnli', 'qnli',
                     'rte', 'wnli', 'conll2003')


@needs_samples
def test_load_task_from_a_sample_file():
    data = load_task('snli', data=sample('snli_sample.jsonl'))
    assert data == read_snli(sample('snli_sample.jsonl'))


def test_tasks_without_a_download_say_how_to_pass_a_path(tmp_path, monkeypatch):
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))
    with pytest.raises(DownloadError, match=r"folder holding train.tsv, dev.tsv and "
                                            r"test.tsv as the data"):
        load_task('mrpc')
    with pytest.raises(DownloadError, match=r"give a copy as the data"):
        load_task('conll2003', 'test')
    with pytest.raises(FileNotFoundError, match='neither a file nor a folder'):
        load_task('cola', data=str(tmp_path / 'nowhere'))


# ----------------------------------------------------------------------------- encoding

WORDPIECES = (['[PAD]', '[unused0]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
              + list('abcdefghijklmnopqrstuvwxyz.,!?\'"-')
              + ['the', 'man', 'woman', 'is', 'sleep', '##ing', '##s', 'play', '##ed',
                 'guitar', 'horse', 'black', '##burn', 'peter', 'un', '##aff', '##able',
                 'person', 'rest', 'on', 'jump', 'over', 'air', '##plane'])


@pytest.fixture(scope='module')
def wordpiece_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('wordpiece') / 'vocab.txt'
    path.write_text(''.join(token + '\n' for token in WORDPIECES), encoding='utf-8')
    return str(path)


def hf_tokenizer(vocab_file, fast):
    """Hugging Face's BertTokenizer: the pure-Python one truncates pairs as Google's BERT
    and the book do; the Rust-backed one (needed for word_ids) gives a leftover token to
    the originally longer text instead of the first (both agree on single texts)."""
    transformers = pytest.importorskip('transformers')
    transformers.logging.set_verbosity_error()
    if fast:
        return transformers.BertTokenizerFast(vocab_file, do_lower_case=True)
    try:  # transformers >= 5 calls it BertTokenizerLegacy
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    except ImportError:
        BertTokenizerLegacy = transformers.BertTokenizer
    return BertTokenizerLegacy(vocab_file, do_lower_case=True)


def random_text(rng, min_words=0):
    words = ['The', 'man', 'is', 'sleeping', 'a', 'woman', 'played', 'guitar,',
             'horses!', 'Blackburn', 'unaffable', 'airplane.', 'zzz', '"quoted"', 'over']
    return ' '.join(rng.choice(words, size=rng.integers(min_words, 9)))


def test_word_tokenize_and_book_vocab():
    assert word_tokenize('A man, sleeping.  "Yes"') == [
        'a', 'man', ',', 'sleeping', '.', '"', 'yes', '"']
    vocab = Vocab({'a': 5, 'man': 4, 'sleeping': 3, ',': 2, '.': 2, 'woman': 1})
    ids, segments, valid_len = encode_text_pair('A man, sleeping.', 'A woman.', vocab, 16)
    assert vocab.to_tokens(ids) == ['<cls>', 'a', 'man', ',', 'sleeping', '.', '<sep>',
                                    'a', 'woman', '.', '<sep>']
    assert segments == [0] * 7 + [1] * 4 and valid_len == 11
    ids, segments, valid_len = encode_text_pair('A man, sleeping.', 'A woman.', vocab, 8)
    assert vocab.to_tokens(ids) == ['<cls>', 'a', 'man', ',', '<sep>', 'a', 'woman',
                                    '<sep>']
    assert segments == [0] * 5 + [1] * 3 and valid_len == 8
    ids, segments, _ = encode_text_pair('Unknown man', None, vocab, 8)
    assert vocab.to_tokens(ids) == ['<cls>', '<unk>', 'man', '<sep>']
    assert segments == [0] * 4


def test_tokenizer_choices(wordpiece_file):
    vocab = Vocab({'x': 1})
    ids, _, _ = encode_text_pair('A B', None, vocab, 8, tokenize=lambda text: ['x'] * 3)
    assert ids == [vocab.cls_id] + [vocab['x']] * 3 + [vocab.sep_id]
    wordpieces = WordPieceVocab.load(wordpiece_file)
    ids, _, _ = encode_text_pair('Blackburn', None, vocab, 8, tokenize=wordpieces)
    assert vocab.to_tokens(ids) == ['<cls>', '<unk>', '<unk>', '<sep>']  # black ##burn
    ids, _, _ = encode_text_pair('Blackburn', None, wordpieces, 8)  # its own tokenize
    assert wordpieces.to_tokens(ids) == ['[CLS]', 'black', '##burn', '[SEP]']
    with pytest.raises(ValueError, match='max_len=2 leaves no room'):
        encode_text_pair('a', 'b', vocab, 2)


def test_truncation_is_longest_first():
    assert truncate_pair('abcdef', 'xy', 5) == (list('abc'), list('xy'))
    assert truncate_pair('abc', 'xyz', 4) == (list('ab'), list('xy'))
    assert truncate_pair('abc', 'xyz', 5) == (list('abc'), list('xy'))  # ties: b first
    assert truncate_pair('ab', '', 1) == (['a'], [])
    assert truncate_pair('ab', 'x', 0) == ([], [])


@pytest.mark.parametrize('max_len', [5, 8, 12, 64])
def test_pairs_equal_hugging_face(wordpiece_file, max_len):
    tokenizer = hf_tokenizer(wordpiece_file, fast=False)
    vocab = WordPieceVocab.load(wordpiece_file)
    rng = np.random.default_rng(max_len)
    for _ in range(60):  # (transformers takes an empty second text for none)
        text = random_text(rng)
        pair = random_text(rng, min_words=1) if rng.random() < 0.7 else None
        expected = tokenizer(text, pair, truncation='longest_first', max_length=max_len,
                             return_token_type_ids=True)
        ids, segments, valid_len = encode_text_pair(text, pair, vocab, max_len)
        assert ids == expected['input_ids'], (text, pair)
        assert segments == expected['token_type_ids'] and valid_len == len(ids)


def test_tagging_labels_equal_hugging_face_alignment(wordpiece_file):
    """The usual Hugging Face token classification recipe: the first piece of every
    word (word_ids) carries its label, everything else -100."""
    tokenizer = hf_tokenizer(wordpiece_file, fast=True)
    vocab = WordPieceVocab.load(wordpiece_file)
    rng = np.random.default_rng(1)
    for max_len in (4, 7, 32):
        for _ in range(40):
            words = random_text(rng).split()
            tag_ids = list(rng.integers(0, 9, size=len(words)))
            expected = tokenizer(words, is_split_into_words=True, truncation=True,
                                 max_length=max_len)
            word_ids = expected.word_ids()
            expected_labels = [IGNORE_LABEL if w is None or w == p else int(tag_ids[w])
                               for p, w in zip([None] + word_ids, word_ids)]
            ids, segments, valid_len, labels = encode_tagged_words(
                words, tag_ids, vocab, max_len)
            assert ids == expected['input_ids'] and labels == expected_labels, words
            assert segments == [0] * valid_len and valid_len == len(ids)


def test_tagging_pieces_and_decoding():
    vocab = Vocab({'peter': 1, 'u': 1, 'n': 1, '.': 1})
    ids, _, _, labels = encode_tagged_words(['Peter', 'U.N.', '\xa0', 'ok'],
                                            [1, 3, 0, 0], vocab, 16)
    assert vocab.to_tokens(ids) == ['<cls>', 'peter', 'u', '.', 'n', '.', '<unk>',
                                    '<unk>', '<sep>']  # a no-break space has no token
    assert labels == [-1, 1, 3, -1, -1, -1, 0, 0, -1]
    predicted = [7, 2, 4, 5, 5, 5, 0, 1, 7]
    assert word_predictions(predicted, labels) == [2, 4, 0, 1]
    ids, _, _, labels = encode_tagged_words(['Peter', 'U.N.', 'ok'], [1, 3, 0], vocab, 4)
    assert labels == [-1, 1, 3, -1] and len(ids) == 4  # 'ok' is cut off
    with pytest.raises(ValueError, match='2 words but 1 tags'):
        encode_tagged_words(['a', 'b'], [0], vocab, 8)


@needs_samples
def test_encode_task_samples():
    vocab = Vocab({'a': 3, 'person': 3, 'horse': 2})
    encoded = encode_task(read_snli(sample('snli_sample.jsonl')), vocab, max_len=12)
    assert [e.label for e in encoded] == [2, 1, 0]  # neutral, contradiction, entailment
    assert all(e.valid_len == 12 for e in encoded)
    assert [e.label for e in encode_task(read_glue('stsb', sample('stsb_dev_sample.tsv')),
                                         vocab, 32)][:2] == [5.0, 4.75]
    data = read_conll2003(sample('conll2003_sample_allennlp.txt'))
    encoded = encode_task(data, vocab, 32)
    first_pieces = [label for label in encoded[0].label if label != IGNORE_LABEL]
    assert [data.labels[i] for i in first_pieces] == data.examples[0].tags


# ----------------------------------------------------------------------------- batches

def test_batches_pad_each_kind_of_label():
    vocab = Vocab({'a': 1, 'b': 1})
    examples = [TaskExample('a b a', 'b', 'yes'), TaskExample('a', None, 'no')]
    encoded = encode_task(TaskData(examples, ('no', 'yes')), vocab, 16)
    batch = make_task_batch(encoded)
    a, b = vocab['a'], vocab['b']
    assert batch.tokens.tolist() == [[2, a, b, a, 3, b, 3], [2, a, 3, 0, 0, 0, 0]]
    assert batch.segments.tolist() == [[0, 0, 0, 0, 0, 1, 1], [0] * 7]
    assert batch.valid_lens.tolist() == [7, 3] and batch.labels.tolist() == [1, 0]
    assert [a.dtype for a in batch] == [np.int32] * 4
    batch = make_task_batch(encoded, pad_id=9, seq_len=10)
    assert batch.tokens.shape == (2, 10) and batch.tokens[1, 3:].tolist() == [9] * 7
    with pytest.raises(ValueError, match='more than seq_len=5'):
        make_task_batch(encoded, seq_len=5)
    scores = encode_task(TaskData([TaskExample('a', 'b', 0.5)] * 3, None), vocab, 8)
    labels = make_task_batch(scores).labels
    assert labels.dtype == np.float32 and labels.tolist() == [0.5] * 3
    assert make_task_batch(encode_task(TaskData(
        [TaskExample('a')], ('x',)), vocab, 8)).labels is None
    tagged = encode_task(TaskData([TaggedSentence(['a', 'b'], ['B-X', 'O']),
                                   TaggedSentence(['b'], ['O'])], ('O', 'B-X')), vocab, 8)
    batch = make_task_batch(tagged)
    assert batch.labels.dtype == np.int32 and batch.labels.tolist() == [
        [-1, 1, 0, -1], [-1, 0, -1, -1]]
    with pytest.raises(ValueError, match='mixes labels'):
        make_task_batch([encoded[0], scores[0]])


def test_task_batches_cover_every_example_once():
    vocab = Vocab({'a': 1})
    data = TaskData([TaskExample('a ' * n, None, str(n % 2)) for n in range(11)],
                    ('0', '1'))
    encoded = encode_task(data, vocab, 16)
    batches = list(task_batches(encoded, 4))
    assert [len(b.valid_lens) for b in batches] == [4, 4, 3]
    assert np.concatenate([b.valid_lens for b in batches]).tolist() == [
        n + 2 for n in range(11)]
    shuffled = list(task_batches(encoded, 4, shuffle=True, seed=3))
    lengths = np.concatenate([b.valid_lens for b in shuffled])
    assert sorted(lengths.tolist()) == [n + 2 for n in range(11)]
    assert lengths.tolist() != [n + 2 for n in range(11)]
    again = np.concatenate([b.valid_lens for b in task_batches(encoded, 4, shuffle=True,
                                                                seed=3)])
    assert again.tolist() == lengths.tolist()


def test_a_sample_is_fixed_rows_of_the_file_in_its_order_under_its_header(tmp_path):
    """write_sample keeps the header and draws `size` distinct data rows, in the file's
    order, the same for the same seed and others for another (NumPy's generator is
    the reference: its choice of row indices, sorted)."""
    source = tmp_path / 'train.tsv'
    rows = [f'sentence {i}\t{i % 2}\n' for i in range(50)]
    write(source, ['sentence\tlabel'] + [row.rstrip('\n') for row in rows])

    def drawn(seed, name):
        with open(write_sample(str(source), str(tmp_path / name), 10, seed),
                  encoding='utf-8') as f:
            return f.readlines()
    first, again, other = drawn(0, 'a.tsv'), drawn(0, 'b.tsv'), drawn(1, 'c.tsv')
    chosen = sorted(np.random.default_rng(0).choice(50, 10, replace=False))
    assert first == ['sentence\tlabel\n'] + [rows[i] for i in chosen]
    assert again == first and other != first
    with pytest.raises(ValueError, match='50 rows, fewer than the 51'):
        write_sample(str(source), str(tmp_path / 'd.tsv'), 51)
    before = source.read_text(encoding='utf-8')
    (tmp_path / 'link.tsv').symlink_to(source)
    for target in (source, tmp_path / 'link.tsv'):
        with pytest.raises(FileExistsError):
            write_sample(str(source), str(target), 10)
    assert source.read_text(encoding='utf-8') == before


@pytest.fixture
def caller_csv_limit():
    """The process's csv.field_size_limit set to 1,000 by the caller, then restored."""
    import csv
    previous = csv.field_size_limit(1000)
    yield 1000
    csv.field_size_limit(previous)


def test_table_reads_leave_the_processs_csv_limit_as_it_was(tmp_path, caller_csv_limit):
    """A field of 200,000 characters (over csv's default limit and the caller's) is read,
    from a TSV and a quoted CSV, and csv.field_size_limit is the caller's again after the
    whole file, and after a file abandoned at its first row."""
    import csv
    from d2lbert.data.tasks.tables import delimited_rows
    long_text = 'river ' * 33_334
    (tmp_path / 'long.tsv').write_text(f'text\tlabel\n{long_text}\tyes\nshort\tno\n')
    (tmp_path / 'long.csv').write_text(f'text,label\n"{long_text}, long",yes\nshort,no\n')
    rows = list(delimited_rows(tmp_path / 'long.tsv'))
    assert rows == [(1, ['text', 'label']), (2, [long_text, 'yes']), (3, ['short', 'no'])]
    assert csv.field_size_limit() == caller_csv_limit
    rows = list(delimited_rows(tmp_path / 'long.csv', ',', csv.QUOTE_MINIMAL))
    assert rows[1] == (2, [f'{long_text}, long', 'yes'])
    assert csv.field_size_limit() == caller_csv_limit
    unfinished = delimited_rows(tmp_path / 'long.tsv')
    assert next(unfinished) == (1, ['text', 'label'])
    assert csv.field_size_limit() == caller_csv_limit
