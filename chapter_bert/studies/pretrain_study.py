"""How reliably `d2lbert pretrain` learns: the runs behind the pretraining chapter's tables.

    python chapter_bert/studies/pretrain_study.py [--jobs 2] [--only default,plain,...]
        [--wikitext ../shared/data/wikitext-2/wiki.valid.tokens]
        [--out chapter_bert/results/pretrain-study.json]

Every run is `python -m d2lbert pretrain` in a process of its own, with OMP_NUM_THREADS
set, in a temporary folder; `--jobs` of them at a time. The parts (`--only`):

* default: the default job (bundled corpus, 500 steps) for seeds 0-7, with 1 and with 2
  threads (were a sum's rounding to depend on the thread count, so would the trajectory);
* plain: the same with --plain (the book's model on MXNet's operators), seeds 0-7, 1 thread;
* earlier: the recipe of earlier versions (50 warmup steps, dropout 0.2, static masks),
  seeds 0-7, 1 thread;
* changes: seed 0 with one flag changed (--warmup 20, --clip 0, --lr 0.002, --lr 0.0005),
  each of which must either learn or print the collapse warning;
* wikitext: real text. The shared WikiText-2 file (`--wikitext`, WikiText-2's validation
  split: 60 articles) is split by articles: the first 48 become wiki.train.tokens, the
  last 12 wiki.valid.tokens; then `--vocab words --preset book --batch-size 64 --lr 1e-3
  --steps 2000` (the book's vocabulary, size, batch and lr, which were the defaults for
  real text until word pieces and the small size became them);
* wikitext-static: the same with --masking static (masks drawn once, as the book);
* cpus-avx512, cpus-avx2: the default job, as the README runs it (2 threads), for seeds
  0-3, once as this CPU runs it and once as a CPU with AVX2 but no AVX-512 would
  (oneDNN held to AVX2, OpenBLAS's Haswell kernels, d2lbert's kernels compiled for
  Haswell): the range of figures users see on the CPUs they have. Run it on a CPU with
  AVX-512.

Each run's held-out evaluations (metrics.jsonl), collapse warnings and time go into the
results file, with the machine and the date; `--rederive-warnings` recomputes the warnings
of the recorded evaluations with today's rule (d2lbert/pretraining/collapse.py), without
running anything, and prints the tables of docs/pretraining.md; the chapter and the docs
quote it, and tests/test_quoted_numbers.py checks them against it. Times are wall-clock
seconds of runs that shared the machine with each other (`--jobs`): compare accuracies,
not times.
"""
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(HERE), 'results', 'pretrain-study.json')
sys.path.insert(0, HERE)
from runner import (DATA, check_results_file, machine, run_record, study_parser,  # noqa: E402
                    write_results)
SEEDS = range(8)
THRESHOLDS = {'mlm_accuracy': 0.45, 'nsp_accuracy': 0.75}
CHANGES = (('--warmup', '20'), ('--clip', '0'), ('--lr', '0.002'), ('--lr', '0.0005'))
EARLIER_RECIPE = ['--warmup', '50', '--dropout', '0.2', '--masking', 'static']
WIKITEXT_TRAIN_ARTICLES = 48
CPU_SEEDS = range(4)
# what a CPU's instruction set changes: the kernels of oneDNN, OpenBLAS and d2lbert
CPU_TARGETS = {'cpus-avx512': {},
               'cpus-avx2': {'DNNL_MAX_CPU_ISA': 'AVX2', 'OPENBLAS_CORETYPE': 'Haswell',
                             'D2LBERT_KERNEL_MARCH': 'haswell'}}


def planned_runs(parts, wikitext_dir):
    """[(part, seed, threads, flags, environment)] of the runs in `parts`."""
    return [(*run, CPU_TARGETS.get(run[0], {})) for run in planned_flags(parts, wikitext_dir)]


def planned_flags(parts, wikitext_dir):
    """[(part, seed, threads, flags)] of the runs in `parts`."""
    runs = []
    if 'default' in parts:
        runs += [('default', seed, threads, []) for threads in (1, 2) for seed in SEEDS]
    if 'plain' in parts:
        runs += [('plain', seed, 1, ['--plain']) for seed in SEEDS]
    if 'earlier' in parts:
        runs += [('earlier', seed, 1, EARLIER_RECIPE) for seed in SEEDS]
    if 'changes' in parts:
        runs += [('changes', 0, 1, list(change)) for change in CHANGES]
    real_text = ['--data', wikitext_dir, '--vocab', 'words', '--preset', 'book',
                 '--batch-size', '64', '--lr', '1e-3', '--steps', '2000', '--eval-every', '500']
    if 'wikitext' in parts:
        runs += [('wikitext', 0, 2, real_text)]
    if 'wikitext-static' in parts:
        runs += [('wikitext-static', 0, 2, real_text + ['--masking', 'static'])]
    runs += [(part, seed, 2, []) for part in CPU_TARGETS if part in parts for seed in CPU_SEEDS]
    return runs


