"""The first steps of `d2lbert pretrain --objective mlm` from random weights on text as
users have it: held-out MLM accuracy against the most-frequent-token baseline.

    python chapter_bert/studies/first_steps_study.py [--recipe NAME=FLAGS ...]
        [--texts sst2,wikitext-lines] [--seeds 0,1] [--steps 300] [--jobs 2] [--out FILE]
    python chapter_bert/studies/first_steps_study.py --readme [--out FILE]

Each recipe (NAME=FLAGS, the flags added to the command; `defaults=` for none) runs on
each text and seed, `--jobs` runs at a time with one thread each (held-out accuracy after
a number of steps does not depend on the speed):

* sst2: GLUE SST-2's training sentences (`train.tsv --text-column sentence`, labels
  unused), held out on its dev sentences (`--valid dev.tsv`): a TSV column of short texts.
* wikitext-lines: the non-heading lines of WikiText-2's validation file, one text per
  line (`--line-by-line`), the first 80% for training and the rest held out as JSON lines
  (`--valid held-out.jsonl`): long texts, two formats.

`d2lbert pretrain ... --objective mlm --steps S --seed K`; the curve of held-out
evaluations (every 100 steps) from the run's metrics.jsonl. The results file records the
command, the CPU and the date; `--readme` prints the table of docs/pretraining.md, each
number tied to the file (tests/test_quoted_numbers.py).
"""
import concurrent.futures
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(HERE), 'results', 'first-steps-study.json')
TEXTS = ('sst2', 'wikitext-lines')
HELD_OUT_SHARE = 0.2  # of wikitext-lines
RECIPE_OPTIONS = ('preset', 'optimizer', 'lr', 'batch_size', 'max_len', 'warmup', 'dropout',
                  'weight_decay', 'seed')

sys.path.insert(0, HERE)
from runner import (DATA, check_results_file, fail, read_records, run_logged,  # noqa: E402
                    run_record, study_parser, write_results)


def wikitext_lines(wikitext, folder):
    """(train, valid): WikiText-2's non-heading lines, the first 80% one per line in
    folder/train.txt, the rest as JSON lines ({"text": ...}) in folder/held-out.jsonl."""
    with open(wikitext, encoding='utf-8') as f:
        lines = [line.strip() for line in f]
    texts = [line for line in lines if line and not line.startswith('=')]
    cut = round((1 - HELD_OUT_SHARE) * len(texts))
    train, valid = os.path.join(folder, 'train.txt'), os.path.join(folder, 'held-out.jsonl')
    with open(train, 'w', encoding='utf-8') as f:
        f.writelines(text + '\n' for text in texts[:cut])
    with open(valid, 'w', encoding='utf-8') as f:
        f.writelines(json.dumps({'text': text}) + '\n' for text in texts[cut:])
    return train, valid


def text_flags(text, sst2, wikitext, scratch):
    """The --data/--valid flags of `text` (see the module doc)."""
    if text == 'sst2':
        return ['--data', os.path.join(sst2, 'train.tsv'), '--text-column', 'sentence',
                '--valid', os.path.join(sst2, 'dev.tsv')]
    train, valid = wikitext_lines(wikitext, scratch)
    return ['--data', train, '--line-by-line', '--valid', valid]


def first_steps(flags, steps, seed, out, name):
    """One run: {'options': what its run.json says it trained with (the recipe, the
    defaults filled in), 'curve': [{step, accuracy, baseline, perplexity}]}; its
    held-out evaluations are printed as they come, after its name."""
    command = [sys.executable, '-m', 'd2lbert', 'pretrain', *flags, '--objective', 'mlm',
               '--steps', str(steps), '--seed', str(seed), '--out', out, '--no-progress']
    print(f'{name}: started', flush=True)
    run_logged(command, lambda _, line: print(f'{name}: {line}', flush=True)
               if line.startswith('step ') and 'held-out' in line else None, threads=1)
    with open(os.path.join(out, 'run.json'), encoding='utf-8') as f:
        options = json.load(f)['options']
    return {'options': {name: options[name] for name in RECIPE_OPTIONS},
            'curve': [{'step': r['step'], 'accuracy': r['mlm_accuracy'],
                       'baseline': r['mlm_baseline_accuracy'],
                       'perplexity': r['mlm_perplexity']} for r in read_records(out, 'valid')]}


