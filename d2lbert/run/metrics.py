"""Training metrics: one JSON object per line in metrics.jsonl, curves in loss.png.

In pretraining, a 'train' record (also shown on the progress bar and plotted in loss.png) holds:

* mlm_loss, nsp_loss: the mean over the steps since the previous 'train' record (as
  Hugging Face's Trainer logs), of each step's loss (itself the mean over the step's
  real prediction slots or sentence pairs);
* mlm_accuracy, nsp_accuracy: of the logged step's batch only (computing them on every
  step would cost an argmax over the logits on every step);
* lr: the learning rate of the logged step; pairs_per_second: sentence pairs trained
  per second since the previous record.

A 'valid' record holds the held-out evaluation (`evaluate.evaluate`) at its step.
"""
import json
import os


class IntervalMeans:
    """Means of per-step metrics over the steps since the last `pop_means()`.

    The per-step values are scalar device arrays (as `pretraining.step.forward_backward`
    returns them); they are summed on the device, so a step costs no device-to-host copy.
    """

    def __init__(self, names):
        self.names = tuple(names)
        self.sums, self.count = None, 0

    def add(self, values):
        """Add one step's values, in the order of `names`."""
        values = list(values)
        self.sums = values if self.sums is None else [
            total + value for total, value in zip(self.sums, values)]
        self.count += 1

    def pop_means(self):
        """{name: mean as a float} over the steps added since the last call (one copy to
        the host per name); the next interval starts empty."""
        if not self.count:
            raise ValueError('IntervalMeans.pop_means: no step was added since the last call')
        means = {name: float(total) / self.count for name, total in zip(self.names, self.sums)}
        self.sums, self.count = None, 0
        return means


class MetricsLog:
    """Append-only metrics.jsonl; `truncate(step)` drops what a killed run logged after
    the checkpoint it resumes from."""

    def __init__(self, out_dir):
        self.path = os.path.join(out_dir, 'metrics.jsonl')
        self.plot_path = os.path.join(out_dir, 'loss.png')

    def records(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.strip().endswith('}')]

    def truncate(self, step):
        kept = [r for r in self.records() if r['step'] <= step]
        tmp = self.path + '.tmp'
        with open(tmp, 'w') as f:
            f.writelines(json.dumps(r) + '\n' for r in kept)
        os.replace(tmp, self.path)

    def write(self, record):
        with open(self.path, 'a') as f:
            f.write(json.dumps(record) + '\n')

    def plot(self, loss_keys=('mlm_loss', 'nsp_loss'),
             score_keys=('mlm_accuracy', 'nsp_accuracy', 'mlm_baseline_accuracy'),
             score_split='valid'):
        """Training loss curves and held-out scores (records of score_split), headless
        (no pyplot state)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        records = self.records()
        train = [r for r in records if r['split'] == 'train']
        held_out = [r for r in records if r['split'] == score_split]
        figure = Figure(figsize=(9, 3.5))
        FigureCanvasAgg(figure)
        losses, scores = figure.subplots(1, 2)
        for key in loss_keys:
            losses.plot([r['step'] for r in train], [r[key] for r in train], label=key)
        losses.set(xlabel='step', ylabel='loss', title='training loss')
        losses.legend()
        for key in score_keys:
            scores.plot([r['step'] for r in held_out], [r[key] for r in held_out], 'o-',
                        label=key)
        scores.set(xlabel='step', ylabel='score', title=f'{score_split} scores')
        scores.legend()
        figure.tight_layout()
        figure.savefig(self.plot_path, dpi=100)
