"""The `d2lbert` command: pretrain, finetune, predict, encode, fill-mask, convert, bench,
launch."""
import argparse
import os
import sys
import warnings

from .util.process import configure_cpu, import_mxnet_for_a_command

# The command's process: threads and OpenBLAS's core are read once, when MXNet loads
# (on the imports below), so they are set first; a library import of d2lbert sets none,
# and a program that loaded MXNet before it runs `main` keeps its own.
if 'mxnet' not in sys.modules:
    configure_cpu()
    import_mxnet_for_a_command()

from .bench import BenchOptions  # noqa: E402
from .finetuning.finetune import FinetuneOptions  # noqa: E402
from .finetuning.predict import PredictOptions  # noqa: E402
from .finetuning.tasks import TASKS  # noqa: E402
from .interop.convert import ConvertOptions  # noqa: E402
from .interop.encode import (EncodeOptions, split_pair, tokenize_pair,  # noqa: E402
                             unknown_words_line)
from .pretraining.fill_mask import FillMaskOptions  # noqa: E402
from .pretraining.pretrain import PretrainOptions  # noqa: E402
from .util.exit import exit_at_once  # noqa: E402
from .util.options import check_folder, check_output_file, check_text  # noqa: E402


def add_pretrain_parser(subparsers):
    parser = subparsers.add_parser(
        'pretrain', help='pretrain BERT (default: offline, bundled corpus)',
        description='Pretrain BERT with masked-LM and next-sentence objectives.')
    PretrainOptions.add_arguments(parser, only_given=True)
    parser.set_defaults(run=run_pretrain)


def command_options(options_class, args, command):
    """The options of a training command: the flags given; with --resume, the run's
    recorded options (run.json) for the flags not given (`trajectory` ones given must
    agree with the record: `run.folder.prepare_out_dir`); the defaults for the rest."""
    from .run.folder import recorded_options
    recorded = recorded_options(options_class.given_in(args), command)
    return options_class.from_arguments(args, recorded)


def run_pretrain(args):
    """Every flag is checked (by `PretrainOptions`) before anything is read or written."""
    from .pretraining.pretrain import pretrain
    options = command_options(PretrainOptions, args, 'pretrain')
    summary = pretrain(options, start_model(options))
    if summary['rank'] != 0:  # another worker of the job writes the results
        return
    if 'minutes' in summary:
        print(f'\nTrained {summary["steps"]} steps in {summary["seconds"] / 60:.2f} of the '
              f'{summary["minutes"]:g} minutes (--minutes).')
    print(f'\nDone. Results in {summary["out"]}/: checkpoints/, metrics.jsonl, loss.png.\n'
          f'Encode text with it:  d2lbert encode --model {summary["out"]} "some text"')


def start_model(options):
    """The `StartModel` of `pretrain --model` (None without): loaded after seeding, so
    that a head the model lacks is drawn as the run's --seed says."""
    if options.model is None:
        return None
    import mxnet as mx
    from .interop.pretrained import model_source
    from .pretraining.start import StartModel, fresh_heads_line
    mx.random.seed(options.seed)
    net, vocab = load_model_flag(options.model)
    if getattr(net, 'missing_heads', ()):
        print(fresh_heads_line(options.model, net.missing_heads))
    return StartModel(net, vocab, model_source(options.model))


def add_finetune_parser(subparsers):
    parser = subparsers.add_parser(
        'finetune', help='fine-tune a pretrained BERT on a labelled task',
        description='Fine-tune a pretrained BERT with a new output layer: a class or '
                    'number per text or pair, or a tag per word.')
    FinetuneOptions.add_arguments(parser, only_given=True)
    parser.set_defaults(run=run_finetune)


