"""Translate between a Hugging Face BERT `config.json` and a d2lbert `BERTConfig`.

    Hugging Face                   BERTConfig
    vocab_size                     vocab_size
    hidden_size                    num_hiddens
    intermediate_size              ffn_num_hiddens
    num_attention_heads            num_heads
    num_hidden_layers              num_layers
    max_position_embeddings        max_len
    type_vocab_size                type_vocab_size
    layer_norm_eps                 layer_norm_eps
    hidden_dropout_prob            dropout
    attention_probs_dropout_prob   attention_dropout
    tie_word_embeddings            tie_decoder
    hidden_act ('gelu')            hidden_act, with embedding_layer_norm=True
"""
from ..model import BERTConfig
from ..model.config import MAX_SIZES

# Hugging Face name -> (BERTConfig name, Hugging Face's default or None if required)
FIELDS = {
    'vocab_size': ('vocab_size', None),
    'hidden_size': ('num_hiddens', None),
    'intermediate_size': ('ffn_num_hiddens', None),
    'num_attention_heads': ('num_heads', None),
    'num_hidden_layers': ('num_layers', None),
    'max_position_embeddings': ('max_len', 512),
    'type_vocab_size': ('type_vocab_size', 2),
    'layer_norm_eps': ('layer_norm_eps', 1e-12),
    'hidden_dropout_prob': ('dropout', 0.1),
    'attention_probs_dropout_prob': ('attention_dropout', 0.1),
    'tie_word_embeddings': ('tie_decoder', True),
}


def config_from_hf(hf_config, source='config.json'):
    """A `BERTConfig.original` with the sizes of a Hugging Face BERT config (a dict).

    Raises ValueError, naming `source`, for a model that is not a BERT d2lbert can run
    exactly: another model_type, an activation other than exact GELU, relative
    position embeddings, a decoder, a missing size, or a size beyond the limits of
    `model.config.MAX_SIZES` (checked before anything is allocated).
    """
    model_type = hf_config.get('model_type', 'bert')  # very old files have none
    if model_type != 'bert':
        raise ValueError(f"{source}: model_type is {model_type!r}, not 'bert'; only BERT "
                         'checkpoints can be imported')
    if hf_config.get('hidden_act', 'gelu') != 'gelu':
        raise ValueError(f"{source}: hidden_act is {hf_config['hidden_act']!r}; d2lbert's "
                         "Google BERT uses exact GELU ('gelu') only")
    if hf_config.get('position_embedding_type', 'absolute') != 'absolute':
        raise ValueError(f"{source}: position_embedding_type is "
                         f"{hf_config['position_embedding_type']!r}; only 'absolute' "
                         'position embeddings are supported')
    if hf_config.get('is_decoder', False):
        raise ValueError(f'{source}: is_decoder is true (causal attention); d2lbert runs '
                         'BERT encoders only')
    missing = [name for name, (_, default) in FIELDS.items()
               if default is None and name not in hf_config]
    if missing:
        raise ValueError(f'{source} lacks the BERT size field(s) {missing}')
    values = {ours: hf_config.get(theirs, default)
              for theirs, (ours, default) in FIELDS.items()}
    for theirs, (ours, _) in FIELDS.items():
        limit, value = MAX_SIZES.get(ours), values[ours]
        if limit is not None and isinstance(value, int) and value > limit:
            raise ValueError(f'{source}: {theirs} is {value}, more than the limit {limit:,} '
                             '(a corrupt or mistyped file?)')
    try:
        return BERTConfig.original(**values)
    except ValueError as error:
        raise ValueError(f'{source}: {error}') from None


def check_exportable(config):
    """Raise ValueError unless Hugging Face's BERT computes exactly what `config` does."""
    if config.hidden_act != 'gelu':
        raise ValueError(f"cannot export a model whose hidden_act is {config.hidden_act!r}: "
                         "Hugging Face's BERT is built with 'gelu' (use BERTConfig.original)")
    if not config.embedding_layer_norm:
        raise ValueError('cannot export a model without embedding_layer_norm: Hugging '
                         "Face's BERT always normalizes the embeddings (use "
                         'BERTConfig.original)')


def config_to_hf(config, pad_id=0):
    """The Hugging Face `config.json` contents (a dict) for a `BERTConfig` that
    passes `check_exportable`."""
    check_exportable(config)
    values = {theirs: getattr(config, ours) for theirs, (ours, _) in FIELDS.items()}
    return {'architectures': ['BertForPreTraining'], 'model_type': 'bert',
            'hidden_act': 'gelu', 'position_embedding_type': 'absolute',
            'initializer_range': 0.02, 'pad_token_id': pad_id, **values}
