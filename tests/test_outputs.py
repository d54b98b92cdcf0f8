"""What every writing command guarantees (`d2lbert.run`): nothing of the user's is ever
destroyed, a run folder is used by one process at a time, a kill leaves a model, and a
bad input or a fault is one line with exit code 2 (3 during a run), nothing partial left.

One test per guarantee of the issue "Outputs a user can trust", plus the faults found
trying the commands as a careful user would, as regression tests. A tiny model (conftest)
fine-tuned for a few steps keeps them fast."""
import errno
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

import d2lbert
from d2lbert.cli import main
from d2lbert.data import Vocab
from d2lbert.data.tasks.generated import next_sentence_task
from d2lbert.run import checkpoint as ckpt
from d2lbert.run.errors import RunError
from d2lbert.run.files import check_apart, remove_leftovers, write_file_atomically
from d2lbert.run.folder import LOCK_FILE, lock_folder
from d2lbert.util.files import numbered_folder

from conftest import run_main

IS_ROOT = hasattr(os, 'geteuid') and os.geteuid() == 0
QUICK = ['--task', 'csv', '--epochs', '1', '--batch-size', '16', '--max-len', '32',
         '--log-every', '1', '--no-progress']



def one_line_error(code, err, expected_code=2):
    """The command failed with one line (no traceback) and the expected exit code."""
    assert code == expected_code, err
    assert 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
    return err


def save_tiny_original_model(folder, vocab):
    """A tiny model folder of Google's architecture (which Hugging Face's BERT is)."""
    import mxnet as mx
    config = d2lbert.BERTConfig.original(len(vocab), 'book', num_hiddens=32,
                                         ffn_num_hiddens=64, num_heads=2, num_layers=1,
                                         max_len=64)
    net = d2lbert.BERTModel.from_config(config)
    mx.random.seed(0)
    net.initialize(mx.init.Normal(0.02))
    os.makedirs(folder)
    config.to_json_file(os.path.join(folder, 'config.json'))
    vocab.save(os.path.join(folder, 'vocab.json'))
    net.save_parameters(os.path.join(folder, 'model.params'))
    return str(folder)


def write_pairs(examples, path):
    with open(path, 'w', encoding='utf-8') as f:
        for e in examples:
            f.write(json.dumps({'text': e.text, 'text_pair': e.text_pair,
                                'label': e.label}) + '\n')
    return str(path)


def snapshot(path):
    """{relative path: bytes} of every file under a folder (or the file itself)."""
    if os.path.isfile(path):
        with open(path, 'rb') as f:
            return {'': f.read()}
    found = {}
    for folder, _, files in os.walk(path):
        for name in files:
            full = os.path.join(folder, name)
            with open(full, 'rb') as f:
                found[os.path.relpath(full, path)] = f.read()
    return found


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    """A tiny pretrained model, a pair task (train, dev) and a run fine-tuned on it."""
    import collections
    from d2lbert.data.tasks import word_tokenize
    folder = tmp_path_factory.mktemp('outputs')
    train_task, dev_task = (next_sentence_task(split, n, seed=0)
                            for split, n in (('train', 48), ('dev', 16)))
    counts = collections.Counter(
        token for e in train_task.examples + dev_task.examples
        for token in word_tokenize(e.text) + word_tokenize(e.text_pair))
    model = save_tiny_original_model(folder / 'pretrained', Vocab(counts, min_freq=1))
    train = write_pairs(train_task.examples, folder / 'train.jsonl')
    dev = write_pairs(dev_task.examples, folder / 'dev.jsonl')
    run = str(folder / 'run')
    code = main(['finetune', *QUICK, '--eval-every', '1', '--model', model, '--data', train,
                 '--dev', dev, '--out', run])
    assert code == 0
    return {'model': model, 'train': train, 'dev': dev, 'run': run, 'root': folder}


def finetune_args(workspace, out, *extra):
    return ['finetune', *QUICK, '--model', workspace['model'], '--data', workspace['train'],
            '--dev', workspace['dev'], '--out', out, *extra]


def copy_run(workspace, tmp_path):
    copy = str(tmp_path / 'run')
    shutil.copytree(workspace['run'], copy, symlinks=True)
    return copy


# 1. Never replaces or writes through anything that is not a regular file or folder.

