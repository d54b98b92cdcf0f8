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
    """The plumbing of `BERTModel`: `from_config`, the checks of every call's inputs,
    `pooled_output`."""
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

    def pooled_output(self, encoded):
        """The pooled `<cls>` vector that `BERTClassifier` reads (Hugging Face's
        `pooler_output`): (batch_size, seq_len, num_hiddens) -> (batch_size, num_hiddens)."""
        return self.nsp.pooler(encoded[:, 0, :])

    def check_targets(self, tokens, pred_positions, mlm_weights, mlm_labels, nsp_labels):
        """Shapes (and, with `check_values`, values) of a batch's pretraining targets."""
        checks.check_pretraining_targets(pred_positions, mlm_weights, mlm_labels,
                                         nsp_labels, *tokens.shape, self.mlm.vocab_size)


@numpy_mode_block
class BERTModel(BERTWithHeads):
    """BERT for pretraining: (tokens, segments, valid_lens, pred_positions) -> encoded
    (batch, seq_len, H), mlm_logits (batch, num_preds, vocab_size) or None, nsp_logits
    (batch, 2)."""
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

    def hybrid_forward(self, F, tokens, segments, valid_lens, pred_positions):
        encoded = self.encoder(tokens, segments, valid_lens)
        return encoded, self.mlm(encoded, pred_positions), self.nsp(encoded[:, 0, :])

    def pretraining_loss(self, tokens, segments, valid_lens, pred_positions, mlm_weights,
                         mlm_labels, nsp_labels, with_accuracy=False):
        """(mlm_loss, nsp_loss) of a batch, averaged over the real prediction slots and the
        pairs; with_accuracy=True appends (mlm_accuracy, nsp_accuracy)."""
        self.check_targets(tokens, pred_positions, mlm_weights, mlm_labels, nsp_labels)
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
