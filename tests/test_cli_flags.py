"""Every flag of every command is checked before any work starts: a bad value gives one
message naming the flag and the value, exit code 2, no traceback, nothing written; the
Python API (`PretrainOptions`, `BenchOptions`) refuses it with the same message."""
import math
import os
import re
import subprocess
import sys

import pytest

from d2lbert.bench import BenchOptions
from d2lbert.cli import main
from d2lbert.finetuning.predict import PredictOptions
from d2lbert.interop.convert import ConvertOptions
from d2lbert.interop.encode import EncodeOptions, unknown_words_line
from d2lbert.finetuning.finetune import FinetuneOptions
from d2lbert.pretraining.pretrain import PretrainOptions, pretrain
from d2lbert.pretraining.fill_mask import FillMaskOptions

# (command line, the flag the message must name, the value it must show)
BAD_FLAGS = [
    *[(['pretrain', flag, value], flag, value) for flag, value in [
        ('--steps', '0'), ('--steps', '-1'), ('--steps', 'abc'), ('--steps', '1.5'),
        ('--lr', '-0.001'), ('--lr', '0'), ('--lr', 'nan'), ('--lr', 'inf'), ('--lr', 'abc'),
        ('--weight-decay', 'nan'), ('--weight-decay', '-0.1'), ('--weight-decay', 'inf'),
        ('--clip', '-1'), ('--clip', 'nan'), ('--clip', 'inf'),
        ('--warmup', '-5'), ('--keep', '0'), ('--keep', '-1'), ('--num-workers', '-1'),
        ('--min-freq', '0'), ('--accumulate', '0'), ('--accumulate', '-2'),
        ('--batch-size', '0'), ('--batch-size', '-16'),
        ('--max-len', '4'), ('--max-len', '0'), ('--max-len', '2000'),
        ('--eval-every', '-1'), ('--save-every', '-1'), ('--log-every', '0'),
        ('--log-every', '-1'),
        ('--seed', '-1'), ('--seed', str(2 ** 32)),
        ('--kvstore', 'bogus'), ('--kvstore', 'horovod'), ('--optimizer', 'sgd'),
        ('--preset', 'huge'), ('--gpus', 'a'), ('--gpus', '0,,1'), ('--gpus', '-1'),
        ('--data', ''), ('--config', ''), ('--out', ''),
    ]],
    (['pretrain', '--lr=-inf'], '--lr', '-inf'),  # '--lr -inf' would look like a flag
    (['encode', '--model', 'missing-run', 'the river'], '--model', 'missing-run'),
    (['encode', '--model', '.', ''], 'text', "''"),
    (['encode', '--model', '.', '||| it flows'], 'text', '||| it flows'),
    (['encode', '--model', '.', 'hi', '--save', 'missing/x.npy'], '--save', 'missing/x.npy'),
    (['encode', '--model', '.', 'hi', '--save', '.'], '--save', '.'),
    (['encode', '--model', '.', 'hi', '--save', ''], '--save', "''"),
    (['convert', '--from-hf', 'missing-hf', '--out', 'o'], '--from-hf', 'missing-hf'),
    (['convert', '--to-hf', 'missing-run', '--out', 'o'], '--to-hf', 'missing-run'),
    (['convert', '--to-hf', '.', '--out', ''], '--out', "''"),
    *[(['bench', flag, value], flag, value) for flag, value in [
        ('--steps', '0'), ('--steps', '-1'), ('--steps', 'abc'),
        ('--finetune-steps', '0'), ('--finetune-steps', 'many'),
        ('--rounds', '0'), ('--rounds', 'two'),
        ('--threads', '0'), ('--threads', '-1'), ('--threads', 'two'),
        ('--configs', 'huge'), ('--configs', ''), ('--configs', 'book,'),
        ('--only', 'foo'), ('--only', ''), ('--device', 'tpu'), ('--device', 'gpu:x'),
        ('--device', 'gpu:'), ('--device', 'gpu:0'), ('--wikitext', 'missing.tokens'),
        ('--json', 'missing/bench.json'), ('--json', '.'),
    ]],
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty current folder (the default --out is relative to it) and data cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'd2lbert-home'))
    return tmp_path


