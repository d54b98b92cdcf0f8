"""The fine-tuning benchmark's model size and the sentence pairs every implementation
trains on.

A `FinetuneConfig` fixes a BERT size and a batch shape; 'bert.small' is the book's
pretrained `bert.small` (hidden 256, FFN 512, 4 heads, 2 layers, 512 positions) as its
NLI chapter fine-tunes it on SNLI, with BERT's WordPiece vocabulary size (the size of
the book's own vocabulary file is not known offline; it changes only the embedding's
share of the update, the same for every implementation).

`snli_like_pairs(config, num_pairs)` draws the pairs with NumPy from a fixed seed, so
each implementation (each in its own process) sees exactly the same token ids:

* premise and hypothesis lengths in words drawn like SNLI's: a gamma distribution with
  the means the SNLI paper reports (14.1 and 8.3 tokens) and a long right tail, so a
  pair is typically ~25 tokens of the 128 the book pads to;
* the pair cut longest first to `max_len` (`truncate_pair`, the book's rule) and laid
  out as `<cls> premise <sep> hypothesis <sep>` with segments 0 then 1;
* labels 0, 1, 2 (entailment, contradiction, neutral) at random.

Each implementation batches and pads them its own way (its `host_batches`): the book
in order, every pair padded to `max_len` (`padded_like_the_book`, as its
`SNLIBERTDataset`); transformers in order, each batch padded to its longest pair
(`padded_to_longest`, as its `DataCollatorWithPadding`); d2lbert as `d2lbert
finetune` batches them.
"""
import dataclasses

import numpy as onp

from ..data.tasks import EncodedExample, make_task_batch, truncate_pair
from .configs import named_config

# SNLI 1.0 (Bowman et al., 2015, table 1): mean tokens per premise and hypothesis.
PREMISE_MEAN, HYPOTHESIS_MEAN = 14.1, 8.3
# Spread (standard deviation) of the drawn lengths: premises vary more than hypotheses.
PREMISE_STD, HYPOTHESIS_STD = 6.0, 3.2
PAD_ID, CLS_ID, SEP_ID, FIRST_WORD_ID = 0, 2, 3, 5   # d2lbert's `Vocab` layout
NUM_LABELS = 3


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """One fine-tuning benchmark size: the model, the longest input and the batch."""
    name: str
    vocab_size: int
    num_hiddens: int
    ffn_num_hiddens: int
    num_heads: int
    num_layers: int
    max_len: int          # the longest pair, in tokens; the book pads every pair to it
    batch_size: int
    num_positions: int    # the model's position embeddings (its BERTConfig.max_len)
    dropout: float = 0.1

    def to_dict(self):
        return dataclasses.asdict(self)


FINETUNE_CONFIGS = {
    # The book's NLI chapter: bert.small, max_len 128; batch 64.
    'bert.small': FinetuneConfig('bert.small', vocab_size=30522, num_hiddens=256,
                                 ffn_num_hiddens=512, num_heads=4, num_layers=2,
                                 max_len=128, batch_size=64, num_positions=512),
    # Tiny, for the test suite (`--quick`): checks the harness, not the speed.
    'quick': FinetuneConfig('quick', vocab_size=200, num_hiddens=32, ffn_num_hiddens=64,
                            num_heads=2, num_layers=2, max_len=64, batch_size=8,
                            num_positions=64),
}


def get_finetune_config(name):
    return named_config(FINETUNE_CONFIGS, name, 'fine-tuning benchmark')


def snli_like_lengths(rng, mean, std, size):
    """`size` word counts (>= 1) from a gamma distribution of that mean and spread."""
    shape, scale = (mean / std) ** 2, std ** 2 / mean
    return onp.maximum(onp.rint(rng.gamma(shape, scale, size=size)), 1).astype(int)


def sentence_pair(premise_ids, hypothesis_ids, max_len, label):
    """`<cls> premise <sep> hypothesis <sep>`, cut longest first to max_len tokens."""
    premise_ids, hypothesis_ids = truncate_pair(premise_ids, hypothesis_ids, max_len - 3)
    token_ids = [CLS_ID, *premise_ids, SEP_ID, *hypothesis_ids, SEP_ID]
    segments = [0] * (len(premise_ids) + 2) + [1] * (len(hypothesis_ids) + 1)
    return EncodedExample(token_ids, segments, label)


def snli_like_pairs(config, num_pairs, seed=0):
    """`num_pairs` encoded sentence pairs (`EncodedExample`), identical for a given
    (config, num_pairs, seed) in every process."""
    rng = onp.random.default_rng(seed)
    premises = snli_like_lengths(rng, PREMISE_MEAN, PREMISE_STD, num_pairs)
    hypotheses = snli_like_lengths(rng, HYPOTHESIS_MEAN, HYPOTHESIS_STD, num_pairs)
    labels = rng.integers(0, NUM_LABELS, size=num_pairs)
    return [sentence_pair(rng.integers(FIRST_WORD_ID, config.vocab_size, p).tolist(),
                          rng.integers(FIRST_WORD_ID, config.vocab_size, h).tolist(),
                          config.max_len, int(label))
            for p, h, label in zip(premises, hypotheses, labels)]


def in_order(pairs, batch_size):
    """The pairs cut into lists of batch_size, in their order (the last may be shorter)."""
    return [pairs[i:i + batch_size] for i in range(0, len(pairs), batch_size)]


def padded_to_longest(pairs):
    """A `TaskBatch` padded to its longest pair (`DataCollatorWithPadding`)."""
    return make_task_batch(pairs, PAD_ID)


def padded_like_the_book(pairs, max_len):
    """A `TaskBatch` padded to max_len, as the book's `SNLIBERTDataset` pads every pair."""
    return make_task_batch(pairs, PAD_ID, seq_len=max_len)


def benchmark_pairs(config, steps, warmup, seed=0):
    """(warmup pairs, timed pairs): `warmup` batches' worth for the untimed steps and
    `steps` batches' worth for the timed ones, drawn apart, so that every
    implementation times exactly the same pairs whichever way it batches them."""
    return (snli_like_pairs(config, warmup * config.batch_size, seed + 1),
            snli_like_pairs(config, steps * config.batch_size, seed))
