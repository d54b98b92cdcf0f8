"""Inference against the peers (issue 53): whole `d2lbert encode --data` and `d2lbert
predict --data` processes timed (process start included) against sentence-transformers'
`encode(batch_size=64)` and transformers' `BertForSequenceClassification` over
length-sorted batches of 64 (model loading excluded), on the same SST-2 training
sentences, each in its own process with the same OMP_NUM_THREADS (d2lbert's each with an
empty D2LBERT_HOME: int8's calibration is timed, as in a first run), in interleaved
rounds (`timed_in_rounds`: on a shared machine the peers' times drifted by a third
between runs); and how close the outputs are (the cosines of the rows; the share of
equal labels). Where onnxruntime is installed, encode has two more peers: MiniLM
exported to ONNX and run by ONNX Runtime, in float32 and dynamically quantized to int8
(`onnx_session`).

    python -m d2lbert.bench.inference --model MINILM_FOLDER --classifier RUN \\
        --texts 20000 --threads 2 --rounds 2 --precisions fp32,bf16,int8 \\
        --json inference.json

--classifier (a `d2lbert finetune` output folder) is optional: without it, encode only.
The same measurement is the 'inference' part of `d2lbert bench` (`d2lbert bench
--configs inference [--precision bf16] [--classifier RUN]`), which judges its targets
(`report.py`).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as onp

from ..run.files import check_output, write_file_atomically
from .inference_inputs import ORT_PEERS, SST2_TRAIN
from .machine import describe_machine
from .rounds import round_orders

PEER_BATCH_SIZE = 64


def default_precisions():
    """{'encode': ..., 'predict': ...}: the precision each command computes in on this
    machine when its --precision is not given ('auto': bf16 where the CPU has it)."""
    import mxnet as mx
    from ..finetuning.predict import PredictOptions
    from ..interop.encode import EncodeOptions
    from ..run.precision import inference_precision
    return {'encode': inference_precision(EncodeOptions.precision, mx.cpu()),
            'predict': inference_precision(PredictOptions.precision, mx.cpu())}


def write_texts(sst2_train, count, folder, column='sentence'):
    """The first `count` sentences of SST-2's train.tsv as sents.txt (one per line) and
    sents.tsv (GLUE's layout, labels kept; the texts' column named `column`); returns
    their paths."""
    with open(sst2_train, encoding='utf-8') as f:
        rows = f.read().splitlines()[1:count + 1]
    txt, tsv = os.path.join(folder, 'sents.txt'), os.path.join(folder, 'sents.tsv')
    with open(txt, 'w', encoding='utf-8') as f:
        f.writelines(row.split('\t')[0].strip() + '\n' for row in rows)
    with open(tsv, 'w', encoding='utf-8') as f:
        f.write(f'{column}\tlabel\n' + ''.join(row + '\n' for row in rows))
    return txt, tsv


def text_column_of(classifier):
    """The column of texts the classifier's task reads: 'text' for a `--task csv` model,
    'sentence' for GLUE's SST-2 (and when there is no classifier)."""
    if classifier is None:
        return 'sentence'
    from ..finetuning.task_model import load_task_info
    from ..finetuning.task_readers import OwnTaskFile
    from ..finetuning.tasks import TASKS
    from ..run.models import model_folder
    task = load_task_info(model_folder(classifier)).task
    return 'text' if isinstance(TASKS[task].reader, OwnTaskFile) else 'sentence'


