"""One core under both faces (issue 58, item 1): each hostile input goes through the
command and through the library call that share its code, and both keep the same
promises. A model folder is written by `d2lbert convert --from-hf` and by
`save_pretrained` (both `run.folder.write_model_folder`): never over a file, the current
folder or one holding it, through a link however spelled, or into a folder a live
process holds; whole or not at all. A model is read by `--model` and by
`load_pretrained`: a truncated parameter file or an absurd config is one clear error and
nothing written. Texts are encoded by `encode --data` and by `encode_texts` (both
`interop.sentence_vectors.text_vectors`): one row per text, blank texts included."""
import json
import os
import shutil
import subprocess
import sys

import numpy as onp
import pytest

import d2lbert
from conftest import REPO_ROOT, make_model, run_main
from test_inputs import one_line_error
from test_outputs import snapshot

FACES = ('command', 'library')
VOCAB_WORDS = [f'w{i}' for i in range(59)]  # with the 5 special tokens: the 64 ids


@pytest.fixture(scope='module')
def models(tmp_path_factory):
    """A tiny model saved by `save_pretrained`, its Hugging Face folder (what `convert
    --from-hf` reads) and a second, different model to write with."""
    from d2lbert.interop.convert import convert_to_hf
    root = tmp_path_factory.mktemp('faces')
    vocab = d2lbert.Vocab({word: 1 for word in VOCAB_WORDS})
    folder = d2lbert.save_pretrained(make_model('original'), vocab, str(root / 'model'))
    convert_to_hf(folder, str(root / 'hf'))
    return {'vocab': vocab, 'folder': folder, 'hf': str(root / 'hf'),
            'other': make_model('original', seed=1)}


def write_model(face, models, out, overwrite, capsys):
    """Write a model folder at `out` by one face: (written, the error message). The
    command's refusal is one line, exit code 2, naming --out; the library's a
    ValueError naming its argument `folder`."""
    if face == 'command':
        code, _, err = run_main(['convert', '--from-hf', models['hf'], '--out', out,
                                 *(['--overwrite'] if overwrite else [])], capsys)
        if code == 0:
            return True, ''
        message = one_line_error(code, err)
        assert f'--out {out}' in message or f'--out {out.rstrip("/")}' in message
        return False, message
    try:
        d2lbert.save_pretrained(models['other'], models['vocab'], str(out),
                                overwrite=overwrite)
    except ValueError as error:
        message = str(error)
        assert f'folder {out}' in message or f'folder {out.rstrip("/")}' in message
        assert '\n' not in message
        return False, str(error)
    return True, ''


def listing(folder):
    return sorted(os.listdir(folder))


