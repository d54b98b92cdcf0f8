"""What every task reader returns: examples, the task's labels, a drop count.

Two kinds of examples:

* :class:`TaskExample` for classifying or scoring one text or a pair of
  texts (SNLI, the GLUE tasks, your own CSV): ``label`` is a class name
  (a str, one of the task's labels), a float score (regression, STS-B) or
  None (a test set without labels).
* :class:`TaggedSentence` for tagging every word (CoNLL-2003 NER): one tag
  per word.
"""
import dataclasses
import math
from typing import List, NamedTuple, Optional, Sequence, Union


@dataclasses.dataclass(frozen=True)
class TaskExample:
    """One text, or a pair of texts, and its label (see the module doc)."""
    text: str
    text_pair: Optional[str] = None
    label: Union[str, float, None] = None


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """A sentence split into words, and one tag per word (e.g. 'B-PER')."""
    words: List[str]
    tags: List[str]


class TaskData(NamedTuple):
    """A task file read into memory.

    examples: list of :class:`TaskExample` or :class:`TaggedSentence`.
    labels: tuple of the task's class names (or tags) in id order, so that
        ``labels[i]`` is class ``i``; None for a regression task.
    num_dropped: examples the reader left out (SNLI pairs whose annotators
        did not agree, gold label '-').
    """
    examples: list
    labels: Optional[Sequence[str]]
    num_dropped: int = 0


def check_label(label, labels, path, line_number):
    """Raise a ValueError naming the file and line unless ``label`` is one of
    ``labels``."""
    if label not in labels:
        raise ValueError(f'{path}, line {line_number}: label {label!r} is not '
                         f'one of the task\'s labels {tuple(labels)}')


def parse_score(value, path, line_number):
    """A regression target: ``float(value)``, or a ValueError naming the file
    and line if ``value`` is not a finite number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f'{path}, line {line_number}: the score {value!r} is '
                         f'not a finite number')
    return number
