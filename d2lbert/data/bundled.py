"""The small corpus that ships with d2lbert, for working offline.

``d2lbert/data/bundled/wiki.{train,valid,test}.tokens`` are in WikiText
format and were written by :mod:`.make_bundled_corpus`, a deterministic
generator of encyclopedia-like paragraphs (animals, cities, rivers, people,
...). They are small (under 1 MB) but have structure a small BERT can learn
in a minute: consecutive sentences follow a per-topic script, so a sentence
from another paragraph is recognizable (NSP), and words co-occur
predictably, so masked words can be guessed (MLM).

Regenerate them with ``python -m d2lbert.data.make_bundled_corpus``.
"""
import os


def bundled_corpus_directory():
    """Directory holding the bundled ``wiki.{train,valid,test}.tokens``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'bundled')
