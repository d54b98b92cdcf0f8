"""The d2l book's pretrained BERTs (`bert.small`, `bert.base`) in d2lbert: a d2l 1.0.3
`BERTModel`, saved exactly as the book ships its models, gives the same outputs in
d2lbert; downloads only from a local HTTP server (no internet)."""
import functools
import hashlib
import http.server
import json
import os
import socket
import threading
import zipfile

import numpy as onp
import pytest

import mxnet as mx
from mxnet import np

import d2lbert
from d2lbert.data import DownloadError
from d2lbert.data.vocab import SPECIAL_TOKENS
from d2lbert.interop import book
from d2lbert.interop.book import book_config, load_book_model

d2l = pytest.importorskip('d2l.mxnet')
# MXNet's own advanced indexing (in the book's MaskLM) calls a deprecated method.
pytestmark = pytest.mark.filterwarnings('ignore:ndarray.as_in_context:DeprecationWarning')

TOLERANCE = 1e-5
SMALL = dict(num_hiddens=256, ffn_num_hiddens=512, num_heads=4, num_blks=2)  # bert.small
# The book's vocabulary order (the d2l version that made bert.small): '<unk>', then the
# reserved tokens, then the words. d2lbert puts <pad> <unk> <cls> <sep> <mask> first.
BOOK_TOKENS = (['<unk>', '<pad>', '<mask>', '<cls>', '<sep>']
               + [f'word{i}' for i in range(295)])
SENTENCES = [('the river flows', 'it is wide'), ('a crane is flying', None),
             ('word7 word3 word250 qqq', 'word1')]  # qqq is unknown


def randomize(net, seed=0):
    """Every parameter random, biases and LayerNorms included; weight matrices scaled
    by 1/sqrt(fan_in) so that the outputs stay of order 1 (an absolute tolerance of
    1e-5 then means what it says in float32)."""
    rng = onp.random.default_rng(seed)
    for name, param in sorted(net.collect_params().items()):
        matrix = len(param.shape) == 2 and 'embedding' not in name
        value = rng.normal(0, 1 / onp.sqrt(param.shape[1]) if matrix else 0.2, param.shape)
        param.set_data(np.array(value + name.endswith('gamma'), dtype='float32'))


def d2l_bert(vocab_size=len(BOOK_TOKENS), seed=0, **sizes):
    """The book's `d2l.BERTModel` (d2l 1.0.3) with random weights, max_len 512."""
    net = d2l.BERTModel(vocab_size, dropout=0.1, max_len=512, **{**SMALL, **sizes})
    net.initialize(mx.init.Normal(0.02))
    one = np.ones((1, 2), dtype='int32')
    net(one, one, np.array([2.0]), one)  # the book's Dense layers infer their shapes
    randomize(net, seed)
    return net


