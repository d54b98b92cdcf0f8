"""Downloading SQuAD's JSON files from the SQuAD site, checked, cached, atomically.

The four files are served as plain JSON at
``https://rajpurkar.github.io/SQuAD-explorer/dataset/``. Their SHA-1s (and sizes)
are those GluonNLP lists for these very addresses (``scripts/datasets/
url_checksums/squad.txt`` in its repository); GluonNLP 0.10's own mirror copies
(``gluonnlp/data/question_answering.py``) have the same SHA-1s but for
``dev-v2.0.json``, whose mirror copy is a different file
(``846082d15ed71cb5220645b9d473441e00070778``).

A file is downloaded once into ``$D2LBERT_HOME/squad/`` (default
``~/.d2lbert/squad``): to a temporary name, checked, then renamed into place, so
the cache never holds a partial or wrong file. ``D2LBERT_SQUAD_URL`` (or
``base_url=``) names a mirror holding the same file names; a local path always
works instead (:func:`squad_path`).
"""
import os
import tempfile

from ..cache import data_home
from ..download import archive_url, download_file, verify_sha1

SQUAD_URL = 'https://rajpurkar.github.io/SQuAD-explorer/dataset/'
SQUAD_FILES = {  # file name: (SHA-1, size in bytes)
    'train-v1.1.json': ('1faea1252438a64f9718412a55036b786cfcc636', 30288272),
    'dev-v1.1.json': ('e1621aae0683b346ee9743bd5609266ba0cc34fc', 4854279),
    'train-v2.0.json': ('ceb2acdea93b9d82ab1829c7b1e03bee9e302c99', 42123633),
    'dev-v2.0.json': ('53ebaeb15bc5cab36645150f6f65d074348e2f3d', 4370528),
}


def squad_file(name, base_url=None, sha1=None):
    """The path of the cached SQuAD file `name` (e.g. 'dev-v2.0.json'), downloaded
    and checked against its SHA-1 (or `sha1`) the first time.

    Raises:
        ValueError: an unknown name.
        DownloadError: network failure, HTTP error or checksum mismatch (the message
            says how to do without the download); nothing is cached then.
    """
    if name not in SQUAD_FILES:
        raise ValueError(f'unknown SQuAD file {name!r}; choose one of {sorted(SQUAD_FILES)} '
                         f'or pass the path of a local copy')
    directory = os.path.join(data_home(), 'squad')
    path = os.path.join(directory, name)
    if os.path.isfile(path):
        return path
    os.makedirs(directory, exist_ok=True)
    base_url = base_url or os.environ.get('D2LBERT_SQUAD_URL') or SQUAD_URL
    url = archive_url(base_url, name)
    offline_hint = (f'get {name} elsewhere (it is on {SQUAD_URL}) and pass its path, '
                    f'or set D2LBERT_SQUAD_URL to a mirror.')
    fd, tmp = tempfile.mkstemp(prefix=f'.tmp-{name}-', dir=directory)
    os.close(fd)
    try:
        verify_sha1(url, download_file(url, tmp, offline_hint), sha1 or SQUAD_FILES[name][0])
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def squad_path(data, base_url=None):
    """`data` itself if it is an existing file, else the cached download of the SQuAD
    file of that name ('train-v2.0.json', ...).

    Raises:
        FileNotFoundError: neither an existing file nor a SQuAD file name.
    """
    if os.path.isfile(data):
        return data
    if data in SQUAD_FILES:
        return squad_file(data, base_url)
    raise FileNotFoundError(f'{data} does not exist (and is not one of the SQuAD files '
                            f'that can be downloaded: {sorted(SQUAD_FILES)})')
