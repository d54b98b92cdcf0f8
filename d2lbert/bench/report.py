"""Turn the benchmark's numbers into ratios, pass/fail targets, a table and a README
snippet."""
import os
from typing import NamedTuple

from .finetune_lines import FINETUNE, SQUAD
from .inference_inputs import INFERENCE, ORT_PEERS
from .machine import machine_line
from .rounds import steps_per_round

# (description, where to find the measured ratio, the ratio to reach)
TARGETS = [
    ('book: pairs/s vs d2l', ('ratio', 'book', 'd2l'), 3.0),
    ('book: pairs/s vs GluonNLP', ('ratio', 'book', 'gluonnlp'), 2.5),
    ('small: pairs/s vs d2l', ('ratio', 'small', 'd2l'), 2.0),
    ('small: pairs/s vs GluonNLP', ('ratio', 'small', 'gluonnlp'), 1.7),
    ('small: model FLOP/s / GEMM FLOP/s', ('gemm_fraction', 'small'), 0.65),
    ('fine-tuning (bert.small): pairs/s vs the book', ('finetune', 'bert.small', 'd2l'), 3.0),
    ('fine-tuning (bert.small): pairs/s vs transformers',
     ('finetune', 'bert.small', 'transformers'), 1.5),
    ('end to end: real tokens/s vs book', ('end_to_end',), 4.0),
    ('data pipeline: speed vs d2l', ('data_pipeline',), 10.0),
]
# `--precision bf16`'s targets: (description, (section, config, faster row, slower row), ratio)
PRECISION_TARGETS = [
    ('small: d2lbert bf16 pairs/s vs its fp32', ('steps', 'small', 'd2lbert bf16', 'd2lbert'),
     1.6),
    ('book: d2lbert bf16 pairs/s vs its fp32', ('steps', 'book', 'd2lbert bf16', 'd2lbert'),
     1.3),
    ('small: peak RSS of d2lbert fp32 / bf16 (memory)',
     ('memory', 'small', 'd2lbert', 'd2lbert bf16'), 1.0),
    ('fine-tuning (bert.small): d2lbert bf16 vs its fp32',
     (FINETUNE, 'bert.small', 'd2lbert bf16', 'd2lbert'), 1.3),
    ('fine-tuning (bert.small): d2lbert bf16 vs transformers bf16 autocast',
     (FINETUNE, 'bert.small', 'd2lbert bf16', 'transformers bf16'), 2.5),
]

# `--precision int8`'s targets: (description, (command, peer row), ratio of seconds)
INT8_TARGETS = [
    ('encode --data int8 vs sentence-transformers fp32', ('encode', 'sentence-transformers'),
     2.0),
    ('encode --data int8 vs ONNX Runtime int8', ('encode', 'onnxruntime int8'), 1.25),
    ('predict --data int8 vs transformers length-sorted', ('predict', 'transformers'), 2.0),
]


class InferenceCommand(NamedTuple):
    """A command of the inference part: its table row and its target (issue 53)."""
    name: str          # its key in results['inference']
    shown: str         # how the table shows it
    peer: str          # the row it is timed against
    closeness: str     # the key of how close its outputs are to the peer's
    reads: str         # how the closeness reads
    needed: float      # the closeness its target asks for


INFERENCE_COMMANDS = [
    InferenceCommand('encode', '`encode --data --pooling mean --normalize`',
                     'sentence-transformers', 'min_cosine', 'least cosine', 0.9999),
    InferenceCommand('predict', '`predict --data`', 'transformers', 'equal_labels',
                     'equal labels', 0.995),
]
INFERENCE_SPEEDUP = 1.5  # each command's target: at least this over its peer


def _ok(result):
    return isinstance(result, dict) and 'error' not in result


def step_ratio(results, config, impl):
    """d2lbert's pairs/s divided by `impl`'s, on `config` (None if either is missing)."""
    runs = (results.get('steps') or {}).get(config, {})
    ours, theirs = runs.get('d2lbert'), runs.get(impl)
    if not (_ok(ours) and _ok(theirs)):
        return None
    return ours['pairs_per_s'] / theirs['pairs_per_s']


