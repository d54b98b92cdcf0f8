"""`d2lbert bench`: the FLOP formula; the fine-tuning line's pairs (laid out and cut as
the book does, SNLI's mean lengths), its three ways of padding them (the book's, the
one `DataCollatorWithPadding` makes) and its three models' sizes; the SQuAD line's
windows (full, laid out as `make_windows` lays them out), its batches (the one
`default_data_collator` makes for `run_qa.py`) and its two models' sizes; the report's
math, the inference targets among it; and smoke tests of the whole harness and of its
inference part.

No timing assertions: the quick runs only check that every measurement ran and that the
JSON report holds every implementation with positive rates.
"""
import datetime
import json
import os
import random
import subprocess
import sys
import time

import numpy as onp
import pytest

from d2lbert.bench import BenchOptions, find_input_file
from d2lbert.bench.configs import BenchConfig, get_config, random_batch
from d2lbert.bench.finetune_pairs import (CLS_ID, FINETUNE_CONFIGS, PAD_ID, SEP_ID,
                                          get_finetune_config,
                                          sentence_pair, snli_like_lengths,
                                          snli_like_pairs)
from d2lbert.bench.flops import dense_parameters, step_flops
from d2lbert.bench.inference import onnxruntime_installed
from d2lbert.bench.inference_inputs import ORT_PEERS, SST2_TRAIN
from d2lbert.bench.rounds import merge_rounds, round_orders, steps_per_round
from d2lbert.bench.report import (INFERENCE_COMMANDS, TARGETS, evaluate_targets,
                                  finetune_rows, format_report, inference_rows,
                                  markdown_snippet)
from d2lbert.bench.squad_windows import (NO_ANSWER_SHARE, SQUAD_CONFIGS, get_squad_config,
                                         squad_like_windows)
from d2lbert.bench.timing import interleaved_best_times
from d2lbert.cli import main
from test_cli_flags import run_main
from test_inputs import minilm_folder

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


QUICK_FINETUNE = get_finetune_config('quick')


def book_truncation(p_tokens, h_tokens, max_len):
    """The book's `SNLIBERTDataset._truncate_pair_of_tokens` (NLI chapter), on copies."""
    p_tokens, h_tokens = list(p_tokens), list(h_tokens)
    while len(p_tokens) + len(h_tokens) > max_len - 3:
        if len(p_tokens) > len(h_tokens):
            p_tokens.pop()
        else:
            h_tokens.pop()
    return p_tokens, h_tokens


def test_snli_like_pairs_are_laid_out_and_cut_like_the_book():
    from d2l import mxnet as d2l
    pairs = snli_like_pairs(QUICK_FINETUNE, 200, seed=4)
    assert pairs == snli_like_pairs(QUICK_FINETUNE, 200, seed=4)
    for pair in pairs:
        premise = pair.token_ids[1:pair.segments.index(1) - 1]
        hypothesis = pair.token_ids[pair.segments.index(1):-1]
        tokens, segments = d2l.get_tokens_and_segments(
            [str(i) for i in premise], [str(i) for i in hypothesis])
        names = {CLS_ID: '<cls>', SEP_ID: '<sep>'}
        assert [names.get(i, str(i)) for i in pair.token_ids] == tokens
        assert pair.segments == segments and pair.label in (0, 1, 2)
    long_premise, long_hypothesis = list(range(10, 60)), list(range(100, 140))
    pair = sentence_pair(long_premise, long_hypothesis, 48, 0)
    assert pair.valid_len == 48
    cut = book_truncation(long_premise, long_hypothesis, 48)
    assert pair.token_ids == [CLS_ID, *cut[0], SEP_ID, *cut[1], SEP_ID]


def test_snli_like_lengths_have_snli_means():
    """SNLI's mean premise and hypothesis lengths (14.1 and 8.3 tokens, Bowman et al.
    2015), so a pair is ~25 tokens of the book's 128."""
    config = get_finetune_config('bert.small')
    pairs = snli_like_pairs(config, 20000, seed=1)
    premises = onp.array([pair.segments.count(0) - 2 for pair in pairs])
    hypotheses = onp.array([pair.segments.count(1) - 1 for pair in pairs])
    assert abs(premises.mean() - 14.1) < 0.3 and abs(hypotheses.mean() - 8.3) < 0.2
    short = snli_like_lengths(onp.random.default_rng(0), mean=1.0, std=1.0, size=1000)
    assert short.min() == 1  # never an empty sentence
    assert 24 < onp.mean([pair.valid_len for pair in pairs]) < 27
    assert max(pair.valid_len for pair in pairs) < 128