def special_file(kind, path):
    """Make a symbolic link, socket or device node (the null device's numbers) at path."""
    if kind == 'symlink':
        target = path.parent / 'target.txt'
        target.write_text('keep me\n')
        os.symlink(target, path)
    elif kind == 'socket':
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        if not IS_ROOT:
            pytest.skip('mknod needs root')
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return os.lstat(path)


@pytest.mark.parametrize('kind', ['symlink', 'socket', 'device'])
def test_predict_never_writes_through_a_special_file(kind, workspace, tmp_path, capsys):
    """Issue bullet 1: `predict --out fakenull` (mknod c 1 3) replaced the device."""
    out = tmp_path / 'fakenull'
    before = special_file(kind, out)
    code, _, err = run_main(['predict', '--model', workspace['run'], '--data',
                             workspace['dev'], '--out', out], capsys)
    assert 'not a regular file or folder' in one_line_error(code, err)
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    if kind == 'symlink':
        assert (tmp_path / 'target.txt').read_text() == 'keep me\n'


def test_nothing_is_written_under_dev(workspace, capsys):
    code, _, err = run_main(['predict', '--model', workspace['run'], '--data',
                             workspace['dev'], '--out', '/dev/null'], capsys)
    assert 'never writes under /dev' in one_line_error(code, err)
    assert stat.S_ISCHR(os.stat('/dev/null').st_mode)


@pytest.mark.parametrize('command', ['finetune', 'convert'])
def test_a_symlinked_output_folder_is_refused(command, workspace, tmp_path, capsys):
    (tmp_path / 'real').mkdir()
    os.symlink(tmp_path / 'real', tmp_path / 'link')
    args = (finetune_args(workspace, tmp_path / 'link') if command == 'finetune' else
            ['convert', '--to-hf', workspace['run'], '--out', tmp_path / 'link'])
    code, _, err = run_main(args, capsys)
    assert 'is a symbolic link' in one_line_error(code, err)
    assert os.listdir(tmp_path / 'real') == [] and os.path.islink(tmp_path / 'link')


# 2. An output equal to or inside an input is refused.

def test_predict_refuses_to_write_over_its_input(workspace, tmp_path, capsys):
    """Issue bullet 1: `--out` equal to `--data` overwrote the input."""
    data = shutil.copy(workspace['dev'], tmp_path / 'dev.jsonl')
    before = snapshot(data)
    code, _, err = run_main(['predict', '--model', workspace['run'], '--data', data,
                             '--out', data], capsys)
    assert 'never writes over its input' in one_line_error(code, err)
    assert snapshot(data) == before


def test_an_input_inside_a_folder_output_is_refused(tmp_path):
    """Issue bullet 1, SQuAD: `--data DIR/predictions.json --out DIR`."""
    (tmp_path / 'predictions.json').write_text('{}')
    with pytest.raises(RunError, match='is inside --out'):
        check_apart('--out', str(tmp_path), {'--data': str(tmp_path / 'predictions.json')})


@pytest.mark.parametrize('command', ['finetune', 'convert'])
def test_an_output_inside_the_model_is_refused(command, workspace, tmp_path, capsys):
    run = copy_run(workspace, tmp_path)
    before = snapshot(run)
    args = (finetune_args(workspace, os.path.join(workspace['model'], 'ft'))
            if command == 'finetune' else
            ['convert', '--to-hf', run, '--out', os.path.join(run, 'hf')])
    code, _, err = run_main(args, capsys)
    assert 'is inside the input' in one_line_error(code, err)
    assert snapshot(run) == before and not os.path.exists(os.path.join(workspace['model'],
                                                                       'ft'))


# 3. A folder output must be new or empty; --overwrite replaces it whole; --resume
#    continues only a run of the same command.

def test_a_run_folder_that_holds_files_is_refused(workspace, tmp_path, capsys):
    out = tmp_path / 'mine'
    out.mkdir()
    (out / 'notes.txt').write_text('mine\n')
    code, _, err = run_main(finetune_args(workspace, out), capsys)
    assert 'already holds files' in one_line_error(code, err)
    assert os.listdir(out) == ['notes.txt']


def test_overwrite_replaces_a_run_folder_whole(workspace, tmp_path, capsys):
    out = tmp_path / 'old'
    out.mkdir()
    (out / 'stale.txt').write_text('old\n')
    code, _, err = run_main(finetune_args(workspace, out, '--overwrite'), capsys)
    assert code == 0, err
    assert not (out / 'stale.txt').exists() and (out / 'model' / 'model.params').exists()
    assert not (out / LOCK_FILE).exists() or int((out / LOCK_FILE).read_text()) == os.getpid()