def save_book_folder(net, folder, tokens=BOOK_TOKENS, params=None):
    """The book's files: vocab.json (the token list) and pretrained.params."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'vocab.json'), 'w') as f:
        json.dump(list(tokens), f)
    path = os.path.join(folder, 'pretrained.params')
    if params is None:
        net.save_parameters(path)
    else:
        mx.nd.save(path, params)
    return folder


def zip_folder(folder, archive):
    """bert.small.zip as the book ships it: the folder inside the zip."""
    with zipfile.ZipFile(archive, 'w') as zipped:
        for name in ('vocab.json', 'pretrained.params'):
            zipped.write(os.path.join(folder, name), f'bert.small/{name}')
    return archive


@pytest.fixture(scope='module')
def d2l_net():
    return d2l_bert()


@pytest.fixture(scope='module')
def book_zip(d2l_net, tmp_path_factory):
    root = tmp_path_factory.mktemp('book')
    folder = save_book_folder(d2l_net, str(root / 'bert.small'))
    return zip_folder(folder, str(root / 'bert.small.zip'))


def batch(vocab):
    """The sentence pairs of SENTENCES as the book encodes them, padded with '<pad>':
    (token ids by `vocab`, segments, valid_lens float32, pred_positions)."""
    rows = [d2l.get_tokens_and_segments(a.split(), b.split() if b else None)
            for a, b in SENTENCES]
    seq_len = max(len(tokens) for tokens, _ in rows)
    tokens = [vocab[t + ['<pad>'] * (seq_len - len(t))] for t, _ in rows]
    segments = [s + [0] * (seq_len - len(s)) for _, s in rows]
    valid_lens = [len(t) for t, _ in rows]
    positions = [[1, 2], [1, 3], [2, 4]]
    return (np.array(tokens, dtype='int32'), np.array(segments, dtype='int32'),
            np.array(valid_lens, dtype='float32'), np.array(positions, dtype='int32'))


def book_vocab():
    vocab = d2l.Vocab()  # as the book's load_pretrained_model builds it
    vocab.idx_to_token = list(BOOK_TOKENS)
    vocab.token_to_idx = {token: i for i, token in enumerate(BOOK_TOKENS)}
    return vocab


def max_differences(d2l_net, net, vocab):
    """Max |d2lbert - d2l| of the encoder, the NSP logits and the MLM logits (d2lbert's
    column of each token against d2l's column of the same token)."""
    encoded, mlm, nsp = d2l_net(*batch(book_vocab()))
    tokens, segments, valid_lens, positions = batch(vocab)
    ours = net(tokens, segments, valid_lens.astype('int32'), positions)
    book_ids = [BOOK_TOKENS.index(token) for token in vocab.idx_to_token]
    return {'encoder': abs(ours[0] - encoded).max().item(),
            'nsp': abs(ours[2] - nsp).max().item(),
            'mlm': abs(ours[1].asnumpy() - mlm.asnumpy()[:, :, book_ids]).max()}


def test_book_zip_computes_what_d2l_computes(d2l_net, book_zip):
    net, vocab, config = load_book_model(book_zip)
    assert (config.num_hiddens, config.ffn_num_hiddens, config.num_heads, config.num_layers,
            config.max_len, config.hidden_act, config.dropout) == (256, 512, 4, 2, 512,
                                                                   'relu', 0.1)
    assert net.missing_heads == []
    assert vocab.idx_to_token[:5] == list(SPECIAL_TOKENS) and len(vocab) == len(BOOK_TOKENS)
    assert vocab.idx_to_token[5:] == BOOK_TOKENS[5:]  # the words keep the book's order
    differences = max_differences(d2l_net, net, vocab)
    print('max |d2lbert - d2l 1.0.3|:', {k: f'{v:.1e}' for k, v in differences.items()})
    assert all(value < TOLERANCE for value in differences.values()), differences


def test_load_pretrained_reads_the_unzipped_folder(d2l_net, book_zip, tmp_path):
    with zipfile.ZipFile(book_zip) as zipped:
        zipped.extractall(tmp_path)
    net, vocab = d2lbert.load_pretrained(str(tmp_path / 'bert.small'))  # hybridized
    assert max(max_differences(d2l_net, net, vocab).values()) < TOLERANCE
    encoded = d2lbert.get_bert_encoding(net, vocab, ['word1', 'word2'], ['word3'])
    assert encoded.shape == (1, 6, 256)


def test_parameters_without_pretraining_heads(d2l_net, tmp_path):
    d2l_net.save_parameters(str(tmp_path / 'all.params'))
    encoder_only = {name: value for name, value in mx.nd.load(str(tmp_path / 'all.params')).items()
                    if name.startswith('encoder.')}
    folder = save_book_folder(d2l_net, str(tmp_path / 'encoder'), params=encoder_only)
    with pytest.warns(UserWarning, match="'pooler', 'mlm', 'nsp'"):
        net, vocab, _ = load_book_model(folder)
    assert net.missing_heads == ['pooler', 'mlm', 'nsp']
    assert max_differences(d2l_net, net, vocab)['encoder'] < TOLERANCE


def test_bert_base_sizes_are_read_off_the_shapes():
    """bert.base's shapes, without its 110M parameters (broadcast views of one zero)."""
    shapes = {'encoder.token_embedding.weight': (60005, 768),
              'encoder.pos_embedding': (1, 512, 768),
              **{f'encoder.blks.{i}.ffn.dense1.weight': (3072, 768) for i in range(12)}}
    params = {name: onp.broadcast_to(onp.float32(0), shape) for name, shape in shapes.items()}
    config = book_config(params, 'bert.base')
    assert (config.vocab_size, config.num_hiddens, config.ffn_num_hiddens, config.num_heads,
            config.num_layers, config.max_len) == (60005, 768, 3072, 12, 12, 512)
    assert book_config(params, 'bert.base', num_heads=8).num_heads == 8
    params['encoder.token_embedding.weight'] = onp.broadcast_to(onp.float32(0), (9, 100))
    with pytest.raises(ValueError, match='pass num_heads'):
        book_config(params, 'odd')


def test_the_book_addresses_and_checksums():
    assert book.DATA_URL == d2l.DATA_URL
    assert book.BOOK_MODELS == {
        'bert.small': ('bert.small.zip', 'a4e718a47137ccd1809c9107ab4f5edd317bae2c'),
        'bert.base': ('bert.base.zip', '7b3820b35da691042e5d34c0971ac3edbd80d3f4')}
    assert d2lbert.interop.PRETRAINED_NAMES == ('bert.small', 'bert.base')


def rewrite(folder, tokens=None, drop=None):
    """Change a saved book folder: its vocab.json, or drop one parameter."""
    if tokens is not None:
        with open(os.path.join(folder, 'vocab.json'), 'w') as f:
            json.dump(tokens, f)
    if drop is not None:
        path = os.path.join(folder, 'pretrained.params')
        params = mx.nd.load(path)
        del params[drop]
        mx.nd.save(path, params)


@pytest.mark.parametrize('tokens, drop, message', [
    (BOOK_TOKENS[:-1], None, r'vocab.json has 299 tokens, but the token embedding of .* '
                             r'has 300 rows'),
    (['<oov>'] + BOOK_TOKENS[1:], None, r"lacks the special token\(s\) \['<unk>'\]"),
    (BOOK_TOKENS[:-1] + ['word0'], None, 'lists a token twice'),
    ({'<unk>': 0}, None, 'JSON list of tokens'),
    (None, 'encoder.blks.1.ffn.dense2.bias', "lacks the parameter 'encoder.blks.1.ffn.dense2"),
    (None, 'mlm.mlp.2.bias', "lacks the parameter 'mlm.mlp.2.bias'"),
])
def test_bad_book_files_are_named(d2l_net, tmp_path, tokens, drop, message):
    folder = save_book_folder(d2l_net, str(tmp_path / 'bad'))
    rewrite(folder, tokens, drop)
    with pytest.raises(ValueError, match=message):
        load_book_model(folder)


def test_a_file_that_is_not_a_parameter_file(d2l_net, tmp_path):
    folder = save_book_folder(d2l_net, str(tmp_path / 'bad'))
    with open(os.path.join(folder, 'pretrained.params'), 'wb') as f:
        f.write(b'not parameters')
    with pytest.raises(ValueError, match='pretrained.params is not an MXNet parameter file'):
        load_book_model(folder)


def test_load_pretrained_names_what_it_expected(book_zip, tmp_path):
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'empty' / 'notes.txt').write_text('hello')
    with pytest.raises(ValueError, match=r'empty is not a pretrained model: expected .*'
                                         r'config.json, model.safetensors, vocab.txt.*'
                                         r"vocab.json, pretrained.params.*'bert.small'"):
        d2lbert.load_pretrained(str(tmp_path / 'empty'))
    with pytest.raises(FileNotFoundError, match=r"no pretrained model at 'bert.tiny'"):
        d2lbert.load_pretrained('bert.tiny')
    with zipfile.ZipFile(str(tmp_path / 'other.zip'), 'w') as zipped:
        zipped.writestr('bert.small/vocab.json', '[]')
    with pytest.raises(ValueError, match='other.zip is not a pretrained model'):
        d2lbert.load_pretrained(str(tmp_path / 'other.zip'))
    with pytest.raises(ValueError, match=r"does not contain \['pretrained.params'\]"):
        load_book_model(str(tmp_path / 'other.zip'))