def load_model_flag(model):
    """`load_pretrained(--model)`, hybridized, its errors naming the flag; a fine-tuned
    model is refused; the heads a model lacks are not warned about (the command says
    what it does about them)."""
    from .interop import load_pretrained
    from .interop.hf_weights import MissingHeadsWarning
    from .interop.huggingface import PickleRefused
    from .model import BERTModel
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', MissingHeadsWarning)
            net, vocab = load_pretrained(model)
    except PickleRefused as error:
        raise ValueError(f'--model {model}: {error.path} is a pickle, and loading a pickle '
                         'can run arbitrary code; if you trust it, convert the folder first: '
                         f'd2lbert convert --from-hf {model} --out DIR --allow-pickle') from None
    except (FileNotFoundError, ValueError) as error:
        raise ValueError(f'--model {model}: {error}') from None
    if not isinstance(net, BERTModel):
        raise ValueError(f'--model {model}: a fine-tuned model ({type(net).__name__}), not '
                         'a pretrained one: `d2lbert predict --model` reads it')
    net.hybridize(static_alloc=True)
    return net, vocab


def run_finetune(args):
    from .finetuning.finetune import check_sources, finetune
    options = command_options(FinetuneOptions, args, 'finetune')
    check_sources(options)
    summary = finetune(options, load_model_flag(options.model))
    best = summary['best'] or {}
    scores = ', '.join(f'{k} {v:.4f}' for k, v in best.items() if k not in ('step', 'split'))
    out = TASKS[options.task].predictions
    print(f'\nDone. Best model (step {best.get("step")}{": " + scores if scores else ""}) in '
          f'{summary["model"]}/.\nPredict with it:  d2lbert predict --model {summary["out"]} '
          f'--data FILE --out {out}')


def add_predict_parser(subparsers):
    parser = subparsers.add_parser(
        'predict', help='predict with a fine-tuned model',
        description='Write one JSON line per example of --data: label and probabilities, '
                    'value, or tags; a question-answering model writes the official '
                    'predictions.json and null_odds.json of a SQuAD file into the folder '
                    '--out, or answers --question about --context.')
    PredictOptions.add_arguments(parser)
    parser.set_defaults(run=run_predict)


def check_cpu_precision(precision):
    """--precision bf16 needs a CPU with avx512_bf16 or AMX, int8 oneDNN's int8 kernels
    (`run.precision`); returns the precision to run in ('auto' resolved)."""
    import mxnet as mx
    from .run.precision import check_hardware, inference_precision
    precision = inference_precision(precision, mx.cpu())
    check_hardware(precision, [mx.cpu()])
    return precision


def run_predict(args):
    from .finetuning.predict import predict
    from .finetuning.task_model import load_task_info
    from .run.models import model_folder
    args = PredictOptions.from_arguments(args)
    args.precision = check_cpu_precision(args.precision)
    check_folder('--model', args.model)
    info = load_task_info(model_folder(args.model))
    if args.answers_one_question():
        return run_answer(args, info)
    for name in ('--data', '--out'):
        if getattr(args, name[2:]) is None:
            raise ValueError(f'{name} is required (or, with a question-answering model, '
                             '--question and --context)')
    if not os.path.isfile(args.data):
        raise ValueError(f'--data {args.data}: no such file')
    if info.head == 'question_answering':
        if args.precision == 'int8':
            raise ValueError('--precision int8: a question-answering model predicts in fp32 '
                             'or bf16')
        return run_predict_squad(args)
    summary = predict(args.model, args.data, args.out, args.batch_size,
                      precision=args.precision, overwrite=args.overwrite,
                      calibration=args.calibration)
    scores = summary['scores']
    shown = '' if not scores else '; ' + ', '.join(f'{k} {v:.4f}' for k, v in scores.items())
    products = summary['int8'] or f'matrix products in {args.precision}'
    print(f'wrote {summary["examples"]} predictions to {args.out} ({products}){shown}')


