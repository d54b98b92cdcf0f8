"""Training metrics: one JSON object per line in metrics.jsonl, curves in loss.png."""
import json
import os


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

    def plot(self):
        """Loss curves (train) and held-out accuracies, headless (no pyplot state)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        records = self.records()
        train = [r for r in records if r['split'] == 'train']
        valid = [r for r in records if r['split'] == 'valid']
        figure = Figure(figsize=(9, 3.5))
        FigureCanvasAgg(figure)
        losses, accuracies = figure.subplots(1, 2)
        for key in ('mlm_loss', 'nsp_loss'):
            losses.plot([r['step'] for r in train], [r[key] for r in train], label=key)
        losses.set(xlabel='step', ylabel='loss', title='training loss')
        losses.legend()
        for key in ('mlm_accuracy', 'nsp_accuracy', 'mlm_baseline_accuracy'):
            accuracies.plot([r['step'] for r in valid], [r[key] for r in valid], 'o-',
                            label=key)
        accuracies.set(xlabel='step', ylabel='accuracy', title='held-out accuracy')
        accuracies.legend()
        figure.tight_layout()
        figure.savefig(self.plot_path, dpi=100)
