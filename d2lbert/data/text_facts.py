"""What reading a text file found (how its blank lines break it, how many documents,
texts and words it holds), remembered on disk by the file's content, so that a warm
start reads a `--data` file only to hash it.

A start reads what it needs to know of a file before it trains: the blank lines that
decide its layout, the counts it prints and checks, the counts of its held-out part.
Each is a pass over the file (a second for every 100 MB or so); the answers are kept in
``$D2LBERT_HOME/cache/text-facts/<SHA-1 of the file>.json``, one entry per question::

    {"document breaks v1": [400, 1],
     "counts ('paragraphs', None, (380, 400)) v1": {"documents": 20, ...}}

The SHA-1 (`util.hashing.remembered_sha1_of_file`, one read per process) is the
file's identity: a changed file is another entry, asked again. A fact file that can't
be read is asked again and rewritten; it is written whole to a temporary name first
(two processes asking at once may each write it: the last one's stays, and any
question it lacks is asked again).
"""
import json
import os

from ..util.files import sweep_temporaries, temporary_prefix
from ..util.hashing import remembered_sha1_of_file
from .cache import data_home

FORMAT_VERSION = 1  # of the answers: a change in how they are found asks them again


def facts_file(path):
    """The file holding what is remembered of the text file ``path``."""
    return os.path.join(data_home(), 'cache', 'text-facts',
                        f'{remembered_sha1_of_file(path)}.json')


def remembered(path, question, answer):
    """``answer(path)`` (a JSON value: lists come back for tuples), remembered for the
    content of ``path`` under ``question`` (a string): asked once per file content."""
    where = facts_file(path)
    facts = read_facts(where)
    key = f'{question} v{FORMAT_VERSION}'
    if key not in facts:
        facts[key] = answer(path)
        write_facts(where, facts)
    return facts[key]


def read_facts(where):
    """The facts kept in ``where`` ({} if there are none, or they can't be read)."""
    try:
        with open(where, encoding='utf-8') as f:
            facts = json.load(f)
        return facts if isinstance(facts, dict) else {}
    except (OSError, ValueError):
        return {}


def write_facts(where, facts):
    """Write ``facts`` to ``where`` whole (a temporary file, named for this machine and
    process, renamed into place; what a killed process left is swept first)."""
    folder = os.path.dirname(where)
    os.makedirs(folder, exist_ok=True)
    sweep_temporaries(folder)
    temporary = os.path.join(folder, temporary_prefix() + os.path.basename(where))
    with open(temporary, 'w', encoding='utf-8') as f:
        json.dump(facts, f)
    os.replace(temporary, where)
