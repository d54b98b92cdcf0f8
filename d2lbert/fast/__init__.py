"""d2lbert's fast path: the book's model (`d2lbert.model`), computed faster on a CPU.

    net = d2lbert.BERTModel.from_config(config)
    net.initialize(...)
    fast_net = d2lbert.fast.accelerate(net)   # a new model, the same parameters

`accelerate` is the one switch. Every fast block is a subclass of one of the book's
blocks that keeps its parameters, children and names and changes only how the
forward pass computes; `accelerate` returns a copy of the model's blocks
(`util.shared_blocks`), each of its fast subclass, that shares the model's Parameter
objects: training either trains both, a checkpoint saved from either loads into the
other, both compute the same numbers, and `net` is left as it was:

* `FusedMultiHeadAttention` (`attention.py`): scores, masked softmax, dropout and
  weighted sum in one C++ operator (`kernels/attention.cc`);
* `FusedAddNorm`, `FusedLayerNorm` (`layer_norm.py`): add & norm in one pass;
  `LinkedEncoderBlock` hands them its sublayers' bfloat16 outputs uncast;
* `FusedBERTEncoder` (`encoder.py`): the input embedding in one operator, and the
  encoder on packed rows (the valid tokens only);
* `FastBERTModel` (`model.py`): the pretraining losses as one graph
  (`objective.py`) with the masked-LM gradient computed in the forward pass
  (`mlm_loss.py`);
* `calibrate`, `int8_model` (`int8.py`): a new model whose encoder's products run
  on oneDNN's int8 kernels, calibrated on some texts (`--precision int8`);
* `FusedAdam`, `FusedAdamW`, `FusedBERTAdam` (`optimizer.py`): the optimizer's step, clipping,
  update and zeroing the gradients in one pass over each parameter; the trainer of a
  model on the fast path uses them (`d2lbert.run.setup` asks `fused_optimizer`).

The kernels are CPU code (`kernels/`, compiled on first use). Where they can't run
(D2LBERT_FUSED_KERNELS=0, no compiler, a model on a GPU or in float16),
`accelerate` returns the book's model (a copy) and says why in one line.
"""
import logging

import numpy as onp
from mxnet.gluon import nn

from ..model import (AddNorm, BERTEncoder, BERTModel, MultiHeadAttention,
                     TransformerEncoderBlock)
from ..model.precision import book_class, link_reduced_layers
from ..util.shared_blocks import copy_sharing_parameters
from . import kernels
from .attention import FusedMultiHeadAttention
from .encoder import FusedBERTEncoder
from .first_token import FirstTokenEncoderBlock, first_token_only
from .int8 import (Int8Attention, Int8Dense, Int8FeedForward,
                   Int8Calibration, calibrate, int8_model, quantizable_layers,
                   pairs_bounded)
from .layer_norm import FusedAddNorm, FusedLayerNorm, LinkedEncoderBlock
from .model import FastBERTModel
from .optimizer import FusedAdam, FusedAdamW, FusedBERTAdam, FusedUpdate, fused_optimizer
from .objective import PretrainingObjective

FAST_BLOCKS = {MultiHeadAttention: FusedMultiHeadAttention, AddNorm: FusedAddNorm,
               nn.LayerNorm: FusedLayerNorm, TransformerEncoderBlock: LinkedEncoderBlock,
               BERTEncoder: FusedBERTEncoder, BERTModel: FastBERTModel}

logger = logging.getLogger('d2lbert')


def accelerate(net):
    """A new model: `net` (a `BERTModel`, or any block built of the book's blocks) on
    the fast path, sharing its parameters (the same Parameter objects); `net` stays
    as it was. Hybridize the model it returns.

    Where the kernels can't run, the new model is the book's (as `net`) and one line
    (a warning of the 'd2lbert' logger) says why, unless D2LBERT_FUSED_KERNELS=0
    chose it.
    """
    model = copy_sharing_parameters(net)
    reason = why_not_fast(net)
    if reason:
        if reason != 'D2LBERT_FUSED_KERNELS=0':
            logger.warning("d2lbert: %s: running the book's model (d2lbert.model)", reason)
        return model
    model.apply(to_fast_block)
    return link_reduced_layers(model)  # if mixed precision came first (`model.precision`)


def to_fast_block(block):
    """Give `block`, of a model being made, its fast class, if its book class has
    one (for `Block.apply`)."""
    fast_class = FAST_BLOCKS.get(book_class(block))
    if fast_class is not None:
        block.__class__ = fast_class


def is_fast(net):
    """Did `accelerate` switch this model (or a block inside it) to the fast path?"""
    found = []
    net.apply(lambda block: found.append(isinstance(block, tuple(FAST_BLOCKS.values()))))
    return any(found)


def why_not_fast(net):
    """Why d2lbert's kernels can't run `net`, or None if they can."""
    if not kernels.enabled():
        return 'D2LBERT_FUSED_KERNELS=0'
    params = list(net.collect_params().values())
    if any(ctx.device_type != 'cpu' for ctx in contexts_of(params)):
        return "the model is on a GPU, and d2lbert's kernels are CPU code"
    if any(onp.dtype(param.dtype) != onp.float32 for param in params):
        return "the model is not in float32, the only type d2lbert's kernels compute in"
    if not kernels.available():
        return "d2lbert's CPU kernels could not be built (see the warning above)"
    return None


def contexts_of(params):
    """The devices the parameters are (or will be, once initialized) on."""
    contexts = set()
    for param in params:
        try:
            contexts.update(param.list_ctx())
        except RuntimeError:  # not initialized yet: the blocks check when they run
            pass
    return contexts
