"""The transfer study's pretraining part: held-out MLM accuracy against minutes on the
same real text, for d2lbert's recipe (`d2lbert pretrain`) and for the d2l book's own code
and recipe (`book_training`, run in a process of its own:

    python chapter_bert/studies/transfer_pretraining.py FOLDER OUT SECONDS BATCH EVALUATIONS

which `pretrain_book` starts); see transfer_study.py.
"""
import contextlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import fail, log, read_records, run_logged  # noqa: E402
from transfer_settings import QUICK  # noqa: E402

BOOK = {'batch_size': 512, 'max_len': 64, 'lr': 0.01, 'num_hiddens': 128,
        'ffn_num_hiddens': 256, 'num_heads': 2, 'num_layers': 2, 'dropout': 0.2}
EVALUATIONS = 6  # evaluation points of each pretraining curve
RECIPE = []  # d2lbert's flags beyond --data: its defaults for real text
EVAL_LINE = re.compile(r'^step (\d+): held-out MLM accuracy')


def whole_word_accuracy(record):
    """The accuracy comparable across vocabularies (see the module doc)."""
    return record.get('word_mlm_accuracy', record['mlm_accuracy'])


@contextlib.contextmanager
def model_folder(keep_model, scratch, inputs):
    """The folder d2lbert's pretraining writes its model into: one in `scratch`, or with
    --keep-model a temporary folder beside it that becomes it when the run has ended
    (`d2lbert.run.folder.folder_written_whole`: a kill leaves nothing in the way of the
    rerun, and a folder of the user's holding files is refused)."""
    if keep_model is None:
        yield os.path.join(scratch, 'd2lbert')
        return
    from d2lbert.run.errors import RunError
    from d2lbert.run.folder import folder_written_whole
    try:
        with folder_written_whole('--keep-model', keep_model, False, inputs) as written:
            yield written
    except RunError as err:
        fail('transfer_study', str(err))


def run_stamped(command):
    """Run a `d2lbert pretrain` command, logging its held-out evaluations as they are
    printed; {step: seconds since the start} of each."""
    stamps = {}

    def stamp(seconds, line):
        match = EVAL_LINE.match(line)
        if match:
            stamps[int(match.group(1))] = seconds
            log(f'  {line[:80]} ({seconds / 60:.1f} min)')
    run_logged(command, stamp)
    return stamps


