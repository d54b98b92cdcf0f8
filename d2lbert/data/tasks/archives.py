"""Downloading the tasks' archives: SNLI and the GLUE tasks (but MRPC).

Each archive is downloaded once, its split files extracted into
``$D2LBERT_HOME/tasks/<task>`` (default ``~/.d2lbert/tasks/<task>``) by
:func:`..download.cached_archive`: checked, written atomically, and with an
error that says how to use a local copy when offline.

* SNLI comes from the Stanford NLP site, as in the book, and is checked
  against the SHA-1 in d2l's ``DATA_HUB``.
* The GLUE tasks come from the addresses GLUE's ``download_glue_data.py``
  uses. No checksums are published for them, so unless you pass ``sha1=``
  the first download is recorded, not verified (trust on first use, see
  :mod:`..download`).
* MRPC has no single archive: GLUE's script assembles it from Microsoft's
  corpus. Run that script, or get the folder elsewhere, and pass its path.

``D2LBERT_SNLI_URL`` and ``D2LBERT_GLUE_URL`` (or ``base_url=``) point to a
mirror holding the same archive names.
"""
import dataclasses
import os
from typing import Optional, Tuple

from ..cache import data_home
from ..download import archive_url, cached_archive
from .glue import GLUE_LAYOUTS, glue_file_name
from .snli import SNLI_SPLITS, snli_file_name

SNLI_URL = 'https://nlp.stanford.edu/projects/snli/'
GLUE_URL = 'https://dl.fbaipublicfiles.com/glue/data/'


@dataclasses.dataclass(frozen=True)
class TaskArchive:
    """A task's zip archive and the split files to keep from it."""
    file_name: str
    sha1: Optional[str]  # None: no published checksum
    split_files: Tuple[str, ...]
    url_variable: str  # the environment variable naming a mirror
    default_base_url: str


SNLI_ARCHIVE = TaskArchive('snli_1.0.zip', '9fcde07509c7e87ec61c640c1b2753d9041758e4',
                           tuple(snli_file_name(s) for s in SNLI_SPLITS),
                           'D2LBERT_SNLI_URL', SNLI_URL)
GLUE_WITHOUT_ARCHIVE = (
    "MRPC has no single archive to download: GLUE's "
    "download_glue_data.py assembles it from Microsoft's MSR "
    "Paraphrase Corpus. Run that script (or get the MRPC folder "
    "elsewhere) and give the folder holding train.tsv, dev.tsv and "
    "test.tsv as the data (d2lbert finetune --data FOLDER).")
CONLL2003_NOT_FREE = (
    "CoNLL-2003 cannot be downloaded freely (its text belongs to "
    "Reuters): give a copy as the data (d2lbert finetune --data "
    "FOLDER or FILE), a folder holding train.txt, valid.txt, "
    "test.txt (or eng.train, eng.testa, eng.testb) or one file.")


def glue_archive(task):
    """The :class:`TaskArchive` of a GLUE task, kept split files per
    :mod:`.glue`; None for a task without one (MRPC)."""
    layout = GLUE_LAYOUTS[task]
    if layout.archive is None:
        return None
    return TaskArchive(layout.archive, None,
                       tuple(glue_file_name(task, s) for s in layout.splits),
                       'D2LBERT_GLUE_URL', GLUE_URL)


def download_archive(task, archive, base_url=None, sha1=None):
    """The folder ``$D2LBERT_HOME/tasks/<task>`` holding the split files of
    ``archive`` (a :class:`TaskArchive`), downloaded once.

    Args:
        base_url: where the archive is; default the archive's environment
            variable (``D2LBERT_SNLI_URL`` / ``D2LBERT_GLUE_URL``) or the
            official site.
        sha1: the SHA-1 you expect; default the published one (SNLI) or the
            first download's (see the module doc).
    Raises:
        DownloadError: network failure, HTTP error, checksum mismatch.
    """
    base_url = (base_url or os.environ.get(archive.url_variable)
                or archive.default_base_url)
    offline_hint = (
        f'get {archive.file_name} elsewhere, unzip it and give the folder '
        f'holding {archive.split_files[0]} as the data (d2lbert finetune '
        f'--data FOLDER), or set {archive.url_variable} to a mirror.')
    return cached_archive(os.path.join(data_home(), 'tasks', task),
                          archive_url(base_url, archive.file_name),
                          archive.split_files, sha1 or archive.sha1,
                          offline_hint)
