"""The run folder every training command writes (`pretrain`, `finetune`)::

    OUT/run.json      the command and its options (all but --out, --resume, --overwrite)
    OUT/.lock         the process id of the process writing OUT (removed when it ends)

`prepare_out_dir` makes the folder ready: an output folder must be new or empty (or
`--overwrite` replaces it whole, or `--resume` continues the same command's run with the
same trajectory options, from its newest complete checkpoint or, when a kill came before
the first one, from step 0); it is locked against a second process, a lock left by a dead
process is taken over, and the temporary folders a kill left behind are removed.
`record_run` writes run.json once the run has started (its data read, its model built):
a start that fails before leaves nothing that would refuse the corrected rerun.
`recorded_options` reads it back: `--resume` takes the run's options from it.

`folder_written_whole` does the same for a folder written at once (`convert`, SQuAD
`predict`): locked too, written beside it, checked again and swapped in at the end.
`write_model_folder` writes a model folder so, for `convert --from-hf` and for the
library's `save_pretrained` alike.
"""
import atexit
import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import shutil
import tempfile

from . import checkpoint as ckpt
from .errors import RunError, RunFault
from .files import (OUR_TEMPORARIES, check_output, check_replaceable, check_target,
                    is_disk_full, is_within, make_readable, overwrite_named, process_alive,
                    remove_leftovers, replace_folder, sweep_temporaries, temporary_prefix,
                    without_trailing_slashes, write_file_atomically)

RUN_FILE = 'run.json'
LOCK_FILE = '.lock'
HELD_LOCKS = {}  # lock file -> its open descriptor, holding the flock
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


def record_run(out, command, options, inputs=None):
    """Write OUT/run.json: the command and its options (`options_record`), and
    {name: value} of inputs to record (e.g. the model a run continues, how its text
    was read)."""
    write_file_atomically('--out', os.path.join(out, RUN_FILE), lambda f: json.dump(
        {'command': command, 'options': options_record(options), **(inputs or {})}, f,
        indent=2))


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


def check_same_run(out, command, trajectory, defaults):
    """--resume continues only a run of the same command and trajectory options; an
    option its run.json lacks (the run is older than the option) ran at its default
    (`defaults`: {field: default})."""
    try:
        with open(os.path.join(out, RUN_FILE), encoding='utf-8') as f:
            saved = json.load(f)
    except (OSError, ValueError):
        raise RunError(f'--resume: {out} has no readable {RUN_FILE}: not a run this '
                       f'version of d2lbert {command} can continue') from None
    if saved.get('command') != command:
        raise RunError(f'--resume: {out} is a `d2lbert {saved.get("command")}` run, not a '
                       f'`d2lbert {command}` one')
    recorded = {**defaults, **saved['options']}
    changed = [f'--{name.replace("_", "-")} {value!r} (the run has '
               f'{recorded.get(name)!r})'
               for name, value in trajectory.items() if recorded.get(name) != value]
    if changed:
        raise RunError(f'--resume: {"; ".join(changed)}: these would change the run\'s '
                       'trajectory; resume with its own options or start a new --out')


def lock_holder(path):
    """The process id written in a lock file (None if unreadable)."""
    try:
        with open(path, encoding='utf-8') as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def lock_folder(out, flag='--out'):
    """Lock OUT for this process until it exits; refuse it (naming `flag`, the command's
    flag or the library call's argument) while another live process holds it, take
    over a lock left by a dead one.

    The lock is `flock` on OUT/.lock (the system releases it when its process dies, so
    two processes never both take over a dead one's), which also holds the process id
    for the message; a live process id written there without the flock (an older
    d2lbert) is respected too."""
    path = os.path.join(out, LOCK_FILE)
    if path in HELD_LOCKS:  # this process locked it before (a run in a notebook...)
        unlock_folder(path)
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            holder = lock_holder(path)
            if holder is not None and holder != os.getpid() and process_alive(holder):
                raise BlockingIOError
            if os.fstat(handle).st_ino != os.stat(path).st_ino:
                raise FileNotFoundError  # removed by its holder meanwhile: try again
        except FileNotFoundError:
            os.close(handle)
            continue
        except BlockingIOError:
            os.close(handle)
            holder = lock_holder(path)
            raise RunError(f'{flag} {out} is being written by '
                           f'{"process " + str(holder) if holder else "another process"} '
                           f'(its lock {path}); wait for it or choose another {flag} '
                           '(nothing was touched)') from None
        os.ftruncate(handle, 0)
        os.pwrite(handle, f'{os.getpid()}\n'.encode(), 0)
        HELD_LOCKS[path] = handle
        atexit.register(unlock_folder, path)
        return path


