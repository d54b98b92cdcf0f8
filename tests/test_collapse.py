"""The collapse warning: which held-out accuracies count as "ignoring the input"."""
from d2lbert.pretraining.collapse import MARGIN, collapse_warning


def record(step, mlm, nsp):
    return {'step': step, 'mlm_accuracy': mlm, 'mlm_baseline_accuracy': 0.108,
            'nsp_accuracy': nsp, 'nsp_majority_accuracy': 0.553}


def test_nothing_is_said_during_the_warmup():
    assert collapse_warning(record(100, 0.108, 0.553), warmup_steps=100) is None


def test_a_learning_run_gets_no_warning():
    assert collapse_warning(record(500, 0.60, 0.80), warmup_steps=100) is None
    assert collapse_warning(record(500, 0.108 + MARGIN, 0.553 + MARGIN), 100) is None


def test_each_task_at_its_baseline_is_named():
    mlm = collapse_warning(record(200, 0.108, 0.80), warmup_steps=100)
    assert 'step 200' in mlm and 'MLM accuracy 0.108' in mlm and 'NSP' not in mlm
    nsp = collapse_warning(record(200, 0.60, 0.50), warmup_steps=100)
    assert 'NSP accuracy 0.500' in nsp and 'majority-label rate 0.553' in nsp
    assert 'MLM' not in nsp
    both = collapse_warning(record(200, 0.11, 0.55), warmup_steps=100)
    assert 'MLM' in both and 'NSP' in both
    for text in (mlm, nsp, both):
        assert '--lr' in text and '--warmup' in text and '--batch-size' in text
