"""The small corpus that comes with d2lbert, for working offline.

It is not stored in the repository: :mod:`.make_bundled_corpus`, a
deterministic generator of encyclopedia-like paragraphs (animals, cities,
rivers, people, ...), writes it in WikiText format on first use into the
cache, and later runs reuse it. It is small (under 1 MB) but has structure a
small BERT learns in a few hundred steps: consecutive sentences follow a per-topic
script, so a sentence from another paragraph is recognizable (NSP),
and words co-occur predictably, so masked words can be guessed (MLM).
"""
import os

from . import make_bundled_corpus
from ..util.files import atomic_directory
from ..util.hashing import sha1_of_file
from .cache import data_home


def bundled_corpus_directory():
    """Directory holding the bundled ``wiki.{train,valid,test}.tokens``.

    Generated once per version of the generator: the directory name carries
    the SHA-1 of its source, so an edited generator never reuses a stale corpus.
    """
    generator_key = sha1_of_file(make_bundled_corpus.__file__)[:12]
    directory = os.path.join(data_home(), f'bundled-{generator_key}')
    if not os.path.isdir(directory):
        with atomic_directory(directory) as partial:
            make_bundled_corpus.main(partial)
    return directory
