"""The hosts of `d2lbert launch --hosts FILE`: the machines to run on, and how ssh
reaches them.

One machine per line, as `dmlc_tracker`'s ssh mode (and MXNet's `tools/launch.py`)
reads it: `host` or `host:ssh_port`; an MPI-style `slots=N` after the host is ignored;
blank lines and `#` comments are skipped::

    # two machines, the second with sshd on port 2222
    10.0.0.1
    10.0.0.2:2222

ssh runs with `SSH_OPTIONS`, then the options in the variable D2LBERT_SSH_OPTIONS
(e.g. `-i ~/.ssh/job_key -F ~/.ssh/job_config`).
"""
import collections
import os
import shlex
import subprocess

Host = collections.namedtuple('Host', ['name', 'ssh_port'])
SSH_OPTIONS = ('-o', 'BatchMode=yes',  # never wait for a password
               '-o', 'ConnectTimeout=10',  # an unreachable host fails in 10 s
               '-o', 'StrictHostKeyChecking=accept-new',
               '-o', 'ServerAliveInterval=5',  # a host silent for 3 x 5 s is lost:
               '-o', 'ServerAliveCountMax=3',  # ssh exits with 255
               '-o', 'LogLevel=ERROR')  # no notices, errors only
SSH_OPTIONS_VARIABLE = 'D2LBERT_SSH_OPTIONS'
REACH_TIMEOUT = 30  # seconds for every host to answer


class HostsFileError(ValueError):
    """The hosts file can't be read or names no usable host."""


def parse_hosts(text, source='hosts file'):
    """The `Host`s of a hosts file's text, in order; source names it in errors."""
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split('#', 1)[0].split('slots=', 1)[0].strip()
        if not entry:
            continue
        name, _, port = entry.partition(':')
        port = port or '22'
        if not name or ' ' in name or not port.isdigit() or not 0 < int(port) < 65536:
            raise HostsFileError(f'{source} line {number}: expected host or host:port, '
                                 f'got {line.strip()!r}')
        hosts.append(Host(name, int(port)))
    if not hosts:
        raise HostsFileError(f'{source} names no host (one host or host:port per line)')
    return hosts


def read_hosts(path):
    """The `Host`s listed in the file at path."""
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as error:
        raise HostsFileError(f'--hosts {path}: cannot read it ({error})') from None
    return parse_hosts(text, f'--hosts {path}')


def ssh_command(host, remote_command):
    """ssh's argv running remote_command (a shell line) on host."""
    extra = shlex.split(os.environ.get(SSH_OPTIONS_VARIABLE, ''))
    return ['ssh', *SSH_OPTIONS, *extra, '-p', str(host.ssh_port), host.name,
            remote_command]


def unreachable(hosts, folder, python):
    """None if every host answers ssh and has folder and the program python; else one
    line saying which host does not, and why."""
    check = f'cd {shlex.quote(folder)} && test -x {shlex.quote(python)}'
    answers = [(host, subprocess.Popen(ssh_command(host, check), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True)) for host in hosts]
    failures = [why_not(host, answer, folder, python) for host, answer in answers]
    return next(filter(None, failures), None)


def why_not(host, answer, folder, python):
    """None if the check that `unreachable` runs on host by ssh (the Popen answer)
    succeeds, else the line saying why it failed."""
    try:
        _, error = answer.communicate(timeout=REACH_TIMEOUT)
    except subprocess.TimeoutExpired:
        answer.kill()
        answer.wait()
        return f'cannot reach host {host.name} by ssh: no answer in {REACH_TIMEOUT} s'
    if answer.returncode == 0:
        return None
    if answer.returncode == 255:  # ssh's own failure
        lines = error.strip().splitlines() or ['ssh exited with code 255']
        return f'cannot reach host {host.name} by ssh: {lines[-1]}'
    return (f'host {host.name} has no folder {folder} or no {python}: every host needs '
            'this folder and this Python environment at the same paths (e.g. a shared '
            'file system)')