def timed_process(command, threads, home=None):
    """(seconds, stdout) of a whole process run with OMP_NUM_THREADS=threads (and
    D2LBERT_HOME=home, if given); a RuntimeError if it fails."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if home is not None:
        env['D2LBERT_HOME'] = home
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f'{" ".join(command)} failed:\n{done.stderr[-2000:]}')
    return seconds, done.stdout


def peer(kind, model, texts_file, out, threads):
    """Run a peer in this process (model loading not timed); write its outputs to `out`
    (.npy) and return its seconds."""
    import torch
    torch.set_num_threads(threads)
    with open(texts_file, encoding='utf-8') as f:
        texts = f.read().splitlines()
    if kind in ORT_PEERS:
        session, tokenizer = onnx_session(model, kind == 'onnxruntime int8', threads)
        start = time.perf_counter()
        outputs = onnx_vectors(session, tokenizer, texts)
        seconds = time.perf_counter() - start
    elif kind == 'sentence-transformers':
        from sentence_transformers import SentenceTransformer
        encoder = SentenceTransformer(model, device='cpu')
        start = time.perf_counter()
        outputs = encoder.encode(texts, batch_size=PEER_BATCH_SIZE, normalize_embeddings=True)
        seconds = time.perf_counter() - start
    else:
        import transformers
        tokenizer = transformers.AutoTokenizer.from_pretrained(model)
        classifier = transformers.BertForSequenceClassification.from_pretrained(model).eval()
        start = time.perf_counter()
        lengths = [len(ids) for ids in tokenizer(texts)['input_ids']]
        order = onp.argsort(lengths, kind='stable')
        outputs = onp.empty(len(texts), dtype='int64')
        with torch.inference_mode():
            for first in range(0, len(texts), PEER_BATCH_SIZE):
                rows = order[first:first + PEER_BATCH_SIZE]
                inputs = tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                                   return_tensors='pt')
                outputs[rows] = classifier(**inputs).logits.argmax(-1).numpy()
        seconds = time.perf_counter() - start
    onp.save(out, outputs)
    return seconds


def onnx_session(model, int8, threads):
    """(an ONNX Runtime session of the Hugging Face BERT folder `model`'s encoder, its
    tokenizer): exported by torch.onnx (opset 14, dynamic batch and length); int8: its
    products quantized as `export_dynamic_quantized_onnx_model(model, 'avx2', ...)` of
    sentence-transformers does through optimum's `AutoQuantizationConfig.avx2(
    is_static=False)` (ONNX Runtime's `quantize_dynamic`: uint8 weights, symmetric, per
    output channel; uint8 activations ranged per batch)."""
    import onnxruntime
    import torch
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    bert = transformers.AutoModel.from_pretrained(model, attn_implementation='eager').eval()

    class Encoder(torch.nn.Module):  # the token encodings, from positional inputs
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state
    names = ['input_ids', 'attention_mask', 'token_type_ids']
    example = tokenizer(['an example', 'another example text'], padding=True,
                        return_tensors='pt')
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, 'model.onnx')
    torch.onnx.export(Encoder(), tuple(example[name] for name in names), path,
                      input_names=names, output_names=['hidden'], opset_version=14,
                      dynamic_axes={name: {0: 'batch', 1: 'length'}
                                    for name in names + ['hidden']}, dynamo=False)
    if int8:
        quantized = os.path.join(folder, 'model-int8.onnx')
        quantize_dynamic(path, quantized, weight_type=QuantType.QUInt8, per_channel=True,
                         extra_options={'WeightSymmetric': True})
        path = quantized
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return onnxruntime.InferenceSession(path, options,
                                        providers=['CPUExecutionProvider']), tokenizer


def onnx_vectors(session, tokenizer, texts):
    """The mean-pooled, normalized vectors of texts (as sentence-transformers' MiniLM
    gives them), in batches of PEER_BATCH_SIZE texts of similar length."""
    lengths = [len(ids) for ids in tokenizer(texts)['input_ids']]
    order = onp.argsort(lengths, kind='stable')
    vectors = None
    for first in range(0, len(texts), PEER_BATCH_SIZE):
        rows = order[first:first + PEER_BATCH_SIZE]
        inputs = tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                           max_length=256, return_tensors='np')
        hidden = session.run(None, {name: inputs[name].astype('int64') for name in
                                    ('input_ids', 'attention_mask', 'token_type_ids')})[0]
        mask = inputs['attention_mask'][:, :, None].astype('float32')
        mean = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
        if vectors is None:
            vectors = onp.empty((len(texts), mean.shape[1]), dtype='float32')
        vectors[rows] = mean / onp.linalg.norm(mean, axis=1, keepdims=True)
    return vectors


def onnxruntime_installed():
    """Whether ONNX Runtime and ONNX (the exporter's output) are installed."""
    import importlib.util
    return all(importlib.util.find_spec(name) for name in ('onnxruntime', 'onnx'))


def timed_peer(kind, model, texts_file, out, threads):
    """The seconds `peer` reports, run in a process of its own."""
    _, stdout = timed_process(
        [sys.executable, '-m', 'd2lbert.bench.inference', '--peer', kind, '--model', model,
         '--peer-texts', texts_file, '--peer-out', out, '--threads', str(threads)], threads)
    return float(stdout.strip().splitlines()[-1])


def bench_encode(model, txt, folder, precisions, threads, rounds=1, log=print):
    """{row: {'seconds', ...}} of encoding the texts of `txt`: sentence-transformers
    with `model` (and ONNX Runtime's peers where installed), and `d2lbert encode --data`
    in each of `precisions`, in `rounds` interleaved rounds (`timed_in_rounds`); each
    row's least cosine to sentence-transformers' vector of the same text and its
    speedup."""
    def peer_run(kind):
        return lambda out, home: timed_peer(kind, model, txt, out, threads)

    def d2lbert_run(precision):
        return lambda out, home: timed_process(
            [sys.executable, '-m', 'd2lbert', 'encode', '--model', model, '--data',
             txt, '--pooling', 'mean', '--normalize', '--out', out, '--precision',
             precision], threads, home)[0]
    runs = {'sentence-transformers': peer_run('sentence-transformers'),
            **{kind: peer_run(kind) for kind in
               (ORT_PEERS if onnxruntime_installed() else ())},
            **{f'd2lbert {precision}': d2lbert_run(precision) for precision in precisions}}
    results, outputs = timed_in_rounds(runs, folder, 'encode', dict.fromkeys(runs, '.npy'),
                                       rounds, log)
    reference = onp.load(outputs['sentence-transformers'])
    for row, out in outputs.items():
        vectors = onp.load(out)
        if row != 'sentence-transformers':
            results[row].update(cosines_to(vectors, reference))
        if row.startswith('d2lbert '):
            results[row].update(rows=len(vectors), speedup=results[
                'sentence-transformers']['seconds'] / results[row]['seconds'])
            if 'onnxruntime int8' in results:
                results[row]['speedup_over_onnxruntime_int8'] = (
                    results['onnxruntime int8']['seconds'] / results[row]['seconds'])
    return results


def timed_in_rounds(runs, folder, command, suffixes, rounds, log=print):
    """({row: {'seconds': the mean of its rounds, 'round_seconds': [...]}}, {row: the
    output file of its last round}) of each run(out, home) in `runs` (returning its
    seconds), in `rounds` rounds: the rows in turn, in reverse order every second round
    (`rounds.py`: a drift of the machine's speed weighs on each row alike, and each
    ratio is of times taken side by side). Each run writes a new file in folder (its
    row's suffix in `suffixes`) and has a new, empty D2LBERT_HOME (`first_run_home`)."""
    seconds, outputs = {row: [] for row in runs}, {}
    for number, order in enumerate(round_orders(list(runs), rounds), 1):
        for row in order:
            log(f'inference: {command} / {row} (round {number} of {rounds}) ...')
            name = f"{command}-{row.replace(' ', '-')}-{number}"
            outputs[row] = os.path.join(folder, name + suffixes[row])
            seconds[row].append(runs[row](outputs[row], first_run_home(folder, name)))
    return {row: {'seconds': sum(times) / len(times), 'round_seconds': times}
            for row, times in seconds.items()}, outputs


def first_run_home(folder, name):
    """A new, empty D2LBERT_HOME in folder: a d2lbert run in it keeps nothing from an
    earlier one (int8 calibrates within the time, as a model's first run does)."""
    home = os.path.join(folder, f'home-{name}')
    os.makedirs(home)
    return home


def cosines_to(vectors, reference):
    """{'min_cosine', 'mean_cosine', 'percentile_1_cosine'} of each row of vectors to the
    same row of reference (both normalized)."""
    cosines = (vectors * reference).sum(axis=1)
    return {'min_cosine': float(cosines.min()), 'mean_cosine': float(cosines.mean()),
            'percentile_1_cosine': float(onp.percentile(cosines, 1))}


def bench_predict(classifier, tsv, txt, folder, precisions, threads, rounds=1, log=print):
    """{row: {'seconds', ...}} of classifying the texts: transformers'
    `BertForSequenceClassification` with `classifier` converted to Hugging Face, and
    `d2lbert predict --data tsv` in each of `precisions`, in `rounds` interleaved rounds
    (`timed_in_rounds`); each row's share of labels equal to transformers' and its
    speedup."""
    exported = os.path.join(folder, 'classifier-hf')
    timed_process([sys.executable, '-m', 'd2lbert', 'convert', '--to-hf',
                   classifier, '--out', exported], threads)

    def d2lbert_run(precision):
        return lambda out, home: timed_process(
            [sys.executable, '-m', 'd2lbert', 'predict', '--model', classifier,
             '--data', tsv, '--out', out, '--precision', precision], threads, home)[0]
    runs = {'transformers': lambda out, home: timed_peer('transformers', exported, txt, out,
                                                         threads),
            **{f'd2lbert {precision}': d2lbert_run(precision) for precision in precisions}}
    suffixes = {row: '.npy' if row == 'transformers' else '.jsonl' for row in runs}
    results, outputs = timed_in_rounds(runs, folder, 'predict', suffixes, rounds, log)
    with open(os.path.join(exported, 'config.json'), encoding='utf-8') as f:
        id2label = json.load(f)['id2label']
    reference = [id2label[str(i)] for i in onp.load(outputs['transformers'])]
    for row in runs:
        if row.startswith('d2lbert '):
            with open(outputs[row], encoding='utf-8') as f:
                labels = [json.loads(line)['label'] for line in f]
            results[row].update(
                rows=len(labels),
                equal_labels=sum(a == b for a, b in zip(labels, reference)) / len(reference),
                speedup=results['transformers']['seconds'] / results[row]['seconds'])
    return results


def measure_inference(model, classifier, sst2, count, precisions, threads, rounds=1,
                      log=print):
    """{'texts', 'default_precisions', 'encode', 'predict'} on the first `count`
    sentences of SST-2's train.tsv `sst2`: encode against sentence-transformers with
    `model`; predict against transformers with `classifier` (None: not measured)."""
    with tempfile.TemporaryDirectory() as folder:
        txt, tsv = write_texts(sst2, count, folder, text_column_of(classifier))
        return {'texts': count, 'default_precisions': default_precisions(),
                'rounds': rounds,
                'encode': bench_encode(model, txt, folder, precisions, threads, rounds, log),
                'predict': None if classifier is None else bench_predict(
                    classifier, tsv, txt, folder, precisions, threads, rounds, log)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', required=True, help='a sentence-transformers folder '
                        '(Hugging Face BERT), e.g. all-MiniLM-L6-v2')
    parser.add_argument('--classifier', help='a d2lbert finetune output folder')
    parser.add_argument('--sst2', default=SST2_TRAIN, help='SST-2 train.tsv')
    parser.add_argument('--texts', type=int, default=20000)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=2,
                        help='each command timed this many times, in interleaved rounds')
    parser.add_argument('--precisions', default='fp32,bf16')
    parser.add_argument('--json', help='write the results to this file')
    parser.add_argument('--peer', choices=('sentence-transformers', 'transformers',
                                           *ORT_PEERS),
                        help=argparse.SUPPRESS)
    parser.add_argument('--peer-texts', help=argparse.SUPPRESS)
    parser.add_argument('--peer-out', help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.peer:
        print(peer(options.peer, options.model, options.peer_texts, options.peer_out,
                   options.threads))
        return
    if not os.path.isfile(options.sst2):
        parser.error(f"--sst2 {options.sst2}: not a file (SST-2's train.tsv)")
    if options.json:
        check_output('--json', options.json, {'--sst2': options.sst2, '--model': options.model})
    results = {'command': 'python -m d2lbert.bench.inference ' + ' '.join(
                   argv if argv is not None else sys.argv[1:]),
               'date': time.strftime('%Y-%m-%d'), 'machine': describe_machine(),
               'threads': options.threads}
    results.update(measure_inference(
        options.model, options.classifier, options.sst2, options.texts,
        options.precisions.split(','), options.threads, options.rounds,
        log=lambda text: print(text, file=sys.stderr)))
    print(json.dumps(results, indent=2))
    if options.json:
        write_file_atomically('--json', options.json,
                              lambda f: json.dump(results, f, indent=2))


if __name__ == '__main__':
    main()
