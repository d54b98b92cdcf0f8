"""A model folder's vocabulary on disk, whichever kind it is.

    vocab.json                           the book's word-level `Vocab` (d2lbert runs)
    vocab.txt [+ tokenizer_config.json]  a `WordPieceVocab` (Google / Hugging Face BERTs);
                                         tokenizer_config.json's do_lower_case (default
                                         true) says whether it lower-cases

`vocab_as_bytes` and `vocab_from_bytes` carry those files to another process (a worker of
a job on another machine) in one message.
"""
import json
import os
import tempfile

from .vocab import Vocab
from .wordpiece import WordPieceVocab, read_vocab_txt

VOCAB_JSON, VOCAB_TXT, TOKENIZER_CONFIG = 'vocab.json', 'vocab.txt', 'tokenizer_config.json'


def save_vocab(vocab, folder):
    """Write `vocab` (a `Vocab` or a `WordPieceVocab`) into `folder`; returns the file
    names written."""
    if isinstance(vocab, WordPieceVocab):
        vocab.save(os.path.join(folder, VOCAB_TXT))
        with open(os.path.join(folder, TOKENIZER_CONFIG), 'w', encoding='utf-8') as f:
            json.dump({'tokenizer_class': 'BertTokenizer',
                       'do_lower_case': vocab.lowercase}, f, indent=2)
        return [VOCAB_TXT, TOKENIZER_CONFIG]
    vocab.save(os.path.join(folder, VOCAB_JSON))
    return [VOCAB_JSON]


def read_wordpiece(folder):
    """The `WordPieceVocab` of folder/vocab.txt, lower-casing as tokenizer_config.json
    says."""
    vocab_file = os.path.join(folder, VOCAB_TXT)
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f'{vocab_file} does not exist')
    settings_file = os.path.join(folder, TOKENIZER_CONFIG)
    settings = {}
    if os.path.isfile(settings_file):
        with open(settings_file, encoding='utf-8') as f:
            try:
                settings = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(f'{settings_file} is not valid JSON: {error}') from None
    return WordPieceVocab(read_vocab_txt(vocab_file), settings.get('do_lower_case', True),
                          source=vocab_file)


def load_vocab(folder):
    """The vocabulary `save_vocab` wrote into `folder`: vocab.json, else vocab.txt."""
    if os.path.isfile(os.path.join(folder, VOCAB_JSON)):
        return Vocab.load(os.path.join(folder, VOCAB_JSON))
    if os.path.isfile(os.path.join(folder, VOCAB_TXT)):
        return read_wordpiece(folder)
    raise FileNotFoundError(f'{folder} holds no vocabulary ({VOCAB_JSON} or {VOCAB_TXT})')


def vocab_as_bytes(vocab):
    """The files `save_vocab` writes of `vocab`, as one JSON text in UTF-8 bytes."""
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for name in save_vocab(vocab, folder):
            with open(os.path.join(folder, name), encoding='utf-8') as f:
                files[name] = f.read()
    return json.dumps(files, ensure_ascii=False).encode('utf-8')


def vocab_from_bytes(data):
    """The vocabulary that `vocab_as_bytes` made `data` of."""
    with tempfile.TemporaryDirectory() as folder:
        for name, text in json.loads(data.decode('utf-8')).items():
            with open(os.path.join(folder, name), 'w', encoding='utf-8') as f:
                f.write(text)
        return load_vocab(folder)