def test_each_implementation_pads_the_same_pairs_its_own_way():
    """The book pads every pair to max_len, transformers each batch to its longest
    pair, d2lbert as `d2lbert finetune` does; all hold the same pairs."""
    from d2lbert.bench import finetune_book, finetune_d2lbert, finetune_transformers
    config = QUICK_FINETUNE
    pairs = snli_like_pairs(config, 5 * config.batch_size, seed=2)
    done = {module.__name__: module.host_batches(config, pairs)
            for module in (finetune_book, finetune_d2lbert, finetune_transformers)}
    for batches in done.values():
        rows = [(tuple(b.tokens[i, :n]), tuple(b.segments[i, :n]), int(b.labels[i]))
                for b in batches for i, n in enumerate(b.valid_lens)]
        assert sorted(rows) == sorted((tuple(p.token_ids), tuple(p.segments), p.label)
                                      for p in pairs)
        for batch in batches:
            padding = onp.arange(batch.tokens.shape[1]) >= batch.valid_lens[:, None]
            assert (batch.tokens[padding] == PAD_ID).all()
            assert (batch.segments[padding] == 0).all()
    book = done[finetune_book.__name__]
    assert {batch.tokens.shape for batch in book} == {(config.batch_size, config.max_len)}
    for batch in done[finetune_transformers.__name__]:
        assert batch.tokens.shape[1] == batch.valid_lens.max()
    assert sum(b.tokens.size for b in done[finetune_transformers.__name__]) < sum(
        b.tokens.size for b in book)
    for batch in done[finetune_d2lbert.__name__]:
        assert batch.valid_lens.max() <= batch.tokens.shape[1] <= config.max_len


def test_book_arrays_have_the_book_dtypes():
    """`SNLIBERTDataset` keeps token ids and segments int32, valid lengths and labels
    as `np.array` makes them from Python ints: MXNet's default float32."""
    from mxnet import np
    from d2lbert.bench.finetune_book import book_arrays, host_batches
    batch = host_batches(QUICK_FINETUNE, snli_like_pairs(QUICK_FINETUNE, 8))[0]
    features, labels = book_arrays(batch)
    assert [f.dtype.name for f in features] == ['int32', 'int32', 'float32']
    assert labels.dtype == np.array([1, 2]).dtype == onp.float32
    assert (features[2].asnumpy() == batch.valid_lens).all()


def test_transformers_batch_is_what_its_collator_makes(tmp_path):
    """`collated` gives the tensors `DataCollatorWithPadding` makes of the same pairs."""
    from transformers import BertTokenizer, DataCollatorWithPadding
    from d2lbert.bench.finetune_transformers import collated, host_batches
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a']) + '\n')
    collator = DataCollatorWithPadding(BertTokenizer(str(vocab)))
    pairs = snli_like_pairs(QUICK_FINETUNE, QUICK_FINETUNE.batch_size, seed=3)
    expected = collator([{'input_ids': p.token_ids, 'token_type_ids': p.segments,
                          'labels': p.label} for p in pairs])
    ours = collated(host_batches(QUICK_FINETUNE, pairs)[0])
    assert sorted(ours) == sorted(expected)
    for name, tensor in expected.items():
        assert ours[name].dtype == tensor.dtype and ours[name].equal(tensor), name


def trainable_size(params):
    return sum(int(onp.prod(shape)) for shape in params)


def test_the_three_classifiers_have_the_same_size():
    """Same sizes: d2lbert's and the book's classifiers have exactly the same trainable
    parameters; transformers' adds its embedding LayerNorm (2 x hidden), which the
    book's architecture has not. d2lbert's model is on the fast path."""
    import mxnet as mx
    from d2lbert import fast
    from d2lbert.bench.finetune_book import book_classifier
    from d2lbert.bench.finetune_d2lbert import d2lbert_classifier
    from d2lbert.bench.finetune_transformers import transformers_classifier
    config = QUICK_FINETUNE
    ours, _ = d2lbert_classifier(config, mx.cpu())
    assert fast.is_fast(ours.encoder)
    book = book_classifier(config, mx.cpu())
    book((mx.np.zeros((1, 4), dtype='int32'), mx.np.zeros((1, 4), dtype='int32'),
          mx.np.array([4.0])))  # the output layer's input size is inferred
    theirs = transformers_classifier(config)
    size = trainable_size(p.shape for p in ours.collect_params().values())
    assert size == trainable_size(p.shape for p in book.collect_params().values())
    assert size + 2 * config.num_hiddens == trainable_size(
        p.shape for p in theirs.parameters() if p.requires_grad)


