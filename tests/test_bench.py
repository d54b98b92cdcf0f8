"""`d2lbert bench`: the FLOP formula, and a smoke test of the whole harness.

No timing assertions: the quick run only checks that every measurement ran and that the
JSON report holds every implementation with positive rates.
"""
import json
import os
import random
import subprocess
import sys

from d2lbert.bench.configs import BenchConfig, random_batch
from d2lbert.bench.flops import dense_parameters, step_flops
from d2lbert.bench.report import evaluate_targets, format_report, markdown_snippet

TINY = BenchConfig('tiny', vocab_size=10, num_hiddens=4, ffn_num_hiddens=8, num_heads=2,
                   num_layers=1, seq_len=3, batch_size=2, num_preds=1)


def test_flops_match_a_hand_count():
    # One layer, h=4, f=8: Q, K, V, output are 4x4 (16 each), the FFN 4x8 + 8x4.
    assert dense_parameters(TINY) == 4 * 16 + 32 + 32
    tokens = 2 * 3
    flops = step_flops(TINY, [3, 3])
    # forward + backward = 3 x forward; a matrix product costs 2 FLOPs per multiply-add.
    assert flops['dense'] == 3 * 2 * 128 * tokens == 4608
    # Q Kᵀ: (3 x 4) @ (4 x 3) per sequence = 36 multiply-adds, weights @ V the same.
    assert flops['attention'] == 3 * 2 * (36 + 36) * 2 == 864
    assert flops['mlm'] == 3 * 2 * (4 * 4 + 4 * 10) * 2 == 672      # h->h, h->V; 2 slots
    assert flops['nsp'] == 3 * 2 * (4 * 4 + 4 * 2) * 2 == 288       # pooler, classifier
    assert flops['total'] == 4608 + 864 + 672 + 288


def test_flops_count_real_tokens_only():
    """Padding is not model work: lengths 3 and 1 of seq_len 3 count 4 tokens, and
    attention 3² + 1² query-key pairs per head dimension."""
    flops = step_flops(TINY, [3, 1])
    assert flops['dense'] == 3 * 2 * 128 * 4
    assert flops['attention'] == 3 * 2 * 2 * (9 + 1) * 4
    assert flops['mlm'] == step_flops(TINY, [3, 3])['mlm']


def test_dense_parameters_match_the_model():
    from d2lbert.bench.step_d2lbert import d2lbert_model
    config = BenchConfig('t', vocab_size=50, num_hiddens=16, ffn_num_hiddens=24,
                         num_heads=2, num_layers=3, seq_len=8, batch_size=2, num_preds=2)
    net = d2lbert_model(config, max_len=8)
    net.initialize()
    blocks = [p for name, p in net.collect_params().items()
              if 'transformerencoderblock' in name and name.endswith('weight')]
    assert sum(p.shape[0] * p.shape[1] for p in blocks) == dense_parameters(config)


def test_random_batch_is_valid_and_reproducible():
    config = BenchConfig('t', vocab_size=30, num_hiddens=8, ffn_num_hiddens=8, num_heads=2,
                         num_layers=1, seq_len=12, batch_size=5, num_preds=3)
    batch, again = random_batch(config, seed=3), random_batch(config, seed=3)
    assert all((batch[k] == again[k]).all() for k in batch)
    for length, positions in zip(batch['valid_lens'], batch['pred_positions']):
        assert 6 <= length <= 12
        assert len(set(positions)) == 3 and positions.min() >= 1 and positions.max() < length
    assert batch['mlm_weights'].dtype.name == 'float32' and batch['tokens'].dtype.name == 'int32'


def write_tiny_wikitext(path, seed=0):
    """A small corpus in WikiText format: articles of paragraphs of ' . '-separated
    sentences over 60 words (so every word passes min_freq=5)."""
    rng = random.Random(seed)
    words = [f'w{i}' for i in range(60)]
    with open(path, 'w', encoding='utf-8') as f:
        for article in range(6):
            f.write(f' \n = Article {article} = \n \n')
            for _ in range(12):
                sentences = [' '.join(rng.choice(words) for _ in range(rng.randint(4, 9)))
                             for _ in range(5)]
                f.write(' ' + ' . '.join(sentences) + ' . \n \n')


def test_quick_benchmark_reports_every_implementation(tmp_path):
    corpus, report = tmp_path / 'wiki.valid.tokens', tmp_path / 'bench.json'
    write_tiny_wikitext(corpus)
    done = subprocess.run(
        [sys.executable, '-m', 'd2lbert', 'bench', '--quick', '--threads', '1',
         '--wikitext', str(corpus), '--json', str(report)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONWARNINGS='ignore'))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(report.read_text())
    assert results['gemm']['flops_per_s'] > 0
    runs = results['steps']['quick']
    config = BenchConfig(**runs['config'])
    assert runs['flops']['total'] == step_flops(config, random_batch(config)['valid_lens'])['total']
    for impl in ('d2lbert', 'd2l', 'gluonnlp'):
        assert 'error' not in runs[impl], runs[impl]
        assert runs[impl]['pairs_per_s'] > 0 and runs[impl]['peak_rss_mb'] > 0
        assert runs[impl]['omp_num_threads'] == '1'
    for impl in ('d2lbert', 'd2l'):
        run = results['end_to_end'][impl]
        assert 'error' not in run, run
        assert run['tokens_per_s'] > 0 and run['real_tokens'] > 0 and run['build_seconds'] > 0
    assert results['data_pipeline']['speedup'] > 0
    # The targets of the quick sizes are not measured, the real-text ones are.
    measured = {row['target']: row['value'] for row in evaluate_targets(results)}
    assert measured['end to end: real tokens/s vs book'] > 0
    assert measured['book: pairs/s vs d2l'] is None
    assert 'd2lbert bench --quick' in done.stdout and '| quick | gluonnlp |' in done.stdout
    assert 'Targets:' in format_report(results)
    assert markdown_snippet(results).startswith('### Performance')


def test_bench_device_must_be_cpu_or_a_usable_gpu():
    """No GPU here: --device gpu:0 is refused with one clear message (exit code 2)."""
    for device, message in (('gpu:0', 'not usable here'), ('tpu', "must be 'cpu' or 'gpu:N'")):
        done = subprocess.run([sys.executable, '-m', 'd2lbert', 'bench', '--quick',
                               '--device', device], capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and 'Traceback' not in done.stderr
