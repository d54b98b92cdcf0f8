"""The two pretraining heads on top of the encoder: masked language modeling and
next sentence prediction."""
from mxnet.gluon import nn

from ..util import checks
from ..util.numpy_mode import numpy_mode_block
from .transformer import activation


def gather_positions(X, pred_positions):
    """X (batch, seq_len, H) at pred_positions (batch, num_preds): (batch, num_preds, H)."""
    F = checks.namespace(X)
    positions = pred_positions.astype('int32')
    batch_index = F.npx.arange_like(positions, axis=0).astype('int32').reshape(-1, 1)
    batch_index = F.np.zeros_like(positions) + batch_index  # (batch_size, num_preds)
    return F.npx.gather_nd(X, F.np.stack([batch_index, positions]))


@numpy_mode_block
class MaskLMDecoder(nn.HybridBlock):
    """Masked-LM head: X (batch, seq_len, H), positions (batch, P) -> logits (batch, P, V)."""
    def __init__(self, vocab_size: int, num_hiddens: int, hidden_act: str = 'relu',
                 layer_norm_eps: float = 1e-5, tied_weight=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        with self.name_scope():
            self.transform = nn.HybridSequential()
            self.transform.add(nn.Dense(num_hiddens, flatten=False, in_units=num_hiddens),
                               activation(hidden_act),
                               nn.LayerNorm(epsilon=layer_norm_eps, in_channels=num_hiddens))
            self.output_weight = tied_weight if tied_weight is not None else self.params.get(
                'output_weight', shape=(vocab_size, num_hiddens))
            self.output_bias = self.params.get('output_bias', shape=(vocab_size,),
                                               init='zeros')

    def hybrid_forward(self, F, X, pred_positions, output_weight, output_bias):
        hidden = self.transform(gather_positions(X, pred_positions))
        return F.npx.fully_connected(hidden, output_weight, output_bias,
                                     num_hidden=self.vocab_size, flatten=False)


@numpy_mode_block
class NextSentenceClassifier(nn.HybridBlock):
    """Does B follow A? `<cls>` vectors (batch, H) -> pooler -> logits (batch, 2)."""
    def __init__(self, num_hiddens: int, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.pooler = nn.Dense(num_hiddens, activation='tanh', in_units=num_hiddens)
            self.output = nn.Dense(2, in_units=num_hiddens)

    def hybrid_forward(self, F, X):
        return self.output(self.pooler(X))


def check_mlm_inputs(decoder, X, pred_positions):
    """`MaskLMDecoder`'s check of its array inputs: one row of positions per example of X
    (batch_size, seq_len, num_hiddens), each in [0, seq_len) (with `check_values`)."""
    checks.check_pred_positions(pred_positions, X.shape[0], X.shape[1])


checks.check_before_call(MaskLMDecoder, check_mlm_inputs)
