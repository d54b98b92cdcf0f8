"""The official SQuAD 2.0 evaluation (``evaluate-v2.0.py``): exact match and F1.

* **Normalization** of an answer: lower case, punctuation removed, the articles
  'a', 'an', 'the' removed, whitespace collapsed.
* **Exact match** (EM): 1 if the normalized prediction equals a normalized gold
  answer. **F1**: the harmonic mean of the precision and recall of the prediction's
  words against a gold answer's (as multisets). Both take the best gold answer.
* An **unanswerable** question's only gold answer is ``''`` (also when all its gold
  answers normalize to nothing): predicting ``''`` scores 1, anything else 0; an
  answerable question predicted ``''`` scores 0.
* ``exact``/``f1`` average over all questions (in percent), ``HasAns_*`` over the
  answerable, ``NoAns_*`` over the unanswerable ones (each part only if it has
  questions). With null odds (``null_odds.json``): a question whose odds exceed
  ``null_odds_threshold`` (1.0, the script's ``--na-prob-thresh``) counts as
  answered ``''``, and ``best_exact``/``best_f1`` are the scores at the best
  threshold on the odds, which ``best_*_thresh`` give.

SQuAD 1.1 (``evaluate-v1.1.py``) is the same without unanswerable questions: its
``exact_match`` and ``f1`` are ``exact`` and ``f1`` here.
"""
import collections
import re
import string

ARTICLES = re.compile(r'\b(a|an|the)\b', re.UNICODE)
PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lower case, no punctuation, no articles, single spaces."""
    text = ''.join(ch for ch in text.lower() if ch not in PUNCTUATION)
    return ' '.join(ARTICLES.sub(' ', text).split())


def exact_match(gold, prediction):
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_score(gold, prediction):
    """Word-overlap F1 of the normalized answers; 1 if both are empty, 0 if one is."""
    gold_words = normalize_answer(gold).split()
    predicted_words = normalize_answer(prediction).split()
    if not gold_words or not predicted_words:
        return int(gold_words == predicted_words)
    common = sum((collections.Counter(gold_words) & collections.Counter(predicted_words))
                 .values())
    if common == 0:
        return 0
    precision, recall = common / len(predicted_words), common / len(gold_words)
    return 2 * precision * recall / (precision + recall)


def gold_answers(examples):
    """{question id: list of gold answer texts} of a list of ``SquadExample``
    (empty for an unanswerable question)."""
    return {example.qas_id: [answer.text for answer in example.answers]
            for example in examples}


def raw_scores(golds, predictions):
    """({id: exact match}, {id: F1}), each the best over the question's gold answers."""
    exact, f1 = {}, {}
    for qas_id, answers in golds.items():
        answers = [a for a in answers if normalize_answer(a)] or ['']
        prediction = predictions[qas_id]
        exact[qas_id] = max(exact_match(a, prediction) for a in answers)
        f1[qas_id] = max(f1_score(a, prediction) for a in answers)
    return exact, f1


def mean_scores(exact, f1, qas_ids):
    """{'exact', 'f1' (percent), 'total'} over the questions qas_ids."""
    return {'exact': 100.0 * sum(exact[q] for q in qas_ids) / len(qas_ids),
            'f1': 100.0 * sum(f1[q] for q in qas_ids) / len(qas_ids),
            'total': len(qas_ids)}


def best_threshold(predictions, scores, null_odds, has_answer):
    """(best score in percent, threshold): answer '' whenever the odds exceed the
    threshold; the thresholds tried are 0 and every question's odds."""
    score = best = sum(not has for has in has_answer.values())  # all answered ''
    threshold = 0.0
    for qas_id in sorted(null_odds, key=lambda q: null_odds[q]):
        if qas_id not in scores:
            continue
        if has_answer[qas_id]:
            score += scores[qas_id]
        elif predictions[qas_id]:
            score -= 1
        if score > best:
            best, threshold = score, null_odds[qas_id]
    return 100.0 * best / len(scores), threshold


def squad_evaluate(golds, predictions, null_odds=None, null_odds_threshold=1.0):
    """The official SQuAD 2.0 scores (see the module doc).

    Args:
        golds: {question id: list of gold answer texts} (:func:`gold_answers`).
        predictions: {question id: predicted text} ('' for no answer).
        null_odds: {question id: null odds}, or None.
    Returns:
        a dict: exact, f1, total, HasAns_exact, HasAns_f1, HasAns_total, NoAns_exact,
        NoAns_f1, NoAns_total (parts without questions left out), and with null_odds
        best_exact, best_exact_thresh, best_f1, best_f1_thresh.
    Raises:
        ValueError: a question without a prediction (or null odds); the official
            script skips it, which silently inflates the scores.
    """
    for name, values in (('predictions', predictions), ('null_odds', null_odds)):
        missing = [q for q in golds if values is not None and q not in values]
        if missing:
            raise ValueError(f'{name} lack {len(missing)} of the {len(golds)} questions '
                             f'(first: {missing[0]!r})')
    if not golds:
        raise ValueError('no question to evaluate')
    has_answer = {qas_id: bool(answers) for qas_id, answers in golds.items()}
    exact, f1 = raw_scores(golds, predictions)
    if null_odds is None:
        thresholded_exact, thresholded_f1 = exact, f1
    else:
        answered_null = {q for q in golds if null_odds[q] > null_odds_threshold}
        thresholded_exact, thresholded_f1 = (
            {q: float(not has_answer[q]) if q in answered_null else s
             for q, s in scores.items()} for scores in (exact, f1))
    results = mean_scores(thresholded_exact, thresholded_f1, list(golds))
    for prefix, wanted in (('HasAns', True), ('NoAns', False)):
        qas_ids = [q for q, has in has_answer.items() if has == wanted]
        if qas_ids:
            part = mean_scores(thresholded_exact, thresholded_f1, qas_ids)
            results.update({f'{prefix}_{key}': value for key, value in part.items()})
    if null_odds is not None:
        results['best_exact'], results['best_exact_thresh'] = best_threshold(
            predictions, exact, null_odds, has_answer)
        results['best_f1'], results['best_f1_thresh'] = best_threshold(
            predictions, f1, null_odds, has_answer)
    return results
