"""Where d2lbert keeps downloads and processed data, and how it writes there.

The cache lives in ``~/.d2lbert`` unless the environment variable
``D2LBERT_HOME`` names another directory. Every entry is written to a
temporary name first and renamed into place only once complete, so a crash
or Ctrl-C never leaves a half-written entry that a later run would read.
"""
import contextlib
import hashlib
import os
import shutil
import tempfile

import numpy as np


def data_home():
    """The cache directory: ``$D2LBERT_HOME`` or ``~/.d2lbert``."""
    home = os.environ.get('D2LBERT_HOME') or os.path.join(
        os.path.expanduser('~'), '.d2lbert')
    os.makedirs(home, exist_ok=True)
    return home


def sha1_of_file(path, block_size=1 << 20):
    """Hex SHA-1 of a file, read in 1 MB blocks."""
    sha1 = hashlib.sha1()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(block_size), b''):
            sha1.update(block)
    return sha1.hexdigest()


def sha1_of_strings(*parts):
    """Hex SHA-1 of the given values' ``repr``, for cache keys."""
    return hashlib.sha1(repr(parts).encode('utf-8')).hexdigest()


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
    tmp = tempfile.mkdtemp(prefix='.tmp-', dir=parent)
    try:
        yield tmp
        try:
            os.rename(tmp, final_path)
        except OSError:
            if not os.path.isdir(final_path):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
        if dtype not in ('int8', 'int32', 'int64', 'float32'):
            continue
        path = os.path.join(directory, file_name)
        arrays[name] = (np.memmap(path, dtype=dtype, mode='r')
                        if os.path.getsize(path) else np.zeros(0, dtype))
    return arrays
