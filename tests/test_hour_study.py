"""chapter_bert/studies/hour_study.py: what it reads of a running job and how it judges
drift, on samples made to hold a known answer (the hour itself is a study, not a test)."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    'hour_study', os.path.join(ROOT, 'chapter_bert', 'studies', 'hour_study.py'))
hour_study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hour_study)


def samples_of(rss, rate=lambda minute: 300.0, fds=lambda minute: 11, minutes=60):
    """A sample every half minute of an hour's run, after a minute of preparation."""
    made = []
    for i in range(2 * (minutes + 1) + 1):
        minute = i / 2
        made.append({'seconds': 60 + 60 * minute, 'rss_mb': rss(minute),
                     'rss_anon_mb': rss(minute) - 100, 'open_fds': fds(minute),
                     'temporaries': 0, 'checkpoints': 1, 'run_files': 6,
                     'train': [{'step': i, 'pairs_per_second': rate(minute)}]})
    return [{'seconds': 10, 'train': []}] + made   # reading the corpus: no record yet


def judged(samples):
    return hour_study.checks(hour_study.on_the_training_clock(samples), 60)


def test_the_clock_starts_at_the_first_training_record():
    clocked = hour_study.on_the_training_clock(samples_of(lambda m: 1000.0))
    assert clocked[0]['minutes'] == 0 and clocked[2]['minutes'] == pytest.approx(1.0)


def test_a_flat_run_passes_and_a_leak_or_a_slowdown_fails():
    flat = judged(samples_of(lambda m: 1000.0))
    assert flat['rss_flat'] and flat['speed_kept'] and flat['fds_flat']
    leak = judged(samples_of(lambda m: 1000.0 + 10 * m))   # 10 MB a minute
    assert not leak['rss_flat'] and leak['rss_late_over_settled'] > 1.1
    slow = judged(samples_of(lambda m: 1000.0, rate=lambda m: 300.0 if m < 45 else 200.0))
    assert not slow['speed_kept']
    assert slow['pairs_per_second_late_over_early'] == pytest.approx(200 / 300)
    descriptors = judged(samples_of(lambda m: 1000.0, fds=lambda m: 11 + int(m)))
    assert not descriptors['fds_flat']


def test_one_step_at_the_first_evaluation_is_told_apart_from_drift():
    """Memory that steps up once at minute 12 (the evaluation's graph) and stays: the
    literal 5-15 window sees the step, minutes 15-25 against the last 10 see none."""
    stepped = judged(samples_of(lambda m: 1000.0 if m < 12 else 1300.0))
    assert stepped['rss_late_over_early'] == pytest.approx(1.3)
    assert stepped['rss_late_over_settled'] == pytest.approx(1.0)


def test_training_records_are_read_once_and_a_half_written_line_waits(tmp_path):
    path = tmp_path / 'metrics.jsonl'
    record = {'step': 1, 'split': 'train', 'pairs_per_second': 5.0}
    path.write_text(json.dumps(record) + '\n' + json.dumps({'step': 1, 'split': 'valid'})
                    + '\n{"step": 2, "spl')
    records, seen = hour_study.new_train_records(str(path), 0)
    assert records == [record] and seen == 2
    with open(path, 'a') as f:
        f.write('it": "train", "pairs_per_second": 6.0}\n')
    records, seen = hour_study.new_train_records(str(path), seen)
    assert [r['step'] for r in records] == [2] and seen == 3