# Downloading by name, from a server on 127.0.0.1 (as tests/test_data_download.py).

class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        """No access log on stderr."""


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Serve tmp_path/'served' on 127.0.0.1 as the book models' URL; yields the folder.
    D2LBERT_HOME is tmp_path/'home'."""
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))
    served = tmp_path / 'served'
    served.mkdir()
    handler = functools.partial(QuietHandler, directory=str(served))
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(book.URL_VARIABLE, f'http://127.0.0.1:{httpd.server_port}/')
    yield served
    httpd.shutdown()
    httpd.server_close()


def serve(book_zip, served):
    """Put the test's bert.small.zip on the server; returns its SHA-1."""
    with open(book_zip, 'rb') as f:
        data = f.read()
    (served / 'bert.small.zip').write_bytes(data)
    return hashlib.sha1(data).hexdigest()


def test_download_by_name_is_checked_cached_and_then_offline(d2l_net, book_zip, server,
                                                              tmp_path, monkeypatch):
    sha1 = serve(book_zip, server)
    monkeypatch.setitem(book.BOOK_MODELS, 'bert.small', ('bert.small.zip', sha1))
    net, vocab = d2lbert.load_pretrained('bert.small')
    assert max(max_differences(d2l_net, net, vocab).values()) < TOLERANCE
    assert sorted(os.listdir(tmp_path / 'home')) == ['bert.small']  # nothing half-written
    assert sorted(os.listdir(tmp_path / 'home' / 'bert.small')) == ['pretrained.params',
                                                                    'vocab.json']
    (server / 'bert.small.zip').unlink()
    net, vocab = d2lbert.load_pretrained('bert.small')  # from the cache, no network
    assert max(max_differences(d2l_net, net, vocab).values()) < TOLERANCE


def test_a_file_with_another_sha1_is_refused(book_zip, server, tmp_path):
    serve(book_zip, server)  # not the book's real bert.small.zip
    with pytest.raises(DownloadError, match='SHA-1.*a4e718a47137ccd1809c9107ab4f5edd317bae2c'):
        d2lbert.load_pretrained('bert.small')
    assert os.listdir(tmp_path / 'home') == []


def test_offline_errors_say_how_to_pass_a_local_copy(server, tmp_path, monkeypatch):
    with pytest.raises(DownloadError, match='404') as error:
        d2lbert.load_pretrained('bert.base')
    assert "instead of 'bert.base' (--model /path/to/bert.base.zip" in str(error.value)
    assert 'http://d2l-data.s3-accelerate.amazonaws.com/bert.base.zip' in str(error.value)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(book.URL_VARIABLE, f'http://127.0.0.1:{port}/')
    with pytest.raises(DownloadError, match='(?s)refused.*If you are offline.*--model'):
        d2lbert.load_pretrained('bert.small')
    assert os.listdir(tmp_path / 'home') == []
