"""What `--precision int8` costs in accuracy: MiniLM's sentence vectors against float32's
(cosines), and a fine-tuned MiniLM classifier's SST-2 dev labels and accuracy.

    python chapter_bert/studies/int8_accuracy.py --model MINILM_FOLDER \\
        --sst2 ../shared/data/sst-2 --texts 2000 [--classifier FINETUNE_OUTPUT]

The commands run as a user runs them, in processes of their own (OMP_NUM_THREADS=
--threads), each precision once: `d2lbert encode --data --pooling mean --normalize`
on the first --texts sentences of SST-2's train.tsv (int8 calibrated on its first
texts, `d2lbert.run.calibration`), and with --classifier `d2lbert predict --data
dev.tsv` (872 sentences), int8 calibrated on dev's first sentences, then with
--calibration-samples K on each of K other samples (`predict --calibration FILE`: 128
training sentences from K places spread over train.tsv), to show how much the labels
depend on the sample. The calibrations are kept in a scratch D2LBERT_HOME, so each
run calibrates afresh. DNNL_MAX_CPU_ISA is passed on (AVX2: the target CPUs).
Accuracy only, not speed. Written to --out, whole or not at all.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as onp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import (check_results_file, fail, run_record, study_parser,  # noqa: E402
                    write_results)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, 'chapter_bert', 'results', 'int8-accuracy.json')


def d2lbert(args, threads, home):
    """Run `d2lbert ARGS`; its last stdout line (the summary line)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS='ignore',
               D2LBERT_HOME=home)
    done = subprocess.run([sys.executable, '-m', 'd2lbert', *args], env=env,
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        fail('int8_accuracy', (done.stderr.strip().splitlines() or ['failed'])[-1])
    return done.stdout.strip().splitlines()[-1]


def calibration_made(scratch, before):
    """{'pairs_bounded', 'layer_errors'} of the calibration a run kept in the scratch
    D2LBERT_HOME, the one file there not in `before` (a set of names)."""
    folder = os.path.join(scratch, 'int8')
    (name,) = set(os.listdir(folder)) - before
    with open(os.path.join(folder, name), encoding='utf-8') as f:
        kept = json.load(f)
    return {'pairs_bounded': kept['pairs_bounded'],
            'layer_errors': {layer: round(error, 4) for layer, error in kept['errors'].items()}}


def calibrations_in(scratch):
    """The names of the calibration files in the scratch D2LBERT_HOME."""
    folder = os.path.join(scratch, 'int8')
    return set(os.listdir(folder)) if os.path.isdir(folder) else set()


def vector_costs(args, scratch):
    """Cosines of int8's vectors to float32's over the first --texts sentences."""
    with open(os.path.join(args.sst2, 'train.tsv'), encoding='utf-8') as f:
        texts = [row.split('\t')[0].strip() for row in f.read().splitlines()[1:args.texts + 1]]
    data = os.path.join(scratch, 'texts.txt')
    with open(data, 'w', encoding='utf-8') as f:
        f.writelines(text + '\n' for text in texts)
    vectors, lines, before = {}, {}, calibrations_in(scratch)
    for precision in ('fp32', 'int8'):
        out = os.path.join(scratch, f'{precision}.npy')
        lines[precision] = d2lbert(['encode', '--model', args.model, '--data', data,
                                    '--out', out, '--pooling', 'mean', '--normalize',
                                    '--precision', precision], args.threads, scratch)
        vectors[precision] = onp.load(out)
    cosines = (vectors['fp32'] * vectors['int8']).sum(axis=1)
    print(lines['int8'], flush=True)
    return {'texts': len(texts), 'summary_line': lines['int8'],
            'mean_cosine': float(cosines.mean()),
            'percentile_1_cosine': float(onp.percentile(cosines, 1)),
            'least_cosine': float(cosines.min()), **calibration_made(scratch, before)}


def dev_labels(args, scratch, precision, extra=()):
    """(dev's predicted labels, the summary line) of `d2lbert predict` in precision."""
    out = os.path.join(scratch, f'{precision}.jsonl')
    line = d2lbert(['predict', '--model', args.classifier, '--data',
                    os.path.join(args.sst2, 'dev.tsv'), '--out', out, '--overwrite',
                    '--precision', precision, *extra], args.threads, scratch)
    with open(out, encoding='utf-8') as f:
        return [json.loads(row)['label'] for row in f], line


def share_equal(a, b):
    return float(onp.mean([x == y for x, y in zip(a, b)]))


def label_costs(args, scratch):
    """Dev accuracy in float32 and int8, the share of equal labels, and each of
    --calibration-samples' (`calibration_samples`)."""
    before = calibrations_in(scratch)
    (fp32, _), (int8, line) = (dev_labels(args, scratch, p) for p in ('fp32', 'int8'))
    with open(os.path.join(args.sst2, 'dev.tsv'), encoding='utf-8') as f:
        true = [row.split('\t')[1].strip() for row in f.read().splitlines()[1:]]
    print(line, flush=True)
    return {'sentences': len(true), 'accuracy_fp32': share_equal(fp32, true),
            'accuracy_int8': share_equal(int8, true), 'summary_line': line,
            'equal_labels': share_equal(fp32, int8), **calibration_made(scratch, before),
            'calibration_samples': calibration_samples(args, scratch, fp32, true)}


def calibration_samples(args, scratch, fp32, true, size=128):
    """int8's dev labels calibrated on each of --calibration-samples samples of `size`
    training sentences, from rows spread evenly over train.tsv: [{'train_rows_from',
    'equal_labels', 'labels_differing', 'accuracy_int8'}]."""
    with open(os.path.join(args.sst2, 'train.tsv'), encoding='utf-8') as f:
        header, *rows = f.read().splitlines()
    samples, stride = [], len(rows) // max(args.calibration_samples, 1)
    for first in range(0, stride * args.calibration_samples, stride):
        path = os.path.join(scratch, 'calibration.tsv')
        with open(path, 'w', encoding='utf-8') as f:
            f.writelines(row + '\n' for row in [header, *rows[first:first + size]])
        int8, _ = dev_labels(args, scratch, 'int8', ['--calibration', path])
        samples.append({'train_rows_from': first, 'equal_labels': share_equal(fp32, int8),
                        'labels_differing': sum(a != b for a, b in zip(fp32, int8)),
                        'accuracy_int8': share_equal(int8, true)})
        print(samples[-1], flush=True)
    return samples


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--model', required=True, help='a sentence-transformers MiniLM folder')
    parser.add_argument('--sst2', required=True, help="SST-2's folder (train.tsv, dev.tsv)")
    parser.add_argument('--texts', type=int, default=2000)
    parser.add_argument('--classifier', help='a MiniLM fine-tuned on SST-2 (finetune --out)')
    parser.add_argument('--calibration-samples', type=int, default=0,
                        help='with --classifier: int8 calibrated on this many samples of '
                             'training sentences too')
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--out', default=RESULTS)
    args = parser.parse_args(argv)
    for flag, path in (('--model', args.model), ('--sst2', args.sst2),
                       ('--classifier', args.classifier or args.model)):
        if not os.path.exists(path):
            fail('int8_accuracy', f'{flag} {path}: no such file or folder')
    check_results_file('int8_accuracy', args.out, {'--sst2': args.sst2})
    with tempfile.TemporaryDirectory() as scratch:
        results = {'vectors': vector_costs(args, scratch)}
        if args.classifier:
            results['classifier'] = label_costs(args, scratch)
    write_results('int8_accuracy', args.out, {
        'what': "int8 against float32: MiniLM's mean-pooled, normalized vectors of SST-2 "
                "training sentences (cosines), a fine-tuned MiniLM's SST-2 dev labels",
        **run_record('int8_accuracy', argv),
        'DNNL_MAX_CPU_ISA': os.environ.get('DNNL_MAX_CPU_ISA'),
        'threads': args.threads, **results})


if __name__ == '__main__':
    main()
