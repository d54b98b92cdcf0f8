"""Downloading WikiText-2 / WikiText-103, safely.

The d2l book downloads ``wikitext-2-v1.zip`` from an Amazon S3 bucket that
no longer serves it (d2l-en issue #2588). The dataset's author now hosts the
archives at ``https://wikitext.smerity.com/``; the SHA-1 checksums below are
the ones in d2l's ``DATA_HUB`` and in gluonnlp 0.10 (``gluonnlp/data/
corpora/wikitext.py``), so a changed or damaged file is refused.

Compared with ``d2l.download`` this

* verifies the checksum *after* downloading (d2l only checks a cached copy),
* downloads to a temporary name and extracts to a temporary directory that
  is renamed into place only when complete, so no partial file is ever left
  in the cache or read by a later run,
* fails with an error that says how to use a local copy when offline.

Set ``D2LBERT_WIKITEXT_URL`` (or pass ``base_url``) to download from a
mirror; the archives are cached in ``$D2LBERT_HOME`` (default ``~/.d2lbert``).
"""
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
import zipfile

from ..util.files import atomic_directory
from .cache import data_home

DEFAULT_BASE_URL = 'https://wikitext.smerity.com/'
WIKITEXT_ARCHIVES = {
    'wikitext-2': ('wikitext-2-v1.zip',
                   '3c914d17d80b1459be871a5039ac23e752a53cbe'),
    'wikitext-103': ('wikitext-103-v1.zip',
                     '0aec09a7537b58d4bb65362fee27650eeaba625a'),
}
SPLIT_FILES = ('wiki.train.tokens', 'wiki.valid.tokens', 'wiki.test.tokens')


class DownloadError(RuntimeError):
    """A dataset could not be downloaded or failed its checksum."""


def wikitext_directory(name='wikitext-2', base_url=None, sha1=None):
    """Directory holding ``wiki.{train,valid,test}.tokens`` of ``name``.

    Downloads and extracts the archive the first time; afterwards the cached
    copy is returned without touching the network.

    Args:
        name: ``'wikitext-2'`` or ``'wikitext-103'``.
        base_url: where the archives are, default ``$D2LBERT_WIKITEXT_URL``
            or ``https://wikitext.smerity.com/``.
        sha1: expected SHA-1 of the archive, default the official one.
    Raises:
        DownloadError: network failure, HTTP error or checksum mismatch.
    """
    if name not in WIKITEXT_ARCHIVES:
        raise ValueError(f'unknown dataset {name!r}; choose one of '
                         f'{sorted(WIKITEXT_ARCHIVES)}')
    directory = os.path.join(data_home(), name)
    if all(os.path.isfile(os.path.join(directory, f)) for f in SPLIT_FILES):
        return directory
    archive_name, official_sha1 = WIKITEXT_ARCHIVES[name]
    base_url = (base_url or os.environ.get('D2LBERT_WIKITEXT_URL')
                or DEFAULT_BASE_URL)
    url = base_url.rstrip('/') + '/' + archive_name
    with tempfile.TemporaryDirectory(dir=data_home()) as tmp:
        archive = os.path.join(tmp, archive_name)
        _download(url, archive, sha1 or official_sha1, name)
        with atomic_directory(directory) as extracted:
            _extract_split_files(archive, extracted)
    return directory


def _download(url, path, expected_sha1, name):
    """Download ``url`` to ``path`` and check its SHA-1."""
    # The WikiText host answers 403 to urllib's default User-Agent.
    request = urllib.request.Request(url, headers={'User-Agent': 'd2lbert'})
    sha1 = hashlib.sha1()
    try:
        with urllib.request.urlopen(request, timeout=60) as response, \
                open(path, 'wb') as f:
            for block in iter(lambda: response.read(1 << 20), b''):
                sha1.update(block)
                f.write(block)
    except (urllib.error.URLError, OSError) as error:
        raise DownloadError(
            f'could not download {name} from {url}: {error}.\n'
            f'If you are offline, get {os.path.basename(url)} elsewhere, '
            f'unzip it and pass the directory that holds wiki.train.tokens, '
            f"e.g. load_data_wiki(..., data='/path/to/{name}'), or set "
            f'D2LBERT_WIKITEXT_URL to a mirror.') from error
    if sha1.hexdigest() != expected_sha1:
        raise DownloadError(
            f'{url} has SHA-1 {sha1.hexdigest()}, expected {expected_sha1}: '
            f'the download is damaged or not the {name} archive; nothing was '
            f'cached, try again or use another mirror.')


def _extract_split_files(archive, directory):
    """Copy the three ``wiki.*.tokens`` members of ``archive`` (which sit in
    one folder inside it) into ``directory``, ignoring anything else."""
    with zipfile.ZipFile(archive) as zipped:
        members = {os.path.basename(m): m for m in zipped.namelist()}
        missing = [f for f in SPLIT_FILES if f not in members]
        if missing:
            raise DownloadError(f'{archive} does not contain {missing}')
        for file_name in SPLIT_FILES:
            with zipped.open(members[file_name]) as source, \
                    open(os.path.join(directory, file_name), 'wb') as target:
                for block in iter(lambda: source.read(1 << 20), b''):
                    target.write(block)
