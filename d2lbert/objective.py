"""`PretrainingObjective`: a `BERTModel`'s two pretraining losses as one graph."""
import weakref

from mxnet.gluon import nn

from .heads import gather_positions
from .mlm_loss import masked_lm_loss


class PretrainingObjective(nn.HybridBlock):
    """Encoder, both heads and both losses of a `BERTModel`, in one hybridizable block.

    forward(tokens, segments, valid_lens, pred_positions, mlm_weights, mlm_labels,
            nsp_labels) returns (mlm_loss, nsp_loss), scalars, followed by
    (mlm_accuracy, nsp_accuracy) if with_accuracy.
      tokens, segments: (batch_size, seq_len); valid_lens, nsp_labels: (batch_size,)
      pred_positions, mlm_weights, mlm_labels: (batch_size, num_preds)

    It shares the model's parameters and is not one of its children (the model keeps
    it, `BERTModel.pretraining_loss` calls it). Hybridized, the losses are part of
    the graph, so MXNet plans their memory once instead of allocating (and the kernel
    zeroing) hundreds of megabytes of logits every step. `with_gradient=True`
    computes the masked-LM gradient in the forward pass (see `mlm_loss.py`), for
    training; with_accuracy adds an argmax over all logits, so training asks for it
    only on the steps it logs.
    """
    def __init__(self, model, with_gradient=True, with_accuracy=False):
        super().__init__(prefix=model.prefix + 'objective_')
        self._model = weakref.ref(model)  # the model owns this block, not the reverse
        self.params.update(model.collect_params())
        self.output_weight = model.mlm.output_weight
        self.output_bias = model.mlm.output_bias
        self.with_gradient, self.with_accuracy = with_gradient, with_accuracy

    def hybrid_forward(self, F, tokens, segments, valid_lens, pred_positions, mlm_weights,
                       mlm_labels, nsp_labels, output_weight, output_bias):
        model = self._model()
        encoded = model.encoder(tokens, segments, valid_lens)
        nsp_logits = model.nsp(encoded)
        hidden = model.mlm.transform(gather_positions(encoded, pred_positions))
        hidden = F.npx.reshape(hidden, (-5, -2))  # (batch_size * num_preds, num_hiddens)
        mlm_labels = mlm_labels.reshape(-1).astype('int32')
        mlm_weights = mlm_weights.reshape(-1)
        mlm_loss, probs = masked_lm_loss(F, hidden, output_weight, output_bias, mlm_labels,
                                         mlm_weights, model.mlm.vocab_size,
                                         self.with_gradient)
        nsp_labels = nsp_labels.astype('int32')
        nsp_loss = -F.npx.pick(F.npx.log_softmax(nsp_logits), nsp_labels).mean()
        if not self.with_accuracy:
            return mlm_loss, nsp_loss
        mlm_correct = F.np.argmax(probs, axis=-1).astype('int32') == mlm_labels
        mlm_accuracy = (mlm_correct * mlm_weights).sum() / (mlm_weights.sum() + 1e-8)
        nsp_accuracy = (F.np.argmax(nsp_logits, axis=-1).astype('int32') == nsp_labels).mean()
        return mlm_loss, nsp_loss, mlm_accuracy, nsp_accuracy


class ObjectiveCache:
    """A model's `PretrainingObjective` blocks by (with_gradient, with_accuracy).

    A plain object rather than a dict attribute, where Gluon would warn about
    unregistered blocks; they are deliberately not the model's children.
    """
    def __init__(self):
        self.blocks = {}
