"""What a bigger corpus costs: `d2lbert pretrain` on 2M, 10M and 100M words of text.

    python chapter_bert/studies/scale_study.py [--sizes 2,10,100] [--threads 2] [--quick]
        [--wikitext ../shared/data/wikitext-2/wiki.valid.tokens]
        [--out chapter_bert/results/scale-study.json]
    python chapter_bert/studies/scale_study.py --readme [--out ...]

For each size (--sizes, in millions of words) it makes a corpus in a temporary folder
(under $TMPDIR): wiki.train.tokens holds the lines of the WikiText-2 file --wikitext
(paragraphs, headings and blank lines, as WikiText has them) shuffled with a fixed seed,
shuffled again and repeated until the corpus has that many words (space-separated
tokens); wiki.valid.tokens holds the first 600 lines of the first shuffle (text of the
training file too: this study times, it does not evaluate). Then it runs, with
OMP_NUM_THREADS=--threads,

    python -m d2lbert pretrain --data FOLDER --steps 20 --log-every 1 --eval-every 0
        --save-every 0 --no-progress --out RUN

twice: with a new, empty D2LBERT_HOME (cold: the vocabulary is learned and the corpus
encoded and cached) and again with the same home (warm: the cache is read). Of each run
it records the seconds from the start of the process to the first training record of
RUN/metrics.jsonl (the first step done), the seconds of the whole run, the peak resident
memory (the kernel's ru_maxrss of the process, as /usr/bin/time reports it) and the CPU
seconds, the median `pairs_per_second` of the training records, and the size on disk of
D2LBERT_HOME/cache before and after it. The corpus was just written, so "cold" is
d2lbert's cache, not the operating system's.

The results file (written again after each size) holds them with the command, the CPU
and the date; --readme prints the table of docs/pretraining.md from it, every number with
its marker (tests/test_quoted_numbers.py checks them). --quick: 0.05M and 0.1M words,
3 steps of the book's size, for tests/test_scale_study.py. Time it alone on the machine.
"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from runner import (DATA, check_results_file, fail, run_record, study_parser,  # noqa: E402
                    write_results)

RESULTS = os.path.join(ROOT, 'chapter_bert', 'results', 'scale-study.json')
WIKITEXT = os.path.join(DATA, 'wikitext-2', 'wiki.valid.tokens')
LOGGING = ['--log-every', '1', '--eval-every', '0', '--save-every', '0', '--no-progress']
STUDY = {'valid_lines': 600, 'pretrain': ['--steps', '20', *LOGGING]}
QUICK = {'sizes': '0.05,0.1', 'valid_lines': 100,
         'pretrain': ['--steps', '3', '--preset', 'book', '--batch-size', '32', *LOGGING]}
SEED = 0
MB, MIB = 1e6, 2 ** 20  # files in MB (10^6 bytes), memory in MiB (2^20 bytes)
POLL_SECONDS = 0.1


def parse_sizes(text):
    """[millions of words] of `--sizes` ('2,10,100'), or None if it is not a list of
    positive numbers."""
    try:
        sizes = [float(part) for part in text.split(',')]
    except ValueError:
        return None
    return sizes if all(0 < size < 1e4 for size in sizes) else None


def size_name(million_words):
    """The key of a size in the results file: '2M', '0.05M'."""
    return f'{million_words:g}M'


def make_corpus(lines, million_words, valid_lines, folder):
    """Write folder/wiki.train.tokens (`lines` shuffled, shuffled again and repeated until
    million_words * 10^6 words) and folder/wiki.valid.tokens (the first `valid_lines`
    lines of the first shuffle); returns {'words', 'million_words', 'mb'} of the train
    file."""
    os.makedirs(folder)
    rng, target, words = random.Random(SEED), int(million_words * 1e6), 0
    order = list(lines)
    rng.shuffle(order)
    with open(os.path.join(folder, 'wiki.valid.tokens'), 'w', encoding='utf-8') as f:
        f.writelines(order[:valid_lines])
    with open(os.path.join(folder, 'wiki.train.tokens'), 'w', encoding='utf-8') as f:
        while words < target:
            for line in order:
                f.write(line)
                words += len(line.split())
                if words >= target:
                    break
            rng.shuffle(order)
    size = os.path.getsize(os.path.join(folder, 'wiki.train.tokens'))
    return {'words': words, 'million_words': words / 1e6, 'mb': size / MB}


def disk_mb(folder):
    """The disk space of the files under folder, in MB (as `du`: allocated blocks)."""
    return sum(os.lstat(os.path.join(parent, name)).st_blocks * 512
               for parent, _, files in os.walk(folder) for name in files) / MB


def train_records(run_dir):
    """The whole 'train' records of run_dir/metrics.jsonl so far."""
    try:
        with open(os.path.join(run_dir, 'metrics.jsonl'), encoding='utf-8') as f:
            lines = f.read().split('\n')[:-1]  # the last piece has no newline yet
    except OSError:
        return []
    return [record for record in map(json.loads, filter(None, lines))
            if record.get('split') == 'train']


def watch(command, env, run_dir, log_path):
    """Run `command` (its output echoed), looking for its first training record every
    POLL_SECONDS: (exit code, seconds to the first record or None, seconds, rusage)."""
    with open(log_path, 'w') as log, open(log_path) as echo:
        start = time.monotonic()
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        first_step = None
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            seconds = time.monotonic() - start
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                break
            if first_step is None and train_records(run_dir):
                first_step = seconds
            print(''.join('  | ' + line for line in echo.readlines()), end='', flush=True)
            time.sleep(POLL_SECONDS)
        print(''.join('  | ' + line for line in echo.readlines()), end='', flush=True)
    return process.returncode, first_step, seconds, usage


def measure_run(folder, home, run_dir, args, pretrain_flags):
    """One `d2lbert pretrain` on the corpus in folder with D2LBERT_HOME=home: its
    record (seconds, MiB, MB, pairs/s); exits with one line if it fails."""
    command = [sys.executable, '-m', 'd2lbert', 'pretrain', '--data', folder,
               *pretrain_flags, '--out', run_dir]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), D2LBERT_HOME=home,
               PYTHONPATH=ROOT)
    cache_before = disk_mb(os.path.join(home, 'cache'))
    code, first_step, seconds, usage = watch(command, env, run_dir, run_dir + '.log')
    records = train_records(run_dir)
    if code != 0 or not records:
        sys.exit(f'scale_study: d2lbert pretrain ended with exit code {code} '
                 f'(its output is above)')
    if first_step is None:  # it ended between two looks
        first_step = seconds
    return {'first_step_seconds': first_step, 'seconds': seconds,
            'cpu_seconds': usage.ru_utime + usage.ru_stime,
            'peak_rss_mib': usage.ru_maxrss * 1024 / MIB,
            'pairs_per_second': statistics.median(r['pairs_per_second'] for r in records),
            'cache_mb_before': cache_before, 'cache_mb': disk_mb(os.path.join(home, 'cache'))}


def measure_size(lines, million_words, scratch, args, plan):
    """Make the corpus of one size, pretrain on it cold then warm: its results."""
    name = size_name(million_words)
    folder, home = os.path.join(scratch, name), os.path.join(scratch, name + '-home')
    print(f'scale_study: {name} words: making the corpus', flush=True)
    corpus = make_corpus(lines, million_words, plan['valid_lines'], folder)
    print(f"scale_study: {name} words: {corpus['mb']:.1f} MB, {corpus['words']:,} words",
          flush=True)
    result = {'corpus': corpus}
    for start in ('cold', 'warm'):
        run = measure_run(folder, home, os.path.join(scratch, f'{name}-{start}'),
                          args, plan['pretrain'])
        print(f"scale_study: {name} words, {start}: first step after "
              f"{run['first_step_seconds']:.1f} s, whole run {run['seconds']:.1f} s, "
              f"peak RSS {run['peak_rss_mib']:,.0f} MiB, cache {run['cache_mb']:.1f} MB, "
              f"{run['pairs_per_second']:.0f} pairs/s", flush=True)
        result[start] = run
    result['cache_over_corpus'] = result['cold']['cache_mb'] / corpus['mb']
    return result


def with_ratios(corpora):
    """Each size's peak RSS (cold) over the smallest corpus's, added to its results."""
    smallest = min(corpora.values(), key=lambda c: c['corpus']['words'])
    for result in corpora.values():
        result['rss_over_smallest'] = (result['cold']['peak_rss_mib']
                                       / smallest['cold']['peak_rss_mib'])
    return corpora


def marked(value, key, digits, unit=''):
    """`value` rounded as docs/pretraining.md shows it, its unit, and the marker that
    ties it to `key` of the results file (tests/test_quoted_numbers.py checks the pair)."""
    return f'{value:,.{digits}f}{unit}<!-- result scale-study.json {key} -->'


# The columns of the table: (header, [(the key under a size, digits, unit, after)]).
COLUMNS = (
    ('corpus', [('corpus.mb', 0, ' MB', ', '), ('corpus.million_words', 1, 'M', ' words')]),
    ('first step, cold', [('cold.first_step_seconds', 1, ' s', '')]),
    ('first step, warm', [('warm.first_step_seconds', 1, ' s', '')]),
    ('peak RSS (cold)', [('cold.peak_rss_mib', 0, ' MiB', ' ('),
                         ('rss_over_smallest', 2, 'x', ' the smallest)')]),
    ('cache', [('cold.cache_mb', 1, ' MB', ' ('),
               ('cache_over_corpus', 2, 'x', ' the corpus)')]),
    ('pairs/s (median, cold)', [('cold.pairs_per_second', 0, '', '')]))


def lookup(result, key):
    """The value at a dotted key ('cold.cache_mb') of one size's results."""
    for part in key.split('.'):
        result = result[part]
    return result


