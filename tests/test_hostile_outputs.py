"""The writing side of issue 32, "Nothing lost under hostile input": one regression test
per fault found then (the issue's item number in each test's comment), each of which
failed on the code before the fix. Path spellings that reach a folder by a link, a
command writing over its input, a run folder replaced under a running command, files
replaced without --overwrite, a full disk (a small tmpfs mounted here when the tests run
as root), temporary folders a kill leaves, SIGTERM, private file modes."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from test_outputs import (IS_ROOT, QUICK, one_line_error, run_main, snapshot,  # noqa: F401
                          workspace)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_PRETRAIN = ['--data', 'bundled', '--steps', '2', '--batch-size', '4', '--max-len',
                 '32', '--log-every', '1', '--eval-every', '0', '--no-progress']


def victim_folder(tmp_path):
    """A folder of the user's, with a file that must survive every command."""
    victim = tmp_path / 'victim' / 'dir'
    victim.mkdir(parents=True)
    (victim / 'notes.txt').write_text('my notes\n')
    return victim


def tiny_config(tmp_path):
    path = tmp_path / 'tiny.json'
    path.write_text(json.dumps({'num_hiddens': 16, 'ffn_num_hiddens': 32, 'num_heads': 2,
                                'num_layers': 1, 'max_len': 64, 'vocab_size': 10}))
    return str(path)


def writing_command(command, workspace, out, tmp_path):
    if command == 'pretrain':
        return ['pretrain', *TINY_PRETRAIN, '--config', tiny_config(tmp_path), '--out', out]
    if command == 'finetune':
        return ['finetune', *QUICK, '--model', workspace['model'], '--data',
                workspace['train'], '--dev', workspace['dev'], '--out', out]
    return ['convert', '--to-hf', workspace['run'], '--out', out]


# 1. A link spelled with a trailing slash (or followed by '..') is a link all the same.

@pytest.mark.parametrize('spelling', ['lnk/', 'lnk//', 'lnk/.', 'lnk/../dir'])
@pytest.mark.parametrize('command', ['pretrain', 'finetune', 'convert'])
def test_a_link_to_a_folder_is_refused_however_spelled(command, spelling, workspace,
                                                       tmp_path, capsys, monkeypatch):
    victim = victim_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    os.symlink(victim, 'lnk')
    args = writing_command(command, workspace, spelling, tmp_path) + ['--overwrite']
    code, _, err = run_main(args, capsys)
    assert 'symbolic link' in one_line_error(code, err)
    assert snapshot(str(victim)) == {'notes.txt': b'my notes\n'}
    assert sorted(os.listdir(victim.parent)) == ['dir']


def test_squad_predict_never_writes_through_a_link(tmp_path, capsys, monkeypatch):
    victim = victim_folder(tmp_path)
    os.symlink(victim, tmp_path / 'lnk')
    code, _, err = run_squad_predict(tmp_path, str(tmp_path / 'lnk') + '/', capsys,
                                     monkeypatch)
    assert 'symbolic link' in one_line_error(code, err)
    assert snapshot(str(victim)) == {'notes.txt': b'my notes\n'}


# 2. Every output is compared with every input.

def test_bench_json_never_writes_over_its_corpus(tmp_path, capsys, monkeypatch):
    import d2lbert.bench as bench
    import d2lbert.bench.report as report
    corpus = tmp_path / 'wiki.valid.tokens'
    corpus.write_text(' = Title = \n some words of the corpus .\n')
    monkeypatch.setattr(bench, 'run_benchmarks', lambda options, log: {})
    monkeypatch.setattr(report, 'format_report', lambda results: 'report')
    monkeypatch.setattr(report, 'markdown_snippet', lambda results: 'snippet')
    for json_path in (corpus, tmp_path / '.' / 'wiki.valid.tokens'):
        code, _, err = run_main(['bench', '--quick', '--wikitext', corpus, '--json',
                                 json_path], capsys)
        assert '--wikitext' in one_line_error(code, err)
        assert corpus.read_text() == ' = Title = \n some words of the corpus .\n'


def test_a_hard_link_to_an_input_is_the_input(workspace, tmp_path, capsys):
    os.link(workspace['dev'], tmp_path / 'dev-copy.jsonl')
    before = snapshot(workspace['dev'])
    code, _, err = run_main(['predict', '--model', workspace['run'], '--data',
                             workspace['dev'], '--out', tmp_path / 'dev-copy.jsonl',
                             '--overwrite'], capsys)
    assert '--data' in one_line_error(code, err)
    assert snapshot(workspace['dev']) == before


# 3. convert takes the run lock, and checks it again when it puts its folder in place.

