"""Shared helpers for the test suite: tiny configurations, randomized weights and padded
batches.

Every test uses tiny sizes (vocabulary 64, 32 hidden units, 2 heads, 2 layers, sequences
of at most 12 tokens) and fixed seeds, so the model tests run in well under a minute on
two CPU cores and give the same numbers on every run.
"""
import json
import os
import subprocess
import signal
import sys
import time
import warnings

import numpy as onp
import pytest

# Make `import d2lbert` work from a source checkout without installing the package.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

# One OpenMP thread unless the caller chose otherwise: the models here are so small that
# a second thread only adds synchronization, and on a busy machine (a shared CI runner,
# another job running) spinning OpenMP threads made the suite about 5x slower.
os.environ.setdefault('OMP_NUM_THREADS', '1')

# MXNet 1.9.1 triggers DeprecationWarnings on import (NumPy financial functions,
# distutils); they are not ours and would drown the test report.
with warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    import d2lbert
    import mxnet as mx
    from mxnet import np, npx

npx.set_np()  # as the book's readers do: the tests' own arrays use the NumPy interface

VOCAB_SIZE = 64
TINY = dict(num_hiddens=32, ffn_num_hiddens=64, num_heads=2, num_layers=2, max_len=16,
            dropout=0.0, attention_dropout=0.0)


def tiny_config(arch='d2l', **overrides):
    """A tiny `BERTConfig` of the book's ('d2l') or Google's ('original') architecture,
    with dropout 0 so that results are deterministic."""
    preset = {'d2l': d2lbert.BERTConfig.d2l, 'original': d2lbert.BERTConfig.original}[arch]
    return preset(VOCAB_SIZE, 'book', **{**TINY, **overrides})


def randomize_parameters(net, seed=0, scale=0.2):
    """Give *every* parameter random values, including biases (zeros after
    `initialize`) and LayerNorm gammas/betas (ones/zeros), so that a test comparing
    two implementations also notices a misplaced bias or LayerNorm parameter."""
    rng = onp.random.default_rng(seed)
    for name, param in sorted(net.collect_params().items()):
        value = rng.normal(0.0, scale, size=param.shape)
        if name.endswith('gamma'):
            value += 1.0
        # mx.np arrays for d2lbert's blocks, legacy mx.nd arrays for GluonNLP's.
        array = np.array if mx.util.is_np_array() else mx.nd.array
        param.set_data(array(value, dtype=param.dtype))
    return net


def make_model(arch='d2l', seed=0, **overrides):
    """A tiny `BERTModel` with random (seeded) weights."""
    mx.random.seed(seed)
    net = d2lbert.BERTModel.from_config(tiny_config(arch, **overrides))
    net.initialize()
    return randomize_parameters(net, seed)