def run_predict_squad(args):
    """A SQuAD file's answers into the folder --out (new or empty, or replaced whole with
    --overwrite: `run.folder.folder_written_whole`); the official scores as JSON (as
    evaluate-v2.0.py prints them) when the file has the answers."""
    import json
    from .finetuning.qa_predict import predict_squad
    from .run.folder import folder_written_whole
    check_text('--out', args.out)
    if os.path.isfile(args.out):
        raise ValueError(f'--out {args.out} is a file; a question-answering model writes a '
                         'folder (predictions.json, null_odds.json)')
    inputs = {'--data': args.data, '--model': args.model}
    with folder_written_whole('--out', args.out, args.overwrite, inputs) as tmp:
        summary = predict_squad(args.model, args.data, tmp, args.batch_size,
                                precision=args.precision)
    files = [os.path.join(args.out, os.path.basename(path)) for path in summary['files']]
    print(f'wrote the answers to {summary["examples"]} questions to {" and ".join(files)}')
    if summary['scores']:
        print(json.dumps(summary['scores'], indent=2))


def run_answer(args, info):
    """Print a question-answering model's answer to --question about --context."""
    from .finetuning.qa_predict import answer_question
    for name in ('--question', '--context'):
        if getattr(args, name[2:]) is None:
            other = '--context' if name == '--question' else '--question'
            raise ValueError(f'{other} needs {name} too')
    if info.head != 'question_answering':
        raise ValueError(f'--question: --model {args.model} is a {info.task!r} model, not '
                         'a question-answering one (d2lbert finetune --task squad2 or '
                         'squad1)')
    result = answer_question(args.model, args.question, args.context,
                             precision=args.precision)
    odds = f'null odds {result["null_odds"]:.4f}, threshold {result["threshold"]:.4f}'
    if result['answer']:
        print(f'answer: {result["answer"]}\n({odds})')
    else:
        print(f"answer: '' (no answer in the passage: {odds}; the best span was "
              f'{result["best_span"]!r})')


def add_encode_parser(subparsers):
    parser = subparsers.add_parser(
        'encode', help='encode text with a pretrained model',
        description="Print (or --save) the vectors of a text's tokens; with --data, write "
                    'one vector per text of a file to the .npy file --out.')
    EncodeOptions.add_arguments(parser)
    parser.set_defaults(run=run_encode)


def run_encode(args):
    args = EncodeOptions.from_arguments(args)
    if args.data is None and args.precision == 'auto':
        args.precision = 'fp32'  # one text: nothing for bf16 to gain
    args.precision = check_cpu_precision(args.precision)
    if args.data is not None:
        return run_encode_file(args)
    return run_encode_text(args)


def run_encode_text(args):
    import numpy
    from .interop import get_bert_encoding
    from .model.precision import feed_forward_inputs_in_float32
    from .run.precision import use_precision
    from .run.files import check_new_file, check_output, write_file_atomically
    first, second = split_pair(args.text)
    save = args.save
    if save is not None:
        save = check_output_file('--save', save if save.endswith('.npy') else save + '.npy')
        check_output('--save', save, {'--model': args.model})
        check_new_file('--save', save, args.overwrite)
    net, vocab = load_model_flag(args.model)
    net = use_precision(net, args.precision)
    if args.precision == 'bf16':
        net = feed_forward_inputs_in_float32(net)  # as encode --data computes
    tokens_a, tokens_b = tokenize_pair(vocab, first, second)
    vectors = get_bert_encoding(net, vocab, tokens_a, tokens_b)[0].asnumpy()
    print(unknown_words_line(vocab, tokens_a + (tokens_b or [])))
    if save:
        write_file_atomically('--save', save, lambda f: numpy.save(f, vectors), binary=True,
                              overwrite=args.overwrite)
        print(f'saved {vectors.shape} array to {save}')
    else:
        numpy.set_printoptions(precision=4, suppress=True, threshold=64, edgeitems=3)
        print(f'{vectors.shape[0]} tokens x {vectors.shape[1]} dimensions:\n{vectors}')


def run_encode_file(args):
    """--out is written whole at the end (never over an input, a link or a file that
    exists, unless --overwrite), after --data was read and checked once."""
    from .interop.encode import data_source, encode_file
    from .run.files import check_new_file, check_output
    if not os.path.isfile(args.data):
        raise ValueError(f'--data {args.data}: no such file')
    check_output_file('--out', args.out)
    check_output('--out', args.out, {'--data': args.data, '--model': args.model,
                                     '--calibration': args.calibration})
    check_new_file('--out', args.out, args.overwrite)
    data_source(args)  # a file that is not text, or holds none: refused before loading
    net, vocab = load_model_flag(args.model)
    count, hiddens, pooling, int8_line = encode_file(args, net, vocab)
    normalized = ', normalized' if args.normalize else ''
    products = int8_line or f'matrix products in {args.precision}'
    print(f'wrote {count} vectors of {hiddens} ({pooling} pooling{normalized}) to '
          f'{args.out}; {products}')