def run_main(args, capsys):
    """`d2lbert ARGS` in this process: (exit code, stderr)."""
    try:
        code = main(args)
    except SystemExit as exit:  # argparse's own errors (e.g. an int flag given 'abc')
        code = exit.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize('args, flag, value', BAD_FLAGS, ids=[' '.join(a) for a, _, _ in
                                                               BAD_FLAGS])
def test_bad_value_is_refused_before_any_work(args, flag, value, workdir, capsys):
    code, err = run_main(args, capsys)
    assert code == 2, err
    assert 'Traceback' not in err
    message = err.strip().splitlines()[-1]
    assert message.startswith(f'd2lbert {args[0]}: error:'), err
    assert flag in message and value in message, message
    assert os.listdir(workdir) == [], 'something was written'


def test_python_api_refuses_with_the_cli_message(workdir, capsys):
    """`pretrain(PretrainOptions(...))` and the command line share one check and one
    message, also when an option is changed after construction."""
    for field, flag, value in (('lr', '--lr', -0.001), ('steps', '--steps', 0),
                               ('weight_decay', '--weight-decay', math.nan),
                               ('kvstore', '--kvstore', 'bogus')):
        with pytest.raises(ValueError) as error:
            PretrainOptions(**{field: value})
        _, err = run_main(['pretrain', flag, str(value)], capsys)
        assert err.strip() == f'd2lbert pretrain: error: {error.value}'
        options = PretrainOptions(out='run')
        setattr(options, field, value)
        with pytest.raises(ValueError, match=flag):
            pretrain(options)
    assert os.listdir(workdir) == []


@pytest.mark.parametrize('field, value', [
    ('steps', '3'), ('steps', 2.0), ('steps', True), ('lr', '0.1'), ('batch_size', 2.5),
    ('optimizer', 3), ('gpus', 0), ('cpu', 'yes'), ('progress', 1)])
def test_python_api_checks_types(field, value):
    with pytest.raises(ValueError, match=f'{field.replace("_", "-")} must be'):
        PretrainOptions(**{field: value})


def test_boundary_values_are_accepted():
    """0 where it means something (--clip 0: off, --eval-every/--save-every 0: only
    after the last step, --warmup 0, --num-workers 0: this process) and the extremes."""
    PretrainOptions(clip=0, eval_every=0, save_every=0, warmup=0, num_workers=0,
                    weight_decay=0, keep=1, seed=2 ** 32 - 1, max_len=5, lr=1e30, gpus='0,1')
    PretrainOptions(max_len=1000, kvstore='dist_sync', optimizer='lamb', preset='base')
    BenchOptions(configs=('quick',), only=('d2l',), steps=1, threads=1, device='gpu:3')


@pytest.mark.parametrize('overrides, name', [
    (dict(threads=0), '--threads'), (dict(steps=0), '--steps'),
    (dict(only=('foo',)), '--only'), (dict(only=()), '--only'),
    (dict(configs='book'), '--configs'), (dict(device='gpu'), '--device'),
    (dict(e2e_steps=0), 'BenchOptions.e2e_steps'),
    (dict(e2e_config='huge'), 'BenchOptions.e2e_config')])
def test_bench_options_are_checked(overrides, name):
    with pytest.raises(ValueError, match=name):
        BenchOptions.quick_options(**overrides)