@pytest.mark.parametrize('overwrite', [False, True])
@pytest.mark.parametrize('face', FACES)
def test_an_existing_file_is_refused_and_kept(face, overwrite, models, tmp_path, capsys,
                                             monkeypatch):
    """`save_pretrained(net, vocab, 'model.params')`, the habit of `save_parameters`,
    swapped the file for a folder and deleted it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'model.params').write_bytes(b'the user\'s parameters')
    written, message = write_model(face, models, 'model.params', overwrite, capsys)
    assert not written and 'is a file' in message
    assert (tmp_path / 'model.params').read_bytes() == b'the user\'s parameters'
    assert listing(tmp_path) == ['model.params']


@pytest.mark.parametrize('spelling', ['.', './', 'ABSOLUTE', '..'])
@pytest.mark.parametrize('face', FACES)
def test_the_working_folder_and_its_ancestors_are_refused(face, spelling, models,
                                                          tmp_path, capsys, monkeypatch):
    """With overwrite, `save_pretrained` deleted the files of the folder it ran in."""
    work = tmp_path / 'work'
    work.mkdir()
    (work / 'notes.txt').write_text('mine\n')
    monkeypatch.chdir(work)
    out = str(work) if spelling == 'ABSOLUTE' else spelling
    written, message = write_model(face, models, out, True, capsys)
    assert not written and 'would delete the current folder' in message
    assert snapshot(str(tmp_path)) == {os.path.join('work', 'notes.txt'): b'mine\n'}


@pytest.mark.parametrize('face', FACES)
def test_an_empty_working_folder_is_not_swapped_away(face, models, tmp_path, capsys,
                                                     monkeypatch):
    """A folder is written beside and swapped in: the process's own folder would be
    replaced under it (and every relative path after it broken)."""
    work = tmp_path / 'work'
    work.mkdir()
    monkeypatch.chdir(work)
    written, message = write_model(face, models, '.', False, capsys)
    assert not written and 'current folder' in message
    assert os.getcwd() == str(work) and os.path.samefile('.', work)
    assert listing(tmp_path) == ['work'] and listing(work) == []


@pytest.mark.parametrize('spelling', ['lnk', 'lnk/', 'lnk//', 'lnk/.', 'dir/../lnk',
                                      'dangling', 'dangling/'])
@pytest.mark.parametrize('face', FACES)
def test_a_link_is_refused_however_spelled(face, spelling, models, tmp_path, capsys,
                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / 'dir'
    victim.mkdir()
    (victim / 'notes.txt').write_text('mine\n')
    os.symlink('dir', 'lnk')
    os.symlink('nowhere', 'dangling')
    written, message = write_model(face, models, spelling, True, capsys)
    assert not written and 'symbolic link' in message
    assert snapshot(str(victim)) == {'notes.txt': b'mine\n'}
    assert listing(tmp_path) == ['dangling', 'dir', 'lnk']
    assert os.readlink('lnk') == 'dir' and not os.path.exists('nowhere')


@pytest.mark.parametrize('face', FACES)
def test_a_device_is_refused(face, models, capsys):
    written, message = write_model(face, models, '/dev/null', True, capsys)
    assert not written and 'never writes under /dev' in message


@pytest.fixture
def live_run(tmp_path):
    """A run folder whose lock a live process holds, as `d2lbert pretrain` holds its
    --out (`run.folder.lock_folder`: an flock on OUT/.lock, which holds its id)."""
    run = tmp_path / 'run'
    run.mkdir()
    (run / 'run.json').write_text('{"command": "pretrain"}\n')
    holder = subprocess.Popen([sys.executable, '-c', (
        'import fcntl, os, sys\n'
        f'handle = os.open({str(run / ".lock")!r}, os.O_RDWR | os.O_CREAT)\n'
        'fcntl.flock(handle, fcntl.LOCK_EX)\n'
        'os.write(handle, f"{os.getpid()}\\n".encode())\n'
        'print("locked", flush=True)\n'
        'sys.stdin.read()\n')], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == 'locked\n'
    yield run, holder.pid
    holder.stdin.close()
    holder.wait(timeout=30)


@pytest.mark.parametrize('face', FACES)
def test_a_live_runs_folder_is_refused_naming_its_process(face, models, live_run, capsys):
    """With overwrite, `save_pretrained` replaced the folder of a running `pretrain`:
    its run.json was gone while it went on."""
    run, pid = live_run
    before = snapshot(str(run))
    written, message = write_model(face, models, str(run), True, capsys)
    assert not written and f'is being written by process {pid}' in message
    assert snapshot(str(run)) == before
    assert listing(run.parent) == ['run']


def outputs(net):
    """net's encodings of a few tokens (NumPy)."""
    from mxnet import np
    tokens = np.array([[2, 7, 9, 11, 3]], dtype='int32')
    return net(tokens, np.zeros_like(tokens), np.array([5], dtype='int32'))[0].asnumpy()


@pytest.mark.parametrize('face', FACES)
def test_overwrite_replaces_a_model_folder_whole(face, models, tmp_path, capsys):
    """What a previous save (or command) wrote is replaced whole: no stale file, and the
    folder loads as the new model."""
    out = tmp_path / 'model'
    before = make_model('original', seed=2)
    d2lbert.save_pretrained(before, models['vocab'], str(out))
    (out / 'task.json').write_text('{}')  # a stale file of the model before
    written, _ = write_model(face, models, str(out), True, capsys)
    assert written and 'task.json' not in listing(out) and '.lock' not in listing(out)
    assert listing(tmp_path) == ['model']
    new = d2lbert.load_pretrained(models['hf'])[0] if face == 'command' else models['other']
    saved, _ = d2lbert.load_pretrained(str(out))
    onp.testing.assert_array_equal(outputs(saved), outputs(new))
    assert onp.abs(outputs(saved) - outputs(before)).max() > 1e-3


