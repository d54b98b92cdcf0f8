"""Fine-tuning metrics against independent references: scikit-learn (accuracy, F1,
Matthews correlation), SciPy (Pearson, Spearman) and seqeval (entity-level scores,
default mode = conlleval's chunk rules), on random and hand-made cases."""
import math
import warnings

import numpy as np
import pytest

from d2lbert.data.tasks import TASKS as DATA_TASKS
from d2lbert.finetuning.task_metrics import (METRICS, accuracy, average_ranks,
                                        entity_chunks, entity_f1, entity_precision,
                                        entity_recall, f1, mcc, pearson, spearman)
from d2lbert.finetuning.tasks import TASKS

sklearn_metrics = pytest.importorskip('sklearn.metrics')
stats = pytest.importorskip('scipy.stats')
seqeval_metrics = pytest.importorskip('seqeval.metrics')
from seqeval.metrics.sequence_labeling import get_entities  # noqa: E402


def quietly(function, *args):
    """Call a reference that warns about undefined values (0/0, constant input)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return function(*args)


def random_classes(rng, size, num_classes):
    return rng.integers(0, num_classes, size=size), rng.integers(0, num_classes, size=size)


HAND_MADE = [  # (labels, predictions), including the degenerate ones
    ([1, 1, 1, 1], [1, 1, 1, 1]),  # all one class, all right
    ([0, 0, 0, 0], [0, 0, 0, 0]),  # no positives at all
    ([0, 0, 1, 1], [0, 0, 0, 0]),  # nothing predicted positive
    ([0, 0, 1, 1], [1, 1, 1, 1]),  # everything predicted positive
    ([1, 0, 1, 0], [0, 1, 0, 1]),  # all wrong
    ([1], [1]), ([0], [1]),
]


@pytest.mark.parametrize('labels, predictions', HAND_MADE)
def test_classification_hand_made(labels, predictions):
    assert accuracy(labels, predictions) == sklearn_metrics.accuracy_score(labels,
                                                                           predictions)
    assert f1(labels, predictions) == pytest.approx(
        quietly(sklearn_metrics.f1_score, labels, predictions), abs=1e-12)
    assert mcc(labels, predictions) == pytest.approx(
        quietly(sklearn_metrics.matthews_corrcoef, labels, predictions), abs=1e-12)


def test_classification_random():
    rng = np.random.default_rng(0)
    for size in (2, 3, 10, 100, 1000):
        for num_classes in (2, 3, 5):
            labels, predictions = random_classes(rng, size, num_classes)
            assert accuracy(labels, predictions) == pytest.approx(
                sklearn_metrics.accuracy_score(labels, predictions), abs=1e-12)
            assert mcc(labels, predictions) == pytest.approx(
                quietly(sklearn_metrics.matthews_corrcoef, labels, predictions), abs=1e-9)
            if num_classes == 2:
                assert f1(labels, predictions) == pytest.approx(
                    quietly(sklearn_metrics.f1_score, labels, predictions), abs=1e-12)


def test_classification_input_errors():
    with pytest.raises(ValueError, match='of one length'):
        accuracy([0, 1], [0])
    with pytest.raises(ValueError, match='at least 1'):
        f1([], [])
    with pytest.raises(ValueError, match='at least 2'):
        pearson([1.0], [2.0])


def test_correlations_random_and_ties():
    rng = np.random.default_rng(1)
    for size in (2, 3, 10, 500):
        x = rng.normal(size=size)
        y = 0.5 * x + rng.normal(size=size)
        assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
        tied_x, tied_y = np.round(x), rng.integers(0, 4, size=size)  # many ties
        if len(set(tied_x)) > 1 and len(set(tied_y)) > 1:
            assert spearman(tied_x, tied_y) == pytest.approx(
                stats.spearmanr(tied_x, tied_y)[0], abs=1e-12)
            assert np.array_equal(average_ranks(tied_y), stats.rankdata(tied_y))
    scores = [5.0, 4.75, 5.0, 2.4, 2.75, 2.615, 5.0, 2.333, 3.75]  # STS-B dev sample
    predictions = [4.0, 4.0, 4.5, 2.0, 3.0, 3.0, 4.5, 2.0, 4.0]
    assert spearman(scores, predictions) == pytest.approx(
        stats.spearmanr(scores, predictions)[0], abs=1e-12)
    assert pearson(scores, predictions) == pytest.approx(
        stats.pearsonr(scores, predictions)[0], abs=1e-12)
    assert average_ranks([10, 20, 20, 5]).tolist() == [2, 3.5, 3.5, 1]


def test_correlations_of_constant_or_perfect_inputs():
    assert math.isnan(pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert math.isnan(quietly(stats.pearsonr, [1.0, 1.0, 1.0], [1.0, 2.0, 3.0])[0])
    assert math.isnan(spearman([1, 2, 3], [7, 7, 7]))
    assert math.isnan(quietly(stats.spearmanr, [1, 2, 3], [7, 7, 7])[0])
    assert pearson([1, 2, 3], [2, 4, 6]) == 1.0 and spearman([1, 2, 3], [9, 5, 1]) == -1.0


# ----------------------------------------------------------------------------- entities

def seqeval_scores(true_sentences, predicted_sentences):
    return [quietly(function, true_sentences, predicted_sentences) for function in (
        seqeval_metrics.precision_score, seqeval_metrics.recall_score,
        seqeval_metrics.f1_score)]


def our_scores(true_sentences, predicted_sentences):
    return [function(true_sentences, predicted_sentences) for function in (
        entity_precision, entity_recall, entity_f1)]


def test_entity_chunks_equal_seqeval():
    rng = np.random.default_rng(2)
    tags = ['O', 'O', 'B-PER', 'I-PER', 'I-PER', 'B-LOC', 'I-LOC', 'I-MISC']
    for _ in range(500):
        sentence = list(rng.choice(tags, size=rng.integers(0, 15)))
        expected = [(t, start, end + 1) for t, start, end in get_entities(sentence)]
        assert entity_chunks(sentence) == expected, sentence
    with pytest.raises(ValueError, match="'PER' is not an IOB tag"):
        entity_chunks(['O', 'PER'])


ENTITY_CASES = [
    ([['B-PER', 'I-PER', 'O', 'B-LOC']], [['B-PER', 'I-PER', 'O', 'B-LOC']]),  # perfect
    ([['B-PER', 'I-PER', 'O', 'B-LOC']], [['O', 'O', 'O', 'O']]),  # nothing predicted
    ([['O', 'O']], [['B-ORG', 'O']]),  # no true entity
    ([['O', 'O']], [['O', 'O']]),  # no entity at all
    ([['B-PER', 'I-PER', 'O']], [['B-PER', 'O', 'O']]),  # wrong end
    ([['B-PER', 'I-PER', 'O']], [['B-LOC', 'I-LOC', 'O']]),  # wrong type
    ([['I-PER', 'I-PER', 'B-PER', 'O', 'I-LOC']],  # IOB1 against IOB2
     [['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC']]),
    ([['O', 'I-ORG'], ['I-ORG', 'O']],  # an entity does not run across sentences
     [['O', 'B-ORG'], ['B-ORG', 'O']]),
    ([[]], [[]]),
]


@pytest.mark.parametrize('true_sentences, predicted_sentences', ENTITY_CASES)
def test_entity_scores_hand_made(true_sentences, predicted_sentences):
    assert our_scores(true_sentences, predicted_sentences) == pytest.approx(
        seqeval_scores(true_sentences, predicted_sentences), abs=1e-12)


def test_entity_scores_random():
    rng = np.random.default_rng(3)
    tags = ['O', 'O', 'O', 'B-PER', 'I-PER', 'B-ORG', 'I-ORG', 'I-LOC', 'B-MISC']
    for _ in range(100):
        true, predicted = [], []
        for _ in range(rng.integers(1, 6)):
            length = rng.integers(0, 12)
            true.append(list(rng.choice(tags, size=length)))
            noisy = [t if rng.random() < 0.7 else rng.choice(tags) for t in true[-1]]
            predicted.append([str(t) for t in noisy])
        assert our_scores(true, predicted) == pytest.approx(
            seqeval_scores(true, predicted), abs=1e-12)


def test_entity_input_errors():
    with pytest.raises(ValueError, match='1 true but 2 predicted sentences'):
        entity_f1([['O']], [['O'], ['O']])
    with pytest.raises(ValueError, match='sentence 0 has 2 true but 1 predicted tags'):
        entity_f1([['O', 'O']], [['O']])


# ----------------------------------------------------------------------------- tasks

def test_every_task_has_metrics():
    """Every task of data.tasks is a fine-tuning task, and every labelled task's
    metrics are metrics of task_metrics (GLUE's choice for GLUE's tasks)."""
    read = {task.reader.name for task in TASKS.values() if hasattr(task.reader, 'name')}
    assert read == set(DATA_TASKS)
    for name, task in TASKS.items():
        if task.head != 'question_answering':
            assert set(task.metrics_of(None)) | set(task.metrics) <= set(METRICS), name
    assert TASKS['glue/cola'].metrics == ('mcc',) and TASKS['glue/stsb'].metrics == (
        'pearson', 'spearman')
    assert TASKS['glue/mrpc'].metrics == TASKS['glue/qqp'].metrics == ('f1', 'accuracy')
    assert TASKS['csv'].metrics_of(None) == ('pearson', 'spearman')
    assert TASKS['csv'].metrics_of(('a', 'b')) == ('accuracy',)
