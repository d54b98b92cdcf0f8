"""Run the processes of a job, and end them all as soon as one fails.

In a ps-lite job a process that dies leaves the others waiting for it forever (and
`dmlc_tracker` runs each process in a thread that can't stop the others). Here the
launcher watches every process; the first one that exits with an error code, or a
signal to the launcher (Ctrl-C, SIGTERM), stops the job:

1. each process gets SIGTERM (it runs in its own process group, which gets it all);
2. what still runs `STOP_GRACE` seconds later gets SIGKILL;
3. one line says which process failed and its exit code; the launcher exits with it.

A process also gets SIGTERM if the launcher itself is killed (Linux's parent-death
signal). SIGHUP (the terminal closed, the ssh session dropped) stops the job too, unless
the launcher was started ignoring it (`nohup d2lbert launch ... &`): then it is left
ignored, and the processes, which inherit that, train on. A process on another host runs under `tether.py`, to which the launcher
writes a byte through ssh every `HEARTBEAT` seconds. When the link to a host is cut,
ssh hears nothing from there for 15 s and exits with 255, which stops the job, naming
the host; the processes there, hearing nothing either, stop themselves.

A job ends well when every process has exited with 0; the scheduler and the servers
exit by themselves once the workers are done, within `FINISH_GRACE` seconds.
"""
import ctypes
import os
import signal
import subprocess
import sys
import time

POLL_SECONDS = 0.1
HEARTBEAT = 1  # seconds between the bytes to each remote process
STOP_GRACE = 10
FINISH_GRACE = 60
PR_SET_PDEATHSIG = 1


class JobFailed(Exception):
    """The job was stopped; `exit_code` is the launcher's exit code."""

    def __init__(self, message, exit_code):
        super().__init__(message)
        self.exit_code = exit_code


class Interrupted(Exception):
    """The launcher got a signal that ends the job."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


def exit_code_of(returncode):
    """A shell's exit code: the process's code, or 128 + N if signal N killed it."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(process, returncode):
    """'worker 1 (pid 4242 on 127.0.0.1) exited with code 2', or '... was killed by
    SIGKILL (exit code 137)'."""
    where = f'{process.name} (pid {process.popen.pid} on {process.host})'
    if returncode < 0:
        return (f'{where} was killed by {signal.Signals(-returncode).name} '
                f'(exit code {exit_code_of(returncode)})')
    if returncode == 255 and process.remote:
        return (f'lost host {process.host}: the ssh of {process.name} (pid '
                f'{process.popen.pid}) exited with code 255 (no answer, refused or '
                'broken)')
    return f'{where} exited with code {returncode}'


def die_with_parent():
    """In the child, before exec: get SIGTERM when the launcher dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start(process, log):
    stdin = subprocess.PIPE if process.remote else subprocess.DEVNULL
    process.popen = subprocess.Popen(process.argv, env=process.env, stdin=stdin,
                                     start_new_session=True, preexec_fn=die_with_parent)
    if process.remote:
        os.set_blocking(process.popen.stdin.fileno(), False)
    log(f'started {process.name} (pid {process.popen.pid}) on {process.host}')


def stop(processes, grace=STOP_GRACE):
    """SIGTERM to every process group still there; SIGKILL after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        for process in processes:
            try:
                os.killpg(process.popen.pid, sig)
            except ProcessLookupError:  # the group is empty: nothing left
                pass
        deadline = time.monotonic() + wait
        for process in processes:
            try:
                process.popen.wait(max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                pass
        if all(process.popen.poll() is not None for process in processes):
            return


def heartbeat(processes):
    """A byte to each remote process's ssh (`tether.py` at the other end)."""
    for process in processes:
        if process.remote and process.popen.poll() is None:
            try:
                process.popen.stdin.write(b'.')
                process.popen.stdin.flush()
            except (BlockingIOError, BrokenPipeError):  # ssh stalled or gone: it will say
                pass


def watch(processes, poll=POLL_SECONDS, finish_grace=FINISH_GRACE):
    """Wait until every process has exited with 0; raise `JobFailed` at the first one
    that fails, or if the others outlive the workers by finish_grace seconds."""
    workers_done_at, beaten = None, 0
    while True:
        if time.monotonic() - beaten >= HEARTBEAT:
            heartbeat(processes)
            beaten = time.monotonic()
        running = []
        for process in processes:
            returncode = process.popen.poll()
            if returncode is None:
                running.append(process)
            elif returncode != 0:
                raise JobFailed(describe_exit(process, returncode), exit_code_of(returncode))
        if not running:
            return
        if workers_done_at is None and all(p.role != 'worker' for p in running):
            workers_done_at = time.monotonic()
        if workers_done_at is not None and time.monotonic() - workers_done_at > finish_grace:
            raise JobFailed(f'{running[0].name} (pid {running[0].popen.pid}) still runs '
                            f'{finish_grace} s after the workers finished', 1)
        time.sleep(poll)


def raise_interrupted(signum, frame):
    raise Interrupted(signum)


def handled_signals():
    """The signals that stop the job: SIGINT, SIGTERM, and SIGHUP unless this process
    ignores it (as `nohup` starts a program)."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        return (signal.SIGINT, signal.SIGTERM)
    return (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def say(text):
    print(f'd2lbert launch: {text}', file=sys.stderr, flush=True)


def run(processes, log=say):
    """Start the processes, watch them, stop them all at the first failure or signal.

    Returns the launcher's exit code: 0 if every process exited with 0.
    """
    handled = handled_signals()
    previous = {sig: signal.signal(sig, raise_interrupted) for sig in handled}
    started = []
    try:
        for process in processes:
            start(process, log)
            started.append(process)
        watch(started)
        return 0
    except JobFailed as failure:
        log(f'{failure}; stopping the job')
        return failure.exit_code
    except Interrupted as interruption:
        log(f'got {interruption}; stopping the job')
        return interruption.exit_code
    finally:
        for sig in handled:
            signal.signal(sig, signal.SIG_IGN)
        stop(started)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