def test_convert_never_replaces_a_folder_a_run_is_writing(workspace, tmp_path, capsys):
    run = tmp_path / 'run'
    run.mkdir()
    (run / 'run.json').write_text('{"command": "pretrain"}\n')
    holder = subprocess.Popen(['sleep', '60'])
    try:
        (run / '.lock').write_text(f'{holder.pid}\n')
        before = snapshot(str(run))
        code, _, err = run_main(['convert', '--to-hf', workspace['run'], '--out', run,
                                 '--overwrite'], capsys)
        assert f'process {holder.pid}' in one_line_error(code, err)
        assert snapshot(str(run)) == before
    finally:
        holder.kill()
        holder.wait()


def test_convert_checks_its_lock_again_before_the_swap(workspace, tmp_path, capsys,
                                                       monkeypatch):
    """A second convert into the same new --out waits for no one: the first one's lock
    is taken from it while it writes (as a racing process would); it then refuses to
    put its folder in place."""
    import d2lbert.interop.convert as convert
    to_huggingface = convert.to_huggingface
    out = tmp_path / 'hf'

    def racing(*args):
        result = to_huggingface(*args)
        (out / '.lock').write_text('1\n')  # another live process (init) holds it now
        (out / 'theirs.txt').write_text('the other process\n')
        return result
    monkeypatch.setattr(convert, 'to_huggingface', racing)
    code, _, err = run_main(['convert', '--to-hf', workspace['run'], '--out', out], capsys)
    one_line_error(code, err)
    assert (out / 'theirs.txt').read_text() == 'the other process\n'
    assert [name for name in os.listdir(tmp_path) if name.startswith('.tmp')] == []


# 6. predict and encode never replace a file without --overwrite; SQuAD predict never
#    writes into a folder that holds files.

@pytest.mark.parametrize('command', ['predict', 'encode'])
def test_an_existing_output_file_needs_overwrite(command, workspace, tmp_path, capsys):
    existing = tmp_path / ('out.jsonl' if command == 'predict' else 'out.npy')
    existing.write_text('mine\n')
    args = (['predict', '--model', workspace['run'], '--data', workspace['dev'], '--out',
             existing] if command == 'predict'
            else ['encode', '--model', workspace['model'], '--save', existing, 'a word'])
    code, _, err = run_main(args, capsys)
    assert '--overwrite' in one_line_error(code, err)
    assert existing.read_text() == 'mine\n'
    code, _, err = run_main(args + ['--overwrite'], capsys)
    assert code == 0, err
    assert existing.read_bytes() != b'mine\n'


def run_squad_predict(tmp_path, out, capsys, monkeypatch, *extra):
    """`d2lbert predict --out OUT` as a question-answering model would run it (its
    prediction stubbed: this is about where it writes)."""
    import d2lbert.finetuning.qa_predict as qa_predict
    import d2lbert.finetuning.task_model as task_model
    from d2lbert.finetuning.qa_predictions import write_prediction_files

    class Info:
        head, task = 'question_answering', 'squad2'

    def predict_squad(model, data, folder, batch_size, **precision):
        files = write_prediction_files(folder, {'q1': 'theirs'}, {'q1': 0.0})
        return {'examples': 1, 'files': files, 'scores': None}
    monkeypatch.setattr(task_model, 'load_task_info', lambda folder: Info())
    monkeypatch.setattr(qa_predict, 'predict_squad', predict_squad)
    model = tmp_path / 'model'
    model.mkdir(exist_ok=True)
    data = tmp_path / 'dev.json'
    data.write_text('{}')
    return run_main(['predict', '--model', model, '--data', data, '--out', out, *extra],
                    capsys)


def test_squad_predict_into_a_folder_that_holds_files(tmp_path, capsys, monkeypatch):
    out = tmp_path / 'answers'
    out.mkdir()
    (out / 'predictions.json').write_text('{"q1": "mine"}')
    code, _, err = run_squad_predict(tmp_path, out, capsys, monkeypatch)
    assert '--overwrite' in one_line_error(code, err)
    assert snapshot(str(out)) == {'predictions.json': b'{"q1": "mine"}'}
    code, _, err = run_squad_predict(tmp_path, out, capsys, monkeypatch, '--overwrite')
    assert code == 0, err
    assert sorted(os.listdir(out)) == ['null_odds.json', 'predictions.json']
    assert json.loads((out / 'predictions.json').read_text()) == {'q1': 'theirs'}


# 7. A full disk wherever MXNet or safetensors writes: one line, exit code 3, the last
#    good state kept, nothing partial left.

