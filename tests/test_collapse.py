"""The collapse warning: which held-out accuracies count as "ignoring the input", judged
on every evaluation of the pretraining study's runs."""
import json
import os
import re

from d2lbert.pretraining.collapse import MARGIN, collapse_warning

STUDY = os.path.join(os.path.dirname(__file__), '..', 'chapter_bert', 'results',
                     'pretrain-study.json')


def record(step, mlm, nsp):
    return {'step': step, 'mlm_accuracy': mlm, 'mlm_baseline_accuracy': 0.108,
            'nsp_accuracy': nsp, 'nsp_majority_accuracy': 0.553}


def study_runs():
    with open(STUDY, encoding='utf-8') as f:
        return json.load(f)['runs']


def warmup_of(run):
    """The run's warmup steps: its --warmup, or a fifth of its --steps (default 500)."""
    flags = run['flags'].split()
    steps = int(flags[flags.index('--steps') + 1]) if '--steps' in flags else 500
    return int(flags[flags.index('--warmup') + 1]) if '--warmup' in flags else steps // 5


def test_nothing_is_said_during_the_warmup():
    assert collapse_warning(record(100, 0.108, 0.553), warmup_steps=100) is None


def test_a_learning_run_gets_no_warning():
    assert collapse_warning(record(500, 0.60, 0.80), warmup_steps=100) is None
    assert collapse_warning(record(500, 0.108 + MARGIN + 0.001, 0.553), 100) is None


def test_nsp_at_chance_while_mlm_learns_is_no_collapse():
    """Seed 0's default run at step 200 (NSP 0.571, majority 0.553) ends at NSP 0.874."""
    assert collapse_warning(record(200, 0.389, 0.571), warmup_steps=100) is None
    assert collapse_warning(record(200, 0.389, 0.495), warmup_steps=100) is None


def test_the_message_states_the_comparison_it_makes():
    """The numbers printed agree with the words: accuracy <= baseline + margin."""
    text = collapse_warning(record(200, 0.110, 0.553), warmup_steps=100)
    assert 'step 200' in text and 'MLM accuracy 0.110' in text
    accuracy, baseline, margin, bound = map(float, re.search(
        r'accuracy ([\d.]+) is not above the most-frequent-token baseline ([\d.]+) plus a '
        r'margin of ([\d.]+) \(= ([\d.]+)\)', text).groups())
    assert accuracy <= bound and abs(baseline + margin - bound) < 1e-9
    assert '--lr' in text and '--warmup' in text and '--batch-size' in text


def test_no_learning_run_of_the_study_warns_and_every_collapsed_one_does():
    """Every evaluation of every recorded run: the 16 default runs (and the book's model,
    and the real-text runs, whose MLM learns) never warn; the run that ends at the MLM
    baseline (--warmup 20) warns at every evaluation after its warmup."""
    runs = study_runs()
    assert sum(r['part'] == 'default' for r in runs) == 16
    for run in runs:
        final = run['final']
        collapsed = final['mlm_accuracy'] <= final['mlm_baseline_accuracy'] + MARGIN
        warned = [collapse_warning(e, warmup_of(run)) is not None for e in run['evaluations']]
        after_warmup = [e['step'] > warmup_of(run) for e in run['evaluations']]
        if collapsed:
            assert warned == after_warmup, run['flags']
        else:
            assert not any(warned), (run['part'], run['seed'], run['flags'])
    assert any(r['flags'] == '--warmup 20' for r in runs)


def test_the_results_file_records_the_warnings_of_this_rule():
    """The study's recorded warnings (quoted by the README and the chapter) are what
    the current rule says (pretrain_study.py --rederive-warnings rewrites them)."""
    for run in study_runs():
        for e in run['evaluations']:
            assert e.get('warning') == collapse_warning(e, warmup_of(run)), (run['flags'], e)
        assert run['warnings'] == [e['warning'] for e in run['evaluations'] if 'warning' in e]
