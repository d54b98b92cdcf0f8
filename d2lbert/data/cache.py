"""Where d2lbert keeps downloads and processed data, and arrays larger than memory.

The cache lives in ``~/.d2lbert`` unless the environment variable
``D2LBERT_HOME`` names another directory. Every entry is written to a
temporary name first and renamed into place only once complete
(:func:`d2lbert.util.files.atomic_directory`), so a crash or Ctrl-C never
leaves a half-written entry that a later run would read.
"""
import os

import numpy as np



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
        if dtype not in ('int8', 'int32', 'int64', 'float32'):
            continue
        path = os.path.join(directory, file_name)
        arrays[name] = (np.memmap(path, dtype=dtype, mode='r')
                        if os.path.getsize(path) else np.zeros(0, dtype))
    return arrays
