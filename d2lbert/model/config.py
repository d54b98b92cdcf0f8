"""`BERTConfig`: every hyperparameter that defines a BERT architecture, in one place."""
import dataclasses
import json

SIZES = {
    'book': dict(num_hiddens=128, ffn_num_hiddens=256, num_heads=2, num_layers=2),
    'small': dict(num_hiddens=256, ffn_num_hiddens=1024, num_heads=4, num_layers=4),
    'base': dict(num_hiddens=768, ffn_num_hiddens=3072, num_heads=12, num_layers=12),
}
# The largest value of each size: a config beyond one, or beyond MAX_PARAMETERS in all,
# is taken for a corrupt or mistyped file and refused before anything is allocated
# (BERT-large: 1,024 hidden units, 24 layers, 340 million parameters).
MAX_SIZES = dict(vocab_size=1_000_000, num_hiddens=16_384, ffn_num_hiddens=65_536,
                 num_heads=256, num_layers=256, max_len=65_536, type_vocab_size=1_024)
MAX_PARAMETERS = 2_000_000_000  # 8 GB in float32


@dataclasses.dataclass
class BERTConfig:
    """Architecture of a BERT model.

    Two architecture presets exist: `BERTConfig.d2l` (the book's BERT) and
    `BERTConfig.original` (Google's BERT). Each takes a size preset name from
    `SIZES` ('book', 'small', 'base') and keyword overrides.

    `attention_dropout` (dropout of the attention weights) follows `dropout` unless it
    is given: None, the default, becomes the value of `dropout` on construction.
    `num_layers` is the number of Transformer blocks (the blocks' `num_blks`).

        config = BERTConfig.original(vocab_size=30522, size='base')  # BERT-base
        net = BERTModel.from_config(config)
    """
    vocab_size: int
    num_hiddens: int = 128
    ffn_num_hiddens: int = 256
    num_heads: int = 2
    num_layers: int = 2
    dropout: float = 0.2
    attention_dropout: float = None
    max_len: int = 1000
    type_vocab_size: int = 2
    hidden_act: str = 'relu'
    embedding_layer_norm: bool = False
    layer_norm_eps: float = 1e-5
    tie_decoder: bool = False

    def __post_init__(self):
        if self.attention_dropout is None:
            self.attention_dropout = self.dropout
        self.validate()

    def validate(self):
        """Raise `ValueError` naming the first invalid field."""
        for name, limit in MAX_SIZES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f'BERTConfig.{name} must be a positive integer, got {value!r}')
            if value > limit:
                raise ValueError(f'BERTConfig.{name} is {value}, more than the limit '
                                 f'{limit:,}')
        if self.parameter_count() > MAX_PARAMETERS:
            raise ValueError(f'BERTConfig describes about {self.parameter_count():.2g} '
                             f'parameters (num_hiddens {self.num_hiddens}, ffn_num_hiddens '
                             f'{self.ffn_num_hiddens}, num_layers {self.num_layers}, '
                             f'vocab_size {self.vocab_size}), more than the limit '
                             f'{MAX_PARAMETERS:.0e}')
        if self.num_hiddens % self.num_heads:
            raise ValueError(f'BERTConfig.num_hiddens ({self.num_hiddens}) must be divisible '
                             f'by num_heads ({self.num_heads})')
        for name in ('dropout', 'attention_dropout'):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f'BERTConfig.{name} must be in [0, 1), got {value!r}')
        if self.hidden_act not in ('relu', 'gelu'):
            raise ValueError(f"BERTConfig.hidden_act must be 'relu' or 'gelu', "
                             f'got {self.hidden_act!r}')
        if not isinstance(self.layer_norm_eps, (int, float)) or self.layer_norm_eps <= 0:
            raise ValueError(f'BERTConfig.layer_norm_eps must be positive, '
                             f'got {self.layer_norm_eps!r}')
        for name in ('embedding_layer_norm', 'tie_decoder'):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f'BERTConfig.{name} must be True or False, '
                                 f'got {getattr(self, name)!r}')

    def parameter_count(self):
        """About how many parameters the model has (embeddings and encoder)."""
        h = self.num_hiddens
        embeddings = (self.vocab_size + self.max_len + self.type_vocab_size) * h
        return embeddings + self.num_layers * (4 * h * h + 2 * h * self.ffn_num_hiddens)

    @classmethod
    def d2l(cls, vocab_size, size='book', **overrides):
        """The book's BERT: ReLU FFN and MLM hidden layer, no embedding LayerNorm,
        learnable position embedding, untied output layer."""
        return cls._preset(vocab_size, size, overrides)

    @classmethod
    def original(cls, vocab_size, size='base', **overrides):
        """Google's BERT: exact-erf GELU, embedding LayerNorm, eps 1e-12, MLM transform
        Dense→GELU→LayerNorm, output layer tied to the token embedding (own bias)."""
        google = dict(hidden_act='gelu', embedding_layer_norm=True, layer_norm_eps=1e-12,
                      tie_decoder=True, dropout=0.1, max_len=512)
        return cls._preset(vocab_size, size, {**google, **overrides})

    @classmethod
    def _preset(cls, vocab_size, size, overrides):
        if size not in SIZES:
            raise ValueError(f'size must be one of {sorted(SIZES)}, got {size!r}')
        return cls.from_dict({'vocab_size': vocab_size, **SIZES[size], **overrides})

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f'BERTConfig got unknown field(s) {unknown}; '
                             f'known fields are {sorted(known)}')
        if 'vocab_size' not in values:
            raise ValueError('BERTConfig.vocab_size is required')
        return cls(**values)

    def to_json_file(self, path):
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(self.to_dict(), f, indent=2, sort_keys=True)
            f.write('\n')

    @classmethod
    def from_json_file(cls, path):
        with open(path, encoding='utf-8') as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(f'{path} is not a valid JSON config: {error}') from None
        if not isinstance(values, dict):
            raise ValueError(f'{path} must hold a JSON object of BERTConfig fields')
        try:
            return cls.from_dict(values)
        except (TypeError, ValueError) as error:
            raise ValueError(f'{path}: {error}') from None
