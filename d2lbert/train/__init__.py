"""Training: the pretraining command and its parts.

:mod:`.pretrain` (`d2lbert pretrain`: options, the loop), :mod:`.step` (one
data-parallel step: forward, backward, clipping, update), :mod:`.optimizer`
(optimizers, learning-rate schedule), :mod:`.loss_scale` (float16 loss scaling),
:mod:`.evaluate` (held-out metrics), :mod:`.checkpoint` (atomic checkpoints),
:mod:`.metrics` (metrics.jsonl, loss.png), :mod:`.devices` (usable GPUs).
"""
from .devices import try_all_gpus, try_gpu
from .pretrain import PretrainError, PretrainOptions, TrainingDiverged, pretrain

__all__ = ['try_all_gpus', 'try_gpu', 'PretrainError', 'PretrainOptions',
           'TrainingDiverged', 'pretrain']
