"""A task model's predictions over a list of encoded examples, and their scores.

Predictions per head (`task_model.TaskInfo.head`):

* classifier with labels: a class id per example, and the class probabilities;
* classifier without labels (regression): the predicted number;
* tagger: a tag id per word (at each word's first piece).
"""
import numpy as onp

from ..data.tasks import IGNORE_LABEL
from ..run.inference import outputs_by_length
from .task_metrics import METRICS


def predict_encoded(net, info, encoded, ctx, pad_id, batch_size=64):
    """(predictions, probabilities) of a list of `EncodedExample`, in order.

    predictions: see the module doc; probabilities: per example the class
    probabilities (num_classes,), the tag probabilities of each word
    (num_words, num_tags), or None (regression). The examples run in batches of
    similar length (`run.inference.outputs_by_length`).
    """
    predictions, probabilities = [None] * len(encoded), [None] * len(encoded)
    for indices, logits in outputs_by_length(net, encoded, ctx, pad_id, batch_size):
        batch_probs = softmax(logits) if info.labels is not None else [None] * len(logits)
        for index, row, probs in zip(indices, logits, batch_probs):
            predictions[index], probabilities[index] = example_prediction(
                info, encoded[index], row, probs)
    return predictions, probabilities


def example_prediction(info, example, logits, probs):
    """(prediction, probabilities) of one example from its logits and their softmax
    probs: (num_classes,), or (seq_len, num_tags) for a tagger (see `predict_encoded`)."""
    if info.labels is None:
        return float(logits[0]), None
    if info.head == 'tagger':
        first_pieces = onp.array(example.label) != IGNORE_LABEL
        kept = probs[:example.valid_len][first_pieces]
        return kept.argmax(axis=-1).tolist(), kept
    return int(probs.argmax()), probs


def softmax(logits):
    """Softmax over the last axis of a host array."""
    exp = onp.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


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
