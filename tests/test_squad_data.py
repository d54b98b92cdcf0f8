"""SQuAD data: reading (and its errors), windows against transformers' overflowing
tokenization, batches, the "oracle" through the real pre- and post-processing, the
bundled-corpus task, and the shared real SQuAD rows."""
import collections
import json
import logging
import os
import re

import numpy as np
import pytest

from d2lbert.data import Vocab, WordPieceVocab
from d2lbert.data.squad import (NO_ANSWER, QAWindow, SquadFormatError, baseline_predictions,
                                bundled_squad_task, make_windows, qa_batch, qa_batches,
                                qa_training_batches, read_squad, write_squad_json)
from d2lbert.data.squad.generated import QUESTION_FORMS
from d2lbert.data.squad.tokenize import tokenize_with_offsets_for
from d2lbert.data.basic_tokenizer import basic_words
from d2lbert.finetuning.qa_predictions import best_answers, window_spans, write_prediction_files
from d2lbert.finetuning.squad_metric import gold_answers, squad_evaluate

SHARED_SAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', 'shared', 'data',
                             'finetune-samples', 'squad_v1.1_sample.json')

SHORT = ("Zürich's Café «Le Sphinx» opened on 12 March 1921, serving crème brûlée at "
         "$1,250.50 per kilo (U.S.-based prices!). Its founder, Ana-María Núñez, came from "
         "Säo Tomé; she wrote 'Le Goût' in 1933.")
FACTS = ['The lighthouse keeper was named Ödön Vörös.',
         'Its lamp burned 3.75 litres of whale oil per night.',
         'The island\'s only café, "Chez Zoë", sold crêpes.',
         'In 1888 the bell weighed 1,024 kg.']


def filler(i):
    return (f'Sentence {i} describes the weather on day number {i * 7 % 31}, which was '
            f'{"cold" if i % 3 else "windy"} and grey.')


