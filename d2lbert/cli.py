"""The `d2lbert` command: pretrain, encode, convert, bench."""
import argparse
import dataclasses
import sys

from .pretrain import PretrainOptions

DEFAULTS = PretrainOptions()

PRETRAIN_FLAGS = [
    ('--data', str, 'bundled', "'bundled' (offline, shipped with d2lbert), 'wikitext-2', "
     "'wikitext-103' (downloaded once), a folder with wiki.{train,valid}.tokens, or a text file"),
    ('--preset', str, 'book', "model size: 'book' (128 hidden, 2 layers), 'small' (256, 4) "
     "or 'base' (768, 12); d2l architecture"),
    ('--config', str, None, 'a BERTConfig JSON file instead of --preset'),
    ('--batch-size', int, DEFAULTS.batch_size, 'sentence pairs per step (split over devices)'),
    ('--max-len', int, DEFAULTS.max_len, 'longest <cls> a <sep> b <sep> sequence, in tokens'),
    ('--steps', int, DEFAULTS.steps, 'optimizer steps in total (a resumed run continues to it)'),
    ('--lr', float, DEFAULTS.lr, 'peak learning rate'),
    ('--warmup', int, DEFAULTS.warmup, 'steps of linear warmup; then linear decay to 0'),
    ('--weight-decay', float, DEFAULTS.weight_decay,
     'weight decay (never on biases and LayerNorm parameters)'),
    ('--clip', float, DEFAULTS.clip, 'clip the global gradient norm to this (0: off)'),
    ('--optimizer', str, DEFAULTS.optimizer, 'adam, bertadam (decoupled weight decay) or lamb'),
    ('--accumulate', int, DEFAULTS.accumulate, 'batches whose gradients make one step'),
    ('--gpus', str, None, 'comma-separated GPU ids, e.g. 0,1 (default: all usable GPUs, '
     'else the CPU)'),
    ('--eval-every', int, DEFAULTS.eval_every, 'held-out evaluation every N steps'),
    ('--save-every', int, DEFAULTS.save_every, 'checkpoint every N steps'),
    ('--log-every', int, DEFAULTS.log_every, 'log metrics (and check for NaN) every N steps'),
    ('--keep', int, DEFAULTS.keep, 'keep the newest K checkpoints'),
    ('--out', str, None, 'output folder (default: runs/bert-DATE-TIME)'),
    ('--seed', int, DEFAULTS.seed, 'seeds the data, the initialization and dropout'),
    ('--kvstore', str, DEFAULTS.kvstore, "MXNet kvstore for gradient all-reduce: 'device', "
     "'local', or 'dist_sync' for several machines"),
    ('--num-workers', int, DEFAULTS.num_workers, 'processes preparing the data'),
    ('--min-freq', int, DEFAULTS.min_freq, 'drop tokens seen fewer times from the vocabulary'),
]


def add_pretrain_parser(subparsers):
    parser = subparsers.add_parser(
        'pretrain', help='pretrain BERT (default: offline, bundled corpus, ~1 min on a CPU)',
        description='Pretrain BERT with masked-LM and next-sentence objectives.')
    for flag, kind, default, text in PRETRAIN_FLAGS:
        parser.add_argument(flag, type=kind, default=default, help=f'{text} (default: {default})')
    parser.add_argument('--cpu', action='store_true', help='train on the CPU even with GPUs')
    parser.add_argument('--amp', action='store_true',
                        help='float16 mixed precision with dynamic loss scaling (GPU only)')
    parser.add_argument('--resume', action='store_true',
                        help='continue from the newest complete checkpoint in --out')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    parser.set_defaults(run=run_pretrain)


def run_pretrain(args):
    from .pretrain import pretrain
    names = {field.name for field in dataclasses.fields(PretrainOptions)}
    options = PretrainOptions(**{k: v for k, v in vars(args).items() if k in names},
                              progress=not args.no_progress)
    summary = pretrain(options)
    print(f'\nDone. Results in {summary["out"]}/: checkpoints/, metrics.jsonl, loss.png.\n'
          f'Encode text with it:  d2lbert encode --model {summary["out"]} "some text"')


def add_encode_parser(subparsers):
    parser = subparsers.add_parser('encode', help='encode text with a pretrained model')
    parser.add_argument('--model', required=True, help='a pretraining output folder')
    parser.add_argument('text', help='a sentence; separate a pair with " ||| "')
    parser.add_argument('--save', help='save the vectors to this .npy file')
    parser.set_defaults(run=run_encode)


def run_encode(args):
    import numpy
    from .encoding import get_bert_encoding, load_pretrained
    net, vocab = load_pretrained(args.model)
    first, _, second = args.text.partition('|||')
    tokens_a = first.lower().split()
    tokens_b = second.lower().split() if second.strip() else None
    vectors = get_bert_encoding(net, vocab, tokens_a, tokens_b)[0].asnumpy()
    if args.save:
        numpy.save(args.save, vectors)
        print(f'saved {vectors.shape} array to {args.save}')
    else:
        numpy.set_printoptions(precision=4, suppress=True, threshold=64, edgeitems=3)
        print(f'{vectors.shape[0]} tokens x {vectors.shape[1]} dimensions:\n{vectors}')