def finetune_ratio(results, config, impl, line=FINETUNE):
    """d2lbert's fine-tuning pairs/s (SQuAD: windows/s) divided by `impl`'s, on
    `config` of fine-tuning line `line` (None if either is missing)."""
    runs = (results.get(line) or {}).get(config, {})
    ours, theirs = runs.get('d2lbert'), runs.get(impl)
    if not (_ok(ours) and _ok(theirs)):
        return None
    return ours['pairs_per_s'] / theirs['pairs_per_s']


def row_ratio(results, section, config, faster, slower):
    """Row `faster`'s pairs/s over row `slower`'s in `section` ('steps', FINETUNE) of
    `config`; section 'memory': `faster`'s peak RSS over `slower`'s, of the steps."""
    runs = (results.get('steps' if section == 'memory' else section) or {}).get(config, {})
    first, second = runs.get(faster), runs.get(slower)
    if not (_ok(first) and _ok(second)):
        return None
    key = 'peak_rss_mb' if section == 'memory' else 'pairs_per_s'
    return first[key] / second[key]


def model_flops_per_s(results, config, impl='d2lbert'):
    runs = (results.get('steps') or {}).get(config, {})
    if not _ok(runs.get(impl)):
        return None
    return runs['flops']['total'] / runs[impl]['step_seconds']


def gemm_fraction(results, config):
    """d2lbert's model FLOP/s as a fraction of the measured GEMM FLOP/s."""
    rate = model_flops_per_s(results, config)
    if rate is None or not _ok(results.get('gemm')):
        return None
    return rate / results['gemm']['flops_per_s']


def end_to_end_ratio(results):
    runs = results.get('end_to_end') or {}
    if not (_ok(runs.get('d2lbert')) and _ok(runs.get('d2l'))):
        return None
    return runs['d2lbert']['tokens_per_s'] / runs['d2l']['tokens_per_s']


def data_pipeline_ratio(results):
    data = results.get('data_pipeline')
    return data['speedup'] if _ok(data) else None


def measured(results, where):
    kind, *args = where
    return {'ratio': step_ratio, 'gemm_fraction': gemm_fraction, 'finetune': finetune_ratio,
            'end_to_end': end_to_end_ratio, 'data_pipeline': data_pipeline_ratio,
            'row_ratio': row_ratio}[kind](
                results, *args)


def inference_target(results, command):
    """The target of an `InferenceCommand`: {'target', 'value' (its speedup over its
    peer), 'required', 'passed' (fast enough and close enough), 'detail' (the
    closeness), or 'note' (why it is not judged)}, on the row of the precision the
    command computes in by default on the machine measured."""
    inference = results.get(INFERENCE) or {}
    precision = (inference.get('default_precisions') or {}).get(command.name)
    row = {'target': f'{command.name} --data ({precision or "its default precision"}) vs '
                     f'{command.peer}, {command.reads} >= {command.needed:g}',
           'value': None, 'required': INFERENCE_SPEEDUP, 'passed': None}
    if not _ok(inference.get(command.name)):
        return row
    run = inference[command.name].get(f'd2lbert {precision}')
    if run is None:
        return dict(row, note=f"{precision}, {command.name}'s default here, not measured "
                              f'(--precision {precision})')
    closeness = run[command.closeness]
    return dict(row, value=run['speedup'],
                detail=f'{command.reads} {closeness_text(closeness)}',
                passed=run['speedup'] >= INFERENCE_SPEEDUP and closeness >= command.needed)


def closeness_text(value):
    """A least cosine or a share of equal labels, with digits enough to tell 0.99989
    from 0.9999."""
    return f'{value:.5f}'


