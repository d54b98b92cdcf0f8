"""Downloading WikiText from a local HTTP server the tests start (no internet)."""
import functools
import hashlib
import http.server
import io
import os
import socket
import threading
import zipfile

import pytest

from d2lbert.data import DownloadError, load_data_wiki, wikitext_directory

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
    monkeypatch.delenv('D2LBERT_WIKITEXT_URL', raising=False)
    return home


@pytest.fixture
def server(tmp_path):
    """Serve ``tmp_path / 'served'`` on 127.0.0.1; yields (url, directory)."""
    served = tmp_path / 'served'
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(served))
    handler.log_message = lambda *args: None
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
    assert "data='/path/to/wikitext-2'" in str(error.value)
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
