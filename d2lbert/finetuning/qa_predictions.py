"""From a question-answering model's start and end logits to answers, and the official
output files (the recipe of Google's BERT, GluonNLP 0.10 and Hugging Face).

For each question, over all windows of its passage (``d2lbert.data.squad.windows``):

* **spans**: in each window, the ``n_best`` positions with the largest start logits
  and the ``n_best`` with the largest end logits are paired; a pair is a candidate
  span when both lie in the passage, the end is not before the start, and it is at
  most ``max_answer_len`` tokens long. Its score is start logit + end logit.
* **null score**: the smallest ``<cls>`` start + end logit over the windows (a window
  that doesn't hold the answer points at ``<cls>``, so only the lowest says
  something about the question).
* **answer**: the best span's text, or ``''`` when null score - best span score
  > ``null_threshold``. The text is cut from the *passage's own characters*
  between the span's offsets, never rebuilt from word pieces, so case, accents,
  punctuation and spacing are the passage's.

:func:`write_prediction_files` writes ``predictions.json`` ``{id: answer}`` and
``null_odds.json`` ``{id: null score - best span score}``, the files the official
``evaluate-v2.0.py`` reads (``--na-prob-file``).
"""
import functools
import json
import os

import numpy as np

from ..run.files import write_file_atomically

N_BEST = 20
MAX_ANSWER_LEN = 30
NULL_THRESHOLD = 0.0
NO_SPAN_ODDS = 1e9  # the null odds of a question none of whose windows has a valid span


def top_positions(logits, n_best):
    """The positions of the n_best largest logits, largest first (ties: earlier first)."""
    return np.argsort(-logits, kind='stable')[:n_best]


def window_spans(window, start_logits, end_logits, n_best=N_BEST,
                 max_answer_len=MAX_ANSWER_LEN):
    """The candidate spans of one window: a list of (score, start, end), positions in
    the window. start_logits, end_logits: 1-D, at least window.valid_len long (the
    rest, padding, is ignored)."""
    start_logits = np.asarray(start_logits, dtype=np.float64)[:window.valid_len]
    end_logits = np.asarray(end_logits, dtype=np.float64)[:window.valid_len]
    starts = top_positions(start_logits, n_best)[:, None]  # every pair (start, end):
    ends = top_positions(end_logits, n_best)[None, :]      # (n_best, n_best) arrays
    first = window.passage_start
    last = first + len(window.passage_offsets) - 1
    valid = ((first <= starts) & (starts <= ends) & (ends <= last)
             & (ends < starts + max_answer_len))
    rows, columns = np.nonzero(valid)
    scores = start_logits[starts[rows, 0]] + end_logits[ends[0, columns]]
    return list(zip(scores.tolist(), starts[rows, 0].tolist(), ends[0, columns].tolist()))


def best_answers(examples, windows, start_logits, end_logits, n_best=N_BEST,
                 max_answer_len=MAX_ANSWER_LEN, null_threshold=NULL_THRESHOLD,
                 allow_null=True):
    """The answer of every example, and how much more likely the model finds no answer.

    Args:
        examples: the list of ``SquadExample`` the windows were made from.
        windows: their ``QAWindow`` s (``make_windows(examples, ...)``).
        start_logits, end_logits: one row per window, in the same order: 2-D arrays
            (num_windows, seq_len) or sequences of 1-D arrays, each at least as long
            as its window (padding is ignored).
        allow_null: False for SQuAD 1.1: always answer the best span.
    Returns:
        (predictions, null_odds): dicts by question id, in the examples' order:
        the answer text ('' for no answer) and null score - best span score
        (``NO_SPAN_ODDS`` when no window has a valid span; the answer is then '').
    """
    if not len(start_logits) == len(end_logits) == len(windows):
        raise ValueError(f'{len(windows)} windows but {len(start_logits)} rows of start '
                         f'logits and {len(end_logits)} of end logits')
    null_scores, best_spans = {}, {}  # by example index; a best span: (score, window, start, end)
    for window, starts, ends in zip(windows, start_logits, end_logits):
        index = window.example_index
        null = float(starts[0]) + float(ends[0])
        null_scores[index] = min(null, null_scores.get(index, null))
        spans = window_spans(window, starts, ends, n_best, max_answer_len)
        if spans:
            score, start, end = max(spans)
            if index not in best_spans or score > best_spans[index][0]:
                best_spans[index] = (score, window, start, end)
    predictions, null_odds = {}, {}
    for index, example in enumerate(examples):
        if index not in null_scores:
            raise ValueError(f'question {example.qas_id!r} has no window')
        if index not in best_spans:
            predictions[example.qas_id], null_odds[example.qas_id] = '', NO_SPAN_ODDS
            continue
        score, window, start, end = best_spans[index]
        odds = null_scores[index] - score
        no_answer = allow_null and odds > null_threshold
        predictions[example.qas_id] = ('' if no_answer else
                                       window.text_between(example.context, start, end))
        null_odds[example.qas_id] = odds
    return predictions, null_odds


def write_prediction_files(directory, predictions, null_odds):
    """Write ``predictions.json`` and ``null_odds.json`` into directory (created if
    needed), each atomically (`run.files.write_file_atomically`); returns their paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, values in (('predictions.json', predictions), ('null_odds.json', null_odds)):
        path = os.path.join(directory, name)
        write = functools.partial(json.dump, values, ensure_ascii=False, indent=1)
        paths.append(write_file_atomically('--out', path, write))
    return paths
