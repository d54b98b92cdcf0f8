"""d2lbert <-> Hugging Face BERT checkpoints: same numbers as `transformers`, both ways.

Every model here is randomly initialized and saved to tmp_path: no download.
"""
import json
import os

import numpy as onp
import pytest

transformers = pytest.importorskip('transformers')
torch = pytest.importorskip('torch')
safetensors_numpy = pytest.importorskip('safetensors.numpy')

import mxnet as mx  # noqa: E402
from mxnet import np  # noqa: E402

from d2lbert import BERTConfig, BERTModel  # noqa: E402
from d2lbert.data import Vocab  # noqa: E402
from d2lbert.interop import (convert_from_hf, convert_to_hf, from_huggingface,  # noqa: E402
                             load_model_dir, to_huggingface)

TOLERANCE = 1e-4
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=40)
TOKENS = (['[PAD]', '[unused0]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
          + [f'word{i}' for i in range(100)] + [f'##p{i}' for i in range(14)])  # 120


def random_hf_model(seed=0, **overrides):
    """A small `BertForPreTraining` with every parameter random (LayerNorms and biases
    included, so that a parameter copied to the wrong place cannot go unnoticed)."""
    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=len(TOKENS), **{**SIZES, **overrides})
    model = transformers.BertForPreTraining(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.3)
    return model


def save_hf(model, directory, tokens=TOKENS):
    model.save_pretrained(directory)
    with open(os.path.join(directory, 'vocab.txt'), 'w', encoding='utf-8') as f:
        f.writelines(token + '\n' for token in tokens)
    return directory


@pytest.fixture(scope='module')
def hf_model():
    return random_hf_model()


@pytest.fixture()
def hf_dir(hf_model, tmp_path):
    return save_hf(hf_model, str(tmp_path / 'hf'))


def padded_batch(vocab_size, seed=0):
    """Three examples of two segments each, padded to 9 tokens: numpy arrays
    tokens, segments (3, 9), valid_lens (3,)."""
    rng = onp.random.RandomState(seed)
    valid_lens = onp.array([9, 6, 4])
    tokens = rng.randint(6, vocab_size, size=(3, 9))
    positions = onp.arange(9)
    segments = (positions >= onp.array([[5], [3], [2]])).astype('int64')
    is_valid = positions < valid_lens[:, None]
    return tokens * is_valid, segments * is_valid, valid_lens


def hf_outputs(model, tokens, segments, valid_lens):
    """(sequence output, pooled output, MLM logits, NSP logits) of transformers."""
    inputs = dict(input_ids=torch.tensor(tokens), token_type_ids=torch.tensor(segments),
                  attention_mask=torch.tensor(onp.arange(tokens.shape[1]) < valid_lens[:, None],
                                              dtype=torch.long))
    with torch.no_grad():
        base = model.bert(**inputs)
        heads = model(**inputs)
    return [x.numpy() for x in (base.last_hidden_state, base.pooler_output,
                                heads.prediction_logits, heads.seq_relationship_logits)]


def d2lbert_outputs(net, tokens, segments, valid_lens):
    """The same four outputs of a d2lbert `BERTModel` (MLM logits at every position)."""
    batch_size, seq_len = tokens.shape
    all_positions = np.array(onp.tile(onp.arange(seq_len), (batch_size, 1)))
    encoded, mlm_logits, nsp_logits = net(np.array(tokens), np.array(segments),
                                          np.array(valid_lens), all_positions)
    pooled = net.nsp.pooler(encoded[:, 0, :])
    return [x.asnumpy() for x in (encoded, pooled, mlm_logits, nsp_logits)]


def max_differences(ours, theirs, valid_lens):
    """Max |difference| of each output, over the valid (non-padding) positions only."""
    valid = onp.arange(ours[0].shape[1]) < valid_lens[:, None]
    return {'sequence': abs(ours[0] - theirs[0])[valid].max(),
            'pooled': abs(ours[1] - theirs[1]).max(),
            'mlm': abs(ours[2] - theirs[2])[valid].max(),
            'nsp': abs(ours[3] - theirs[3]).max()}


