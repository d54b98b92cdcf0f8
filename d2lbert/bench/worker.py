"""Runs one benchmark measurement in a fresh process (`python -m d2lbert.bench.worker`).

Every implementation gets its own process: MXNet's global state (NumPy mode on for
d2lbert and d2l, off for GluonNLP) cannot clash, one run's memory cannot slow down the
next, and the process's peak resident memory is that implementation's alone. The
parent (`run_benchmarks`, in the `d2lbert bench` command, whose process set
GOMP_SPINCOUNT and OPENBLAS_CORETYPE: `util.process`) sets OMP_NUM_THREADS in the
child's environment, before MXNet is imported there.

Usage: python -m d2lbert.bench.worker TASK_JSON OUTPUT_JSON_FILE
"""
import json
import os
import sys
import warnings

from .configs import get_config, random_batch
from .finetune_lines import FINETUNE, FINETUNE_MODULES, finetune_examples
from .timing import peak_rss_mb, time_steps

STEP_MODULES = {'d2lbert': 'step_d2lbert', 'd2l': 'step_d2l', 'gluonnlp': 'step_gluonnlp'}


def context(device):
    """'cpu' -> mx.cpu(), 'gpu:N' -> mx.gpu(N)."""
    import mxnet as mx
    kind, _, index = device.partition(':')
    return mx.gpu(int(index or 0)) if kind == 'gpu' else mx.cpu()


def run_step_task(impl, config_name, steps, warmup, device='cpu', seed=0,
                  precision='fp32'):
    """Time `steps` training steps of implementation `impl` on the config's random batch
    (d2lbert: its matrix products in `precision`)."""
    import importlib
    import mxnet as mx
    config = get_config(config_name)
    module = importlib.import_module(f'.{STEP_MODULES[impl]}', __package__)
    step = module.build_step(config, random_batch(config, seed), context(device),
                             **precision_argument(precision))
    seconds = time_steps(step, steps, warmup, mx.nd.waitall)
    pairs = config.batch_size * steps
    real_tokens = int(random_batch(config, seed)['valid_lens'].sum()) * steps
    return {'impl': impl, 'config': config_name, 'steps': steps, 'warmup': warmup,
            'precision': precision, 'seconds': seconds, 'step_seconds': seconds / steps,
            'pairs_per_s': pairs / seconds, 'real_tokens_per_s': real_tokens / seconds}


def run_finetune_task(impl, config_name, steps, warmup, device='cpu', seed=0,
                      line=FINETUNE, precision='fp32'):
    """Time fine-tuning steps of implementation `impl` of line `line` (`finetune_lines`)
    on the line's timed examples (pairs or windows), batched and padded its own way
    (its `host_batches`)."""
    import importlib
    config, warmup_pairs, timed_pairs = finetune_examples(line, config_name, steps, warmup,
                                                          seed)
    module = importlib.import_module(f'.{FINETUNE_MODULES[line][impl]}', __package__)
    warmup_batches = module.host_batches(config, warmup_pairs)
    timed_batches = module.host_batches(config, timed_pairs)
    result = {'impl': impl, 'line': line, 'config': config_name, 'steps': len(timed_batches),
              'warmup': len(warmup_batches), 'precision': precision}
    if impl == 'transformers':
        import torch
        import transformers
        from .finetune_transformers import attention_implementation
        step = module.build_step(config, warmup_batches + timed_batches,
                                 **precision_argument(precision))
        waitall = lambda: None  # noqa: E731  (PyTorch on the CPU is synchronous)
        result.update(threads=torch.get_num_threads(), torch=torch.__version__,
                      transformers=transformers.__version__,
                      attention=attention_implementation())
    else:
        import mxnet as mx
        step = module.build_step(config, warmup_batches + timed_batches, context(device),
                                 **precision_argument(precision))
        waitall = mx.nd.waitall
    seconds = time_steps(step, len(timed_batches), len(warmup_batches), waitall)
    real_tokens = sum(pair.valid_len for pair in timed_pairs)
    padded_tokens = sum(batch.tokens.size for batch in timed_batches)
    return dict(result, seconds=seconds, step_seconds=seconds / len(timed_batches),
                pairs_per_s=len(timed_pairs) / seconds,
                real_tokens_per_s=real_tokens / seconds,
                mean_width=padded_tokens / len(timed_pairs),
                real_share=real_tokens / padded_tokens)


def precision_argument(precision):
    """build_step's keyword argument for `precision`: none for fp32, so that the
    implementations without a precision (d2l, GluonNLP, SQuAD's) are called as before."""
    return {} if precision == 'fp32' else {'precision': precision}


def run_gemm_task(m, k, n, device='cpu'):
    from .gemm import gemm_rate
    return gemm_rate(m, k, n, ctx=context(device))


def run_end_to_end_task(impl, path, config_name, steps, batch_size, max_len, device='cpu'):
    from .end_to_end import book_end_to_end, d2lbert_end_to_end
    function = {'d2lbert': d2lbert_end_to_end, 'd2l': book_end_to_end}[impl]
    result = function(path, get_config(config_name), steps, context(device), batch_size,
                      max_len)
    return dict(result, impl=impl, config=config_name, batch_size=batch_size,
                max_len=max_len)


def run_data_task(path, max_len):
    from .data_pipeline import bench_data_pipeline
    return bench_data_pipeline(path, max_len=max_len)


def run_kernels_task():
    from .kernel_rates import kernel_rates
    return kernel_rates()


TASKS = {'step': run_step_task, 'finetune': run_finetune_task, 'gemm': run_gemm_task,
         'end_to_end': run_end_to_end_task, 'data': run_data_task,
         'kernels': run_kernels_task}


def main(task_json, output_file):
    from mxnet import npx
    npx.set_np()  # as the commands run (GluonNLP's step switches it off for itself)
    task = json.loads(task_json)
    kind = task.pop('kind')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        result = TASKS[kind](**task)
    result = dict(result, peak_rss_mb=peak_rss_mb(),
                  omp_num_threads=os.environ.get('OMP_NUM_THREADS'))
    with open(output_file, 'w', encoding='utf-8') as f:
        json.dump(result, f)


if __name__ == '__main__':
    main(*sys.argv[1:])