def readme_table(results):
    """The table of docs/pretraining.md: one row per corpus size, every number marked,
    then the machine, the date and the command."""
    lines = ['| ' + ' | '.join(header for header, _ in COLUMNS) + ' |',
             '|---' * len(COLUMNS) + '|']
    for name, result in results['corpora'].items():
        cells = [''.join(marked(lookup(result, key), f'corpora.{name}.{key}', digits, unit)
                         + after for key, digits, unit, after in numbers)
                 for _, numbers in COLUMNS]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines + ['', f"{results['machine']['model']}, {results['date']}, "
                              f"OMP_NUM_THREADS={results['threads']}: `{results['command']}`"])


def checked_inputs(args):
    """(the --wikitext lines, the sizes) or one line and exit code 2."""
    sizes = parse_sizes(QUICK['sizes'] if args.quick else args.sizes)
    if sizes is None:
        fail('scale_study', '--sizes must be positive numbers of millions of words '
             'separated by commas, e.g. 2,10,100')
    if args.threads < 1:
        fail('scale_study', '--threads must be at least 1')
    try:
        with open(args.wikitext, encoding='utf-8') as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as err:
        fail('scale_study', f'--wikitext {args.wikitext}: {getattr(err, "strerror", None) or err}')
    if not any(line.split() for line in lines):
        fail('scale_study', f'--wikitext {args.wikitext}: no words in it')
    return lines, sizes


