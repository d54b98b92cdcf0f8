"""The d2l book's own pretrained BERTs, `bert.small` and `bert.base`, as d2lbert models.

The book's chapter "Natural Language Inference: Fine-Tuning BERT" (MXNet edition)
downloads them from d2l's data bucket as zips, each holding one folder with

    vocab.json          the vocabulary: the list of tokens in id order (lower-cased
                        words, as `d2l.tokenize` splits them)
    pretrained.params   the parameters of d2l's `BERTModel`, as `save_parameters` writes
                        them (d2l 1.0.3's `BERTModel` loads them)

    name         hidden  FFN   heads  layers  max_len
    bert.small   256     512   4      2       512
    bert.base    768     3072  12     12      512

`load_book_model` reads such a zip or folder (or downloads one by name) into a
d2lbert `BERTModel` of `BERTConfig.d2l` that computes the same numbers as d2l's:

    d2l 1.0.3 (pretrained.params)            d2lbert
    encoder.token_embedding.weight           encoder.token_embedding.weight  (rows reordered)
    encoder.segment_embedding.weight         encoder.segment_embedding.weight
    encoder.pos_embedding (1, max_len, H)    encoder.position_embedding.weight (max_len, H)
    encoder.blks.i.attention.W_q.*           encoder.blocks[i].attention.query_{weight,bias}
      (W_k, W_v alike)                         (key_*, value_*)
    encoder.blks.i.attention.W_o.*           encoder.blocks[i].attention.output
    encoder.blks.i.addnorm1.ln.*             encoder.blocks[i].norm1
    encoder.blks.i.ffn.dense1.*, dense2.*    encoder.blocks[i].ffn.dense1, dense2
    encoder.blks.i.addnorm2.ln.*             encoder.blocks[i].norm2
    hidden.*                                 nsp.pooler (the tanh layer)
    nsp.output.*                             nsp.output
    mlm.mlp.0.*                              mlm.transform[0]
    mlm.mlp.1.{gamma,beta}                   mlm.transform[2]
    mlm.mlp.2.weight, bias                   mlm.output_weight, output_bias (rows reordered)

The ids change: d2lbert's `Vocab` keeps `<pad> <unk> <cls> <sep> <mask>` at ids 0..4,
while the book's vocab.json has them elsewhere ('<unk>' first, then '<pad>', '<mask>',
'<cls>', '<sep>', in the d2l version that made the files). So the vocabulary is
rebuilt with the special tokens first and the book's other tokens after them, in the
book's order, and the rows of the token embedding and of the masked-LM output layer
move with their tokens: every token keeps its vector, and the model gives the same
outputs for the same text.

The number of heads is not in the parameters (it does not change their shapes): both
book models use heads of 64 dimensions, so num_hiddens / 64 unless `num_heads` is given.
"""
import json
import os
import warnings
import zipfile

import mxnet as mx
import numpy as onp
from mxnet import np

from ..data.cache import data_home
from ..data.download import archive_url, cached_archive
from ..data.vocab import SPECIAL_TOKENS, Vocab
from ..model import BERTConfig, BERTModel
from .hf_weights import MissingHeadsWarning, dense

DATA_URL = 'http://d2l-data.s3-accelerate.amazonaws.com/'  # d2l.DATA_URL
URL_VARIABLE = 'D2LBERT_BOOK_MODELS_URL'  # a mirror holding the same zips
BOOK_MODELS = {  # name: (zip file, its SHA-1 in the book's DATA_HUB)
    'bert.small': ('bert.small.zip', 'a4e718a47137ccd1809c9107ab4f5edd317bae2c'),
    'bert.base': ('bert.base.zip', '7b3820b35da691042e5d34c0971ac3edbd80d3f4'),
}
BOOK_FILES = ('vocab.json', 'pretrained.params')
HEAD_SIZE = 64  # num_hiddens / num_heads of both book models
BOOK_DROPOUT = 0.1  # the NLI chapter loads bert.small with dropout=0.1
# The pretraining heads (as in `hf_weights.HEADS`): their parameters' name prefixes.
HEADS = {'pooler': 'hidden.', 'mlm': 'mlm.', 'nsp': 'nsp.'}
REORDERED = ('encoder.token_embedding.weight', 'mlm.mlp.2.weight', 'mlm.mlp.2.bias')


def book_model_directory(name, base_url=None):
    """The cached folder holding vocab.json and pretrained.params of the book model
    `name` ('bert.small' or 'bert.base'), downloaded and checked against the book's
    SHA-1 the first time (from `base_url`, default $D2LBERT_BOOK_MODELS_URL or d2l's
    bucket)."""
    if name not in BOOK_MODELS:
        raise ValueError(f'unknown book model {name!r}; choose one of {sorted(BOOK_MODELS)}')
    file_name, sha1 = BOOK_MODELS[name]
    base_url = base_url or os.environ.get(URL_VARIABLE) or DATA_URL
    offline_hint = (f'get {file_name} elsewhere (the d2l book downloads it from '
                    f'{archive_url(DATA_URL, file_name)}) and give its path instead of '
                    f'{name!r} (--model /path/to/{file_name}: the zip or its unzipped '
                    f'folder), or set {URL_VARIABLE} to a mirror.')
    return cached_archive(os.path.join(data_home(), name), archive_url(base_url, file_name),
                          BOOK_FILES, sha1, offline_hint)


