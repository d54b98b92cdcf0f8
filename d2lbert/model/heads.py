"""The two pretraining heads on top of the encoder: masked language modeling and
next sentence prediction."""
from mxnet.gluon import nn

from ..util import checks
from ..util.numpy_mode import numpy_mode_block
from .transformer import activation


def gather_positions(X, pred_positions):
    """Pick the encoded vectors at the predicted positions, for all examples in one op.

    X: (batch_size, seq_len, num_hiddens); pred_positions: (batch_size, num_preds)
    returns: (batch_size, num_preds, num_hiddens)
    """
    F = checks.namespace(X)
    positions = pred_positions.astype('int32')
    batch_index = F.npx.arange_like(positions, axis=0).astype('int32').reshape(-1, 1)
    batch_index = F.np.zeros_like(positions) + batch_index  # (batch_size, num_preds)
    return F.npx.gather_nd(X, F.np.stack([batch_index, positions]))


@numpy_mode_block
class MaskLMDecoder(nn.HybridBlock):
    """Predicts the original tokens at the masked positions.

    forward(X, pred_positions):
      X: (batch_size, seq_len, num_hiddens); pred_positions: (batch_size, num_preds)
      returns: logits (batch_size, num_preds, vocab_size)

    `transform` (Dense -> activation -> LayerNorm), then the output layer
    (`output_weight`, `output_bias`). Options: hidden_act='relu'|'gelu',
    layer_norm_eps=1e-5, and tied_weight: a Parameter of shape (vocab_size,
    num_hiddens), normally the token embedding, to use as the output weight
    (Google's BERT); the output bias is always the decoder's own.

        mlm = MaskLMDecoder(vocab_size=10000, num_hiddens=128)
        mlm.initialize()
        positions = np.array([[1, 5, 2], [6, 1, 5]])
        mlm(np.ones((2, 8, 128)), positions).shape  # (2, 3, 10000)
    """
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

    def __call__(self, X, pred_positions):
        if not checks.is_symbol(X):
            checks.check_pred_positions(pred_positions, X.shape[0], X.shape[1])
        return super().__call__(X, pred_positions)

    def hybrid_forward(self, F, X, pred_positions, output_weight, output_bias):
        hidden = self.transform(gather_positions(X, pred_positions))
        return F.npx.fully_connected(hidden, output_weight, output_bias,
                                     num_hidden=self.vocab_size, flatten=False)


@numpy_mode_block
class NextSentenceClassifier(nn.HybridBlock):
    """Is sentence B the sentence that follows A? Reads the encoded `<cls>` token.

    forward(X): X (batch_size, num_hiddens), the `<cls>` vectors -> logits (batch_size, 2)

    The pooler (Dense with tanh) is available on its own as `self.pooler`, e.g. for
    fine-tuning.

        nsp = NextSentenceClassifier(num_hiddens=128)
        nsp.initialize()
        nsp(np.ones((2, 128))).shape  # (2, 2)
    """
    def __init__(self, num_hiddens: int, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.pooler = nn.Dense(num_hiddens, activation='tanh', in_units=num_hiddens)
            self.output = nn.Dense(2, in_units=num_hiddens)

    def hybrid_forward(self, F, X):
        return self.output(self.pooler(X))
