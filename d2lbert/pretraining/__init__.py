"""Pretraining (`d2lbert pretrain`): masked language modelling and next-sentence prediction.

:mod:`.pretrain` (the options and the loop), :mod:`.evaluate` (held-out metrics),
:mod:`.loss_scale` (float16 loss scaling), :mod:`.distributed` and :mod:`.horovod_store`
(several workers). The parts every training command shares live in `d2lbert.run`.
"""
from .pretrain import PretrainOptions, pretrain

__all__ = ['PretrainOptions', 'pretrain']
