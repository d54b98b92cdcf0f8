"""Directories that appear complete or not at all."""
import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def atomic_directory(final_path):
    """Build a directory under a temporary name; rename it into place at the end.

    Use as ``with atomic_directory(path) as tmp: write files into tmp``. On an
    exception the temporary directory is deleted and nothing appears at
    ``final_path``. If another process finished ``final_path`` first, its
    copy is kept (both hold the same content).
    """
    parent = os.path.dirname(final_path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.tmp-', dir=parent)
    try:
        yield tmp
        try:
            os.rename(tmp, final_path)
        except OSError:
            if not os.path.isdir(final_path):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
