"""A model's block tree copied, its parameters shared: how d2lbert gives a model
another class (`fast.accelerate`, `model.precision.compute_in`) without changing the
caller's.

    copy = copy_sharing_parameters(net)
    copy.encoder.blocks[0].__class__ = ...     # only the copy changes class
    copy.collect_params()['...'] is net.collect_params()['...']   # the same Parameter

Each block is copied (a new object with its own attributes and its own `_children`);
each Parameter and each `ParameterDict` is the very same object, so training either
model trains the other, a checkpoint saved from one loads into the other, and the
parameters' names (hence the checkpoint's keys) are the same. Gluon's cached graph of
each hybrid block is cleared in the copy: it is traced again on the copy's first call.
A block that appears twice in the tree is copied once.
"""
from collections import OrderedDict

from mxnet.gluon import Block, HybridBlock
from mxnet.gluon.block import _BlockScope


def copy_sharing_parameters(block, copies=None):
    """A copy of `block` and, recursively, of its child blocks, sharing its Parameters
    (same objects); `block` is left exactly as it was. Returns the copy.

    copies: a dict, if given, filled in with {id(original block): its copy}."""
    copies = {} if copies is None else copies
    if id(block) in copies:
        return copies[id(block)]
    copy = object.__new__(type(block))
    copies[id(block)] = copy
    copy.__dict__.update(block.__dict__)
    copy._scope = _BlockScope(copy)
    copy._reg_params = dict(block._reg_params)
    copy._forward_hooks = OrderedDict(block._forward_hooks)
    copy._forward_pre_hooks = OrderedDict(block._forward_pre_hooks)
    copy._children = OrderedDict((name, copy_sharing_parameters(child, copies))
                                 for name, child in block._children.items())
    for name, value in block.__dict__.items():  # attributes naming a child: the child's copy
        if isinstance(value, Block):
            copy.__dict__[name] = copy_sharing_parameters(value, copies)
    if isinstance(copy, HybridBlock):
        copy._clear_cached_op()
    return copy
