"""What the study scripts share: their command line, their results file (`--out`) and the
runs they start.

* `study_parser`: the script's argument parser, described by its docstring's first line,
  and `DATA`: the folder of the real data sets the scripts read by default;
* `run_record`: the header of every results file: the command, the CPU and the date;
* `check_results_file` and `write_results`: `--out`, checked before the hours of runs
  and then written whole or not at all, as d2lbert's commands write their outputs;
* `fail`: bad input, one line naming the flag and exit code 2, as the commands refuse;
* `run_logged` and `read_records`: a run in a process of its own, each printed line
  stamped with the seconds since its start, and the records of its metrics.jsonl.
"""
import argparse
import ctypes
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

STUDIES = 'chapter_bert/studies'  # where the scripts are, as a results file records them
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The real data sets the studies read by default (WikiText-2, GLUE SST-2), one folder of
# each: $D2LBERT_DATA, or shared/data/ beside the repository's folder.
DATA = os.environ.get('D2LBERT_DATA', os.path.join(os.path.dirname(ROOT), 'shared', 'data'))
PR_SET_PDEATHSIG = 1  # Linux's prctl option (linux/prctl.h)


def study_parser(doc):
    """An argument parser described by the first paragraph of a script's docstring."""
    return argparse.ArgumentParser(description=doc.split('\n\n')[0])


def machine():
    """The CPU the study runs on (`d2lbert.bench.machine.cpu_description`)."""
    from d2lbert.bench.machine import cpu_description
    return cpu_description()


def run_record(program, argv=None, describe=machine):
    """{'command', 'machine', 'date'}: how a results file was made. program: the script's
    name (e.g. 'scale_study'); argv: its arguments (default sys.argv[1:]); describe: the
    function that describes the machine."""
    arguments = sys.argv[1:] if argv is None else argv
    return {'command': ' '.join([f'python {STUDIES}/{program}.py', *arguments]),
            'machine': describe(), 'date': datetime.date.today().isoformat()}


def fail(program, message):
    """Bad input: one line naming the flag or file, exit code 2 (as d2lbert's commands
    refuse), nothing written."""
    print(f'{program}: {message}', file=sys.stderr)
    sys.exit(2)


def check_results_file(program, out, inputs):
    """Exit with one line (nothing touched) unless --out can be written: a regular
    file (or a new one, not a folder) reached through no link, not one of the inputs
    {flag: path}; makes its folder."""
    from d2lbert.run.errors import RunError
    from d2lbert.run.files import check_output
    try:
        check_output('--out', out, inputs)
        if os.path.isdir(out):
            fail(program, f'--out {out} is a folder; give the path of the results file '
                 '(nothing was touched)')
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    except RunError as err:
        fail(program, str(err))
    except OSError as err:
        fail(program, f'--out {out}: {err.strerror}')


def write_results(program, out, results):
    """The results (a dict) as JSON in --out, whole or not at all
    (`d2lbert.run.files.write_file_atomically`)."""
    from d2lbert.run.errors import RunError
    from d2lbert.run.files import write_file_atomically
    try:
        write_file_atomically('--out', out, lambda f: json.dump(results, f, indent=1))
    except RunError as err:
        fail(program, str(err))


def log(text):
    """Print a line of progress, stamped with the time of day."""
    print(f'[{time.strftime("%H:%M:%S")}] {text}', flush=True)


def ends_with_its_parent():
    """Run in a child before it starts (Popen's preexec_fn): on Linux, the child gets
    SIGTERM when the study's process dies (prctl PR_SET_PDEATHSIG), so a study killed
    midway leaves no pretraining or fine-tuning run going on without it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def run_logged(command, show=lambda seconds, line: None, threads=None):
    """Run command (with OMP_NUM_THREADS=threads if given); returns [(seconds since
    start, line)] of its stdout, each line stamped as it is printed (unbuffered) and
    passed to show (progress). Exits with its stderr's tail when it fails."""
    tic = time.time()
    with tempfile.TemporaryFile('w+', encoding='utf-8') as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True,
                                   env=dict(os.environ, PYTHONUNBUFFERED='1',
                                            **({'OMP_NUM_THREADS': str(threads)}
                                               if threads else {})),
                                   preexec_fn=ends_with_its_parent
                                   if sys.platform.startswith('linux') else None)
        lines = []
        for line in process.stdout:
            lines.append((time.time() - tic, line.rstrip('\n')))
            show(*lines[-1])
        if process.wait() != 0:
            errors.seek(0)
            raise SystemExit(f'{" ".join(command)} failed:\n{errors.read()[-3000:]}')
    return lines


def read_records(out, split):
    """The records of a run's metrics.jsonl (in `out`) of one split ('train', 'valid',
    'dev')."""
    with open(os.path.join(out, 'metrics.jsonl'), encoding='utf-8') as f:
        return [r for r in map(json.loads, f) if r['split'] == split]
