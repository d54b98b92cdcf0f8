"""MXNet's NumPy mode, for a block's methods or for a stretch of the caller's code.

The d2l book switches the whole process to MXNet's NumPy interface (`npx.set_np()`);
a library must not (legacy `mx.nd` code, GluonNLP 0.10's models among it, stops
working in that mode). :func:`numpy_mode_block`, a class decorator, scopes the mode
to a block's own methods instead, as MXNet's `use_np` does (the process's mode is
restored on return), but leaves class and static methods as they are (`use_np` would
turn them into plain functions), and costs next to nothing where the mode is on
already (the commands and the chapters switch it on; entering the scope costs about
10 microseconds a call). :func:`numpy_mode` is the same scope for the caller's own
code: a training loop's losses, sums and `gluon.Trainer` are NumPy-mode code too.
"""
import contextlib
import functools
import inspect

from mxnet.util import is_np_array, is_np_shape, np_array, np_shape

SCOPED_SPECIAL_METHODS = ('__init__', '__call__')


@contextlib.contextmanager
def numpy_mode():
    """MXNet's NumPy mode (NumPy arrays and shapes, as `npx.set_np()`) inside a `with`
    block or a function it decorates; the mode the process was in afterwards.

    d2lbert's blocks compute in NumPy mode whatever the process's mode, and take and
    return NumPy-interface arrays (`mxnet.np.ndarray`). Code of the caller's that
    works on those arrays (adding two losses, `autograd.backward`, a `gluon.Trainer`
    made and stepped) needs the mode as well: run it inside this, or switch the whole
    process with `npx.set_np()`.

        with d2lbert.numpy_mode():
            trainer = gluon.Trainer(net.collect_params(), 'adam')
            with autograd.record():
                mlm_loss, nsp_loss = net.pretraining_loss(*batch)  # a BERTModel
                loss = mlm_loss + nsp_loss
            loss.backward()
            trainer.step(1)
        mx.nd.ones((2, 3))  # legacy code runs as before
    """
    with np_shape(True), np_array(True):
        yield


def in_numpy_mode(method):
    """`method`, run in MXNet's NumPy mode (NumPy arrays and shapes)."""
    @functools.wraps(method)
    def scoped(*args, **kwargs):
        if is_np_array() and is_np_shape():
            return method(*args, **kwargs)
        with np_shape(True), np_array(True):
            return method(*args, **kwargs)
    scoped.in_numpy_mode = True
    return scoped


def numpy_mode_block(block_class):
    """Class decorator: every instance method of `block_class` (its own and inherited
    ones, such as `initialize`, `hybridize` and `save_parameters`) runs in MXNet's
    NumPy mode, whatever mode the caller's process is in; returns the class.

    A subclass needs the decorator too: the methods it defines are its own, not
    wrapped by its parent's decorator."""
    for name in dir(block_class):
        method = inspect.getattr_static(block_class, name)
        is_scoped = not name.startswith('__') or name in SCOPED_SPECIAL_METHODS
        if (inspect.isfunction(method) and is_scoped
                and not getattr(method, 'in_numpy_mode', False)):
            setattr(block_class, name, in_numpy_mode(method))
    return block_class
