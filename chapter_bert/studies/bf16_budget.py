"""Where a training step's time goes in float32 and in bfloat16, and how fast bfloat16
could make it at best.

    python chapter_bert/studies/bf16_budget.py [--steps 20] [--rounds 3] [--threads 2]
        [--out chapter_bert/results/bf16-budget.json]

Two steps of `d2lbert bench`: the small pretraining step (`small`) and the sentence-pair
fine-tuning step (`bert.small`), each set up as the benchmark sets it up
(`d2lbert.bench.step_d2lbert`, `d2lbert.bench.finetune_d2lbert`). For each step and
precision, in processes of their own with OMP_NUM_THREADS=--threads:

* the step's time: the median over `--rounds` processes (the precisions in turn) of
  `--steps` steps timed after three untimed ones, with the page faults per step (the
  memory the step newly touches: a fault is a 4 KB page the process gets anew);
* where it goes: MXNet's profiler over `--steps` more, with MXNet's bulk execution off
  (MXNET_EXEC_BULK_EXEC_TRAIN=0, so the profiler times each operator on its own). The
  matrix products are oneDNN's `FullyConnected` operators, forward and backward; the
  rest is everything else: attention, LayerNorm, the losses, the optimizer, the casts,
  and the time between operators (the step's time minus the operators' sum).

bfloat16 speeds up the products only. So the step can get no faster in bfloat16 than
its float32 step with the products replaced by their bfloat16 time:

    ceiling = step_fp32 / (products_bf16 + rest_fp32)

and a target ratio r leaves the rest `step_fp32 / r - products_bf16` in bfloat16
(`rest_budget`). Where the budget is below the float32 rest, the target needs the
rest itself made faster, in both precisions.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import check_results_file, fail, run_record, study_parser, write_results  # noqa: E402
from d2lbert.util.process import configure_cpu  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, 'chapter_bert', 'results', 'bf16-budget.json')
# issue 45's targets for `d2lbert bench --configs small,finetune --precision bf16`
TARGETS = {'small': 1.75, 'finetune': 1.60}
STEPS = {'small': 'small', 'finetune': 'bert.small'}
QUICK_STEPS = {'small': 'quick', 'finetune': 'quick'}
PRODUCTS = ('FullyConnected', '_backward_FullyConnected')
WARMUP = 3


def build_step(step, config_name, precision, steps):
    """A zero-argument function running one `step` ('small' or 'finetune') of the
    benchmark's config `config_name` in `precision`, as `d2lbert bench` builds it."""
    import mxnet as mx
    kwargs = {} if precision == 'fp32' else {'precision': precision}
    if step == 'small':
        from d2lbert.bench import step_d2lbert
        from d2lbert.bench.configs import get_config, random_batch
        config = get_config(config_name)
        return step_d2lbert.build_step(config, random_batch(config), mx.cpu(), **kwargs)
    from d2lbert.bench import finetune_d2lbert
    from d2lbert.bench.finetune_lines import FINETUNE, finetune_examples
    config, warmup_pairs, timed_pairs = finetune_examples(FINETUNE, config_name, steps, WARMUP)
    batches = (finetune_d2lbert.host_batches(config, warmup_pairs)
               + finetune_d2lbert.host_batches(config, timed_pairs))
    return finetune_d2lbert.build_step(config, batches, mx.cpu(), **kwargs)


def measure(step, config_name, precision, steps, profile):
    """In this process: ms and page faults per step of `steps` steps (after WARMUP),
    and with profile=True the profiler's {operator: ms per step} over them."""
    import resource
    import mxnet as mx
    from d2lbert.bench.timing import time_steps
    run = build_step(step, config_name, precision, steps)
    time_steps(run, WARMUP, 0, mx.nd.waitall)
    with tempfile.TemporaryDirectory() as folder:
        if profile:
            mx.profiler.set_config(profile_all=True, aggregate_stats=True,
                                   filename=os.path.join(folder, 'profile.json'))
            mx.profiler.set_state('run')
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        seconds = time_steps(run, steps, 0, mx.nd.waitall)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        operators = {}
        if profile:
            mx.profiler.set_state('stop')
            table = json.loads(mx.profiler.dumps(format='json'))['Time']['operator']
            operators = {name: row['Total'] / steps for name, row in table.items()}
    return {'ms_per_step': 1000 * seconds / steps, 'faults_per_step': faults / steps,
            'operators': operators}


