"""The processes of a ps-lite job: their roles, where they run, and their environment.

MXNet's parameter server (ps-lite) runs one *scheduler* (which introduces the others to
each other), S *servers* (which add up the workers' gradients) and W *workers* (the
training processes). Each is the same program with different variables:

    DMLC_ROLE           scheduler, server or worker
    DMLC_PS_ROOT_URI    the scheduler's address, DMLC_PS_ROOT_PORT its port
    DMLC_NUM_SERVER     S, DMLC_NUM_WORKER W
    DMLC_NODE_HOST      the address this process tells the others to reach it at

A server or the scheduler never gets past `import mxnet`: MXNet runs the server loop
there and exits. Servers and workers listen on ports the system picks, so machines of
one job must reach each other on any TCP port.

On one machine every process runs on 127.0.0.1. With a hosts file the scheduler runs
here and server i and worker i on host i (round robin), each started by ssh in the same
folder as here, like `dmlc_tracker`'s ssh mode, under `tether.py` (which ends it when
the launcher goes silent: a lost host). A command starting with `d2lbert` or `python`
runs with this Python (`sys.executable`), so it works on hosts whose login PATH lacks
the virtual environment (which must exist at the same path there).
"""
import dataclasses
import os
import shlex
import socket
import sys

from .hosts import ssh_command

LOCAL_HOST = '127.0.0.1'
FIRST_PORT = 9091  # dmlc_tracker's: the scheduler takes the first free port from here
# Variables of this shell that the processes on other hosts get too.
FORWARDED_PREFIXES = ('DMLC_', 'PS_', 'MXNET_', 'D2LBERT_', 'OMP_', 'OPENBLAS_')
FORWARDED_NAMES = ('PYTHONPATH',)
TETHER_SECONDS = 20  # a remote process with no word from the launcher this long stops
TETHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'tether.py')


@dataclasses.dataclass
class Process:
    """One process of the job: role 'scheduler', 'server' or 'worker', its index among
    its role, the host it runs on, its command line (ssh's for a remote host), the
    environment of that command, and once started its `subprocess.Popen`."""
    role: str
    index: int
    host: str
    argv: list
    env: dict = dataclasses.field(repr=False)
    remote: bool = False
    popen: object = None

    @property
    def name(self):
        """'scheduler', 'server 0', 'worker 1', ..."""
        return self.role if self.role == 'scheduler' else f'{self.role} {self.index}'


def free_port(first=FIRST_PORT, last=FIRST_PORT + 900):
    """The first TCP port in [first, last) that nobody listens on here."""
    for port in range(first, last):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(('', port))
                return port
            except OSError:
                continue
    raise OSError(f'no free TCP port in {first}..{last - 1} for the scheduler')


def plan_job(command, num_workers, num_servers, hosts=None, root_uri=None, port=None):
    """The `Process`es of a job running `command` (a list of arguments).

    hosts: `hosts.Host`s to run servers and workers on by ssh, their addresses resolved
    (`hosts.with_addresses`) (None: all here, on 127.0.0.1). root_uri: the scheduler's address as the hosts reach it (default: this
    machine's address, found as `dmlc_tracker` does). port: the scheduler's port
    (default: the first free one from 9091).
    """
    if hosts is None:
        root_uri = LOCAL_HOST
    elif root_uri is None:
        from dmlc_tracker.tracker import get_host_ip
        root_uri = get_host_ip('auto')
    job_env = {'DMLC_PS_ROOT_URI': root_uri, 'DMLC_PS_ROOT_PORT': str(port or free_port()),
               'DMLC_NUM_SERVER': str(num_servers), 'DMLC_NUM_WORKER': str(num_workers)}
    processes = [local_process('scheduler', 0, root_uri, command, job_env)]
    for role, count in (('server', num_servers), ('worker', num_workers)):
        for index in range(count):
            if hosts is None:
                processes.append(local_process(role, index, LOCAL_HOST, command, job_env))
            else:
                host = hosts[index % len(hosts)]
                processes.append(remote_process(role, index, host, command, job_env))
    return processes


def with_this_python(command):
    """command with a leading `d2lbert` or `python` run by this Python."""
    if command[0] == 'd2lbert':
        return [sys.executable, '-m', 'd2lbert', *command[1:]]
    if command[0] in ('python', 'python3'):
        return [sys.executable, *command[1:]]
    return list(command)


def local_process(role, index, node_host, command, job_env):
    env = {**os.environ, **job_env, 'DMLC_ROLE': role, 'DMLC_NODE_HOST': node_host}
    return Process(role, index, node_host, with_this_python(command), env)


def remote_process(role, index, host, command, job_env):
    """A process started on host by ssh under `tether.py`, in the same folder as here,
    with the job's variables and this shell's `FORWARDED_PREFIXES` ones."""
    variables = {name: value for name, value in os.environ.items()
                 if name.startswith(FORWARDED_PREFIXES) or name in FORWARDED_NAMES}
    variables.update(job_env, DMLC_ROLE=role, DMLC_NODE_HOST=host.address)
    tethered = [sys.executable, '-I', TETHER, str(TETHER_SECONDS),
                *with_this_python(command)]
    remote = (f'cd {shlex.quote(os.getcwd())} && exec env '
              + ' '.join(shlex.quote(f'{k}={v}') for k, v in sorted(variables.items()))
              + ' ' + shlex.join(tethered))
    return Process(role, index, host.name, ssh_command(host, remote), dict(os.environ),
                   remote=True)
