"""Read and write BERT checkpoints in Hugging Face's directory format.

A Hugging Face BERT directory holds

    config.json             the architecture (see `hf_config`)
    model.safetensors       the weights (see `hf_weights`), or the older
    pytorch_model.bin       PyTorch pickle of the same tensors
    vocab.txt               the WordPiece vocabulary (see `d2lbert.data.wordpiece`)
    tokenizer_config.json   optional; its do_lower_case (default true) says whether
                            the tokenizer lower-cases

`from_huggingface` turns one into a d2lbert `BERTModel` (that computes the same
numbers as `transformers`), and `to_huggingface` writes one that
`transformers.BertForPreTraining.from_pretrained` loads.
"""
import json
import os

import mxnet as mx

from ..model import BERTModel
from .hf_config import check_exportable, config_from_hf, config_to_hf
from .hf_weights import check_shapes, load_tensors, parameter_map, tensors_of
from ..data.vocab_files import read_wordpiece as read_tokenizer
from ..data.wordpiece import SPECIAL_TOKENS, WordPieceVocab


def _file(directory, name):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{path} does not exist: a Hugging Face BERT directory needs '
                                f'{name}')
    return path


def _read_json(path):
    with open(path, encoding='utf-8') as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f'{path} is not valid JSON: {error}') from None


def _write_json(values, path):
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(values, f, indent=2, sort_keys=True)
        f.write('\n')


def _safetensors():
    """The `safetensors.numpy` module (imported on first use: an optional dependency)."""
    try:
        import safetensors.numpy
    except ImportError:
        raise ImportError('reading and writing model.safetensors needs the safetensors '
                          'package: pip install safetensors') from None
    return safetensors.numpy


def write_tokenizer(vocab, directory):
    """Write vocab.txt and tokenizer_config.json for a `WordPieceVocab` or a d2lbert
    `Vocab` (whose `<pad> <unk> <cls> <sep> <mask>` become `[PAD] [UNK] [CLS] [SEP] [MASK]`;
    a d2lbert corpus is lower-cased)."""
    renamed = {f'<{kind}>': token for kind, token in SPECIAL_TOKENS.items()}
    lowercase = getattr(vocab, 'lowercase', True)
    tokens = [renamed.get(token, token) for token in vocab.idx_to_token]
    WordPieceVocab(tokens, lowercase).save(os.path.join(directory, 'vocab.txt'))
    _write_json({'tokenizer_class': 'BertTokenizer', 'do_lower_case': lowercase},
                os.path.join(directory, 'tokenizer_config.json'))


def read_tensors(directory, allow_pickle=False):
    """(name -> NumPy array, file) of model.safetensors, else of pytorch_model.bin.

    pytorch_model.bin is a pickle, and unpickling can run arbitrary code, so it is
    read only with allow_pickle=True (then PyTorch is needed, and loads it with
    weights_only=True).
    """
    safetensors_file = os.path.join(directory, 'model.safetensors')
    if os.path.isfile(safetensors_file):
        return _safetensors().load_file(safetensors_file), safetensors_file
    pickle_file = os.path.join(directory, 'pytorch_model.bin')
    if not os.path.isfile(pickle_file):
        raise FileNotFoundError(f'{directory} has neither model.safetensors nor '
                                'pytorch_model.bin')
    if not allow_pickle:
        raise ValueError(f'{pickle_file} is a pickle, and loading a pickle can run arbitrary '
                         'code: pass allow_pickle=True if you trust it')
    try:
        import torch
    except ImportError:
        raise ImportError(f'reading {pickle_file} needs PyTorch (pip install torch); or '
                          'save the checkpoint as model.safetensors') from None
    state = torch.load(pickle_file, map_location='cpu', weights_only=True)
    return {name: value.float().numpy() for name, value in state.items()}, pickle_file


def from_huggingface(path, allow_pickle=False):
    """Load a Hugging Face BERT directory: returns `(net, tokenizer, config)`.

    net: a `BERTModel` of `config`, with every weight of the checkpoint, including the
      pooler and the masked-LM and next-sentence heads when present.
      `net.missing_heads` lists the heads ('pooler', 'mlm', 'nsp') the checkpoint
      lacks (e.g. all three for a `BertModel` without pooler); they stay randomly
      initialized, and a warning says so.
    tokenizer: a `WordPieceVocab` of vocab.txt.
    config: the `BERTConfig.original` of config.json.
    """
    config_file = _file(path, 'config.json')
    config = config_from_hf(_read_json(config_file), config_file)
    tokenizer = read_tokenizer(path)
    if len(tokenizer) != config.vocab_size:
        raise ValueError(f'{os.path.join(path, "vocab.txt")} has {len(tokenizer)} tokens, but '
                         f'{config_file} says vocab_size={config.vocab_size}')
    net = BERTModel.from_config(config)
    net.initialize(mx.init.Normal(0.02))
    tensors, source = read_tensors(path, allow_pickle)
    net.missing_heads = load_tensors(net, tensors, source)
    return net, tokenizer, config


def to_huggingface(net, config, vocab, path):
    """Write `net` (a `BERTModel` of `config`) and `vocab` (a `WordPieceVocab` or a d2lbert
    `Vocab`) as a Hugging Face `BertForPreTraining` directory `path`.

    Raises ValueError for a model that Hugging Face's BERT would compute differently
    (see `hf_config.check_exportable`), or when net, config and vocab disagree in size.
    """
    check_exportable(config)
    if len(vocab) != config.vocab_size:
        raise ValueError(f'the vocabulary has {len(vocab)} tokens, but config.vocab_size is '
                         f'{config.vocab_size}')
    params, expected = parameter_map(net), parameter_map(BERTModel.from_config(config))
    if set(params) != set(expected):
        raise ValueError(f'net does not have the architecture of config: tensors '
                         f'{sorted(set(params) ^ set(expected))} are in only one of them')
    check_shapes(expected, {name: param.data() for name, param in params.items()}, 'net')
    os.makedirs(path, exist_ok=True)
    _write_json(config_to_hf(config, vocab.pad_id), os.path.join(path, 'config.json'))
    _safetensors().save_file(tensors_of(net), os.path.join(path, 'model.safetensors'),
                                metadata={'format': 'pt'})
    write_tokenizer(vocab, path)