def run_worker(step, config_name, precision, steps, threads, profile):
    """`measure` in a process of its own (the profiled one with bulk execution off)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS='ignore')
    if profile:
        env.update(MXNET_EXEC_BULK_EXEC_TRAIN='0', MXNET_EXEC_BULK_EXEC_INFERENCE='0')
    task = json.dumps([step, config_name, precision, steps, profile])
    done = subprocess.run([sys.executable, os.path.abspath(__file__), '--worker', task],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        fail('bf16_budget', f'the {step} step in {precision} failed: '
             + (done.stderr.strip().splitlines() or ['no message'])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def budget(rounds, profiled):
    """One precision's split: {step_ms, products_ms, rest_ms, operators, ...}. The
    products come from the profiled run, the step's time is the median of the timed
    `rounds`."""
    products = sum(profiled['operators'].get(name, 0.0) for name in PRODUCTS)
    step = statistics.median(r['ms_per_step'] for r in rounds)
    return {'step_ms': step, 'products_ms': products, 'rest_ms': step - products,
            'rounds_ms': [r['ms_per_step'] for r in rounds],
            'rounds_faults_per_step': [r['faults_per_step'] for r in rounds],
            'profiled_step_ms': profiled['ms_per_step'],
            'operators': profiled['operators']}


def bounds(fp32, bf16, target):
    """The measured ratio, the ceiling and the rest a target leaves (module docstring)."""
    return {'ratio': fp32['step_ms'] / bf16['step_ms'],
            'products_ratio': fp32['products_ms'] / bf16['products_ms'],
            'ceiling': fp32['step_ms'] / (bf16['products_ms'] + fp32['rest_ms']),
            'target': target,
            'rest_budget_ms': fp32['step_ms'] / target - bf16['products_ms']}


def study(steps, rounds, threads, quick=False, log=print):
    """{step: {'fp32': budget, 'bf16': budget, **bounds}} for both steps."""
    results = {}
    for step, config_name in (QUICK_STEPS if quick else STEPS).items():
        timed = {'fp32': [], 'bf16': []}
        for turn in range(rounds):
            for precision in timed:
                log(f'{step} ({config_name}), {precision}: timing, round {turn + 1}')
                timed[precision].append(
                    run_worker(step, config_name, precision, steps, threads, False))
        split = {}
        for precision in timed:
            log(f'{step} ({config_name}), {precision}: profiling')
            split[precision] = budget(
                timed[precision],
                run_worker(step, config_name, precision, steps, threads, True))
        results[step] = dict(config=config_name, **split,
                             **bounds(split['fp32'], split['bf16'], TARGETS[step]))
    return results


def table(results):
    """The Markdown table of the results."""
    lines = ['| step | fp32 ms | of it products | bf16 ms | of it products | bf16 speedup '
             '| products\' bf16 speedup | ceiling | target | rest: fp32 ms | rest: bf16 ms '
             '| rest the target leaves |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|']
    for step, r in results.items():
        fp32, bf16 = r['fp32'], r['bf16']
        lines.append(
            f"| {step} ({r['config']}) | {fp32['step_ms']:.1f} | {fp32['products_ms']:.1f} "
            f"| {bf16['step_ms']:.1f} | {bf16['products_ms']:.1f} | {r['ratio']:.2f}x "
            f"| {r['products_ratio']:.2f}x | {r['ceiling']:.2f}x | {r['target']:.2f}x "
            f"| {fp32['rest_ms']:.1f} | {bf16['rest_ms']:.1f} | {r['rest_budget_ms']:.1f} |")
    return '\n'.join(lines)


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--steps', type=int, default=20, help='timed (and profiled) steps')
    parser.add_argument('--rounds', type=int, default=3,
                        help='timed processes per step and precision (the median)')
    parser.add_argument('--threads', type=int, default=2, help='OMP_NUM_THREADS')
    parser.add_argument('--quick', action='store_true',
                        help="the benchmark's tiny configs (checks the tool, not the speed)")
    parser.add_argument('--out', default=RESULTS)
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        configure_cpu()  # as the commands run, before MXNet loads
        from mxnet import npx
        npx.set_np()
        print(json.dumps(measure(*json.loads(args.worker))))
        return
    for flag in ('steps', 'rounds', 'threads'):
        if getattr(args, flag) < 1:
            fail('bf16_budget', f'--{flag} must be at least 1')
    check_results_file('bf16_budget', args.out, {})
    from d2lbert.run.errors import RunError
    from d2lbert.run.precision import check_hardware
    import mxnet as mx
    try:
        check_hardware('bf16', [mx.cpu()])
    except RunError as err:
        fail('bf16_budget', str(err))
    results = study(args.steps, args.rounds, args.threads, args.quick)
    print(table(results))
    from d2lbert.bench.machine import describe_machine
    write_results('bf16_budget', args.out, {
        **run_record('bf16_budget', argv, describe_machine),
        'threads': args.threads, 'steps': args.steps, 'rounds': args.rounds,
        'steps_measured': results})


if __name__ == '__main__':
    main()
