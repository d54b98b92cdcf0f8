"""What identifies the text a pretraining run reads, so that `--resume` continues a run
on the text it began with.

A run records in run.json, for `--data` and for `--valid`, every file it reads (a
`--data` or `--valid` file, or the wiki.{train,valid}.tokens files of a folder or a
named corpus): its path, size in bytes, modification time and SHA-1::

    "text_files": {"--data": [{"path": "/home/me/lines.txt", "bytes": 123456,
                               "mtime": 1718000000.5, "sha1": "3f2a..."}],
                   "--valid": [...]}

`check_same_text` compares them on `--resume`: a file whose size or content changed
(lines appended, an edit) is refused in one line naming its flag, before anything of
the run is touched. The content decides: a file only touched (a new modification time,
the same bytes) is the same text.

A run of a word vocabulary also records the version of the word tokenization it read
its text with (`"word_tokenizer": 2`, `data.words.WORD_TOKENIZER_VERSION`):
`check_same_tokenizer` refuses a `--resume` that would cut the text into other words.
"""
import datetime
import json
import os

from ..data.loader import corpus_file
from ..data.text_sources import TextSource
from ..data.vocab import Vocab
from ..data.words import WORD_TOKENIZER_VERSION
from ..run.errors import RunError
from ..run.folder import RUN_FILE
from ..util.hashing import remembered_sha1_of_file

RECORD_KEY = 'text_files'
TOKENIZER_KEY = 'word_tokenizer'
WORD_TOKENIZERS = {1: 'words split at spaces alone',
                   2: 'lower-cased words, punctuation marks split off'}


def file_identity(path):
    """{'path', 'bytes', 'mtime', 'sha1'} of a file (its absolute path)."""
    stat = os.stat(path)
    return {'path': os.path.abspath(path), 'bytes': stat.st_size, 'mtime': stat.st_mtime,
            'sha1': remembered_sha1_of_file(path)}


def files_read(part, split):
    """The files a part of a `text_data.RunText` reads: a `TextSource`'s file, or the
    `split` file of a corpus name or folder."""
    if isinstance(part, TextSource):
        return [part.path]
    return [corpus_file(part, split)]


def text_files(text, valid_given):
    """{flag: [file identity, ...]} of the `RunText` `text`: '--data' the files of its
    training text (and of its held-out text when --valid is not given: a part of the
    --data file, or the valid split of the corpus --data names), '--valid' those of
    --valid (valid_given: whether it was given)."""
    data = files_read(text.train, 'train')
    valid = files_read(text.valid, 'valid')
    if not valid_given:
        return {'--data': [file_identity(path) for path in dict.fromkeys(data + valid)]}
    return {'--data': [file_identity(path) for path in data],
            '--valid': [file_identity(path) for path in valid]}


def recorded_run(out):
    """The dict run.json holds ({} if unreadable)."""
    try:
        with open(os.path.join(out, RUN_FILE), encoding='utf-8') as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def recorded_text_files(out):
    """The text_files run.json recorded ({} for a run older than the record)."""
    return recorded_run(out).get(RECORD_KEY) or {}


def tokenizer_record(vocab):
    """What run.json records of how a run with `vocab` tokenizes its text: the version
    of the word tokenization for the book's word `Vocab`; nothing for WordPiece."""
    return {TOKENIZER_KEY: WORD_TOKENIZER_VERSION} if isinstance(vocab, Vocab) else {}


def recorded_word_tokenizer(saved):
    """The word tokenization version of a run's run.json (`saved`, a dict). A run older
    than the record: 2 if its options include --layout (d2lbert 0.2.0, which already
    tokenized as version 2), else 1."""
    if TOKENIZER_KEY in saved:
        return saved[TOKENIZER_KEY]
    return 2 if 'layout' in (saved.get('options') or {}) else 1


def check_same_tokenizer(out, vocab):
    """Refuse (RunError) a --resume of a word-vocabulary run (`vocab`, its own) that
    read its text with another word tokenization than this version's: its text would
    become other tokens than it trained on."""
    if not isinstance(vocab, Vocab):
        return
    version = recorded_word_tokenizer(recorded_run(out))
    if version != WORD_TOKENIZER_VERSION:
        raise RunError(f'--resume: {out} read its text as word tokenization version '
                       f'{version} ({WORD_TOKENIZERS.get(version, "unknown")}), this d2lbert '
                       f'reads it as version {WORD_TOKENIZER_VERSION} '
                       f'({WORD_TOKENIZERS[WORD_TOKENIZER_VERSION]}): the run would continue '
                       'on other tokens; resume with the d2lbert that began it, or start a '
                       'new --out (nothing was touched)')


def check_same_text(out, now):
    """Refuse (RunError naming the flag) a --resume whose text differs from the one the
    run in `out` recorded; now: `text_files` of the text given."""
    for flag, files in recorded_text_files(out).items():
        current = now.get(flag, [])
        if [f['path'] for f in files] != [f['path'] for f in current]:
            raise RunError(f'--resume: {flag} reads other files than the run began with '
                           f'({", ".join(f["path"] for f in files)}): resume on its own '
                           'text, or start a new --out (nothing was touched)')
        for recorded, found in zip(files, current):
            if (recorded['bytes'], recorded['sha1']) != (found['bytes'], found['sha1']):
                raise RunError(f'--resume: {flag} {found["path"]} changed since the run '
                               f'began ({described(recorded)}; now {described(found)}): '
                               'resume on the text it trained on, or start a new --out '
                               '(nothing was touched)')

def described(identity):
    """'123,456 bytes, SHA-1 3f2a1b2c, modified 2024-06-10 08:13:20' of a file identity."""
    modified = datetime.datetime.fromtimestamp(identity['mtime']).strftime(
        '%Y-%m-%d %H:%M:%S')
    return f'{identity["bytes"]:,} bytes, SHA-1 {identity["sha1"][:8]}, modified {modified}'
