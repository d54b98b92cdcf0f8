"""`d2lbert launch`: run a training command as a job of several processes on MXNet's
parameter server, on this machine or on the machines of a hosts file::

    d2lbert launch -n 2 -- d2lbert pretrain --kvstore dist_sync --out runs/two
    d2lbert launch -n 2 --hosts hosts.txt -- d2lbert pretrain --kvstore dist_sync ...

:mod:`.job` plans the processes (roles, hosts, environment), :mod:`.hosts` reads the
hosts file and checks that ssh reaches them, :mod:`.supervise` runs them and stops them
all when one fails (or a host is lost: :mod:`.tether`).

MXNet's own launcher (`tools/launch.py`, driving the `dmlc_tracker` package) does the
first two, but fails on Python 3.10+ (`Thread.isAlive`), and its local and ssh modes
run each process in a thread that never stops the others: one dead worker leaves the
job waiting forever. This package keeps `dmlc_tracker`'s conventions (the hosts file
format, the scheduler on the first free port from 9091 on the launching machine,
servers and workers by ssh in the same folder, its way to find this machine's address)
and adds the supervision.
"""
import os
import sys

from ..util.options import check_int
from .hosts import (IPV4_ONLY, Host, HostsFileError, check_ssh_installed, parse_hosts,
                    read_hosts, unreachable, with_addresses)
from .job import Process, plan_job
from .supervise import run, say

__all__ = ['launch', 'Host', 'HostsFileError', 'parse_hosts', 'read_hosts', 'Process',
           'plan_job', 'run']


def launch(command, num_workers, num_servers=None, hosts_file=None, host_ip=None,
           port=None):
    """Run command (a list of arguments) as a job of num_workers workers and num_servers
    servers (default: one, or one per host of hosts_file); returns the exit code: 0 if
    every process succeeded, else that of the first that failed.

    host_ip: this machine's address as the hosts reach it (default: found, as
    `dmlc_tracker` does); port: the scheduler's (default: the first free from 9091).
    Bad arguments raise a `ValueError` naming the flag.
    """
    if not command:
        raise ValueError('no command to launch: put it after --, e.g. d2lbert launch -n 2 '
                         '-- d2lbert pretrain --kvstore dist_sync')
    check_int('-n/--num-workers', num_workers, 1)
    hosts = None if hosts_file is None else read_hosts(hosts_file)
    if num_servers is None:
        num_servers = 1 if hosts is None else len(hosts)
    check_int('-s/--num-servers', num_servers, 1)
    if port is not None:
        check_int('--port', port, 1, 65535)
    if host_ip is not None and hosts is None:
        raise ValueError('--host-ip does not apply without --hosts (every process runs '
                         'here, on 127.0.0.1)')
    if host_ip is not None and ':' in host_ip:
        raise ValueError(f'--host-ip {host_ip} is an IPv6 address; {IPV4_ONLY}')
    if hosts is not None:
        check_ssh_installed(hosts_file)
        failure = unreachable(hosts, os.getcwd(), sys.executable)
        if failure:
            say(f'{failure}; the job did not start')
            return 255
        hosts = with_addresses(hosts, hosts_file)
    return run(plan_job(command, num_workers, num_servers, hosts, host_ip, port))