def finetune_results(name, d2lbert_rate, book_rate, transformers_rate):
    run = lambda rate: {'pairs_per_s': rate, 'step_seconds': 64 / rate,  # noqa: E731
                        'mean_width': 30.0, 'real_share': 0.8, 'peak_rss_mb': 900.0}
    return {'options': {'threads': 2}, 'notes': [], 'finetune': {name: {
        'config': {'max_len': 128}, 'pairs': 640, 'mean_pair_tokens': 25.4,
        'd2lbert': run(d2lbert_rate), 'd2l': run(book_rate),
        'transformers': run(transformers_rate)}}}


def test_finetune_targets_are_d2lbert_over_the_others():
    values = lambda results: {row['target']: (row['value'], row['passed'])  # noqa: E731
                              for row in evaluate_targets(results)}
    measured = values(finetune_results('bert.small', 60.0, 15.0, 50.0))
    assert measured['fine-tuning (bert.small): pairs/s vs the book'] == (4.0, True)
    assert measured['fine-tuning (bert.small): pairs/s vs transformers'] == (1.2, False)
    quick = values(finetune_results('quick', 60.0, 15.0, 50.0))
    assert quick['fine-tuning (bert.small): pairs/s vs the book'] == (None, None)
    results = finetune_results('bert.small', 60.0, 15.0, 50.0)
    results['finetune']['bert.small']['transformers'] = {'error': 'boom'}
    assert values(results)['fine-tuning (bert.small): pairs/s vs transformers'] == (None, None)
    assert '| bert.small | transformers | error |' in markdown_snippet(results)
    assert '| bert.small | d2l | 15.0 | 4267 | 4.00x | 30.0 | 80% | 900 |' in \
        markdown_snippet(results)
    report = format_report(results)
    assert 'Fine-tuning step' in report and 'padded to 128' in report and '4.00x' in report


def test_a_quick_report_judges_no_target():
    """--quick measures tiny models for 2 steps: the report says PASS/FAIL of nothing
    (a full run's does)."""
    full = finetune_results('bert.small', 60.0, 15.0, 50.0)  # misses the transformers target
    assert 'FAIL' in format_report(full)
    quick = finetune_results('bert.small', 60.0, 15.0, 50.0)
    quick['options']['quick'] = True
    report = format_report(quick)
    assert 'FAIL' not in report and 'PASS' not in report
    assert 'Targets: not judged with --quick' in report


def test_bench_options_select_the_finetuning_line():
    options = BenchOptions(configs=('finetune',), only=('d2lbert', 'transformers'))
    assert options.finetune_config == 'bert.small'
    assert BenchOptions.quick_options().finetune_config == 'quick'
    assert 'squad' in BenchOptions().configs and 'squad' in BenchOptions.quick_options().configs
    assert 'inference' in BenchOptions().configs
    quick = BenchOptions.quick_options()
    assert 'inference' in quick.configs and quick.inference_texts < 100
    assert BenchOptions(configs=('small', 'squad')).configs == ('small', 'squad')
    for field, value in (('configs', ('finetunes',)), ('only', ('pytorch',))):
        with pytest.raises(ValueError, match=f'--{field}'):
            BenchOptions(**{field: value})


QUICK_SQUAD = get_squad_config('quick')


def test_squad_windows_are_full_and_laid_out_like_make_windows():
    """Every window is max_len tokens, `<cls> question <sep> passage <sep>` with
    segments 0 then 1 (as `make_windows` lays them out), its label an answer inside
    the passage or `<cls>` twice, about NO_ANSWER_SHARE of them `<cls>`; the same
    windows in every process. Both sizes have the same names (one --configs size)."""
    assert set(SQUAD_CONFIGS) == set(FINETUNE_CONFIGS)
    config = get_squad_config('bert.small')
    assert (config.max_len, config.batch_size, config.num_hiddens) == (384, 32, 256)
    windows = squad_like_windows(QUICK_SQUAD, 3000, seed=5)
    assert squad_like_windows(QUICK_SQUAD, 50, seed=5) == squad_like_windows(QUICK_SQUAD,
                                                                            50, seed=5)
    for window in windows:
        question_len = window.passage_start - 2
        assert window.valid_len == len(window.segments) == QUICK_SQUAD.max_len
        assert window.token_ids[0] == CLS_ID and window.token_ids[-1] == SEP_ID
        assert window.token_ids[question_len + 1] == SEP_ID
        assert window.segments == [0] * (question_len + 2) + [1] * (
            QUICK_SQUAD.max_len - question_len - 2)
        assert len(window.passage_offsets) == QUICK_SQUAD.max_len - question_len - 3
        start, end = window.label
        assert (start, end) == (0, 0) or (
            window.is_passage(start) and window.is_passage(end) and start <= end)
    no_answer = onp.mean([window.label == (0, 0) for window in windows])
    assert abs(no_answer - NO_ANSWER_SHARE) < 0.03


