"""Downloading SQuAD files from a local HTTP server the tests start (no internet):
checked, cached, atomic, with a clear message when offline."""
import hashlib
import json
import os
import socket

import pytest

from d2lbert.data import DownloadError
from d2lbert.data.squad import SQUAD_FILES, read_squad, squad_file, squad_path
from test_data_download import home, server  # noqa: F401  (pytest fixtures)

CONTENT = json.dumps({'version': 'v2.0', 'data': [{'title': 't', 'paragraphs': [
    {'context': 'Bern is the capital.', 'qas': [
        {'id': 'q', 'question': 'Capital?', 'answers': [{'text': 'Bern', 'answer_start': 0}],
         'is_impossible': False}]}]}]}).encode()


@pytest.fixture
def served(server, monkeypatch):  # noqa: F811
    url, directory = server
    (directory / 'dev-v2.0.json').write_bytes(CONTENT)
    monkeypatch.delenv('D2LBERT_SQUAD_URL', raising=False)
    return url, directory


def test_downloaded_checked_cached_and_read(home, served):  # noqa: F811
    url, directory = served
    path = squad_file('dev-v2.0.json', base_url=url, sha1=hashlib.sha1(CONTENT).hexdigest())
    assert path == str(home / 'squad' / 'dev-v2.0.json')
    assert os.listdir(home / 'squad') == ['dev-v2.0.json']  # no temporary file left
    assert read_squad(path).examples[0].answers[0].text == 'Bern'
    (directory / 'dev-v2.0.json').unlink()  # a second call is offline
    assert squad_path('dev-v2.0.json', base_url=url) == path


def test_the_official_sha1_refuses_another_file(home, served, monkeypatch):  # noqa: F811
    url, _ = served
    monkeypatch.setenv('D2LBERT_SQUAD_URL', url)
    with pytest.raises(DownloadError, match=SQUAD_FILES['dev-v2.0.json'][0]):
        squad_path('dev-v2.0.json')
    assert os.listdir(home / 'squad') == []  # nothing cached


def test_offline_error_says_how_to_use_a_local_copy(home, monkeypatch):  # noqa: F811
    with socket.socket() as s:  # a port nobody listens on
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match='pass its path, or set D2LBERT_SQUAD_URL'):
        squad_file('train-v1.1.json', base_url=f'http://127.0.0.1:{port}/')
    assert os.listdir(home / 'squad') == []


def test_local_paths_always_work_and_unknown_names_are_refused(tmp_path, home):  # noqa: F811
    local = tmp_path / 'my-squad.json'
    local.write_bytes(CONTENT)
    assert squad_path(str(local)) == str(local)
    with pytest.raises(FileNotFoundError, match='does not exist'):
        squad_path(str(tmp_path / 'missing.json'))
    with pytest.raises(ValueError, match='unknown SQuAD file'):
        squad_file('test-v2.0.json')
