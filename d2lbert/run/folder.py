"""The run folder every training command writes: its errors (one line each), when a
periodic task is due, and preparing the folder (new, or the run to resume)."""
import datetime
import os

from . import checkpoint as ckpt


class RunError(Exception):
    """A problem with the run's inputs or state, reported as one clear message."""


class TrainingDiverged(RunError):
    """The loss became NaN or infinite."""


def due(step, every):
    """Whether a task done every `every` steps (0: never) is due at `step`."""
    return every > 0 and step % every == 0


def prepare_out_dir(options):
    out = options.out or os.path.join(
        'runs', datetime.datetime.now().strftime('bert-%Y%m%d-%H%M%S'))
    existing = ckpt.list_checkpoints(out)
    if options.resume and not existing:
        raise RunError(f'--resume: no complete checkpoint in {out}')
    if not options.resume and existing:
        raise RunError(f'{out} already holds checkpoints; pass --resume to continue '
                       'that run or choose another --out (nothing was overwritten)')
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, f'.write-test-{os.getpid()}')
        with open(probe, 'w'):
            pass
        os.remove(probe)
    except OSError as error:
        raise RunError(f'--out {out} is not writable: {error.strerror}') from None
    return out