def add_convert_parser(subparsers):
    parser = subparsers.add_parser(
        'convert', help='Hugging Face BERT <-> d2lbert model folders',
        description='Convert a Hugging Face BERT folder (config.json, model.safetensors, '
                    'vocab.txt) to a d2lbert model folder, or a d2lbert model / pretraining '
                    'output folder to Hugging Face format.')
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument('--from-hf', metavar='DIR', help='a Hugging Face BERT folder')
    direction.add_argument('--to-hf', metavar='DIR',
                           help='a d2lbert model folder or pretraining output folder')
    parser.add_argument('--out', required=True, help='the folder to write')
    parser.add_argument('--allow-pickle', action='store_true',
                        help='read pytorch_model.bin (unpickling can run code: only for '
                             'files you trust)')
    parser.set_defaults(run=run_convert)


def run_convert(args):
    from .interop import convert_from_hf, convert_to_hf
    if args.from_hf:
        missing = convert_from_hf(args.from_hf, args.out, args.allow_pickle)
        note = f' (missing heads, left randomly initialized: {", ".join(missing)})' \
            if missing else ''
        print(f'wrote d2lbert model folder {args.out}{note}')
    else:
        convert_to_hf(args.to_hf, args.out)
        print(f'wrote Hugging Face BERT folder {args.out} '
              '(transformers.BertForPreTraining.from_pretrained loads it)')


def add_bench_parser(subparsers):
    parser = subparsers.add_parser(
        'bench', help='benchmark training speed against the d2l book and GluonNLP',
        description='Training-step throughput of d2lbert, the d2l book\'s BERTModel and '
                    'GluonNLP 0.10\'s BERTModel (same sizes, same inputs, each in its own '
                    'process), model FLOP/s against the measured GEMM rate, end to end on '
                    'real text and the data pipeline; every figure a ratio from the same run.')
    parser.add_argument('--configs', default=None,
                        help="comma-separated sizes: book, small (default: book,small)")
    parser.add_argument('--steps', type=int, default=None,
                        help='timed steps per implementation and size (default: 10)')
    parser.add_argument('--threads', type=int, default=2,
                        help='OMP_NUM_THREADS of every measurement (default: 2)')
    parser.add_argument('--device', default='cpu',
                        help="'cpu' or 'gpu:N' (needs a GPU build of MXNet; default: cpu)")
    parser.add_argument('--only', default='d2lbert,d2l,gluonnlp',
                        help='comma-separated implementations (default: d2lbert,d2l,gluonnlp)')
    parser.add_argument('--wikitext', default=None,
                        help='a wiki.*.tokens file for the real-text benchmarks (default: '
                             '../shared/data/wikitext-2/wiki.valid.tokens from the current '
                             'folder or the repository; skipped if absent)')
    parser.add_argument('--json', default=None, help='also write every number to this file')
    parser.add_argument('--quick', action='store_true',
                        help='tiny sizes, 2 steps: checks the harness, not the speed')
    parser.set_defaults(run=run_bench)


def check_bench_device(device):
    """'cpu', or 'gpu:N' for a GPU this MXNet can use; else a clear ValueError."""
    if device == 'cpu':
        return device
    kind, _, index = device.partition(':')
    if kind != 'gpu' or not index.isdigit():
        raise ValueError(f"--device must be 'cpu' or 'gpu:N', got {device!r}")
    from .devices import usable_gpu_ids
    usable = usable_gpu_ids()
    if int(index) not in usable:
        raise ValueError(f'--device {device}: GPU {index} is not usable here (usable GPUs: '
                         f'{usable or "none"})')
    return device


def run_bench(args):
    import json
    import shlex
    from .bench import BenchOptions, find_wikitext, run_benchmarks
    from .bench.report import format_report, markdown_snippet
    chosen = dict(threads=args.threads, only=tuple(args.only.split(',')),
                  wikitext=find_wikitext(args.wikitext), device=check_bench_device(args.device))
    if args.configs:
        chosen['configs'] = tuple(args.configs.split(','))
    if args.steps:
        chosen['steps'] = args.steps
    options = (BenchOptions.quick_options(**chosen) if args.quick
               else BenchOptions(**chosen))
    results = run_benchmarks(options, log=lambda text: print(text, file=sys.stderr))
    results['command'] = shlex.join(['d2lbert'] + sys.argv[1:]) \
        if sys.argv[1:2] == ['bench'] else 'd2lbert bench'
    print(format_report(results))
    print('\nFor the README:\n\n' + markdown_snippet(results))
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump(results, f, indent=2)
        print(f'\nwrote {args.json}', file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='d2lbert', description=__doc__)
    subparsers = parser.add_subparsers(dest='command', required=True)
    add_pretrain_parser(subparsers)
    add_encode_parser(subparsers)
    add_convert_parser(subparsers)
    add_bench_parser(subparsers)
    args = parser.parse_args(argv)
    from .checkpoint import CheckpointError
    from .data import DownloadError
    from .pretrain import PretrainError, TrainingDiverged
    try:
        args.run(args)
    except TrainingDiverged as error:
        print(f'd2lbert: {error}', file=sys.stderr)
        return 3
    except (PretrainError, CheckpointError, DownloadError, ValueError,
            FileNotFoundError) as error:
        print(f'd2lbert {args.command}: error: {error}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('\nd2lbert: interrupted; the last complete checkpoint is kept '
              '(continue with --resume)', file=sys.stderr)
        return 130
    return 0
