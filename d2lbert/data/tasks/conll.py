"""CoNLL-2003 named entity recognition: a tag for every word.

The files (``eng.train``, ``eng.testa``, ``eng.testb``, or copies named
``train.txt``, ``valid.txt``, ``test.txt``) have one word per line, in
columns separated by spaces or tabs::

    -DOCSTART- -X- -X- O        a document starts (no sentence)
                                a blank line ends a sentence
    EU NNP I-NP I-ORG           word, part of speech, syntactic chunk, entity
    rejects VBZ I-VP O

The entity tags are in the *last* column, in the IOB1 scheme in the
original files (see :mod:`.iob`). :func:`read_conll2003` converts them to
IOB2 unless asked not to; either way the chunks, and so the entity-level
scores, are the same.
"""
import re

from .examples import TaggedSentence, TaskData, check_label
from .iob import iob1_to_iob2
from .tables import line_error

CONLL2003_TAGS = ('O', 'B-PER', 'I-PER', 'B-ORG', 'I-ORG', 'B-LOC', 'I-LOC',
                  'B-MISC', 'I-MISC')  # Hugging Face's conll2003 order
CONLL2003_SPLITS = {'train': ('train.txt', 'eng.train'),
                    'dev': ('valid.txt', 'eng.testa'),
                    'test': ('test.txt', 'eng.testb')}
COLUMN_SEPARATOR = re.compile('[ \t]+')


def conll2003_file_names(split):
    """The names the file of ``split`` may have (see the module doc)."""
    if split not in CONLL2003_SPLITS:
        raise ValueError(f'CoNLL-2003 has the splits {tuple(CONLL2003_SPLITS)}, '
                         f'not {split!r}')
    return CONLL2003_SPLITS[split]


def read_conll2003(path, to_iob2=True):
    """Read a CoNLL-2003 file into a :class:`TaskData` of
    :class:`TaggedSentence` s; its labels are :data:`CONLL2003_TAGS`.

    A sentence cut short by the end of the file is kept.
    Args:
        to_iob2: convert the IOB1 tags to IOB2 (BIO); False keeps them.
    Raises:
        ValueError: naming the file and line of a line with fewer than two
            columns or a tag that is not a CoNLL-2003 entity tag.
    """
    sentences, words, tags = [], [], []
    with open(path, encoding='utf-8-sig') as f:
        for line_number, line in enumerate(f, start=1):
            columns = COLUMN_SEPARATOR.split(line.strip(' \t\r\n'))
            if columns[0] in ('', '-DOCSTART-'):
                if words:
                    sentences.append(tagged_sentence(words, tags, to_iob2))
                words, tags = [], []
                continue
            if len(columns) < 2:
                raise line_error(path, line_number,
                                 f'expected "word ... tag" columns, got '
                                 f'{line.strip()!r}')
            check_label(columns[-1], CONLL2003_TAGS, path, line_number)
            words.append(columns[0])
            tags.append(columns[-1])
    if words:
        sentences.append(tagged_sentence(words, tags, to_iob2))
    return TaskData(sentences, CONLL2003_TAGS)


def tagged_sentence(words, tags, to_iob2):
    return TaggedSentence(words, iob1_to_iob2(tags) if to_iob2 else tags)
