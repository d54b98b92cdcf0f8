"""Pretraining as a job of several processes on MXNet's parameter server, all on
127.0.0.1: the workers' shards, `d2lbert launch` (start, supervise, stop), and real
2-worker jobs checked against one process trained on the combined batches.

Every subprocess has a timeout; every process a test starts carries the test's
temporary folder in its command line, so the test can check that none is left behind
(and kill any that is, so that a failing test leaves nothing running).

Run as a script (`python tests/test_distributed.py pretrain ...`), this file is a
`d2lbert` that saves the worker's final parameters as OUT/worker-RANK.params and, when
DIE_AT_STEP is set, makes the worker of rank 1 SIGKILL itself at that step (FAIL_AT_STEP:
raise an error there); with HOMES
set, each worker has a D2LBERT_HOME of its own, HOMES/RANK, where it notes the
fingerprint of the vocabulary it trained with.
"""
import contextlib
import importlib.util
import io
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as onp
import pytest

from d2lbert.cli import main
from d2lbert.data import load_data_wiki
from d2lbert.data.vocab_files import read_wordpiece
from d2lbert.launch import HostsFileError, launch, parse_hosts
from d2lbert.pretraining.distributed import DistributedError, ShardStream
from d2lbert.pretraining.pretrain import PretrainOptions, pretrain
from d2lbert.run.errors import RunError

THIS_FILE = os.path.abspath(__file__)
BOUND = 60  # seconds: a failed job must be over within this
JOB_TIMEOUT = 240  # seconds: no subprocess of these tests may run longer
TINY_CONFIG = {'vocab_size': 100, 'num_hiddens': 32, 'ffn_num_hiddens': 64, 'num_heads': 2,
               'num_layers': 1, 'dropout': 0.0, 'max_len': 32}
STEPS = 10
TRAINING = ['--data', 'bundled', '--batch-size', '8', '--max-len', '32', '--steps',
            str(STEPS), '--warmup', '2', '--lr', '1e-3', '--log-every', '1',
            '--eval-every', '0', '--save-every', '5', '--no-progress', '--seed', '3']


# ---------------------------------------------------------------- helpers

def processes_with(marker):
    """pids of the processes (but this one) whose command line contains marker."""
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                cmdline = f.read().decode(errors='replace')
        except OSError:
            continue
        if marker in cmdline and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def kill_processes_with(marker):
    """SIGKILL what a test started and left behind (found by its unique folder)."""
    for pid in processes_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def assert_nothing_left(marker, within=5):
    deadline = time.monotonic() + within
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(marker) == [], 'processes were left behind'


def job_env(**extra):
    return {**os.environ, 'OMP_NUM_THREADS': '1', **extra}


def launch_here(marker, command, timeout=JOB_TIMEOUT, **options):
    """`d2lbert.launch.launch(command, **options)` run in this process (as
    `d2lbert launch` would, without importing MXNet once more), stopped after timeout
    seconds; returns (exit code, what it wrote to stderr, seconds). Checks that it left
    no process behind."""
    def time_out(signum, frame):
        raise TimeoutError(f'the job ran for more than {timeout} s')

    stderr, tic = io.StringIO(), time.monotonic()
    previous = signal.signal(signal.SIGALRM, time_out)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stderr(stderr):
            code = launch(command, **options)  # a TimeoutError stops its processes
        seconds = time.monotonic() - tic
        assert_nothing_left(marker)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        kill_processes_with(marker)
    return code, stderr.getvalue(), seconds


def sleeper(folder, exit_code=0):
    """A job command that doesn't need MXNet: the first worker to start writes its pid to
    FOLDER/failed and exits with exit_code after a second (if not 0); the rest sleep."""
    code = f'''
import os, sys, time
folder = sys.argv[1]
if os.environ['DMLC_ROLE'] == 'worker' and {exit_code}:
    try:
        fd = os.open(os.path.join(folder, 'failed'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        time.sleep(1)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        sys.exit({exit_code})
    except FileExistsError:
        pass
time.sleep(200)
'''
    return [sys.executable, '-c', code, str(folder)]


def train_records(out):
    with open(os.path.join(out, 'metrics.jsonl')) as f:
        records = [json.loads(line) for line in f]
    return [record for record in records if record['split'] == 'train']


def load_params(path):
    from mxnet import npx
    return {name: value.asnumpy() for name, value in npx.load(path).items()}


# ---------------------------------------------------------------- shards

