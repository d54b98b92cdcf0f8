"""The far end of a process that `d2lbert launch` starts on another host by ssh:
runs the command, and ends it when the launcher goes silent.

A cut network link is silent: no error reaches either end, so the job's processes on
the lost host would wait for their peers forever (ps-lite never gives up on a peer).
So the launcher writes a byte to each ssh's standard input every `launch.supervise`
HEARTBEAT seconds, and this program, run by ssh on the host as

    PYTHON -I .../d2lbert/launch/tether.py SECONDS COMMAND...

ends COMMAND (SIGTERM to its process group, SIGKILL `STOP_GRACE` s later) when no byte
came for SECONDS, or when its input ends (the launcher stopped ssh); it exits with
COMMAND's code when that ends first. It is run as a file, not imported through
`d2lbert` (whose `import mxnet` would turn a process with DMLC_ROLE=server into a
parameter server), and uses the standard library only.
"""
import os
import select
import signal
import socket
import subprocess
import sys
import time

STOP_GRACE = 10
SILENT = 'no word from the launcher'


def stop(child):
    """SIGTERM to the child's process group; SIGKILL if it still runs STOP_GRACE s later."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(STOP_GRACE)
            return
        except subprocess.TimeoutExpired:
            pass


def tether(seconds, command):
    """Run command; returns its exit code (127 if it can't start), or 1 after stopping
    it when stdin stays silent for seconds or ends."""
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as error:  # e.g. not on this host's PATH
        host = os.environ.get('DMLC_NODE_HOST', socket.gethostname())
        print(f'd2lbert launch: cannot run {command[0]} on {host}: {error.strerror}',
              file=sys.stderr, flush=True)
        return 127
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    heard = time.monotonic()
    try:
        while child.poll() is None:
            if select.select([sys.stdin], [], [], 0.5)[0]:
                if not os.read(sys.stdin.fileno(), 4096):
                    return 1  # the launcher closed ssh: stop
                heard = time.monotonic()
            elif time.monotonic() - heard > seconds:
                print(f'd2lbert launch: {SILENT} for {seconds:g} s; stopping '
                      f'{command[0]}', file=sys.stderr, flush=True)
                return 1
        return child.returncode if child.returncode >= 0 else 128 - child.returncode
    finally:
        stop(child)


if __name__ == '__main__':
    sys.exit(tether(float(sys.argv[1]), sys.argv[2:]))
