"""Reuse a pretrained BERT: save it, load it from wherever it comes from, encode text.

`save_pretrained(net, vocab, folder)` writes a model folder (config.json, vocab,
model.params, manifest.json; task.json for a task model) that `load_pretrained` reads
back, `d2lbert convert --to-hf` converts, `pretrain --model` and `finetune --model`
start from (a pretraining model) and `predict --model` runs (a task model).

`load_pretrained(path_or_name)` recognizes, by the files it holds:

    a `d2lbert pretrain` output folder   checkpoints/step-NNNNNN/ (the newest is used,
                                         `run.models.model_folder`)
    a checkpoint folder                  manifest.json, config.json, vocab.json, model.params
    a d2lbert model folder               config.json, vocab.json (or vocab.txt), model.params
                                         (`d2lbert convert --from-hf` writes one)
    a task model folder                  the same and task.json (`save_pretrained` of a
                                         task model, `d2lbert finetune`'s OUT/model)
    a Hugging Face BERT folder           config.json, model.safetensors, vocab.txt
    a model of the d2l book              a zip or folder with vocab.json, pretrained.params
    the name of a book model             'bert.small' or 'bert.base' (downloaded once)
"""
import os
from typing import Optional, Sequence

import mxnet as mx
from mxnet import np

from .. import fast as fast_path
from ..finetuning.task_model import TASK_FILE, load_task_model, task_info_of
from ..model import BERTModel
from ..run import checkpoint as ckpt
from ..run.errors import as_library_errors
from ..run.folder import write_model_folder
from ..run.models import model_folder
from ..run.precision import PRECISIONS
from ..run.setup import prepare_model
from ..util.numpy_mode import in_numpy_mode
from ..util.hashing import sha1_of_file, sha1_of_strings
from ..util.options import check_bool, check_choice
from .book import BOOK_MODELS, book_model_directory, is_book_model, load_book_model
from .convert import load_model_dir
from .huggingface import bert_from_huggingface

PRETRAINED_NAMES = tuple(BOOK_MODELS)  # the models load_pretrained knows by name
EXPECTED = ('a d2lbert pretraining output folder (checkpoints/step-NNNNNN), a checkpoint or '
            'model folder (config.json, model.params), a Hugging Face BERT folder '
            '(config.json, model.safetensors, vocab.txt), a book model zip or folder '
            f'(vocab.json, pretrained.params), or one of the names {list(PRETRAINED_NAMES)}')


def model_kind(path_or_name):
    """What `path_or_name` holds: 'run', 'checkpoint', 'model', 'task', 'huggingface' or
    'book'.

    Raises FileNotFoundError for a path that does not exist (and is not a book model's
    name), ValueError for a file or folder that is none of these.
    """
    path = path_or_name
    if not os.path.exists(path):
        if path in BOOK_MODELS:
            return 'book'
        raise FileNotFoundError(f'no pretrained model at {path!r}: expected {EXPECTED}')
    if is_book_model(path):
        return 'book'
    if not os.path.isdir(path):
        raise ValueError(f'{path} is not a pretrained model: expected {EXPECTED}')

    def has(*names):
        return all(os.path.exists(os.path.join(path, name)) for name in names)
    if has(TASK_FILE):
        return 'task'
    if has('manifest.json'):
        return 'checkpoint'
    if os.path.isdir(os.path.join(path, ckpt.CHECKPOINT_DIR)):
        return 'run'
    if has('config.json') and (has('model.safetensors') or has('pytorch_model.bin')):
        return 'huggingface'
    if has('config.json', 'model.params'):
        return 'model'
    raise ValueError(f'{path} is not a pretrained model: expected {EXPECTED}')


@in_numpy_mode
def load_pretrained(path_or_name: str, ctx: Optional[mx.Context] = None,
                    allow_pickle: bool = False, fast: bool = False, precision: str = 'fp32'):
    """Load a BERT from any of the sources of the module doc.

    Returns (net, vocab): net a `BERTModel` (or, from a task model folder, the
    `BERTClassifier`, `BERTTagger` or `BERTForQuestionAnswering` saved there) on ctx
    (default CPU), not hybridized; vocab its `Vocab` or, for a Hugging Face model, its
    `WordPieceVocab`. A Hugging Face pytorch_model.bin (a pickle) is read only with
    allow_pickle=True. fast=True: net's blocks are those of the fast path
    (`d2lbert.fast.accelerate`); precision: the type its matrix products compute in,
    'fp32', 'bf16' (a CPU with avx512_bf16 or AMX, a GPU of compute capability 8.0 or
    more) or 'fp16' (a GPU), its parameters float32 (`d2lbert.model.precision`).

        net, vocab = d2lbert.load_pretrained('bert.small')
        tokens, segments, valid_lens = d2lbert.encode_batch(vocab, ['a crane is flying'])
        encoded, _, _ = net(tokens, segments, valid_lens)  # (1, 7, 256)
        fast_net, vocab = d2lbert.load_pretrained('bert.small', fast=True, precision='bf16')
    """
    check_bool('fast', fast)
    check_choice('precision', precision, tuple(PRECISIONS))
    kind = model_kind(path_or_name)
    if kind == 'book':
        net, vocab, _ = load_book_model(path_or_name)
    elif kind == 'huggingface':
        net, vocab, _ = bert_from_huggingface(path_or_name, allow_pickle)
    elif kind == 'model':
        net, vocab, _ = load_model_dir(path_or_name)
    else:
        checkpoint = model_folder(path_or_name)
        if os.path.isfile(os.path.join(checkpoint, TASK_FILE)):
            net, _, vocab, _ = load_task_model(checkpoint)
        else:  # a checkpoint, or a model folder with its manifest (`save_pretrained`)
            ckpt.verify_checkpoint(checkpoint)
            config, vocab = ckpt.read_config_and_vocab(checkpoint)
            net = ckpt.load_parameters(BERTModel.from_config(config), checkpoint)
    net.collect_params().reset_ctx(ctx or mx.cpu())
    return prepare_model(net, precision, fast_path if fast else None), vocab