@pytest.mark.parametrize('num_workers, accumulate', [(2, 1), (3, 1), (2, 2)])
def test_workers_read_the_batches_of_one_process(num_workers, accumulate):
    """Step by step, worker r reads batches r, r + W, ... of the batches one process
    reads with W times the accumulation; so every batch of an epoch is read exactly once.
    98 batches per epoch: the steps straddle the epoch ends."""
    data_iter, _ = load_data_wiki(64, 32, 'bundled', 'train', last_batch='discard')
    one = ShardStream(data_iter, epoch=0, index=5)
    workers = [ShardStream(data_iter, 0, 5, rank, num_workers) for rank in range(num_workers)]
    per_step = accumulate * num_workers
    epoch_0 = [batch.tokens for batch in data_iter.batches(0)]
    read = {}  # position in the stream: the tokens a worker read there
    for step in range(2 * len(data_iter) // per_step + 1):
        expected = one.next_step(per_step)
        for rank, worker in enumerate(workers):
            for i, batch in enumerate(worker.next_step(accumulate)):
                onp.testing.assert_array_equal(batch.tokens, expected[rank + i * num_workers]
                                               .tokens)
                read[5 + step * per_step + rank + i * num_workers] = batch.tokens
            assert worker.position() == one.position()
    for index in range(5, len(epoch_0)):
        onp.testing.assert_array_equal(read[index], epoch_0[index])
    assert one.position()['epoch'] == 2


def test_workers_draw_their_own_dropout_masks():
    """seed_step gives each worker its own masks; the first worker keeps those of a single
    process (whose resumed runs must stay identical)."""
    import mxnet as mx
    from d2lbert.run.step import seed_step

    def draw(*args):
        seed_step(*args)
        return mx.nd.random.uniform(shape=(8,)).asnumpy()

    onp.testing.assert_array_equal(draw(3, 7, 0), draw(3, 7))
    onp.testing.assert_array_equal(draw(3, 7, 1), draw(3, 7, 1))
    assert not onp.array_equal(draw(3, 7, 0), draw(3, 7, 1))


# ---------------------------------------------------------------- checks

class FirstWorkersStore:
    """The kvstore as the first of two workers sees it, the other pushing zeros: each
    push-pull gives what was pushed, in float32 (the servers' sums), and is recorded."""

    def __init__(self):
        self.pushed = []

    def init(self, key, value):
        pass

    def pushpull(self, key, value, out):
        self.pushed.append(value.asnumpy().astype(onp.float32))
        out[:] = self.pushed[-1]


class SecondWorkersStore(FirstWorkersStore):
    """The kvstore as the second worker sees it: each push-pull gives the float32 sum of
    what the first worker pushed there (in order) and what this one pushes."""

    def __init__(self, first_pushed):
        super().__init__()
        self.first_pushed = list(first_pushed)

    def pushpull(self, key, value, out):
        out[:] = self.first_pushed.pop(0) + value.asnumpy().astype(onp.float32)


def test_a_vocabulary_of_more_than_2_to_the_24_bytes_reaches_every_worker(monkeypatch):
    """The vocabulary's bytes cross the kvstore's float32 sums whole, even beyond 2**24
    bytes, where a float32 no longer holds every integer (the length, sent as one number,
    arrived rounded)."""
    from d2lbert.pretraining import distributed
    data = onp.random.default_rng(0).integers(0, 256, 2 ** 24 + 3, dtype=onp.uint8).tobytes()
    monkeypatch.setattr(distributed, 'vocab_as_bytes', lambda vocab: data)
    monkeypatch.setattr(distributed, 'vocab_from_bytes', lambda received: received)
    first = distributed.Worker(0, 2, FirstWorkersStore())
    assert first.share_vocabulary('the vocabulary') == 'the vocabulary'
    second = distributed.Worker(1, 2, SecondWorkersStore(first.kvstore.pushed))
    assert second.share_vocabulary(None) == data


def test_hosts_file_format():
    text = '# machines\n10.0.0.1\n\nnode-b:2222 slots=4\nnode-c  # the third\n'
    assert [(h.name, h.ssh_port) for h in parse_hosts(text)] == [
        ('10.0.0.1', 22), ('node-b', 2222), ('node-c', 22)]
    for bad in ('', '# nothing\n', 'node-a:port\n', 'node-a:0\n', 'node a\n'):
        with pytest.raises(HostsFileError, match='hosts file'):
            parse_hosts(bad)


@pytest.mark.parametrize('args, message', [
    (['-n', '0', '--', 'true'], '-n/--num-workers must be an integer >= 1, got 0'),
    (['-n', '2', '-s', '0', '--', 'true'], '-s/--num-servers must be an integer >= 1'),
    (['-n', '2', '--port', '70000', '--', 'true'], '--port must be an integer in'),
    (['-n', '2', '--hosts', 'missing-hosts.txt', '--', 'true'],
     '--hosts missing-hosts.txt: cannot read it'),
    (['-n', '2', '--host-ip', '10.0.0.1', '--', 'true'], '--host-ip does not apply without --hosts'),
    (['-n', '2'], 'no command to launch'),
    (['-n', '2', '--'], 'no command to launch')])
def test_launch_refuses_bad_arguments(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(['launch', *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith('d2lbert launch: error: ') and message in err, err
    assert '\n' not in err and os.listdir(tmp_path) == []


def test_pretrain_refuses_dist_sync_outside_a_job(tmp_path, monkeypatch):
    """Without the DMLC_* variables MXNet would abort; with DMLC_ROLE=worker and a local
    kvstore each worker would train alone: both are one clear error, nothing written."""
    for name in ('DMLC_ROLE', 'DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT', 'DMLC_NUM_SERVER',
                 'DMLC_NUM_WORKER'):
        monkeypatch.delenv(name, raising=False)
    out = str(tmp_path / 'run')
    with pytest.raises(DistributedError, match='DMLC_ROLE, DMLC_PS_ROOT_URI.*d2lbert launch'):
        pretrain(PretrainOptions(kvstore='dist_sync', out=out))
    monkeypatch.setenv('DMLC_ROLE', 'worker')
    with pytest.raises(DistributedError, match='--kvstore is device: pass --kvstore dist_sync'):
        pretrain(PretrainOptions(out=out))
    assert os.listdir(tmp_path) == []


def test_horovod_outside_horovodrun_is_refused(tmp_path, monkeypatch):
    """MXNet's kvstore='horovod' is a local kvstore: a process not started by horovodrun
    would train alone. d2lbert refuses, before writing anything."""
    for name in ('HOROVOD_SIZE', 'OMPI_COMM_WORLD_SIZE', 'PMI_SIZE'):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DistributedError, match='--kvstore horovod runs in a job started by '
                                               'horovodrun'):
        pretrain(PretrainOptions(kvstore='horovod', out=str(tmp_path / 'run')))
    assert os.listdir(tmp_path) == []


def test_the_horovod_install_hint_is_the_command_ci_runs():
    """The message for a missing Horovod gives the build command CI runs (and tests)."""
    from d2lbert.pretraining.distributed import HOROVOD_INSTALL
    with open(os.path.join(os.path.dirname(THIS_FILE), '..', '.ci', 'run')) as f:
        assert HOROVOD_INSTALL in f.read().splitlines()


# ---------------------------------------------------------------- supervision

def test_a_failing_worker_stops_the_job(tmp_path):
    """One worker exits with code 3: the launcher stops the scheduler, the server and
    the other workers at once, names the worker and exits with its code."""
    code, err, seconds = launch_here(str(tmp_path), sleeper(tmp_path, exit_code=3),
                                     num_workers=3)
    pid = (tmp_path / 'failed').read_text()
    assert code == 3, err
    assert re.search(rf'worker \d \(pid {pid} on 127.0.0.1\) exited with code 3; '
                     'stopping the job', err), err
    assert err.count('started') == 5 and seconds < BOUND


FAILING_WORKER = '''
import atexit, sys
import mxnet as mx
atexit.register(print, 'an exit handler registered before the job ran')
mx.kv.create = lambda name: type('Store', (), {'rank': 0, 'num_workers': 2})()
from d2lbert.cli import main
sys.exit(main(['pretrain', '--kvstore', 'dist_sync', '--resume', '--out', sys.argv[1],
               '--data', 'bundled']))
'''


def test_a_failed_worker_exits_with_the_commands_code_after_the_exit_handlers(tmp_path):
    """A worker (of a job faked: a kvstore of rank 0 in 2) failing with a bad flag after
    joining the job exits with the command's code, 2, once every exit handler ran."""
    env = job_env(DMLC_ROLE='worker', DMLC_PS_ROOT_URI='127.0.0.1', DMLC_PS_ROOT_PORT='9',
                  DMLC_NUM_SERVER='1', DMLC_NUM_WORKER='2')
    done = subprocess.run([sys.executable, '-c', FAILING_WORKER, str(tmp_path / 'absent')],
                          capture_output=True, text=True, timeout=JOB_TIMEOUT, env=env)
    assert done.returncode == 2, done.stderr
    assert 'error: --resume' in done.stderr
    assert done.stdout.endswith('an exit handler registered before the job ran\n')


def test_a_job_of_the_d2lbert_program_ends_as_its_workers_do(tmp_path):
    """Two workers running `python -m d2lbert pretrain` (`cli.console`, which elsewhere
    skips the interpreter's teardown) end the job well: their kvstores' teardown stops
    the server and the scheduler (else the launcher stops them with exit code 1,
    FINISH_GRACE s after the workers)."""
    config = tmp_path / 'tiny.json'
    config.write_text(json.dumps(TINY_CONFIG))
    command = [sys.executable, '-m', 'd2lbert', 'pretrain', '--config', str(config),
               *TRAINING, '--out', str(tmp_path / 'job'), '--kvstore', 'dist_sync']
    code, err, seconds = launch_here(str(tmp_path), command, num_workers=2, num_servers=1)
    assert code == 0, err
    assert seconds < BOUND
    assert len(train_records(str(tmp_path / 'job'))) == STEPS


def test_sigterm_to_the_launcher_stops_every_process(tmp_path):
    launcher = subprocess.Popen(
        [sys.executable, '-m', 'd2lbert', 'launch', '-n', '2', '--', *sleeper(tmp_path)],
        stderr=subprocess.PIPE, text=True, env=job_env())
    try:
        lines = [launcher.stderr.readline() for _ in range(4)]
        assert all('started' in line for line in lines), lines
        assert len(processes_with(str(tmp_path))) >= 4
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(BOUND) == 128 + signal.SIGTERM
        assert 'got SIGTERM; stopping the job' in launcher.stderr.read()
        assert_nothing_left(str(tmp_path))
    finally:
        launcher.kill()
        kill_processes_with(str(tmp_path))



@pytest.mark.parametrize('nohup', [False, True])
def test_sighup_stops_the_job_unless_the_launcher_runs_under_nohup(tmp_path, nohup):
    """SIGHUP (the terminal closed) to the launcher stops the job, as SIGTERM does;
    started by `nohup` (which makes it ignore SIGHUP), the job trains on and ends well.
    The launcher starts with SIGHUP's default action either way, whether or not the
    tests themselves run under nohup."""
    job = [sys.executable, '-c', 'import time; time.sleep(4)', str(tmp_path)]
    launcher = subprocess.Popen(
        [*(['nohup'] if nohup else []), sys.executable, '-m', 'd2lbert', 'launch', '-n', '2',
         '--', *job], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=job_env(),
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        lines = [launcher.stderr.readline() for _ in range(4)]
        assert all('started' in line for line in lines), lines
        launcher.send_signal(signal.SIGHUP)
        code, err = launcher.wait(BOUND), launcher.stderr.read()
        assert_nothing_left(str(tmp_path))
    finally:
        launcher.kill()
        kill_processes_with(str(tmp_path))
    if nohup:
        assert code == 0 and err == '', err
    else:
        assert code == 128 + signal.SIGHUP and 'got SIGHUP; stopping the job' in err, err

FAKE_SSH = '''#!/bin/bash
# ssh for the tests: logs its arguments, runs the remote command here (ssh -G, which
# prints the configuration of a host and connects nowhere, is the real ssh's).
for arg in "$@"; do if [ "$arg" = -G ]; then exec /usr/bin/ssh "$@"; fi; done
echo "$@" >> "$FAKE_SSH_LOG"
while [ $# -gt 1 ]; do case "$1" in -o|-p|-F) shift 2;; -*) shift;; *) break;; esac; done
if [ "$1" = unreachable.invalid ]; then echo "ssh: Could not resolve hostname" >&2; exit 255; fi
if [ "$1" = bare.invalid ]; then exit 1; fi  # a host without this folder or Python
exec bash -c "$2"
'''


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    """`ssh` on the PATH is FAKE_SSH."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'ssh').write_text(FAKE_SSH)
    (bin_dir / 'ssh').chmod(0o755)
    monkeypatch.setenv('PATH', f'{bin_dir}:{os.environ["PATH"]}')
    monkeypatch.setenv('FAKE_SSH_LOG', str(tmp_path / 'ssh.log'))
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


def test_hosts_run_servers_and_workers_by_ssh(tmp_path, fake_ssh):
    """The scheduler runs here; server i and worker i on host i (round robin), started by
    ssh in this folder with the job's variables and DMLC_NODE_HOST their host."""
    (tmp_path / 'hosts.txt').write_text('127.0.0.1\nlocalhost:2222\n')
    report = ('import json, os, sys; open(os.path.join(sys.argv[1], str(os.getpid())), "w")'
              '.write(json.dumps({k: os.environ.get(k) for k in ("DMLC_ROLE", '
              '"DMLC_NODE_HOST", "DMLC_PS_ROOT_URI", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", '
              '"OMP_NUM_THREADS")} | {"cwd": os.getcwd()}))')
    code, err, _ = launch_here(str(tmp_path), [sys.executable, '-c', report, str(tmp_path)],
                               num_workers=3, num_servers=2,
                               hosts_file=str(tmp_path / 'hosts.txt'), host_ip='127.0.0.1')
    assert code == 0, err
    seen = [json.loads((tmp_path / name).read_text()) for name in os.listdir(tmp_path)
            if name.isdigit()]
    placed = sorted((s['DMLC_ROLE'], s['DMLC_NODE_HOST']) for s in seen)
    assert placed == [('scheduler', '127.0.0.1'), ('server', '127.0.0.1'),
                      ('server', 'localhost'), ('worker', '127.0.0.1'),
                      ('worker', '127.0.0.1'), ('worker', 'localhost')]
    assert all(s['DMLC_PS_ROOT_URI'] == '127.0.0.1' and s['DMLC_NUM_WORKER'] == '3'
               and s['DMLC_NUM_SERVER'] == '2' and s['OMP_NUM_THREADS'] == '1'
               and s['cwd'] == os.getcwd() for s in seen)
    ssh_calls = (tmp_path / 'ssh.log').read_text().splitlines()  # a check per host first
    assert len(ssh_calls) == 2 + 5 and sum('-p 2222 localhost' in c for c in ssh_calls) == 3
    assert all('test -x' in call for call in ssh_calls[:2])
    assert all('BatchMode=yes' in call and 'ConnectTimeout=10' in call for call in ssh_calls)


def test_user_at_host_and_ssh_aliases_advertise_the_address_ssh_reaches(tmp_path,
                                                                         fake_ssh,
                                                                         monkeypatch):
    """A host written user@host, or as an ssh alias, gets DMLC_NODE_HOST (the address
    ps-lite's peers connect to) as ssh resolves it: the host without the user, the
    alias's HostName."""
    (tmp_path / 'hosts.txt').write_text('someone@127.0.0.1\nsecond:2222\n')
    (tmp_path / 'ssh_config').write_text('Host second\n    HostName localhost\n')
    monkeypatch.setenv('D2LBERT_SSH_OPTIONS', f'-F {tmp_path / "ssh_config"}')
    report = ('import os, sys; open(os.path.join(sys.argv[1], str(os.getpid())), "w")'
              '.write(os.environ["DMLC_ROLE"] + " " + os.environ["DMLC_NODE_HOST"])')
    code, err, _ = launch_here(str(tmp_path), [sys.executable, '-c', report, str(tmp_path)],
                               num_workers=2, hosts_file=str(tmp_path / 'hosts.txt'),
                               host_ip='127.0.0.1')
    assert code == 0, err
    placed = sorted((tmp_path / name).read_text() for name in os.listdir(tmp_path)
                    if name.isdigit())
    assert placed == ['scheduler 127.0.0.1', 'server 127.0.0.1', 'server localhost',
                      'worker 127.0.0.1', 'worker localhost']
    assert 'started worker 1 (pid ' in err and ') on second' in err


@pytest.mark.parametrize('entry', ['::1', '[::1]:22', 'six'])
def test_ipv6_hosts_are_refused_in_one_line(tmp_path, fake_ssh, monkeypatch, entry):
    """An IPv6 address, written or the HostName of an ssh alias, is refused before the
    job starts, naming the hosts file: ps-lite connects over IPv4 only."""
    hosts_file = tmp_path / 'hosts.txt'
    hosts_file.write_text(f'127.0.0.1\n{entry}\n')
    (tmp_path / 'ssh_config').write_text('Host six\n    HostName fe80::1\n')
    monkeypatch.setenv('D2LBERT_SSH_OPTIONS', f'-F {tmp_path / "ssh_config"}')
    with pytest.raises(HostsFileError) as refusal:
        launch_here(str(tmp_path), sleeper(tmp_path), num_workers=2,
                    hosts_file=str(hosts_file), host_ip='127.0.0.1')
    assert str(refusal.value).startswith(f'--hosts {hosts_file}') and 'IPv6' in str(
        refusal.value) and '\n' not in str(refusal.value)
    hosts_file.write_text('127.0.0.1\n')
    with pytest.raises(ValueError, match='^--host-ip fe80::1 is an IPv6 address; '):
        launch(sleeper(tmp_path), 2, hosts_file=str(hosts_file), host_ip='fe80::1')

def test_an_unreachable_host_stops_the_job_before_it_starts(tmp_path, fake_ssh):
    """Every host is checked first: one that ssh can't reach is named in one line,
    with ssh's reason, and no process is started."""
    (tmp_path / 'hosts.txt').write_text('127.0.0.1\nunreachable.invalid\n')
    code, err, seconds = launch_here(str(tmp_path), sleeper(tmp_path), num_workers=2,
                                     hosts_file=str(tmp_path / 'hosts.txt'),
                                     host_ip='127.0.0.1')
    assert code == 255 and seconds < BOUND, err
    assert err == ('d2lbert launch: cannot reach host unreachable.invalid by ssh: ssh: Could '
                   'not resolve hostname; the job did not start\n')


def test_a_host_without_this_python_stops_the_job_before_it_starts(tmp_path, fake_ssh):
    (tmp_path / 'hosts.txt').write_text('127.0.0.1\nbare.invalid\n')
    code, err, _ = launch_here(str(tmp_path), sleeper(tmp_path), num_workers=2,
                               hosts_file=str(tmp_path / 'hosts.txt'), host_ip='127.0.0.1')
    assert code == 255 and err == (
        f'd2lbert launch: host bare.invalid has no folder {os.getcwd()} or no '
        f'{sys.executable}: every host needs this folder and this Python environment at '
        'the same paths (e.g. a shared file system); the job did not start\n')


def test_launching_on_hosts_without_ssh_is_one_line(tmp_path):
    """No ssh on the PATH: `d2lbert launch --hosts` says so in one line naming the flag,
    exit 2, and starts nothing."""
    (tmp_path / 'hosts.txt').write_text('127.0.0.1\n')
    done = subprocess.run(
        [sys.executable, '-m', 'd2lbert', 'launch', '-n', '1', '--hosts',
         str(tmp_path / 'hosts.txt'), '--host-ip', '127.0.0.1', '--', *sleeper(tmp_path)],
        capture_output=True, text=True, timeout=JOB_TIMEOUT,
        env=job_env(PATH=str(tmp_path / 'no-ssh-here')))
    assert done.returncode == 2 and done.stderr == (
        f'd2lbert launch: error: --hosts {tmp_path / "hosts.txt"}: the hosts are reached by '
        'ssh, and no ssh is installed here (none on the PATH)\n'), done.stderr
    assert_nothing_left(str(tmp_path))


def test_an_ssh_silent_on_its_configuration_is_one_line(tmp_path, monkeypatch):
    """An ssh whose `ssh -G` (the address of a host) does not answer in time: one line
    naming the hosts file and the host, and no process started."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'ssh').write_text('#!/bin/bash\n'  # answers the check, hangs on -G
                                 'for arg in "$@"; do [ "$arg" = -G ] && exec sleep 60; done\n'
                                 'exit 0\n')
    (bin_dir / 'ssh').chmod(0o755)
    monkeypatch.setenv('PATH', f'{bin_dir}:{os.environ["PATH"]}')
    monkeypatch.setattr('d2lbert.launch.hosts.REACH_TIMEOUT', 1)
    (tmp_path / 'hosts.txt').write_text('127.0.0.1\n')
    with pytest.raises(HostsFileError) as refusal:
        launch_here(str(tmp_path), sleeper(tmp_path), num_workers=1,
                    hosts_file=str(tmp_path / 'hosts.txt'), host_ip='127.0.0.1')
    assert str(refusal.value) == (f'--hosts {tmp_path / "hosts.txt"}: ssh -G 127.0.0.1 gave '
                                  'no answer in 1 s')


@pytest.mark.parametrize('launcher_goes', ['silent', 'away'])
def test_a_tethered_process_stops_when_the_launcher_goes_silent_or_away(tmp_path,
                                                                       launcher_goes):
    """tether.py (what runs a process on another host) stops its command when no byte
    came on its input for the given seconds (a cut link), or at once when the input
    ends (the launcher stopped ssh)."""
    from d2lbert.launch.job import TETHER
    tether = subprocess.Popen([sys.executable, '-I', TETHER, '2', *sleeper(tmp_path)],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=job_env(DMLC_ROLE='server'))
    try:
        for _ in range(3):  # heartbeats keep it running
            time.sleep(1)
            tether.stdin.write('.')
            tether.stdin.flush()
        tic = time.monotonic()
        assert tether.poll() is None and len(processes_with(str(tmp_path))) == 2
        if launcher_goes == 'away':
            tether.stdin.close()
        assert tether.wait(10) == 1
        seconds = time.monotonic() - tic
        assert_nothing_left(str(tmp_path))
    finally:
        tether.kill()
        kill_processes_with(str(tmp_path))
    err = tether.stderr.read()
    if launcher_goes == 'silent':
        assert 2 <= seconds < 4 and err == ('d2lbert launch: no word from the launcher for '
                                            f'2 s; stopping {sys.executable}\n'), err
    else:
        assert seconds < 1 and err == ''


def test_a_command_missing_on_a_host_is_one_line(tmp_path):
    from d2lbert.launch.job import TETHER
    done = subprocess.run([sys.executable, '-I', TETHER, '2', 'no-such-program', '--flag'],
                          input='', capture_output=True, text=True, timeout=60,
                          env=job_env(DMLC_NODE_HOST='10.0.0.2'))
    assert done.returncode == 127 and done.stderr == (
        'd2lbert launch: cannot run no-such-program on 10.0.0.2: No such file or directory\n')


# ---------------------------------------------------------------- real jobs

def pretrain_command(out, config, *extra):
    """This file as `d2lbert pretrain` with the tests' tiny settings."""
    return [sys.executable, THIS_FILE, 'pretrain', '--config', config, *TRAINING,
            '--out', out, *extra]


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """A 2-worker, 1-server job of STEPS steps, and one process reading both workers'
    batches (--accumulate 2); dropout 0."""
    folder = tmp_path_factory.mktemp('runs')
    config = str(folder / 'tiny.json')
    with open(config, 'w') as f:
        json.dump(TINY_CONFIG, f)
    job, one = str(folder / 'job'), str(folder / 'one')
    code, err, _ = launch_here(str(folder), pretrain_command(job, config, '--kvstore',
                                                             'dist_sync'),
                               num_workers=2, num_servers=1)
    assert code == 0, err
    try:
        subprocess.run(pretrain_command(one, config, '--accumulate', '2'), check=True,
                       capture_output=True, timeout=JOB_TIMEOUT, env=job_env())
    finally:
        kill_processes_with(str(folder))
    return {'folder': folder, 'config': config, 'job': job, 'one': one}


def test_two_workers_end_with_the_parameters_of_one_process(runs):
    """Both workers hold bit-identical parameters, within 1e-5 of one process trained on
    the combined batches; the losses logged by the first worker are that process's."""
    worker_0 = load_params(os.path.join(runs['job'], 'worker-0.params'))
    worker_1 = load_params(os.path.join(runs['job'], 'worker-1.params'))
    one = load_params(os.path.join(runs['one'], 'worker-0.params'))
    for name, value in one.items():
        onp.testing.assert_array_equal(worker_0[name], worker_1[name])
        onp.testing.assert_allclose(worker_0[name], value, rtol=0, atol=1e-5)
    job_records, one_records = train_records(runs['job']), train_records(runs['one'])
    assert [r['step'] for r in job_records] == list(range(1, STEPS + 1))
    for mine, reference in zip(job_records, one_records):
        for key in ('mlm_loss', 'nsp_loss', 'mlm_accuracy', 'nsp_accuracy', 'lr'):
            assert mine[key] == pytest.approx(reference[key], abs=1e-5), (key, mine['step'])
    assert job_records[-1]['mlm_loss'] < job_records[0]['mlm_loss'] - 0.05  # it trained
    assert sorted(os.listdir(runs['job'])) == ['checkpoints', 'config.json', 'loss.png',
                                               'metrics.jsonl', 'run.json', 'vocab.json',
                                               'worker-0.params', 'worker-1.params']


def test_horovod_job_equals_one_process(runs):
    """The same 2-worker job under horovodrun (skipped where Horovod isn't built). Horovod
    is not imported here: loaded in this process, it would crash d2lbert's kernels."""
    if importlib.util.find_spec('horovod') is None or shutil.which('horovodrun') is None:
        pytest.skip('Horovod is not installed (.ci/run builds it: see the README)')
    out, marker = str(runs['folder'] / 'horovod'), str(runs['folder'])
    try:
        done = subprocess.run(
            ['horovodrun', '-np', '2', '-H', 'localhost:2',
             *pretrain_command(out, runs['config'], '--kvstore', 'horovod')],
            capture_output=True, text=True, timeout=JOB_TIMEOUT, env=job_env())
        assert_nothing_left(marker)
    finally:
        kill_processes_with(marker)
    assert done.returncode == 0, done.stderr[-3000:]
    worker_0 = load_params(os.path.join(out, 'worker-0.params'))
    worker_1 = load_params(os.path.join(out, 'worker-1.params'))
    one = load_params(os.path.join(runs['one'], 'worker-0.params'))
    for name, value in one.items():
        onp.testing.assert_array_equal(worker_0[name], worker_1[name])
        onp.testing.assert_allclose(worker_0[name], value, rtol=0, atol=1e-5)
    assert [r['step'] for r in train_records(out)] == list(range(1, STEPS + 1))


def assert_resume_logs_the_uninterrupted_losses(marker, command, out, uninterrupted):
    """The 2-worker job `command` (writing `out`), run again with --resume, ends well and
    logs the losses of the uninterrupted job that wrote the folder `uninterrupted`."""
    code, err, _ = launch_here(marker, [*command, '--resume'], num_workers=2)
    assert code == 0, err
    resumed, reference_records = train_records(out), train_records(uninterrupted)
    assert [r['step'] for r in resumed] == list(range(1, STEPS + 1))
    for mine, reference in zip(resumed, reference_records):
        assert (mine['mlm_loss'], mine['nsp_loss']) == pytest.approx(
            (reference['mlm_loss'], reference['nsp_loss']), abs=1e-6), mine['step']


def test_killed_worker_stops_the_job_and_resume_continues_it(runs, monkeypatch):
    """A worker SIGKILLed at step 7 ends the job within the bound, with one message naming
    it; the job resumed from the step-5 checkpoint logs the uninterrupted job's losses."""
    out, marker = str(runs['folder'] / 'killed'), str(runs['folder'])
    death = str(runs['folder'] / 'death.txt')
    command = pretrain_command(out, runs['config'], '--kvstore', 'dist_sync')
    with monkeypatch.context() as patch:
        patch.setenv('DIE_AT_STEP', '7')
        patch.setenv('DEATH_FILE', death)
        code, err, _ = launch_here(marker, command, num_workers=2)
    ended = time.time()
    with open(death) as f:
        pid, died = f.read().split()
    assert code == 128 + signal.SIGKILL, err
    failures = re.findall(r'worker \d \(pid (\d+) on 127.0.0.1\) was killed by SIGKILL '
                          r'\(exit code 137\); stopping the job', err)
    assert failures == [pid], err
    assert ended - float(died) < BOUND
    assert os.listdir(os.path.join(out, 'checkpoints')) == ['step-000005']

    assert_resume_logs_the_uninterrupted_losses(marker, command, out, runs['job'])


def test_a_worker_failing_with_an_error_stops_the_job(runs, monkeypatch):
    """A worker that fails with an error at step 3 (not a kill) exits at once, which
    stops the job, naming it: MXNet's kvstore would have it wait at exit for the other
    workers, which wait for it."""
    out, marker = str(runs['folder'] / 'failed'), str(runs['folder'])
    monkeypatch.setenv('FAIL_AT_STEP', '3')
    code, err, seconds = launch_here(marker, pretrain_command(
        out, runs['config'], '--kvstore', 'dist_sync'), timeout=2 * BOUND, num_workers=2)
    assert code == 2 and seconds < BOUND, err  # the command's code for a RunError
    assert re.findall(r'worker \d \(pid \d+ on 127.0.0.1\) exited with code 2; stopping '
                      r'the job', err), err


def test_a_resume_before_the_first_checkpoint_starts_over_on_every_worker(runs,
                                                                         monkeypatch):
    """A job killed at step 3, before its first checkpoint, then --resume: every worker
    starts over, as one process does, and the job logs the uninterrupted job's losses."""
    out, marker = str(runs['folder'] / 'early'), str(runs['folder'])
    command = pretrain_command(out, runs['config'], '--kvstore', 'dist_sync')
    with monkeypatch.context() as patch:
        patch.setenv('DIE_AT_STEP', '3')
        patch.setenv('DEATH_FILE', str(runs['folder'] / 'early-death.txt'))
        code, err, _ = launch_here(marker, command, num_workers=2)
    assert code == 128 + signal.SIGKILL and not os.path.exists(
        os.path.join(out, 'checkpoints', 'step-000005')), err
    assert_resume_logs_the_uninterrupted_losses(marker, command, out, runs['job'])


def test_workers_with_caches_apart_train_with_one_vocabulary(tmp_path, monkeypatch):
    """Each worker with a D2LBERT_HOME of its own, worker 1's WordPiece trainer learning
    another vocabulary than worker 0's: both train with worker 0's, the one the run
    saves."""
    config, out, homes = tmp_path / 'tiny.json', tmp_path / 'run', tmp_path / 'homes'
    config.write_text(json.dumps(TINY_CONFIG))
    for rank in ('0', '1'):
        (homes / rank).mkdir(parents=True)
    monkeypatch.setenv('HOMES', str(homes))
    code, err, _ = launch_here(str(tmp_path), pretrain_command(
        str(out), str(config), '--kvstore', 'dist_sync', '--vocab', 'wordpiece',
        '--vocab-size', '150', '--steps', '2'), num_workers=2)
    assert code == 0, err
    saved = read_wordpiece(str(out)).fingerprint()
    assert [(homes / rank / 'vocab.fingerprint').read_text() for rank in ('0', '1')] == [
        saved, saved]


# ---------------------------------------------------------------- the test worker

def run_test_worker(argv):
    """`d2lbert ARGV`, then save this worker's parameters to OUT/worker-RANK.params;
    with DIE_AT_STEP set, the worker of rank 1 SIGKILLs itself at that step (FAIL_AT_STEP:
    raises a RunError there); with HOMES set, see `homes_apart`."""
    module = importlib.import_module('d2lbert.pretraining.pretrain')  # (the package's
    # `pretrain` is the function)
    seen = {}
    train_loop, seed_step = module._train_loop, module.seed_step

    def capturing_train_loop(*args, **kwargs):
        given = inspect.signature(train_loop).bind(*args, **kwargs).arguments
        seen['net'], seen['worker'] = given['net'], given['worker']
        seen['vocab'] = given['vocab']
        return train_loop(*args, **kwargs)

    def seed_step_or_die(seed, step, worker=0):
        if step == int(os.environ.get('DIE_AT_STEP', 0)) and worker == 1:
            with open(os.environ['DEATH_FILE'], 'w') as f:
                f.write(f'{os.getpid()} {time.time()}')
            os.kill(os.getpid(), signal.SIGKILL)
        if step == int(os.environ.get('FAIL_AT_STEP', 0)) and worker == 1:
            raise RunError(f'FAIL_AT_STEP {step}')
        seed_step(seed, step, worker)

    module._train_loop, module.seed_step = capturing_train_loop, seed_step_or_die
    if os.environ.get('HOMES'):
        homes_apart(module)
    code = main(argv)
    if code == 0:
        out = argv[argv.index('--out') + 1]
        seen['net'].save_parameters(os.path.join(out, f'worker-{seen["worker"].rank}.params'))
    if code == 0 and os.environ.get('HOMES'):
        with open(os.path.join(os.environ['D2LBERT_HOME'], 'vocab.fingerprint'), 'w') as f:
            f.write(seen['vocab'].fingerprint())
    return code


def homes_apart(module):
    """Each worker's D2LBERT_HOME is HOMES/RANK (caches not shared), and the WordPiece
    trainer of rank 1 learns another vocabulary (its pieces in reverse order) than rank
    0's, as Hugging Face's trainer, not deterministic, may."""
    from d2lbert.data import loader
    from d2lbert.data.wordpiece import WordPieceVocab
    join_job, train_wordpiece = module.join_job, loader.train_wordpiece

    def reversed_wordpiece(*args, **kwargs):
        vocab = train_wordpiece(*args, **kwargs)
        reserved, pieces = vocab.reserved_tokens, vocab.idx_to_token[vocab.num_reserved:]
        return WordPieceVocab([*reserved, *reversed(pieces)], vocab.lowercase)

    def join_job_apart(kvstore):
        worker = join_job(kvstore)
        os.environ['D2LBERT_HOME'] = os.path.join(os.environ['HOMES'], str(worker.rank))
        if worker.rank == 1:
            loader.train_wordpiece = reversed_wordpiece
        return worker

    module.join_job = join_job_apart


if __name__ == '__main__':
    sys.exit(run_test_worker(sys.argv[1:]))