def test_squad_batches_are_the_loops_and_run_qas():
    """d2lbert's batches are `d2lbert finetune --task squad2`'s (`qa_training_batches`),
    transformers' the tensors `default_data_collator` makes of `run_qa.py`'s features
    (padded to max_length); both hold the same windows, all full width."""
    from transformers import default_data_collator
    from d2lbert.bench import squad_d2lbert, squad_transformers
    from d2lbert.data.squad import qa_training_batches
    config = QUICK_SQUAD
    windows = squad_like_windows(config, 3 * config.batch_size, seed=6)
    ours = squad_d2lbert.host_batches(config, windows)
    loop = list(qa_training_batches(windows, config.batch_size, 0, 0, config.max_len, PAD_ID))
    assert all((a.tokens == b.tokens).all() and (a.labels == b.labels).all()
               for a, b in zip(ours, loop)) and len(ours) == len(loop)
    theirs = squad_transformers.host_batches(config, windows)
    for batches in (ours, theirs):
        assert {batch.tokens.shape for batch in batches} == {(config.batch_size,
                                                               config.max_len)}
        rows = [(tuple(b.tokens[i]), tuple(b.segments[i]), tuple(b.labels[i]))
                for b in batches for i in range(len(b.valid_lens))]
        assert sorted(rows) == sorted((tuple(w.token_ids), tuple(w.segments), w.label)
                                      for w in windows)
    features = [{'input_ids': w.token_ids, 'token_type_ids': w.segments,
                 'attention_mask': [1] * w.valid_len, 'start_positions': w.label[0],
                 'end_positions': w.label[1]} for w in windows[:config.batch_size]]
    expected = default_data_collator(features)
    collated = squad_transformers.collated(theirs[0])
    assert sorted(collated) == sorted(expected)
    for name, tensor in expected.items():
        assert collated[name].dtype == tensor.dtype and collated[name].equal(tensor), name


def test_the_two_question_answering_models_have_the_same_size():
    """d2lbert's `BERTForQuestionAnswering` (on the fast path) and transformers' have
    the same trainable parameters but transformers' embedding LayerNorm; neither has
    a pooler."""
    import mxnet as mx
    from d2lbert import fast
    from d2lbert.bench.squad_d2lbert import d2lbert_question_answering
    from d2lbert.bench.squad_transformers import transformers_question_answering
    ours, _ = d2lbert_question_answering(QUICK_SQUAD, mx.cpu())
    assert fast.is_fast(ours.encoder)
    theirs = transformers_question_answering(QUICK_SQUAD)
    assert trainable_size(p.shape for p in ours.collect_params().values()) + \
        2 * QUICK_SQUAD.num_hiddens == trainable_size(
            p.shape for p in theirs.parameters() if p.requires_grad)