def pretrain_d2lbert(folder, out, minutes, quick):
    """`d2lbert pretrain` on the training articles; its held-out curve."""
    from d2lbert.pretraining import PretrainOptions
    if quick:
        budget = ['--steps', str(QUICK['steps']),
                  '--eval-every', str(QUICK['steps'] // QUICK['evaluations'])]
    elif 'minutes' in PretrainOptions.__dataclass_fields__:
        budget = ['--minutes', str(minutes)]
    else:
        raise SystemExit('this d2lbert has no pretrain --minutes: use --quick')
    flags = [*RECIPE, *budget]
    command = [sys.executable, '-m', 'd2lbert', 'pretrain', '--data', folder, '--out', out,
               '--no-progress', *flags]
    log('d2lbert pretrain ' + ' '.join(flags))
    stamps = run_stamped(command)
    records = read_records(out, 'valid')
    unstamped = [r['step'] for r in records if r['step'] not in stamps]
    if unstamped:
        raise SystemExit(f'no printed evaluation of steps {unstamped} matched {EVAL_LINE.pattern}'
                         ' (has `d2lbert pretrain` changed how it prints them?)')
    curve = [{'step': r['step'], 'minutes': stamps[r['step']] / 60,
              'accuracy': whole_word_accuracy(r), **r} for r in records]
    return {'flags': ' '.join(flags), 'curve': curve}


def book_training(folder, out, seconds, batch_size, evaluations, seed=0):
    """The book's code and recipe for `seconds` of its training loop, its parameters and
    vocabulary saved (the book's format: pretrained.params, vocab.json) at `evaluations`
    evenly spread times into out/eval-K/; writes out/book.json with the times."""
    import random
    import mxnet as mx
    from d2l import mxnet as d2l
    from mxnet import autograd, gluon, init, npx
    npx.set_np()
    random.seed(seed)
    mx.random.seed(seed)
    tic = time.time()
    paragraphs = d2l._read_wiki(folder)
    train_set = d2l._WikiTextDataset(paragraphs, BOOK['max_len'])
    train_iter = gluon.data.DataLoader(train_set, batch_size, shuffle=True)
    vocab = train_set.vocab
    data_seconds = time.time() - tic
    net = d2l.BERTModel(len(vocab), num_hiddens=BOOK['num_hiddens'],
                        ffn_num_hiddens=BOOK['ffn_num_hiddens'], num_heads=BOOK['num_heads'],
                        num_blks=BOOK['num_layers'], dropout=BOOK['dropout'])
    devices = [mx.cpu()]
    net.initialize(init.Xavier(), ctx=devices)
    loss = gluon.loss.SoftmaxCELoss()
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': BOOK['lr']})
    points, step, trained = [], 0, 0.0
    while len(points) < evaluations:
        tic = time.time()
        for batch in train_iter:  # the loop's time counts its data loading, not saving
            shards = [gluon.utils.split_and_load(elem, devices, even_split=False)
                      for elem in batch]
            with autograd.record():
                _, _, losses = d2l._get_batch_loss_bert(net, loss, len(vocab), *shards)
            for value in losses:
                value.backward()
            trainer.step(1)
            npx.waitall()
            trained += time.time() - tic
            step += 1
            if trained >= seconds * (len(points) + 1) / evaluations:
                saved = os.path.join(out, f'eval-{len(points)}')
                os.makedirs(saved)
                net.save_parameters(os.path.join(saved, 'pretrained.params'))
                with open(os.path.join(saved, 'vocab.json'), 'w', encoding='utf-8') as f:
                    json.dump(vocab.idx_to_token, f)
                points.append({'step': step, 'minutes': trained / 60, 'folder': saved})
                log(f'  book: step {step}, {trained / 60:.2f} min of training')
                if len(points) == evaluations:
                    break
            tic = time.time()
    with open(os.path.join(out, 'book.json'), 'w', encoding='utf-8') as f:
        json.dump({'data_seconds': data_seconds, 'examples': len(train_set),
                   'vocab_size': len(vocab), 'points': points}, f)


def evaluate_book(folder, points):
    """Each saved book model, loaded into d2lbert, on the held-out articles."""
    import mxnet as mx
    import d2lbert
    from d2lbert.interop.book import load_book_model
    from d2lbert.pretraining.evaluate import evaluate
    curve = []
    for point in points:
        net, vocab, _ = load_book_model(point['folder'], dropout=BOOK['dropout'])
        valid_iter, _ = d2lbert.load_data_wiki(64, BOOK['max_len'], folder, 'valid',
                                               vocab=vocab, shuffle=False)
        record = evaluate(net, valid_iter, mx.cpu())
        curve.append({'step': point['step'], 'minutes': point['minutes'],
                      'accuracy': whole_word_accuracy(record), **record})
        log(f'  book: step {point["step"]}: held-out MLM accuracy '
            f'{record["mlm_accuracy"]:.3f}')
    return curve


def pretrain_book(folder, scratch, minutes, quick):
    out = os.path.join(scratch, 'book')
    os.makedirs(out)
    seconds = QUICK['book_seconds'] if quick else minutes * 60
    batch_size = QUICK['book_batch_size'] if quick else BOOK['batch_size']
    evaluations = QUICK['evaluations'] if quick else EVALUATIONS
    log(f"the book's code: {seconds / 60:g} minutes of its loop, batch {batch_size}")
    run_logged([sys.executable, __file__, folder, out, str(seconds),
                str(batch_size), str(evaluations)], lambda _, line: print(line, flush=True))
    with open(os.path.join(out, 'book.json'), encoding='utf-8') as f:
        book = json.load(f)
    curve = evaluate_book(folder, book.pop('points'))
    return {**book, 'batch_size': batch_size, 'recipe': BOOK, 'curve': curve}


def minutes_to_reach(curve, accuracy):
    """The minutes of the first evaluation at or above accuracy (None: never)."""
    return next((point['minutes'] for point in curve if point['accuracy'] >= accuracy), None)


if __name__ == '__main__':
    from d2lbert.util.process import configure_cpu
    configure_cpu()  # threads and OpenBLAS's core as the commands run, before MXNet loads
    from mxnet import npx
    npx.set_np()  # the package's code and the book's use MXNet's NumPy interface
    folder, out, seconds, batch_size, evaluations = sys.argv[1:]
    book_training(folder, out, float(seconds), int(batch_size), int(evaluations))
