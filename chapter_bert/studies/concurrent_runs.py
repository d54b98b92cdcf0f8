"""Do two pretraining runs at once share the machine, or collapse?

    python chapter_bert/studies/concurrent_runs.py [--threads 2] [--steps 200] [--pairs 2]
        [--env NAME=VALUE ...]

Runs `python -m d2lbert pretrain --steps STEPS --eval-every 0 --save-every 0` once alone,
then `--pairs` copies of it started together, each in a temporary folder removed
afterwards, with OMP_NUM_THREADS=THREADS (and any `--env`), and prints the median
training speed of each run (pairs per second, from its metrics.jsonl: every logged
interval but the first, which includes building the model). Sharing the cores fairly,
each of two runs keeps about half of its alone speed; see docs/performance.md.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import study_parser  # noqa: E402


def command(out, steps):
    return [sys.executable, '-m', 'd2lbert', 'pretrain', '--steps', str(steps),
            '--eval-every', '0', '--save-every', '0', '--out', out]


def median_speed(out):
    """Median pairs/s over the logged intervals of a finished run (the first left out)."""
    with open(os.path.join(out, 'metrics.jsonl'), encoding='utf-8') as f:
        speeds = [r['pairs_per_second'] for r in map(json.loads, f) if 'pairs_per_second' in r]
    return statistics.median(speeds[1:] or speeds)


def run_together(copies, steps, env):
    """Start `copies` runs at once; [(median pairs/s, wall seconds)] once all finished."""
    folder = tempfile.mkdtemp(prefix='d2lbert-concurrent-')
    try:
        outs = [os.path.join(folder, f'run{i}') for i in range(copies)]
        tic = time.time()
        procs = [subprocess.Popen(command(out, steps), env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for out in outs]
        results = []
        for proc, out in zip(procs, outs):
            _, err = proc.communicate()
            if proc.returncode != 0:
                sys.exit(f'a run failed (exit {proc.returncode}):\n{err}')
            results.append((median_speed(out), time.time() - tic))
        return results
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--threads', type=int, default=2, help='OMP_NUM_THREADS of each run')
    parser.add_argument('--steps', type=int, default=200)
    parser.add_argument('--pairs', type=int, default=2, help='runs started together')
    parser.add_argument('--env', action='append', default=[], metavar='NAME=VALUE',
                        help='an environment variable for every run (repeatable)')
    args = parser.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    env.update(item.split('=', 1) for item in args.env)
    (alone, seconds), = run_together(1, args.steps, env)
    print(f'alone: {alone:.0f} pairs/s ({seconds:.0f} s)')
    together = run_together(args.pairs, args.steps, env)
    for i, (speed, seconds) in enumerate(together):
        print(f'together, run {i}: {speed:.0f} pairs/s ({seconds:.0f} s), '
              f'{speed / alone:.2f} of alone')
    worst = min(speed for speed, _ in together)
    print(f'worst of {args.pairs} together keeps {worst / alone:.2f} of its alone speed')


if __name__ == '__main__':
    main()