def test_squad_line_reports_windows_without_a_target():
    """The SQuAD table: windows/s, ms/step, d2lbert / transformers, peak RSS, in the
    report and the README snippet; an error is a row; the issue asks for figures, so
    no target is added."""
    results = finetune_results('bert.small', 60.0, 15.0, 50.0)
    run = lambda rate: {'pairs_per_s': rate, 'step_seconds': 32 / rate,  # noqa: E731
                        'peak_rss_mb': 1500.0}
    results['squad'] = {'bert.small': {
        'config': get_squad_config('bert.small').to_dict(), 'pairs': 320,
        'mean_pair_tokens': 384.0, 'd2lbert': run(20.0), 'transformers': run(16.0)}}
    snippet = markdown_snippet(results)
    assert '| config | impl | windows/s | ms/step | d2lbert is | peak RSS MB |' in snippet
    assert '| bert.small | d2lbert | 20.0 | 1600 | 1.00x | 1500 |' in snippet
    assert '| bert.small | transformers | 16.0 | 2000 | 1.25x | 1500 |' in snippet
    assert 'the same 320 windows of 384 tokens, batch 32' in snippet
    assert 'SQuAD training step' in format_report(results)
    assert finetune_rows(results)[0][:5] == ['bert.small', 'd2lbert', '60.0', '1067', '1.00x']
    results['squad']['bert.small']['transformers'] = {'error': 'boom'}
    assert finetune_rows(results, 'squad')[1] == ['bert.small', 'transformers', 'error',
                                                  '', '', '']
    assert len(evaluate_targets(results)) == len(TARGETS) + len(INFERENCE_COMMANDS)
    assert not any('squad' in text.lower() for text, _, _ in TARGETS)


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
    """Every part but inference (which has a test of its own, as it needs SST-2 and
    MiniLM)."""
    corpus, report = tmp_path / 'wiki.valid.tokens', tmp_path / 'bench.json'
    write_tiny_wikitext(corpus)
    done = subprocess.run(
        [sys.executable, '-m', 'd2lbert', 'bench', '--quick', '--threads', '1',
         '--configs', 'quick,finetune,squad', '--wikitext', str(corpus),
         '--json', str(report)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONWARNINGS='ignore'))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(report.read_text())
    assert results['gemm']['flops_per_s'] > 0
    assert results['date'] == datetime.date.today().isoformat()  # the book quotes it
    runs = results['steps']['quick']
    config = BenchConfig(**runs['config'])
    assert runs['flops']['total'] == step_flops(config, random_batch(config)['valid_lens'])['total']
    for impl in ('d2lbert', 'd2l', 'gluonnlp'):
        assert 'error' not in runs[impl], runs[impl]
        assert runs[impl]['pairs_per_s'] > 0 and runs[impl]['peak_rss_mb'] > 0
        assert runs[impl]['omp_num_threads'] == '1'
        # --quick: 2 timed steps in 2 rounds of 1 step, each round a process
        assert runs[impl]['steps'] == 2 and [r['steps'] for r in runs[impl]['rounds']] == [1, 1]
    started = [line.split()[3] for line in done.stderr.splitlines()
               if line.startswith('steps: quick / ')]
    assert started == ['d2lbert', 'd2l', 'gluonnlp', 'gluonnlp', 'd2l', 'd2lbert']
    for impl in ('d2lbert', 'd2l'):
        run = results['end_to_end'][impl]
        assert 'error' not in run, run
        assert run['tokens_per_s'] > 0 and run['real_tokens'] > 0 and run['build_seconds'] > 0
    assert results['data_pipeline']['speedup'] > 0
    finetune = results['finetune']['quick']
    assert finetune['pairs'] == 2 * QUICK_FINETUNE.batch_size  # --quick: 2 timed steps
    for impl in ('d2lbert', 'd2l', 'transformers'):
        run = finetune[impl]
        assert 'error' not in run, run
        # the same 2 timed steps in each of 2 rounds, each round a process
        assert [r['steps'] for r in run['rounds']] == [2, 2] and run['steps'] == 4
        assert run['pairs_per_s'] > 0 and run['omp_num_threads'] == '1'
        assert run['real_tokens_per_s'] == pytest.approx(
            run['pairs_per_s'] * finetune['mean_pair_tokens'])
    assert finetune['transformers']['threads'] == 1
    started = [line.split(' / ')[1].split(' (')[0] for line in done.stderr.splitlines()
               if line.startswith('fine-tuning (finetune): quick / ')]
    assert started == ['d2lbert', 'd2l', 'transformers', 'transformers', 'd2l', 'd2lbert']
    squad = results['squad']['quick']
    assert squad['pairs'] == 2 * QUICK_SQUAD.batch_size and 'd2l' not in squad
    assert squad['mean_pair_tokens'] == QUICK_SQUAD.max_len
    for impl in ('d2lbert', 'transformers'):
        run = squad[impl]
        assert 'error' not in run, run
        assert run['line'] == 'squad' and run['steps'] == 4 and run['omp_num_threads'] == '1'
        assert run['pairs_per_s'] > 0 and run['peak_rss_mb'] > 0
        assert run['mean_width'] == QUICK_SQUAD.max_len and run['real_share'] == 1.0
    for row in finetune_rows(results, 'squad'):
        assert '| ' + ' | '.join(row) + ' |' in markdown_snippet(results)
    assert finetune['d2l']['mean_width'] == QUICK_FINETUNE.max_len
    assert finetune['transformers']['mean_width'] < QUICK_FINETUNE.max_len
    # The targets of the quick sizes are not measured, the real-text ones are.
    measured = {row['target']: row['value'] for row in evaluate_targets(results)}
    assert measured['end to end: real tokens/s vs book'] > 0
    assert measured['book: pairs/s vs d2l'] is None
    assert measured['fine-tuning (bert.small): pairs/s vs the book'] is None
    # --quick checks the harness: no verdict on the targets, nothing for the README
    assert 'Targets: not judged with --quick' in done.stdout
    assert 'FAIL' not in done.stdout and 'PASS' not in done.stdout
    assert 'For the README' not in done.stdout and '### Performance' not in done.stdout
    snippet = markdown_snippet(results)
    assert 'd2lbert bench --quick' in snippet and '| quick | gluonnlp |' in snippet
    assert '| quick | transformers |' in snippet and snippet.startswith('### Performance')


