"""The study tools' results file (`--out`), written as d2lbert's commands write their
outputs: checked before the hours of runs, then written whole or not at all."""
import json
import os
import sys


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