@pytest.mark.parametrize('command', ['finetune', 'convert'])
def test_overwrite_never_deletes_the_current_folder(command, workspace, tmp_path, capsys,
                                                    monkeypatch):
    """`--out . --overwrite` (or a folder holding the current one) is refused."""
    (tmp_path / 'work').mkdir()
    (tmp_path / 'work' / 'notes.txt').write_text('mine\n')
    monkeypatch.chdir(tmp_path / 'work')
    args = (finetune_args(workspace, tmp_path, '--overwrite') if command == 'finetune' else
            ['convert', '--to-hf', workspace['model'], '--out', '.', '--overwrite'])
    code, _, err = run_main(args, capsys)
    assert 'would delete the current folder' in one_line_error(code, err)
    assert (tmp_path / 'work' / 'notes.txt').read_text() == 'mine\n'


def test_convert_refuses_a_folder_that_holds_a_model(workspace, tmp_path, capsys):
    """Issue bullet 2: `--from-hf` into a fine-tuned model/ replaced its weights."""
    hf = tmp_path / 'hf'
    assert run_main(['convert', '--to-hf', workspace['model'], '--out', hf], capsys)[0] == 0
    run = copy_run(workspace, tmp_path)
    before = snapshot(os.path.join(run, 'model'))
    code, _, err = run_main(['convert', '--from-hf', hf, '--out',
                             os.path.join(run, 'model')], capsys)
    assert 'already holds files' in one_line_error(code, err)
    assert snapshot(os.path.join(run, 'model')) == before


def test_convert_overwrite_leaves_no_stale_files(workspace, tmp_path, capsys):
    """Issue bullet 2: `--to-hf` into another model's folder left its tokenizer.json,
    modules.json and 1_Pooling/ beside the new weights."""
    out = tmp_path / 'hf'
    (out / '1_Pooling').mkdir(parents=True)
    for name in ('tokenizer.json', 'modules.json', 'model.safetensors'):
        (out / name).write_text('{}')
    code, _, err = run_main(['convert', '--to-hf', workspace['model'], '--out', out,
                             '--overwrite'], capsys)
    assert code == 0, err
    names = set(os.listdir(out))
    assert not names & {'tokenizer.json', 'modules.json', '1_Pooling'}
    assert {'config.json', 'model.safetensors', 'vocab.txt'} <= names


def test_resume_continues_only_a_run_of_the_same_command(workspace, tmp_path):
    from d2lbert.pretraining.pretrain import PretrainOptions, pretrain
    run = copy_run(workspace, tmp_path)
    with pytest.raises(RunError, match='is a `d2lbert finetune` run, not a `d2lbert '
                                       'pretrain` one'):
        pretrain(PretrainOptions(out=run, resume=True, steps=2, progress=False))


# 4. A run folder is locked while a process writes it.

def test_a_second_process_is_refused_naming_the_holder(workspace, tmp_path, capsys):
    """Issue bullet 4: two runs on the same --out both succeeded and mixed their files."""
    run = copy_run(workspace, tmp_path)
    holder = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        with open(os.path.join(run, LOCK_FILE), 'w') as f:
            f.write(f'{holder.pid}\n')
        before = snapshot(run)
        code, _, err = run_main(finetune_args(workspace, run, '--resume'), capsys)
        assert f'being written by process {holder.pid}' in one_line_error(code, err)
        assert snapshot(run) == before
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    (tmp_path / LOCK_FILE).write_text(f'{dead.pid}\n')
    lock_folder(str(tmp_path))
    assert int((tmp_path / LOCK_FILE).read_text()) == os.getpid()


# 5. After SIGKILL at any instant, OUT/model is the previous or the new model; the next
#    start removes the temporary folders.

REPLACER = """
import os, sys, tempfile
from d2lbert.run.files import replace_folder
out, version = sys.argv[1], 0
while True:
    version += 1
    tmp = tempfile.mkdtemp(prefix='.tmp-model-', dir=out)
    for name in ('a.bin', 'b.bin'):
        with open(os.path.join(tmp, name), 'w') as f:
            f.write(str(version % 10) * 10000)
    replace_folder(tmp, os.path.join(out, 'model'))
    if version == 1:
        print('ready', flush=True)
"""


