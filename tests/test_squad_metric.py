"""The official SQuAD 2.0 metric: against transformers.data.metrics.squad_metrics (the
official evaluate-v2.0.py's copy, in transformers up to 5.17) on the same predictions,
and hand-made cases."""
import random
from types import SimpleNamespace

import pytest

from d2lbert.finetuning.squad_metric import (exact_match, f1_score, normalize_answer,
                                        squad_evaluate)

GOLD_POOL = ['Saint Bernadette Soubirous', 'the Virgin Mary', 'a golden statue', '1858',
             'Lourdes, France', 'The', '!!!', 'U.S.-based prices', 'Zürich', 'an Apple a day']
PREDICTION_POOL = GOLD_POOL + ['', 'Bernadette', 'golden statue of Mary', 'France',
                               'the the', 'Lourdes France', '1858!', 'zurich', 'ZÜRICH',
                               'prices based', 'a day']


def reference():
    return pytest.importorskip('transformers.data.metrics.squad_metrics')


def random_case(seed, num_questions=60, with_odds=True):
    """Gold answers (some questions unanswerable, some with several answers), random
    predictions, and null odds with ties."""
    rng = random.Random(seed)
    golds, predictions, odds = {}, {}, {}
    for i in range(num_questions):
        qas_id = f'q{i}'
        golds[qas_id] = ([] if rng.random() < 0.35 else
                         rng.sample(GOLD_POOL, rng.choice([1, 1, 2, 3])))
        predictions[qas_id] = rng.choice(PREDICTION_POOL)
        odds[qas_id] = rng.choice([-3.0, -1.0, 0.0, 0.5, 1.0, 2.5]) + (
            rng.random() if rng.random() < 0.5 else 0)
    return golds, predictions, (odds if with_odds else None)


def reference_scores(golds, predictions, odds):
    examples = [SimpleNamespace(qas_id=q, answers=[{'text': a} for a in answers])
                for q, answers in golds.items()]
    return dict(reference().squad_evaluate(examples, predictions, odds))


@pytest.mark.parametrize('seed', range(6))
def test_equals_transformers_squad_evaluate(seed):
    golds, predictions, odds = random_case(seed)
    mine = squad_evaluate(golds, predictions, odds)
    expected = reference_scores(golds, predictions, odds)
    assert mine.keys() == expected.keys()
    for key, value in expected.items():
        assert mine[key] == pytest.approx(value, abs=1e-9), key


def test_equals_transformers_without_unanswerable_questions_and_odds():
    golds, predictions, _ = random_case(7, with_odds=False)
    golds = {q: answers or ['1858'] for q, answers in golds.items()}  # SQuAD 1.1
    mine = squad_evaluate(golds, predictions)
    expected = reference_scores(golds, predictions, None)  # gives best_* as well
    assert 'NoAns_total' not in mine and 'best_f1' not in mine
    for key in ('exact', 'f1', 'total', 'HasAns_exact', 'HasAns_f1', 'HasAns_total'):
        assert mine[key] == pytest.approx(expected[key], abs=1e-9), key
    assert mine['exact'] == pytest.approx(mine['HasAns_exact'])


def test_per_answer_functions_equal_transformers():
    ref = reference()
    for gold in GOLD_POOL + ['']:
        for prediction in PREDICTION_POOL:
            assert exact_match(gold, prediction) == ref.compute_exact(gold, prediction)
            assert f1_score(gold, prediction) == pytest.approx(ref.compute_f1(gold, prediction))
    for text in PREDICTION_POOL:
        assert normalize_answer(text) == ref.normalize_answer(text)


def test_hand_made_cases():
    assert normalize_answer('  The  Cat, a dog; AN  emu!') == 'cat dog emu'
    assert normalize_answer('the a an') == '' and normalize_answer('?!.,') == ''
    assert normalize_answer('Theatre') == 'theatre'  # 'the' only as a word
    assert f1_score('the cat sat', 'a cat') == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert f1_score('cat cat dog', 'cat cat cat') == pytest.approx(2 / 3)  # multiset overlap
    assert f1_score('', '') == 1 and f1_score('', 'x') == 0 and f1_score('x', '') == 0
    golds = {
        'empty': [],                       # unanswerable
        'several': ['Paris', 'in Paris, France'],
        'articles': ['The'],               # normalizes to nothing: like unanswerable
        'punctuation': ['!!!'],            # likewise
        'miss': ['Berlin'],
    }
    predictions = {'empty': '', 'several': 'Paris, France', 'articles': '',
                   'punctuation': 'x', 'miss': ''}
    scores = squad_evaluate(golds, predictions)
    f1_several = 2 * 1 * (2 / 3) / (1 + 2 / 3)  # 'paris france' vs 'in paris france'
    assert scores['exact'] == pytest.approx(100 * 2 / 5)
    assert scores['f1'] == pytest.approx(100 * (1 + f1_several + 1 + 0 + 0) / 5)
    assert scores['HasAns_total'] == 4 and scores['NoAns_total'] == 1
    assert scores['NoAns_exact'] == 100.0


def test_null_odds_threshold_and_best_threshold():
    golds = {'a': ['x'], 'b': ['y'], 'c': [], 'd': []}
    predictions = {'a': 'x', 'b': 'wrong', 'c': 'z', 'd': ''}
    odds = {'a': -2.0, 'b': 0.5, 'c': 3.0, 'd': 5.0}
    scores = squad_evaluate(golds, predictions, odds)  # c's odds > 1: counted as ''
    assert scores['exact'] == 100 * 3 / 4
    # answering '' whenever the odds exceed -2.0 (a's): a right, b '' wrong, c and d ''
    # right: 3 of 4, better than any other threshold
    assert scores['best_exact'] == 75.0 and scores['best_exact_thresh'] == -2.0
    with pytest.raises(ValueError, match="predictions lack 1 of the 4 questions"):
        squad_evaluate(golds, {'a': 'x', 'b': '', 'c': ''})
    with pytest.raises(ValueError, match="null_odds lack"):
        squad_evaluate(golds, predictions, {'a': 0.0})
