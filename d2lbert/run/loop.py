"""The training loop that `d2lbert pretrain` and `d2lbert finetune` both run.

The run's `Schedule` says how many steps it trains and the learning rate of each (a
`TimeBudget`: as many as fit in a wall-clock budget). Every step: take the step's
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

from mxnet import np, npx

from .errors import TrainingDiverged
from .folder import due
from .metrics import IntervalMeans
from .signals import raise_if_stopped
from .optimizer import learning_rate
from .step import optimizer_step
from . import checkpoint as ckpt


@dataclasses.dataclass
class Schedule:
    """How long a run trains, and its learning rate at each step.

    total_steps optimizer steps; the learning rate rises linearly to lr over
    warmup_steps, then falls linearly to 0 at total_steps. epoch_steps: the steps of
    one pass over the data (fine-tuning), or 0.
    """
    lr: float
    warmup_steps: int
    total_steps: int
    epoch_steps: int = 0

    def steps(self, start_step):
        """The steps still to train after start_step (0: a new run)."""
        return range(start_step + 1, self.total_steps + 1)

    def learning_rate(self, step):
        return learning_rate(step, self.lr, self.warmup_steps, self.total_steps)

    def ends_stretch(self, step):
        """Whether `step` ends the run or an epoch: then the run logs, evaluates and
        checkpoints whatever the --*-every options say."""
        return step == self.total_steps or bool(
            self.epoch_steps and step % self.epoch_steps == 0)

    def writes_due(self, step):
        """Whether the schedule asks for an evaluation and checkpoint at step (a
        `TimeBudget` does, at each share of its time): never."""
        return False

    def wrote(self, kind, seconds):
        """Note the time of an evaluation or checkpoint (a `TimeBudget` needs it)."""

    def state(self):
        """What a checkpoint keeps of the schedule (a `TimeBudget`: its time spent)."""
        return {}


@dataclasses.dataclass
class TimeBudget:
    """A run that trains for a wall-clock budget (`pretrain --minutes`) instead of a
    number of steps, and its learning rate at each step.

    seconds: the budget; spent: the seconds a resumed run had already trained (saved in
    its checkpoints). The learning rate follows the elapsed share f of the budget: it
    rises over the first warmup_share of it (or over warmup_steps steps, if given) and
    falls linearly to 0 at its end: lr * min(f / warmup_share, (1 - f) / (1 - warmup_share))
    (with warmup_steps: lr * min(step / warmup_steps, 1 - f)). The run evaluates and
    checkpoints each time another eval_share of the budget has passed, and stops early
    enough for its last step, evaluation and checkpoint to end inside the budget: it
    measures the time of a step (the mean since the last evaluation or checkpoint) and
    of the last evaluation and checkpoint (RESERVE_SHARE of the budget until both were
    measured), and keeps MARGIN times the time of two steps and those to spare.

    The clock counts the loop's time (steps, evaluations, checkpoints), not the start-up
    before it (reading the data, building the model). The time a step takes varies, so
    a resumed budget run is not bit-identical to an uninterrupted one (a step budget is).
    """
    lr: float
    seconds: float
    warmup_share: float
    warmup_steps: int = None
    eval_share: float = 0.2
    spent: float = 0.0
    epoch_steps = 0
    total_steps = None  # not known in advance
    MARGIN = 1.5
    RESERVE_SHARE = 0.1

    def steps(self, start_step):
        """The steps to train after start_step, while the budget has room for them."""
        self.started = time.monotonic() - self.spent
        self.costs = {}  # the seconds of the last evaluation and of the last checkpoint
        self.step_time, self.stretch = 0.0, []  # the times of the steps since the last write
        self.previous = None  # when the previous step started
        self.now = self.elapsed()
        self.next_write = self.share_done() // self.eval_share + 1  # in eval_shares
        self.last_step = None
        step = start_step
        while self.last_step is None:
            step += 1
            self.now = self.elapsed()  # the step's time: one clock reading a step
            yield step
        self.seconds_trained = self.elapsed()  # with the last evaluation and checkpoint

    def elapsed(self):
        """The seconds of the budget spent so far (once the device has caught up)."""
        npx.waitall()
        return time.monotonic() - self.started

    def share_done(self):
        """The share of the budget spent when the current step began."""
        return min(self.now / self.seconds, 1.0)

    def learning_rate(self, step):
        share = self.share_done()
        if self.warmup_steps is not None:
            rise = step / self.warmup_steps if self.warmup_steps else 1.0
            return self.lr * min(rise, 1 - share)
        return self.lr * min(share / self.warmup_share, (1 - share) / (1 - self.warmup_share))

    def ends_stretch(self, step):
        """Whether `step` (about to run) ends the run: whether, after it, the budget
        would have no room for another step and then the last evaluation and checkpoint."""
        now = self.now
        if self.previous is not None:  # the previous step took now - previous
            self.stretch.append(now - self.previous)
            self.step_time = sum(self.stretch) / len(self.stretch)
        self.previous = now
        if self.last_step is None:
            needed = self.MARGIN * (2 * self.step_time + self.writes())
            if now + needed > self.seconds:
                self.last_step = step
        return step == self.last_step

    def writes_due(self, step):
        """Whether another eval_share of the budget has passed: evaluate and checkpoint."""
        if self.share_done() < self.next_write * self.eval_share:
            return False
        self.next_write = self.share_done() // self.eval_share + 1
        return True

    def writes(self):
        """The seconds the last evaluation and checkpoint will take."""
        if len(self.costs) < 2:
            return self.RESERVE_SHARE * self.seconds
        return sum(self.costs.values())

    def wrote(self, kind, seconds):
        """Note the time of an evaluation or checkpoint (kind: 'evaluate', 'save') the
        current step made."""
        self.costs[kind] = seconds
        self.previous, self.stretch = None, []  # the step that wrote is not timed

    def state(self):
        """What a checkpoint keeps of the schedule: the budget, its seconds spent and
        whether the run has ended it."""
        return {'budget_seconds': self.seconds, 'elapsed_seconds': self.elapsed(),
                'budget_ended': self.last_step is not None}


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
            optimizer_step(self.net, self.trainer, self.clip, self.loss_scale)
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
