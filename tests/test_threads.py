"""The `d2lbert` command makes MXNet's OpenMP threads spin only briefly before they sleep
while they wait (GOMP_SPINCOUNT=1000), unless the user chose: long-spinning threads make
runs that share the cores collapse (d2lbert/util/threads.py;
chapter_bert/studies/concurrent_runs.py measures it). A library import of d2lbert leaves
OpenMP's defaults alone."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


COMMAND = ['-m', 'd2lbert', '--help']
LIBRARY = ['-c', 'import d2lbert; d2lbert.BERTModel']


def openmp_settings(argv=COMMAND, **chosen):
    """The settings libgomp reports (OMP_DISPLAY_ENV) in a fresh process running argv
    (the command, by default), with the wait variables unset except `chosen`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT')}
    env.update(chosen, OMP_DISPLAY_ENV='VERBOSE', PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    done = subprocess.run([sys.executable, *argv], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    settings = {}
    for line in done.stderr.splitlines():
        name, equals, value = line.strip().partition(' = ')
        if equals:
            settings[name] = value.strip("'")
    return settings


def test_openmp_threads_spin_briefly_then_sleep():
    assert openmp_settings()['GOMP_SPINCOUNT'] == '1000'


def test_a_library_import_keeps_openmps_defaults():
    assert openmp_settings(LIBRARY)['GOMP_SPINCOUNT'] == '300000'


@pytest.mark.parametrize('chosen, expected', [
    ({'OMP_WAIT_POLICY': 'ACTIVE'}, {'OMP_WAIT_POLICY': 'ACTIVE'}),
    ({'GOMP_SPINCOUNT': '300000'}, {'GOMP_SPINCOUNT': '300000'})])
def test_the_users_choice_is_kept(chosen, expected):
    settings = openmp_settings(**chosen)
    assert {k: settings[k] for k in expected} == expected
