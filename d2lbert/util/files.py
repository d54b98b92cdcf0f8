"""Directories that appear complete or not at all, and the temporary folders a killed
process leaves (named after its machine and process id, so that a later run on the same
machine can remove them, and one on another machine sharing the folder leaves them)."""
import contextlib
import os
import re
import shutil
import socket
import tempfile

OUR_TEMPORARIES = '.tmp-d2lbert-'  # + host name + '@' + process id + '-'


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


def host_name():
    """This machine's name, as a temporary's name holds it (no '@' or '/')."""
    return re.sub(r'[^A-Za-z0-9._-]', '_', socket.gethostname())


def temporary_prefix():
    """The name prefix of this process's temporary files and folders beside outputs."""
    return f'{OUR_TEMPORARIES}{host_name()}@{os.getpid()}-'


def temporary_owner(name):
    """(host name, process id) of a temporary's name; the host is None in a name
    written by an older d2lbert (`.tmp-d2lbert-PID-...`), the id None if unreadable."""
    rest = name[len(OUR_TEMPORARIES):]
    host, at, rest = rest.rpartition('@')  # the random end of the name holds no '@'
    owner = rest.partition('-')[0]
    return (host if at else None), (int(owner) if owner.isdigit() else None)


def sweep_temporaries(folder):
    """Remove from `folder` the temporary files and folders of d2lbert processes of this
    machine that are no longer running (a kill leaves them: nothing else removes them).
    Another machine's are left alone: with the folder on a shared file system, that
    machine's process may be writing them (an older d2lbert's, named without a machine,
    count as this machine's)."""
    try:
        names = [name for name in os.listdir(folder) if name.startswith(OUR_TEMPORARIES)]
    except OSError:
        return
    for name in names:
        host, owner = temporary_owner(name)
        if host not in (None, host_name()):
            continue
        if owner is not None and owner != os.getpid() and process_alive(owner):
            continue
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(path)
