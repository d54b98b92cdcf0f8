"""The training loop that `d2lbert pretrain` and `d2lbert finetune` both run.

The run's `Schedule` (`schedule.py`) says how many steps it trains and the learning rate
of each (a `TimeBudget`: as many as fit in a wall-clock budget). Every step: take the step's
batches, set the learning rate, add up the gradient of the loss over the batches, clip
and update (`step.optimizer_step`). Every so often: log the training losses (and stop
if one is NaN), evaluate, checkpoint. What differs between
the commands is a *recipe*, an object each supplies (`pretrain.Pretraining`,
`finetune.Finetuning`): its data, its loss, its evaluation, what its checkpoints hold
and its log's fields. A recipe has:

* attributes `config`, `vocab` (saved in every checkpoint), `checkpoint_files` ({file
  name: value} more JSON files for a checkpoint, or None), `loss_names` (the losses a
  step returns, averaged in the log), `unit` ('pairs', 'examples': the rate logged is
  `UNIT_per_second`), `eval_split` and `score_names` (the split of its evaluation
  records and the scores plotted);
* `step_batches(step)` -> the list of host batches (micro-batches) of step `step`
  (1, 2, ...), after re-seeding the step's random draws with `step.seed_step` (a
  resumed run then draws the same dropout masks as an uninterrupted one);
* `forward_backward(batches, loss_scale, logging)` -> (losses, metrics): adds to the
  parameters' gradients the gradient of the step's loss times loss_scale; losses: the
  step's losses, scalar device arrays in the order of `loss_names`; metrics: {name:
  scalar device array} of other metrics of the step to log (empty unless `logging`);
* `examples(batches)` -> the number of examples the batches hold;
* `record_fields(step)` -> {name: value} to put first in a training record;
* `progress_fields(record)` -> {name: text} to show on the progress bar;
* `evaluate(step)` -> (scores, lines): scores ({name: float}, or None: nothing to log)
  of the held-out data, lines to print;
* `checkpoint_state(step)` -> the state.json of the checkpoint of `step` (what --resume
  needs to continue: the data's position, the seed, ...); the recipe may first save what
  else it keeps (fine-tuning: the best model so far).

In a job of several processes (`pretraining.distributed`) each runs this loop; `worker`
is then the process's `Worker`: only the first logs, evaluates and checkpoints, after the
workers' logged values are added up (`Worker.add_up`).
"""
import dataclasses
import math
import sys
import time

from mxnet import np

from .errors import TrainingDiverged
from .folder import due
from .metrics import IntervalMeans
from .schedule import Schedule
from .signals import raise_if_stopped
from .step import optimizer_step, trainable_parameters
from . import checkpoint as ckpt


@dataclasses.dataclass
class Cadence:
    """Every how many steps a run logs, evaluates and checkpoints (0: never, but at the
    end of a stretch: `Schedule.ends_stretch`). log_with_saves: also log at every step
    that evaluates or checkpoints."""
    log_every: int
    eval_every: int
    save_every: int
    log_with_saves: bool = True

    def at(self, step, stretch_end, writes_due=False):
        """(log, evaluate, save): which of them step does (stretch_end: whether step
        ends the run or an epoch; writes_due: whether the schedule asks for an evaluation
        and checkpoint, `TimeBudget.writes_due`)."""
        evaluate = stretch_end or writes_due or due(step, self.eval_every)
        save = stretch_end or writes_due or due(step, self.save_every)
        log = (due(step, self.log_every) or stretch_end
               or (self.log_with_saves and (evaluate or save)))
        return log, evaluate, save


class Progress:
    """The run's progress on stderr: on a terminal, a progress bar (tqdm) and lines
    printed above it; otherwise (a file, a pipe) no bar's carriage-return updates but a
    plain line at each log: 'step 20: mlm 5.812, nsp 0.693, ...'. total_steps: None if
    not known in advance (a `TimeBudget`)."""

    def __init__(self, total_steps, start_step, enabled, terminal=None):
        from tqdm import tqdm
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.enabled, self.step = enabled, start_step
        self.bar = tqdm(total=total_steps, initial=start_step, unit='step',
                        disable=not (enabled and self.terminal), dynamic_ncols=True)

    def advance(self):
        self.step += 1
        self.bar.update(1)

    def show(self, fields):
        """Show {name: text} beside the bar (without a terminal: on a line of its own)."""
        if self.terminal:
            self.bar.set_postfix(**fields)
        elif self.enabled:
            shown = ', '.join(f'{name} {value}' for name, value in fields.items())
            print(f'step {self.step}: {shown}', file=sys.stderr, flush=True)

    def print(self, line):
        self.bar.write(line)

    def close(self):
        self.bar.close()


class OneProcess:
    """The `worker` of a run in one process: it writes, and has nothing to add up."""
    is_first = True

    def add_up(self, record, names):
        return record


