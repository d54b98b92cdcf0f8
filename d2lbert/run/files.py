"""Writing without destroying: what every writing command checks and how it writes.

* `check_output`: the one check every writing command makes of each output path before
  it starts (`check_target` and `check_apart`); writing checks it again at the moment
  the output is put in place.
* `check_target`: an output path, resolved as the system will (trailing slashes, `..`,
  links in its folders), must be a regular file or folder (or not exist yet): never a
  symbolic link, a device node, a socket or a pipe, nor anything under /dev.
* `check_apart`: an output must not be, or lie inside, one of the command's inputs (nor
  an input inside a folder output).
* `write_file_atomically`: a file appears whole or not at all (a temporary file beside
  it, then one `os.replace`, or one `os.link` when it must not replace a file); a full
  disk leaves nothing behind.
* `replace_folder`: a folder swapped for a new one in one step, so that after a kill at
  any instant the path holds the old folder or the new one, never nothing.
* `written_as_os_errors`: MXNet's and safetensors' write errors as Python's OSError, so
  one handler reports every failed write (`disk_fault`).
* `make_readable`: what was written gets the modes the user's umask gives (0755/0644),
  not the private ones of temporary files.
* `remove_leftovers`, `sweep_temporaries`: the temporary files and folders a killed
  process left behind.
"""
import contextlib
import ctypes
import errno
import os
import shutil
import stat
import tempfile

from ..util.files import (OUR_TEMPORARIES, process_alive, sweep_temporaries,  # noqa: F401
                          temporary_prefix)
from .errors import RunError, RunFault

TEMPORARY_PREFIXES = ('.tmp-', '.old-')
NEARLY_FULL = 1 << 20  # bytes free after a failed write: the disk was full
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


def without_trailing_slashes(path):
    """'out/', 'out/.', 'out//' -> 'out': the path naming the last component itself
    (the system follows a link named 'link/', but not one named 'link')."""
    while len(path) > 1 and (path.endswith('/') or path.endswith('/.')):
        path = path[:-1] if path.endswith('/') else path[:-2]
    return path


def check_no_way_back_through_a_link(flag, path):
    """Refuse '..' after a symbolic link ('link/..' is the link target's parent, not
    the folder holding the link: the system and a reader disagree on what it names)."""
    folder = '/' if path.startswith('/') else ''
    for name in path.split('/'):
        if name == '..' and os.path.realpath(folder or '.') != os.path.abspath(folder or '.'):
            raise RunError(f'{flag} {path}: ".." after a symbolic link names the link '
                           "target's parent; spell the output path without it (nothing "
                           'was touched)')
        folder = os.path.join(folder, name) if name else folder


def check_target(flag, path):
    """Refuse (RunError) an output path that is not a regular file or folder, as the
    system resolves it; returns the path."""
    check_no_way_back_through_a_link(flag, path)
    name = without_trailing_slashes(path)
    for absolute in (os.path.abspath(name), os.path.realpath(name)):
        if absolute == '/dev' or absolute.startswith('/dev/'):
            raise RunError(f'{flag} {path}: d2lbert never writes under /dev (nothing was '
                           'touched)')
    try:
        mode = os.lstat(name).st_mode
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
    """Refuse an output equal to or inside an input (links resolved; a hard link to an
    input is the input), or a folder output holding an input.

    inputs: {flag: path or None} of what the command reads.
    """
    for name, path in inputs.items():
        if path is None or not os.path.exists(path):
            continue
        if is_within(out, path) or (os.path.exists(out) and os.path.samefile(out, path)):
            where = 'is' if os.path.realpath(out) == os.path.realpath(path) else 'is inside'
            raise RunError(f'{flag} {out} {where} the input {name} {path}: d2lbert never '
                           'writes over its input (nothing was touched)')
        if os.path.isdir(out) and is_within(path, out):
            raise RunError(f'the input {name} {path} is inside {flag} {out}: writing there '
                           'could overwrite it; choose another output (nothing was touched)')


def check_output(flag, path, inputs):
    """Refuse (RunError, nothing touched) an output path that is, or is reached through,
    anything but a regular file or folder, or that is or holds one of the inputs
    {flag: path or None}; returns the path without trailing slashes."""
    check_target(flag, path)
    check_apart(flag, path, inputs)
    return without_trailing_slashes(path)