def add_fill_mask_parser(subparsers):
    parser = subparsers.add_parser(
        'fill-mask', help="what a pretrained model's masked LM predicts for [MASK]",
        description='Write one JSON line per line of --data: the text, and for each of '
                    'its [MASK]s the --top-k most probable tokens with their probabilities.')
    FillMaskOptions.add_arguments(parser)
    parser.set_defaults(run=run_fill_mask)


def run_fill_mask(args):
    """--out is written whole at the end (never over an input, a link or a file that
    exists, unless --overwrite), after every line of --data was read and checked."""
    import json
    from .pretraining.fill_mask import fill_mask, read_masked_texts
    from .run.files import check_new_file, check_output, write_file_atomically
    args = FillMaskOptions.from_arguments(args)
    if not os.path.isfile(args.data):
        raise ValueError(f'--data {args.data}: no such file')
    check_output_file('--out', args.out)
    check_output('--out', args.out, {'--data': args.data, '--model': args.model})
    check_new_file('--out', args.out, args.overwrite)
    net, vocab = load_model_flag(args.model)
    if 'mlm' in getattr(net, 'missing_heads', ()):
        raise ValueError(f'--model {args.model} has no masked-LM head (a bare BertModel?): '
                         'give it one first with d2lbert pretrain --model')
    texts = read_masked_texts(args.data, vocab, net.config.max_len)
    records = fill_mask(net, vocab, texts, args.top_k, args.batch_size)
    write_file_atomically('--out', args.out, lambda f: f.writelines(
        json.dumps(record, ensure_ascii=False) + '\n' for record in records),
        overwrite=args.overwrite)
    masks = sum(len(record['predictions']) for record in records)
    print(f'wrote the predictions for {masks} [MASK]s of {len(records)} texts to {args.out}')


def add_convert_parser(subparsers):
    parser = subparsers.add_parser(
        'convert', help='Hugging Face BERT <-> d2lbert model folders',
        description='Convert a Hugging Face BERT folder (config.json, model.safetensors, '
                    'vocab.txt) to a d2lbert model folder, or a d2lbert model / pretraining '
                    'output folder to Hugging Face format.')
    ConvertOptions.add_arguments(parser)
    parser.set_defaults(run=run_convert)


def run_convert(args):
    """The folder --out is written whole in a temporary folder beside it, then put in
    place: new or empty (or replaced whole with --overwrite), never holding an input."""
    from .interop.convert import (read_hf_model, read_model_to_export, write_hf_folder,
                                  write_hf_model)
    from .interop.huggingface import PickleRefused
    from .run.models import model_step
    args = ConvertOptions.from_arguments(args)
    source_flag = '--from-hf' if args.from_hf is not None else '--to-hf'
    source = check_folder(source_flag, args.from_hf or args.to_hf)
    try:  # the input is read whole (and refused, naming it) before anything is written
        if args.from_hf:
            model = read_hf_model(source, args.allow_pickle)
        else:
            model, folder = read_model_to_export(source)
    except PickleRefused as error:
        raise ValueError(f'{source_flag} {source}: {error.path} is a pickle, and loading a '
                         'pickle can run arbitrary code: pass --allow-pickle if you trust '
                         'it') from None
    except (OSError, ValueError) as error:
        raise ValueError(f'{source_flag} {source}: {error}') from None
    if args.from_hf:  # written as `save_pretrained` writes a model folder
        missing = write_hf_model('--out', args.out, model, args.overwrite,
                                 {source_flag: source})
        note = f' (missing heads, left randomly initialized: {", ".join(missing)})' \
            if missing else ''
        print(f'wrote d2lbert model folder {args.out}{note}')
        return
    architecture = write_hf_folder('--out', args.out, model, args.overwrite,
                                   {source_flag: source})  # as `convert_to_hf` writes it
    step = model_step(folder)
    at_step = '' if step is None else f' (step {step})'
    print(f'wrote Hugging Face BERT folder {args.out} from {folder}{at_step}: '
          f'transformers.{architecture}.from_pretrained loads it')


