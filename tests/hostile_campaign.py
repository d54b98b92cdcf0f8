"""The hostile campaign of docs/outputs.md: every writing command against hostile output
paths (links in every position, devices, pipes, its own inputs), concurrent commands,
kills at random instants and a full disk; prints the table of docs/outputs.md.

    python tests/hostile_campaign.py [--quick] [--seed N] [--rounds N] [--parts ...]

Not a test (pytest does not collect it): it takes minutes; tests/test_hostile_outputs.py
holds one fast regression test per fault it found. Each case records the exit code,
whether the error was one line (no traceback) and whether anything of the user's (a
victim folder and file, every input) changed. Needs root for the device node and tmpfs.
"""
import argparse
import collections
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS)
sys.path[:0] = [REPO_ROOT, TESTS]
os.environ.setdefault('OMP_NUM_THREADS', '1')

from test_outputs import save_tiny_original_model, snapshot, write_pairs  # noqa: E402

FOLDER_COMMANDS = ['pretrain', 'finetune', 'convert --to-hf', 'convert --from-hf',
                   'predict (SQuAD)', 'build_book']
FILE_COMMANDS = ['predict', 'encode', 'bench --json', 'pretrain_study']
ENV = dict(os.environ, PYTHONPATH=REPO_ROOT, OMP_NUM_THREADS='1')


def make_workspace(root):
    """Inputs every command reads: a tiny pretrained model (and as Hugging Face), a
    pair task, a fine-tuned run, a tiny SQuAD model, a corpus, a config."""
    import collections as c
    from d2lbert.cli import main
    from d2lbert.data import Vocab
    from d2lbert.data.squad import bundled_squad_task
    from d2lbert.data.squad.tokenize import word_tokenize_with_offsets
    from d2lbert.data.tasks import word_tokenize
    from d2lbert.data.tasks.generated import next_sentence_task
    train_task, dev_task = (next_sentence_task(split, n, seed=0)
                            for split, n in (('train', 48), ('dev', 16)))
    squad = {split: bundled_squad_task(split, seed=0) for split in ('train', 'dev')}
    counts = c.Counter(token for e in train_task.examples + dev_task.examples
                       for token in word_tokenize(e.text) + word_tokenize(e.text_pair))
    counts.update(token for article in squad['train']['data'] + squad['dev']['data']
                  for paragraph in article['paragraphs']
                  for text in [paragraph['context'], *(q['question'] for q in paragraph['qas'])]
                  for token in word_tokenize_with_offsets(text)[0])
    w = {'root': root, 'model': save_tiny_original_model(os.path.join(root, 'pretrained'),
                                                         Vocab(counts, min_freq=1))}
    w['train'] = write_pairs(train_task.examples, os.path.join(root, 'train.jsonl'))
    w['dev'] = write_pairs(dev_task.examples, os.path.join(root, 'dev.jsonl'))
    for split in ('train', 'dev'):
        squad[split]['data'] = squad[split]['data'][:(20 if split == 'train' else 3)]
        w[f'squad_{split}'] = os.path.join(root, f'squad-{split}.json')
        with open(w[f'squad_{split}'], 'w', encoding='utf-8') as f:
            json.dump(squad[split], f)
    w['run'], w['qa_run'], w['hf'] = (os.path.join(root, name) for name in ('run', 'qa', 'hf'))
    quick = ['--epochs', '1', '--batch-size', '16', '--max-len', '64', '--no-progress']
    assert main(['finetune', '--task', 'csv', *quick, '--model', w['model'], '--data',
                 w['train'], '--dev', w['dev'], '--out', w['run']]) == 0
    assert main(['finetune', '--task', 'squad2', *quick, '--max-query-len', '12',
                 '--doc-stride', '24', '--model', w['model'], '--data', w['squad_train'],
                 '--dev', w['squad_dev'], '--out', w['qa_run']]) == 0
    assert main(['convert', '--to-hf', w['model'], '--out', w['hf']]) == 0
    w['corpus'] = os.path.join(root, 'wiki.valid.tokens')
    with open(w['corpus'], 'w', encoding='utf-8') as f:
        f.write(' = Title = \n some words .\n')
    w['config'] = os.path.join(root, 'tiny.json')
    with open(w['config'], 'w', encoding='utf-8') as f:
        json.dump({'num_hiddens': 16, 'ffn_num_hiddens': 32, 'num_heads': 2,
                   'num_layers': 1, 'max_len': 64, 'vocab_size': 10}, f)
    return w


