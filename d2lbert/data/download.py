"""Downloading data sets safely: WikiText here, the fine-tuning tasks in
:mod:`.tasks.archives`.

The d2l book downloads ``wikitext-2-v1.zip`` from an Amazon S3 bucket that
no longer serves it (d2l-en issue #2588). The dataset's author now hosts the
archives at ``https://wikitext.smerity.com/``; the SHA-1 checksums below are
the ones in d2l's ``DATA_HUB`` and in gluonnlp 0.10 (``gluonnlp/data/
corpora/wikitext.py``), so a changed or damaged file is refused.

Compared with ``d2l.download``, :func:`cached_archive` (which every data set
uses)

* verifies the checksum *after* downloading (d2l only checks a cached copy),
* downloads to a temporary name and extracts to a temporary directory that
  is renamed into place only when complete, so no partial file is ever left
  in the cache or read by a later run,
* fails with an error that says how to use a local copy when offline.

**Archives without a published checksum** (the GLUE tasks): nobody can tell
whether the very first download is the genuine file, so d2lbert does not
pretend to. Pass the SHA-1 you trust (``sha1=``) and it is checked as usual.
Without one, the first download's SHA-1 is *recorded* in
``$D2LBERT_HOME/sha1-first-download.json`` and printed with a note saying
that the file was not verified; every later download of the same archive
(after the cache was deleted, on a mirror, ...) must have that same SHA-1.
This "trust on first use" catches a changed or damaged file later, never a
bad first one.

Set ``D2LBERT_WIKITEXT_URL`` (or pass ``base_url``) to download from a
mirror; the archives are cached in ``$D2LBERT_HOME`` (default ``~/.d2lbert``).
"""
import hashlib
import json
import os
import sys
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
RECORDED_SHA1_FILE = 'sha1-first-download.json'


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
    archive_name, official_sha1 = WIKITEXT_ARCHIVES[name]
    base_url = (base_url or os.environ.get('D2LBERT_WIKITEXT_URL')
                or DEFAULT_BASE_URL)
    offline_hint = (
        f'get {archive_name} elsewhere, unzip it and give the folder that '
        f'holds wiki.train.tokens as the data (d2lbert pretrain --data '
        f'FOLDER), or set D2LBERT_WIKITEXT_URL to a mirror.')
    return cached_archive(os.path.join(data_home(), name),
                          archive_url(base_url, archive_name), SPLIT_FILES,
                          sha1 or official_sha1, offline_hint)


def archive_url(base_url, archive_name):
    """``base_url`` (with or without a final '/') joined with a file name."""
    return base_url.rstrip('/') + '/' + archive_name


def cached_archive(directory, url, file_names, sha1, offline_hint):
    """``directory`` holding ``file_names`` taken from the zip at ``url``.

    If ``directory`` already holds them it is returned at once (no network).
    Otherwise the archive is downloaded into a temporary file, checked (see
    the module doc: against ``sha1``, or the recorded first download's SHA-1
    when ``sha1`` is None) and its members named ``file_names`` are
    extracted into ``directory``, which appears complete or not at all.
    A first download without any checksum is recorded only once it has been
    extracted, so a broken file (an error page, say) is never recorded.

    Args:
        directory: the cache entry, e.g. ``~/.d2lbert/wikitext-2``.
        url: the zip archive's address.
        file_names: base names of the members to keep (wherever they sit in
            the archive).
        sha1: the expected hex SHA-1, or None if none is published.
        offline_hint: how to do without the download, for the error message.
    Raises:
        DownloadError: network failure, HTTP error, checksum mismatch, not a
            zip archive or a missing member.
    """
    if all(os.path.isfile(os.path.join(directory, f)) for f in file_names):
        return directory
    archive_name = os.path.basename(url)
    with tempfile.TemporaryDirectory(dir=data_home()) as tmp:
        archive = os.path.join(tmp, archive_name)
        actual_sha1 = download_file(url, archive, offline_hint)
        verify_sha1(url, actual_sha1, sha1)
        with atomic_directory(directory) as extracted:
            extract_files(archive, extracted, file_names)
    if sha1 is None and archive_name not in recorded_sha1s():
        record_first_download(archive_name, actual_sha1)
    return directory


def download_file(url, path, offline_hint):
    """Download ``url`` to ``path``; return the file's hex SHA-1.

    Raises:
        DownloadError: naming the URL, the cause and ``offline_hint``.
    """
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
            f'could not download {os.path.basename(url)} from {url}: '
            f'{error}. If you are offline, {offline_hint}') from error
    return sha1.hexdigest()


def verify_sha1(url, actual_sha1, expected_sha1):
    """Refuse the download of ``url`` unless its SHA-1 is the expected one.

    With ``expected_sha1=None`` the SHA-1 recorded at the archive's first
    download is expected; if there is none yet, this is the first download
    and there is nothing to compare with (see the module doc).
    """
    archive_name = os.path.basename(url)
    source = 'expected'
    if expected_sha1 is None:
        expected_sha1 = recorded_sha1s().get(archive_name)
        source = (f'recorded when {archive_name} was first downloaded (in '
                  f'{recorded_sha1_path()}; delete that entry if the new '
                  f'file is genuine)')
    if expected_sha1 is not None and actual_sha1 != expected_sha1:
        raise DownloadError(
            f'{url} has SHA-1 {actual_sha1}, {source} {expected_sha1}: the '
            f'download is damaged or not the {archive_name} archive; nothing '
            f'was cached, try again or use another mirror.')


def recorded_sha1_path():
    return os.path.join(data_home(), RECORDED_SHA1_FILE)


def recorded_sha1s():
    """``{archive name: SHA-1 of its first download}`` (empty if none)."""
    try:
        with open(recorded_sha1_path(), encoding='utf-8') as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def record_first_download(archive_name, sha1):
    """Add ``archive_name: sha1`` to the recorded SHA-1s (written atomically)
    and print a note saying that this download was not verified."""
    records = {**recorded_sha1s(), archive_name: sha1}
    fd, tmp = tempfile.mkstemp(prefix='.tmp-', dir=data_home())
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            json.dump(records, f, indent=1, sort_keys=True)
        os.replace(tmp, recorded_sha1_path())
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f'note: {archive_name} has no published checksum, so this download '
          f'was NOT verified. Its SHA-1 is {sha1}; it is recorded in '
          f'{recorded_sha1_path()} and later downloads must match it. Compare '
          f'it with a source you trust, or pass sha1=... to check against '
          f'your own value.', file=sys.stderr)


def extract_files(archive, directory, file_names):
    """Copy the members of the zip ``archive`` whose base names are
    ``file_names`` into ``directory``, ignoring anything else.

    A member may sit in any folder of the archive; if a name occurs in
    several folders, the least deeply nested is taken. (The macOS resource
    forks some archives carry, ``__MACOSX/folder/._name``, have other names.)
    """
    if not zipfile.is_zipfile(archive):
        raise DownloadError(f'the downloaded {os.path.basename(archive)} is '
                            f'not a zip archive; nothing was cached.')
    with zipfile.ZipFile(archive) as zipped:
        members = {}
        for member in sorted(zipped.namelist(), key=lambda m: m.count('/')):
            members.setdefault(os.path.basename(member), member)
        missing = [f for f in file_names if f not in members]
        if missing:
            raise DownloadError(f'{archive} does not contain {missing}')
        for file_name in file_names:
            with zipped.open(members[file_name]) as source, \
                    open(os.path.join(directory, file_name), 'wb') as target:
                for block in iter(lambda: source.read(1 << 20), b''):
                    target.write(block)
