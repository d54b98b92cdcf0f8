"""The run layer every training and writing command shares.

:mod:`.step` (one data-parallel step: clipping, update, seeds), :mod:`.optimizer`
(optimizers, learning-rate schedule), :mod:`.checkpoint` (atomic checkpoints and model
folders), :mod:`.metrics` (metrics.jsonl, loss.png), :mod:`.devices` (usable GPUs).
"""
from .devices import try_all_gpus, try_gpu

__all__ = ['try_all_gpus', 'try_gpu']
