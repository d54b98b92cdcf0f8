"""How much of a text a model's vocabulary knows: the share of its tokens that are the
unknown token (`<unk>`, `[UNK]`). A model learns nothing from a token it cannot see:
a word vocabulary learned from WikiText-2 leaves a quarter of GLUE SST-2's tokens
unknown. The commands that bring a model's vocabulary to new text (`pretrain --model`,
`finetune`) print it, in one line (`unknown_line`).
"""
import numpy as np

CHUNK = 1 << 22  # token ids compared at a time: memory stays bounded for any corpus


def unknown_share(token_ids, vocab):
    """The share of token_ids (an int array, or memory-mapped: a corpus of any size)
    that are vocab's unknown token, its <cls>, <sep> and <pad> ids left out."""
    unknown = counted = 0
    for start in range(0, len(token_ids), CHUNK):
        ids = np.asarray(token_ids[start:start + CHUNK])
        ids = ids[~np.isin(ids, [vocab.cls_id, vocab.sep_id, vocab.pad_id])]
        unknown += int(np.count_nonzero(ids == vocab.unk_id))
        counted += len(ids)
    return unknown / max(counted, 1)


def unknown_line(model, text, share):
    """'--model M: its vocabulary leaves 2.5% of the tokens of --data F unknown'."""
    return (f'--model {model}: its vocabulary leaves {share:.1%} of the tokens of {text} '
            'unknown')