def test_bench_device_must_be_cpu_or_a_usable_gpu(capsys):
    """No GPU here: --device gpu:0 is refused with one clear message (exit code 2)."""
    for device, message in (('gpu:0', 'not usable here'), ('tpu', "must be 'cpu' or 'gpu:N'")):
        code, stderr = run_main(['bench', '--quick', '--device', device], capsys)
        assert code == 2, stderr
        assert message in stderr and 'Traceback' not in stderr


def test_interleaved_best_times_call_each_function_once_per_round():
    """Every function runs once in each round (a slow moment of the machine falls on
    one call of each, not on all the calls of one), and each keeps its shortest time."""
    calls = []

    def function(name, seconds):
        return lambda: (calls.append(name), time.sleep(seconds.pop(0)))
    best = interleaved_best_times({'a': function('a', [0.03, 0.01, 0.02]),
                                   'b': function('b', [0.0, 0.02, 0.02])}, 3, lambda: None)
    assert calls == ['a', 'b'] * 3
    assert 0.01 <= best['a'] < 0.02 and best['b'] < 0.01


def test_kernel_rates_time_every_kernel_on_its_bytes():
    """Each kernel's rate is the bytes it streams (forward and backward) over its best
    time: add & LayerNorm 8 activations, LayerNorm 5, dropout 4 (book size, packed to
    the valid tokens, 128 hidden units); the copy 2 x 256 MB."""
    from d2lbert.bench.kernel_rates import kernel_rates
    from d2lbert.fast import kernels
    if not kernels.available():
        pytest.skip("d2lbert's kernels could not be built here")
    rates = kernel_rates(repeats=1)
    activation = int(random_batch(get_config('book'))['valid_lens'].sum()) * 128 * 4
    assert list(rates) == ['attention', 'add_layer_norm', 'layer_norm', 'dropout',
                           'log_sum_exp', 'adam_step', 'copy']
    for name, arrays in (('add_layer_norm', 8), ('layer_norm', 5), ('dropout', 4),
                         ('copy', 2 * (256 << 20) / activation)):
        rate = rates[name]
        assert rate['gb_per_s'] * rate['seconds'] * 1e9 == pytest.approx(arrays * activation)
    assert rates['attention']['gflops_per_s'] > 0


def test_rounds_alternate_the_order_and_add_up():
    """Round 2 runs the implementations in reverse; the merged result is the total
    steps over the total time, whatever each round's share."""
    assert round_orders(('a', 'b', 'c'), 3) == [['a', 'b', 'c'], ['c', 'b', 'a'],
                                                ['a', 'b', 'c']]
    assert steps_per_round(10, 2) == 5 and steps_per_round(5, 2) == 3
    slow = {'steps': 5, 'seconds': 30.0, 'pairs_per_s': 5 * 64 / 30.0,
            'real_tokens_per_s': 5 * 2000 / 30.0, 'peak_rss_mb': 900.0}
    fast = dict(slow, seconds=10.0, pairs_per_s=5 * 64 / 10.0,
                real_tokens_per_s=5 * 2000 / 10.0, peak_rss_mb=950.0)
    merged = merge_rounds([slow, fast])
    assert merged['steps'] == 10 and merged['step_seconds'] == pytest.approx(4.0)
    assert merged['pairs_per_s'] == pytest.approx(10 * 64 / 40.0)
    assert merged['real_tokens_per_s'] == pytest.approx(10 * 2000 / 40.0)
    assert merged['peak_rss_mb'] == 950.0 and merged['rounds'] == [slow, fast]
    assert merge_rounds([slow, {'error': 'boom'}]) == {'error': 'boom'}