def assert_same_outputs(net, hf_model, vocab_size):
    batch = padded_batch(vocab_size)
    differences = max_differences(d2lbert_outputs(net, *batch), hf_outputs(hf_model, *batch),
                                  batch[2])
    print('max |d2lbert - transformers|:', {k: f'{v:.1e}' for k, v in differences.items()})
    assert all(value < TOLERANCE for value in differences.values()), differences


def test_import_computes_what_transformers_computes(hf_model, hf_dir):
    net, tokenizer, config = from_huggingface(hf_dir)
    assert net.missing_heads == []
    assert (config.num_hiddens, config.num_layers, config.max_len) == (32, 2, 40)
    assert tokenizer.idx_to_token == TOKENS and tokenizer.cls_id == 3
    assert_same_outputs(net, hf_model, len(TOKENS))


def test_import_of_a_base_model_without_heads_warns(hf_model, tmp_path):
    directory = save_hf(hf_model.bert, str(tmp_path / 'base'))  # keys without 'bert.'
    with pytest.warns(UserWarning, match="'mlm', 'nsp'"):
        net, _, _ = from_huggingface(directory)
    assert net.missing_heads == ['mlm', 'nsp']
    tokens, segments, valid_lens = padded_batch(len(TOKENS))
    ours = d2lbert_outputs(net, tokens, segments, valid_lens)
    theirs = hf_outputs(hf_model, tokens, segments, valid_lens)
    assert max_differences(ours, theirs, valid_lens)['sequence'] < TOLERANCE
    assert max_differences(ours, theirs, valid_lens)['pooled'] < TOLERANCE


@pytest.mark.parametrize('tie', [True, False])
def test_export_loads_in_transformers_with_the_same_outputs(tmp_path, tie):
    vocab = Vocab({f'word{i}': 100 - i for i in range(90)})  # d2lbert specials <pad> ...
    config = BERTConfig.original(len(vocab), size='book', num_hiddens=32, ffn_num_hiddens=64,
                                 num_heads=4, num_layers=2, max_len=40, tie_decoder=tie)
    net = BERTModel.from_config(config)
    net.initialize(mx.init.Normal(0.3))
    for param in net.collect_params().values():  # LayerNorms and biases random too
        param.set_data(np.random.normal(0, 0.3, size=param.shape))
    to_huggingface(net, config, vocab, str(tmp_path / 'out'))

    model, info = transformers.BertForPreTraining.from_pretrained(str(tmp_path / 'out'),
                                                                  output_loading_info=True)
    assert not info['missing_keys'] and not info['unexpected_keys']
    assert_same_outputs(net, model.eval(), len(vocab))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / 'out'))
    assert tokenizer.do_lower_case
    assert [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id,
            tokenizer.sep_token_id, tokenizer.mask_token_id] == [0, 1, 2, 3, 4]


def test_pickled_checkpoint_needs_allow_pickle(hf_model, hf_dir):
    torch.save(hf_model.state_dict(), os.path.join(hf_dir, 'pytorch_model.bin'))
    os.remove(os.path.join(hf_dir, 'model.safetensors'))
    with pytest.raises(ValueError, match='pytorch_model.bin.*allow_pickle=True'):
        from_huggingface(hf_dir)
    net, _, _ = from_huggingface(hf_dir, allow_pickle=True)
    assert_same_outputs(net, hf_model, len(TOKENS))


def test_convert_round_trip(hf_model, hf_dir, tmp_path):
    convert_from_hf(hf_dir, str(tmp_path / 'd2lbert'))
    assert sorted(os.listdir(tmp_path / 'd2lbert')) == [
        'config.json', 'manifest.json', 'model.params', 'tokenizer_config.json', 'vocab.txt']
    net, vocab, _ = load_model_dir(str(tmp_path / 'd2lbert'))
    assert vocab.idx_to_token == TOKENS
    assert_same_outputs(net, hf_model, len(TOKENS))
    convert_to_hf(str(tmp_path / 'd2lbert'), str(tmp_path / 'back'))
    before = safetensors_numpy.load_file(os.path.join(hf_dir, 'model.safetensors'))
    after = safetensors_numpy.load_file(str(tmp_path / 'back' / 'model.safetensors'))
    assert sorted(before) == sorted(after)
    assert all(onp.array_equal(before[name], after[name]) for name in before)