def is_book_model(path):
    """Whether `path` is a folder or zip in the book's format (by its file names)."""
    if os.path.isdir(path):
        return all(os.path.isfile(os.path.join(path, name)) for name in BOOK_FILES)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = {os.path.basename(member) for member in archive.namelist()}
        return all(name in names for name in BOOK_FILES)
    return False


def read_book_files(path):
    """(token list of vocab.json, {parameter name: NumPy array} of pretrained.params)
    of a book model folder or zip (whose files may sit in a folder inside it)."""
    if os.path.isdir(path):
        contents = read_folder_members(path)
    elif zipfile.is_zipfile(path):
        contents = read_zip_members(path)
    else:
        raise ValueError(f'{path} is neither a folder nor a zip archive holding '
                         f'{" and ".join(BOOK_FILES)}')
    source = os.path.join(path, 'vocab.json')
    try:
        tokens = json.loads(contents['vocab.json'].decode('utf-8'))
    except ValueError as error:
        raise ValueError(f'{source} is not valid JSON: {error}') from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(f'{source} must hold a JSON list of tokens')
    return tokens, read_params(contents['pretrained.params'],
                               os.path.join(path, 'pretrained.params'))


def read_folder_members(path):
    """{file name: bytes} of the files `BOOK_FILES` in folder `path`."""
    contents = {}
    for name in BOOK_FILES:
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            raise FileNotFoundError(f'{file} does not exist: a book model folder holds '
                                    f'{" and ".join(BOOK_FILES)}')
        with open(file, 'rb') as f:
            contents[name] = f.read()
    return contents


def read_zip_members(path):
    """{file name: bytes} of the members of zip `path` named `BOOK_FILES` (the least
    nested one of each name)."""
    with zipfile.ZipFile(path) as archive:
        members = {}
        for member in sorted(archive.namelist(), key=lambda m: m.count('/')):
            members.setdefault(os.path.basename(member), member)
        missing = [name for name in BOOK_FILES if name not in members]
        if missing:
            raise ValueError(f'{path} does not contain {missing}: a book model zip holds '
                             f'{" and ".join(BOOK_FILES)}')
        return {name: archive.read(members[name]) for name in BOOK_FILES}


def read_params(data, source):
    """{name: NumPy array} of the bytes of an MXNet parameter file."""
    try:
        arrays = mx.nd.load_frombuffer(data)
    except mx.base.MXNetError:
        raise ValueError(f'{source} is not an MXNet parameter file') from None
    if not isinstance(arrays, dict):
        raise ValueError(f'{source} holds unnamed arrays, not the parameters of a model')
    return {name: array.asnumpy() for name, array in arrays.items()}


def book_config(params, source, num_heads=None, dropout=BOOK_DROPOUT):
    """The `BERTConfig.d2l` of a book model, its sizes read off the parameter shapes."""
    for name in ('encoder.token_embedding.weight', 'encoder.pos_embedding',
                 'encoder.blks.0.ffn.dense1.weight'):
        if name not in params:
            raise ValueError(f'{source} lacks the parameter {name!r} of the book\'s BERTModel')
    vocab_size, num_hiddens = params['encoder.token_embedding.weight'].shape
    if num_heads is None:
        if num_hiddens % HEAD_SIZE:
            raise ValueError(f'{source}: {num_hiddens} hidden units are not heads of '
                             f'{HEAD_SIZE} like the book models\'; pass num_heads')
        num_heads = num_hiddens // HEAD_SIZE
    num_layers = len({name.split('.')[2] for name in params
                      if name.startswith('encoder.blks.')})
    return BERTConfig.d2l(vocab_size, num_hiddens=num_hiddens,
                          ffn_num_hiddens=params['encoder.blks.0.ffn.dense1.weight'].shape[0],
                          num_heads=num_heads, num_layers=num_layers,
                          max_len=params['encoder.pos_embedding'].shape[1], dropout=dropout)


def book_vocab(tokens, source):
    """(d2lbert `Vocab`, order): the book's tokens with the special ones moved to
    d2lbert's ids; order[i] is the book's id of d2lbert's token i."""
    book_ids = {token: i for i, token in enumerate(tokens)}
    if len(book_ids) != len(tokens):
        raise ValueError(f'{source} lists a token twice')
    missing = [token for token in SPECIAL_TOKENS if token not in book_ids]
    if missing:
        raise ValueError(f'{source} lacks the special token(s) {missing}')
    ours = list(SPECIAL_TOKENS) + [token for token in tokens if token not in SPECIAL_TOKENS]
    return Vocab.from_idx_to_token(ours), onp.array([book_ids[token] for token in ours])


