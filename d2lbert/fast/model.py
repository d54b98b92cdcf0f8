"""`FastBERTModel`: `BERTModel` whose pretraining loss is one fused, packed graph."""
import weakref

from ..model.bert import BERTModel
from ..util import checks
from ..util.numpy_mode import numpy_mode_block
from . import kernels
from .objective import PretrainingObjective


@numpy_mode_block
class FastBERTModel(BERTModel):
    """`BERTModel` (same parameters, same forward) whose `pretraining_loss` runs a
    `PretrainingObjective`: encoder, heads and both losses in one hybridized graph,
    the masked-LM loss fused (`mlm_loss.py`), and, given the batch's `token_index`
    and `slot_index`, the encoder on its valid tokens and the masked-LM head on its
    real prediction slots only.

    Made by `d2lbert.fast.accelerate`, which turns a `BERTModel` into one.
    """
    def pretraining_loss(self, tokens, segments, valid_lens, pred_positions, mlm_weights,
                         mlm_labels, nsp_labels, with_accuracy=False, token_index=None,
                         slot_index=None):
        """`BERTModel.pretraining_loss`, fused. token_index, slot_index: None, or the
        batch's `PretrainingBatch.token_index()` and `.slot_index()` on the batch's
        device: then the encoder skips the padding tokens and the masked-LM head the
        padding slots (on the CPU; elsewhere they are ignored)."""
        if (token_index is None) != (slot_index is None):
            raise ValueError('pretraining_loss: give token_index and slot_index together '
                             '(a packed step), or neither')
        valid_lens = self.encoder.check_inputs(tokens, segments, valid_lens)
        checks.check_pretraining_targets(pred_positions, mlm_weights, mlm_labels,
                                         nsp_labels, *tokens.shape, self.mlm.vocab_size)
        packed = token_index is not None and kernels.usable(self.encoder.token_embedding.weight)
        objective = self.objective(with_accuracy, packed)
        packing_input = [token_index, slot_index] if packed else []
        return objective(tokens, segments, valid_lens, pred_positions, mlm_weights,
                         mlm_labels, nsp_labels, *packing_input)

    def packing_inputs(self, batch):
        """The inputs `pretraining_loss` takes besides a host `PretrainingBatch`'s arrays:
        {'token_index': ..., 'slot_index': ...} (host arrays, `PretrainingBatch.token_index`
        and `.slot_index`), or {} for a batch that can't be packed (a prediction slot
        points at padding)."""
        token_index = batch.token_index()
        if token_index is None:
            return {}
        return {'token_index': token_index, 'slot_index': batch.slot_index()}

    def objective(self, with_accuracy=False, packed=False):
        """The (cached) `PretrainingObjective` of this model, hybridized like it."""
        key = (with_accuracy, packed)
        objectives = self.objectives()
        if key not in objectives:
            objectives[key] = PretrainingObjective(self, with_accuracy, packed)
            active, kwargs = getattr(self, 'hybridize_args', (False, {}))
            objectives[key].hybridize(active, **kwargs)
        return objectives[key]

    def objectives(self):
        """{(with_accuracy, packed): PretrainingObjective} of this model, created on
        first use (a copy of the model, `util.shared_blocks`, makes its own)."""
        cache = getattr(self, 'pretraining_objectives', None)
        if cache is None or cache.model() is not self:
            self.pretraining_objectives = ObjectiveCache(self)
        return self.pretraining_objectives.blocks

    def hybridize(self, active=True, **kwargs):
        """Hybridize the model and its pretraining objectives alike."""
        super().hybridize(active, **kwargs)
        self.hybridize_args = (active, kwargs)
        for objective in self.objectives().values():
            objective.hybridize(active, **kwargs)


class ObjectiveCache:
    """A model's `PretrainingObjective` blocks, in a plain object rather than a dict
    attribute, where Gluon would warn about unregistered blocks: they share the
    model's parameters and are deliberately not its children."""
    def __init__(self, model):
        self.model = weakref.ref(model)  # the model whose blocks they run
        self.blocks = {}