def unlock_folder(path):
    """Remove this process's lock file (then release its flock)."""
    if lock_holder(path) == os.getpid():
        os.remove(path)
    if path in HELD_LOCKS:
        os.close(HELD_LOCKS.pop(path))


def check_still_locked(flag, out, lock):
    """At the final rename: OUT is still a folder (no link swapped in) holding our lock."""
    check_target(flag, out)
    if lock_holder(lock) != os.getpid():
        raise RunError(f'{flag} {out}: its lock {lock} was taken or removed by another '
                       'process while writing; nothing was put in place')


def holds_files(out):
    return os.path.isdir(out) and bool(set(os.listdir(out)) - {LOCK_FILE})


def refused_holding_files(flag, out):
    return RunError(f'{flag} {out} already holds files; choose a new or empty folder or '
                    f'pass {overwrite_named(flag)} to replace it whole (nothing was '
                    'touched)')


@contextlib.contextmanager
def folder_written_whole(flag, out, overwrite, inputs):
    """Yield a temporary folder beside `out` to write into; when the block ends without
    error it replaces `out`, which must be new or empty unless overwrite. `out` is locked
    (`lock_folder`) from the start to the swap, so a run writing there, or a second
    command, is never replaced; it is never a file, nor the current folder or one
    holding it (`check_replaceable`: the swap would replace it). flag: the command's
    flag ('--out') or the library call's argument ('folder') that errors name.
    inputs: as for `check_apart`.

    A failed write is a RunFault (exit code 3), `out` is left as it was and the
    temporary folder removed (or swept by the next command, after a kill)."""
    out = check_output(flag, out, inputs)
    if os.path.exists(out) and not os.path.isdir(out):
        raise RunError(f'{flag} {out} is a file; give a folder to write (nothing was '
                       'touched)')
    if holds_files(out) and not overwrite:
        raise refused_holding_files(flag, out)
    if os.path.isdir(out):
        check_replaceable(flag, out)
    created = not os.path.exists(out)
    parent = os.path.dirname(os.path.abspath(out))
    try:
        os.makedirs(out, exist_ok=True)  # to hold the lock
        lock = lock_folder(out, flag)
    except OSError as error:
        fault = RunFault if is_disk_full(error) else RunError
        raise fault(f'{flag} {out}: cannot write in {parent} ({error.strerror})') from None
    finished = False
    try:
        if holds_files(out) and not overwrite:  # files came before the lock was taken
            raise refused_holding_files(flag, out)
        sweep_temporaries(parent)
        with written_beside(flag, out, parent) as tmp:
            yield tmp
            make_readable(tmp)
            check_still_locked(flag, out, lock)
            if holds_files(out) and not overwrite:
                raise RunError(f'{flag} {out} received files while writing; they are kept '
                               '(nothing was put in place)')
            replace_folder(tmp, out)
            finished = True
    finally:
        unlock_folder(lock)
        if created and not finished:
            with contextlib.suppress(OSError):
                os.rmdir(out)


