"""The run layer every training and writing command shares.

:mod:`.options` (each option declared once: flag, help, default, check; the parsers are
generated from them), :mod:`.errors` (one-line errors and their exit codes),
:mod:`.files` (never through a symlink or device, never over an input, atomic writes and
folder swaps), :mod:`.folder` (the run folder: new or empty, locked, resumed only by the
same command and options), :mod:`.models` (which model a folder means),
:mod:`.checkpoint` (atomic checkpoints and model folders), :mod:`.step` (one
data-parallel step: clipping, update, seeds), :mod:`.loop` (the training loop that
pretraining and fine-tuning both run), :mod:`.schedule` (how long a run trains, its
learning rate), :mod:`.loss_scale` (float16 loss scaling), :mod:`.optimizer`
(optimizers), :mod:`.metrics` (metrics.jsonl, loss.png), :mod:`.devices` (usable GPUs),
:mod:`.precision` (`--precision`: the hardware it needs, applying it).
"""
from .devices import try_all_gpus, try_gpu

__all__ = ['try_all_gpus', 'try_gpu']