@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 48 KiB tmpfs (room for a run's small files, not for a model)."""
    if not IS_ROOT:
        pytest.skip('mounting a tmpfs needs root')
    folder = tmp_path / 'disk'
    folder.mkdir()
    if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=48k', 'tmpfs', str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip('cannot mount a tmpfs here')
    yield folder
    subprocess.run(['umount', '-l', str(folder)], check=True)


def hf_folder(workspace, tmp_path, capsys):
    """The pretrained tiny model as a Hugging Face folder."""
    out = tmp_path / 'hf'
    if not out.exists():
        code, _, err = run_main(['convert', '--to-hf', workspace['model'], '--out', out],
                                capsys)
        assert code == 0, err
    return out


@pytest.mark.parametrize('command', ['finetune', 'convert --to-hf', 'convert --from-hf'])
def test_a_full_disk_is_one_line_and_exit_code_3(command, workspace, small_disk, tmp_path,
                                                 capsys):
    out = small_disk / 'out'
    if command == 'finetune':
        args = writing_command('finetune', workspace, out, tmp_path)
    elif command == 'convert --to-hf':
        args = ['convert', '--to-hf', workspace['run'], '--out', out]
    else:
        args = ['convert', '--from-hf', hf_folder(workspace, tmp_path, capsys), '--out', out]
    code, _, err = run_main(args, capsys)
    assert 'No space left on device' in one_line_error(code, err, expected_code=3)
    left = [name for _, folders, files in os.walk(small_disk) for name in folders + files]
    if command == 'finetune':  # the run's folder, no model, no temporary folder
        assert 'model' not in left and not any(name.startswith('.tmp') for name in left)
    else:
        assert left == []


# 9. Temporary folders are removed on failure and swept by the next command after a kill.

def test_leftover_temporary_folders_are_swept(workspace, tmp_path, capsys):
    dead = subprocess.Popen(['true'])
    dead.wait()
    for name in (f'.tmp-d2lbert-{dead.pid}-abc', '.tmp-d2lbert-k3j_x9q2'):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'model.safetensors').write_bytes(b'\0' * 1000)
    alive = tmp_path / f'.tmp-d2lbert-{os.getppid()}-xyz'
    alive.mkdir()  # a running process's: kept
    code, _, err = run_main(['convert', '--to-hf', workspace['run'], '--out',
                             tmp_path / 'hf'], capsys)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == sorted(['hf', alive.name])


def test_a_failed_convert_leaves_nothing(workspace, tmp_path, capsys, monkeypatch):
    import d2lbert.interop.convert as convert

    def failing(net, config, vocab, folder, labels):
        (open(os.path.join(folder, 'model.safetensors'), 'wb')).close()
        raise OSError(28, 'No space left on device', os.path.join(folder, 'config.json'))
    monkeypatch.setattr(convert, 'to_huggingface', failing)
    code, _, err = run_main(['convert', '--to-hf', workspace['run'], '--out',
                             tmp_path / 'hf'], capsys)
    one_line_error(code, err, expected_code=3)
    assert os.listdir(tmp_path) == []


# 11. SIGTERM (and Ctrl-C): one line, exit code 128 + the signal, the lock released, the
#     temporaries removed.

def test_a_run_that_exits_amid_a_model_write_leaves_no_temporaries(tmp_path):
    """A signal's exception can land between the creation of a temporary model folder
    and the `try` that would remove it (the race behind a rare failure of the test
    below): the run's process removes its folder's temporaries when it exits."""
    out = tmp_path / 'run'
    script = f"""
import os, sys, types
from d2lbert.run.folder import prepare_out_dir
options = types.SimpleNamespace(out={str(out)!r}, resume=False, overwrite=False)
out, _ = prepare_out_dir(options, 'finetune', 'x', {{}}, ())
os.makedirs(os.path.join(out, '.tmp-model-abc'))
os.makedirs(os.path.join(out, 'checkpoints', '.tmp-step-000004-abc'))
sys.exit(143)
"""
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert done.returncode == 143, done.stderr
    assert sorted(os.listdir(out)) == ['checkpoints']
    assert os.listdir(out / 'checkpoints') == []


