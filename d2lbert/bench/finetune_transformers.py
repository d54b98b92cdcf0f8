"""One fine-tuning step of Hugging Face `transformers`' `BertForSequenceClassification`
on PyTorch's CPU build.

Same sizes as the others, with the book's ReLU feed-forward activation and dropout
0.1 (the architecture keeps its own embedding LayerNorm); the attention
implementation is transformers' default (reported with the result). A batch is
padded to its longest pair, as `DataCollatorWithPadding` does: int64 `input_ids`,
`token_type_ids`, `attention_mask` (1 on real tokens) and `labels`, fresh tensors
every step. A step is what its `Trainer` does per batch: forward with the labels
(cross-entropy), backward, gradient norm clipped at 1.0, AdamW (lr 1e-4, weight
decay 0.01), gradients zeroed. PyTorch computes synchronously: no wait is needed.
The SQuAD line (`squad_transformers`) builds and steps its model with the same functions.
"""
import os

MAX_GRAD_NORM = 1.0   # `TrainingArguments.max_grad_norm`'s default


def bert_config(config, **head):
    """transformers' `BertConfig` of `config`'s size (the book's ReLU, its dropout),
    with the settings of the task head (`head`, e.g. num_labels)."""
    from transformers import BertConfig
    from .finetune_pairs import PAD_ID
    return BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.num_hiddens,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        intermediate_size=config.ffn_num_hiddens, hidden_act='relu',
        hidden_dropout_prob=config.dropout, attention_probs_dropout_prob=config.dropout,
        max_position_embeddings=config.num_positions, type_vocab_size=2,
        pad_token_id=PAD_ID, **head)


def transformers_classifier(config, seed=0):
    """A randomly initialized `BertForSequenceClassification` of `config`'s size."""
    import torch
    from transformers import BertForSequenceClassification
    from .finetune_pairs import NUM_LABELS
    torch.manual_seed(seed)
    return BertForSequenceClassification(bert_config(config, num_labels=NUM_LABELS))


def encoder_inputs(batch):
    """`input_ids`, `token_type_ids` and `attention_mask` (1 on real tokens) of a host
    `TaskBatch`, as int64 tensors."""
    import numpy as onp
    import torch
    positions = onp.arange(batch.tokens.shape[1])
    attention_mask = (positions[None, :] < batch.valid_lens[:, None]).astype('int64')
    return {'input_ids': torch.tensor(batch.tokens, dtype=torch.long),
            'token_type_ids': torch.tensor(batch.segments, dtype=torch.long),
            'attention_mask': torch.tensor(attention_mask)}


def collated(batch):
    """The tensors `DataCollatorWithPadding` makes, from a host `TaskBatch` padded to
    its longest pair."""
    import torch
    return {**encoder_inputs(batch), 'labels': torch.tensor(batch.labels, dtype=torch.long)}


def training_step(model, optimizer, inputs, precision='fp32'):
    """forward + loss + backward + clipping + AdamW update; returns the loss tensor.
    precision 'bf16': the forward pass under `torch.autocast('cpu', torch.bfloat16)`,
    PyTorch's own mixed precision (float32 weights, bf16 matrix products)."""
    import torch
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=precision == 'bf16'):
        loss = model(**inputs).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def host_batches(config, pairs):
    """transformers' batches of `pairs`: in order, each padded to its longest pair."""
    from .finetune_pairs import in_order, padded_to_longest
    return [padded_to_longest(chunk) for chunk in in_order(pairs, config.batch_size)]


def training_steps(model, collate, batches, lr=1e-4, precision='fp32'):
    """A zero-argument function running one `training_step` of `model` on the next of
    `batches` (host `TaskBatch`es, taken in turn, made tensors by `collate`), on as
    many threads as OMP_NUM_THREADS says (the benchmark sets it for every
    implementation)."""
    import itertools
    import torch
    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', torch.get_num_threads())))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    turns = itertools.cycle(batches)
    return lambda: training_step(model, optimizer, collate(next(turns)), precision)


def build_step(config, batches, lr=1e-4, precision='fp32'):
    """A zero-argument function running one classifier step on the next of `batches`."""
    return training_steps(transformers_classifier(config), collated, batches, lr, precision)


def attention_implementation():
    """Which attention transformers runs by default here ('sdpa', 'eager', ...)."""
    from transformers import BertConfig, BertModel
    tiny = BertConfig(vocab_size=8, hidden_size=4, num_hidden_layers=1,
                      num_attention_heads=1, intermediate_size=4)
    return BertModel(tiny).config._attn_implementation
