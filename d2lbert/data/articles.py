"""Holding out whole articles of a WikiText file.

A model evaluated on sentences of the articles it trained on is scored on names and
topics it has seen: held-out text must be other articles. WikiText starts each
article with a title line `` = Title = `` (its sections are `` = = Section = = ``).
"""
import os
import re

ARTICLE_TITLE = re.compile(r'^ = [^=].* = $')


def split_articles(path, folder, train_articles):
    """Write the WikiText file `path` into `folder` (made if need be) as
    wiki.train.tokens, its first `train_articles` articles, and wiki.valid.tokens, the
    rest: the layout that `d2lbert pretrain --data FOLDER` reads. Returns `folder`;
    ValueError if the file does not have more than `train_articles` articles."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    starts = [i for i, line in enumerate(lines) if ARTICLE_TITLE.match(line)]
    if len(starts) <= train_articles:
        raise ValueError(f'{path}: {len(starts)} articles, need more than {train_articles}')
    cut = starts[train_articles]
    os.makedirs(folder, exist_ok=True)
    for name, part in (('wiki.train.tokens', lines[:cut]), ('wiki.valid.tokens', lines[cut:])):
        with open(os.path.join(folder, name), 'w', encoding='utf-8') as f:
            f.write('\n'.join(part) + '\n')
    return folder
