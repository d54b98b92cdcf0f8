"""SIGTERM ends a command as Ctrl-C (SIGINT) does: by an exception, so that every
`finally` runs (temporary folders removed, the run folder's lock released at exit) and
the command prints one line and exits with 128 + the signal's number (143; 130 for
Ctrl-C), instead of dying on the spot with a stale lock and a half-written folder."""
import contextlib
import signal
import sys
import threading


class Stopped(KeyboardInterrupt):
    """The process received SIGTERM or Ctrl-C (a `KeyboardInterrupt`, so that whatever
    cleans up after Ctrl-C cleans up after it too)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# The signals received within `stop_on_sigterm`'s block, in order.
received = []


def raise_stopped(signum, frame):
    signal.signal(signum, signal.SIG_IGN)  # a second one must not interrupt the cleanup
    received.append(signum)
    raise Stopped(signum)


def raise_if_stopped():
    """Raise `Stopped` for a signal received within `stop_on_sigterm`'s block whose
    exception was lost: Python prints and ignores an exception raised while it runs a
    finalizer (`__del__`: an MXNet array freed, say), and the command would go on as if
    no signal had come. The training loop calls this at every step."""
    if received:
        raise Stopped(received[0])


def quiet_about_lost_stops(previous_hook):
    """An `sys.unraisablehook` that says nothing of a `Stopped` lost in a finalizer
    (`raise_if_stopped` raises it again, and the command prints its one line) and
    passes everything else to `previous_hook`."""
    def hook(unraisable):
        if not isinstance(unraisable.exc_value, Stopped):
            previous_hook(unraisable)
    return hook


def quiet_finalizers(unraisable):
    """The `sys.unraisablehook` of a process that a signal is ending: it says nothing.
    The signal's exception can interrupt the making of an object (an MXNet array whose
    handle was not yet set), whose finalizer then fails as Python frees it; the command
    has said its one line."""


@contextlib.contextmanager
def stop_on_sigterm(then_ignore=False):
    """Within the block, SIGTERM raises `Stopped`, and so does Ctrl-C (SIGINT) unless
    the process ignores it (a background job), both recorded for `raise_if_stopped`
    (in the main thread only: elsewhere Python can't install a handler, and the
    defaults stay). then_ignore: the process ends after the block (the `d2lbert`
    program), so SIGTERM and Ctrl-C are ignored from then on: the command is done, its
    outputs in place, and a signal while Python and MXNet shut down must not turn its
    success into a kill; after a signal, finalizers' errors are not printed either
    (`quiet_finalizers`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received.clear()
    previous_unraisable_hook = sys.unraisablehook
    sys.unraisablehook = quiet_about_lost_stops(previous_unraisable_hook)
    previous_term = signal.signal(signal.SIGTERM, raise_stopped)
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, raise_stopped)
    try:
        yield
        raise_if_stopped()
    finally:
        sys.unraisablehook = (quiet_finalizers if then_ignore and received
                              else previous_unraisable_hook)
        signal.signal(signal.SIGTERM, signal.SIG_IGN if then_ignore else previous_term)
        signal.signal(signal.SIGINT, signal.SIG_IGN if then_ignore else previous_int)
