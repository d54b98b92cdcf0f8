"""Blocks that run in MXNet's NumPy mode whatever mode the process is in.

The d2l book switches the whole process to MXNet's NumPy interface (`npx.set_np()`);
a library must not (legacy `mx.nd` code, GluonNLP 0.10's models among it, stops
working in that mode). :func:`numpy_mode_block` scopes the mode to a block's own
methods instead, as MXNet's `use_np` does (the process's mode is restored on return),
but leaves class and static methods as they are (`use_np` would turn them into plain
functions).
"""
import inspect

from mxnet.util import use_np

SCOPED_SPECIAL_METHODS = ('__init__', '__call__')


def numpy_mode_block(block_class):
    """Wrap every instance method of `block_class` (its own and inherited ones, such
    as `initialize`, `hybridize` and `save_parameters`) in MXNet's NumPy mode; returns
    the class. Apply it to subclasses too: their new methods are not wrapped."""
    for name in dir(block_class):
        method = inspect.getattr_static(block_class, name)
        is_scoped = not name.startswith('__') or name in SCOPED_SPECIAL_METHODS
        if inspect.isfunction(method) and is_scoped:
            setattr(block_class, name, use_np(method))
    return block_class
