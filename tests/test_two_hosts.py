"""`d2lbert launch --hosts` on two real hosts: two Linux network namespaces on this
machine joined by a veth pair (10.9.0.1 and 10.9.0.2, addresses that exist only inside
them), each with its own OpenSSH server (Debian's openssh-server) and a key made for
the test. The launcher runs on the first host; the scheduler there, server i and
worker i on host i; every byte between the hosts crosses the veth link, which the test
cuts mid-run.

Needs root, iproute2 and openssh-server (`.ci/run` installs them); skipped, saying
which is missing, elsewhere. Namespaces, their processes and the sshd servers are
removed at the end even when a test fails (names carry this process's id).

Run as a script (`python tests/test_two_hosts.py pretrain ...`), this file is a
`d2lbert` whose steps after --slow-after N take 2 s more each, so that the test can
cut the link while the job trains.
"""
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from d2lbert.cli import main
from test_distributed import TINY_CONFIG, TRAINING, load_params, train_records

THIS_FILE = os.path.abspath(__file__)
ADDRESSES = ('10.9.0.1', '10.9.0.2')
LOST_WITHIN = 90  # seconds from the cut to a job fully ended
JOB_TIMEOUT = 240
TAG = f'd2h{os.getpid()}'  # unique names for namespaces and links


def missing():
    """Why this machine can't run the test, or None."""
    if os.geteuid() != 0:
        return 'needs root (network namespaces, sshd)'
    for program, package in (('ip', 'iproute2'), ('/usr/sbin/sshd', 'openssh-server'),
                             ('ssh', 'openssh-client'), ('ssh-keygen', 'openssh-client')):
        if shutil.which(program) is None:
            return f'needs {program} (Debian package {package})'
    return None


pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