def parameter_map(net):
    """d2l `BERTModel` parameter name -> Parameter of a d2lbert `BERTModel` of
    `BERTConfig.d2l` (the table above)."""
    encoder = net.encoder
    params = {'encoder.token_embedding.weight': encoder.token_embedding.weight,
              'encoder.segment_embedding.weight': encoder.segment_embedding.weight,
              'encoder.pos_embedding': encoder.position_embedding.weight}
    for i, block in enumerate(encoder.blocks):
        prefix = f'encoder.blks.{i}'
        for d2l_name, kind in (('W_q', 'query'), ('W_k', 'key'), ('W_v', 'value')):
            params[f'{prefix}.attention.{d2l_name}.weight'] = getattr(block.attention,
                                                                      f'{kind}_weight')
            params[f'{prefix}.attention.{d2l_name}.bias'] = getattr(block.attention,
                                                                    f'{kind}_bias')
        params.update(dense(f'{prefix}.attention.W_o', block.attention.output))
        params.update(layer_norm(f'{prefix}.addnorm1.ln', block.norm1))
        params.update(dense(f'{prefix}.ffn.dense1', block.ffn.dense1))
        params.update(dense(f'{prefix}.ffn.dense2', block.ffn.dense2))
        params.update(layer_norm(f'{prefix}.addnorm2.ln', block.norm2))
    params.update(dense('hidden', net.nsp.pooler))
    params.update(dense('nsp.output', net.nsp.output))
    params.update(dense('mlm.mlp.0', net.mlm.transform[0]))
    params.update(layer_norm('mlm.mlp.1', net.mlm.transform[2]))
    params.update({'mlm.mlp.2.weight': net.mlm.output_weight,
                   'mlm.mlp.2.bias': net.mlm.output_bias})
    return params


def layer_norm(name, norm):
    """The parameter names of a Gluon `LayerNorm` called `name` -> a LayerNorm's
    Parameters."""
    return {f'{name}.gamma': norm.gamma, f'{name}.beta': norm.beta}


def book_value(name, value, order):
    """A book parameter's value as d2lbert's parameter holds it."""
    if name == 'encoder.pos_embedding':
        value = value[0]  # (1, max_len, H) -> (max_len, H)
    if name in REORDERED:
        value = value[order]  # d2lbert's row i is the book's row order[i]
    return value


def load_params(net, params, order, source):
    """Copy the book's parameters into `net`; returns the missing heads (see
    `hf_weights.missing_heads`), which keep their initial values."""
    targets = parameter_map(net)
    absent = [name for name in targets if name not in params]
    heads = [head for head, prefix in HEADS.items()
             if all(name in absent for name in targets if name.startswith(prefix))]
    for name in absent:
        if not any(name.startswith(HEADS[head]) for head in heads):
            raise ValueError(f'{source} lacks the parameter {name!r}')
    unknown = sorted(set(params) - set(targets))
    if unknown:
        raise ValueError(f'{source} has parameters that d2l\'s BERTModel does not: {unknown}')
    for name, param in targets.items():
        if name in params:
            value = book_value(name, params[name], order)
            if value.shape != param.shape:
                raise ValueError(f'{source}: parameter {name!r} has shape {value.shape}, '
                                 f'but the other parameters imply {param.shape}')
            param.set_data(np.array(value.astype('float32')))
    if heads:
        warnings.warn(f'{source} has no {heads} head(s): their parameters stay randomly '
                      'initialized', MissingHeadsWarning, stacklevel=3)
    return heads


def load_book_model(path_or_name, num_heads=None, dropout=BOOK_DROPOUT, base_url=None):
    """Load one of the book's pretrained BERTs: `(net, vocab, config)`.

    path_or_name: 'bert.small' or 'bert.base' (downloaded once, see
      `book_model_directory`), or the path of such a zip or of its unzipped folder.
    num_heads: default num_hiddens / 64, as in both book models.
    dropout: of the returned model (the book fine-tunes with 0.1).
    net: a d2lbert `BERTModel` of `config` (`BERTConfig.d2l`), on the CPU;
      `net.missing_heads` lists the pretraining heads ('pooler', 'mlm', 'nsp') the file
      lacks, which stay randomly initialized.
    vocab: a d2lbert `Vocab` of the book's tokens (ids reordered, see the module doc).
    """
    path = path_or_name
    if path_or_name in BOOK_MODELS and not os.path.exists(path_or_name):
        path = book_model_directory(path_or_name, base_url)
    tokens, params = read_book_files(path)
    source = os.path.join(path, 'pretrained.params')
    config = book_config(params, source, num_heads, dropout)
    if len(tokens) != config.vocab_size:
        raise ValueError(f'{os.path.join(path, "vocab.json")} has {len(tokens)} tokens, but '
                         f'the token embedding of {source} has {config.vocab_size} rows')
    vocab, order = book_vocab(tokens, os.path.join(path, 'vocab.json'))
    net = BERTModel.from_config(config)
    net.initialize(mx.init.Normal(0.02))
    net.missing_heads = load_params(net, params, order, source)
    return net, vocab, config