def read_model(model):
    """(a.bin, b.bin) of the folder `model` is at this instant (None if it was swapped
    away and deleted while being read); fails the test if no folder is there."""
    try:
        handle = os.open(model, os.O_RDONLY)
    except FileNotFoundError:
        pytest.fail('model/ was absent')
    try:
        return tuple(open(name, opener=lambda path, flags: os.open(path, flags,
                                                                  dir_fd=handle)).read()
                     for name in ('a.bin', 'b.bin'))
    except FileNotFoundError:
        return None
    finally:
        os.close(handle)


def test_model_folder_survives_sigkill_at_any_instant(tmp_path):
    """A process replaces OUT/model over and over; this one watches that a complete
    model/ is always there (a.bin and b.bin of one version) and kills it at random
    instants; afterwards `remove_leftovers` leaves model/ only."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for delay in (0.4, 0.8):
        process = subprocess.Popen([sys.executable, '-c', REPLACER, str(tmp_path)],
                                   stdout=subprocess.PIPE, env=env, text=True)
        assert process.stdout.readline().strip() == 'ready'
        deadline, reads = time.time() + delay, 0
        while time.time() < deadline:
            files = read_model(str(tmp_path / 'model'))
            if files is not None:
                assert files[0] == files[1] and len(files[0]) == 10000, 'model/ incomplete'
                reads += 1
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert reads > 0 and (tmp_path / 'model').is_dir()
    remove_leftovers(str(tmp_path))
    assert os.listdir(tmp_path) == ['model']


def test_the_next_start_removes_leftover_temporary_folders(workspace, tmp_path, capsys):
    """Issue bullet 5: .tmp-step-*, .tmp-model-*, .old-model-* folders left by kills
    were never removed."""
    run = copy_run(workspace, tmp_path)
    leftovers = [os.path.join(run, '.tmp-model-x1'), os.path.join(run, '.old-model-x2'),
                 os.path.join(run, ckpt.CHECKPOINT_DIR, '.tmp-step-000009-x3')]
    for folder in leftovers:
        os.makedirs(folder)
        with open(os.path.join(folder, 'model.params'), 'w') as f:
            f.write('partial')
    code, _, err = run_main(finetune_args(workspace, run, '--resume'), capsys)
    assert code == 0, err
    assert not any(os.path.exists(folder) for folder in leftovers)
    assert os.path.isfile(os.path.join(run, 'model', 'manifest.json'))


def test_a_model_set_aside_by_a_kill_is_put_back(tmp_path):
    """A kill between the two renames of a system without an atomic swap left the old
    model aside and no model/: the next start puts it back."""
    (tmp_path / '.old-model-x' / 'model').mkdir(parents=True)
    (tmp_path / '.old-model-x' / 'model' / 'model.params').write_text('old')
    remove_leftovers(str(tmp_path))
    assert os.listdir(tmp_path) == ['model']
    assert (tmp_path / 'model' / 'model.params').read_text() == 'old'


# 6. --resume refuses any option that would change the run's trajectory.

@pytest.mark.parametrize('flag, value', [('--batch-size', '8'), ('--data', 'dev'),
                                         ('--max-len', '24'), ('--seed', '3')])
def test_resume_refuses_a_different_trajectory(flag, value, workspace, tmp_path, capsys):
    """Issue bullet 6: --resume accepted a different --data or --batch-size."""
    run = copy_run(workspace, tmp_path)
    before = snapshot(run)
    args = finetune_args(workspace, run, '--resume')
    if flag in args:
        args[args.index(flag) + 1] = workspace[value] if value in workspace else value
    else:
        args += [flag, value]
    code, _, err = run_main(args, capsys)
    assert f'--resume: {flag}' in one_line_error(code, err)
    assert snapshot(run) == before


# 7. convert --to-hf RUN exports what predict --model RUN uses.

def test_convert_exports_the_best_model_naming_step_and_architecture(workspace, tmp_path,
                                                                     capsys):
    """Issue bullet 3: it exported the newest checkpoint and said BertForPreTraining."""
    from safetensors.numpy import load_file
    from d2lbert.run.models import model_folder
    run = workspace['run']
    assert model_folder(run) == os.path.join(run, 'model')
    code, out, err = run_main(['convert', '--to-hf', run, '--out', tmp_path / 'hf'], capsys)
    assert code == 0, err
    with open(os.path.join(ckpt.list_checkpoints(run)[-1], 'state.json')) as f:
        best_step = json.load(f)['best']['step']
    assert f'from {os.path.join(run, "model")} (step {best_step})' in out
    assert 'transformers.BertForSequenceClassification' in out
    import mxnet as mx
    best = mx.npx.load(os.path.join(run, 'model', 'model.params'))
    exported = load_file(str(tmp_path / 'hf' / 'model.safetensors'))
    weights = [v for k, v in best.items() if k.endswith('output.weight')
               or k.endswith('dense.weight') and v.shape[0] == 2]
    assert any(w.shape == v.shape and (w.asnumpy() == v).all()
               for w in weights for v in exported.values()), 'not the best model\'s head'


# 8. Disk full, corrupt inputs, oversized fields, absurd configs: one line, exit 2
#    (3 during a run), nothing partial left.

def test_a_full_disk_leaves_no_partial_file(tmp_path):
    target = tmp_path / 'predictions.jsonl'
    target.write_text('old\n')

    def fill(f):
        f.write('half')
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with pytest.raises(RunError, match='No space left on device'):
        write_file_atomically('--out', str(target), fill)
    assert os.listdir(tmp_path) == ['predictions.jsonl'] and target.read_text() == 'old\n'


@pytest.mark.parametrize('writing', ['model files', 'metrics'])
def test_a_full_disk_during_a_run_is_exit_code_3(writing, workspace, tmp_path, capsys,
                                                 monkeypatch):
    import d2lbert.run.checkpoint as checkpoint
    from d2lbert.run.metrics import MetricsLog

    def full(folder, *args, **kwargs):
        with open(os.path.join(folder, 'model.params'), 'w') as f:
            f.write('half')
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def full_log(log, record):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), 'metrics.jsonl')
    if writing == 'metrics':
        monkeypatch.setattr(MetricsLog, 'write', full_log)
    else:
        monkeypatch.setattr(checkpoint, 'write_model_files', full)
    out = tmp_path / 'run'
    code, _, err = run_main(finetune_args(workspace, out), capsys)
    assert 'No space left on device' in one_line_error(code, err, expected_code=3)
    leftovers = [name for _, folders, files in os.walk(out) for name in folders + files
                 if name.startswith('.tmp-')]
    assert leftovers == [] and not (out / 'model').exists()


def test_predict_into_a_folder_it_cannot_write(workspace, capsys):
    code, _, err = run_main(['predict', '--model', workspace['run'], '--data',
                             workspace['dev'], '--out', '/proc/self/p.jsonl'], capsys)
    assert 'cannot write' in one_line_error(code, err)


@pytest.mark.parametrize('case', ['truncated safetensors', 'corrupt params', 'huge config'])
def test_corrupt_models_are_one_line(case, workspace, tmp_path, capsys):
    """Issue bullet 7: a truncated model.safetensors, a corrupt model.params in a folder
    without a manifest, a config with 38M hidden units."""
    folder = tmp_path / 'm'
    if case == 'truncated safetensors':
        run_main(['convert', '--to-hf', workspace['model'], '--out', folder], capsys)
        path = folder / 'model.safetensors'
        os.truncate(path, os.path.getsize(path) // 2)
    else:
        shutil.copytree(workspace['model'], folder)
        if case == 'corrupt params':
            os.truncate(folder / 'model.params', os.path.getsize(folder / 'model.params') // 2)
        else:
            config = json.loads((folder / 'config.json').read_text())
            config['num_hiddens'] = 38_000_000
            (folder / 'config.json').write_text(json.dumps(config))
    code, _, err = run_main(['encode', '--model', folder, 'a river'], capsys)
    assert str(folder) in one_line_error(code, err)


@pytest.mark.parametrize('case, message', [
    ('oversized field', r'train\.csv.*line 2.*longer than'),
    ('no label column', r'train\.csv.*label'),
    ('non-string text', r'train\.jsonl, line 1.*text.*string'),
    ('one class', r'train\.jsonl.*only one label'),
    ('non-UTF-8', r'train\.csv.*UTF-8'),
])
def test_bad_training_files_are_one_line(case, message, workspace, tmp_path, capsys,
                                        monkeypatch):
    """Issue bullets 7 and 8 (a field over the limit: here 100,000 characters, in place
    of MAX_FIELD_CHARS, 2^30)."""
    import re
    from d2lbert.data.tasks import tables
    monkeypatch.setattr(tables, 'MAX_FIELD_CHARS', 100_000)
    if case in ('non-string text', 'one class'):
        train = tmp_path / 'train.jsonl'
        text = 17 if case == 'non-string text' else '"a river"'
        train.write_text(f'{{"text": {text}, "label": "yes"}}\n' * 20)
    else:
        train = tmp_path / 'train.csv'
        rows = {'oversized field': 'text,label\n' + 'x' * 200_000 + ',yes\n',
                'no label column': 'text,other\na river,yes\n',
                'non-UTF-8': 'text,label\n'}[case]
        train.write_bytes(rows.encode() + (b'caf\xe9,yes\n' if case == 'non-UTF-8' else b''))
    out = tmp_path / 'out'
    code, _, err = run_main(['finetune', *QUICK, '--model', workspace['model'], '--data',
                             train, '--out', out], capsys)
    assert re.search(message, one_line_error(code, err)), err
    assert not out.exists()


def test_duplicate_squad_ids_are_refused(tmp_path):
    """Issue bullet 8: duplicate SQuAD ids passed silently."""
    from d2lbert.data.squad import read_squad
    paragraph = {'context': 'a river', 'qas': [
        {'id': 'q1', 'question': 'what?', 'answers': [{'text': 'river', 'answer_start': 2}]},
        {'id': 'q1', 'question': 'which?', 'answers': [{'text': 'a', 'answer_start': 0}]}]}
    path = tmp_path / 'train.json'
    path.write_text(json.dumps({'version': 'v2.0', 'data': [
        {'title': 't', 'paragraphs': [paragraph]}]}))
    with pytest.raises(ValueError, match='q1'):
        read_squad(str(path))


def test_encode_names_the_file_it_saved(workspace, tmp_path, capsys):
    """Issue bullet 8: `encode --save vec` wrote vec.npy but said vec."""
    code, out, err = run_main(['encode', '--model', workspace['model'], 'a river', '--save',
                               tmp_path / 'vec'], capsys)
    assert code == 0, err
    assert f'to {tmp_path / "vec.npy"}' in out and (tmp_path / 'vec.npy').is_file()


def test_glue_task_names_in_any_case(workspace):
    """Issue bullet 8: `--task glue/MRPC` (GLUE's own folder name) was refused."""
    from d2lbert.finetuning.finetune import FinetuneOptions
    assert FinetuneOptions(task='glue/MRPC', model='m').task == 'glue/mrpc'


@pytest.mark.parametrize('allow_pickle', [False, True])
def test_pickles_are_refused_in_one_line(allow_pickle, workspace, tmp_path, capsys):
    """Issue bullets 7 and 8: the refusal named the Python argument (allow_pickle=True)
    on the command line; `--allow-pickle` on a pickle that torch.load(weights_only=True)
    rejects gave a traceback."""
    torch = pytest.importorskip('torch')
    import fractions
    hf = tmp_path / 'hf'
    assert run_main(['convert', '--to-hf', workspace['model'], '--out', hf], capsys)[0] == 0
    os.remove(hf / 'model.safetensors')
    torch.save({'not a tensor': fractions.Fraction(1, 3)}, hf / 'pytorch_model.bin')
    code, _, err = run_main(['convert', '--from-hf', hf, '--out', tmp_path / 'out',
                             *(['--allow-pickle'] if allow_pickle else [])], capsys)
    expected = 'weights_only=True' if allow_pickle else '--allow-pickle'
    assert expected in one_line_error(code, err)
    assert not (tmp_path / 'out').exists()


def test_a_numbered_folder_is_new_and_leaves_what_holds_the_earlier_numbers(tmp_path):
    """The chapters' run folders: runs/<name>-1, -2, ... made by this call, never an existing
    folder, file or link (the user's), and no underscore (a path ending in one breaks the
    book's reStructuredText)."""
    runs = tmp_path / 'runs'
    (runs / 'demo-1').mkdir(parents=True)
    (runs / 'demo-1' / 'notes.txt').write_text('kept')
    (runs / 'demo-2').write_text('a file of the user')
    os.symlink(str(tmp_path), str(runs / 'demo-3'))
    made = [numbered_folder(str(runs), 'demo') for _ in range(2)]
    assert [os.path.basename(path) for path in made] == ['demo-4', 'demo-5']
    assert all(os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path)
               for path in made)
    assert (runs / 'demo-1' / 'notes.txt').read_text() == 'kept'
    assert (runs / 'demo-2').read_text() == 'a file of the user'
    assert os.path.islink(runs / 'demo-3')
    assert numbered_folder(str(tmp_path / 'new' / 'runs'), 'demo').endswith('demo-1')