class Hosts:
    """Two namespaces joined by a veth pair, each running sshd on its address."""

    def __init__(self, folder):
        self.folder = folder
        self.names = [f'{TAG}-a', f'{TAG}-b']
        self.links = [f'{TAG}a', f'{TAG}b']
        self.sshd = [None, None]
        self.key = str(folder / 'key')

    def build(self):
        made = sh('ip', 'netns', 'add', self.names[0], check=False)
        if made.returncode != 0:  # root in a container without CAP_SYS_ADMIN
            pytest.skip(f'cannot make a network namespace here: {made.stderr.strip()}')
        for name in self.names:
            if name != self.names[0]:
                sh('ip', 'netns', 'add', name)
            sh('ip', '-n', name, 'link', 'set', 'lo', 'up')
        sh('ip', 'link', 'add', self.links[0], 'type', 'veth', 'peer', 'name',
           self.links[1])
        for name, link, address in zip(self.names, self.links, ADDRESSES):
            sh('ip', 'link', 'set', link, 'netns', name)
            sh('ip', '-n', name, 'addr', 'add', f'{address}/24', 'dev', link)
            sh('ip', '-n', name, 'link', 'set', link, 'up')
        for key in (self.key, str(self.folder / 'host_key')):
            sh('ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', key)
        shutil.copy(self.key + '.pub', self.folder / 'authorized_keys')
        os.makedirs('/run/sshd', exist_ok=True)  # sshd's privilege separation folder
        for index in range(2):
            self.start_sshd(index)

    def start_sshd(self, index):
        config = self.folder / f'sshd-{index}.conf'
        config.write_text(
            f'ListenAddress {ADDRESSES[index]}\nPort 22\n'
            f'HostKey {self.folder / "host_key"}\n'
            f'PidFile {self.folder}/sshd-{index}.pid\n'
            f'AuthorizedKeysFile {self.folder / "authorized_keys"}\n'
            'PermitRootLogin prohibit-password\nPasswordAuthentication no\n'
            'KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n')
        with open(self.folder / f'sshd-{index}.log', 'a') as log:
            self.sshd[index] = subprocess.Popen(
                ['ip', 'netns', 'exec', self.names[index], '/usr/sbin/sshd', '-D', '-e',
                 '-f', str(config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while self.ssh(0, ADDRESSES[index], 'true').returncode != 0:
            log = self.folder / f'sshd-{index}.log'
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

    def stop_sshd(self, index):
        self.sshd[index].kill()
        self.sshd[index].wait()

    def ssh(self, on, address, command):
        """command run on address by ssh from host on, as the launcher does."""
        return subprocess.run(
            ['ip', 'netns', 'exec', self.names[on], 'ssh', '-o', 'BatchMode=yes',
             '-o', 'ConnectTimeout=5', *self.ssh_options().split(), address, command],
            capture_output=True, text=True, timeout=60)

    def ssh_options(self):
        return (f'-i {self.key} -o UserKnownHostsFile=/dev/null '
                '-o StrictHostKeyChecking=no')

    def pids(self, index):
        found = sh('ip', 'netns', 'pids', self.names[index], check=False).stdout.split()
        return [int(pid) for pid in found]

    def job_processes(self, marker):
        """pids, on either host, of processes whose command line contains marker."""
        found = []
        for index in range(2):
            for pid in self.pids(index):
                try:
                    with open(f'/proc/{pid}/cmdline', 'rb') as f:
                        if marker.encode() in f.read():
                            found.append(pid)
                except OSError:
                    pass
        return found

    def set_link(self, state):
        sh('ip', '-n', self.names[0], 'link', 'set', self.links[0], state)

    def received_bytes(self, index):
        return int(sh('ip', 'netns', 'exec', self.names[index], 'cat',
                      f'/sys/class/net/{self.links[index]}/statistics/rx_bytes').stdout)

    def remove(self):
        for process in self.sshd:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        for name in self.names:
            for pid in self.pids(self.names.index(name)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            sh('ip', 'netns', 'del', name, check=False)  # takes its end of the link along
        sh('ip', 'link', 'del', self.links[0], check=False)  # if it never moved


@pytest.fixture(scope='module')
def hosts(tmp_path_factory):
    folder = tmp_path_factory.mktemp('two-hosts')
    made = Hosts(folder)
    try:
        made.build()
        yield made
    finally:
        made.remove()


@pytest.fixture(scope='module')
def config(hosts):
    path = hosts.folder / 'tiny.json'
    path.write_text(json.dumps(TINY_CONFIG))
    (hosts.folder / 'hosts.txt').write_text('\n'.join(ADDRESSES) + '\n')
    return str(path)


def launch_on_first_host(hosts, command, timeout=JOB_TIMEOUT):
    """`d2lbert launch -n 2 --hosts` run on the first host; returns its Popen."""
    env = {**os.environ, 'OMP_NUM_THREADS': '1',
           'D2LBERT_SSH_OPTIONS': hosts.ssh_options()}
    return subprocess.Popen(
        ['ip', 'netns', 'exec', hosts.names[0], sys.executable, '-m', 'd2lbert', 'launch',
         '-n', '2', '--hosts', str(hosts.folder / 'hosts.txt'), '--host-ip', ADDRESSES[0],
         '--', *command], cwd=hosts.folder, env=env, stderr=subprocess.PIPE, text=True)


def pretrain(out, config, *extra):
    return ['d2lbert', 'pretrain', '--config', config, *TRAINING,
            '--kvstore', 'dist_sync', '--out', out, *extra]


@pytest.fixture(scope='module')
def job(hosts, config):
    """The 2-host job, written as the README writes it (`d2lbert pretrain`), though the
    hosts' login PATH has no d2lbert; and its bytes received on the second host."""
    assert hosts.ssh(0, ADDRESSES[1], 'command -v d2lbert').stdout == ''
    out, before = str(hosts.folder / 'job'), hosts.received_bytes(1)
    launcher = launch_on_first_host(hosts, pretrain(out, config))
    _, err = launcher.communicate(timeout=JOB_TIMEOUT)
    assert launcher.returncode == 0, err
    return {'out': out, 'err': err, 'received': hosts.received_bytes(1) - before}


def test_the_job_runs_on_both_hosts_and_equals_one_process(hosts, config, job):
    """Server 1 and worker 1 on the second host, over the link: it carried more bytes
    than 10 steps of the model's float32 values (worker 0's pushes to server 1, and
    worker 1's pulls from server 0, add up to a model a step); the job's losses are those
    of one process with the same global batch."""
    for role in ('scheduler', 'server 0', 'worker 0'):
        assert f'started {role} ' in job['err'] and f'on {ADDRESSES[0]}' in job['err']
    assert f'on {ADDRESSES[1]}' in job['err'] and '127.0.0.1' not in job['err']
    model = load_params(os.path.join(job['out'], 'checkpoints', 'step-000010',
                                     'model.params'))
    assert job['received'] > 10 * 4 * sum(value.size for value in model.values())
    one = str(hosts.folder / 'one')
    subprocess.run([sys.executable, '-m', 'd2lbert', 'pretrain', '--config', config,
                    *TRAINING, '--accumulate', '2', '--out', one], check=True,
                   capture_output=True, timeout=JOB_TIMEOUT,
                   env={**os.environ, 'OMP_NUM_THREADS': '1'})
    mine, reference = train_records(job['out']), train_records(one)
    assert [r['step'] for r in mine] == list(range(1, 11))
    for a, b in zip(mine, reference):
        for key in ('mlm_loss', 'nsp_loss', 'mlm_accuracy', 'nsp_accuracy', 'lr'):
            assert a[key] == pytest.approx(b[key], abs=1e-5), (key, a['step'])


def wait_for(path, launcher, within=JOB_TIMEOUT):
    deadline = time.monotonic() + within
    while not os.path.exists(path):
        running = launcher.poll() is None and time.monotonic() < deadline
        assert running, launcher.stderr.read()
        time.sleep(0.05)


def test_a_cut_link_ends_the_job_and_resume_continues_it(hosts, config, job):
    """The link cut at step 6: the job ends within LOST_WITHIN s with one line naming the
    lost host, no process of it left on either host, only complete files in --out; with
    the link back, --resume logs the uninterrupted job's losses."""
    out = str(hosts.folder / 'cut')
    slowed = [sys.executable, THIS_FILE, '--slow-after', '5', *pretrain(out, config)[1:]]
    launcher = launch_on_first_host(hosts, slowed)
    try:
        wait_for(os.path.join(out, 'checkpoints', 'step-000005'), launcher)
        hosts.set_link('down')
        cut = time.monotonic()
        _, err = launcher.communicate(timeout=LOST_WITHIN)
        while hosts.job_processes(out) and time.monotonic() - cut < LOST_WITHIN:
            time.sleep(0.5)
        ended = time.monotonic() - cut
        assert hosts.job_processes(out) == [] and ended < LOST_WITHIN, ended
    finally:
        launcher.kill()
        hosts.set_link('up')
    assert launcher.returncode == 255, err
    failures = [line for line in err.splitlines() if 'stopping the job' in line]
    assert len(failures) == 1 and failures[0].startswith(
        f'd2lbert launch: lost host {ADDRESSES[1]}: the ssh of '), err
    assert 'Traceback' not in err, err
    assert os.listdir(os.path.join(out, 'checkpoints')) == ['step-000005']
    assert not [name for name in os.listdir(out) if name.startswith('.tmp')], os.listdir(out)
    steps = [r['step'] for r in train_records(out)]  # every line whole
    assert 5 <= steps[-1] < 10, steps

    hosts.ssh(0, ADDRESSES[1], 'true')  # the link is back
    launcher = launch_on_first_host(hosts, [*pretrain(out, config), '--resume'])
    _, err = launcher.communicate(timeout=JOB_TIMEOUT)
    assert launcher.returncode == 0, err
    resumed, uninterrupted = train_records(out), train_records(job['out'])
    assert [r['step'] for r in resumed] == list(range(1, 11))
    for a, b in zip(resumed, uninterrupted):
        assert (a['mlm_loss'], a['nsp_loss']) == pytest.approx(
            (b['mlm_loss'], b['nsp_loss']), abs=1e-6), a['step']


def test_a_host_without_ssh_server_ends_the_job_at_start(hosts, config):
    out = str(hosts.folder / 'refused')
    hosts.stop_sshd(1)
    try:
        launcher = launch_on_first_host(hosts, pretrain(out, config))
        _, err = launcher.communicate(timeout=60)
    finally:
        hosts.start_sshd(1)
    assert launcher.returncode == 255
    assert err == (f'd2lbert launch: cannot reach host {ADDRESSES[1]} by ssh: ssh: connect '
                   f'to host {ADDRESSES[1]} port 22: Connection refused; the job did not '
                   'start\n')
    assert not os.path.exists(out) and hosts.job_processes(out) == []


def run_slowed_worker(argv):
    """`d2lbert ARGV[2:]` whose steps after ARGV[1] (after --slow-after) sleep 2 s."""
    slow_after = int(argv[1])
    module = importlib.import_module('d2lbert.pretraining.pretrain')
    seed_step = module.seed_step

    def slow_seed_step(seed, step, worker=0):
        if step > slow_after:
            time.sleep(2)
        seed_step(seed, step, worker)

    module.seed_step = slow_seed_step
    return main(argv[2:])


if __name__ == '__main__':
    sys.exit(run_slowed_worker(sys.argv[1:]))
