"""A user's own training loop on the book's model, before and after a change: ms per step.

    python chapter_bert/studies/user_loop_ab.py --before dc749fe

The loop is what a library user writes, not the commands' (which skip no check and copy
nothing either way): the book's `BERTModel` (the bench's `small` size, not accelerated),
hybridized, `net.pretraining_loss` on the bench's random batch under
`autograd.record()`, backward, `gluon.Trainer` (Adam). Each version runs in processes of
its own (`--rounds` rounds, versions interleaved; OMP_NUM_THREADS=--threads,
GOMP_SPINCOUNT=1000 in both); `--before` is checked out into a temporary git worktree,
the other version is this checkout. Written to --out, whole or not at all.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import check_results_file, fail, run_record, study_parser, write_results  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, 'chapter_bert', 'results', 'user-loop-ab.json')
WARMUP = 3

# One version's loop, run with PYTHONPATH at that version's checkout: prints ms per step.
LOOP = '''
import json, sys, time
import mxnet as mx
from mxnet import autograd, gluon, init, np, npx
npx.set_np()
from d2lbert import BERTModel
from d2lbert.bench.configs import get_config, random_batch
config, steps, warmup = get_config(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
net = BERTModel(config.vocab_size, config.num_hiddens, config.ffn_num_hiddens,
                config.num_heads, config.num_layers, config.dropout, max_len=config.seq_len)
net.initialize(init.Normal(0.02))
net.hybridize(static_alloc=True)
trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 1e-4})
batch = {name: np.array(array) for name, array in random_batch(config).items()}
def step():
    with autograd.record():
        mlm_loss, nsp_loss = net.pretraining_loss(**batch)
        loss = mlm_loss + nsp_loss
    loss.backward()
    trainer.step(1)
    return loss
for _ in range(warmup):
    step().item()
mx.nd.waitall()
start = time.perf_counter()
for _ in range(steps):
    last = step()
last.item()
print(json.dumps({'ms_per_step': 1000 * (time.perf_counter() - start) / steps}))
'''


def run_version(checkout, config, steps, threads):
    env = dict(os.environ, PYTHONPATH=checkout, OMP_NUM_THREADS=str(threads),
               GOMP_SPINCOUNT='1000', PYTHONWARNINGS='ignore')
    done = subprocess.run([sys.executable, '-c', LOOP, config, str(steps), str(WARMUP)],
                          env=env, capture_output=True, text=True, cwd=checkout)
    if done.returncode != 0:
        fail('user_loop_ab', f'the loop at {checkout} failed: '
             + (done.stderr.strip().splitlines() or ['no message'])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])['ms_per_step']


def git(*args):
    return subprocess.run(['git', '-C', REPO, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--before', required=True, help='the git revision to compare with')
    parser.add_argument('--config', default='small', help="the bench's config")
    parser.add_argument('--steps', type=int, default=20)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--out', default=RESULTS)
    args = parser.parse_args(argv)
    for flag in ('steps', 'rounds', 'threads'):
        if getattr(args, flag) < 1:
            fail('user_loop_ab', f'--{flag} must be at least 1')
    try:
        before = git('rev-parse', '--verify', f'{args.before}^{{commit}}')
    except subprocess.CalledProcessError:
        fail('user_loop_ab', f'--before {args.before}: not a commit of this repository')
    check_results_file('user_loop_ab', args.out, {})
    times = {'before': [], 'after': []}
    with tempfile.TemporaryDirectory() as scratch:
        worktree = os.path.join(scratch, 'before')
        git('worktree', 'add', '--detach', worktree, before)
        try:
            for round_ in range(args.rounds):
                for version, checkout in (('before', worktree), ('after', REPO)):
                    times[version].append(run_version(checkout, args.config, args.steps,
                                                      args.threads))
                    print(f'round {round_ + 1} {version}: {times[version][-1]:.1f} ms/step',
                          flush=True)
        finally:
            git('worktree', 'remove', '--force', worktree)
    medians = {version: statistics.median(values) for version, values in times.items()}
    print(f"median ms/step: before {medians['before']:.1f}, after {medians['after']:.1f} "
          f"({medians['before'] / medians['after']:.2f}x)")
    from d2lbert.bench.machine import describe_machine
    write_results('user_loop_ab', args.out, {
        'what': "a user's loop (book model, hybridized, pretraining_loss, Adam): "
                'value checks in every forward call (before) or opt-in (after)',
        **run_record('user_loop_ab', argv, describe_machine),
        'before': before, 'after': git('rev-parse', 'HEAD'), 'config': args.config,
        'steps': args.steps, 'threads': args.threads, 'ms_per_step': times,
        'median_ms_per_step': medians})


if __name__ == '__main__':
    main()
