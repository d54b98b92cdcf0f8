"""The errors of a command, each reported as one line: the `d2lbert` command exits with 2
for a `RunError` (bad input, a folder that can't be used; nothing was written) and with 3
for a `RunFault` (the run started, then failed: its last complete checkpoint is kept).
A library call that shares their code raises them as Python's own (`as_library_errors`)."""
import contextlib


class RunError(Exception):
    """A problem with the run's inputs or state, reported as one clear message."""


class RunFault(RunError):
    """A fault during the run (disk full, the loss diverged): exit code 3."""


class TrainingDiverged(RunFault):
    """The loss became NaN or infinite."""


@contextlib.contextmanager
def as_library_errors():
    """Inside a library call that shares a command's code (`save_pretrained`): its
    RunError (a refused argument, nothing touched) raised as the ValueError a Python
    caller expects, its RunFault (a write that failed, e.g. a full disk; what was
    there is kept) as an OSError, each with the command's one-line message."""
    try:
        yield
    except RunFault as fault:
        raise OSError(str(fault)) from None
    except RunError as error:
        raise ValueError(str(error)) from None
