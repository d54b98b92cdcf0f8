"""Downloading WikiText and the fine-tuning tasks (SNLI, GLUE) from a local HTTP server
the tests start (no internet)."""
import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import threading
import zipfile

import pytest

from d2lbert.data import DownloadError, load_data_wiki, load_task, wikitext_directory
from d2lbert.data.download import RECORDED_SHA1_FILE
from d2lbert.data.tasks import task_directory

TRAIN = ' = Title = \n \n The cat sat . It purred . \n Dogs bark . Birds sing . \n'


def make_archive(directory):
    """A small wikitext-2-v1.zip; returns its SHA-1."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as archive:
        for split in ('train', 'valid', 'test'):
            archive.writestr(f'wikitext-2/wiki.{split}.tokens', TRAIN)
    data = buffer.getvalue()
    (directory / 'wikitext-2-v1.zip').write_bytes(data)
    return hashlib.sha1(data).hexdigest()


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / 'home'
    monkeypatch.setenv('D2LBERT_HOME', str(home))
    for variable in ('D2LBERT_WIKITEXT_URL', 'D2LBERT_SNLI_URL', 'D2LBERT_GLUE_URL'):
        monkeypatch.delenv(variable, raising=False)
    return home


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        """No access log on stderr."""


@pytest.fixture
def server(tmp_path):
    """Serve ``tmp_path / 'served'`` on 127.0.0.1; yields (url, directory)."""
    served = tmp_path / 'served'
    served.mkdir()
    handler = functools.partial(QuietHandler, directory=str(served))
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{httpd.server_port}/', served
    httpd.shutdown()
    httpd.server_close()


def cached_entries(home):
    return sorted(os.listdir(home)) if home.exists() else []


def test_good_archive_is_downloaded_verified_and_cached(home, server):
    url, served = server
    sha1 = make_archive(served)
    directory = wikitext_directory('wikitext-2', base_url=url, sha1=sha1)
    assert directory == str(home / 'wikitext-2')
    assert sorted(os.listdir(directory)) == [
        'wiki.test.tokens', 'wiki.train.tokens', 'wiki.valid.tokens']
    assert cached_entries(home) == ['wikitext-2']  # no temporary files left
    (served / 'wikitext-2-v1.zip').unlink()  # a second call is offline
    assert wikitext_directory('wikitext-2', base_url=url) == directory


def test_base_url_from_the_environment(home, server, monkeypatch):
    url, served = server
    monkeypatch.setenv('D2LBERT_WIKITEXT_URL', url)
    sha1 = make_archive(served)
    import d2lbert.data.download as download
    monkeypatch.setitem(download.WIKITEXT_ARCHIVES, 'wikitext-2',
                        ('wikitext-2-v1.zip', sha1))
    data_iter, vocab = load_data_wiki(4, 16, data='wikitext-2', min_freq=1)
    assert len(data_iter) == 1 and vocab['cat'] > 4


def test_corrupted_archive_is_refused_and_not_cached(home, server):
    url, served = server
    make_archive(served)
    with pytest.raises(DownloadError, match='SHA-1') as error:
        wikitext_directory('wikitext-2', base_url=url)  # the official SHA-1
    assert '3c914d17d80b1459be871a5039ac23e752a53cbe' in str(error.value)
    assert cached_entries(home) == []


def test_http_404_is_a_clear_error(home, server):
    url, _ = server
    with pytest.raises(DownloadError, match='404') as error:
        wikitext_directory('wikitext-2', base_url=url)
    assert 'holds wiki.train.tokens as the data (d2lbert pretrain --data FOLDER)' in str(
        error.value)
    assert cached_entries(home) == []


def test_server_not_running_is_a_clear_error(home):
    with socket.socket() as s:  # find a port nobody listens on
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match='offline') as error:
        wikitext_directory('wikitext-2', base_url=f'http://127.0.0.1:{port}/')
    assert 'refused' in str(error.value).lower()
    assert cached_entries(home) == []


def test_unknown_dataset_name(home):
    with pytest.raises(ValueError, match='wikitext-3'):
        wikitext_directory('wikitext-3')


# ----------------------------------------------------------------------------- tasks

SNLI_ROW = {'annotator_labels': ['neutral'], 'gold_label': 'neutral',
            'sentence1': 'A person on a horse jumps over a broken down airplane.',
            'sentence2': 'A person is training his horse for a competition.'}


def make_zip(path, members):
    """Write a zip of ``{member name: text}`` to ``path``; return its SHA-1. The members'
    dates are fixed, so the same members always give the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as archive:
        for name, text in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2015, 8, 1, 0, 0, 0)), text)
    path.write_bytes(buffer.getvalue())
    return hashlib.sha1(buffer.getvalue()).hexdigest()


def make_snli_archive(directory):
    """A small snli_1.0.zip laid out as the real one: a snli_1.0/ folder with .jsonl
    and .txt splits, and macOS resource forks under __MACOSX/."""
    members = {}
    for split in ('train', 'dev', 'test'):
        rows = [SNLI_ROW, dict(SNLI_ROW, gold_label='-')]
        members[f'snli_1.0/snli_1.0_{split}.jsonl'] = ''.join(
            json.dumps(row) + '\n' for row in rows)
        members[f'snli_1.0/snli_1.0_{split}.txt'] = 'gold_label\tsentence1\tsentence2\n'
        members[f'__MACOSX/snli_1.0/._snli_1.0_{split}.jsonl'] = 'resource fork'
    return make_zip(directory / 'snli_1.0.zip', members)