def make_batch(seed=0, batch_size=4, seq_len=10, num_preds=3, vocab_size=VOCAB_SIZE,
               valid_lens=None):
    """A padded batch: dict(tokens, segments, valid_lens, pred_positions).

    Every example gets a different valid length (unless `valid_lens` is given); its
    first part is segment 0 and the rest of its valid tokens segment 1. Padded
    positions hold token id 0 and segment 0. The prediction positions lie inside each
    example's valid length.
    """
    rng = onp.random.default_rng(seed)
    if valid_lens is None:
        valid_lens = rng.choice(onp.arange(num_preds, seq_len + 1), size=batch_size,
                                replace=False)
    valid_lens = onp.asarray(valid_lens)
    tokens = onp.zeros((batch_size, seq_len), dtype='int32')
    segments = onp.zeros((batch_size, seq_len), dtype='int32')
    pred_positions = onp.zeros((batch_size, num_preds), dtype='int32')
    for i, length in enumerate(valid_lens):
        tokens[i, :length] = rng.integers(1, vocab_size, size=length)
        segments[i, (length + 1) // 2:length] = 1
        pred_positions[i] = onp.sort(rng.choice(length, size=num_preds, replace=False))
    return dict(tokens=np.array(tokens, dtype='int32'),
                segments=np.array(segments, dtype='int32'),
                valid_lens=np.array(valid_lens, dtype='int32'),
                pred_positions=np.array(pred_positions, dtype='int32'))


def save_tiny_model(folder, vocab):
    """A tiny d2lbert model folder (1 layer, 64 positions, weights drawn with seed 0)
    with `vocab`, written to `folder` (which exists); returns its path."""
    config = d2lbert.BERTConfig.d2l(len(vocab), 'book', num_hiddens=32, ffn_num_hiddens=64,
                                    num_heads=2, num_layers=1, max_len=64)
    net = d2lbert.BERTModel.from_config(config)
    mx.random.seed(0)
    net.initialize(mx.init.Normal(0.02))
    config.to_json_file(os.path.join(folder, 'config.json'))
    vocab.save(os.path.join(folder, 'vocab.json'))
    net.save_parameters(os.path.join(folder, 'model.params'))
    return str(folder)


def to_numpy(*arrays):
    """MXNet arrays -> float64 NumPy arrays (None stays None)."""
    out = [None if a is None else a.asnumpy().astype('float64') for a in arrays]
    return out[0] if len(out) == 1 else out


@pytest.fixture(params=['d2l', 'original'])
def arch(request):
    """Run a test for both architectures: the book's BERT and Google's BERT."""
    return request.param



# The default pretraining on the book's model (--plain), as a script: `pretrain(...)` and
# its summary written as JSON to argv[2].
PLAIN_PRETRAINING = """
import json, sys
from d2lbert.pretraining.pretrain import PretrainOptions, pretrain
summary = pretrain(PretrainOptions(out=sys.argv[1], plain=True, progress=False))
summary['fast_path_loaded'] = any(name.startswith('d2lbert.fast') for name in sys.modules)
with open(sys.argv[2], 'w') as f:
    json.dump(summary, f)
"""


@pytest.fixture(scope='session')
def plain_pretraining_process(tmp_path_factory):
    """(process, output folder, summary file, stderr file) of the default pretraining
    with --plain, started in a process of its own so that it runs on the second core
    while this process runs the default pretraining; stopped at the end if still
    running."""
    folder = tmp_path_factory.mktemp('plain-pretraining')
    out, summary_file = str(folder / 'run'), str(folder / 'summary.json')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT,
                                                       os.environ.get('PYTHONPATH', '')]))
    with open(folder / 'stderr.txt', 'w') as stderr:
        process = subprocess.Popen([sys.executable, '-c', PLAIN_PRETRAINING, out,
                                    summary_file], env=env, stdout=subprocess.DEVNULL,
                                   stderr=stderr)
    yield process, out, summary_file, str(folder / 'stderr.txt')
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope='session')
def default_pretraining_run(tmp_path_factory, plain_pretraining_process):
    """(output folder, summary) of `d2lbert pretrain` with its defaults, run once for
    the tests that check it learns and the fine-tuning tests that start from it (the
    --plain run starts first, to run alongside)."""
    from d2lbert.pretraining.pretrain import PretrainOptions, pretrain
    out = str(tmp_path_factory.mktemp('default-pretraining') / 'run')
    return out, pretrain(PretrainOptions(out=out, progress=False))


@pytest.fixture(scope='session')
def plain_pretraining_run(plain_pretraining_process):
    """(output folder, summary) of the default pretraining with --plain."""
    process, out, summary_file, stderr_file = plain_pretraining_process
    process.wait(timeout=900)
    with open(stderr_file) as f:
        assert process.returncode == 0, f.read()[-3000:]
    with open(summary_file) as f:
        return out, json.load(f)


def pytest_configure(config):
    # Raised inside mx.nd.array (legacy arrays, used for GluonNLP) by SciPy >= 1.8.
    config.addinivalue_line(
        'filterwarnings', 'ignore:Please use `csr_matrix`:DeprecationWarning')


def run_main(args, capsys):
    """`d2lbert ARGS` in this process: (exit code, stdout, stderr)."""
    from d2lbert.cli import main
    try:
        code = main([str(arg) for arg in args])
    except SystemExit as exit:
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def kill_after_logged_steps(args, out, steps=2, timeout=300):
    """Start `d2lbert ARGS` (which writes --out `out`) and SIGKILL it once its
    metrics.jsonl holds `steps` records (or after `timeout` seconds)."""
    process = subprocess.Popen([sys.executable, '-m', 'd2lbert', *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = os.path.join(out, 'metrics.jsonl')
    deadline = time.time() + timeout
    while process.poll() is None and time.time() < deadline:
        if os.path.exists(metrics):
            with open(metrics, encoding='utf-8') as f:
                if sum(1 for line in f if line.endswith('\n')) >= steps:
                    break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