def evaluate_targets(results):
    """[{'target', 'value', 'required', 'passed'}, with 'detail' or 'note' for the
    inference targets]; value None: not measured."""
    rows = []
    targets = [(text, where, required) for text, where, required in TARGETS]
    if (results.get('options') or {}).get('precision', 'fp32') == 'bf16':
        targets += [(text, ('row_ratio', *where), required)
                    for text, where, required in PRECISION_TARGETS]
    for text, where, required in targets:
        value = measured(results, where)
        rows.append({'target': text, 'value': value, 'required': required,
                     'passed': None if value is None else value >= required})
    return (rows + [inference_target(results, command) for command in INFERENCE_COMMANDS]
            + int8_targets(results))


def int8_targets(results):
    """`--precision int8`'s targets (INT8_TARGETS: issue 60), where int8 rows were
    measured: seconds of the peer's row over d2lbert int8's."""
    inference = results.get(INFERENCE) or {}
    rows = []
    for text, (command, peer), required in INT8_TARGETS:
        runs = inference.get(command) if _ok(inference.get(command)) else None
        if not runs or 'd2lbert int8' not in runs:
            continue
        value = (runs[peer]['seconds'] / runs['d2lbert int8']['seconds']
                 if peer in runs else None)
        rows.append({'target': text, 'value': value, 'required': required,
                     'passed': None if value is None else value >= required})
    return rows


