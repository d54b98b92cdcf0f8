"""The errors of a command, each reported as one line: the `d2lbert` command exits with 2
for a `RunError` (bad input, a folder that can't be used; nothing was written) and with 3
for a `RunFault` (the run started, then failed: its last complete checkpoint is kept)."""


class RunError(Exception):
    """A problem with the run's inputs or state, reported as one clear message."""


class RunFault(RunError):
    """A fault during the run (disk full, the loss diverged): exit code 3."""


class TrainingDiverged(RunFault):
    """The loss became NaN or infinite."""
