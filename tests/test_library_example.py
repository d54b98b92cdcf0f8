"""docs/library.md's example, run as a downstream project would: in a fresh virtual
environment where d2lbert is installed with the `cpu` and `hf` extras only, so that
d2l and GluonNLP (the book's and the bench's) are absent."""
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from test_inputs import minilm_folder


@pytest.fixture(scope='module')
def fresh_python(tmp_path_factory):
    """The Python of a new virtual environment with `pip install REPO[cpu,hf]`."""
    venv = tmp_path_factory.mktemp('downstream') / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True)
    python = str(venv / 'bin' / 'python')
    done = subprocess.run([python, '-m', 'pip', 'install', '--quiet',
                           '--disable-pip-version-check', f'{REPO_ROOT}[cpu,hf]'],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def example_code():
    with open(os.path.join(REPO_ROOT, 'docs', 'library.md'), encoding='utf-8') as f:
        blocks = re.findall(r'^```python\n(.*?)^```$', f.read(), re.S | re.M)
    assert len(blocks) == 1
    return blocks[0]


def test_the_blocks_install_without_d2l_and_gluonnlp(fresh_python):
    for package in ('d2l', 'gluonnlp', 'transformers', 'torch'):
        done = subprocess.run([fresh_python, '-c', f'import {package}'],
                              capture_output=True, text=True)
        assert done.returncode != 0, f'{package} was installed with the blocks'


def test_the_downstream_example_trains_saves_and_reloads(fresh_python, tmp_path):
    script = tmp_path / 'example.py'
    script.write_text(example_code(), encoding='utf-8')
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    done = subprocess.run([fresh_python, str(script), minilm_folder(), str(tmp_path / 'clf')],
                          cwd=tmp_path, env=dict(env, OMP_NUM_THREADS='1'),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    losses = [float(value) for value in re.findall(r'loss (\S+)', done.stdout)]
    assert len(losses) == 8 and losses[-1] < losses[0], done.stdout
    assert 'reloaded computes the same logits: True' in done.stdout
    assert sorted(os.listdir(tmp_path / 'clf')) == [
        'config.json', 'manifest.json', 'model.params', 'task.json', 'tokenizer_config.json',
        'vocab.txt']
