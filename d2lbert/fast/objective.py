"""`PretrainingObjective`: a BERT model's two pretraining losses as one graph."""
import weakref

from mxnet.gluon import nn

from ..model.heads import gather_positions
from ..model.precision import compute_dtype
from ..util.numpy_mode import numpy_mode_block
from .mlm_loss import masked_lm_loss, predictions


@numpy_mode_block
class PretrainingObjective(nn.HybridBlock):
    """Encoder, both heads and both losses of a `BERTModel` in one hybridizable block,
    sharing its parameters. forward(the batch's seven arrays[, token_index, slot_index]
    if packed) returns (mlm_loss, nsp_loss), then (mlm_accuracy, nsp_accuracy) if
    with_accuracy (an argmax over all logits)."""
    def __init__(self, model, with_accuracy=False, packed=False):
        super().__init__(prefix=model.prefix + 'objective_')
        self._model = weakref.ref(model)  # the model owns this block, not the reverse
        self.params.update(model.collect_params())
        self.output_weight = model.mlm.output_weight
        self.output_bias = model.mlm.output_bias
        self.with_accuracy, self.packed = with_accuracy, packed

    def hybrid_forward(self, F, tokens, segments, valid_lens, pred_positions, mlm_weights,
                       mlm_labels, nsp_labels, token_index=None, slot_index=None,
                       output_weight=None, output_bias=None):
        model = self._model()
        mlm_labels = mlm_labels.reshape(-1).astype('int32')
        mlm_weights = mlm_weights.reshape(-1)
        if self.packed:
            encoded = model.encoder.packed(F, tokens, segments, valid_lens, token_index)
            cls, predicted = cls_and_prediction_rows(F, encoded, valid_lens, pred_positions,
                                                     slot_index)
            mlm_labels = F.np.take(mlm_labels, slot_index)
            mlm_weights = F.np.take(mlm_weights, slot_index)
        else:
            encoded = model.encoder(tokens, segments, valid_lens)
            cls, predicted = encoded[:, 0, :], gather_positions(encoded, pred_positions)
            predicted = F.npx.reshape(predicted, (-5, -2))
        nsp_logits = model.nsp(cls)
        hidden = model.mlm.transform(predicted)  # (num_slots, num_hiddens)
        mlm_loss, products = masked_lm_loss(F, hidden, output_weight, output_bias,
                                            mlm_labels, mlm_weights, model.mlm.vocab_size,
                                            compute_dtype(model.mlm))
        nsp_labels = nsp_labels.astype('int32')
        nsp_loss = -F.npx.pick(F.npx.log_softmax(nsp_logits), nsp_labels).mean()
        if not self.with_accuracy:
            return mlm_loss, nsp_loss
        mlm_correct = predictions(F, products, output_bias, model.mlm.vocab_size,
                                  compute_dtype(model.mlm)) == mlm_labels
        mlm_accuracy = (mlm_correct * mlm_weights).sum() / (mlm_weights.sum() + 1e-8)
        nsp_accuracy = (F.np.argmax(nsp_logits, axis=-1).astype('int32') == nsp_labels).mean()
        return mlm_loss, nsp_loss, mlm_accuracy, nsp_accuracy


def cls_and_prediction_rows(F, encoded, valid_lens, pred_positions, slot_index):
    """The encoded <cls> tokens (batch_size, num_hiddens) and the encoded tokens of
    the prediction slots in slot_index (num_slots, num_hiddens), from the packed rows
    (num_rows, num_hiddens)."""
    valid_lens = valid_lens.astype('int32')
    first_rows = F.np.cumsum(valid_lens) - valid_lens  # each example's <cls> row
    pred_rows = first_rows.reshape(-1, 1) + pred_positions.astype('int32')
    slot_rows = F.np.take(pred_rows.reshape(-1), slot_index)
    return F.np.take(encoded, first_rows, axis=0), F.np.take(encoded, slot_rows, axis=0)
