"""`BERTConfig`: documented presets, exact round trips, clear errors for bad values."""
import dataclasses
import json

import pytest

import d2lbert
from d2lbert import BERTConfig

SIZES = {'book': (128, 256, 2, 2), 'small': (256, 1024, 4, 4), 'base': (768, 3072, 12, 12)}


def sizes_of(config):
    return (config.num_hiddens, config.ffn_num_hiddens, config.num_heads, config.num_layers)


@pytest.mark.parametrize('size', SIZES)
def test_d2l_presets_have_documented_values(size):
    """`BERTConfig.d2l(v, size)`: the documented sizes, and the book's architecture
    (ReLU, no embedding LayerNorm, eps 1e-5, untied decoder)."""
    config = BERTConfig.d2l(1000, size)
    assert config.vocab_size == 1000
    assert sizes_of(config) == SIZES[size]
    assert config.hidden_act == 'relu'
    assert config.embedding_layer_norm is False
    assert config.layer_norm_eps == 1e-5
    assert config.tie_decoder is False


@pytest.mark.parametrize('size', SIZES)
def test_original_presets_have_documented_values(size):
    """`BERTConfig.original(v, size)`: the documented sizes, and Google's architecture
    (exact GELU, embedding LayerNorm, eps 1e-12, decoder tied to the token embedding,
    dropout 0.1, 512 positions)."""
    config = BERTConfig.original(30522, size)
    assert sizes_of(config) == SIZES[size]
    assert config.hidden_act == 'gelu'
    assert config.embedding_layer_norm is True
    assert config.layer_norm_eps == 1e-12
    assert config.tie_decoder is True
    assert (config.dropout, config.attention_dropout, config.max_len) == (0.1, 0.1, 512)


def test_default_sizes():
    """d2l defaults to the book size, original to BERT-base."""
    assert sizes_of(BERTConfig.d2l(100)) == SIZES['book']
    assert sizes_of(BERTConfig.original(100)) == SIZES['base']


def test_presets_accept_overrides():
    """Keyword overrides win over both the size and the architecture preset."""
    config = BERTConfig.original(100, 'small', num_layers=1, hidden_act='relu', max_len=64)
    assert (config.num_layers, config.hidden_act, config.max_len) == (1, 'relu', 64)
    assert config.num_hiddens == 256 and config.embedding_layer_norm is True


def test_unknown_size_preset_is_rejected():
    with pytest.raises(ValueError, match=r"size must be one of .*'huge'"):
        BERTConfig.d2l(100, 'huge')


def test_dict_round_trip_is_exact():
    """to_dict -> from_dict gives an equal config, with every field present."""
    config = BERTConfig.original(30522, 'small', dropout=0.15)
    values = config.to_dict()
    assert set(values) == {f.name for f in dataclasses.fields(BERTConfig)}
    assert BERTConfig.from_dict(values) == config


@pytest.mark.parametrize('preset', [BERTConfig.d2l, BERTConfig.original])
def test_json_round_trip_is_exact(tmp_path, preset):
    """to_json_file -> from_json_file gives an equal config, field types included
    (1e-12 stays a float, True stays a bool), and the file is plain JSON."""
    config = preset(20000, 'small', attention_dropout=0.05)
    path = tmp_path / 'config.json'
    config.to_json_file(path)
    loaded = BERTConfig.from_json_file(path)
    assert loaded == config
    for field in dataclasses.fields(BERTConfig):
        assert type(getattr(loaded, field.name)) is type(getattr(config, field.name))
    assert json.loads(path.read_text())['vocab_size'] == 20000


def test_unknown_key_is_rejected_by_name(tmp_path):
    """A typo in a field name is an error, not silently ignored."""
    values = BERTConfig.d2l(100).to_dict()
    values['num_hidden'] = 64
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['num_hidden'\]"):
        BERTConfig.from_dict(values)
    path = tmp_path / 'config.json'
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError, match='num_hidden'):
        BERTConfig.from_json_file(path)
    with pytest.raises(ValueError, match='num_hidden'):
        BERTConfig.d2l(100, num_hidden=64)


def test_missing_vocab_size_is_rejected():
    with pytest.raises(ValueError, match='vocab_size is required'):
        BERTConfig.from_dict({'num_hiddens': 128})


def test_bad_json_files_are_rejected(tmp_path):
    """A broken file or a JSON value that is not an object gives a ValueError naming
    the file."""
    broken = tmp_path / 'broken.json'
    broken.write_text('{"vocab_size": 10,')
    with pytest.raises(ValueError, match='broken.json is not a valid JSON config'):
        BERTConfig.from_json_file(broken)
    listed = tmp_path / 'list.json'
    listed.write_text('[1, 2]')
    with pytest.raises(ValueError, match='list.json must hold a JSON object'):
        BERTConfig.from_json_file(listed)


POSITIVE_INTEGER_FIELDS = ['vocab_size', 'num_hiddens', 'ffn_num_hiddens', 'num_heads',
                           'num_layers', 'max_len', 'type_vocab_size']