def add_bench_parser(subparsers):
    parser = subparsers.add_parser(
        'bench', help='benchmark training speed against the d2l book and GluonNLP',
        description='Training-step throughput of d2lbert, the d2l book\'s BERTModel and '
                    'GluonNLP 0.10\'s BERTModel (same sizes, same inputs, each in its own '
                    'process), model FLOP/s against the measured GEMM rate, end to end on '
                    'real text and the data pipeline; fine-tuning steps on sentence pairs '
                    'against the book\'s NLI chapter and transformers\' '
                    'BertForSequenceClassification; SQuAD steps on 384-token windows '
                    'against transformers\' BertForQuestionAnswering; encode and predict '
                    '--data on SST-2 sentences against sentence-transformers and '
                    'transformers; every figure a ratio from the same run.')
    BenchOptions.add_arguments(parser, only_given=True)
    parser.add_argument('--json', default=None, help='also write every number to this file')
    parser.set_defaults(run=run_bench)


def check_gpu_usable(device):
    """--device 'gpu:N' must name a GPU this MXNet can use (a ValueError if not)."""
    if device == 'cpu':
        return
    from .run.devices import usable_gpu_ids
    index = int(device.partition(':')[2])
    usable = usable_gpu_ids()
    if index not in usable:
        raise ValueError(f'--device {device}: GPU {index} is not usable here (usable GPUs: '
                         f'{usable or "none"})')


def check_bench_precision(options):
    """bench --precision bf16 needs a CPU (or GPU) that computes in bfloat16."""
    import mxnet as mx
    from .run.precision import check_hardware
    kind, _, index = options.device.partition(':')
    check_hardware(options.precision, [mx.gpu(int(index)) if kind == 'gpu' else mx.cpu()])


def run_bench(args):
    """Every flag is checked (by `BenchOptions`) before the first measurement."""
    import json
    import shlex
    from .bench import find_inputs, run_benchmarks
    from .run.files import check_output, write_file_atomically
    from .bench.report import format_report, markdown_snippet
    chosen = find_inputs(BenchOptions.given_in(args))
    options = (BenchOptions.quick_options(**chosen) if chosen.get('quick')
               else BenchOptions(**chosen))
    check_gpu_usable(options.device)
    check_bench_precision(options)
    if args.json is not None:
        check_output_file('--json', args.json)
        check_output('--json', args.json, {'--wikitext': options.wikitext,
                                           '--sst2-train': options.sst2_train})
    results = run_benchmarks(options, log=lambda text: print(text, file=sys.stderr))
    results['command'] = shlex.join(['d2lbert'] + sys.argv[1:]) \
        if sys.argv[1:2] == ['bench'] else 'd2lbert bench'
    print(format_report(results))
    if not options.quick:  # quick numbers are no measurement to quote
        print('\nFor the README:\n\n' + markdown_snippet(results))
    if args.json:
        write_file_atomically('--json', args.json,
                              lambda f: json.dump(results, f, indent=2))
        print(f'\nwrote {args.json}', file=sys.stderr)