def check_new_file(flag, path, overwrite):
    """Without overwrite, an output file must not exist yet."""
    if not overwrite and os.path.lexists(path):
        raise RunError(f'{flag} {path} already exists; choose a new file or pass '
                       '--overwrite to replace it (nothing was touched)')


def umask():
    """The process's umask (read without changing it where the system tells it)."""
    with contextlib.suppress(OSError, ValueError):
        with open('/proc/self/status', encoding='ascii') as f:
            for line in f:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def make_readable(path):
    """Give a written file, or a folder and everything in it, the modes a new file gets
    under the user's umask (usually 0644 files, 0755 folders) instead of the private
    0600/0700 of temporary files."""
    mask = umask()
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~mask)
    if os.path.isdir(path):
        for folder, folders, files in os.walk(path):
            for name in folders:
                os.chmod(os.path.join(folder, name), 0o777 & ~mask)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o666 & ~mask)


def foreign_write_errors():
    """The exceptions MXNet and safetensors raise where Python would raise OSError."""
    import mxnet
    errors = [mxnet.base.MXNetError]
    with contextlib.suppress(ImportError):
        from safetensors import SafetensorError
        errors.append(SafetensorError)
    return tuple(errors)


def disk_nearly_full(path):
    """Whether less than NEARLY_FULL bytes are free where `path` is written."""
    try:
        free = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return free.f_bavail * free.f_frsize < NEARLY_FULL


@contextlib.contextmanager
def written_as_os_errors(path):
    """Raise a failed MXNet or safetensors write of `path` (e.g. 'FileStream.Write
    incomplete' on a full disk) as the OSError Python's own write would raise."""
    try:
        yield
    except OSError:
        raise
    except foreign_write_errors() as error:
        if disk_nearly_full(path):  # what their messages don't say
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path) from None
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        raise OSError(errno.EIO, f'{type(error).__name__}: {lines[-1] if lines else ""}',
                      path) from None


def write_file_atomically(flag, path, write, binary=False, overwrite=True):
    """Call write(f) on a temporary file beside `path` (opened for text, or binary), then
    put it in place in one step; without overwrite, only if no file is there by then.
    Errors (a full disk, a read-only folder) raise a one-line RunFault (exit code 3) and
    leave no file behind."""
    check_target(flag, path)
    check_new_file(flag, path, overwrite)
    folder = os.path.dirname(os.path.abspath(without_trailing_slashes(path)))
    sweep_temporaries(folder)
    try:
        handle, tmp = tempfile.mkstemp(prefix=temporary_prefix(), dir=folder)
    except OSError as error:
        raise RunError(f'{flag} {path}: cannot write in {folder} ({error.strerror})') \
            from None
    try:
        with os.fdopen(handle, 'wb') if binary else os.fdopen(handle, 'w',
                                                              encoding='utf-8') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        make_readable(tmp)
        check_target(flag, path)  # again, at the moment it is put in place
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if a file appeared meanwhile: never replaces it
    except FileExistsError:
        raise RunError(f'{flag} {path} was created by someone else meanwhile; it is kept '
                       '(pass --overwrite to replace it)') from None
    except OSError as error:
        raise RunFault(f'{flag} {path}: cannot write it ({error.strerror}); nothing was '
                       'written') from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def overwrite_named(flag):
    """How the caller asks to replace an output: '--overwrite' for a command's flag
    ('--out'), 'overwrite=True' for a library call's argument ('folder')."""
    return '--overwrite' if flag.startswith('--') else 'overwrite=True'


def check_replaceable(flag, out):
    """An output folder that is replaced whole is never the root, the home folder or a
    folder holding the current one (a slip such as `--out . --overwrite` would delete
    the user's work)."""
    for name, folder in (('the current folder', os.getcwd()),
                         ('your home folder', os.path.expanduser('~'))):
        if is_within(folder, out):
            raise RunError(f'{flag} {out} would be replaced whole, which would delete '
                           f'{name}: choose a folder of its own (nothing was touched)')


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


def is_disk_full(error):
    """Whether an OSError says the disk (or the user's quota) is full."""
    return error.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_fault(path, error):
    """The RunFault for an OSError while a run writes `path` (e.g. a full disk)."""
    return RunFault(f'cannot write {path}: {error.strerror or error}; the last complete '
                    'checkpoint is kept (free some space, then continue with --resume)')
