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
import math
import os
import re
import shutil
import struct
import tempfile

import mxnet as mx
import numpy as onp

from ..data.vocab_files import VOCAB_JSON, VOCAB_TXT, load_vocab, save_vocab
from ..model import BERTConfig
from ..util.hashing import sha1_of_file
from .files import disk_fault, make_readable, replace_folder, written_as_os_errors

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
    with written_as_os_errors(os.path.join(folder, 'model.params')):
        net.save_parameters(os.path.join(folder, 'model.params'))
    if trainer is not None:
        with written_as_os_errors(os.path.join(folder, 'trainer.states')):
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
    final = os.path.join(root, f'step-{step:06d}')
    try:
        write_model_files(tmp, net, config, vocab, trainer,
                          {**(json_files or {}), 'state.json': {**state, 'step': step}})
        make_readable(tmp)
        replace_folder(tmp, final)
    except OSError as error:
        raise disk_fault(final, error) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in list_checkpoints(out_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def save_model_folder(folder, net, config, vocab, json_files=None):
    """Write (or replace) the model folder `folder` so that at every moment, even after a
    kill, it is the complete old model or the complete new one (`files.replace_folder`)."""
    parent = os.path.dirname(os.path.abspath(folder))
    tmp = tempfile.mkdtemp(prefix='.tmp-model-', dir=parent)
    try:
        write_model_files(tmp, net, config, vocab, json_files=json_files)
        make_readable(tmp)
        replace_folder(tmp, folder)
    except OSError as error:
        raise disk_fault(folder, error) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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
    """The `BERTConfig` of a model folder; a CheckpointError naming config.json for one
    that is not a valid config or is beyond `model.config.MAX_SIZES` (a corrupt or
    mistyped file)."""
    path = os.path.join(folder, 'config.json')
    try:
        return BERTConfig.from_json_file(path)
    except ValueError as error:
        raise CheckpointError(str(error)) from None


def read_config_and_vocab(folder):
    """(config, vocab) of a model folder: `read_config`, and its vocabulary
    (`data.vocab_files.load_vocab`); a CheckpointError naming the vocabulary's file if it
    is not readable, or holds more tokens than the model has embeddings (config.json's
    vocab_size: an id past them would index no row)."""
    config = read_config(folder)
    name = VOCAB_JSON if os.path.isfile(os.path.join(folder, VOCAB_JSON)) else VOCAB_TXT
    path = os.path.join(folder, name)
    try:
        vocab = load_vocab(folder)
    except (KeyError, TypeError, ValueError) as error:  # not JSON, not a Vocab's fields
        raise CheckpointError(f'{path} is not a readable vocabulary ({type(error).__name__}: '
                              f'{error})') from None
    if len(vocab) > config.vocab_size:
        raise CheckpointError(f'{path} holds {len(vocab)} tokens, more than the '
                              f'{config.vocab_size} of {folder}/config.json (vocab_size)')
    return config, vocab


# MXNet's parameter file: a list header, then per array a header (magic, storage type,
# shape, device, dtype) and its data, then the names (src/ndarray/ndarray.cc, Save).
_LIST_MAGIC, _ARRAY_MAGICS, _DENSE = 0x112, (0xF993FAC9, 0xF993FACA), 0
_DTYPE_BYTES = {0: 4, 1: 8, 2: 2, 3: 1, 4: 4, 5: 1, 6: 8, 7: 1, 12: 2}


def check_array_sizes(path):
    """A CheckpointError if an array of the MXNet parameter file `path` claims a shape
    whose data the file cannot hold (a corrupt size field), read from the arrays'
    headers before MXNet allocates anything. A file of another layout is left to
    MXNet's loader."""
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        def read(fmt):
            raw = f.read(struct.calcsize(fmt))
            return struct.unpack(fmt, raw) if len(raw) == struct.calcsize(fmt) else None
        header = read('<QQQ')
        if header is None or header[0] != _LIST_MAGIC:
            return
        for index in range(header[2]):
            array = read('<Iii')
            if array is None or array[0] not in _ARRAY_MAGICS or array[1] != _DENSE:
                return
            shape = read(f'<{array[2]}q') if 0 <= array[2] <= 32 else None
            device_dtype = read('<iii')
            if shape is None or device_dtype is None or device_dtype[2] not in _DTYPE_BYTES:
                return
            claimed = math.prod(shape) * _DTYPE_BYTES[device_dtype[2]]
            if min(shape, default=0) < 0 or claimed > size - f.tell():
                raise CheckpointError(f'{path} is corrupt: its array {index} claims the '
                                      f'shape {shape}, more data than the file holds')
            f.seek(claimed, os.SEEK_CUR)


def load_parameters(net, folder, ctx=None):
    """net.load_parameters(folder/model.params), a CheckpointError naming the file if it
    is corrupt (checked before anything is allocated: `check_array_sizes`) or does not
    fit the config."""
    path = os.path.join(folder, 'model.params')
    check_array_sizes(path)
    try:
        net.load_parameters(path, ctx=ctx)
    except (mx.base.MXNetError, AssertionError, ValueError) as error:
        reason = str(error).strip().splitlines()
        reason = next((line for line in reversed(reason) if line.strip()), type(error).__name__)
        reason = reason.split(', which contains parameters')[0]  # not the list of them all
        raise CheckpointError(f'{path} is corrupt or does not fit {folder}/config.json '
                              f'({reason.strip()})') from None
    check_finite(net, path)
    return net


def check_finite(net, source):
    """A CheckpointError naming the first parameter of net that holds a NaN or an
    infinity: a bit flipped in a file without a manifest, or a run that diverged. (On
    the host, in NumPy: MXNet's `all` is a slow reduction, and each parameter's answer
    a wait; MiniLM's 22.7 million values took 0.12 s that way, 0.02 to 0.08 s this.)"""
    for name, param in net.collect_params().items():
        if not onp.isfinite(param.data().asnumpy()).all():
            raise CheckpointError(f'{source} is corrupt: parameter {name} holds NaN or '
                                  'infinite values')


def read_checkpoint_meta(checkpoint):
    """(config, vocab, state) of a verified checkpoint."""
    verify_checkpoint(checkpoint)
    config, vocab = read_config_and_vocab(checkpoint)
    with open(os.path.join(checkpoint, 'state.json')) as f:
        state = json.load(f)
    return config, vocab, state
