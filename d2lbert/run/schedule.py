"""How long a run trains and its learning rate at each step: `learning_rate` (BERT's
warmup and linear decay), a `Schedule` of a number of steps, a `TimeBudget` of
wall-clock time (`pretrain --minutes`). The training loop (`loop.py`) asks the run's
schedule which steps to train and at which rate.
"""
import dataclasses
import time

from mxnet import npx


def learning_rate(step, base_lr, warmup_steps, total_steps):
    """Rate of step (from 1): linear warmup to base_lr, then linear decay to 0 at total_steps."""
    if warmup_steps and step <= warmup_steps:
        return base_lr * step / warmup_steps
    remaining = max(total_steps - step, 0) / max(total_steps - warmup_steps, 1)
    return base_lr * remaining


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