def inference_results(default_precisions, encode_runs, predict_runs, quick=False):
    """A bench's results with only its inference part: encode_runs {precision: (speedup,
    least cosine)}, predict_runs {precision: (speedup, equal labels)} (None: no
    classifier), the peers taking 60 s."""
    def section(peer, closeness, runs):
        rows = {f'd2lbert {precision}': {'seconds': 60.0 / speedup, 'rows': 20000,
                                         closeness: close, 'speedup': speedup}
                for precision, (speedup, close) in runs.items()}
        return {peer: {'seconds': 60.0}, **rows}
    return {'options': {'threads': 2, 'precision': 'bf16', 'quick': quick}, 'notes': [],
            'inference': {
                'texts': 20000, 'default_precisions': default_precisions,
                'encode': section('sentence-transformers', 'min_cosine', encode_runs),
                'predict': predict_runs and section('transformers', 'equal_labels',
                                                    predict_runs)}}


def inference_targets(results):
    """{'encode' or 'predict': its target row}."""
    return {row['target'].split()[0]: row for row in evaluate_targets(results)
            if row['target'].startswith(('encode --data', 'predict --data'))}


def test_inference_targets_are_judged_on_the_default_precisions_row():
    """Each command is judged on the row of the precision it computes in by default on
    the machine measured: fast enough (1.5x its peer) and close enough (every vector
    within cosine 0.9999; labels equal on 99.5%); a row not measured is said so."""
    results = inference_results({'encode': 'fp32', 'predict': 'bf16'},
                                {'fp32': (1.6, 0.99999), 'bf16': (2.0, 0.9998)},
                                {'fp32': (1.2, 1.0), 'bf16': (1.7, 0.9993)})
    targets = inference_targets(results)
    assert (targets['encode']['value'], targets['encode']['passed']) == (1.6, True)
    assert (targets['predict']['value'], targets['predict']['passed']) == (1.7, True)
    assert targets['encode']['target'] == ('encode --data (fp32) vs sentence-transformers, '
                                           'least cosine >= 0.9999')
    report = format_report(results)
    assert '1.70x (equal labels 0.99930)' in report and 'FAIL' not in report
    assert 'transformers 60.0 s' in report and '35.3 s (1.70x)' in report
    snippet = markdown_snippet(results)
    assert ('| `predict --data` | transformers 60.0 s | 50.0 s (1.20x) | 35.3 s (1.70x) | '
            'equal labels 1.00000 (fp32), 0.99930 (bf16) |') in snippet
    for row in inference_rows(results):
        assert '| ' + ' | '.join(row) + ' |' in snippet
    # too slow; fast enough but not close enough
    results['inference']['default_precisions']['encode'] = 'bf16'
    results['inference']['predict']['d2lbert bf16']['equal_labels'] = 0.99
    targets = inference_targets(results)
    assert (targets['encode']['value'], targets['encode']['passed']) == (2.0, False)
    assert (targets['predict']['value'], targets['predict']['passed']) == (1.7, False)
    results['inference']['encode']['d2lbert fp32']['speedup'] = 1.47
    results['inference']['default_precisions']['encode'] = 'fp32'
    assert inference_targets(results)['encode']['passed'] is False


def test_an_inference_target_not_measured_says_why():
    """A bf16 machine's defaults, a float32-only run: not judged, and the report says
    which row is missing; without a classifier predict is not judged either."""
    defaults = {'encode': 'fp32', 'predict': 'bf16'}
    targets = inference_targets(inference_results(defaults, {'fp32': (1.6, 0.99999)}, None))
    assert targets['encode']['passed'] is True
    assert (targets['predict']['value'], targets['predict']['passed']) == (None, None)
    results = inference_results(defaults, {'fp32': (1.6, 0.99999)}, {'fp32': (1.6, 1.0)})
    results['options']['precision'] = 'fp32'
    target = inference_targets(results)['predict']
    assert (target['value'], target['passed']) == (None, None)
    assert "bf16, predict's default here, not measured (--precision bf16)" in target['note']
    assert "bf16, predict's default here, not measured" in format_report(results)
    assert inference_targets({'options': {}})['encode']['passed'] is None  # no inference
    results['options']['quick'] = True
    report = format_report(results)
    assert 'Targets: not judged with --quick' in report and 'PASS' not in report


