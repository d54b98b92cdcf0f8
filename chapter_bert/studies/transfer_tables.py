"""The transfer study's tables, as docs/pretraining.md shows them, each number with the
marker that ties it to the results file."""


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
            summary = results['sst2']['summary'][train]
            lines.append(f"| {train} | {marked(summary['pretrained'], key + '.pretrained')} | "
                         f"{marked(summary['scratch'], key + '.scratch')} | "
                         f"{marked(summary['gain_points'], key + '.gain_points', 1)} |")
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
            accuracy = marked(results['probe']['accuracy'][name], 'probe.accuracy.' + name)
            lines.append(f'| {label} | {accuracy} |')
    return '\n'.join(lines)
