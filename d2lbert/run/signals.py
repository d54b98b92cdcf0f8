"""SIGTERM ends a command as Ctrl-C (SIGINT) does: by an exception, so that every
`finally` runs (temporary folders removed, the run folder's lock released at exit) and
the command prints one line and exits with 128 + the signal's number (143; 130 for
Ctrl-C), instead of dying on the spot with a stale lock and a half-written folder."""
import contextlib
import signal
import threading


class Stopped(KeyboardInterrupt):
    """The process received SIGTERM (a `KeyboardInterrupt`, so that whatever cleans up
    after Ctrl-C cleans up after it too)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_stopped(signum, frame):
    signal.signal(signum, signal.SIG_IGN)  # a second one must not interrupt the cleanup
    raise Stopped(signum)


@contextlib.contextmanager
def stop_on_sigterm(then_ignore=False):
    """Within the block, SIGTERM raises `Stopped` (in the main thread only: elsewhere
    Python can't install a handler, and the default stays). then_ignore: the process
    ends after the block (the `d2lbert` program), so SIGTERM and Ctrl-C are ignored
    from then on: the command is done, its outputs in place, and a signal while Python
    and MXNet shut down must not turn its success into a kill."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN if then_ignore else previous)
        if then_ignore:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