def long_passage():
    """~1000 word pieces of filler, facts far into it (past the first windows);
    returns (passage, {fact: start offset})."""
    sentences, starts, length = [], {}, 0
    for i in range(60):
        sentence = FACTS[(i - 15) // 12] if i in (15, 27, 39, 51) else filler(i)
        if sentence in FACTS:
            starts[sentence] = length
        sentences.append(sentence)
        length += len(sentence) + 1
    return ' '.join(sentences), starts


def qa(qas_id, question, context, answers=(), impossible=False):
    return {'id': qas_id, 'question': question, 'is_impossible': impossible,
            'answers': [{'text': text, 'answer_start': context.index(text)}
                        for text in answers]}


def oracle_squad():
    """A SQuAD 2.0 dict written for these tests: answers with punctuation, accents,
    numbers, several gold answers, and answers in later windows of a long passage."""
    passage, _ = long_passage()
    short_qas = [
        qa('s1', 'Where was the café?', SHORT, ["Zürich"]),
        qa('s2', 'What was the café called?', SHORT, ['«Le Sphinx»', 'Le Sphinx']),
        qa('s3', 'When did it open?', SHORT, ['12 March 1921']),
        qa('s4', 'What did a kilo cost?', SHORT, ['$1,250.50']),
        qa('s5', 'Whose prices?', SHORT, ['U.S.-based prices!']),
        qa('s6', 'Who founded it?', SHORT, ['Ana-María Núñez']),
        qa('s7', 'Where did she come from?', SHORT, ['Säo Tomé']),
        qa('s8', 'What did she write?', SHORT, ["'Le Goût'"]),
        qa('s9', 'Who painted the café?', SHORT, impossible=True),
    ]
    long_qas = [
        qa('l1', 'Who kept the lighthouse?', passage, ['Ödön Vörös']),
        qa('l2', 'How much oil did the lamp burn?', passage, ['3.75 litres']),
        qa('l3', 'What was the café called?', passage, ['"Chez Zoë"']),
        qa('l4', 'How heavy was the bell?', passage, ['1,024 kg']),
        qa('l5', 'What colour was the lighthouse?', passage, impossible=True),
        qa('l6', 'What was the weather on day 40?', passage, impossible=True),
    ]
    return {'version': 'v2.0', 'data': [
        {'title': 'Café', 'paragraphs': [{'context': SHORT, 'qas': short_qas}]},
        {'title': 'Island', 'paragraphs': [{'context': passage, 'qas': long_qas}]}]}


def wordpiece_vocab(squad, lowercase, path):
    """A vocab.txt of the texts' words; every other word only as single-character
    pieces, so many words (and answers) span several pieces."""
    words = collections.Counter()
    for article in squad['data']:
        for paragraph in article['paragraphs']:
            texts = [paragraph['context']] + [q['question'] for q in paragraph['qas']]
            for text in texts:
                words.update(word for word, _, _ in basic_words(text, lowercase))
    chars = sorted({ch for word in words for ch in word})
    kept = sorted(words)[::2]
    tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + chars + [
        '##' + ch for ch in chars] + [w for w in kept if w not in chars]
    path.write_text(''.join(t + '\n' for t in tokens), encoding='utf-8')
    return WordPieceVocab.load(str(path), lowercase)


def word_vocab(squad):
    tokenize = tokenize_with_offsets_for(Vocab())
    counts = collections.Counter()
    for article in squad['data']:
        for paragraph in article['paragraphs']:
            counts.update(tokenize(paragraph['context'])[0])
    return Vocab(counts)


def oracle_logits(windows, seq_len):
    """Logits that point exactly at each window's label: the gold start and end, or
    <cls> where the window doesn't hold the answer."""
    starts, ends = np.zeros((len(windows), seq_len)), np.zeros((len(windows), seq_len))
    for row, window in enumerate(windows):
        starts[row, window.label[0]] = ends[row, window.label[1]] = 10.0
    return starts, ends


@pytest.fixture
def squad_file(tmp_path):
    path = tmp_path / 'oracle-v2.0.json'
    write_squad_json(oracle_squad(), path)
    return path


VOCABS = ['wordpiece-uncased', 'wordpiece-cased', 'book']


def make_vocab(kind, tmp_path):
    if kind == 'book':
        return word_vocab(oracle_squad())
    return wordpiece_vocab(oracle_squad(), kind == 'wordpiece-uncased', tmp_path / 'vocab.txt')


@pytest.mark.parametrize('vocab_kind', VOCABS)
@pytest.mark.parametrize('sizes', [dict(), dict(max_len=48, doc_stride=16, max_query_len=12)])
def test_oracle_logits_give_the_gold_answers(squad_file, tmp_path, vocab_kind, sizes):
    data = read_squad(squad_file)
    vocab = make_vocab(vocab_kind, tmp_path)
    windows = make_windows(data.examples, vocab, **sizes)
    per_question = collections.Counter(w.qas_id for w in windows)
    assert per_question['l1'] >= (3 if sizes else 2)  # the long passage has several windows
    answered_in = {w.qas_id: windows.index(w) - windows.index(next(
        v for v in windows if v.qas_id == w.qas_id)) for w in windows
        if w.label != NO_ANSWER}
    if not sizes:  # the long passage's facts lie beyond its first window
        assert all(answered_in[q] >= 1 for q in ('l1', 'l2', 'l3', 'l4'))
    seq_len = max(w.valid_len for w in windows)
    predictions, null_odds = best_answers(data.examples, windows, *oracle_logits(windows, seq_len))
    for example in data.examples:
        expected = example.answers[0].text if example.answers else ''
        assert predictions[example.qas_id] == expected  # character for character
        # null score - best span score: the <cls> of the window with the answer (0) -
        # the gold span (20); unanswerable: the <cls> everywhere (20) - any span (0)
        assert null_odds[example.qas_id] == (20.0 if example.is_impossible else -20.0)
    scores = squad_evaluate(gold_answers(data.examples), predictions, null_odds)
    assert scores['HasAns_exact'] == scores['NoAns_exact'] == scores['exact'] == 100.0
    assert scores['HasAns_total'] == 12 and scores['NoAns_total'] == 3


def test_windows_equal_transformers_overflowing_tokens(squad_file, tmp_path):
    """Hugging Face's `stride` is the overlap of consecutive windows; doc_stride is the
    step between their starts: overlap = window size - doc_stride."""
    transformers = pytest.importorskip('transformers')
    squad = oracle_squad()
    vocab = wordpiece_vocab(squad, True, tmp_path / 'vocab.txt')
    reference = transformers.BertTokenizerFast(str(tmp_path / 'vocab.txt'), do_lower_case=True)
    data = read_squad(squad_file)
    for max_len, doc_stride, max_query_len in ((384, 128, 64), (64, 16, 24), (56, 7, 24)):
        windows = make_windows(data.examples, vocab, max_len, doc_stride, max_query_len)
        for index, example in enumerate(data.examples):
            mine = [w for w in windows if w.example_index == index]
            question_len = len(vocab.tokenize(example.question))
            assert question_len <= 20  # not cut: transformers would not cut it
            encoded = reference(example.question, example.context, truncation='only_second',
                                max_length=max_len, return_overflowing_tokens=True,
                                stride=max_len - question_len - 3 - doc_stride,
                                return_offsets_mapping=True)
            assert [w.token_ids for w in mine] == encoded['input_ids']
            assert [w.segments for w in mine] == encoded['token_type_ids']
            for window, offsets, types in zip(mine, encoded['offset_mapping'],
                                              encoded['token_type_ids']):
                passage = [tuple(o) for o, t in zip(offsets, types) if t == 1][:-1]
                assert window.passage_offsets == passage
                assert window.passage_start == types.index(1)


def test_labels_point_at_the_answer_tokens(squad_file, tmp_path):
    data = read_squad(squad_file)
    vocab = wordpiece_vocab(oracle_squad(), True, tmp_path / 'vocab.txt')
    windows = make_windows(data.examples, vocab, max_len=48, doc_stride=16, max_query_len=12)
    for window in windows:
        example = data.examples[window.example_index]
        assert window.valid_len <= 48 and window.passage_start <= 12 + 2
        if window.label == NO_ANSWER:
            if example.answers:  # the answer is not entirely in this window
                first, last = window.passage_offsets[0][0], window.passage_offsets[-1][1]
                answer = example.answers[0]
                assert answer.start < first or answer.end > last
            continue
        start, end = window.label
        assert window.is_passage(start) and window.is_passage(end) and start <= end
        assert window.text_between(example.context, start, end) == example.answers[0].text
    assert {w.label for w in windows if data.examples[w.example_index].is_impossible} == {
        NO_ANSWER}


def test_windows_step_by_doc_stride_and_cover_the_passage(squad_file, tmp_path):
    data = read_squad(squad_file)
    vocab = wordpiece_vocab(oracle_squad(), True, tmp_path / 'vocab.txt')
    example = data.examples[-1]
    _, all_offsets = vocab.tokenize_with_offsets(example.context)
    windows = make_windows([example], vocab, max_len=40, doc_stride=10, max_query_len=8)
    starts = [all_offsets.index(w.passage_offsets[0]) for w in windows]
    assert starts == list(range(0, 10 * len(windows), 10))
    assert windows[-1].passage_offsets[-1] == all_offsets[-1]
    assert windows[-2].passage_offsets[-1] != all_offsets[-1]
    assert all(w.valid_len == 40 for w in windows[:-1])
    question_ids = windows[0].token_ids[1:windows[0].passage_start - 1]
    assert len(question_ids) == 8  # cut to max_query_len


def test_batches_are_task_batches_with_start_end_labels(squad_file, tmp_path):
    data = read_squad(squad_file)
    vocab = wordpiece_vocab(oracle_squad(), True, tmp_path / 'vocab.txt')
    windows = make_windows(data.examples, vocab, max_len=48, doc_stride=16, max_query_len=12)
    batch = qa_batch(windows[:5], pad_id=vocab.pad_id)
    assert batch.tokens.shape == batch.segments.shape == (5, max(w.valid_len for w in windows[:5]))
    assert batch.labels.dtype == np.int32
    assert [tuple(label) for label in batch.labels.tolist()] == [w.label for w in windows[:5]]
    assert sum(len(b.valid_lens) for b in qa_batches(windows, 4)) == len(windows)
    unlabelled = make_windows(data.examples, vocab, 48, 16, 12, with_labels=False)
    assert qa_batch(unlabelled[:3]).labels is None
    expected = collections.Counter((tuple(w.token_ids), w.label) for w in windows)
    seen = collections.Counter()
    for batch in qa_training_batches(windows, 8, epoch=1, seed=3, max_len=48):
        assert batch.labels.shape == (len(batch.valid_lens), 2)
        seen.update((tuple(tokens[:length].tolist()), tuple(label.tolist()))
                    for tokens, length, label in zip(batch.tokens, batch.valid_lens,
                                                     batch.labels))
    assert seen == expected  # every window once, with its own label


def test_prediction_files_are_written(tmp_path):
    paths = write_prediction_files(str(tmp_path / 'out'), {'a': 'Zürich', 'b': ''},
                                   {'a': -3.5, 'b': 2.0})
    assert [os.path.basename(p) for p in paths] == ['predictions.json', 'null_odds.json']
    assert json.loads(open(paths[0], encoding='utf-8').read()) == {'a': 'Zürich', 'b': ''}
    assert json.loads(open(paths[1]).read()) == {'a': -3.5, 'b': 2.0}
    assert sorted(os.listdir(tmp_path / 'out')) == ['null_odds.json', 'predictions.json']


def test_spans_are_inside_the_passage_short_enough_and_among_the_n_best():
    window = QAWindow(0, 'q', list(range(12)), [0] * 4 + [1] * 8, passage_start=4,
                      passage_offsets=[(i, i + 1) for i in range(7)], label=None)
    starts = np.array([9, 8, 0, 0, 4, 0, 3, 0, 0, 0, 0, 7.0])  # 11 is the last <sep>
    ends = np.array([9, 0, 0, 0, 0, 0, 0, 0, 5, 6, 0, 7.0])
    spans = window_spans(window, starts, ends, n_best=20, max_answer_len=3)
    assert len(spans) == 5 * 3 + 2 + 1  # every passage pair s <= e < s + 3 of 4..10
    assert max(spans) == (8.0, 6, 8)  # (4, 9) and (6, 9) score more but are too long
    top = window_spans(window, starts, ends, n_best=4, max_answer_len=30)
    # the 4 best starts are 0, 1, 11 (outside the passage) and 4; the ends 0, 11, 9, 8
    assert sorted(top) == [(9.0, 4, 8), (10.0, 4, 9)]


def test_squad1_never_answers_null(squad_file, tmp_path):
    data = read_squad(squad_file)
    vocab = make_vocab('book', tmp_path)
    windows = make_windows(data.examples, vocab, max_len=48, doc_stride=16, max_query_len=12)
    predictions, _ = best_answers(data.examples, windows, *oracle_logits(windows, 48),
                                  allow_null=False)
    assert all(predictions[e.qas_id] for e in data.examples)


# ---------------------------------------------------------------- bad input


def write(tmp_path, content, name='bad.json'):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content),
                    encoding='utf-8')
    return path


