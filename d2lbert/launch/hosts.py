"""The hosts file of `d2lbert launch --hosts FILE`: the machines to run on.

One machine per line, as `dmlc_tracker`'s ssh mode (and MXNet's `tools/launch.py`)
reads it: `host` or `host:ssh_port`; an MPI-style `slots=N` after the host is ignored;
blank lines and `#` comments are skipped::

    # two machines, the second with sshd on port 2222
    10.0.0.1
    10.0.0.2:2222
"""
import collections

Host = collections.namedtuple('Host', ['name', 'ssh_port'])


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
