"""Helpers every layer of d2lbert may use; they import nothing of d2lbert.

:mod:`.checks` (input validation), :mod:`.options` (checks of command-line options),
:mod:`.hashing` (SHA-1 of files and values), :mod:`.files` (directories written
atomically), :mod:`.threads` and :mod:`.blas` (MXNet's thread count and OpenBLAS's
kernels, set before MXNet loads by :mod:`.process`, which the commands call),
:mod:`.bert_adam` (Google BERT's Adam, which the training runs and the fast path's
fused optimizers share).
"""