@pytest.mark.parametrize('command', [['pretrain', '--lr', 'nan'], ['bench', '--threads', '0']])
def test_real_entry_point_refuses_bad_flags(command, tmp_path):
    """`python -m d2lbert`, as a user runs it: exit code 2, one line, no traceback."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONWARNINGS='ignore', D2LBERT_HOME=str(tmp_path / 'home'),
               PYTHONPATH=os.pathsep.join([repo, os.environ.get('PYTHONPATH', '')]))
    done = subprocess.run([sys.executable, '-m', 'd2lbert', *command], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert 'Traceback' not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f'd2lbert {command[0]}: error: {command[1]} must be '
        + ('a finite number > 0, got nan' if command[0] == 'pretrain'
           else 'an integer >= 1, got 0')]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('command', ['pretrain', 'encode', 'convert', 'bench', 'fill-mask'])
def test_help_shows_each_default_once(command, capsys):
    with pytest.raises(SystemExit):
        main([command, '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert 'default: None' not in text
    assert not re.search(r'\(default: [^)]*\) \(default:', text), text


@pytest.mark.parametrize('command, options_class, required', [
    ('pretrain', PretrainOptions, {}),
    ('finetune', FinetuneOptions, {'task': 'csv', 'model': 'm', 'data': 'train.csv'}),
    ('bench', BenchOptions, {}),
    ('predict', PredictOptions, {'model': 'm'}),
    ('encode', EncodeOptions, {'model': 'm', 'text': 'a river'}),
    ('convert', ConvertOptions, {'to_hf': 'm', 'out': 'o'}),
    ('fill-mask', FillMaskOptions, {'model': 'm', 'data': 'd', 'out': 'o'})])
def test_each_option_is_declared_once(command, options_class, required, capsys,
                                      monkeypatch):
    """The parser is generated from the options dataclass: every field with a flag is a
    flag whose help is the field's, and no flags give the dataclass's defaults."""
    import argparse
    import dataclasses
    monkeypatch.setenv('COLUMNS', '10000')  # help lines unwrapped
    parser = argparse.ArgumentParser()
    options_class.add_arguments(parser)
    args = parser.parse_args([part for name, value in required.items() for part in (
        [value] if name == 'text' else [f'--{name.replace("_", "-")}', value])])
    assert options_class.from_arguments(args) == options_class(**required)
    with pytest.raises(SystemExit):
        main([command, '--help'])
    shown = ' '.join(capsys.readouterr().out.split())
    for field in dataclasses.fields(options_class):
        if field.metadata['cli']:
            assert ' '.join(field.metadata['help'].split()) in shown, field.name


def test_encode_reports_the_words_the_vocabulary_lacks():
    from d2lbert import Vocab
    vocab = Vocab({'the': 9, 'river': 7, 'it': 5}, min_freq=1)
    assert unknown_words_line(vocab, ['the', 'river']).startswith(
        "0 of 2 words unknown to the model's vocabulary")
    line = unknown_words_line(vocab, ['a', 'crane', 'is', 'flying', 'it'])
    assert line.startswith("4 of 5 words unknown") and line.endswith(': a crane is flying')


def test_the_program_exits_with_the_commands_code_after_its_exit_handlers(tmp_path):
    """`d2lbert` (`cli.console`) skips the interpreter's teardown but not the exit
    handlers (a run's lock and leftovers are removed by them) nor what they and the
    command printed, and exits with the command's code: 2 and one line for a bad
    flag."""
    mark = tmp_path / 'handler.txt'
    script = ('import atexit, sys\n'
              f'atexit.register(lambda: open({str(mark)!r}, "w").write("ran"))\n'
              'atexit.register(print, "printed by an exit handler")\n'
              "sys.argv = ['d2lbert', 'predict', '--model', 'no-such-folder', '--data', 'x',"
              " '--out', 'y.jsonl']\n"
              'from d2lbert.cli import console\n'
              'console()\n'
              'print("not reached")\n')
    buffered = {name: value for name, value in os.environ.items()
                if name != 'PYTHONUNBUFFERED'}  # its output held until flushed
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          cwd=tmp_path, env=buffered)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        'd2lbert predict: error: --model no-such-folder is not a folder']
    assert done.stdout == 'printed by an exit handler\n'
    assert mark.read_text() == 'ran'


@pytest.mark.parametrize('joined', [False, True])
def test_a_ps_lite_worker_exits_through_the_interpreters_teardown(tmp_path, joined):
    """The teardown `cli.console` skips (the interpreter's, which waits for the threads
    still running) still runs in a worker that joined a ps-lite job (`JOINED_WORKERS`),
    where the kvstore's teardown tells the servers to stop; the exit code is the
    command's."""
    mark = tmp_path / 'teardown.txt'
    script = ('import sys, threading, time\n'
              'from d2lbert.cli import console\n'
              'from d2lbert.pretraining import distributed\n'
              f'if {joined}: distributed.JOINED_WORKERS.append("a worker")\n'
              f'def late(): time.sleep(2); open({str(mark)!r}, "w").write("waited for")\n'
              'threading.Thread(target=late).start()\n'
              "sys.argv = ['d2lbert', 'predict', '--model', 'no-such-folder', '--data', 'x',"
              " '--out', 'y.jsonl']\n"
              'console()\n')
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert mark.exists() == joined