def command_args(command, w, out, overwrite=False):
    """The argv of a writing command writing `out` (None: the command has no
    --overwrite and overwrite was asked)."""
    over = ['--overwrite'] if overwrite else []
    if command == 'pretrain':
        return ['pretrain', '--data', 'bundled', '--steps', '2', '--batch-size', '4',
                '--max-len', '32', '--eval-every', '0', '--no-progress', '--config',
                w['config'], '--out', out, *over]
    if command == 'finetune':
        return ['finetune', '--task', 'csv', '--epochs', '1', '--batch-size', '16',
                '--max-len', '32', '--no-progress', '--model', w['model'], '--data',
                w['train'], '--dev', w['dev'], '--out', out, *over]
    if command == 'convert --to-hf':
        return ['convert', '--to-hf', w['run'], '--out', out, *over]
    if command == 'convert --from-hf':
        return ['convert', '--from-hf', w['hf'], '--out', out, *over]
    if command == 'predict (SQuAD)':
        return ['predict', '--model', w['qa_run'], '--data', w['squad_dev'], '--out', out,
                *over]
    if command == 'predict':
        return ['predict', '--model', w['run'], '--data', w['dev'], '--out', out, *over]
    if command == 'encode':
        return ['encode', '--model', w['model'], '--save', out, 'a river', *over]
    if command == 'bench --json':
        return None if overwrite else ['bench', '--quick', '--wikitext', w['corpus'],
                                       '--json', out]
    if command == 'pretrain_study':
        return None if overwrite else ['tool:pretrain_study', '--only', 'none', '--wikitext',
                                       w['corpus'], '--out', out]
    if command == 'build_book':
        return None if overwrite else ['tool:build_book', '--out', out]
    raise ValueError(command)


def input_of(command, w):
    """(a file, a folder) the command reads."""
    return {'pretrain': (w['config'], None), 'finetune': (w['train'], w['model']),
            'convert --to-hf': (None, w['run']), 'convert --from-hf': (None, w['hf']),
            'predict (SQuAD)': (w['squad_dev'], w['qa_run']),
            'predict': (w['dev'], w['run']), 'encode': (None, w['model']),
            'bench --json': (w['corpus'], None), 'pretrain_study': (w['corpus'], None),
            'build_book': (None, os.path.join(REPO_ROOT, 'chapter_bert'))}[command]


