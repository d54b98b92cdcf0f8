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
`transformers.BertForPreTraining.from_pretrained` loads. Fine-tuned models go both
ways too (see `hf_tasks`): a `BERTClassifier`, `BERTTagger` or
`BERTForQuestionAnswering` is a `BertForSequenceClassification`,
`BertForTokenClassification` or `BertForQuestionAnswering` directory.
"""
import json
import os
import pickle
import sys

import mxnet as mx

from ..model import BERTModel
from .hf_config import check_exportable, config_from_hf, config_to_hf
from .hf_tasks import (UNUSED_HEADS, architecture_of, check_has_hf_form, head_config,
                       head_map, is_head_tensor, task_architecture, task_model)
from .hf_weights import (canonical_names, check_shapes, encoder_map, load_tensors,
                         parameter_map, tensors_of)
from ..data.vocab_files import read_wordpiece as read_tokenizer
from ..data.wordpiece import SPECIAL_TOKENS, WordPieceVocab
from ..run.files import written_as_os_errors


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


class PickleRefused(ValueError):
    """A pytorch_model.bin was not read, as allow_pickle was not given (the commands
    name their own flag)."""

    def __init__(self, path):
        super().__init__(f'{path} is a pickle, and loading a pickle can run arbitrary code: '
                         'pass allow_pickle=True if you trust it')
        self.path = path


def read_tensors(directory, allow_pickle=False):
    """(name -> NumPy array, file) of model.safetensors, else of pytorch_model.bin.

    pytorch_model.bin is a pickle, and unpickling can run arbitrary code, so it is
    read only with allow_pickle=True (then PyTorch is needed, and loads it with
    weights_only=True).
    """
    safetensors_file = os.path.join(directory, 'model.safetensors')
    if os.path.isfile(safetensors_file):
        safetensors = _safetensors()
        try:
            return safetensors.load_file(safetensors_file), safetensors_file
        except (OSError, ValueError, sys.modules['safetensors'].SafetensorError) as error:
            raise ValueError(f'{safetensors_file} is truncated or corrupt (not a readable '
                             f'safetensors file: {error})') from None
    pickle_file = os.path.join(directory, 'pytorch_model.bin')
    if not os.path.isfile(pickle_file):
        raise FileNotFoundError(f'{directory} has neither model.safetensors nor '
                                'pytorch_model.bin')
    if not allow_pickle:
        raise PickleRefused(pickle_file)
    try:
        import torch
    except ImportError:
        raise ImportError(f'reading {pickle_file} needs PyTorch (pip install torch); or '
                          'save the checkpoint as model.safetensors') from None
    try:
        state = torch.load(pickle_file, map_location='cpu', weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else 'empty'
        raise ValueError(f'{pickle_file}: torch.load(weights_only=True) refuses it (it holds '
                         f'more than tensors, or is corrupt: {first_line})') from None
    return {name: value.float().numpy() for name, value in state.items()}, pickle_file


def from_huggingface(path, allow_pickle=False):
    """Load a Hugging Face BERT directory: returns `(net, tokenizer, config)`.

    net: for a pretrained BERT, a `BERTModel` of `config`, with every weight of the
      checkpoint, including the pooler and the masked-LM and next-sentence heads when
      present. `net.missing_heads` lists the heads ('pooler', 'mlm', 'nsp') the
      checkpoint lacks (e.g. all three for a `BertModel` without pooler); they stay
      randomly initialized, and a warning says so.
      For a fine-tuned model (config.json's `architectures` is
      BertForSequenceClassification, BertForTokenClassification or
      BertForQuestionAnswering), the `BERTClassifier`, `BERTTagger` or
      `BERTForQuestionAnswering` with its head's weights; `net.labels` is the tuple of
      class or tag names in id order (config.json's id2label), None for a regression or
      question answering.
    tokenizer: a `WordPieceVocab` of vocab.txt.
    config: the `BERTConfig.original` of config.json (the encoder's).
    """
    hf_config, config, tokenizer = read_directory(path)
    tensors, source = read_tensors(path, allow_pickle)
    architecture = task_architecture(hf_config)
    bert = bert_of(config, tensors, source, architecture)
    if architecture is None:
        return bert, tokenizer, config
    net = task_model(architecture, bert, hf_config, canonical_names(tensors), source)
    return net, tokenizer, config


def bert_from_huggingface(path, allow_pickle=False):
    """The pretrained `BERTModel` of any Hugging Face BERT directory, of a fine-tuned
    one too (whose task head is left out): `(net, tokenizer, config)` as
    `from_huggingface` returns for a pretrained BERT."""
    hf_config, config, tokenizer = read_directory(path)
    tensors, source = read_tensors(path, allow_pickle)
    return bert_of(config, tensors, source, task_architecture(hf_config)), tokenizer, config


def read_directory(path):
    """(config.json as a dict, its `BERTConfig`, the `WordPieceVocab`) of a Hugging Face
    BERT directory, checked to agree in size."""
    config_file = _file(path, 'config.json')
    hf_config = _read_json(config_file)
    config = config_from_hf(hf_config, config_file)
    tokenizer = read_tokenizer(path)
    if len(tokenizer) != config.vocab_size:
        raise ValueError(f'{os.path.join(path, "vocab.txt")} has {len(tokenizer)} tokens, but '
                         f'{config_file} says vocab_size {config.vocab_size}')
    return hf_config, config, tokenizer


def bert_of(config, tensors, source, architecture=None):
    """A `BERTModel` of `config` holding the checkpoint's tensors, all but those of the
    task head of `architecture` (None: a pretrained BERT), whose checkpoint lacks some
    pretraining heads (`hf_tasks.UNUSED_HEADS`) without a warning about them. Sets
    `net.missing_heads`. Only the parameters the checkpoint lacks draw random numbers
    (Normal(0.02)); the others start as zeros, replaced by their tensors at once."""
    net = BERTModel.from_config(config)
    tensors = {name: value for name, value in canonical_names(tensors).items()
               if not is_head_tensor(name)}
    loaded = {param.name for name, param in parameter_map(net).items() if name in tensors}
    for param in net.collect_params().values():
        param.initialize(mx.init.Zero() if param.name in loaded else None,
                         default_init=mx.init.Normal(0.02))
    net.missing_heads = load_tensors(net, tensors, source, UNUSED_HEADS.get(architecture, ()))
    return net


def to_huggingface(net, config, vocab, path, labels=None):
    """Write `net` and `vocab` (a `WordPieceVocab` or a d2lbert `Vocab`) as a Hugging
    Face directory `path`.

    net: a `BERTModel` of `config` (written as `BertForPreTraining`), or a fine-tuned
      `BERTClassifier` (`BertForSequenceClassification`; one output is a regression),
      `BERTTagger` (`BertForTokenClassification`) or `BERTForQuestionAnswering`
      (`BertForQuestionAnswering`) on such a model.
    labels: a classifier's or tagger's class or tag names in id order, written as
      config.json's id2label; default `net.labels` if set, else LABEL_0, LABEL_1, ...

    Raises ValueError for a model that Hugging Face's BERT would compute differently
    (see `hf_config.check_exportable`), when net, config and vocab disagree in size, or
    for labels that do not name each output once; nothing is written then.
    """
    check_exportable(config)
    if len(vocab) != config.vocab_size:
        raise ValueError(f'the vocabulary has {len(vocab)} tokens, but config.vocab_size is '
                         f'{config.vocab_size}')
    params, head_fields = exported_parameters(net, config, labels)
    os.makedirs(path, exist_ok=True)
    _write_json({**config_to_hf(config, vocab.pad_id), **head_fields},
                os.path.join(path, 'config.json'))
    with written_as_os_errors(os.path.join(path, 'model.safetensors')):
        _safetensors().save_file(tensors_of(params), os.path.join(path, 'model.safetensors'),
                                 metadata={'format': 'pt'})
    write_tokenizer(vocab, path)


def exported_parameters(net, config, labels=None):
    """(Hugging Face tensor name -> Parameter, config.json fields of the task head, if
    any) of a net that `to_huggingface` takes, checked to have the sizes of config."""
    check_has_hf_form(net)
    reference = BERTModel.from_config(config)
    if isinstance(net, BERTModel):
        if labels is not None:
            raise ValueError('labels are for a fine-tuned classifier or tagger, not for a '
                             'pretrained BERTModel')
        params, expected, head_fields = parameter_map(net), parameter_map(reference), {}
    elif architecture_of(net) is not None:
        params, expected = encoder_map(net.encoder), encoder_map(reference.encoder)
        head_fields = head_config(net, labels if labels is not None
                                  else getattr(net, 'labels', None))
    else:
        raise TypeError(f'cannot export a {type(net).__name__}: net must be a BERTModel, '
                        'BERTClassifier, BERTTagger or BERTForQuestionAnswering')
    if set(params) != set(expected):
        raise ValueError(f'net does not have the architecture of config: tensors '
                         f'{sorted(set(params) ^ set(expected))} are in only one of them')
    check_shapes(expected, {name: param.data() for name, param in params.items()}, 'net')
    if head_fields:
        params.update(head_map(net))
    return params, head_fields
