"""Which of a sentence encoder's matrix products can compute in bfloat16: seconds and
the least cosine to sentence-transformers' float32 vectors, per choice.

    python chapter_bert/studies/encode_precision.py --model MINILM_FOLDER \\
        --sst2 ../shared/data/sst-2/train.tsv --texts 20000

Each choice runs in a process of its own (OMP_NUM_THREADS=--threads): the model loaded
(untimed), then the texts' mean-pooled, normalized vectors
(`d2lbert.interop.sentence_vectors.vectors_in_chunks`, batches of 128) timed. The
choices: float32; every product in bfloat16; and bfloat16 with one kind of layer kept
float32 (`d2lbert.model.precision.keep_float32`): the feed-forward blocks' first
layers (what `d2lbert encode --precision bf16` runs), their second layers, the
attention blocks, or the last encoder block. sentence-transformers'
`encode(batch_size=64, normalize_embeddings=True)` gives the reference vectors and its
own seconds (`d2lbert.bench.inference.timed_peer`). Written to --out, whole or not at all.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as onp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import check_results_file, fail, run_record, study_parser, write_results  # noqa: E402
from d2lbert.bench.inference import timed_peer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, 'chapter_bert', 'results', 'encode-precision.json')
CHOICES = ('fp32', 'bf16', 'bf16, feed-forward first layers fp32',
           'bf16, feed-forward second layers fp32', 'bf16, attention fp32',
           'bf16, last block fp32')

# One choice's vectors, timed: argv = choice, model folder, texts file, output .npy
CHOICE = '''
import json, sys, time
import numpy
import d2lbert
from d2lbert import fast
from d2lbert.interop.sentence_vectors import vectors_in_chunks
from d2lbert.model import SentenceEncoder
from d2lbert.model.precision import keep_float32
from d2lbert.run.setup import prepare_model
choice, folder, texts_file, out = sys.argv[1:]
net, vocab = d2lbert.load_pretrained(folder)
model = prepare_model(SentenceEncoder(net.encoder, 'mean', True),
                      'fp32' if choice == 'fp32' else 'bf16', fast)
blocks = list(model.encoder.blocks)
kept = {'bf16, feed-forward first layers fp32': [b.ffn.dense1 for b in blocks],
        'bf16, feed-forward second layers fp32': [b.ffn.dense2 for b in blocks],
        'bf16, attention fp32': [b.attention for b in blocks],
        'bf16, last block fp32': blocks[-1:]}.get(choice, [])
model = keep_float32(model, kept)
model.hybridize(static_alloc=True)
with open(texts_file, encoding='utf-8') as f:
    texts = f.read().splitlines()
numpy.concatenate(list(vectors_in_chunks(model, vocab, texts[:256], 128)))
start = time.perf_counter()
vectors = numpy.concatenate(list(vectors_in_chunks(model, vocab, texts, 128)))
print(json.dumps({'seconds': time.perf_counter() - start}))
numpy.save(out, vectors)
'''


def run(code, args, threads):
    """Run `code` in a fresh process; its last stdout line, parsed."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS='ignore')
    done = subprocess.run([sys.executable, '-c', code, *args], env=env,
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        fail('encode_precision', (done.stderr.strip().splitlines() or ['failed'])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--model', required=True, help='a sentence-transformers MiniLM folder')
    parser.add_argument('--sst2', required=True, help="SST-2's train.tsv")
    parser.add_argument('--texts', type=int, default=20000)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--out', default=RESULTS)
    args = parser.parse_args(argv)
    for flag, path in (('--model', args.model), ('--sst2', args.sst2)):
        if not os.path.exists(path):
            fail('encode_precision', f'{flag} {path}: no such file or folder')
    check_results_file('encode_precision', args.out, {'--sst2': args.sst2})
    with open(args.sst2, encoding='utf-8') as f:
        texts = [row.split('\t')[0].strip() for row in f.read().splitlines()[1:args.texts + 1]]
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        texts_file = os.path.join(scratch, 'texts.txt')
        with open(texts_file, 'w', encoding='utf-8') as f:
            f.writelines(text + '\n' for text in texts)
        reference = os.path.join(scratch, 'reference.npy')
        peer = {'seconds': timed_peer('sentence-transformers', args.model, texts_file,
                                      reference, args.threads)}
        print(f"sentence-transformers: {peer['seconds']:.1f} s", flush=True)
        reference = onp.load(reference)
        for choice in CHOICES:
            vectors = os.path.join(scratch, 'vectors.npy')
            seconds = run(CHOICE, [choice, args.model, texts_file, vectors],
                          args.threads)['seconds']
            cosines = (onp.load(vectors) * reference).sum(axis=1)
            results[choice] = {'seconds': seconds, 'min_cosine': float(cosines.min()),
                               'below_0.9999': int((cosines < 0.9999).sum()),
                               'below_0.99995': int((cosines < 0.99995).sum())}
            print(f'{choice}: {seconds:.1f} s, least cosine {cosines.min():.6f}, '
                  f"{results[choice]['below_0.9999']} below 0.9999", flush=True)
    from d2lbert.bench.machine import describe_machine
    write_results('encode_precision', args.out, {
        'what': "MiniLM's mean-pooled, normalized vectors of SST-2 training sentences: "
                'seconds (model loading excluded) and cosine to sentence-transformers',
        **run_record('encode_precision', argv, describe_machine),
        'texts': len(texts), 'threads': args.threads,
        'sentence-transformers': peer, 'choices': results})


if __name__ == '__main__':
    main()
