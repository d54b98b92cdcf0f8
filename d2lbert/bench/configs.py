"""The model sizes the benchmark runs, and the random batch every implementation sees.

A `BenchConfig` fixes a BERT size (the book's d2l architecture: ReLU, dropout 0.2) and
a batch shape. `random_batch(config)` draws one batch with NumPy from a fixed seed, so
each implementation (each in its own process) trains on exactly the same arrays:

* valid lengths uniform in [seq_len / 2, seq_len]; the rest is padding (id 0);
* segments: 0 for the first half of the valid tokens, 1 for the second, 0 on padding;
* `num_preds` prediction positions per sequence, distinct, inside the valid length and
  never position 0 (<cls>); **all slots are real** (mlm_weights 1), the worst case for
  the masked-LM head (the book pads to round(0.15 * max_len) slots and fills ~15% of
  the valid tokens);
* next-sentence labels 0/1 at random.
"""
import dataclasses

import numpy as onp


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One benchmark size: the model and the batch shape."""
    name: str
    vocab_size: int
    num_hiddens: int
    ffn_num_hiddens: int
    num_heads: int
    num_layers: int
    seq_len: int
    batch_size: int
    num_preds: int
    dropout: float = 0.2

    def to_dict(self):
        return dataclasses.asdict(self)


CONFIGS = {
    # The book's pretraining run (d2l 15.10): WikiText-2, batch 512, max_len 64.
    'book': BenchConfig('book', vocab_size=20256, num_hiddens=128, ffn_num_hiddens=256,
                        num_heads=2, num_layers=2, seq_len=64, batch_size=512,
                        num_preds=10),
    # A BERT-small-sized model with BERT's WordPiece vocabulary size.
    'small': BenchConfig('small', vocab_size=30522, num_hiddens=256, ffn_num_hiddens=1024,
                         num_heads=4, num_layers=4, seq_len=128, batch_size=64,
                         num_preds=20),
    # Tiny, for the test suite (`--quick`): checks the harness, not the speed.
    'quick': BenchConfig('quick', vocab_size=200, num_hiddens=32, ffn_num_hiddens=64,
                         num_heads=2, num_layers=2, seq_len=16, batch_size=8, num_preds=3),
}


def get_config(name):
    return named_config(CONFIGS, name, 'benchmark')


def named_config(table, name, kind):
    """table[name], or a ValueError naming the unknown `kind` config and the known ones."""
    if name not in table:
        raise ValueError(f'unknown {kind} config {name!r}; known: {sorted(table)}')
    return table[name]


def random_batch(config, seed=0):
    """The 7 host arrays of one pretraining batch, as a dict of NumPy arrays (int32,
    mlm_weights float32), identical for a given (config, seed) in every process."""
    rng = onp.random.default_rng(seed)
    batch, seq, preds = config.batch_size, config.seq_len, config.num_preds
    valid_lens = rng.integers(max(seq // 2, preds + 1), seq + 1, size=batch)
    tokens = onp.zeros((batch, seq), dtype='int32')
    segments = onp.zeros((batch, seq), dtype='int32')
    pred_positions = onp.zeros((batch, preds), dtype='int32')
    for i, length in enumerate(valid_lens):
        tokens[i, :length] = rng.integers(5, config.vocab_size, size=length)
        segments[i, length // 2:length] = 1
        pred_positions[i] = onp.sort(rng.choice(onp.arange(1, length), preds, replace=False))
    return dict(
        tokens=tokens, segments=segments, valid_lens=valid_lens.astype('int32'),
        pred_positions=pred_positions,
        mlm_weights=onp.ones((batch, preds), dtype='float32'),
        mlm_labels=rng.integers(5, config.vocab_size, size=(batch, preds)).astype('int32'),
        nsp_labels=rng.integers(0, 2, size=batch).astype('int32'))