@pytest.fixture
def ctrl_c_not_ignored():
    """SIGINT raising KeyboardInterrupt, as in a terminal, for the test (a background
    job, as pytest may be, ignores it)."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')
@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
def test_a_signal_whose_exception_a_finalizer_swallowed_still_stops(sig, ctrl_c_not_ignored):
    """Python prints and ignores an exception raised in a finalizer (`__del__`, as when
    an MXNet array is freed): a signal arriving there must still stop the command, at
    the loop's next step (`raise_if_stopped`) or at the end of the block."""
    from d2lbert.run.signals import Stopped, raise_if_stopped, stop_on_sigterm

    class SignalledWhileFreed:
        def __del__(self):
            os.kill(os.getpid(), sig)  # its handler runs here; the exception is lost

    went_on = []
    with pytest.raises(Stopped) as stopped:
        with stop_on_sigterm():
            freed = SignalledWhileFreed()
            del freed
            went_on.append('after the lost exception')
            raise_if_stopped()
            went_on.append('after raise_if_stopped')
    assert stopped.value.signum == sig
    assert went_on == ['after the lost exception']
    with pytest.raises(Stopped):  # no step checked: the block's end does
        with stop_on_sigterm():
            freed = SignalledWhileFreed()
            del freed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_lost_stop_is_not_printed_but_other_lost_errors_are(monkeypatch):
    """The lost `Stopped` is raised again, so Python's "Exception ignored in ..."
    traceback for it would only clutter the command's one line; any other exception a
    finalizer loses still reaches the hook that was there before."""
    from d2lbert.run.signals import Stopped, stop_on_sigterm
    reported = []
    monkeypatch.setattr(sys, 'unraisablehook', lambda unraisable: reported.append(
        type(unraisable.exc_value).__name__))

    class LosesAnError:
        def __del__(self):
            raise ValueError('lost')

    class SignalledWhileFreed:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Stopped):
        with stop_on_sigterm():
            freed = SignalledWhileFreed()
            del freed
            lost = LosesAnError()
            del lost
    assert reported == ['ValueError']


