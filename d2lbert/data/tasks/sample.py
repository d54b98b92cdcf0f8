"""A fixed random sample of a task file's rows: a small training set drawn the same
way each time (the transfer study's 1,000 SST-2 sentences, the NLI chapter's)."""
import numpy as onp


def write_sample(source, target, size, seed=0):
    """Write to `target` the header line of the file `source` (a task file with one
    header line, e.g. GLUE's TSV) and `size` of its other lines drawn at random with
    NumPy's generator seeded `seed`, in the file's order. Returns `target`; ValueError
    if `source` has fewer than `size` rows. `target` must be new: a file (or a link)
    already there, `source` itself included, raises FileExistsError untouched."""
    with open(source, encoding='utf-8') as f:
        header, *rows = f.readlines()
    if size > len(rows):
        raise ValueError(f'{source}: {len(rows)} rows, fewer than the {size} to draw')
    chosen = onp.sort(onp.random.default_rng(seed).choice(len(rows), size, replace=False))
    with open(target, 'x', encoding='utf-8') as f:
        f.writelines([header] + [rows[i] for i in chosen])
    return target