def arguments(argv):
    parser = study_parser(__doc__)
    parser.add_argument('--sizes', default='2,10,100', help='millions of words')
    parser.add_argument('--threads', type=int, default=2, help='OMP_NUM_THREADS of the runs')
    parser.add_argument('--quick', action='store_true', help=f"sizes {QUICK['sizes']}, "
                        'a few steps of the book size (for the tests)')
    parser.add_argument('--wikitext', default=WIKITEXT, help='the text the corpora repeat')
    parser.add_argument('--out', default=RESULTS, help='the results file')
    parser.add_argument('--readme', action='store_true',
                        help="only print the docs' table of the results file --out")
    return parser.parse_args(argv)


def main(argv=None):
    args = arguments(argv)
    if args.readme:
        if not os.path.isfile(args.out):
            fail('scale_study', f'--out {args.out}: no such results file')
        with open(args.out, encoding='utf-8') as f:
            print(readme_table(json.load(f)))
        return
    lines, sizes = checked_inputs(args)
    check_results_file('scale_study', args.out, {'--wikitext': args.wikitext})
    plan = QUICK if args.quick else STUDY
    results = {**run_record('scale_study', argv),
               'quick': args.quick, 'threads': args.threads,
               'pretrain': ['d2lbert', 'pretrain', '--data', 'FOLDER', *plan['pretrain'],
                            '--out', 'RUN'],
               'valid_lines': plan['valid_lines'], 'corpora': {}}
    with tempfile.TemporaryDirectory(prefix='scale-study-') as scratch:
        for million_words in sizes:
            results['corpora'][size_name(million_words)] = measure_size(
                lines, million_words, scratch, args, plan)
            with_ratios(results['corpora'])
            write_results('scale_study', args.out, results)
    print(readme_table(results))


if __name__ == '__main__':
    main()
