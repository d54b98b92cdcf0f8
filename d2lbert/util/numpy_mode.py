"""Blocks that run in MXNet's NumPy mode whatever mode the process is in.

The d2l book switches the whole process to MXNet's NumPy interface (`npx.set_np()`);
a library must not (legacy `mx.nd` code, GluonNLP 0.10's models among it, stops
working in that mode). :func:`numpy_mode_block` scopes the mode to a block's own
methods instead, as MXNet's `use_np` does (the process's mode is restored on return),
but leaves class and static methods as they are (`use_np` would turn them into plain
functions), and costs next to nothing where the mode is on already (the commands and
the chapters switch it on; entering the scope costs about 10 microseconds a call).
"""
import functools
import inspect

from mxnet.util import is_np_array, is_np_shape, np_array, np_shape

SCOPED_SPECIAL_METHODS = ('__init__', '__call__')


def in_numpy_mode(method):
    """`method`, run in MXNet's NumPy mode (NumPy arrays and shapes)."""
    @functools.wraps(method)
    def scoped(*args, **kwargs):
        if is_np_array() and is_np_shape():
            return method(*args, **kwargs)
        with np_shape(True), np_array(True):
            return method(*args, **kwargs)
    return scoped


def numpy_mode_block(block_class):
    """Wrap every instance method of `block_class` (its own and inherited ones, such
    as `initialize`, `hybridize` and `save_parameters`) in MXNet's NumPy mode; returns
    the class. Apply it to subclasses too: their new methods are not wrapped."""
    for name in dir(block_class):
        method = inspect.getattr_static(block_class, name)
        is_scoped = not name.startswith('__') or name in SCOPED_SPECIAL_METHODS
        if inspect.isfunction(method) and is_scoped:
            setattr(block_class, name, in_numpy_mode(method))
    return block_class
