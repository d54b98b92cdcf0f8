"""One SQuAD training step of d2lbert, as `d2lbert finetune --task squad2` runs it.

The model is `BERTForQuestionAnswering(bert)` on a `BERTModel` of the benchmark's
size, set up as the sentence-pair line's classifier (`finetune_d2lbert.ready_to_train`:
the fast path, hybridized with static memory, gradients added, BERTAdam) and trained
with the same step (`finetune_d2lbert.finetune_step`: forward, the mean of the start
and end cross-entropies, backward, clipping at 1.0, update). The batches are the
fine-tuning loop's (`qa_training_batches`).
"""
from .finetune_d2lbert import d2lbert_bert, ready_to_train, training_steps


def d2lbert_question_answering(config, ctx, lr=1e-4):
    """An initialized `BERTForQuestionAnswering` of `config`'s size ready to train, and
    its trainer, set up as `d2lbert finetune --task squad2` does."""
    from ..model import BERTForQuestionAnswering
    return ready_to_train(BERTForQuestionAnswering(d2lbert_bert(config, ctx)), ctx, lr)


def host_batches(config, windows, seed=0):
    """The fine-tuning loop's batches of `windows` (one epoch)."""
    from ..data.squad import qa_training_batches
    from .finetune_pairs import PAD_ID
    return list(qa_training_batches(windows, config.batch_size, 0, seed, config.max_len,
                                    PAD_ID))


def build_step(config, batches, ctx):
    """A zero-argument function running one step on the next of `batches` (host
    `TaskBatch`es with (start, end) labels, taken in turn)."""
    return training_steps(*d2lbert_question_answering(config, ctx), batches, ctx)
