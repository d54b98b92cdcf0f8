"""Noticing a pretraining run that does not learn.

A BERT that ignores its input still scores something on held-out data: always
predicting the most frequent masked token scores `mlm_baseline_accuracy`, always
answering the more frequent next-sentence label scores `nsp_majority_accuracy` (both
from `evaluate`). Once the learning-rate warmup is over, a model still at one of these
scores has collapsed onto the label frequencies (typically after too large steps early
on) or has not yet begun to learn that task. Either way the user hears of it at the
evaluation where it is seen, with what to try.
"""

MARGIN = 0.02  # an accuracy within this of the ignore-the-input score counts as at it
ADVICE = ('if it stays there, try a lower --lr (e.g. half), a longer --warmup (e.g. '
          'twice) or a larger --batch-size')
CHECKS = (('MLM', 'mlm_accuracy', 'mlm_baseline_accuracy', 'the most-frequent-token '
           'baseline'),
          ('NSP', 'nsp_accuracy', 'nsp_majority_accuracy', 'the majority-label rate'))


def collapse_warning(record, warmup_steps):
    """One line saying which held-out accuracies of `record` (an `evaluate` result with
    its 'step') are still at the score of a model that ignores its input, or None:
    always None during the warmup (step <= warmup_steps), when nothing is learned yet.
    """
    if record['step'] <= warmup_steps:
        return None
    stuck = [f'{task} accuracy {record[accuracy]:.3f} is not above {meaning} '
             f'{record[baseline]:.3f}'
             for task, accuracy, baseline, meaning in CHECKS
             if record[accuracy] < record[baseline] + MARGIN]
    if not stuck:
        return None
    return (f'warning: step {record["step"]}: held-out {" and ".join(stuck)}: the model '
            f'is not learning from its input (collapsed, or not started); {ADVICE}')
