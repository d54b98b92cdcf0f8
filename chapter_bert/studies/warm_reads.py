"""How often a warm start reads a big `--data` file: `d2lbert pretrain` on one
540 MB file of one text per line, cold, warm, and warm again under strace.

    python chapter_bert/studies/warm_reads.py [--words 103] [--steps 20] [--threads 2]
        [--wikitext ../shared/data/wikitext-2/wiki.valid.tokens]
        [--out chapter_bert/results/warm-reads.json]

The file is `scale_study.make_corpus`'s wiki.train.tokens (WikiText-2's lines shuffled
and repeated to --words million words: a paragraph per line, headings and blank lines
as WikiText has them), given to `--data` as a file (not the folder). Each run is

    python -m d2lbert pretrain --data FILE --objective mlm --steps STEPS --log-every 1
        --eval-every 0 --save-every 0 --no-progress --out RUN

with the same D2LBERT_HOME: the cold run learns the vocabulary and encodes the file
into the cache; the warm run reads the cache (`scale_study.measure_run`: seconds to the
first step, peak RSS); the traced run is a warm run under `strace -f -y` whose read
calls on the file are added up (bytes read from it, and how many times it was opened),
against the file's size. Time it alone on the machine.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import check_results_file, fail, run_record, study_parser, write_results  # noqa: E402
from scale_study import ROOT, WIKITEXT, make_corpus, measure_run  # noqa: E402

RESULTS = os.path.join(ROOT, 'chapter_bert', 'results', 'warm-reads.json')
PRETRAIN = ['--objective', 'mlm', '--log-every', '1', '--eval-every', '0', '--save-every', '0',
            '--no-progress']
# strace -y names each descriptor's file: read(3</tmp/x/wiki.train.tokens>, ...) = 65536
READ = re.compile(r'\b(?:read|pread64)\((\d+)<([^>]*)>,.*\)\s+=\s+(\d+)')
OPEN = re.compile(r'\bopenat\([^,]+, "([^"]*)"')


def reads_of(trace, path):
    """(bytes read from `path`, times it was opened) in an `strace -f -y` log."""
    read_bytes = opens = 0
    with open(trace, encoding='utf-8', errors='replace') as f:
        for line in f:
            match = READ.search(line)
            if match and os.path.realpath(match.group(2)) == path:
                read_bytes += int(match.group(3))
            match = OPEN.search(line)
            if match and os.path.realpath(match.group(1)) == path and '= -1' not in line:
                opens += 1
    return read_bytes, opens


def traced_run(data, home, run_dir, threads, pretrain_flags):
    """A warm run under strace: {'bytes_read', 'opens'} of the file `data`."""
    trace = run_dir + '.strace'
    command = ['strace', '-f', '-y', '-qq', '-e', 'trace=openat,read,pread64', '-o', trace,
               sys.executable, '-m', 'd2lbert', 'pretrain', '--data', data, *pretrain_flags,
               '--out', run_dir]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), D2LBERT_HOME=home, PYTHONPATH=ROOT)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        fail('warm_reads', 'the traced run failed: '
             + (done.stderr.strip().splitlines() or ['no message'])[-1])
    read_bytes, opens = reads_of(trace, os.path.realpath(data))
    return {'bytes_read': read_bytes, 'opens': opens}


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--words', type=float, default=103, help='millions of words')
    parser.add_argument('--steps', type=int, default=20, help='steps of each run')
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--wikitext', default=WIKITEXT)
    parser.add_argument('--out', default=RESULTS)
    args = parser.parse_args(argv)
    if args.words <= 0 or args.threads < 1 or args.steps < 1:
        fail('warm_reads', '--words must be positive, --steps and --threads at least 1')
    pretrain_flags = [*PRETRAIN, '--steps', str(args.steps)]
    try:
        with open(args.wikitext, encoding='utf-8') as f:
            lines = f.readlines()
    except OSError as err:
        fail('warm_reads', f'--wikitext {args.wikitext}: {err.strerror}')
    check_results_file('warm_reads', args.out, {'--wikitext': args.wikitext})
    results = {**run_record('warm_reads', argv),
               'threads': args.threads,
               'pretrain': ['d2lbert', 'pretrain', '--data', 'FILE', *pretrain_flags, '--out',
                            'RUN']}
    with tempfile.TemporaryDirectory(prefix='warm-reads-') as scratch:
        corpus = make_corpus(lines, args.words, 0, os.path.join(scratch, 'corpus'))
        data = os.path.join(scratch, 'corpus', 'wiki.train.tokens')
        results['file'] = {**corpus, 'bytes': os.path.getsize(data)}
        print(f"warm_reads: {corpus['mb']:.0f} MB, {corpus['words']:,} words", flush=True)
        home = os.path.join(scratch, 'home')
        for start in ('cold', 'warm'):
            results[start] = measure_run(data, home, os.path.join(scratch, start), args,
                                         pretrain_flags)
            print(f"warm_reads: {start}: first step after "
                  f"{results[start]['first_step_seconds']:.1f} s", flush=True)
        results['traced_warm'] = traced_run(data, home, os.path.join(scratch, 'traced'),
                                            args.threads, pretrain_flags)
        results['traced_warm']['reads_of_the_file'] = (results['traced_warm']['bytes_read']
                                                       / results['file']['bytes'])
    print(f"warm_reads: the warm start read the file {results['traced_warm']['opens']} "
          f"time(s) opened, {results['traced_warm']['reads_of_the_file']:.2f}x its size",
          flush=True)
    write_results('warm_reads', args.out, results)


if __name__ == '__main__':
    main()