@contextlib.contextmanager
def written_beside(flag, out, parent):
    """A temporary folder in `parent`, removed at the end; an OSError about a file in it
    (a full disk...) becomes a RunFault, other errors pass (e.g. an input missing)."""
    try:
        tmp = tempfile.mkdtemp(prefix=temporary_prefix(), dir=parent)
    except OSError as error:
        fault = RunFault if is_disk_full(error) else RunError
        raise fault(f'{flag} {out}: cannot write in {parent} ({error.strerror})') from None
    try:
        yield tmp
    except RunFault as fault:  # a file of it (`write_file_atomically`): named as it will be
        raise RunFault(str(fault).replace(tmp, out)) from None
    except OSError as error:
        if error.filename is not None and not is_within(error.filename, tmp) \
                and not is_within(error.filename, out):
            raise
        raise RunFault(f'{flag} {out}: cannot write it ({error.strerror}); {out} is as it '
                       'was') from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_model_folder(flag, folder, net, config, vocab, overwrite=False, inputs=None,
                       json_files=None):
    """Write the model folder `folder` (`checkpoint.write_model_files`: config.json, the
    vocabulary, model.params, each {name: value} of json_files as JSON, manifest.json)
    as `folder_written_whole` writes a folder: whole or not at all, never through a
    link, over a file, an input ({flag: path} inputs) or the current folder, nor into
    one that holds files (unless overwrite: then replaced whole) or that another live
    process holds. flag: what errors name ('--out', or 'folder' for `save_pretrained`).
    Returns the folder (without trailing slashes)."""
    with folder_written_whole(flag, folder, overwrite, inputs or {}) as tmp:
        ckpt.write_model_files(tmp, net, config, vocab, json_files=json_files)
    return without_trailing_slashes(folder)


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
    trajectory_fields: the options --resume must not change. Returns (the folder, whether
    the run continues from a checkpoint): a --resume of a run killed before its first
    checkpoint starts it over from step 0 (its own files are then rewritten, metrics.jsonl
    emptied; files it did not write are left alone).
    """
    out = options.out or os.path.join('runs', datetime.datetime.now().strftime(default_name))
    out = check_output('--out', out, inputs)
    trajectory = trajectory_of(options, trajectory_fields)
    holds = os.path.isdir(out) and {name for name in os.listdir(out)
                                    if not name.startswith(OUR_TEMPORARIES)} - {LOCK_FILE}
    resumes = False
    if options.resume:
        if options.overwrite:
            raise RunError('--resume continues the run in --out, --overwrite replaces it: '
                           'choose one')
        check_same_run(out, command, trajectory, {
            field.name: field.default for field in dataclasses.fields(options)})
        resumes = bool(ckpt.list_checkpoints(out))
        if not resumes:
            print(f'--resume: no checkpoint yet in {out}: starting the run over', flush=True)
    elif holds and not options.overwrite:
        raise RunError(f'--out {out} already holds files; choose a new or empty folder, '
                       'pass --resume to continue its run (or start it over if no '
                       'checkpoint was made yet) or --overwrite to replace it whole '
                       '(nothing was touched)')
    elif holds:
        check_replaceable('--out', out)
    try:
        os.makedirs(out, exist_ok=True)
        lock_folder(out)
        if holds and options.overwrite:
            empty_folder(out)
        remove_run_leftovers(out)
        atexit.register(remove_run_leftovers, out, quietly=True)  # runs before the unlock
    except OSError as error:
        fault = RunFault if is_disk_full(error) else RunError
        raise fault(f'--out {out} is not writable: {error.strerror}') from None
    return out, resumes


def remove_run_leftovers(out, quietly=False):
    """`remove_leftovers` of the run folder and its checkpoints: when a run takes the
    folder (what a kill left), and when its process exits while it still holds the lock
    (what a signal's exception left, landing as a model folder was being created or
    replaced, where no `finally` covers it). quietly: OSErrors are ignored."""
    with contextlib.suppress(*((OSError,) if quietly else ())):
        remove_leftovers(out)
        remove_leftovers(os.path.join(out, ckpt.CHECKPOINT_DIR))
