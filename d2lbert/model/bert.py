"""`BERTModel`: the encoder and both pretraining heads, composed, and their losses."""
from mxnet import np, npx
from mxnet.gluon import nn

from ..util import checks
from ..util.numpy_mode import numpy_mode_block
from .config import BERTConfig
from .encoder import BERTEncoder
from .heads import MaskLMDecoder, NextSentenceClassifier


@numpy_mode_block
class BERTWithHeads(nn.HybridBlock):
    """`BERTEncoder` with the masked-LM and the next-sentence heads: the network of
    `BERTModel`. tie_decoder=True: the masked-LM head scores with the token embedding."""
    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int,
                 num_heads: int, num_blks: int, dropout: float, max_len: int = 1000,
                 tie_decoder: bool = False, **options):
        super().__init__(prefix=options.pop('prefix', None), params=options.pop('params', None))
        self.config = BERTConfig(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                                 dropout, max_len=max_len, tie_decoder=tie_decoder, **options)
        with self.name_scope():
            self.encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                                       num_blks, dropout, max_len, **options)
            tied_weight = self.encoder.token_embedding.weight if tie_decoder else None
            self.mlm = MaskLMDecoder(vocab_size, num_hiddens,
                                     hidden_act=options.get('hidden_act', 'relu'),
                                     layer_norm_eps=options.get('layer_norm_eps', 1e-5),
                                     tied_weight=tied_weight)
            self.nsp = NextSentenceClassifier(num_hiddens)

    def __call__(self, tokens, segments, valid_lens=None, pred_positions=None):
        if checks.is_symbol(tokens):
            return super().__call__(tokens, segments, valid_lens, pred_positions)
        valid_lens = self.encoder.check_inputs(tokens, segments, valid_lens)
        if pred_positions is None:
            # Without masked-LM targets the graph differs: run the (hybridized) children.
            encoded = self.encoder(tokens, segments, valid_lens)
            return encoded, None, self.nsp(encoded[:, 0, :])
        checks.check_pred_positions(pred_positions, *tokens.shape)
        return super().__call__(tokens, segments, valid_lens, pred_positions)

    def hybrid_forward(self, F, tokens, segments, valid_lens, pred_positions):
        encoded = self.encoder(tokens, segments, valid_lens)
        return encoded, self.mlm(encoded, pred_positions), self.nsp(encoded[:, 0, :])

    def pooled_output(self, encoded):
        """The pooled `<cls>` vector that `BERTClassifier` reads (Hugging Face's
        `pooler_output`): (batch_size, seq_len, num_hiddens) -> (batch_size, num_hiddens)."""
        return self.nsp.pooler(encoded[:, 0, :])


@numpy_mode_block
class BERTModel(BERTWithHeads):
    """BERT for pretraining: the encoder, the masked-LM head and the next-sentence head.

    forward(tokens, segments, valid_lens=None, pred_positions=None) returns
    `(encoded, mlm_logits, nsp_logits)`, in the d2l book's order:
      tokens, segments: (batch_size, seq_len) ids; valid_lens: (batch_size,) or None
      pred_positions: (batch_size, num_preds), the positions to predict, or None
      encoded: (batch_size, seq_len, num_hiddens), the sequence output
      mlm_logits: (batch_size, num_preds, vocab_size), or None without pred_positions
      nsp_logits: (batch_size, 2)
    `net.config` is the model's `BERTConfig`; `pooled_output(encoded)` is the pooled `<cls>`
    vector that the task heads read.

        net = BERTModel.from_config(BERTConfig.d2l(vocab_size=10000))
        net.initialize()
        encoded, mlm_logits, nsp_logits = net(tokens, segments, valid_lens, positions)
    """
    @classmethod
    def from_config(cls, config):
        """Build the model a `BERTConfig` (or a dict of its fields) describes."""
        if isinstance(config, dict):
            config = BERTConfig.from_dict(config)
        options = config.to_dict()
        positional = [options.pop(name) for name in (
            'vocab_size', 'num_hiddens', 'ffn_num_hiddens', 'num_heads', 'num_layers',
            'dropout', 'max_len')]
        return cls(*positional, **options)

    def pretraining_loss(self, tokens, segments, valid_lens, pred_positions, mlm_weights,
                         mlm_labels, nsp_labels, with_accuracy=False):
        """(mlm_loss, nsp_loss) of one batch: the cross-entropy averaged over the real
        prediction slots (mlm_weights 1; 0 at padding), and over the sentence pairs;
        with_accuracy=True appends (mlm_accuracy, nsp_accuracy), averaged the same way."""
        checks.check_pretraining_targets(pred_positions, mlm_weights, mlm_labels,
                                         nsp_labels, *tokens.shape, self.mlm.vocab_size)
        _, mlm_logits, nsp_logits = self(tokens, segments, valid_lens, pred_positions)
        mlm_loss = weighted_mean(cross_entropy(mlm_logits, mlm_labels), mlm_weights)
        nsp_loss = cross_entropy(nsp_logits, nsp_labels).mean()
        if not with_accuracy:
            return mlm_loss, nsp_loss
        return (mlm_loss, nsp_loss, weighted_mean(correct(mlm_logits, mlm_labels), mlm_weights),
                correct(nsp_logits, nsp_labels).mean())


def cross_entropy(logits, labels):
    """-log softmax(logits)[label], elementwise: (..., num_classes), (...) -> (...)."""
    return -npx.pick(npx.log_softmax(logits), labels.astype('int32'))


def correct(logits, labels):
    """1.0 where the largest logit is the label's, else 0.0: (...)."""
    return (np.argmax(logits, axis=-1).astype('int32') == labels.astype('int32')).astype(
        'float32')


def weighted_mean(values, weights):
    """sum(values * weights) / sum(weights): the mean over the real prediction slots."""
    return (values * weights).sum() / (weights.sum() + 1e-8)