def _table(header, rows):
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    line = lambda cells: '  '.join(str(c).rjust(w) if i else str(c).ljust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return '\n'.join([line(header), line(['-' * w for w in widths])] + [line(r) for r in rows])


def _x(value, digits=2):
    return '-' if value is None else f'{value:.{digits}f}x'


def step_rows(results):
    rows = []
    for name, runs in (results.get('steps') or {}).items():
        for impl in ('d2lbert', 'd2lbert bf16', 'd2l', 'gluonnlp'):
            run = runs.get(impl)
            if run is None:
                continue
            if not _ok(run):
                rows.append([name, impl, 'error', '', '', '', ''])
                continue
            ratio = 1.0 if impl == 'd2lbert' else step_ratio(results, name, impl)
            rate = model_flops_per_s(results, name, impl)
            gemm = results.get('gemm') or {}
            share = f"{rate / gemm['flops_per_s']:.0%}" if _ok(gemm) else '-'
            rows.append([name, impl, f"{run['pairs_per_s']:.1f}",
                         f"{run['step_seconds'] * 1000:.0f}", _x(ratio),
                         f'{rate / 1e9:.1f} ({share})', f"{run['peak_rss_mb']:.0f}"])
    return rows


FINETUNE_HEADER = ['config', 'impl', 'pairs/s', 'ms/step', 'd2lbert is',
                   'padded width (mean)', 'real tokens', 'peak RSS MB']


SQUAD_HEADER = ['config', 'impl', 'windows/s', 'ms/step', 'd2lbert is', 'peak RSS MB']
HEADERS = {FINETUNE: FINETUNE_HEADER, SQUAD: SQUAD_HEADER}


def finetune_rows(results, line=FINETUNE):
    """[config, impl, pairs/s, ms/step, ratio, mean padded width, share of real tokens,
    peak RSS] of every run of fine-tuning line `line`; SQuAD's windows are all full,
    so its rows have no padding columns (`HEADERS`)."""
    rows = []
    for name, runs in (results.get(line) or {}).items():
        for impl in ('d2lbert', 'd2lbert bf16', 'd2l', 'transformers', 'transformers bf16'):
            run = runs.get(impl)
            if run is None:
                continue
            if not _ok(run):
                rows.append([name, impl, 'error'] + [''] * (len(HEADERS[line]) - 3))
                continue
            ratio = 1.0 if impl == 'd2lbert' else finetune_ratio(results, name, impl, line)
            padding = ([f"{run['mean_width']:.1f}", f"{run['real_share']:.0%}"]
                       if line == FINETUNE else [])
            rows.append([name, impl, f"{run['pairs_per_s']:.1f}",
                         f"{run['step_seconds'] * 1000:.0f}", _x(ratio), *padding,
                         f"{run['peak_rss_mb']:.0f}"])
    return rows


def finetune_title(results):
    """What the fine-tuning table measures, with the pairs' mean length."""
    runs = next(iter(results['finetune'].values()))
    return ("Fine-tuning step (sentence pairs, 3 classes: forward + cross-entropy + "
            f"backward + update; the same {runs['pairs']} SNLI-like pairs of "
            f"{runs['mean_pair_tokens']:.1f} tokens on average; d2l: the book's NLI "
            f"chapter, padded to {runs['config']['max_len']}; transformers: "
            "BertForSequenceClassification, padded to each batch's longest; d2lbert: "
            "`d2lbert finetune`'s batches)")


def squad_title(results):
    """What the SQuAD table measures: the size, the windows, the batch."""
    runs = next(iter(results[SQUAD].values()))
    config = runs['config']
    return ("SQuAD training step (question + passage windows, all full: forward + start "
            "and end cross-entropy + backward + clipping at 1.0 + update; hidden "
            f"{config['num_hiddens']}, FFN {config['ffn_num_hiddens']}, "
            f"{config['num_heads']} heads, {config['num_layers']} layers, vocabulary "
            f"{config['vocab_size']}; the same {runs['pairs']} windows of "
            f"{config['max_len']} tokens, batch {config['batch_size']}; d2lbert: "
            "BERTForQuestionAnswering, `d2lbert finetune --task squad2`'s batches and step; "
            "transformers: BertForQuestionAnswering, AdamW)")


TITLES = {FINETUNE: finetune_title, SQUAD: squad_title}


def end_to_end_rows(results):
    rows = []
    for impl, run in (results.get('end_to_end') or {}).items():
        if not _ok(run):
            rows.append([impl, 'error', '', '', '', ''])
            continue
        rows.append([{'d2lbert': 'd2lbert', 'd2l': 'd2l book'}[impl],
                     f"{run['tokens_per_s']:.0f}", f"{run['train_tokens_per_s']:.0f}",
                     f"{run['build_seconds']:.2f}", f"{run['train_seconds']:.1f}",
                     f"{run['peak_rss_mb']:.0f}"])
    return rows


# --quick runs tiny models for 2 steps: its ratios say nothing about the targets
QUICK_NOTE = ('not judged with --quick (tiny sizes, 2 steps: it checks the harness, not '
              'the speed; run `d2lbert bench` for the targets and a README section)')


def target_rows(results):
    mark = {True: 'PASS', False: 'FAIL', None: 'n/a'}
    return [[row['target'], measured_text(row),
             f"{row['required']:.0%}" if row['required'] < 1 else f"{row['required']:g}x",
             mark[row['passed']]] for row in evaluate_targets(results)]


def measured_text(row):
    """A target's measured value as the table shows it: a share or a ratio, with its
    detail; or why it was not judged."""
    if row['value'] is None:
        return row.get('note', '-')
    value = f"{row['value']:.0%}" if row['required'] < 1 else _x(row['value'])
    return f"{value} ({row['detail']})" if 'detail' in row else value


def kernel_rows(results):
    """[kernel, time, rate, fraction of the GEMM rate or of the copy bandwidth]."""
    rates, gemm = results.get('kernels'), results.get('gemm')
    if not _ok(rates):
        return []
    rows = []
    for name, rate in rates.items():
        if not isinstance(rate, dict):  # the worker's peak_rss_mb, omp_num_threads
            continue
        if 'gflops_per_s' in rate:
            share = (f"{rate['gflops_per_s'] * 1e9 / gemm['flops_per_s']:.0%} of GEMM"
                     if _ok(gemm) else '-')
            rows.append([name, f"{rate['seconds'] * 1000:.1f}",
                         f"{rate['gflops_per_s']:.1f} GFLOP/s", share])
        elif name != 'copy':
            rows.append([name, f"{rate['seconds'] * 1000:.1f}", f"{rate['gb_per_s']:.1f} GB/s",
                         f"{rate['gb_per_s'] / rates['copy']['gb_per_s']:.0%} of copy"])
    copy = rates['copy']
    return rows + [['array copy', f"{copy['seconds'] * 1000:.1f}",
                    f"{copy['gb_per_s']:.1f} GB/s", '']]


KERNEL_HEADER = ['kernel (book size, fwd + bwd)', 'ms', 'rate', 'of the ceiling']


def inference_precisions(results):
    """The precisions d2lbert's inference rows were measured in: ['fp32', 'bf16']."""
    encode = results[INFERENCE]['encode']
    return [row.split()[1] for row in encode if row.startswith('d2lbert ')]


def inference_header(results):
    return ['command', 'peer', *[f'd2lbert {precision}'
                                 for precision in inference_precisions(results)],
            'closeness']


def inference_rows(results):
    """[command, peer seconds, d2lbert's seconds (speedup) per precision, closeness per
    precision] of encode and predict (predict: if it was measured)."""
    precisions = inference_precisions(results)
    rows = []
    for command in INFERENCE_COMMANDS:
        runs = results[INFERENCE][command.name]
        if runs is None:
            continue
        ours = [runs[f'd2lbert {precision}'] for precision in precisions]
        peers = [command.peer] + [peer for peer in ORT_PEERS if peer in runs]
        rows.append([command.shown, ', '.join(f"{peer} {runs[peer]['seconds']:.1f} s"
                                              for peer in peers),
                     *[f"{run['seconds']:.1f} s ({_x(run['speedup'])})" for run in ours],
                     f'{command.reads} ' + ', '.join(
                         f'{closeness_text(run[command.closeness])} ({precision})'
                         for precision, run in zip(precisions, ours))])
    return rows


def inference_title(results):
    """What the inference table measures: the texts, the processes, the peers."""
    return (f"Inference (the first {results[INFERENCE]['texts']} SST-2 training sentences; "
            'd2lbert: whole `d2lbert encode --data` / `predict --data` processes, start and '
            "model loading included; peers: sentence-transformers' encode in batches of 64 "
            "and transformers' BertForSequenceClassification over length-sorted batches of "
            '64, model loading excluded; each time the mean of '
            f"{results[INFERENCE].get('rounds', 1)} interleaved rounds)")


def format_report(results):
    """The human-readable report: machine, GEMM rate, step table, kernels, end to end,
    data, targets."""
    parts = [f"d2lbert bench, {results['options']['threads']} thread(s); every ratio is "
             "d2lbert / other, measured in this run."]
    if results.get('machine'):
        parts.append(f"machine: {machine_line(results['machine'])}")
        parts += [f"warning: {text}" for text in results['machine']['warnings']]
    gemm = results.get('gemm')
    if _ok(gemm):
        parts.append(f"fp32 GEMM rate (npx.fully_connected {'x'.join(map(str, gemm['shape']))}"
                     f", best of 5): {gemm['flops_per_s'] / 1e9:.1f} GFLOP/s")
    if results.get('steps'):
        parts.append('\nTraining step (forward + MLM/NSP losses + backward + Adam; '
                     f'{step_method(results)}):\n' + _table(
            ['config', 'impl', 'pairs/s', 'ms/step', 'd2lbert is',
             'model GFLOP/s (of GEMM)', 'peak RSS MB'], step_rows(results)))
    for line in (FINETUNE, SQUAD):
        if results.get(line):
            parts.append(f'\n{TITLES[line](results)}:\n'
                         + _table(HEADERS[line], finetune_rows(results, line)))
    if _ok(results.get(INFERENCE)):
        parts.append(f'\n{inference_title(results)}:\n'
                     + _table(inference_header(results), inference_rows(results)))
    elif results.get(INFERENCE):
        parts.append(f"\nInference: error: {results[INFERENCE]['error']}")
    if kernel_rows(results):
        parts.append("\nd2lbert's kernels:\n" + _table(KERNEL_HEADER, kernel_rows(results)))
    if results.get('end_to_end'):
        parts.append('\nEnd to end on real text (data pipeline built from scratch + '
                     f"{results['options']['e2e_steps']} steps):\n" + _table(
                         ['pipeline', 'tokens/s (total)', 'tokens/s (training)',
                          'build s', 'train s', 'peak RSS MB'], end_to_end_rows(results)))
    data = results.get('data_pipeline')
    if _ok(data):
        parts.append(f"\nData pipeline ({data['path']}, max_len {data['max_len']}): d2l "
                     f"{data['d2l_seconds']:.2f} s, d2lbert {data['d2lbert_seconds']:.2f} s "
                     f"({data['speedup']:.1f}x); peak RSS growth d2l "
                     f"{data['d2l_peak_mb']:.0f} MB, d2lbert {data['d2lbert_peak_mb']:.0f} MB")
    if results['options'].get('quick'):
        parts.append(f'\nTargets: {QUICK_NOTE}')
    else:
        parts.append('\nTargets:\n' + _table(['target', 'measured', 'required', ''],
                                             target_rows(results)))
    parts += [f'note: {note}' for note in results.get('notes', [])]
    return '\n'.join(parts)


def _markdown_table(header, rows):
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    return '\n'.join(lines + ['| ' + ' | '.join(map(str, row)) + ' |' for row in rows])


def step_method(results):
    """How the training steps were timed: '10 steps in 2 interleaved rounds' etc."""
    options = results['options']
    rounds = options.get('rounds', 1)
    steps = steps_per_round(options['steps'], rounds) * rounds
    if rounds == 1:
        return f'{steps} timed steps per implementation'
    return (f'{steps} timed steps per implementation in {rounds} rounds, each a fresh '
            'process, the implementations in turn, in reverse order every second round')


def markdown_snippet(results):
    """A Markdown section for the README's performance section."""
    options = results['options']
    gemm = results.get('gemm')
    machine = (machine_line(results['machine']) if results.get('machine') else 'unknown CPU')
    machine += (f", {options['threads']} OpenMP thread(s), MXNet 1.9.1, device "
                f"{options.get('device', 'cpu')}")
    lines = ['### Performance', '',
             f"Measured with `{results.get('command') or 'd2lbert bench'}` ({machine}); "
             'ratios are d2lbert / other in the same run, so they hold better than the '
             'absolute numbers on a shared machine.', '']
    if _ok(gemm):
        lines += [f"fp32 GEMM rate reached by MXNet here: {gemm['flops_per_s'] / 1e9:.1f} "
                  'GFLOP/s.', '']
    if results.get('steps'):
        lines += [f'Training steps: {step_method(results)}.', '',
                  _markdown_table(['config', 'impl', 'pairs/s', 'ms/step', 'd2lbert is',
                                   'model GFLOP/s (of GEMM)', 'peak RSS MB'],
                                  step_rows(results)), '']
    for line in (FINETUNE, SQUAD):
        if results.get(line):
            lines += [f'{TITLES[line](results)}:', '',
                      _markdown_table(HEADERS[line], finetune_rows(results, line)), '']
    if _ok(results.get(INFERENCE)):
        lines += [f'{inference_title(results)}:', '',
                  _markdown_table(inference_header(results), inference_rows(results)), '']
    if kernel_rows(results):
        lines += [_markdown_table(KERNEL_HEADER, kernel_rows(results)), '']
    if results.get('end_to_end'):
        lines += [_markdown_table(['end to end', 'tokens/s (total)', 'tokens/s (training)',
                                   'build s', 'train s', 'peak RSS MB'],
                                  end_to_end_rows(results)), '']
    data = results.get('data_pipeline')
    if _ok(data):
        lines += [f"Data pipeline alone ({os.path.basename(data['path'])}, max_len "
                  f"{data['max_len']}): d2l {data['d2l_seconds']:.2f} s, d2lbert "
                  f"{data['d2lbert_seconds']:.2f} s ({data['speedup']:.1f}x).", '']
    lines += [_markdown_table(['target', 'measured', 'required', ''],
                              target_rows(results))]
    return '\n'.join(lines)