def make_cola_archive(directory, sentence='They drank the pub.'):
    """A small CoLA.zip: CoLA/{train,dev,test}.tsv in GLUE's layout, raw files, and a
    made-up second train.tsv deeper down (listed first), which must not be taken."""
    return make_zip(directory / 'CoLA.zip', {
        'CoLA/original/made-up/train.tsv': 'gj04\t1\t\tNot this one.\n',
        'CoLA/train.tsv': f'gj04\t0\t*\t{sentence}\n',
        'CoLA/dev.tsv': 'gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n',
        'CoLA/test.tsv': 'index\tsentence\n0\tBill whistled past the house.\n',
        'CoLA/original/raw/in_domain_train.tsv': 'not read\n'})


def test_snli_is_downloaded_verified_and_cached(home, server):
    url, served = server
    sha1 = make_snli_archive(served)
    directory = task_directory('snli', base_url=url, sha1=sha1)
    assert directory == str(home / 'tasks' / 'snli')
    assert sorted(os.listdir(directory)) == [
        'snli_1.0_dev.jsonl', 'snli_1.0_test.jsonl', 'snli_1.0_train.jsonl']
    (served / 'snli_1.0.zip').unlink()  # now offline: the cache is used
    data = load_task('snli', 'dev', base_url=url)
    assert [e.text_pair for e in data.examples] == [SNLI_ROW['sentence2']]
    assert data.num_dropped == 1
    assert sorted(os.listdir(home)) == ['tasks']  # no temporary files left


def test_snli_archive_is_checked_against_the_book_sha1(home, server):
    url, served = server
    make_snli_archive(served)
    with pytest.raises(DownloadError, match='9fcde07509c7e87ec61c640c1b2753d9041758e4'):
        task_directory('snli', base_url=url)
    assert not (home / 'tasks').exists()


def test_glue_without_checksum_records_the_first_download(home, server, capsys):
    url, served = server
    sha1 = make_cola_archive(served)
    directory = task_directory('cola', base_url=url)
    note = capsys.readouterr().err
    assert 'NOT verified' in note and sha1 in note and RECORDED_SHA1_FILE in note
    records = json.loads((home / RECORDED_SHA1_FILE).read_text(encoding='utf-8'))
    assert records == {'CoLA.zip': sha1}
    assert sorted(os.listdir(directory)) == ['dev.tsv', 'test.tsv', 'train.tsv']
    data = load_task('cola', 'train', base_url=url)
    assert [(e.text, e.label) for e in data.examples] == [('They drank the pub.', '0')]
    assert load_task('cola', 'test', base_url=url).examples[0].label is None
    # Downloaded again later (the cache was deleted): a changed archive is refused.
    shutil.rmtree(directory)
    make_cola_archive(served, sentence='Something else entirely.')
    with pytest.raises(DownloadError, match='recorded when CoLA.zip was first downloaded'):
        task_directory('cola', base_url=url)
    assert not os.path.exists(directory)
    make_cola_archive(served)  # the same archive again is accepted, without a note
    assert task_directory('cola', base_url=url) == directory
    assert capsys.readouterr().err == ''


def test_glue_with_a_given_sha1_and_the_environment_url(home, server, monkeypatch):
    url, served = server
    sha1 = make_cola_archive(served)
    monkeypatch.setenv('D2LBERT_GLUE_URL', url)
    with pytest.raises(DownloadError, match=f'expected {"0" * 40}'):
        task_directory('cola', sha1='0' * 40)
    assert task_directory('cola', sha1=sha1) == str(home / 'tasks' / 'cola')
    assert not (home / RECORDED_SHA1_FILE).exists()  # verified: nothing to record


def test_task_download_offline_names_a_local_path(home):
    with socket.socket() as s:  # find a port nobody listens on
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match='offline') as error:
        load_task('rte', base_url=f'http://127.0.0.1:{port}/')
    message = str(error.value)
    assert 'as the data (d2lbert finetune --data FOLDER)' in message and '\n' not in message
    assert 'RTE.zip' in message and 'D2LBERT_GLUE_URL' in message
    assert not (home / 'tasks').exists()


def test_archive_missing_a_split_file_is_refused(home, server):
    url, served = server
    sha1 = make_zip(served / 'WNLI.zip', {'WNLI/train.tsv': 'index\tsentence1\n'})
    with pytest.raises(DownloadError, match=r"does not contain \['dev.tsv', 'test.tsv'\]"):
        task_directory('wnli', base_url=url, sha1=sha1)
    assert not (home / 'tasks' / 'wnli').exists()


def test_a_broken_first_download_is_not_recorded(home, server, capsys):
    url, served = server
    (served / 'SST-2.zip').write_bytes(b'<html>Service unavailable</html>')
    with pytest.raises(DownloadError, match='SST-2.zip is not a zip archive'):
        task_directory('sst2', base_url=url)
    assert not (home / 'tasks' / 'sst2').exists()  # neither cached
    assert not (home / RECORDED_SHA1_FILE).exists()  # nor recorded
    sha1 = make_zip(served / 'SST-2.zip', {
        f'SST-2/{split}.tsv': 'sentence\tlabel\nfine .\t1\n' for split in (
            'train', 'dev', 'test')})
    assert task_directory('sst2', base_url=url) == str(home / 'tasks' / 'sst2')
    assert sha1 in capsys.readouterr().err
    assert json.loads((home / RECORDED_SHA1_FILE).read_text()) == {'SST-2.zip': sha1}