def edit_config(directory, **changes):
    path = os.path.join(directory, 'config.json')
    with open(path) as f:
        values = json.load(f)
    with open(path, 'w') as f:
        json.dump({**values, **changes}, f)


@pytest.mark.parametrize('changes, message', [
    (dict(model_type='roberta'), "model_type is 'roberta'"),
    (dict(hidden_act='relu'), "hidden_act is 'relu'"),
    (dict(is_decoder=True), 'is_decoder'),
    (dict(intermediate_size=48), r"'bert.encoder.layer.0.intermediate.dense.weight' has "
                                 r'shape \(64, 32\).*\(48, 32\)'),
    (dict(vocab_size=len(TOKENS) + 1), 'vocab.txt has 120 tokens.*vocab_size 121'),
])
def test_config_errors_name_the_problem(hf_dir, changes, message):
    edit_config(hf_dir, **changes)
    with pytest.raises(ValueError, match=message):
        from_huggingface(hf_dir)


@pytest.mark.parametrize('name', ['config.json', 'vocab.txt'])
def test_missing_file_is_named(hf_dir, name):
    os.remove(os.path.join(hf_dir, name))
    with pytest.raises(FileNotFoundError, match=name):
        from_huggingface(hf_dir)


def test_missing_weights_file_and_tensor(hf_dir):
    weights_file = os.path.join(hf_dir, 'model.safetensors')
    tensors = safetensors_numpy.load_file(weights_file)
    del tensors['bert.encoder.layer.1.output.dense.bias']
    safetensors_numpy.save_file(tensors, weights_file)
    with pytest.raises(ValueError, match="lacks the tensor 'bert.encoder.layer.1.output"):
        from_huggingface(hf_dir)
    os.remove(weights_file)
    with pytest.raises(FileNotFoundError, match='neither model.safetensors nor pytorch_model'):
        from_huggingface(hf_dir)


def test_export_refuses_what_transformers_cannot_compute(tmp_path):
    vocab = Vocab({'a': 1})
    d2l_config = BERTConfig.d2l(len(vocab))
    net = BERTModel.from_config(d2l_config)
    with pytest.raises(ValueError, match="hidden_act is 'relu'"):
        to_huggingface(net, d2l_config, vocab, str(tmp_path))
    no_norm = BERTConfig.original(len(vocab), size='book', embedding_layer_norm=False)
    with pytest.raises(ValueError, match='embedding_layer_norm'):
        to_huggingface(net, no_norm, vocab, str(tmp_path))
    config = BERTConfig.original(len(vocab) + 1, size='book')
    with pytest.raises(ValueError, match='vocabulary has 6 tokens.*vocab_size is 7'):
        to_huggingface(net, config, vocab, str(tmp_path))
    assert not os.listdir(tmp_path)


def test_export_refuses_a_net_of_another_config(tmp_path):
    vocab = Vocab({'a': 1})
    small = BERTConfig.original(len(vocab), size='book', num_layers=1)
    net = BERTModel.from_config(small)
    net.initialize()
    with pytest.raises(ValueError, match='bert.encoder.layer.1'):
        to_huggingface(net, BERTConfig.original(len(vocab), size='book'), vocab, str(tmp_path))
    wide = BERTConfig.original(len(vocab), size='book', ffn_num_hiddens=128, num_layers=1)
    with pytest.raises(ValueError, match=r'has shape \(256, 128\).*\(128, 128\)'):
        to_huggingface(net, wide, vocab, str(tmp_path))


def test_get_bert_encoding_with_the_imported_tokenizer(hf_model, hf_dir):
    from d2lbert.interop import get_bert_encoding
    net, tokenizer, _ = from_huggingface(hf_dir)
    text_a, text_b = 'word1 Word22word7, word99', 'word3 ##p4 unknown'
    encoded = get_bert_encoding(net, tokenizer, tokenizer.tokenize(text_a),
                                tokenizer.tokenize(text_b))
    inputs = transformers.BertTokenizer(os.path.join(hf_dir, 'vocab.txt'))(
        text_a, text_b, return_tensors='pt')
    with torch.no_grad():
        expected = hf_model.bert(**inputs).last_hidden_state.numpy()
    assert encoded.shape == expected.shape
    assert abs(encoded.asnumpy() - expected).max() < TOLERANCE
