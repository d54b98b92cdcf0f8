"""chapter_bert/studies/transfer_study.py runs in its quick mode on the shared real data
(WikiText-2, GLUE SST-2; skipped when ../shared/data, or $D2LBERT_DATA, is
absent) and writes a results file that records what it measured and how."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get('D2LBERT_DATA', os.path.join(ROOT, '..', 'shared', 'data'))
WIKITEXT = os.path.join(DATA, 'wikitext-2', 'wiki.valid.tokens')
SST2 = os.path.join(DATA, 'sst-2')
STUDY = os.path.join(ROOT, 'chapter_bert', 'studies', 'transfer_study.py')


@pytest.mark.skipif(not (os.path.isfile(WIKITEXT) and os.path.isdir(SST2)),
                    reason='the shared WikiText-2 and SST-2 data are absent')
def test_the_quick_study_records_both_curves_sst2_and_probes(tmp_path):
    """Run in parts, as the full study can be: the pretraining part keeps its model
    (--keep-model), the sst2 part fine-tunes it two runs at a time (--jobs 2) and the
    probe part probes it, each adding its results to the same file with the command that
    made it."""
    out, model = str(tmp_path / 'transfer-study.json'), str(tmp_path / 'model')
    commands = {'pretraining': ['--keep-model', model],
                'sst2': ['--model', model, '--jobs', '2'], 'probe': ['--model', model],
                'continue': ['--continue-minutes', '10']}
    for part, flags in commands.items():
        done = subprocess.run([sys.executable, STUDY, '--quick', '--only', part,
                               '--wikitext', WIKITEXT, '--sst2', SST2, '--out', out, *flags],
                              capture_output=True, text=True, timeout=900,
                              env=dict(os.environ, PYTHONPATH=ROOT))
        assert done.returncode == 0, done.stderr[-3000:]
    with open(out, encoding='utf-8') as f:
        results = json.load(f)
    assert results['quick'] and '--quick' in results['command']
    for part, flags in commands.items():
        assert results[part]['command'].endswith(' '.join(flags))
    assert os.path.isfile(os.path.join(model, 'metrics.jsonl'))
    assert results['sst2']['jobs'] == 2
    assert results['machine'] and results['date']
    for name in ('d2lbert', 'book'):
        curve = results['pretraining'][name]['curve']
        assert len(curve) == 2
        assert 0 < curve[0]['minutes'] < curve[1]['minutes']
        assert all(0 <= point['accuracy'] <= 1 for point in curve)
        assert all(point['mlm_baseline_accuracy'] > 0 for point in curve)
    assert results['pretraining']['book']['curve'][-1]['step'] > 1
    assert results['pretraining']['summary']['book_final_accuracy'] == \
        results['pretraining']['book']['curve'][-1]['accuracy']
    runs = results['sst2']['runs']
    assert sorted((r['train'], r['init']) for r in runs) == [
        ('full', 'pretrained'), ('full', 'scratch'), ('subset', 'pretrained'),
        ('subset', 'scratch')]
    assert all(0.3 < r['accuracy'] < 1 for r in runs)
    summary = results['sst2']['summary']['full']
    assert summary['gain_points'] == pytest.approx(
        100 * (summary['pretrained'] - summary['scratch']))
    probes = results['probe']['accuracy']
    assert sorted(probes) == ['bag_of_words', 'pretrained', 'random', 'random_0']
    assert all(0.3 < value < 1 for value in probes.values())
    assert probes['random'] == probes['random_0']  # the mean of the quick mode's one seed
    arms = results['continue']['arms']
    assert list(arms) == ['MiniLM-L6', 'MiniLM-L6+10']
    curve = arms['MiniLM-L6+10']['curve']
    assert [point['step'] for point in curve] == [0, 10, 20]  # from where MiniLM is
    assert all(0 <= point['accuracy'] <= 1 and point['baseline'] > 0 for point in curve)
    assert curve[-1]['mlm_accuracy'] > curve[0]['mlm_accuracy']  # a fresh head learns
    assert all(len(arm['sst2_subset']) == 1 and 0.3 < arm['sst2_subset_mean'] < 1
               for arm in arms.values())
    assert all(0.3 < arm['sst2_full']['accuracy'] < 1 and arm['sst2_full']['seed'] == 0
               for arm in arms.values())
    again = subprocess.run([sys.executable, STUDY, '--quick', '--only', 'continue',
                            '--sst2', SST2, '--out', out, '--continue-minutes', '10,30'],
                           capture_output=True, text=True, timeout=900,
                           env=dict(os.environ, PYTHONPATH=ROOT))
    assert again.returncode == 0, again.stderr[-3000:]
    with open(out, encoding='utf-8') as f:
        arms_again = json.load(f)['continue']['arms']
    assert list(arms_again) == ['MiniLM-L6', 'MiniLM-L6+10', 'MiniLM-L6+30']
    for arm in ('MiniLM-L6', 'MiniLM-L6+10'):  # kept, not run again
        assert arms_again[arm] == arms[arm]
        assert arms_again[arm]['command'].endswith('--continue-minutes 10')
    assert arms_again['MiniLM-L6+30']['command'].endswith('--continue-minutes 10,30')
    assert again.stdout.count('SST-2 subset, ') == 1  # only the new arm was fine-tuned
    assert again.stdout.count('SST-2 full, ') == 1
    tables = subprocess.run([sys.executable, STUDY, '--readme', '--out', out],
                            capture_output=True, text=True, env=dict(os.environ,
                                                                     PYTHONPATH=ROOT))
    assert tables.stdout.count('<!-- result transfer-study.json') == \
        4 * 2 + 3 * 2 + 3 + 3 + 5 + 5


def test_a_probe_scores_what_its_features_hold():
    """The probe's logistic regression reads a label that its features hold (one
    noisy coordinate among noise) and scores chance on features that hold none."""
    import numpy as np
    sys.path.insert(0, os.path.dirname(STUDY))
    from transfer_probe import probe_accuracy
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 800)
    noise = rng.normal(size=(800, 16))
    informative = noise.copy()
    informative[:, 3] += 2 * labels
    assert probe_accuracy(informative[:600], labels[:600], informative[600:],
                          labels[600:]) > 0.8
    assert abs(probe_accuracy(noise[:600], labels[:600], noise[600:], labels[600:]) - 0.5) < 0.1


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='PR_SET_PDEATHSIG is Linux')
def test_a_killed_study_leaves_no_run_going_on(tmp_path):
    """A study killed with SIGKILL while one of its runs (here `sleep`) goes on: the run
    ends too, instead of training on without it."""
    import signal
    import time
    pid_file = tmp_path / 'child.pid'
    script = (f'import sys; sys.path.insert(0, {os.path.dirname(STUDY)!r})\n'
              'from runner import run_logged\n'
              f"run_logged(['sh', '-c', 'echo $$ > {pid_file}; exec sleep 60'])\n")
    study = subprocess.Popen([sys.executable, '-c', script],
                             env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        deadline = time.time() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.time() < deadline and study.poll() is None, 'the run did not start'
            time.sleep(0.05)
        child = int(pid_file.read_text())
        study.send_signal(signal.SIGKILL)
        study.wait()
        deadline = time.time() + 10
        while os.path.exists(f'/proc/{child}') and time.time() < deadline:
            if open(f'/proc/{child}/stat').read().split()[2] == 'Z':
                break  # ended, waiting for its (new) parent to collect it
            time.sleep(0.05)
        alive = os.path.exists(f'/proc/{child}') and \
            open(f'/proc/{child}/stat').read().split()[2] != 'Z'
        if alive:
            os.kill(child, signal.SIGKILL)
        assert not alive, 'the run went on after its study was killed'
    finally:
        study.kill()


def test_an_unknown_part_is_refused_in_one_line(tmp_path):
    """--only with a part the study has not: one line naming it and the parts, no file."""
    out = tmp_path / 'study.json'
    done = subprocess.run([sys.executable, STUDY, '--only', 'sst2,probes', '--out', str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ['transfer_study: --only sst2,probes: no part '
                                                'probes (parts: pretraining, sst2, probe, '
                                                'continue)']
    assert not out.exists()


@pytest.mark.skipif(not os.path.isdir(SST2), reason='the shared SST-2 data are absent')
def test_a_model_that_is_not_there_is_refused_in_one_line(tmp_path):
    """--only probe --model with nothing there: one line naming --model, no file."""
    out = tmp_path / 'study.json'
    done = subprocess.run([sys.executable, STUDY, '--only', 'probe', '--model',
                           str(tmp_path / 'none'), '--sst2', SST2, '--out', str(out)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if 'Warning' not in line]
    assert len(errors) == 1 and errors[0].startswith(f'--model {tmp_path / "none"}: '), errors
    assert not out.exists()


@pytest.mark.parametrize('value', ['ten', '10,', '0', 'nan'])
def test_bad_continue_minutes_are_one_line_before_any_run(tmp_path, value):
    out = tmp_path / 'transfer-study.json'
    done = subprocess.run([sys.executable, STUDY, '--only', 'pretraining,continue',
                           '--continue-minutes', value, '--out', str(out)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr.count('\n') == 1 and '--continue-minutes must be' in done.stderr
    assert not out.exists()


def test_the_continue_part_keeps_earlier_arms_and_runs_what_they_lack():
    """An arm of the results file is kept unless --rerun names it, also when this run's
    --continue-minutes leaves it out; a start kept as it is gains its full-set run, and a
    kept continued arm (its model gone with the run that made it) runs nothing."""
    sys.path.insert(0, os.path.dirname(STUDY))
    from transfer_continue import missing_finetunings, planned_arms
    starts = {'MiniLM-L6': 'minilm', 'WikiText-2 model': 'wt2'}
    earlier = {'MiniLM-L6': {'start': 'MiniLM-L6', 'minutes': 0, 'sst2_subset': [0.8]},
               'MiniLM-L6+10': {'start': 'MiniLM-L6', 'minutes': 10, 'sst2_subset': [0.8]},
               'MiniLM-L6+30': {'start': 'MiniLM-L6', 'minutes': 30, 'sst2_subset': [0.8]}}
    arms, models = planned_arms(starts, [10], earlier, rerun=['MiniLM-L6+10'])
    assert list(arms) == ['MiniLM-L6', 'MiniLM-L6+10', 'MiniLM-L6+30', 'WikiText-2 model',
                          'WikiText-2 model+10']  # by start, then minutes
    assert arms['MiniLM-L6'] is earlier['MiniLM-L6']
    assert arms['MiniLM-L6+30'] is earlier['MiniLM-L6+30']
    assert arms['MiniLM-L6+10'] == {'start': 'MiniLM-L6', 'minutes': 10}
    assert models == {'MiniLM-L6': 'minilm', 'MiniLM-L6+10': None, 'WikiText-2 model': 'wt2',
                      'WikiText-2 model+10': None}
    assert missing_finetunings(arms, models) == [
        ('MiniLM-L6', 'full'), ('MiniLM-L6+10', 'subset'), ('MiniLM-L6+10', 'full'),
        ('WikiText-2 model', 'subset'), ('WikiText-2 model', 'full'),
        ('WikiText-2 model+10', 'subset'), ('WikiText-2 model+10', 'full')]
    kept, models = planned_arms(starts, [10], earlier)
    assert kept['MiniLM-L6+10'] is earlier['MiniLM-L6+10'] and 'MiniLM-L6+10' not in models


def test_rerun_names_an_arm_of_the_run_or_is_one_line(tmp_path):
    out = tmp_path / 'transfer-study.json'
    done = subprocess.run([sys.executable, STUDY, '--only', 'continue', '--rerun',
                           'MiniLM-L6+20', '--continue-minutes', '10', '--out', str(out)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 2 and done.stderr.count('\n') == 1
    assert '--rerun MiniLM-L6+20: no arm MiniLM-L6+20' in done.stderr
    assert not out.exists()


def test_a_start_pretrained_here_records_how(tmp_path):
    """A d2lbert run as a start: its options and last held-out evaluation are recorded
    (whole words where the run has them); a checkpoint without run.json records nothing."""
    sys.path.insert(0, os.path.dirname(STUDY))
    from transfer_continue import pretrained_here
    (tmp_path / 'run.json').write_text(json.dumps({'command': 'pretrain', 'options': {
        'data': 'articles', 'preset': 'small', 'objective': 'mlm+nsp', 'minutes': 30.0}}))
    records = [{'step': 10, 'split': 'valid', 'mlm_accuracy': 0.1, 'word_mlm_accuracy': 0.2},
               {'step': 20, 'split': 'train', 'mlm_accuracy': 0.9},
               {'step': 30, 'split': 'valid', 'mlm_accuracy': 0.25, 'word_mlm_accuracy': 0.3}]
    (tmp_path / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in records))
    assert pretrained_here(str(tmp_path)) == {
        'data': 'articles', 'preset': 'small', 'objective': 'mlm+nsp', 'minutes': 30.0,
        'steps': 30, 'held_out_accuracy': 0.3}
    assert pretrained_here(str(tmp_path / 'elsewhere')) is None