def test_inference_inputs_are_refused_before_any_work(tmp_path, capsys):
    """A --sentence-model that is no folder, a --classifier that is no fine-tuned
    model, a missing --sst2-train, no texts: one line naming the flag, exit code 2. (The
    other flags are such that a check gone missing costs a few seconds, not a bench.)"""
    (tmp_path / 'a-file').write_text('x')
    cheap = ['bench', '--quick', '--configs', 'inference', '--only', 'd2lbert']
    for flag, value, message in (
            ('--sentence-model', str(tmp_path / 'a-file'), "a-file' is not a folder"),
            ('--classifier', str(tmp_path), "is not a `d2lbert finetune` output folder"),
            ('--sst2-train', str(tmp_path / 'missing.tsv'), "missing.tsv' is not a file"),
            ('--inference-texts', '0', 'must be an integer >= 1, got 0')):
        code, stderr = run_main([*cheap, flag, value], capsys)
        assert code == 2, stderr
        [line] = stderr.strip().splitlines()
        assert line.startswith(f'd2lbert bench: error: {flag} ') and message in line, line


@pytest.fixture(scope='module')
def sst2_classifier(tmp_path_factory):
    """MiniLM fine-tuned for one epoch on SST-2's first 16 training sentences (skip
    without SST-2 where the bench looks for it, or without MiniLM)."""
    sst2 = find_input_file('--sst2-train', None, SST2_TRAIN)
    if sst2 is None:
        pytest.skip(f'no SST-2 at {SST2_TRAIN}')
    folder = tmp_path_factory.mktemp('classifier')
    with open(sst2, encoding='utf-8') as f:
        (folder / 'train.tsv').write_text(''.join(f.readline() for _ in range(17)))
    code = main(['finetune', '--task', 'glue/sst2', '--model', minilm_folder(), '--data',
                 str(folder / 'train.tsv'), '--out', str(folder / 'run'), '--epochs', '1',
                 '--batch-size', '4', '--max-len', '32', '--no-progress'])
    assert code == 0
    return str(folder / 'run')


def test_quick_inference_part_reports_rows(tmp_path, sst2_classifier):
    """`d2lbert bench --quick --configs inference`: encode and predict --data on 20
    SST-2 sentences against their peers, float32 rows, in the JSON, the report and the
    README snippet."""
    report = tmp_path / 'bench.json'
    done = subprocess.run(
        [sys.executable, '-m', 'd2lbert', 'bench', '--quick', '--configs', 'inference',
         '--threads', '1', '--inference-texts', '20', '--classifier', sst2_classifier,
         '--json', str(report)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONWARNINGS='ignore'))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(report.read_text())
    inference = results['inference']
    assert inference['texts'] == 20 and results['options']['sentence_model'] == minilm_folder()
    assert set(inference['default_precisions'].values()) <= {'fp32', 'bf16'}
    ort_peers = list(ORT_PEERS) if onnxruntime_installed() else []  # encode's peers too
    for command, peers, closeness in (
            ('encode', ['sentence-transformers', *ort_peers], 'min_cosine'),
            ('predict', ['transformers'], 'equal_labels')):
        runs, peer = inference[command], peers[0]
        assert sorted(runs) == sorted([*peers, 'd2lbert fp32'])  # --precision fp32
        ours = runs['d2lbert fp32']
        assert ours['rows'] == 20 and runs[peer]['seconds'] > 0
        assert ours['speedup'] == pytest.approx(runs[peer]['seconds'] / ours['seconds'])
        assert 0.9 < ours[closeness] <= 1 + 1e-6
        for run in runs.values():  # 2 rounds (the default), each row once per round
            assert run['seconds'] == pytest.approx(sum(run['round_seconds']) / 2)
        started = [line.split(' / ')[1].split(' (round')[0] for line in done.stderr.splitlines()
                   if line.startswith(f'inference: {command} / ')]
        assert started == [*peers, 'd2lbert fp32', 'd2lbert fp32', *peers[::-1]]
    assert not any('inference' in note for note in results['notes'])
    assert '`predict --data`' in done.stdout and 'Targets: not judged with --quick' in done.stdout
    snippet = markdown_snippet(results)
    assert [line for line in snippet.splitlines() if 'least cosine' in line and '(fp32)' in line]


def test_the_inference_script_names_an_sst2_that_is_not_a_file(tmp_path, capsys):
    """`python -m d2lbert.bench.inference --sst2 FOLDER`: one line naming --sst2, exit 2,
    not a traceback from deep in the run."""
    from d2lbert.bench.inference import main as inference_main
    with pytest.raises(SystemExit) as exit_info:
        inference_main(['--model', str(tmp_path), '--sst2', str(tmp_path)])
    assert exit_info.value.code == 2
    assert f'--sst2 {tmp_path}: not a file' in capsys.readouterr().err
