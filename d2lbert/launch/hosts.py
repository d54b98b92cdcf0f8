"""The hosts of `d2lbert launch --hosts FILE`: the machines to run on, and how ssh
reaches them.

One machine per line, as `dmlc_tracker`'s ssh mode (and MXNet's `tools/launch.py`)
reads it: `host` or `host:ssh_port`; an MPI-style `slots=N` after the host is ignored;
blank lines and `#` comments are skipped::

    # two machines, the second with sshd on port 2222
    10.0.0.1
    10.0.0.2:2222

A host may also be written `user@host` or as an alias of the ssh configuration. ssh
runs with `SSH_OPTIONS`, then the options in the variable D2LBERT_SSH_OPTIONS (e.g.
`-i ~/.ssh/job_key -F ~/.ssh/job_config`). The processes of the job reach each other
not by ssh but by ps-lite, at the address that ssh resolves the entry to (`ssh -G`: the
alias's HostName, without the user): `with_addresses`. ps-lite connects over IPv4 only:
an IPv6 entry, or one that ssh resolves to an IPv6 address, is refused in one line.
"""
import collections
import os
import shlex
import shutil
import subprocess

# name: as the hosts file writes it (for ssh); address: the one ps-lite advertises, once
# resolved (`with_addresses`)
Host = collections.namedtuple('Host', ['name', 'ssh_port', 'address'], defaults=[None])
SSH_OPTIONS = ('-o', 'BatchMode=yes',  # never wait for a password
               '-o', 'ConnectTimeout=10',  # an unreachable host fails in 10 s
               '-o', 'StrictHostKeyChecking=accept-new',
               '-o', 'ServerAliveInterval=5',  # a host silent for 3 x 5 s is lost:
               '-o', 'ServerAliveCountMax=3',  # ssh exits with 255
               '-o', 'LogLevel=ERROR')  # no notices, errors only
SSH_OPTIONS_VARIABLE = 'D2LBERT_SSH_OPTIONS'
REACH_TIMEOUT = 30  # seconds for every host to answer
IPV4_ONLY = ("ps-lite (MXNet's parameter server) connects over IPv4 only: give the "
             "host's IPv4 address or a name that resolves to one")


class HostsFileError(ValueError):
    """The hosts file can't be read or names no usable host."""


def parse_hosts(text, source='hosts file'):
    """The `Host`s of a hosts file's text, in order; source names it in errors."""
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split('#', 1)[0].split('slots=', 1)[0].strip()
        if not entry:
            continue
        if entry.startswith('[') or entry.count(':') > 1:
            raise HostsFileError(f'{source} line {number}: {entry!r} is an IPv6 address; '
                                 f'{IPV4_ONLY}')
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


def ssh_command(host, *arguments):
    """ssh's argv for host with arguments after it: a remote command (a shell line)."""
    extra = shlex.split(os.environ.get(SSH_OPTIONS_VARIABLE, ''))
    return ['ssh', *SSH_OPTIONS, *extra, '-p', str(host.ssh_port), host.name, *arguments]


def check_ssh_installed(hosts_file):
    """A HostsFileError naming hosts_file if this machine has no ssh (on the PATH)."""
    if shutil.which('ssh') is None:
        raise HostsFileError(f'--hosts {hosts_file}: the hosts are reached by ssh, and no '
                             'ssh is installed here (none on the PATH)')


def with_addresses(hosts, hosts_file):
    """The hosts with the address each is reached at by ps-lite: the HostName that ssh's
    configuration gives it (`ssh -G`, which connects nowhere), the user left out;
    a HostsFileError naming hosts_file if ssh can't tell or gives an IPv6 address."""
    resolved = []
    for host in hosts:
        argv = ssh_command(host)
        try:
            config = subprocess.run([argv[0], '-G', *argv[1:]], stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True, timeout=REACH_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise HostsFileError(f'--hosts {hosts_file}: ssh -G {host.name} gave no answer '
                                 f'in {REACH_TIMEOUT} s') from None
        names = [line.split()[1] for line in config.stdout.splitlines()
                 if line.startswith('hostname ')]
        if config.returncode != 0 or not names:
            why = (config.stderr.strip().splitlines() or ['no hostname'])[-1]
            raise HostsFileError(f'--hosts {hosts_file}: ssh -G {host.name} cannot say '
                                 f'which address {host.name} is: {why}')
        if ':' in names[0]:
            raise HostsFileError(f'--hosts {hosts_file}: ssh reaches {host.name} at '
                                 f'{names[0]}, an IPv6 address; {IPV4_ONLY}')
        resolved.append(host._replace(address=names[0]))
    return resolved


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