@in_numpy_mode
def save_pretrained(net, vocab, folder: str, labels: Optional[Sequence[str]] = None,
                    overwrite: bool = False) -> str:
    """Write net and its vocabulary to `folder`, for `load_pretrained(folder)` to read
    back with identical outputs; returns the folder. It is written as `d2lbert convert
    --from-hf` writes its --out, by the same function (`run.folder.write_model_folder`).

    net: a `BERTModel`, or a task model built on one (`BERTClassifier`,
        `MeanPooledClassifier`, `BERTTagger`, `BERTForQuestionAnswering`), initialized.
    vocab: its `Vocab` or `WordPieceVocab`.
    folder: a new or empty folder; with overwrite=True, one whose files it replaces
        whole (a model saved before). Written whole, in a temporary folder beside it
        that then takes its place: after a crash it is the old folder or the new one.
        A ValueError naming `folder`, and nothing touched, for a file, a symbolic link
        (however spelled: 'link/', 'dir/../link'), a device, the current folder or
        one holding it, a folder holding files (without overwrite), or one that
        another live process holds (a `d2lbert pretrain` writing there); an OSError
        if the write fails (a full disk), the folder as it was.
    labels: a task model's class names or tags in id order (default '0', '1', ...),
        which `d2lbert predict` writes.

        d2lbert.save_pretrained(classifier, vocab, 'my-classifier')
        classifier, vocab = d2lbert.load_pretrained('my-classifier')
    """
    path = os.fspath(folder) if isinstance(folder, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path:
        raise TypeError(f'folder must be the path of a folder to write (a str), got '
                        f'{folder!r}')
    json_files = None
    if not isinstance(net, BERTModel):
        json_files = {TASK_FILE: task_info_of(net, labels).to_dict()}
    with as_library_errors():
        return write_model_folder('folder', path, net, net.config, vocab, overwrite,
                                  json_files=json_files)


def model_source(path_or_name):
    """What a run records of the model it starts from: {'path': the path (absolute) or
    name, 'kind': `model_kind`, 'files': the folder or file read, 'sha1': its checksum}.
    The checksum of a folder is the SHA-1 of its files' names and SHA-1s (those directly
    in it), of a file (a book model's zip) its SHA-1."""
    kind = model_kind(path_or_name)
    if kind == 'book' and not os.path.exists(path_or_name):
        files = book_model_directory(path_or_name)
    elif kind in ('run', 'checkpoint'):
        files = model_folder(path_or_name)
    else:
        files = path_or_name
    if os.path.isfile(files):
        checksum = sha1_of_file(files)
    else:
        names = sorted(name for name in os.listdir(files)
                       if os.path.isfile(os.path.join(files, name)))
        checksum = sha1_of_strings(*[(name, sha1_of_file(os.path.join(files, name)))
                                     for name in names])
    path = path_or_name if not os.path.exists(path_or_name) else os.path.abspath(path_or_name)
    return {'path': path, 'kind': kind, 'files': os.path.abspath(files), 'sha1': checksum}


def get_bert_encoding(net, vocab, tokens_a: Sequence[str],
                      tokens_b: Optional[Sequence[str]] = None):
    """Encode one sentence (or a pair) with a pretrained BERT, as the d2l book's
    function of the same name (for a batch of texts: `encode_batch`).

    tokens_a, tokens_b: lists of tokens (e.g. `'a crane is flying'.split()`)
    returns: (1, len(tokens_a) + len(tokens_b or []) + 2 or 3, num_hiddens), the
    encodings of `<cls> a <sep> [b <sep>]`.

        encoded = get_bert_encoding(net, vocab, ['a', 'crane', 'is', 'flying'])
        encoded[:, 0, :]  # the <cls> vector, (1, num_hiddens)
    """
    ids = [vocab.cls_id] + vocab[list(tokens_a)] + [vocab.sep_id]
    segments = [0] * len(ids)
    if tokens_b is not None:
        ids_b = vocab[list(tokens_b)] + [vocab.sep_id]
        ids, segments = ids + ids_b, segments + [1] * len(ids_b)
    ctx = next(iter(net.collect_params().values())).list_ctx()[0]
    token_ids = np.array([ids], dtype='int32', ctx=ctx)
    segment_ids = np.array([segments], dtype='int32', ctx=ctx)
    encoded, _, _ = net(token_ids, segment_ids)
    return encoded