def write_hf_folder(face, models, out, overwrite, capsys):
    """`d2lbert convert --to-hf` and `interop.convert_to_hf` (both
    `interop.convert.write_hf_folder`), as `write_model`."""
    if face == 'command':
        code, _, err = run_main(['convert', '--to-hf', models['folder'], '--out', out,
                                 *(['--overwrite'] if overwrite else [])], capsys)
        return code == 0, '' if code == 0 else one_line_error(code, err)
    from d2lbert.interop import convert_to_hf
    try:
        convert_to_hf(models['folder'], out, overwrite=overwrite)
    except ValueError as error:
        assert 'out_dir ' in str(error)
        return False, str(error)
    return True, ''


@pytest.mark.parametrize('face', FACES)
def test_a_hugging_face_folder_is_written_as_the_command_writes_it(face, models, tmp_path,
                                                                   live_run, capsys,
                                                                   monkeypatch):
    """`convert_to_hf`, the library face of `convert --to-hf`, wrote into any path."""
    run, pid = live_run
    work = tmp_path / 'work'
    work.mkdir()
    monkeypatch.chdir(work)
    (work / 'notes.txt').write_text('mine\n')
    os.symlink('notes.txt', 'lnk')
    before = snapshot(str(tmp_path))
    for out, named in (('notes.txt', 'is a file'), ('.', 'would delete the current folder'),
                       ('lnk/', 'symbolic link'), (str(run), f'process {pid}')):
        written, message = write_hf_folder(face, models, out, True, capsys)
        assert not written and named in message, message
    assert snapshot(str(tmp_path)) == before
    written, message = write_hf_folder(face, models, 'hf', False, capsys)
    assert written, message
    assert {'config.json', 'model.safetensors', 'vocab.txt'} <= set(listing(work / 'hf'))


def failing_write(folder, *args, **kwargs):
    """A write that fails halfway, as on a full disk."""
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        f.write('{"half": ')
    raise OSError(28, 'No space left on device', os.path.join(folder, 'model.params'))


@pytest.mark.parametrize('face', FACES)
def test_a_failed_write_keeps_the_old_folder_and_leaves_nothing(face, models, tmp_path,
                                                                capsys, monkeypatch):
    from d2lbert.run import checkpoint
    out = tmp_path / 'model'
    shutil.copytree(models['folder'], out)
    before = snapshot(str(out))
    monkeypatch.setattr(checkpoint, 'write_model_files', failing_write)
    if face == 'command':
        code, _, err = run_main(['convert', '--from-hf', models['hf'], '--out', out,
                                 '--overwrite'], capsys)
        assert 'No space left on device' in one_line_error_3(code, err)
    else:
        with pytest.raises(OSError, match='No space left on device'):
            d2lbert.save_pretrained(models['other'], models['vocab'], str(out),
                                    overwrite=True)
    assert snapshot(str(out)) == before and listing(tmp_path) == ['model']


def one_line_error_3(code, err):
    assert code == 3, err
    assert 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
    return err


KILLED_MID_WRITE = """
import os, sys
import d2lbert
from d2lbert.cli import main
from d2lbert.run import checkpoint

def killed(folder, *args, **kwargs):
    open(os.path.join(folder, 'config.json'), 'w').write('{"half": ')
    os._exit(137)  # SIGKILL's exit: nothing of Python's runs after it
checkpoint.write_model_files = killed
face, hf, out = sys.argv[1:]
if face == 'command':
    main(['convert', '--from-hf', hf, '--out', out])
else:
    net, vocab = d2lbert.load_pretrained(hf)
    d2lbert.save_pretrained(net, vocab, out)
"""


