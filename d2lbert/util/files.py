"""Directories that appear complete or not at all, and the temporary folders a killed
process leaves (named after its process id, so a later run can remove them)."""
import contextlib
import os
import shutil
import tempfile

OUR_TEMPORARIES = '.tmp-d2lbert-'  # + process id + '-'


@contextlib.contextmanager
def atomic_directory(final_path):
    """Build a directory under a temporary name; rename it into place at the end.

    Use as ``with atomic_directory(path) as tmp: write files into tmp``. On an
    exception the temporary directory is deleted and nothing appears at
    ``final_path``. If another process finished ``final_path`` first, its
    copy is kept (both hold the same content).
    """
    parent = os.path.dirname(final_path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=temporary_prefix(), dir=parent)
    try:
        yield tmp
        try:
            os.rename(tmp, final_path)
        except OSError:
            if not os.path.isdir(final_path):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def numbered_folder(parent, name):
    """Make and return the folder ``parent/name-1``, or ``name-2``, ... the first that
    does not exist yet (``os.mkdir`` claims it, so two processes never get the same one).

    A name a reader can follow ("runs/bert-nli-1"), unlike ``tempfile.mkdtemp``'s
    random letters; those hold underscores, and a printed path ending in one reads
    as a link in the book's reStructuredText.
    """
    os.makedirs(parent, exist_ok=True)
    number = 1
    while True:
        path = os.path.join(parent, f'{name}-{number}')
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            number += 1


def process_alive(pid):
    """Whether a process with this id runs (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temporary_prefix():
    """The name prefix of this process's temporary files and folders beside outputs."""
    return f'{OUR_TEMPORARIES}{os.getpid()}-'


def sweep_temporaries(folder):
    """Remove from `folder` the temporary files and folders of d2lbert processes that
    are no longer running (a kill leaves them: nothing else removes them)."""
    try:
        names = [name for name in os.listdir(folder) if name.startswith(OUR_TEMPORARIES)]
    except OSError:
        return
    for name in names:
        owner = name[len(OUR_TEMPORARIES):].partition('-')[0]
        if owner.isdigit() and int(owner) != os.getpid() and process_alive(int(owner)):
            continue
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(path)
