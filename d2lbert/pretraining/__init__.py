"""Pretraining (`d2lbert pretrain`): masked language modelling and next-sentence prediction.

:mod:`.pretrain` (the options, and what pretraining gives the training loop of
`d2lbert.run.loop`), :mod:`.step` (a step's losses and gradients, data-parallel),
:mod:`.evaluate` (held-out metrics), :mod:`.collapse` (the collapse warning),
:mod:`.distributed` and :mod:`.horovod_store` (several workers). The parts every
training command shares live in `d2lbert.run`.
"""
from .pretrain import PretrainOptions, pretrain

__all__ = ['PretrainOptions', 'pretrain']
