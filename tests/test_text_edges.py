"""Your text, right at the edges (issue 52): an input inside --out survives
--overwrite, --resume notices text that changed, a .json file is JSON lines, a long
table field is read, parameters the objective does not reach stay as they came,
evaluation is bounded, and every command tokenizes words alike.

Every file is generated here; every run is tiny (one or a few steps)."""
import json
import os

import pytest

from conftest import run_main
from test_text_formats import TINY_RUN, random_texts, write


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))
    return tmp_path


def one_line_error(code, err):
    """The command failed with one line, exit code 2, no traceback."""
    assert code == 2, err
    assert 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_valid_inside_out_survives_overwrite(workdir, capsys):
    """`--valid out/dev.txt --out out --overwrite` emptied out/, dev.txt with it."""
    data = write(workdir / 'lines.txt', '\n'.join(random_texts(200)))
    os.makedirs(workdir / 'out')
    valid = write(workdir / 'out' / 'dev.txt', '\n'.join(random_texts(40, seed=1)))
    with open(valid, 'rb') as f:
        before = f.read()
    code, _, err = run_main(['pretrain', '--data', data, '--line-by-line', '--objective',
                             'mlm', '--valid', valid, '--out', 'out', '--overwrite',
                             *TINY_RUN], capsys)
    assert '--valid' in one_line_error(code, err)
    with open(valid, 'rb') as f:
        assert f.read() == before