@dataclasses.dataclass
class TrainingLoop:
    """A run's training loop (see the module doc): `recipe` trains `net` with `trainer`.

    clip: the global gradient norm's bound (0: none); loss_scale: a
    `loss_scale.DynamicLossScale` (reduced precision) or None; out, log: the run folder
    and its `metrics.MetricsLog`; keep: the checkpoints to keep; progress: show a
    progress bar.
    """
    recipe: object
    net: object
    trainer: object
    schedule: Schedule
    cadence: Cadence
    out: str
    log: object
    clip: float
    keep: int
    worker: object = dataclasses.field(default_factory=OneProcess)
    loss_scale: object = None
    progress: bool = True
    evaluate_first: bool = False  # also evaluate before the first step (a new run's step 0)

    def run(self, start_step=0):
        """Train from the step after start_step to the end of the schedule; returns the
        last step trained."""
        recipe, worker = self.recipe, self.worker
        progress = Progress(self.schedule.total_steps, start_step,
                            self.progress and worker.is_first)
        losses = IntervalMeans(recipe.loss_names)
        params = trainable_parameters(self.net)
        if self.evaluate_first and start_step == 0 and worker.is_first:
            self.evaluate(0, progress)  # before the clock of a time budget starts
        examples, tic, step = 0, time.time(), start_step
        for step in self.schedule.steps(start_step):
            raise_if_stopped()
            batches = recipe.step_batches(step)
            self.trainer.set_learning_rate(self.schedule.learning_rate(step))
            log_now, evaluate_now, save_now = self.cadence.at(
                step, self.schedule.ends_stretch(step), self.schedule.writes_due(step))
            step_losses, metrics = recipe.forward_backward(
                batches, self.loss_scale.scale if self.loss_scale else 1.0, log_now)
            losses.add(step_losses)
            optimizer_step(params, self.trainer, self.clip, self.loss_scale)
            examples += recipe.examples(batches)
            progress.advance()
            if log_now:
                record = self.training_record(step, losses, metrics, examples, tic, progress)
                examples, tic = 0, time.time()
                if worker.is_first:
                    self.log.write(record)
                    progress.show(recipe.progress_fields(record))
            if not worker.is_first:
                continue
            if evaluate_now:
                started = time.time()
                self.evaluate(step, progress)
                tic = time.time()
                self.schedule.wrote('evaluate', tic - started)
            if save_now:
                started = time.time()
                self.save(step)
                tic = time.time()
                self.schedule.wrote('save', tic - started)
        progress.close()
        if worker.is_first:
            self.log.plot(recipe.loss_names, recipe.score_names, recipe.eval_split)
        return step

    def training_record(self, step, losses, metrics, examples, tic, progress):
        """The 'train' record of step: the losses' means since the last record, the
        step's metrics, the rate; summed over the workers. A NaN loss stops the run."""
        recipe = self.recipe
        count = recipe.unit  # 'pairs': the pairs trained since the last record
        record = {'step': step, 'split': 'train', **recipe.record_fields(step),
                  'lr': self.trainer.learning_rate, **losses.pop_means(),
                  **{name: float(value) for name, value in metrics.items()}, count: examples}
        record = self.worker.add_up(  # each worker holds its part of the job's means
            record, (*recipe.loss_names, *metrics, count))
        if not all(math.isfinite(record[name]) for name in recipe.loss_names):
            progress.close()
            raise TrainingDiverged(
                f'loss became {losses_text(record, recipe.loss_names)} by step {step}: '
                f'stopped. The last good checkpoint is kept in {self.out}; try a lower '
                '--lr or --clip')
        elapsed = max(time.time() - tic, 1e-9)
        record[f'{count}_per_second'] = record.pop(count) / elapsed
        return record

    def evaluate(self, step, progress):
        """Log the recipe's held-out scores at step and print its lines."""
        scores, lines = self.recipe.evaluate(step)
        if scores is not None:
            self.log.write({'step': step, 'split': self.recipe.eval_split, **scores})
        for line in lines:
            progress.print(line)

    def save(self, step):
        """Checkpoint step (`checkpoint.save_checkpoint`), never with NaN parameters."""
        check_parameters_finite(self.net, step, self.out)
        recipe = self.recipe
        ckpt.save_checkpoint(self.out, step, self.net, self.trainer, recipe.config,
                             recipe.vocab,
                             {**recipe.checkpoint_state(step), **self.schedule.state()},
                             self.keep,
                             recipe.checkpoint_files)


def losses_text(record, names):
    """'2.31' for one loss; '6.2/0.69 (MLM/NSP)' for mlm_loss and nsp_loss."""
    values = '/'.join(str(record[name]) for name in names)
    if len(names) == 1:
        return values
    return f'{values} ({"/".join(name.split("_")[0].upper() for name in names)})'


def check_parameters_finite(net, step, out):
    """Never checkpoint parameters that an update has turned into NaN or inf."""
    total = sum(float(np.abs(p.data()).sum()) for p in net.collect_params().values())
    if not math.isfinite(total):
        raise TrainingDiverged(f'parameters became NaN/inf at step {step}: stopped without '
                               f'saving. The last good checkpoint is kept in {out}; try a '
                               'lower --lr or --clip')
