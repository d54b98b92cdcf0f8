"""Noticing a pretraining run that does not learn.

A BERT that ignores its input still scores something on held-out data: always
predicting the most frequent masked token scores `mlm_baseline_accuracy` (from
`evaluate`). Once the learning-rate warmup is over, a model whose held-out MLM accuracy
is not above that baseline by more than MARGIN has collapsed onto the token frequencies
(typically after too large steps early on) or has not begun to learn. The user hears of
it at the evaluation where it is seen, with what to try.

Only the masked LM is checked. chapter_bert/studies/pretrain_study.py recorded every
evaluation of 38 runs (chapter_bert/results/pretrain-study.json): the masked LM leaves
its baseline (0.108 on the bundled corpus) before the warmup ends in every run that
learns (0.19 or more at step 100, 0.26 or more at step 200), and stays at it, at every
evaluation, in the run that collapsed (`--warmup 20`). Next-sentence prediction is no
such signal: in 6 of the 16 default runs its held-out accuracy was still at or below the
majority-label rate (0.553) at step 200, the first evaluation after the warmup, and those
runs ended at 0.83-0.91; on WikiText-2 it stays at chance for 2,000 steps while the
masked LM learns. A warning there would teach users to ignore it.
"""

MARGIN = 0.02  # a held-out MLM accuracy must beat the baseline by more than this
ADVICE = ('if it stays there, try a lower --lr (e.g. half), a longer --warmup (e.g. '
          'twice) or a larger --batch-size')


def collapse_warning(record, warmup_steps):
    """One line saying that the held-out MLM accuracy of `record` (an `evaluate` result
    with its 'step') is not above the most-frequent-token baseline plus MARGIN, or None:
    always None during the warmup (step <= warmup_steps), when nothing is learned yet.
    """
    if record['step'] <= warmup_steps:
        return None
    accuracy, baseline = record['mlm_accuracy'], record['mlm_baseline_accuracy']
    if accuracy > baseline + MARGIN:
        return None
    return (f'warning: step {record["step"]}: held-out MLM accuracy {accuracy:.3f} is not '
            f'above the most-frequent-token baseline {baseline:.3f} plus a margin of '
            f'{MARGIN} (= {baseline + MARGIN:.3f}): the model is not learning from its '
            f'input (collapsed, or not started); {ADVICE}')