@pytest.mark.parametrize('face', FACES)
def test_a_kill_mid_write_leaves_nothing_that_blocks_the_rerun(face, models, tmp_path,
                                                               capsys):
    out = tmp_path / 'model'
    killed = subprocess.run([sys.executable, '-c', KILLED_MID_WRITE, face, models['hf'],
                             str(out)], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert killed.returncode == 137, killed.stderr
    assert not os.path.isfile(out / 'config.json')  # no model, half or whole
    written, message = write_model(face, models, str(out), False, capsys)
    assert written, message
    assert listing(tmp_path) == ['model']  # the killed write's temporary swept
    d2lbert.load_pretrained(str(out))


# Reading a model: `--model` of a command and `load_pretrained` alike.

def hostile_model(models, tmp_path, case):
    """A copy of the model folder with a truncated parameter file or an absurd config
    (with and without its manifest, which catches any change by itself)."""
    folder = tmp_path / case
    shutil.copytree(models['folder'], folder)
    name, _, value = case.partition('=')
    if name.startswith('truncated'):
        cut = folder / ('vocab.json' if name == 'truncated-vocab' else 'model.params')
        cut.write_bytes(cut.read_bytes()[:cut.stat().st_size // 2])
    else:
        config = json.loads((folder / 'config.json').read_text())
        config[name] = json.loads(value)
        (folder / 'config.json').write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize('manifest', [True, False])
@pytest.mark.parametrize('case', ['truncated', 'truncated-vocab', 'num_layers=-1',
                                  'num_layers=1000000000', 'vocab_size=-5',
                                  'vocab_size=1000000000000', 'num_heads=0',
                                  'num_hiddens="wide"', 'num_layers=5', 'vocab_size=10'])
@pytest.mark.parametrize('face', FACES)
def test_a_hostile_model_is_one_clear_error_and_nothing_written(face, case, manifest,
                                                                models, tmp_path, capsys,
                                                                monkeypatch):
    folder = hostile_model(models, tmp_path, case)
    if not manifest:
        os.remove(folder / 'manifest.json')
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'texts.txt').write_text('w1 w2\n')
    before = snapshot(str(tmp_path))
    named = 'config.json'  # what the manifest, or the config's check, finds wrong
    if case == 'truncated' or (case == 'num_layers=5' and not manifest):
        named = 'model.params'  # (5 layers is a config: the parameters do not fit it)
    if case == 'truncated-vocab' or (case == 'vocab_size=10' and not manifest):
        named = 'vocab.json'  # (64 tokens: ids past the 10 embeddings)
    if face == 'command':
        code, _, err = run_main(['encode', '--model', folder, '--data', 'texts.txt',
                                 '--out', 'vectors.npy'], capsys)
        message = one_line_error(code, err)
        assert f'--model {folder}' in message
    else:
        with pytest.raises(ValueError) as error:
            d2lbert.load_pretrained(str(folder))
        message = str(error.value)
        assert '\n' not in message
    assert os.path.join(str(folder), named) in message
    assert len(message.replace(str(folder), 'F')) < 250  # a line, not MXNet's list
    assert snapshot(str(tmp_path)) == before


# Encoding texts: `encode --data` and `encode_texts`, one row per text.

TEXTS = ['w1 w2 w3', '', 'w4', '   ', 'w5 w6 w7 w8 w9', '\t']


def command_vectors(models, data, capsys, *extra):
    code, out, err = run_main(['encode', '--model', models['folder'], '--data', data,
                               '--out', 'vectors.npy', '--precision', 'fp32',
                               '--batch-size', '2', *extra], capsys)
    assert code == 0, err
    return onp.load('vectors.npy'), out


def cls_sep_vector(models):
    """An independent reference for a blank text: the mean of the encodings of `<cls>`
    and `<sep>`, computed by the model's forward call and NumPy."""
    from mxnet import np
    net, vocab = d2lbert.load_pretrained(models['folder'])
    tokens = np.array([[vocab.cls_id, vocab.sep_id]], dtype='int32')
    encoded, _, _ = net(tokens, np.zeros_like(tokens), np.array([2], dtype='int32'))
    return encoded.asnumpy()[0].mean(axis=0)


@pytest.mark.parametrize('layout', ['lines', 'tsv', 'csv', 'jsonl'])
def test_one_row_per_text_in_both_faces(layout, models, tmp_path, capsys, monkeypatch):
    """A file of 6 texts, 3 of them blank, gave 3 vectors (exit 0), and row i was no
    longer text i; `encode_texts` gave '' a vector."""
    monkeypatch.chdir(tmp_path)
    if layout == 'lines':  # the last line without its line end
        (tmp_path / 'texts.txt').write_text('\n'.join(TEXTS))
        data = 'texts.txt'
    elif layout == 'jsonl':
        values = [None if text == '' else text for text in TEXTS]  # null: no text
        (tmp_path / 'texts.jsonl').write_text(''.join(
            json.dumps({'text': value, 'label': 0}) + '\n' for value in values))
        data = 'texts.jsonl'
    else:
        separator = '\t' if layout == 'tsv' else ','
        rows = [f'{text.strip()}{separator}0\n' for text in TEXTS]
        (tmp_path / f'texts.{layout}').write_text(f'text{separator}label\n' + ''.join(rows))
        data = f'texts.{layout}'
    ours, printed = command_vectors(models, data, capsys)
    assert f'wrote {len(TEXTS)} vectors' in printed
    net, vocab = d2lbert.load_pretrained(models['folder'])
    library = d2lbert.encode_texts(net, vocab, TEXTS, batch_size=2)
    assert ours.shape == library.shape == (len(TEXTS), 32)
    onp.testing.assert_allclose(ours, library, atol=1e-6)
    for row, text in enumerate(TEXTS):
        alone = d2lbert.encode_texts(net, vocab, [text])
        onp.testing.assert_allclose(ours[row], alone[0], atol=1e-5)
    blank = cls_sep_vector(models)
    for row in (1, 3, 5):
        onp.testing.assert_allclose(ours[row], blank, atol=1e-5)
    assert onp.abs(ours[0] - blank).max() > 1e-3  # a text's vector is its own


def test_a_file_of_blank_lines_only_gives_a_row_each(models, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'blank.txt').write_text('\n\n\n')
    ours, _ = command_vectors(models, 'blank.txt', capsys)
    net, vocab = d2lbert.load_pretrained(models['folder'])
    onp.testing.assert_allclose(ours, d2lbert.encode_texts(net, vocab, ['', '', '']),
                                atol=1e-6)


def test_an_empty_file_is_refused(models, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'empty.txt').write_text('')
    code, _, err = run_main(['encode', '--model', models['folder'], '--data', 'empty.txt',
                             '--out', 'vectors.npy'], capsys)
    assert '--data' in one_line_error(code, err) and listing(tmp_path) == ['empty.txt']


@pytest.mark.parametrize('texts, named', [
    ('one sentence', "got one str ('one sentence')"), (b'bytes', 'got one bytes'),
    (3, 'got int'), (['a text', None], 'texts[1] is None'),
    (('a', 'b', 7), 'texts[2] is 7')])
def test_encode_texts_refuses_what_is_not_a_list_of_texts(texts, named, models):
    """A str was read as its characters: 'one sentence' gave 12 rows."""
    net, vocab = d2lbert.load_pretrained(models['folder'])
    with pytest.raises(TypeError, match='texts') as error:
        d2lbert.encode_texts(net, vocab, texts)
    assert named in str(error.value)


def test_encode_texts_takes_any_iterable_of_texts(models):
    net, vocab = d2lbert.load_pretrained(models['folder'])
    listed = d2lbert.encode_texts(net, vocab, ['w1', 'w2 w3'])
    streamed = d2lbert.encode_texts(net, vocab, (text for text in ['w1', 'w2 w3']))
    onp.testing.assert_array_equal(listed, streamed)
    assert d2lbert.encode_texts(net, vocab, []).shape == (0, 32)


def test_save_pretrained_takes_a_path_and_refuses_what_is_none(models, tmp_path):
    """A pathlib.Path is a folder's path, as for `open`; '' or a number is a TypeError
    naming `folder`, nothing written."""
    folder = d2lbert.save_pretrained(models['other'], models['vocab'], tmp_path / 'model')
    assert folder == str(tmp_path / 'model') and 'config.json' in listing(folder)
    for wrong in ('', 3, None):
        with pytest.raises(TypeError, match='folder must be'):
            d2lbert.save_pretrained(models['other'], models['vocab'], wrong)
    assert listing(tmp_path) == ['model']
