"""An hour does not drift: one long `d2lbert pretrain` on a big corpus, watched from outside.

    python chapter_bert/studies/hour_study.py --data CORPUS [--minutes 60] [--threads 2]
        [--home FOLDER] [--every 10]
        [--out chapter_bert/results/hour-study.json] [--plot docs/img/hour-study.svg]
    python chapter_bert/studies/hour_study.py --rederive   # the checks and plot again

It runs `python -m d2lbert pretrain --data CORPUS --minutes M` (its defaults otherwise)
in a temporary folder, with OMP_NUM_THREADS=--threads, D2LBERT_HOME=--home (where the
corpus's cache is: give the folder of an earlier run to start warm) and TMPDIR in a
folder of its own. Every --every seconds it reads, from /proc, of the process and its
children: the resident memory (VmRSS, and its anonymous part), the open file
descriptors and the threads; the files in the run folder, its checkpoints, and the
temporary files (d2lbert's temporary names in the run folder, anything in TMPDIR); and the
training records `metrics.jsonl` gained since (their `pairs_per_second`, the rate of the
training steps alone, evaluations and checkpoints not counted).

Minutes count from the first training record (reading the corpus comes before). The
results file holds every sample, the command, the CPU and the date, and the checks of
issue 43: resident memory in the last 10 minutes within 10% of minutes 5-15, pairs/s in
the last 10 minutes at least 0.9 of minutes 5-15 (medians), no file descriptors or
temporary files accumulating (the run's own files grow until --keep checkpoints are
there); the memory also against minutes 15-25, after the first held-out evaluation (at
a fifth of the time), whose graph gets its own memory once. --plot draws the three
curves. Time it alone on the machine.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from runner import check_results_file, run_record, study_parser, write_results  # noqa: E402

# minutes 5-15 of an hour against its last 10 (the same fractions of a shorter run), and
# minutes 15-25, after the first held-out evaluation (at a fifth of the time): it gives
# the evaluation's graph its memory once
EARLY, SETTLED, LATE = (5 / 60, 15 / 60), (15 / 60, 25 / 60), 10 / 60


def process_tree(pid):
    """[pid] of `pid` and every process descended from it (read from /proc)."""
    parents = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as f:
                    parents[int(entry)] = int(f.read().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def status_kb(pid, field):
    """A `field:` of /proc/pid/status in kB (0 if the process is gone)."""
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_descriptors(pid):
    try:
        return len(os.listdir(f'/proc/{pid}/fd'))
    except OSError:
        return 0


def files_under(folder):
    return sum(len(files) for _, _, files in os.walk(folder))


def temporaries_under(folder):
    """The files and folders of d2lbert's temporary names (`util.files.OUR_TEMPORARIES`)
    under folder: what a write in progress, or one a crash left, leaves there."""
    from d2lbert.util.files import OUR_TEMPORARIES
    return sum(name.startswith(OUR_TEMPORARIES) for _, folders, files in os.walk(folder)
               for name in folders + files)


def sample(pid, run_dir, tmp_dir):
    """One look at the running job: memory (MB), descriptors, threads, files."""
    tree = process_tree(pid)
    return {'processes': len(tree),
            'rss_mb': sum(status_kb(p, 'VmRSS') for p in tree) / 1024,
            'rss_anon_mb': sum(status_kb(p, 'RssAnon') for p in tree) / 1024,
            'open_fds': sum(open_descriptors(p) for p in tree),
            'threads': sum(status_kb(p, 'Threads') for p in tree),
            'run_files': files_under(run_dir) if os.path.isdir(run_dir) else 0,
            'checkpoints': (len(os.listdir(os.path.join(run_dir, 'checkpoints')))
                            if os.path.isdir(os.path.join(run_dir, 'checkpoints')) else 0),
            'temporaries': (temporaries_under(run_dir) if os.path.isdir(run_dir) else 0)
            + files_under(tmp_dir)}


def new_train_records(metrics_path, seen):
    """The training records of metrics.jsonl after the first `seen` lines (a line still
    being written is left for the next look), and the new count of lines read."""
    try:
        with open(metrics_path, encoding='utf-8') as f:
            lines = f.read().split('\n')
    except OSError:
        return [], seen
    whole = lines[:-1]  # the last piece has no newline yet (or is empty)
    records = [json.loads(line) for line in whole[seen:] if line.strip()]
    return [r for r in records if r.get('split') == 'train'], len(whole)


def watch(command, env, run_dir, tmp_dir, every):
    """Run `command` (its output echoed), sampling it every `every` seconds: [sample with
    'seconds' since it started and the new 'train' records], its exit code."""
    log_path = os.path.join(tmp_dir, '..', 'pretrain.log')
    with open(log_path, 'w') as log, open(log_path) as echo:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        start, samples, seen = time.time(), [], 0
        while process.poll() is None:
            time.sleep(every)
            print(''.join('  | ' + line for line in echo.readlines()), end='', flush=True)
            look = sample(process.pid, run_dir, tmp_dir)
            if process.poll() is not None:  # it ended while being looked at
                break
            records, seen = new_train_records(os.path.join(run_dir, 'metrics.jsonl'), seen)
            look.update(seconds=time.time() - start, train=records)
            samples.append(look)
            if records:
                print(f"{look['seconds'] / 60:5.1f} min  step {records[-1]['step']}  "
                      f"RSS {look['rss_mb']:.0f} MB  fds {look['open_fds']}  "
                      f"files {look['run_files']} (temporary {look['temporaries']})  "
                      f"{records[-1]['pairs_per_second']:.0f} pairs/s", flush=True)
        print(''.join('  | ' + line for line in echo.readlines()), end='', flush=True)
    return samples, process.returncode


def on_the_training_clock(samples):
    """The samples from the first one with a training record on, with 'minutes' since."""
    first = next(i for i, s in enumerate(samples) if s['train'])
    zero = samples[first]['seconds']
    return [dict(s, minutes=(s['seconds'] - zero) / 60) for s in samples[first:]]


def window(samples, start, end):
    return [s for s in samples if start <= s['minutes'] < end]


def medians(samples):
    rates = [r['pairs_per_second'] for s in samples for r in s['train']]
    return {'rss_mb': statistics.median(s['rss_mb'] for s in samples),
            'rss_anon_mb': statistics.median(s['rss_anon_mb'] for s in samples),
            'pairs_per_second': statistics.median(rates),
            'open_fds': statistics.median(s['open_fds'] for s in samples),
            'open_fds_max': max(s['open_fds'] for s in samples),
            'temporaries_max': max(s['temporaries'] for s in samples),
            'checkpoints_max': max(s['checkpoints'] for s in samples)}


def checks(samples, minutes):
    """Issue 43's figures: minutes 5-15 against the last 10 minutes (of an hour); the
    memory also against minutes 15-25."""
    end = samples[-1]['minutes']
    early_minutes = [EARLY[0] * minutes, EARLY[1] * minutes]
    settled_minutes = [SETTLED[0] * minutes, SETTLED[1] * minutes]
    early = medians(window(samples, *early_minutes))
    settled = medians(window(samples, *settled_minutes))
    late = medians(window(samples, end - LATE * minutes, end + 1))
    return {'early_minutes': early_minutes, 'settled_minutes': settled_minutes,
            'late_minutes': [round(end - LATE * minutes, 1), round(end, 1)],
            'early': early, 'settled': settled, 'late': late,
            'rss_late_over_early': late['rss_mb'] / early['rss_mb'],
            'rss_late_over_settled': late['rss_mb'] / settled['rss_mb'],
            'pairs_per_second_late_over_early': late['pairs_per_second']
            / early['pairs_per_second'],
            'rss_flat': abs(late['rss_mb'] / early['rss_mb'] - 1) <= 0.10,
            'speed_kept': late['pairs_per_second'] >= 0.9 * early['pairs_per_second'],
            'fds_flat': late['open_fds'] <= early['open_fds'],
            'temporaries_flat': late['temporaries_max'] <= early['temporaries_max']}


def plot(samples, path):
    """Resident memory, training pairs/s and open descriptors against minutes, as SVG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from d2lbert.run.files import write_file_atomically
    minutes = [s['minutes'] for s in samples]
    rate_minutes = [s['minutes'] for s in samples for _ in s['train']]
    rates = [r['pairs_per_second'] for s in samples for r in s['train']]
    figure, axes = plt.subplots(3, 1, figsize=(6, 6), sharex=True)
    axes[0].plot(minutes, [s['rss_mb'] for s in samples], label='resident')
    axes[0].plot(minutes, [s['rss_anon_mb'] for s in samples], label='anonymous')
    axes[0].set_ylabel('memory (MB)')
    axes[0].set_ylim(bottom=0)
    axes[0].legend(loc='lower right')
    axes[1].plot(rate_minutes, rates, '.', markersize=2)
    axes[1].set_ylabel('pairs/s')
    axes[1].set_ylim(bottom=0)
    axes[2].plot(minutes, [s['open_fds'] for s in samples], label='open descriptors')
    axes[2].plot(minutes, [s['run_files'] for s in samples], label='files of the run')
    axes[2].plot(minutes, [s['temporaries'] for s in samples], label='temporary files')
    axes[2].set_ylim(bottom=0)
    axes[2].legend(loc='lower right')
    axes[2].set_xlabel('minutes of training')
    figure.tight_layout()
    write_file_atomically('--plot', path, lambda f: figure.savefig(f, format='svg'))