@pytest.mark.parametrize('content, message', [
    ('{"data": [', 'not JSON'),
    ('[1, 2]', 'no "data" list'),
    ({'version': '1.1', 'rows': []}, 'no "data" list'),
    ({'data': [{'title': 'x'}]}, "data[0] has no 'paragraphs'"),
    ({'data': [{'paragraphs': [{'qas': []}]}]}, "data[0].paragraphs[0] has no 'context'"),
    ({'data': [{'paragraphs': [{'context': '  \n', 'qas': []}]}]}, 'empty passage'),
    ({'data': [{'paragraphs': [{'context': 'Text.', 'qas': [{'id': 'q'}]}]}]},
     "qas[0] has no 'question'"),
    ({'data': [{'paragraphs': [{'context': 'Text.', 'qas': [
        {'id': 'q', 'question': ' '}]}]}]}, 'empty question'),
    ({'data': [{'paragraphs': [{'context': 'Text.', 'qas': [
        {'id': 'q', 'question': 'Why?', 'answers': []}]}]}]}, 'not marked "is_impossible"'),
    ({'data': [{'paragraphs': [{'context': 'Text.', 'qas': [
        {'id': 'q', 'question': 'Why?', 'answers': [{'text': 'T', 'answer_start': '0'}]}]}]}]},
     'answer_start should be a int'),
    ({'data': []}, 'holds no question'),
])
def test_bad_files_are_refused_naming_the_file(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(SquadFormatError, match=re.escape(message)) as error:
        read_squad(path)
    assert str(path) in str(error.value)


def test_mismatched_answer_starts_are_counted_reported_and_not_trained_on(tmp_path, caplog):
    context = 'Marie Curie won two Nobel prizes.'
    squad = {'version': 'v2.0', 'data': [{'paragraphs': [{'context': context, 'qas': [
        {'id': 'good', 'question': 'Who?', 'answers': [{'text': 'Marie Curie',
                                                        'answer_start': 0}]},
        {'id': 'off', 'question': 'How many?', 'answers': [{'text': 'two', 'answer_start': 15}]},
        {'id': 'off2', 'question': 'What?', 'answers': [
            {'text': 'Nobel prizes', 'answer_start': 20},
            {'text': 'prizes', 'answer_start': 99}]},
        {'id': 'none', 'question': 'Where?', 'answers': [], 'is_impossible': True}]}]}]}
    path = write(tmp_path, squad)
    with caplog.at_level(logging.WARNING, logger='d2lbert'):
        data = read_squad(path)
    assert [(q, a.text) for q, a in data.mismatched] == [('off', 'two'), ('off2', 'prizes')]
    assert '2 answer(s) whose answer_start does not point at their text' in caplog.text
    assert str(path) in caplog.text and "'off'" in caplog.text
    assert [e.qas_id for e in data.training_examples()] == ['good', 'off2', 'none']
    assert gold_answers(data.examples)['off2'] == ['Nobel prizes', 'prizes']


def test_answerable_example_without_answer_cannot_be_trained_on(tmp_path):
    path = write(tmp_path, {'data': [{'paragraphs': [{'context': 'Some text.', 'qas': [
        {'id': 'q', 'question': 'What?'}]}]}]})
    data = read_squad(path)  # a question to answer, no gold: fine to read
    vocab = Vocab({'some': 1, 'text': 1})
    assert make_windows(data.examples, vocab, with_labels=False)[0].label is None
    with pytest.raises(ValueError, match="'q' is answerable but has no answer"):
        make_windows(data.examples, vocab)
    with pytest.raises(ValueError, match='leaves no room'):
        make_windows(data.examples, vocab, max_len=20, max_query_len=17)


# ------------------------------------------------------- bundled task, shared rows


def test_bundled_task_has_answerable_and_unanswerable_questions(tmp_path):
    squad = bundled_squad_task('dev', seed=1)
    path = tmp_path / 'bundled.json'
    write_squad_json(squad, path)
    data = read_squad(path)
    assert not data.mismatched and data.has_unanswerable
    unanswerable = [e for e in data.examples if e.is_impossible]
    assert 0.2 < len(unanswerable) / len(data.examples) < 0.5
    forms = [re.compile(re.escape(question).replace(r'\{\}', '(.+)'))
             for _, question in QUESTION_FORMS]
    for example in unanswerable:  # asked about another article's subject
        subject = next(m[1] for m in (f.fullmatch(example.question) for f in forms) if m)
        assert subject not in example.context
    baselines = baseline_predictions(squad)
    null_scores = squad_evaluate(gold_answers(data.examples), baselines['null'])
    assert null_scores['f1'] == pytest.approx(100 * len(unanswerable) / len(data.examples))
    first = squad_evaluate(gold_answers(data.examples), baselines['first_sentence'])
    assert first['f1'] < 20 and first['HasAns_f1'] > 0
    assert bundled_squad_task('dev', seed=1) == squad  # deterministic


def test_shared_real_squad_rows():
    if not os.path.exists(SHARED_SAMPLE):
        pytest.skip('shared data absent')
    data = read_squad(SHARED_SAMPLE)
    assert data.version is None and not data.mismatched and not data.has_unanswerable
    assert len(data.examples) == 5
    example = next(e for e in data.examples if e.qas_id == '5733be284776f41900661182')
    assert example.answers == (('Saint Bernadette Soubirous', 515),)
    assert example.context[515:541] == 'Saint Bernadette Soubirous'
    with open(SHARED_SAMPLE, encoding='utf-8') as f:
        raw = json.load(f)
    assert sum(len(p['qas']) for a in raw['data'] for p in a['paragraphs']) == 5
    vocab = word_vocab(raw)
    windows = make_windows(data.training_examples(), vocab, max_len=64, doc_stride=32,
                           max_query_len=24)
    predictions, _ = best_answers(data.examples, windows, *oracle_logits(windows, 64))
    scores = squad_evaluate(gold_answers(data.examples), predictions)
    # 'Father Julius Nieuwl' ends inside a word: the oracle can only give whole tokens
    assert predictions['5733b1da4776f4190066106b'] == 'Father Julius Nieuwland'
    assert scores['exact'] == 80.0
