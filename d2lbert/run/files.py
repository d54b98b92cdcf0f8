"""Writing without destroying: what every writing command checks and how it writes.

* `check_target`: an output path must be a regular file or folder (or not exist yet):
  never a symbolic link, a device node, a socket or a pipe, nor anything under /dev.
* `check_apart`: an output must not be, or lie inside, one of the command's inputs (nor
  an input inside a folder output).
* `write_file_atomically`: a file appears whole or not at all (a temporary file beside
  it, then one `os.replace`); a full disk leaves nothing behind.
* `folder_written_whole`: a folder output (new or empty, or replaced whole when asked)
  written in a temporary folder beside it, put in place when complete.
* `replace_folder`: a folder swapped for a new one in one step, so that after a kill at
  any instant the path holds the old folder or the new one, never nothing.
* `remove_leftovers`: the temporary folders a killed run left behind.
"""
import contextlib
import ctypes
import os
import shutil
import stat
import tempfile

from .errors import RunError, RunFault

TEMPORARY_PREFIXES = ('.tmp-', '.old-')
RENAME_EXCHANGE = 2  # renameat2's flag (Linux 3.15+): swap two paths atomically
AT_FDCWD = -100


def kind_of(mode):
    """'a symbolic link', 'a device node', ... for a stat mode that is no file or folder."""
    if stat.S_ISLNK(mode):
        return 'a symbolic link'
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return 'a device node'
    if stat.S_ISSOCK(mode):
        return 'a socket'
    return 'a named pipe'


def check_target(flag, path):
    """Refuse (RunError) an output path that is not a regular file or folder."""
    absolute = os.path.abspath(path)
    if absolute == '/dev' or absolute.startswith('/dev/'):
        raise RunError(f'{flag} {path}: d2lbert never writes under /dev (nothing was '
                       'touched)')
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise RunError(f'{flag} {path} is {kind_of(mode)}, not a regular file or folder: '
                       'd2lbert never writes through it (nothing was touched)')
    return path


def is_within(path, folder):
    """Whether path is folder or inside it (symbolic links resolved)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_apart(flag, out, inputs):
    """Refuse an output equal to or inside an input, or a folder output holding an input.

    inputs: {flag: path or None} of what the command reads.
    """
    for name, path in inputs.items():
        if path is None or not os.path.exists(path):
            continue
        if is_within(out, path):
            where = 'is' if os.path.realpath(out) == os.path.realpath(path) else 'is inside'
            raise RunError(f'{flag} {out} {where} the input {name} {path}: d2lbert never '
                           'writes over its input (nothing was touched)')
        if os.path.isdir(out) and is_within(path, out):
            raise RunError(f'the input {name} {path} is inside {flag} {out}: writing there '
                           'could overwrite it; choose another output (nothing was touched)')


def write_file_atomically(flag, path, write, binary=False):
    """Call write(f) on a temporary file beside `path` (opened for text, or binary), then
    put it in place in one step. Errors (a full disk, a read-only folder) raise a one-line
    RunError and leave no file behind."""
    check_target(flag, path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle, tmp = tempfile.mkstemp(prefix='.tmp-', dir=folder)
    except OSError as error:
        raise RunError(f'{flag} {path}: cannot write in {folder} ({error.strerror})') \
            from None
    try:
        with os.fdopen(handle, 'wb') if binary else os.fdopen(handle, 'w',
                                                              encoding='utf-8') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as error:
        raise RunError(f'{flag} {path}: cannot write it ({error.strerror}); nothing was '
                       'written') from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def check_replaceable(flag, out):
    """--overwrite never replaces the root, the home folder or a folder holding the
    current one (a slip such as `--out . --overwrite` would delete the user's work)."""
    for name, folder in (('the current folder', os.getcwd()),
                         ('your home folder', os.path.expanduser('~'))):
        if is_within(folder, out):
            raise RunError(f'{flag} {out} --overwrite would delete {name}: choose a folder '
                           'of its own (nothing was touched)')


@contextlib.contextmanager
def folder_written_whole(flag, out, overwrite, inputs):
    """Yield a temporary folder beside `out` to write into; when the block ends without
    error it replaces `out`, which must be new or empty unless overwrite. inputs: as for
    `check_apart`."""
    check_target(flag, out)
    check_apart(flag, out, inputs)
    if os.path.exists(out) and not os.path.isdir(out):
        raise RunError(f'{flag} {out} is a file; give a folder to write')
    if os.path.isdir(out) and os.listdir(out) and not overwrite:
        raise RunError(f'{flag} {out} already holds files; choose a new or empty folder or '
                       'pass --overwrite to replace it whole (nothing was touched)')
    if os.path.isdir(out) and overwrite:
        check_replaceable(flag, out)
    parent = os.path.dirname(os.path.abspath(out))
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix='.tmp-d2lbert-', dir=parent)
    except OSError as error:
        raise RunError(f'{flag} {out}: cannot write in {parent} ({error.strerror})') \
            from None
    try:
        yield tmp
        replace_folder(tmp, out)
    except OSError as error:
        raise RunError(f'{flag} {out}: cannot write it ({error.strerror}); nothing was '
                       'written') from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def exchange(first, second):
    """Swap two existing paths in one system call (False where the system can't)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except AttributeError:
        return False
    result = renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second),
                       RENAME_EXCHANGE)
    return result == 0


def replace_folder(new, folder):
    """Put the complete folder `new` at `folder` (which may exist): swapped in one step
    where the system can, else the old one renamed aside first (`remove_leftovers` puts
    it back if a kill comes between the two renames)."""
    if not os.path.exists(folder):
        os.rename(new, folder)
        return folder
    if exchange(new, folder):
        shutil.rmtree(new)  # now the old folder
        return folder
    parent, name = os.path.split(new)
    aside = os.path.join(parent, '.old-' + name[len('.tmp-'):])
    os.rename(folder, aside)
    os.rename(new, folder)
    shutil.rmtree(aside)
    return folder


def remove_leftovers(folder):
    """Remove the temporary files and folders (.tmp-*, .old-*) a killed process left in
    `folder`, after putting back an old model folder a kill left aside."""
    if not os.path.isdir(folder):
        return
    model = os.path.join(folder, 'model')
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith('.old-model-') and not os.path.exists(model):
            inner = os.path.join(path, 'model')  # (older d2lbert: .old-model-*/model)
            os.rename(inner if os.path.isdir(inner) else path, model)
        if name.startswith(TEMPORARY_PREFIXES) and os.path.lexists(path):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)


def disk_fault(path, error):
    """The RunFault for an OSError while a run writes `path` (e.g. a full disk)."""
    return RunFault(f'cannot write {path}: {error.strerror or error}; the last complete '
                    'checkpoint is kept (free some space, then continue with --resume)')
