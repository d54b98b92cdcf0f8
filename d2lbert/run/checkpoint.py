"""Checkpoints that can't be half-written: everything goes into a temporary folder,
a manifest with every file's size and SHA-1 is written last, and one atomic
`os.rename` makes the checkpoint visible.

Layout of a pretraining output folder::

    OUT/checkpoints/step-000200/  config.json vocab.json model.params
                                  trainer.states state.json manifest.json

(a WordPiece model has vocab.txt and tokenizer_config.json instead of vocab.json,
see `data.vocab_files`; a fine-tuning checkpoint also has task.json).
"""
import json
import os
import re
import shutil
import tempfile

from ..data.vocab_files import load_vocab, save_vocab
from ..model import BERTConfig
from ..util.hashing import sha1_of_file

CHECKPOINT_DIR = 'checkpoints'
_NAME = re.compile(r'^step-(\d{6,})$')


class CheckpointError(ValueError):
    """A checkpoint is missing, incomplete, corrupted or does not match the run."""


def write_model_files(folder, net, config, vocab, trainer=None, json_files=None):
    """Write a model into the (empty) folder: config.json, the vocabulary
    (`data.vocab_files`), model.params, trainer.states if a trainer is given, each
    {name: value} of json_files as a JSON file, and last manifest.json."""
    config.to_json_file(os.path.join(folder, 'config.json'))
    save_vocab(vocab, folder)
    net.save_parameters(os.path.join(folder, 'model.params'))
    if trainer is not None:
        trainer.save_states(os.path.join(folder, 'trainer.states'))
    for name, value in (json_files or {}).items():
        with open(os.path.join(folder, name), 'w', encoding='utf-8') as f:
            json.dump(value, f, indent=2)
    manifest = {name: {'bytes': os.path.getsize(os.path.join(folder, name)),
                       'sha1': sha1_of_file(os.path.join(folder, name))}
                for name in sorted(os.listdir(folder))}
    with open(os.path.join(folder, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=2)


def save_checkpoint(out_dir, step, net, trainer, config, vocab, state, keep=3,
                    json_files=None):
    """Write checkpoint `step` atomically and delete all but the newest `keep`.
    json_files: more {file name: value} to store as JSON (e.g. a task's task.json)."""
    root = os.path.join(out_dir, CHECKPOINT_DIR)
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f'.tmp-step-{step:06d}-', dir=root)
    try:
        write_model_files(tmp, net, config, vocab, trainer,
                          {**(json_files or {}), 'state.json': {**state, 'step': step}})
        final = os.path.join(root, f'step-{step:06d}')
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in list_checkpoints(out_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def save_model_folder(folder, net, config, vocab, json_files=None):
    """Write (or replace) the model folder `folder` so that at every moment it is either
    the complete old model or the complete new one (the old one is renamed aside, then
    deleted)."""
    parent = os.path.dirname(os.path.abspath(folder))
    tmp = tempfile.mkdtemp(prefix='.tmp-model-', dir=parent)
    try:
        write_model_files(tmp, net, config, vocab, json_files=json_files)
        old = None
        if os.path.exists(folder):
            old = tempfile.mkdtemp(prefix='.old-model-', dir=parent)
            os.rename(folder, os.path.join(old, 'model'))
        os.rename(tmp, folder)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def list_checkpoints(out_dir):
    """Complete checkpoint folders of a run, oldest first."""
    root = os.path.join(out_dir, CHECKPOINT_DIR)
    if not os.path.isdir(root):
        return []
    names = sorted(name for name in os.listdir(root) if _NAME.match(name))
    return [os.path.join(root, name) for name in names]


def find_checkpoint(path):
    """A checkpoint folder itself, or the newest one in a run's output folder."""
    if os.path.isfile(os.path.join(path, 'manifest.json')):
        return path
    checkpoints = list_checkpoints(path)
    if not checkpoints:
        raise CheckpointError(f'no complete checkpoint in {path} (expected '
                              f'{os.path.join(path, CHECKPOINT_DIR, "step-NNNNNN")})')
    return checkpoints[-1]


def verify_checkpoint(checkpoint):
    """Check every file against the manifest: a truncated or altered file is an error."""
    manifest_path = os.path.join(checkpoint, 'manifest.json')
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as error:
        raise CheckpointError(f'{checkpoint} is not a complete checkpoint: '
                              f'cannot read its manifest.json ({error})') from None
    for name, expected in manifest.items():
        path = os.path.join(checkpoint, name)
        if not os.path.isfile(path):
            raise CheckpointError(f'checkpoint {checkpoint} is missing {name}')
        if os.path.getsize(path) != expected['bytes'] or sha1_of_file(path) != expected['sha1']:
            raise CheckpointError(f'checkpoint file {path} is corrupted or truncated '
                                  '(size or SHA-1 differs from manifest.json)')


def read_config(folder):
    return BERTConfig.from_json_file(os.path.join(folder, 'config.json'))


def read_checkpoint_meta(checkpoint):
    """(config, vocab, state) of a verified checkpoint."""
    verify_checkpoint(checkpoint)
    config, vocab = read_config(checkpoint), load_vocab(checkpoint)
    with open(os.path.join(checkpoint, 'state.json')) as f:
        state = json.load(f)
    return config, vocab, state