@pytest.mark.parametrize('field', POSITIVE_INTEGER_FIELDS)
@pytest.mark.parametrize('value', [0, -2, 2.0, True, '8'])
def test_sizes_must_be_positive_integers(field, value):
    """Every size field rejects 0, negatives, floats, bools and strings, naming itself."""
    values = dict(BERTConfig.d2l(100).to_dict(), **{field: value})
    with pytest.raises(ValueError, match=rf'BERTConfig\.{field} must be a positive integer'):
        BERTConfig.from_dict(values)


def test_num_hiddens_must_be_divisible_by_num_heads():
    with pytest.raises(ValueError, match=r'num_hiddens \(130\) must be divisible by '
                                         r'num_heads \(4\)'):
        BERTConfig.d2l(100, num_hiddens=130, num_heads=4)


@pytest.mark.parametrize('field', ['dropout', 'attention_dropout'])
@pytest.mark.parametrize('value', [-0.1, 1.0, 1.5, '0.1', float('nan')])
def test_dropout_must_be_in_zero_one(field, value):
    with pytest.raises(ValueError, match=rf'BERTConfig\.{field} must be in \[0, 1\)'):
        BERTConfig.d2l(100, **{field: value})


def test_dropout_must_be_given():
    """None means 'same as dropout' for attention_dropout only."""
    with pytest.raises(ValueError, match=r'BERTConfig\.dropout must be in \[0, 1\)'):
        BERTConfig.d2l(100, dropout=None)


@pytest.mark.parametrize('preset', [BERTConfig.d2l, BERTConfig.original])
def test_attention_dropout_follows_dropout_unless_given(preset):
    """attention_dropout is dropout's value unless it is given (None: follow), in both
    presets and in the constructor; after construction it is a number."""
    assert preset(100, dropout=0.0).attention_dropout == 0.0
    assert preset(100, dropout=0.05).attention_dropout == 0.05
    assert BERTConfig(100, dropout=0.3).attention_dropout == 0.3
    assert BERTConfig.from_dict({'vocab_size': 100, 'dropout': 0.3}).attention_dropout == 0.3
    given = preset(100, dropout=0.0, attention_dropout=0.25)
    assert (given.dropout, given.attention_dropout) == (0.0, 0.25)
    assert preset(100, dropout=0.0, attention_dropout=None).attention_dropout == 0.0
    assert BERTConfig.from_dict(given.to_dict()) == given


def test_old_config_files_load_unchanged(tmp_path):
    """A config.json written before attention_dropout could follow dropout holds an
    explicit value: it is kept, even where it differs from dropout."""
    old = {'vocab_size': 500, 'num_hiddens': 128, 'ffn_num_hiddens': 256, 'num_heads': 2,
           'num_layers': 2, 'dropout': 0.1, 'attention_dropout': 0.2, 'max_len': 1000,
           'type_vocab_size': 2, 'hidden_act': 'relu', 'embedding_layer_norm': False,
           'layer_norm_eps': 1e-05, 'tie_decoder': False}
    path = tmp_path / 'config.json'
    path.write_text(json.dumps(old, indent=2, sort_keys=True) + '\n')
    config = BERTConfig.from_json_file(path)
    assert (config.dropout, config.attention_dropout) == (0.1, 0.2)
    assert config.to_dict() == old
    again = tmp_path / 'again.json'
    config.to_json_file(again)
    assert again.read_text() == path.read_text()


@pytest.mark.parametrize('value', ['tanh', 'GELU', None])
def test_hidden_act_must_be_relu_or_gelu(value):
    with pytest.raises(ValueError, match=r"BERTConfig\.hidden_act must be 'relu' or 'gelu'"):
        BERTConfig.d2l(100, hidden_act=value)


@pytest.mark.parametrize('value', [0, -1e-5, '1e-5'])
def test_layer_norm_eps_must_be_positive(value):
    with pytest.raises(ValueError, match=r'BERTConfig\.layer_norm_eps must be positive'):
        BERTConfig.d2l(100, layer_norm_eps=value)


@pytest.mark.parametrize('field', ['embedding_layer_norm', 'tie_decoder'])
def test_flags_must_be_booleans(field):
    with pytest.raises(ValueError, match=rf'BERTConfig\.{field} must be True or False'):
        BERTConfig.d2l(100, **{field: 1})


def test_model_from_config_builds_that_architecture():
    """`BERTModel.from_config` (from a config or from its dict) builds the layers the
    config describes and remembers the config."""
    config = BERTConfig.original(50, 'book', num_hiddens=16, ffn_num_hiddens=24,
                                 num_layers=3, max_len=20)
    for source in (config, config.to_dict()):
        net = d2lbert.BERTModel.from_config(source)
        assert net.config == config
        assert len(net.encoder.blocks) == 3
        assert net.encoder.embedding_norm is not None
        assert net.encoder.position_embedding.weight.shape == (20, 16)
        assert net.encoder.blocks[0].ffn.dense1.weight.shape == (24, 16)
        assert net.mlm.output_weight is net.encoder.token_embedding.weight
    book = d2lbert.BERTModel.from_config(BERTConfig.d2l(50, num_hiddens=16))
    assert book.encoder.embedding_norm is None
    assert book.mlm.output_weight is not book.encoder.token_embedding.weight