def split_wikitext(path, folder):
    """`data.articles.split_articles` with WIKITEXT_TRAIN_ARTICLES to train on; exits
    with one line naming --wikitext when the file has too few articles."""
    from d2lbert.data.articles import split_articles
    try:
        return split_articles(path, folder, WIKITEXT_TRAIN_ARTICLES)
    except ValueError as err:
        raise SystemExit(f'--wikitext {err}')


def run_pretrain(index, part, seed, threads, flags, environment, scratch):
    """Run number `index`, one `d2lbert pretrain` with `environment` added to this
    process's; returns its record for the results file."""
    out = os.path.join(scratch, f'{index}-{part}-seed{seed}-threads{threads}')
    command = [sys.executable, '-m', 'd2lbert', 'pretrain', '--seed', str(seed), '--out', out,
               '--save-every', '0', '--no-progress', *flags]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), **environment)
    tic = time.time()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.time() - tic
    if done.returncode != 0:
        raise SystemExit(f'{" ".join(command)} failed:\n{done.stderr[-3000:]}')
    with open(os.path.join(out, 'metrics.jsonl'), encoding='utf-8') as f:
        records = [json.loads(line) for line in f]
    evals = [r for r in records if r['split'] == 'valid']
    train = [r for r in records if r['split'] == 'train']
    shown_flags = re.sub(r'--data \S+', '--data FOLDER', ' '.join(flags))  # no temp path
    return {'part': part, 'seed': seed, 'threads': threads, 'flags': shown_flags,
            'environment': environment, 'date': datetime.date.today().isoformat(),
            'seconds': round(seconds, 1), 'evaluations': evals,
            'final': evals[-1], 'final_train_mlm_loss': train[-1]['mlm_loss'],
            'warnings': [r['warning'] for r in evals if 'warning' in r]}


def summarize(records):
    """Per part: the number of runs, the lowest final held-out accuracies, the highest
    final training MLM loss and the longest time, how many runs reach THRESHOLDS, and
    the scores of ignoring the input on the part's held-out data."""
    summary = {}
    for part in sorted({r['part'] for r in records}):
        runs = [r for r in records if r['part'] == part]
        finals = [r['final'] for r in runs]
        summary[part] = {
            'runs': len(runs),
            'min_mlm_accuracy': min(f['mlm_accuracy'] for f in finals),
            'min_nsp_accuracy': min(f['nsp_accuracy'] for f in finals),
            'max_mlm_accuracy': max(f['mlm_accuracy'] for f in finals),
            'max_nsp_accuracy': max(f['nsp_accuracy'] for f in finals),
            'max_train_mlm_loss': max(r['final_train_mlm_loss'] for r in runs),
            'max_minutes': max(r['seconds'] for r in runs) / 60,
            'reaching_thresholds': sum(all(f[k] >= v for k, v in THRESHOLDS.items())
                                       for f in finals),
            'mlm_baseline_accuracy': finals[0]['mlm_baseline_accuracy'],
            'nsp_majority_accuracy': finals[0].get('nsp_majority_accuracy')}
    return summary


def markdown_table(records):
    """The runs as a markdown table: part, flags, seed, threads, final accuracies."""
    lines = ['| part | flags | seed | threads | step | MLM acc. | NSP acc. | warning |',
             '|---|---|---|---|---|---|---|---|']
    for r in records:
        f = r['final']
        lines.append(f"| {r['part']} | {r['flags']} | {r['seed']} | {r['threads']} | "
                     f"{f['step']} | {f['mlm_accuracy']:.3f} | {f['nsp_accuracy']:.3f} | "
                     f"{'yes' if r['warnings'] else ''} |")
    return '\n'.join(lines)


