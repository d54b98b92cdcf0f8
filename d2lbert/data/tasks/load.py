"""``load_task``: one split of a task by name, from a local copy or downloaded.

    >>> data = load_task('snli', 'dev')                       # doctest: +SKIP
    >>> data.examples[0], data.labels, data.num_dropped       # doctest: +SKIP
    (TaskExample(text='Two women are embracing ...', text_pair='The sisters
     are hugging ...', label='neutral'), ('entailment', 'contradiction',
     'neutral'), 158)

:data:`TASK_FILES` says, for each task, how its split files are named, read
and downloaded: a new task with files of its own is one entry there and its
reader (a function path -> :class:`.examples.TaskData`, e.g.
:func:`.snli.read_snli`).
"""
import dataclasses
import functools
import os
from typing import Callable, Optional, Tuple

from ..download import DownloadError
from .archives import (CONLL2003_NOT_FREE, GLUE_WITHOUT_ARCHIVE, SNLI_ARCHIVE, TaskArchive,
                       download_archive, glue_archive)
from .conll import conll2003_file_names, read_conll2003
from .examples import TaskData
from .glue import GLUE_LAYOUTS, glue_file_name, read_glue
from .snli import read_snli, snli_file_names


@dataclasses.dataclass(frozen=True)
class TaskFiles:
    """How a task's split files are named, read and downloaded.

    read: path -> TaskData, the task's reader.
    file_names: split -> the names its file may have in the task's folder.
    archive: where to download the files; None if they cannot be.
    no_download: why not, and what to do instead (None: there is an archive).
    """
    read: Callable[[str], TaskData]
    file_names: Callable[[str], Tuple[str, ...]]
    archive: Optional[TaskArchive]
    no_download: Optional[str] = None


def glue_files(task):
    """The :class:`TaskFiles` of a GLUE task (see :mod:`.glue`)."""
    archive = glue_archive(task)
    return TaskFiles(functools.partial(read_glue, task),
                     lambda split: (glue_file_name(task, split),), archive,
                     None if archive else GLUE_WITHOUT_ARCHIVE)


TASK_FILES = {
    'snli': TaskFiles(read_snli, snli_file_names, SNLI_ARCHIVE),
    **{name: glue_files(name) for name in GLUE_LAYOUTS},
    'conll2003': TaskFiles(read_conll2003, conll2003_file_names, None, CONLL2003_NOT_FREE),
}
TASKS = tuple(TASK_FILES)
TASK_ARCHIVES = {name: files.archive for name, files in TASK_FILES.items()
                 if files.archive is not None}


def task_files(task):
    """The :class:`TaskFiles` of ``task``; a ValueError for an unknown one."""
    if task not in TASK_FILES:
        raise ValueError(f'unknown task {task!r}; choose one of {TASKS}')
    return TASK_FILES[task]


def load_task(task, split='train', data=None, base_url=None, sha1=None):
    """Read ``split`` of ``task`` into a :class:`.examples.TaskData`.

    Args:
        task: one of :data:`TASKS`: SNLI, a GLUE task (a key of
            :data:`.glue.GLUE_LAYOUTS`) or CoNLL-2003. For your own files use
            :func:`.custom.read_task_file`.
        split: 'train', 'dev' or 'test'; for MNLI 'train', 'dev_matched',
            'dev_mismatched', 'test_matched' or 'test_mismatched'.
        data: None to download the task (see :func:`task_directory`), a
            folder holding its split files under their usual names, or one
            file (``split`` is then ignored).
        base_url, sha1: for the download, see :func:`task_directory`.
    """
    files = task_files(task)
    if data is not None and os.path.isfile(data):
        path = data
    else:
        if data is None:
            data = task_directory(task, base_url, sha1)
        elif not os.path.isdir(data):
            raise FileNotFoundError(f'the data {data!r} is neither a file '
                                    f'nor a folder')
        path = split_file(task, split, data)
    return files.read(path)


def task_directory(task, base_url=None, sha1=None):
    """The folder holding the split files of ``task``, downloaded once
    (:func:`.archives.download_archive`: base_url, sha1).

    Raises:
        DownloadError: the task has no download (MRPC, CoNLL-2003), or
            network failure, HTTP error, checksum mismatch.
    """
    files = task_files(task)
    if files.archive is None:
        raise DownloadError(files.no_download)
    return download_archive(task, files.archive, base_url, sha1)


def split_file(task, split, directory):
    """The file of ``split`` in the folder ``directory`` of ``task``."""
    files = task_files(task)
    names = files.file_names(split)
    for name in names:
        if os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    hint = files.no_download or ''
    raise FileNotFoundError(f'{directory} holds none of {list(names)}, the '
                            f'{task} {split} file. {hint}'.rstrip())


def read_task_split(task, path):
    """Read the file ``path`` with the reader of ``task``."""
    return task_files(task).read(path)
