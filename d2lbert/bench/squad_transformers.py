"""One SQuAD training step of Hugging Face `transformers`' `BertForQuestionAnswering`
on PyTorch's CPU build.

The model and the step are the sentence-pair line's (`finetune_transformers`: the
same sizes, ReLU, dropout 0.1; forward with the labels, backward, gradient norm
clipped at 1.0, AdamW); the head is a `Linear(hidden, 2)` on every token, its loss
the mean of the start and end cross-entropies, as d2lbert's. A batch is what
`run_qa.py` feeds its `Trainer`: windows in order, padded to the window size, int64
`input_ids`, `token_type_ids`, `attention_mask`, `start_positions` and
`end_positions`.
"""
from .finetune_transformers import bert_config, encoder_inputs, training_steps


def transformers_question_answering(config, seed=0):
    """A randomly initialized `BertForQuestionAnswering` of `config`'s size."""
    import torch
    from transformers import BertForQuestionAnswering
    torch.manual_seed(seed)
    return BertForQuestionAnswering(bert_config(config))


def collated(batch):
    """The model's input tensors of a host `TaskBatch` with (start, end) labels."""
    import torch
    labels = torch.tensor(batch.labels, dtype=torch.long)
    return {**encoder_inputs(batch), 'start_positions': labels[:, 0],
            'end_positions': labels[:, 1]}


def host_batches(config, windows):
    """transformers' batches of `windows`: in order, padded to the window size."""
    from ..data.squad import qa_batch
    from .finetune_pairs import PAD_ID, in_order
    return [qa_batch(chunk, PAD_ID, config.max_len)
            for chunk in in_order(windows, config.batch_size)]


def build_step(config, batches, lr=1e-4):
    """A zero-argument function running one step on the next of `batches`."""
    return training_steps(transformers_question_answering(config), collated, batches, lr)
