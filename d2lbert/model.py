"""`BERTModel`: the encoder and both pretraining heads, composed."""
from mxnet import autograd, np
from mxnet.gluon import nn

from . import checks, kernels, packing
from .config import BERTConfig
from .encoder import BERTEncoder
from .heads import MaskLMDecoder, NextSentenceClassifier
from .objective import ObjectiveCache, PretrainingObjective


class BERTModel(nn.HybridBlock):
    """BERT for pretraining.

    forward(tokens, segments, valid_lens=None, pred_positions=None) returns
    `(encoded, nsp_logits, mlm_logits)`:
      encoded: (batch_size, seq_len, num_hiddens), the sequence output
      nsp_logits: (batch_size, 2)
      mlm_logits: (batch_size, num_preds, vocab_size), or None without pred_positions

    Note the order: sequence output, next sentence, masked LM. The d2l 1.0 book's
    BERTModel returns (encoded_X, mlm_Y_hat, nsp_Y_hat) instead.

    Options are those of `BERTEncoder` plus tie_decoder=False (use the token
    embedding as the MLM output weight). `BERTModel.from_config(config)` builds one
    from a `BERTConfig`.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_layers,
                 dropout, max_len=1000, tie_decoder=False, **options):
        super().__init__(prefix=options.pop('prefix', None), params=options.pop('params', None))
        with self.name_scope():
            self.encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                                       num_layers, dropout, max_len, **options)
            tied_weight = self.encoder.token_embedding.weight if tie_decoder else None
            self.mlm = MaskLMDecoder(vocab_size, num_hiddens,
                                     hidden_act=options.get('hidden_act', 'relu'),
                                     layer_norm_eps=options.get('layer_norm_eps', 1e-5),
                                     tied_weight=tied_weight)
            self.nsp = NextSentenceClassifier(num_hiddens)
        self._objectives = ObjectiveCache()
        self._hybridize_args = (False, {})

    @classmethod
    def from_config(cls, config):
        """Build the model a `BERTConfig` (or a dict of its fields) describes."""
        if isinstance(config, dict):
            config = BERTConfig.from_dict(config)
        options = config.to_dict()
        positional = [options.pop(name) for name in (
            'vocab_size', 'num_hiddens', 'ffn_num_hiddens', 'num_heads', 'num_layers',
            'dropout', 'max_len')]
        net = cls(*positional, **options)
        net.config = config
        return net

    def __call__(self, tokens, segments, valid_lens=None, pred_positions=None):
        if checks.is_symbol(tokens):
            return super().__call__(tokens, segments, valid_lens, pred_positions)
        valid_lens = self.encoder.check_inputs(tokens, segments, valid_lens)
        if pred_positions is None:
            # Without masked-LM targets the graph differs: run the (hybridized) children.
            encoded = self.encoder(tokens, segments, valid_lens)
            return encoded, self.nsp(encoded), None
        checks.check_pred_positions(pred_positions, *tokens.shape)
        return super().__call__(tokens, segments, valid_lens, pred_positions)

    def hybrid_forward(self, F, tokens, segments, valid_lens, pred_positions):
        encoded = self.encoder(tokens, segments, valid_lens)
        return encoded, self.nsp(encoded), self.mlm(encoded, pred_positions)

    def hybridize(self, active=True, **kwargs):
        """Hybridize the model and its pretraining objectives alike."""
        super().hybridize(active, **kwargs)
        self._hybridize_args = (active, kwargs)
        for objective in self._objectives.blocks.values():
            objective.hybridize(active, **kwargs)

    def pretraining_loss(self, tokens, segments, valid_lens, pred_positions, mlm_weights,
                         mlm_labels, nsp_labels, with_accuracy=False):
        """The two pretraining losses of one batch, as scalars.

        tokens, segments: (batch_size, seq_len); valid_lens, nsp_labels: (batch_size,)
        pred_positions, mlm_weights, mlm_labels: (batch_size, num_preds); mlm_weights
        is 1 for a real prediction slot and 0 for padding.
        returns: (mlm_loss, nsp_loss): the cross-entropy averaged over the real
        prediction slots, and over the sentence pairs; with_accuracy=True appends
        (mlm_accuracy, nsp_accuracy), averaged the same way.

        The losses are computed by a `PretrainingObjective`, one graph with the
        model; under `autograd.record()` it computes the masked-LM gradient in the
        forward pass (`mlm_loss.py`): a book-size CPU step went from 4.6 s to 2.7 s.
        Where d2lbert's kernels run, the batch is packed: the encoder computes on
        its valid tokens only, not on the padding (`packing.py`).
        """
        valid_lens = self.encoder.check_inputs(tokens, segments, valid_lens)
        checks.check_pretraining_targets(pred_positions, mlm_weights, mlm_labels,
                                         nsp_labels, *tokens.shape,
                                         self.mlm.vocab_size)
        token_index = self._token_index(valid_lens, pred_positions, tokens.shape[1])
        objective = self.objective(autograd.is_recording(), with_accuracy,
                                   packed=token_index is not None)
        packing_input = [] if token_index is None else [token_index]
        return objective(tokens, segments, valid_lens, pred_positions, mlm_weights,
                         mlm_labels, nsp_labels, *packing_input)

    def _token_index(self, valid_lens, pred_positions, seq_len):
        """The batch's `packing.token_index`, on its context; None where d2lbert's
        kernels don't run or a prediction slot points at padding (not packable)."""
        if not kernels.usable(self.encoder.token_embedding.weight):
            return None
        lengths = valid_lens.asnumpy()
        if not packing.packable(lengths, pred_positions.asnumpy()):
            return None
        return np.array(packing.token_index(lengths, seq_len), dtype='int32',
                        ctx=valid_lens.ctx)

    def objective(self, with_gradient=True, with_accuracy=False, packed=False):
        """The (cached) `PretrainingObjective` of this model, hybridized like it."""
        key = (with_gradient, with_accuracy, packed)
        if key not in self._objectives.blocks:
            objective = PretrainingObjective(self, with_gradient, with_accuracy, packed)
            active, kwargs = self._hybridize_args
            objective.hybridize(active, **kwargs)
            self._objectives.blocks[key] = objective
        return self._objectives.blocks[key]
