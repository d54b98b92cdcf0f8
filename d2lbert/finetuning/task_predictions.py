"""A task model's predictions over a list of encoded examples, and their scores.

Predictions per head (`task_model.TaskInfo.head`):

* classifier with labels: a class id per example, and the class probabilities;
* classifier without labels (regression): the predicted number;
* tagger: a tag id per word (at each word's first piece).
"""
import numpy as onp
from mxnet import npx

from ..data.tasks import IGNORE_LABEL, make_task_batch, padded_length
from .task_metrics import METRICS
from .task_step import task_outputs


def predict_encoded(net, info, encoded, ctx, pad_id, batch_size=64):
    """(predictions, probabilities) of a list of `EncodedExample`, in order.

    predictions: see the module doc; probabilities: per example the class
    probabilities (num_classes,), the tag probabilities of each word
    (num_words, num_tags), or None (regression).
    """
    predictions, probabilities = [], []
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        batch = make_task_batch(chunk, pad_id, padded_length(chunk, info.max_len))
        batch = batch._replace(labels=None)
        logits = task_outputs(net, batch, ctx)
        if info.labels is None:
            values = logits[:, 0].asnumpy()
            predictions += values.tolist()
            probabilities += [None] * len(chunk)
            continue
        probs = npx.softmax(logits, axis=-1).asnumpy()
        for example, row in zip(chunk, probs):
            if info.head == 'tagger':
                first_pieces = onp.array(example.label) != IGNORE_LABEL
                kept = row[:example.valid_len][first_pieces]
                predictions.append(kept.argmax(axis=-1).tolist())
                probabilities.append(kept)
            else:
                predictions.append(int(row.argmax()))
                probabilities.append(row)
    return predictions, probabilities


def task_scores_of(info, task_data, encoded, predictions):
    """{metric: value} of `info.metrics` for predictions of the examples of
    `task_data` (which must have labels)."""
    if info.head == 'tagger':
        true = [example.tags for example in task_data.examples]
        predicted = [[info.labels[i] for i in ids] + ['O'] * (len(tags) - len(ids))
                     for ids, tags in zip(predictions, true)]
        return {name: METRICS[name](true, predicted) for name in info.metrics}
    true = [example.label for example in encoded]
    return {name: METRICS[name](true, predictions) for name in info.metrics}