@pytest.mark.parametrize('ending', [True, False])
def test_after_a_stop_that_ends_the_command_finalizers_say_nothing(monkeypatch, ending):
    """A signal can interrupt the making of an MXNet array, whose finalizer then fails
    (AttributeError: no 'handle') as the process frees it, after the command's one line.
    Where the block ends the command (then_ignore), that is not printed; elsewhere the
    hook that was there before gets it."""
    from d2lbert.run.signals import Stopped, stop_on_sigterm
    reported = []
    monkeypatch.setattr(sys, 'unraisablehook', lambda unraisable: reported.append(
        type(unraisable.exc_value).__name__))

    class HalfMade:
        def __del__(self):
            return self.handle

    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(Stopped):
            with stop_on_sigterm(then_ignore=ending):
                os.kill(os.getpid(), signal.SIGTERM)
        half_made = HalfMade()
        del half_made
    finally:
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGINT, handlers[1])
    assert reported == ([] if ending else ['AttributeError'])


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_run_with_one_line_and_no_lock(sig, workspace, tmp_path):
    out = tmp_path / 'run'
    args = writing_command('finetune', workspace, str(out), tmp_path)
    args[args.index('--epochs') + 1] = '1000'
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, OMP_NUM_THREADS='1')
    # as a terminal starts it: a shell starts a background job (`pytest ... &`) with
    # SIGINT ignored, which its children inherit and Python then leaves ignored
    process = subprocess.Popen([sys.executable, '-m', 'd2lbert', *args], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while not (out / 'metrics.jsonl').exists() and time.time() < deadline:
            time.sleep(0.2)
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + sig, err
    assert len(err.strip().splitlines()) == 1 and sig.name in err, err
    assert not (out / '.lock').exists()
    assert not [name for name in os.listdir(out) if name.startswith('.tmp')]


# 14. Outputs readable by others under the usual umask.

def test_outputs_have_the_modes_of_the_umask(workspace, tmp_path, capsys):
    previous = os.umask(0o022)
    try:
        hf, run = tmp_path / 'hf', tmp_path / 'run'
        assert run_main(['convert', '--to-hf', workspace['run'], '--out', hf], capsys)[0] == 0
        assert run_main(writing_command('finetune', workspace, run, tmp_path), capsys)[0] == 0
        predictions = tmp_path / 'p.jsonl'
        assert run_main(['predict', '--model', run, '--data', workspace['dev'], '--out',
                         predictions], capsys)[0] == 0
    finally:
        os.umask(previous)
    checkpoint = os.path.join(run, 'checkpoints', os.listdir(run / 'checkpoints')[0])
    for folder in (hf, run / 'model', checkpoint):
        assert oct(os.stat(folder).st_mode & 0o777) == oct(0o755), folder
    for path in (hf / 'model.safetensors', run / 'model' / 'model.params',
                 os.path.join(checkpoint, 'model.params'), predictions):
        assert oct(os.stat(path).st_mode & 0o777) == oct(0o644), path


# The book's tools check their outputs as the commands do.

def load_tool(name):
    """A script of chapter_bert/: the book's build (tools/) or a study (studies/)."""
    import importlib.util
    folder = 'tools' if name == 'build_book' else 'studies'
    path = os.path.join(REPO_ROOT, 'chapter_bert', folder, f'{name}.py')
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refused_by_a_study(capsys, pattern, call):
    """call() exits as a study tool refuses bad input: exit code 2, one line on stderr
    matching pattern (`runner.fail`)."""
    with pytest.raises(SystemExit) as exit_info:
        call()
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count('\n') == 1 and re.search(pattern, error), error


def test_the_study_never_writes_its_results_over_the_corpus(tmp_path, monkeypatch, capsys):
    study = load_tool('pretrain_study')
    corpus = tmp_path / 'wiki.valid.tokens'
    corpus.write_text(' = Title = \n words .\n')
    monkeypatch.setattr(study, 'planned_runs', lambda parts, wikitext_dir: [])
    monkeypatch.setattr(study, 'machine', lambda: 'cpu')
    refused_by_a_study(capsys, '--wikitext', lambda: study.main(
        ['--only', 'default', '--wikitext', str(corpus), '--out', str(corpus)]))
    assert corpus.read_text() == ' = Title = \n words .\n'


@pytest.mark.parametrize('tool', ['pretrain_study', 'transfer_study'])
@pytest.mark.parametrize('spelling', ['flnk', 'dangling', '/dev/null', 'the corpus',
                                      'a folder'])
def test_a_study_never_writes_its_results_through_a_link(tool, spelling, tmp_path, capsys):
    """Refused before any run (none is started: the model --model does not exist)."""
    study = load_tool(tool)
    corpus = tmp_path / 'wiki.valid.tokens'
    corpus.write_text(' = Title = \n words .\n')
    victim = victim_folder(tmp_path) / 'notes.txt'
    os.symlink(victim, tmp_path / 'flnk')
    os.symlink(tmp_path / 'none', tmp_path / 'dangling')
    out = {'the corpus': str(corpus), '/dev/null': '/dev/null',
           'a folder': str(victim.parent)}.get(spelling, str(tmp_path / spelling))
    only = 'none' if tool == 'pretrain_study' else 'sst2'
    refused_by_a_study(capsys, f'^{tool}: --out', lambda: study.main(
        ['--only', only, '--wikitext', str(corpus), '--out', out,
         *(['--model', str(tmp_path / 'model')] if tool == 'transfer_study' else [])]))
    assert victim.read_text() == 'my notes\n'
    assert not os.path.lexists(tmp_path / 'none')
    assert corpus.read_text() == ' = Title = \n words .\n'


def test_the_transfer_studys_kept_model_is_written_whole(tmp_path, capsys):
    """--keep-model: a folder of the user's holding files is refused; what a killed run
    left (its lock, its temporary folder beside) does not stop the rerun, whose model
    then fills the folder and whose temporary folder is gone."""
    from d2lbert.run.files import OUR_TEMPORARIES
    study = load_tool('transfer_study')
    victim = victim_folder(tmp_path)

    def keep_the_users_folder():
        with study.model_folder(str(victim), str(tmp_path), {}):
            pass
    refused_by_a_study(capsys, '^transfer_study: --keep-model', keep_the_users_folder)
    assert (victim / 'notes.txt').read_text() == 'my notes\n'
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          capture_output=True, text=True).stdout.strip()
    kept = tmp_path / 'kept'
    kept.mkdir()
    (kept / '.lock').write_text(dead + '\n')
    (tmp_path / f'{OUR_TEMPORARIES}{dead}-x').mkdir()
    with study.model_folder(str(kept), str(tmp_path), {}) as written:
        with open(os.path.join(written, 'model.params'), 'w') as f:
            f.write('weights')
    assert (kept / 'model.params').read_text() == 'weights'
    assert not [name for name in os.listdir(tmp_path) if name.startswith(OUR_TEMPORARIES)]


@pytest.mark.parametrize('out', ['lnk/../dir', 'CHAPTERS/_build'])
def test_the_book_is_never_built_into_a_users_folder(out, tmp_path, monkeypatch):
    book = load_tool('build_book')
    victim = victim_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    os.symlink(victim, 'lnk')
    built = []
    monkeypatch.setattr(book, 'build', lambda *args: built.append(args))
    with pytest.raises(SystemExit, match='symbolic link|the chapters'):
        book.main(['--out', out.replace('CHAPTERS', book.CHAPTER_DIR)])
    assert built == [] and snapshot(str(victim)) == {'notes.txt': b'my notes\n'}
