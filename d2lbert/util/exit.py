"""Ending a command's process at once: its exit handlers run and its output is flushed,
but the interpreter's teardown (of the modules, of MXNet's engine and kvstore) is
skipped."""
import atexit
import os
import sys


def flush_output():
    """Flush stdout and stderr (a closed pipe or stream has nothing more to take)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def exit_at_once(exit_code):
    """Run the exit handlers (`atexit`'s), flush the output, and exit with exit_code
    without the interpreter's teardown (`os._exit`)."""
    atexit._run_exitfuncs()
    flush_output()
    os._exit(exit_code)
