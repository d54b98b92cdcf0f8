"""Where d2lbert keeps downloads and processed data, and arrays larger than memory.

The cache lives in ``~/.d2lbert`` unless the environment variable
``D2LBERT_HOME`` names another directory. Every entry is written to a
temporary name first and renamed into place only once complete
(:func:`d2lbert.util.files.atomic_directory`), so a crash or Ctrl-C never
leaves a half-written entry that a later run would read. An entry is sealed
with a manifest of its files' sizes and SHA-1s (:func:`seal`): one that a
disk error, a truncation or a stray write has changed since fails
:func:`is_intact` and is rebuilt (:func:`discard`). Processes preparing the same entries
take turns (:func:`prepared_in_turn`): the first builds them, the others find them
complete.
"""
import contextlib
import fcntl
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np

from ..util.hashing import sha1_of_file

MANIFEST = 'manifest.json'
LOCK_FILE = '.lock'


def _files(directory):
    """The files of an entry (its sub-folders are entries of their own)."""
    return sorted(name for name in os.listdir(directory) if name != MANIFEST
                  and os.path.isfile(os.path.join(directory, name)))


def seal(directory):
    """Write the manifest of ``directory``'s files (size and SHA-1 of each)."""
    manifest = {name: {'bytes': os.path.getsize(os.path.join(directory, name)),
                       'sha1': sha1_of_file(os.path.join(directory, name))}
                for name in _files(directory)}
    with open(os.path.join(directory, MANIFEST), 'w') as f:
        json.dump(manifest, f, indent=2)


def is_intact(directory):
    """Whether ``directory`` holds exactly the files its manifest lists, each of the
    size and SHA-1 it had when sealed (False without a manifest)."""
    try:
        with open(os.path.join(directory, MANIFEST)) as f:
            manifest = json.load(f)
        if sorted(manifest) != _files(directory):
            return False
        return all(os.path.getsize(os.path.join(directory, name)) == entry['bytes']
                   and sha1_of_file(os.path.join(directory, name)) == entry['sha1']
                   for name, entry in manifest.items())
    except (OSError, ValueError, TypeError, KeyError):
        return False


def discard(directory):
    """Remove a cache entry that failed :func:`is_intact` (moved aside first, so that
    no process sees it half removed), with a warning naming it if it was sealed (an
    entry of an older d2lbert, without a manifest, is rebuilt silently)."""
    if not os.path.isdir(directory):
        return
    if os.path.isfile(os.path.join(directory, MANIFEST)):
        warnings.warn(f'the cache entry {directory} failed its check (a file changed '
                      'size or content since it was written): rebuilding it',
                      stacklevel=2)
    aside = tempfile.mkdtemp(prefix='.discarded-', dir=os.path.dirname(directory))
    try:
        os.rename(directory, os.path.join(aside, 'entry'))
    finally:
        shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def prepared_in_turn(folder, what):
    """Hold the lock of the cache folder `folder` (its file .lock, created if need be)
    while preparing its entries: another process preparing them (the workers of a job on
    one machine, say) waits for it, saying so in one line on stderr naming `what`, and
    then finds them complete. The lock is `flock`, released by the system when its
    process dies; on a shared file system that passes it on (NFS does) the machines
    take turns too."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, LOCK_FILE), 'a') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f'd2lbert: {what}: waiting for another process preparing it (the cache '
                  f'{folder})', file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def data_home():
    """The cache directory: ``$D2LBERT_HOME`` or ``~/.d2lbert``."""
    home = os.environ.get('D2LBERT_HOME') or os.path.join(
        os.path.expanduser('~'), '.d2lbert')
    os.makedirs(home, exist_ok=True)
    return home


def append_array(directory, name, values):
    """Append ``values`` to the raw file ``directory/name.<dtype>``.

    Together with :func:`open_arrays` this stores arrays bigger than memory:
    they are written piece by piece and memory-mapped when read back.
    """
    values = np.ascontiguousarray(values)
    with open(os.path.join(directory, f'{name}.{values.dtype.name}'),
              'ab') as f:
        values.tofile(f)


def open_arrays(directory):
    """``{name: read-only memory-mapped array}`` for every file of
    :func:`append_array` in ``directory``."""
    arrays = {}
    for file_name in os.listdir(directory):
        name, _, dtype = file_name.partition('.')
        if dtype not in ('int8', 'int16', 'uint16', 'int32', 'int64', 'float32'):
            continue
        path = os.path.join(directory, file_name)
        arrays[name] = (np.memmap(path, dtype=dtype, mode='r')
                        if os.path.getsize(path) else np.zeros(0, dtype))
    return arrays