def add_launch_parser(subparsers):
    parser = subparsers.add_parser(
        'launch', help='run pretraining as a job of several processes (MXNet parameter '
                       'server), here or on other machines by ssh',
        description='Start the scheduler, servers and workers of a `--kvstore dist_sync` '
                    'job and stop them all when one fails, e.g.  d2lbert launch -n 2 -- '
                    'd2lbert pretrain --kvstore dist_sync --out runs/two')
    parser.add_argument('-n', '--num-workers', type=int, required=True,
                        help='training (worker) processes')
    parser.add_argument('-s', '--num-servers', type=int, default=None,
                        help='parameter-server processes (default: 1, or one per host)')
    parser.add_argument('--hosts', help='a file with one host or host:ssh_port per line: '
                        'run server i and worker i on host i by ssh (default: every process '
                        'here, on 127.0.0.1)')
    parser.add_argument('--host-ip', help="with --hosts: this machine's address as the "
                        'hosts reach it (default: found)')
    parser.add_argument('--port', type=int, help="the scheduler's TCP port (default: the "
                        'first free from 9091)')
    parser.add_argument('job_command', nargs=argparse.REMAINDER, metavar='COMMAND',
                        help='-- and the command every process runs')
    parser.set_defaults(run=run_launch)


def run_launch(args):
    """Returns the job's exit code (that of the first process that failed)."""
    from .launch import launch
    command = args.job_command
    if command[:1] == ['--']:
        command = command[1:]
    return launch(command, args.num_workers, args.num_servers, args.hosts, args.host_ip,
                  args.port)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='d2lbert', description=__doc__)
    subparsers = parser.add_subparsers(dest='command', required=True)
    add_pretrain_parser(subparsers)
    add_finetune_parser(subparsers)
    add_predict_parser(subparsers)
    add_encode_parser(subparsers)
    add_fill_mask_parser(subparsers)
    add_convert_parser(subparsers)
    add_bench_parser(subparsers)
    add_launch_parser(subparsers)
    args = parser.parse_args(argv)
    from mxnet import npx
    npx.set_np()  # the command's process: the package's code uses MXNet's NumPy interface
    exit_code = run_command(args, then_ignore=argv is None)  # None: the program's own argv
    if args.command == 'pretrain':
        from .pretraining.distributed import leave_job
        leave_job(exit_code)  # a worker of a job that failed exits here, with exit_code
    return exit_code


def console():
    """The `d2lbert` program (setup.py's console script, `python -m d2lbert`): `main()`,
    then an exit that runs the exit handlers (a run's lock and leftovers, logging's,
    MXNet's, which waits for its engine) and skips the interpreter's teardown of the
    modules and MXNet's engine, which took 0.3 to 0.4 s of every command's process
    (docs/performance.md). Every output is written and closed before. Not in a worker
    of a ps-lite job: there the teardown of its kvstore tells the servers to stop."""
    exit_code = main()
    from .pretraining.distributed import JOINED_WORKERS
    if JOINED_WORKERS:
        sys.exit(exit_code)
    exit_at_once(exit_code)


def run_command(args, then_ignore):
    """Run the parsed command; returns its exit code, its error printed in one line.
    then_ignore: ignore SIGTERM once the command has stopped (`stop_on_sigterm`)."""
    from .data import DownloadError
    from .run.checkpoint import CheckpointError
    from .run.errors import RunError, RunFault
    from .run.signals import Stopped, stop_on_sigterm
    try:
        with stop_on_sigterm(then_ignore=then_ignore):
            exit_code = args.run(args)
    except RunFault as error:
        print(f'd2lbert: {error}', file=sys.stderr)
        return 3
    except (RunError, CheckpointError, DownloadError, ValueError,
            FileNotFoundError) as error:
        print(f'd2lbert {args.command}: error: {error}', file=sys.stderr)
        return 2
    except OSError as error:  # e.g. a folder it may not read or write, a full disk
        from .run.files import is_disk_full
        where = f'{error.filename}: ' if error.filename else ''
        print(f'd2lbert {args.command}: error: {where}{error.strerror or error}',
              file=sys.stderr)
        return 3 if is_disk_full(error) else 2
    except KeyboardInterrupt as stop:  # Ctrl-C (SIGINT) or SIGTERM (`Stopped`)
        signum = stop.signum if isinstance(stop, Stopped) else 2
        print(f'\nd2lbert {args.command}: stopped by {"SIGTERM" if signum == 15 else "SIGINT"}'
              '; every output is whole (a run keeps its last complete checkpoint: continue '
              'with --resume)', file=sys.stderr)
        return 128 + signum
    return exit_code or 0