def load_tool(name):
    """A script of chapter_bert/: the book's build (tools/) or a study (studies/)."""
    import importlib.util
    folder = 'tools' if name == 'build_book' else 'studies'
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(REPO_ROOT, 'chapter_bert', folder, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_in_process(args):
    """(exit code, stderr) of `d2lbert ARGS` (or a book tool) in this process; a
    traceback if it raised."""
    import traceback
    from d2lbert.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            if args[0].startswith('tool:'):
                tool = load_tool(args[0][5:])
                if args[0] == 'tool:build_book':
                    tool.build = lambda *a: None  # the check, not a build
                if args[0] == 'tool:pretrain_study':
                    tool.planned_runs = lambda parts, wikitext_dir: []
                    tool.machine = lambda: 'cpu'
                tool.main([str(a) for a in args[1:]])
                code = 0
            else:
                code = main([str(a) for a in args])
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 2
            if not isinstance(exit.code, int):
                print(exit.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 'traceback'
    return code, err.getvalue()


def victim(case_dir):
    """A user's folder and file, links to them (also dangling), a pipe, a device node:
    the spellings every output is tried with."""
    os.makedirs(os.path.join(case_dir, 'victim', 'dir'))
    with open(os.path.join(case_dir, 'victim', 'dir', 'notes.txt'), 'w') as f:
        f.write('my notes\n')
    for name in ('file.txt', 'file.npy'):
        with open(os.path.join(case_dir, 'victim', name), 'w') as f:
            f.write('my file\n')
    for suffix in ('', '.npy'):  # (encode --save adds .npy)
        os.symlink(os.path.join(case_dir, 'victim', 'dir'),
                   os.path.join(case_dir, 'lnk' + suffix))
        os.symlink(os.path.join(case_dir, 'victim', 'file.txt'),
                   os.path.join(case_dir, 'flnk' + suffix))
        os.symlink(os.path.join(case_dir, 'victim', 'none'),
                   os.path.join(case_dir, 'dangling' + suffix))
        os.mkfifo(os.path.join(case_dir, 'fifo' + suffix))
        if os.geteuid() == 0:
            os.mknod(os.path.join(case_dir, 'null' + suffix), 0o600 | 0o020000,
                     os.makedev(1, 3))
    os.symlink(os.path.join(case_dir, 'victim'), os.path.join(case_dir, 'up'))
    return snapshot(os.path.join(case_dir, 'victim'))


def spellings(command, w, case_dir):
    """(category, output path, --overwrite, expected: 'refused' or 'written')."""
    d = case_dir.rstrip('/') + '/'
    file_in, folder_in = input_of(command, w)
    cases = []
    folder_command = command in FOLDER_COMMANDS
    for over in (False, True):
        hostile = ('lnk', 'lnk/', 'lnk//', 'lnk/.', 'lnk/../dir', 'up/dir/..', 'dangling',
                   'dangling/', 'flnk', 'flnk/', 'fifo', 'null', '/dev/null', '/dev/shm/x')
        if command == 'encode':  # --save adds .npy to a name without it
            hostile = ('lnk.npy', 'flnk.npy', 'dangling.npy', 'fifo.npy',
                       'null.npy', '/dev/null.npy', 'up/dir/../file.npy')
        for spelling in hostile:
            cases.append(('link, device or pipe (last component, any spelling)',
                          spelling if spelling.startswith('/') else d + spelling, over,
                          'refused'))
        if command in ('bench --json', 'pretrain_study', 'build_book'):
            pass  # reports regenerated in place; build_book's own marker check (stubbed)
        else:
            cases.append(('existing folder of the user\'s' if folder_command
                          else 'existing file of the user\'s',
                          d + ('victim/dir' if folder_command else 'victim/file.npy'
                               if command == 'encode' else 'victim/file.txt'),
                          over, 'written' if over else 'refused'))
        for name, path in (('file', file_in), ('folder', folder_in)):
            if path is None or command == 'encode':  # (encode --save adds .npy)
                continue
            for spelling in (path, path + '/', os.path.join(path, '.'),
                             os.path.join(path, 'sub', '..')):
                cases.append((f'its own input {name} (any spelling)', spelling, over,
                              'refused'))
            cases.append(('a folder holding its input', os.path.dirname(path), over,
                          'refused'))
        if folder_in is not None:
            cases.append(('inside its own input folder', os.path.join(folder_in, 'out.npy'),
                          over, 'refused'))
        if over and folder_command:
            cases.append(('the current or home folder', '.', over, 'refused'))
            cases.append(('the current or home folder', os.path.expanduser('~'), over,
                          'refused'))
    name = 'new' if folder_command else 'new.out'
    cases.append(('a link in a parent folder (allowed: the system follows it)',
                  d + 'up/dir/' + name, False, 'written'))
    cases.append(('a new path', d + name, False, 'written'))
    return cases


def protected(w, case_dir):
    """Everything of the user's: the victims and every input."""
    paths = [os.path.join(case_dir, 'victim'), w['model'], w['train'], w['dev'], w['run'],
             w['qa_run'], w['hf'], w['corpus'], w['config'], w['squad_dev']]
    return {path: snapshot(path) for path in paths}


def path_cases(w, root, results, quick):
    commands = FOLDER_COMMANDS + FILE_COMMANDS
    before_inputs = None
    for command in commands:
        case_dir = tempfile.mkdtemp(dir=root, prefix='case-')
        victim(case_dir)
        before_inputs = protected(w, case_dir)
        for category, out, over, expected in spellings(command, w, case_dir):
            args = command_args(command, w, out, over)
            if args is None:
                continue
            if expected == 'written' and command in ('bench --json',):
                continue  # a quick benchmark per case is minutes: refusals only
            code, err = run_in_process(args)
            lost = changed(before_inputs, protected(w, case_dir))
            if expected == 'written' and over and lost == [os.path.join(case_dir, 'victim')]:
                lost = []  # --overwrite replaced the user's folder or file, as asked
                victim_reset(case_dir)
            results.append(record(command, category, args, code, err, expected, lost))
        shutil.rmtree(case_dir, ignore_errors=True)


def changed(before, after):
    """The protected paths whose files (as before) changed or went (new files beside
    them are no loss: a link in a parent folder leads there)."""
    return [path for path, files in before.items()
            if any(after[path].get(name) != content for name, content in files.items())]


def victim_reset(case_dir):
    shutil.rmtree(os.path.join(case_dir, 'victim'), ignore_errors=True)
    for name in ('lnk', 'flnk', 'dangling', 'fifo', 'null'):
        for suffix in ('', '.npy'):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(case_dir, name + suffix))
    os.remove(os.path.join(case_dir, 'up'))
    victim(case_dir)


def error_lines(err):
    """The lines of stderr but the progress bars (tqdm's, and the blanks it leaves)."""
    return [line for line in err.replace('\r', '\n').splitlines()
            if line.strip() and '%|' not in line and 'batch/s]' not in line
            and 'step/s]' not in line]


def record(command, category, args, code, err, expected, lost):
    lines = error_lines(err)
    clear = code != 'traceback' and 'Traceback' not in err and (code == 0 or len(lines) == 1)
    outcome = 'written' if code == 0 else 'refused'
    return {'command': command, 'category': category, 'args': [str(a) for a in args],
            'code': code, 'error': lines[-1] if lines else '', 'clear': clear,
            'as_expected': outcome == expected, 'lost': lost}


def run_process(args, **kwargs):
    return subprocess.Popen([sys.executable, '-m', 'd2lbert', *map(str, args)], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def concurrent_cases(w, root, results, rounds):
    """Two commands on one output at once."""
    pairs = [('convert --to-hf', 'convert --to-hf'), ('convert --from-hf', 'convert --to-hf'),
             ('finetune', 'convert --to-hf'), ('finetune', 'finetune'),
             ('predict', 'predict'), ('predict (SQuAD)', 'predict (SQuAD)'),
             ('encode', 'encode')]
    for first, second in pairs:
        for index in range(rounds):
            case_dir = tempfile.mkdtemp(dir=root, prefix='concurrent-')
            folder = first in FOLDER_COMMANDS
            out = os.path.join(case_dir, 'out' if folder else 'out.npy' if first == 'encode'
                               else 'out.jsonl')
            over = index % 2 == 1 and first == 'finetune' and second == 'convert --to-hf'
            a = run_process(command_args(first, w, out))
            time.sleep(random.uniform(0, 2.5))
            b = run_process(command_args(second, w, out, overwrite=over))
            errs = [p.communicate(timeout=600)[1] for p in (a, b)]
            codes = [p.returncode for p in (a, b)]
            errs = ['\n'.join(error_lines(e)) for e in errs]
            clear = all('Traceback' not in e and len(e.splitlines()) <= 1 for e in errs)
            # never both without --overwrite; a run refused by the other keeps its folder
            expected = codes.count(0) >= 1 and (over or codes.count(0) == 1)
            intact = True
            if first == 'finetune' and codes[1] != 0:
                intact = os.path.isfile(os.path.join(out, 'run.json')) and \
                    os.path.isdir(os.path.join(out, 'model'))
            leftovers = [n for n in os.listdir(case_dir) if n.startswith('.tmp')]
            results.append({'command': f'{first} + {second}', 'category': 'concurrent '
                            '(two commands, one output)', 'args': [], 'code': codes,
                            'error': errs[1].strip()[-200:], 'clear': clear,
                            'as_expected': expected and intact and not leftovers,
                            'lost': [] if intact else [out]})
            shutil.rmtree(case_dir, ignore_errors=True)


def kill_cases(w, root, results, rounds):
    """SIGKILL or SIGTERM at a random instant once the command has started writing (a
    SIGTERM while Python still loads MXNet ends it at once, nothing written); then the
    output is the old state or the new whole one, the next command sweeps the
    temporaries, --resume continues."""
    for command in ('convert --to-hf', 'convert --from-hf', 'finetune', 'pretrain',
                    'predict (SQuAD)', 'encode'):
        for index in range(rounds):
            sig = (signal.SIGKILL, signal.SIGTERM)[index % 2]
            case_dir = tempfile.mkdtemp(dir=root, prefix='kill-')
            out = os.path.join(case_dir, 'out' + ('.npy' if command == 'encode' else ''))
            process = run_process(command_args(command, w, out))
            deadline = time.time() + 60  # once it has started writing (Python loaded)
            while not os.listdir(case_dir) and time.time() < deadline \
                    and process.poll() is None:
                time.sleep(0.05)
            time.sleep(random.uniform(0, 1.5))
            process.send_signal(sig)
            _, err = process.communicate(timeout=120)
            code = process.returncode
            ok = True
            if sig == signal.SIGTERM and code not in (0, 143):
                ok = False
            lines = error_lines(err)
            clear = 'Traceback' not in err and (code in (0, -9) or len(lines) == 1)
            whole = check_whole(command, out)
            lock = os.path.exists(os.path.join(out, '.lock')) if os.path.isdir(out) else False
            # the next command: a rerun sweeps leftovers (or --resume continues a run)
            again = command_args(command, w, out, overwrite=command in FOLDER_COMMANDS and
                                 command not in ('finetune', 'pretrain'))
            killed_at = killed_run_state(out) if command in ('finetune', 'pretrain') else None
            if killed_at not in (None, 'before run.json'):
                again = again + ['--resume']  # from its checkpoint, or over from step 0
            if command == 'encode':
                again = again + ['--overwrite']
            rerun = subprocess.run([sys.executable, '-m', 'd2lbert', *map(str, again)],
                                   env=ENV, capture_output=True, text=True, timeout=600)
            leftovers = [n for n in os.listdir(case_dir) if n.startswith('.tmp')]
            results.append({'command': command, 'category': f'killed ({signal.Signals(sig).name})'
                            ' at a random instant, then run again', 'args': [],
                            'code': [code, rerun.returncode], 'error': err.strip()[-200:],
                            'clear': clear and 'Traceback' not in rerun.stderr,
                            'as_expected': ok and whole and rerun.returncode == 0 and
                            not leftovers and not (sig == signal.SIGTERM and lock),
                            'lost': [] if whole else [out], 'killed_at': killed_at})
            shutil.rmtree(case_dir, ignore_errors=True)


def killed_run_state(out):
    """Where a killed run stopped: 'before run.json', 'before a checkpoint' or 'after a
    checkpoint'."""
    from d2lbert.run import checkpoint as ckpt
    if not os.path.exists(os.path.join(out, 'run.json')):
        return 'before run.json'
    return 'after a checkpoint' if ckpt.list_checkpoints(out) else 'before a checkpoint'


def check_whole(command, out):
    """The output after a kill: absent, or whole (loads)."""
    import d2lbert
    if not os.path.exists(out):
        return True
    try:
        if command == 'convert --to-hf':
            return not os.listdir(out) or d2lbert.load_pretrained(out) is not None
        if command == 'convert --from-hf':
            return not os.listdir(out) or d2lbert.load_pretrained(out) is not None
        if command == 'encode':
            import numpy
            return numpy.load(out).ndim == 2
        if command == 'predict (SQuAD)':
            return all(json.load(open(os.path.join(out, n))) is not None
                       for n in os.listdir(out))
        return True  # a run folder: its checkpoints are verified by --resume
    except Exception:  # noqa: BLE001 (whatever fails to load is not whole)
        return False


def full_disk_cases(w, root, results):
    """Every writing command into a small tmpfs, at several sizes."""
    if os.geteuid() != 0:
        return
    for size in ('8k', '48k', '200k', '1m'):
        for command in ('pretrain', 'finetune', 'convert --to-hf', 'convert --from-hf',
                        'predict (SQuAD)', 'predict', 'encode'):
            disk = tempfile.mkdtemp(dir=root, prefix='disk-')
            subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size}', 'tmpfs', disk],
                           check=True)
            try:
                out = os.path.join(disk, 'out' + ('.npy' if command == 'encode' else ''))
                code, err = run_in_process(command_args(command, w, out))
                leftovers = [n for _, fs, ns in os.walk(disk) for n in fs + ns
                             if n.startswith('.tmp')]
                r = record(command, f'full disk (tmpfs of {size})',
                           command_args(command, w, out), code, err, 'refused', [])
                r['as_expected'] = code in (0, 3) and not leftovers and (
                    code == 3 or check_whole(command, out))
                results.append(r)
            finally:
                subprocess.run(['umount', '-l', disk], check=True)