def rederive(out, plot_path, minutes):
    """The checks of the samples in the results file `out`, with today's windows,
    written back to it; the plot redrawn."""
    with open(out, encoding='utf-8') as f:
        results = json.load(f)
    # a look taken as the job ended found no process (what the first version recorded)
    results['samples'] = [s for s in results['samples'] if s['rss_mb'] > 0]
    results['checks'] = checks(results['samples'], minutes)
    write_results('hour_study', out, results)
    plot(results['samples'], plot_path)
    print(json.dumps(results['checks'], indent=1))


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--data', help='the corpus (as pretrain --data)')
    parser.add_argument('--minutes', type=float, default=60)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--home', help='D2LBERT_HOME of the run (default: a new folder)')
    parser.add_argument('--every', type=float, default=10, help='seconds between looks')
    parser.add_argument('--out', default=os.path.join(ROOT, 'chapter_bert', 'results',
                                                      'hour-study.json'))
    parser.add_argument('--plot', default=os.path.join(ROOT, 'docs', 'img', 'hour-study.svg'))
    parser.add_argument('--rederive', action='store_true',
                        help="recompute the checks and the plot of --out's samples "
                        '(no run; --data is not read)')
    args = parser.parse_args(argv)
    if args.rederive:
        return rederive(args.out, args.plot, args.minutes)
    if args.data is None:
        parser.error('--data is required (the corpus to pretrain on)')
    check_results_file('hour_study', args.out, {'--data': args.data})
    check_results_file('hour_study', args.plot, {'--data': args.data, '--out': args.out})
    with tempfile.TemporaryDirectory() as scratch:
        run_dir, tmp_dir = os.path.join(scratch, 'run'), os.path.join(scratch, 'tmp')
        os.makedirs(tmp_dir)
        home = args.home or os.path.join(scratch, 'home')
        flags = ['--data', args.data, '--minutes', str(args.minutes), '--no-progress']
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), D2LBERT_HOME=home,
                   TMPDIR=tmp_dir, PYTHONPATH=ROOT)
        samples, code = watch([sys.executable, '-m', 'd2lbert', 'pretrain', *flags,
                               '--out', run_dir], env, run_dir, tmp_dir, args.every)
        if code != 0:
            sys.exit(f'hour_study: d2lbert pretrain ended with exit code {code}')
        with open(os.path.join(run_dir, 'run.json'), encoding='utf-8') as f:
            options = json.load(f).get('options', {})
    samples = on_the_training_clock(samples)
    results = {**run_record('hour_study', argv),
               'pretrain': ['d2lbert', 'pretrain', *flags], 'threads': args.threads,
               'options': options, 'checks': checks(samples, args.minutes),
               'samples': samples}
    write_results('hour_study', args.out, results)
    plot(samples, args.plot)
    print(json.dumps(results['checks'], indent=1))


if __name__ == '__main__':
    main()
