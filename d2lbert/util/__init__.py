"""Helpers every layer of d2lbert may use; they import nothing of d2lbert.

:mod:`.checks` (input validation), :mod:`.hashing` (SHA-1 of files and values),
:mod:`.files` (directories written atomically), :mod:`.threads` (MXNet's thread count).
"""