def table(results):
    rows = collections.OrderedDict()
    for r in results:
        key = r['category']
        row = rows.setdefault(key, {'cases': 0, 'commands': set(), 'expected': 0,
                                    'unclear': 0, 'lost': 0})
        row['cases'] += 1
        row['commands'].add(r['command'])
        row['expected'] += r['as_expected']
        row['unclear'] += not r['clear']
        row['lost'] += bool(r['lost'])
    lines = ['| what | commands | cases | as promised | traceback or unclear | lost |',
             '|---|---|---:|---:|---:|---:|']
    for key, row in rows.items():
        lines.append(f'| {key} | {len(row["commands"])} | {row["cases"]} | '
                     f'{row["expected"]} | {row["unclear"]} | {row["lost"]} |')
    total = [sum(r[k] for r in rows.values()) for k in ('cases', 'expected', 'unclear',
                                                         'lost')]
    lines.append(f'| **all** | {len(FOLDER_COMMANDS + FILE_COMMANDS)} | {total[0]} | '
                 f'{total[1]} | {total[2]} | {total[3]} |')
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='paths only, no kills')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--json', help='also write every case to this file')
    parser.add_argument('--parts', default='paths,disk,concurrent,kills')
    args = parser.parse_args()
    random.seed(args.seed)
    root = tempfile.mkdtemp(prefix='hostile-')
    results = []
    try:
        w = make_workspace(root)
        os.chdir(root)
        parts = args.parts.split(',')
        if 'paths' in parts:
            path_cases(w, root, results, args.quick)
        if 'disk' in parts:
            full_disk_cases(w, root, results)
        if 'concurrent' in parts and not args.quick:
            concurrent_cases(w, root, results, args.rounds)
        if 'kills' in parts and not args.quick:
            kill_cases(w, root, results, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump(results, f, indent=1)
    for r in results:
        if not (r['as_expected'] and r['clear'] and not r['lost']):
            print('NOT AS PROMISED:', json.dumps(r)[:600])
    print(table(results))
    stops = collections.Counter(r['killed_at'] for r in results if r.get('killed_at'))
    if stops:
        print('runs killed:', ', '.join(f'{n} {at}' for at, n in sorted(stops.items())))


if __name__ == '__main__':
    main()
