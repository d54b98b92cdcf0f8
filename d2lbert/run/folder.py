"""The run folder every training command writes (`pretrain`, `finetune`)::

    OUT/run.json      the command and its options (all but --out, --resume, --overwrite)
    OUT/.lock         the process id of the process writing OUT (removed when it ends)

`prepare_out_dir` makes the folder ready: an output folder must be new or empty (or
`--overwrite` replaces it whole, or `--resume` continues the same command's run with the
same trajectory options); it is locked against a second process, a lock left by a dead
process is taken over, and the temporary folders a kill left behind are removed.
`record_run` writes run.json once the run has started (its data read, its model built):
a start that fails before leaves nothing that would refuse the corrected rerun.
`recorded_options` reads it back: `--resume` takes the run's options from it.
"""
import atexit
import dataclasses
import datetime
import json
import os
import shutil

from . import checkpoint as ckpt
from .errors import RunError
from .files import (check_apart, check_replaceable, check_target, remove_leftovers,
                    write_file_atomically)

RUN_FILE = 'run.json'
LOCK_FILE = '.lock'
NOT_RECORDED = ('out', 'resume', 'overwrite')  # where and how, not what the run is


def due(step, every):
    """Whether a task done every `every` steps (0: never) is due at `step`."""
    return every > 0 and step % every == 0


def trajectory_of(options, fields):
    """{field: value} of the options that shape a run (paths made absolute)."""
    values = {}
    for name in fields:
        value = getattr(options, name)
        if isinstance(value, str) and os.path.exists(value):
            value = os.path.abspath(value)
        values[name] = value
    return values


def options_record(options):
    """{field: value} of every command-line option of `options` but NOT_RECORDED (paths
    made absolute)."""
    return trajectory_of(options, [
        field.name for field in dataclasses.fields(options)
        if field.metadata.get('cli', True) and field.name not in NOT_RECORDED])


def record_run(out, command, options):
    """Write OUT/run.json: the command and its options (`options_record`)."""
    write_file_atomically('--out', os.path.join(out, RUN_FILE), lambda f: json.dump(
        {'command': command, 'options': options_record(options)}, f, indent=2))


def recorded_options(given, command):
    """The options run.json recorded for a `--resume` of `given` ({field: value} of the
    flags given; with --resume and --out), or {} (a new run, or no readable record of
    this command: `prepare_out_dir` then refuses the resume)."""
    if not given.get('resume') or not given.get('out'):
        return {}
    try:
        with open(os.path.join(given['out'], RUN_FILE), encoding='utf-8') as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(saved, dict) or saved.get('command') != command:
        return {}
    return dict(saved.get('options') or {})


def check_same_run(out, command, trajectory):
    """--resume continues only a run of the same command and trajectory options."""
    try:
        with open(os.path.join(out, RUN_FILE), encoding='utf-8') as f:
            saved = json.load(f)
    except (OSError, ValueError):
        raise RunError(f'--resume: {out} has no readable {RUN_FILE}: not a run this '
                       f'version of d2lbert {command} can continue') from None
    if saved.get('command') != command:
        raise RunError(f'--resume: {out} is a `d2lbert {saved.get("command")}` run, not a '
                       f'`d2lbert {command}` one')
    changed = [f'--{name.replace("_", "-")} {value!r} (the run has '
               f'{saved["options"].get(name)!r})'
               for name, value in trajectory.items() if saved['options'].get(name) != value]
    if changed:
        raise RunError(f'--resume: {"; ".join(changed)}: these would change the run\'s '
                       'trajectory; resume with its own options or start a new --out')


def process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_holder(path):
    """The process id written in a lock file (None if unreadable)."""
    try:
        with open(path, encoding='utf-8') as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def lock_folder(out):
    """Lock OUT for this process until it exits; refuse it while another live process
    holds it, take over a lock left by a dead one."""
    path = os.path.join(out, LOCK_FILE)
    while True:
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = lock_holder(path)
            if holder is not None and holder != os.getpid() and process_alive(holder):
                raise RunError(f'--out {out} is being written by process {holder} (its '
                               f'lock {path}); wait for it or choose another --out') from None
            os.remove(path)  # a dead process's lock (or this process's own): take it over
            continue
        with os.fdopen(handle, 'w') as f:
            f.write(f'{os.getpid()}\n')
        atexit.register(unlock_folder, path)
        return path


def unlock_folder(path):
    if lock_holder(path) == os.getpid():
        os.remove(path)


def empty_folder(out):
    """Remove everything in OUT but this process's lock (--overwrite)."""
    for name in os.listdir(out):
        path = os.path.join(out, name)
        if name == LOCK_FILE:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def prepare_out_dir(options, command, default_name, inputs, trajectory_fields):
    """Make the run folder options.out (default: runs/default_name, a strftime pattern)
    ready and locked.

    inputs: {flag: path} the run reads (the folder must not be or hold one of them);
    trajectory_fields: the options --resume must not change. Returns the folder.
    """
    out = options.out or os.path.join('runs', datetime.datetime.now().strftime(default_name))
    check_target('--out', out)
    check_apart('--out', out, inputs)
    trajectory = trajectory_of(options, trajectory_fields)
    holds = os.path.isdir(out) and set(os.listdir(out)) - {LOCK_FILE}
    if options.resume:
        if options.overwrite:
            raise RunError('--resume continues the run in --out, --overwrite replaces it: '
                           'choose one')
        if not ckpt.list_checkpoints(out):
            raise RunError(f'--resume: no complete checkpoint in {out}')
        check_same_run(out, command, trajectory)
    elif holds and not options.overwrite:
        raise RunError(f'--out {out} already holds files; choose a new or empty folder, '
                       'pass --resume to continue its run or --overwrite to replace it '
                       'whole (nothing was touched)')
    elif holds:
        check_replaceable('--out', out)
    try:
        os.makedirs(out, exist_ok=True)
        lock_folder(out)
        if holds and options.overwrite:
            empty_folder(out)
        remove_leftovers(out)
        remove_leftovers(os.path.join(out, ckpt.CHECKPOINT_DIR))
    except OSError as error:
        raise RunError(f'--out {out} is not writable: {error.strerror}') from None
    return out
