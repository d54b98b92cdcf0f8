"""The SQuAD benchmark's model size and the windows every implementation trains on.

A SQuAD training example is a *window*: ``<cls> question <sep> part of the passage
<sep>`` (`d2lbert.data.squad.windows`). A passage longer than a window is cut into
several, each as long as the model takes (384 tokens, as `d2lbert finetune --task
squad2`, Google's BERT and Hugging Face's `run_qa.py` cut them), so here **every
window is full**: there is no padding, and the speed is the speed of 384-token steps.
A window is a (question, passage) pair, so the results use the pair line's names
(`pairs`, `pairs_per_s`; the report says windows).

The sizes are `FinetuneConfig`s (`finetune_pairs`): 'bert.small' is the book's
`bert.small` (hidden 256, FFN 512, 4 heads, 2 layers, 512 positions) with BERT's
WordPiece vocabulary, windows of 384 tokens, batch 32 (`d2lbert finetune`'s default).

`squad_like_windows(config, num_windows)` draws the windows with NumPy from a fixed
seed, so each implementation (each in its own process) sees the same token ids:

* the question's length as the pairs' sentence lengths are drawn (a gamma
  distribution, mean 12 tokens), cut to `MAX_QUERY_LEN`; the passage fills the rest;
  they only decide where segment 1 starts;
* a third of the windows (`NO_ANSWER_SHARE`: SQuAD 2.0's training set has 43,498
  unanswerable questions of 130,319) point both ends at ``<cls>`` (`NO_ANSWER`); the
  others hold an answer of 1 to 5 tokens somewhere in the passage.

Each implementation batches them its own way (its `host_batches`): d2lbert as
`d2lbert finetune --task squad2` does (`qa_training_batches`), transformers in order,
padded to the window size (`run_qa.py`'s default); all batches are 384 wide.
"""
import numpy as onp

from ..data.squad import MAX_QUERY_LEN, NO_ANSWER, QAWindow
from .configs import named_config
from .finetune_pairs import CLS_ID, FIRST_WORD_ID, SEP_ID, FinetuneConfig, snli_like_lengths

QUESTION_MEAN, QUESTION_STD = 12.0, 4.0   # tokens
NO_ANSWER_SHARE = 1 / 3
LONGEST_ANSWER = 5   # tokens

SQUAD_CONFIGS = {
    # bert.small, 384-token windows; batch 32.
    'bert.small': FinetuneConfig('bert.small', vocab_size=30522, num_hiddens=256,
                                 ffn_num_hiddens=512, num_heads=4, num_layers=2,
                                 max_len=384, batch_size=32, num_positions=512),
    # Tiny, for the test suite (`--quick`): checks the harness, not the speed.
    'quick': FinetuneConfig('quick', vocab_size=200, num_hiddens=32, ffn_num_hiddens=64,
                            num_heads=2, num_layers=2, max_len=96, batch_size=4,
                            num_positions=96),
}


def get_squad_config(name):
    return named_config(SQUAD_CONFIGS, name, 'SQuAD benchmark')


def full_window(index, question_ids, passage_ids, label):
    """The labelled `QAWindow` of a question and a passage part (the passage read as
    one character per token: training never looks at the offsets)."""
    token_ids = [CLS_ID, *question_ids, SEP_ID, *passage_ids, SEP_ID]
    segments = [0] * (len(question_ids) + 2) + [1] * (len(passage_ids) + 1)
    offsets = [(k, k + 1) for k in range(len(passage_ids))]
    return QAWindow(index, f'bench-{index}', token_ids, segments, len(question_ids) + 2,
                    offsets, label)


def squad_like_windows(config, num_windows, seed=0):
    """`num_windows` labelled `QAWindow`s of exactly `config.max_len` tokens,
    identical for a given (config, num_windows, seed) in every process."""
    rng = onp.random.default_rng(seed)
    questions = onp.minimum(snli_like_lengths(rng, QUESTION_MEAN, QUESTION_STD, num_windows),
                            MAX_QUERY_LEN)
    windows = []
    for index, question_len in enumerate(questions):
        passage_len = config.max_len - 3 - question_len
        passage_start = question_len + 2
        label = NO_ANSWER
        if rng.random() >= NO_ANSWER_SHARE:
            start = passage_start + int(rng.integers(0, passage_len))
            end = min(start + int(rng.integers(0, LONGEST_ANSWER)), config.max_len - 2)
            label = (start, end)
        windows.append(full_window(
            index, rng.integers(FIRST_WORD_ID, config.vocab_size, question_len).tolist(),
            rng.integers(FIRST_WORD_ID, config.vocab_size, passage_len).tolist(), label))
    return windows


def benchmark_windows(config, steps, warmup, seed=0):
    """(warmup windows, timed windows): `warmup` batches' worth for the untimed steps
    and `steps` batches' worth for the timed ones, drawn apart."""
    return (squad_like_windows(config, warmup * config.batch_size, seed + 1),
            squad_like_windows(config, steps * config.batch_size, seed))
