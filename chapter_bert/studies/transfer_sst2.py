"""The transfer study's sst2 part: GLUE SST-2 dev accuracy of `d2lbert finetune` from the
pretrained model and from random parameters (`--from-scratch`), on the full training set
and on a fixed subset, for each seed; see transfer_study.py."""
import concurrent.futures
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import log, read_records, run_logged  # noqa: E402
from transfer_settings import QUICK, SEEDS, SUBSET, SUBSET_SEED  # noqa: E402

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
