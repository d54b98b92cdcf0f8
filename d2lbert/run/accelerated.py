"""Whether a model or an optimizer is on the fast path, without importing it.

The run layer serves both the book's model and the fast one (`d2lbert.fast`). A model
can only be on the fast path after something called `fast.accelerate`, which imported
`d2lbert.fast`; so asking `sys.modules` is enough, and a run of the book's model
(`--plain`, the chapters' readers) never loads the fast path's modules.
"""
import sys


def loaded_fast():
    """The module `d2lbert.fast` if it has been imported, else None."""
    return sys.modules.get('d2lbert.fast')


def is_fast_model(net):
    """Whether `net` is a `fast.FastBERTModel`."""
    fast = loaded_fast()
    return fast is not None and isinstance(net, fast.FastBERTModel)


def is_fused_optimizer(optimizer):
    """Whether `optimizer` is one of `fast.optimizer`'s fused ones."""
    fast = loaded_fast()
    return fast is not None and isinstance(optimizer, fast.FusedUpdate)
