"""`d2lbert fill-mask`: what a masked language model predicts for the [MASK] slots of
your text, to see what pretraining taught it.

    the capital of france is [MASK] .
 -> {"text": "the capital of france is [MASK] .",
     "predictions": [[{"token": "paris", "score": 0.41}, ... --top-k of them]]}

one list per [MASK], in order. Each line of --data is one text holding one or more
[MASK] (blank lines are skipped); the text around them is split into tokens by the
model's own tokenizer (`data.tasks.tokenizer_for`), and `<cls> text <sep>` goes through
the model as one segment. The scores are the softmax of the masked-LM logits, the
numbers transformers' `BertForMaskedLM` computes for the converted model.
"""
import dataclasses

import numpy as onp
from mxnet import np, npx

from ..data.tasks.encoding import tokenizer_for
from ..run.options import Options, integer, option, text

MASK = '[MASK]'


@dataclasses.dataclass
class FillMaskOptions(Options):
    """The options of `d2lbert fill-mask`, each declared once (`run.options`)."""
    model: str = option(None, 'a model with a masked-LM head: a d2lbert pretraining run or '
                        'model folder, a Hugging Face BertForMaskedLM or BertForPreTraining '
                        "folder, the book's bert.small or bert.base", text(), required=True)
    data: str = option(None, 'a UTF-8 text file: one text per line, each with one or more '
                       f'{MASK}', text(), required=True)
    out: str = option(None, 'the JSON lines file to write: one line per text', text(),
                      required=True)
    top_k: int = option(5, f'predictions per {MASK}, most probable first', integer(1))
    batch_size: int = option(32, 'texts per batch', integer(1))
    overwrite: bool = option(False, 'replace the file --out if it exists (default: refuse)')


@dataclasses.dataclass
class MaskedText:
    """One line of --data: its text, the token ids of `<cls> text <sep>` and the
    positions of its [MASK] tokens among them."""
    text: str
    ids: list
    positions: list


def encode_masked(text, vocab, tokenize):
    """The `MaskedText` of text (which holds at least one [MASK])."""
    ids, positions = [vocab.cls_id], []
    for i, piece in enumerate(text.split(MASK)):
        if i:
            positions.append(len(ids))
            ids.append(vocab.mask_id)
        ids.extend(vocab[tokenize(piece)])
    return MaskedText(text, ids + [vocab.sep_id], positions)


def read_masked_texts(path, vocab, max_len):
    """The `MaskedText`s of the lines of path; a ValueError naming --data and the line
    for a line without [MASK] or longer than the model's max_len tokens."""
    tokenize = tokenizer_for(vocab)
    texts = []
    try:
        with open(path, encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip('\r\n').lstrip('\ufeff')
                if not line.strip():
                    continue
                if MASK not in line:
                    raise ValueError(f'--data {path}: line {number} holds no {MASK}')
                masked = encode_masked(line, vocab, tokenize)
                if len(masked.ids) > max_len:
                    raise ValueError(f'--data {path}: line {number} is {len(masked.ids)} '
                                     f"tokens long, more than the model's max_len {max_len}")
                texts.append(masked)
    except UnicodeDecodeError as error:
        raise ValueError(f'--data {path} is not UTF-8 text ({error.reason} at byte '
                         f'{error.start})') from None
    if not texts:
        raise ValueError(f'--data {path} holds no text (one per line, each with {MASK})')
    return texts


def mask_probabilities(net, texts, vocab):
    """The masked LM's probabilities at the [MASK]s of a batch of `MaskedText`s: a list
    (one per text) of NumPy arrays (masks of the text, vocab_size)."""
    length = max(len(t.ids) for t in texts)
    num_masks = max(len(t.positions) for t in texts)
    tokens = onp.full((len(texts), length), vocab.pad_id, dtype='int32')
    positions = onp.zeros((len(texts), num_masks), dtype='int32')
    for i, masked in enumerate(texts):
        tokens[i, :len(masked.ids)] = masked.ids
        positions[i, :len(masked.positions)] = masked.positions
    valid_lens = onp.array([len(t.ids) for t in texts], dtype='float32')
    _, logits, _ = net(np.array(tokens, dtype='int32'), np.zeros_like(np.array(tokens)),
                       np.array(valid_lens), np.array(positions, dtype='int32'))
    probabilities = npx.softmax(logits.astype('float32'), axis=-1).asnumpy()
    return [probabilities[i, :len(t.positions)] for i, t in enumerate(texts)]


def fill_mask(net, vocab, texts, top_k=5, batch_size=32):
    """The records of `MaskedText`s: {'text': ..., 'predictions': [[{'token': ...,
    'score': ...}, ... top_k, most probable first], ... one list per [MASK]]}."""
    records = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        for masked, probabilities in zip(batch, mask_probabilities(net, batch, vocab)):
            best = onp.argsort(-probabilities, axis=-1, kind='stable')[:, :top_k]
            records.append({'text': masked.text, 'predictions': [
                [{'token': vocab.idx_to_token[i], 'score': float(row[i])} for i in ids]
                for row, ids in zip(probabilities, best)]})
    return records