def run_study(recipes, texts, seeds, steps, jobs, sst2, wikitext, scratch):
    """{recipe: {'flags': ..., 'texts': {text: {seed: run (`first_steps`)}}}} (seeds as
    strings, as JSON keys are)."""
    flags_of_text = {text: text_flags(text, sst2, wikitext, scratch) for text in texts}
    runs = [(recipe, text, seed) for recipe in recipes for text in texts for seed in seeds]

    def run(job):
        recipe, text, seed = job
        out = os.path.join(scratch, f'{recipe}-{text}-{seed}')
        return job, first_steps(flags_of_text[text] + recipes[recipe].split(), steps, seed,
                                out, f'{recipe}, {text}, seed {seed}')
    results = {recipe: {'flags': flags, 'texts': {}} for recipe, flags in recipes.items()}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for (recipe, text, seed), record in pool.map(run, runs):
            results[recipe]['texts'].setdefault(text, {})[str(seed)] = record
    return results


def marked(value, key):
    return f'{value:.3f}<!-- result first-steps-study.json {key} -->'


def readme_table(results):
    """docs/pretraining.md's table: per recipe, text and seed, the last held-out accuracy,
    its baseline and the margin, every number tied to the results file."""
    lines = ['| recipe (flags added) | text | seed | held-out MLM at the last step | '
             'most-frequent-token baseline | margin |', '|---|---|---|---|---|---|']
    for recipe, record in results['recipes'].items():
        for text, seeds in record['texts'].items():
            for seed, run in seeds.items():
                key = f"recipes.{recipe}.texts.{text}.{seed}.curve.{len(run['curve']) - 1}"
                last = run['curve'][-1]
                lines.append(f"| {recipe} (`{record['flags'] or 'none'}`) | {text} | {seed} | "
                             f"{marked(last['accuracy'], key + '.accuracy')} | "
                             f"{marked(last['baseline'], key + '.baseline')} | "
                             f"{last['accuracy'] - last['baseline']:+.3f} |")
    return '\n'.join(lines)


def parse_recipes(values):
    recipes = {}
    for value in values or ['defaults=']:
        name, sep, flags = value.partition('=')
        if not sep or not name:
            fail('first_steps_study', f'--recipe {value!r} must be NAME=FLAGS')
        recipes[name] = flags.strip()
    return recipes


def checked_inputs(args):
    """(texts, seeds, recipes) of the flags, or one line naming the flag that is wrong."""
    texts = args.texts.split(',')
    unknown = sorted(set(texts) - set(TEXTS))
    if unknown:
        fail('first_steps_study', f'--texts {",".join(unknown)}: not one of {", ".join(TEXTS)}')
    if 'sst2' in texts and not os.path.isfile(os.path.join(args.sst2, 'train.tsv')):
        fail('first_steps_study', f'--sst2 {args.sst2}: no train.tsv in it')
    if 'wikitext-lines' in texts and not os.path.isfile(args.wikitext):
        fail('first_steps_study', f'--wikitext {args.wikitext}: no such file')
    if not all(seed.isdigit() for seed in args.seeds.split(',')):
        fail('first_steps_study', f'--seeds {args.seeds} must be numbers separated by commas')
    if args.steps < 1 or args.jobs < 1:
        fail('first_steps_study', '--steps and --jobs must be at least 1')
    return texts, [int(seed) for seed in args.seeds.split(',')], parse_recipes(args.recipe)


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument('--recipe', action='append', metavar='NAME=FLAGS')
    parser.add_argument('--texts', default=','.join(TEXTS))
    parser.add_argument('--seeds', default='0,1')
    parser.add_argument('--steps', type=int, default=300)
    parser.add_argument('--jobs', type=int, default=2)
    parser.add_argument('--sst2', default=os.path.join(DATA, 'sst-2'))
    parser.add_argument('--wikitext', default=os.path.join(DATA, 'wikitext-2',
                                                           'wiki.valid.tokens'))
    parser.add_argument('--out', default=RESULTS)
    parser.add_argument('--readme', action='store_true',
                        help="only print the docs' table of the results file --out")
    args = parser.parse_args(argv)
    if args.readme:
        with open(args.out, encoding='utf-8') as f:
            print(readme_table(json.load(f)))
        return
    texts, seeds, recipes = checked_inputs(args)
    check_results_file('first_steps_study', args.out,
                       {'--sst2': args.sst2, '--wikitext': args.wikitext})
    results = {**run_record('first_steps_study', argv), 'steps': args.steps, 'threads_per_run': 1}
    scratch = tempfile.mkdtemp(prefix='first-steps-study-')
    try:
        results['recipes'] = run_study(recipes, texts, seeds, args.steps, args.jobs,
                                       args.sst2, args.wikitext, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write_results('first_steps_study', args.out, results)
    print(readme_table(results))


if __name__ == '__main__':
    main()