def earlier_runs(path):
    """The runs already in results file `path` (a study can be run part by part)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding='utf-8') as f:
        return json.load(f)['runs']


def marked(value, key, digits=2):
    """`value` rounded as docs/pretraining.md shows it, with the marker that ties it to
    `key` of the results file (tests/test_quoted_numbers.py checks the pair)."""
    return f'{value:.{digits}f}<!-- result pretrain-study.json {key} -->'


def readme_tables(results):
    """The tables of the study in docs/pretraining.md, every number marked: the held-out
    MLM / NSP accuracy at the last step of each bundled-corpus run, by seed, then the single
    changes of seed 0's recipe."""
    rows = {}
    for index, r in enumerate(results['runs']):
        if r['part'] in ('default', 'plain', 'earlier'):
            cell = (marked(r['final']['mlm_accuracy'], f'runs.{index}.final.mlm_accuracy')
                    + ' / ' + marked(r['final']['nsp_accuracy'],
                                     f'runs.{index}.final.nsp_accuracy'))
            rows.setdefault((r['part'], r['threads']), {})[r['seed']] = cell
    names = {'default': 'default', 'plain': '`--plain`', 'earlier': 'earlier recipe'}
    lines = ['| run, threads | ' + ' | '.join(f'seed {seed}' for seed in SEEDS) + ' |',
             '|---' * (len(SEEDS) + 1) + '|']
    for (part, threads), cells in rows.items():
        lines.append(f'| {names[part]}, {threads} | '
                     + ' | '.join(cells.get(seed, '') for seed in SEEDS) + ' |')
    lines += ['', '| seed 0 with | MLM | NSP | collapse warning at steps |', '|---|---|---|---|']
    for index, r in enumerate(results['runs']):
        if r['part'] == 'changes':
            steps = [e['step'] for e in r['evaluations'] if 'warning' in e]
            mlm, nsp = (marked(r['final'][name], f'runs.{index}.final.{name}')
                        for name in ('mlm_accuracy', 'nsp_accuracy'))
            lines.append(f"| `{r['flags']}` | {mlm} | {nsp} | "
                         f"{', '.join(map(str, steps)) or 'none'} |")
    return '\n'.join(lines)


def warmup_steps_of(flags):
    """The warmup of a run with `flags` (a string): its --warmup, or a fifth of its
    --steps (pretrain's default, 500 steps)."""
    words = flags.split()
    steps = int(words[words.index('--steps') + 1]) if '--steps' in words else 500
    return int(words[words.index('--warmup') + 1]) if '--warmup' in words else steps // 5


def rederive_warnings(results):
    """Replace each recorded evaluation's 'warning' and each run's 'warnings' by what
    `collapse_warning` says of them now; returns `results`."""
    from d2lbert.pretraining.collapse import collapse_warning
    for run in results['runs']:
        for evaluation in run['evaluations']:
            evaluation.pop('warning', None)
            warning = collapse_warning(evaluation, warmup_steps_of(run['flags']))
            if warning:
                evaluation['warning'] = warning
        run['final'] = run['evaluations'][-1]
        run['warnings'] = [e['warning'] for e in run['evaluations'] if 'warning' in e]
    return results


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--only', default='wikitext,default,changes,plain,earlier,'
                        'cpus-avx512,cpus-avx2')
    parser.add_argument('--jobs', type=int, default=2)
    parser.add_argument('--wikitext', default=os.path.join(DATA, 'wikitext-2',
                                                           'wiki.valid.tokens'))
    parser.add_argument('--out', default=RESULTS)
    parser.add_argument('--readme', action='store_true',
                        help="only print the docs' tables of the results file --out")
    parser.add_argument('--rederive-warnings', action='store_true',
                        help='recompute the collapse warnings of the evaluations recorded '
                             'in --out with the current rule, rewrite it, print the tables')
    args = parser.parse_args(argv)
    if args.rederive_warnings:
        with open(args.out, encoding='utf-8') as f:
            results = rederive_warnings(json.load(f))
        with open(args.out, 'w', encoding='utf-8') as f:
            json.dump(results, f, indent=1)
        print(readme_tables(results))
        return
    if args.readme:
        with open(args.out, encoding='utf-8') as f:
            print(readme_tables(json.load(f)))
        return
    check_results_file('pretrain_study', args.out, {'--wikitext': args.wikitext})
    parts = args.only.split(',')
    with tempfile.TemporaryDirectory() as scratch:
        wikitext_dir = (split_wikitext(args.wikitext, os.path.join(scratch, 'wikitext'))
                        if any(p.startswith('wikitext') for p in parts) else None)
        runs_dir = os.path.join(scratch, 'runs')
        os.makedirs(runs_dir)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_pretrain, index, *run, runs_dir)
                       for index, run in enumerate(planned_runs(parts, wikitext_dir))]
            records = []
            for future in futures:
                records.append(future.result())
                print(markdown_table(records[-1:]).split('\n')[-1], flush=True)
    records = [r for r in earlier_runs(args.out) if r['part'] not in parts] + records
    results = {**run_record('pretrain_study', [], machine),
               'thresholds': THRESHOLDS, 'summary': summarize(records), 'runs': records}
    write_results('pretrain_study', args.out, results)
    print(markdown_table(records))
    print(json.dumps(results['summary'], indent=1))


if __name__ == '__main__':
    main()
