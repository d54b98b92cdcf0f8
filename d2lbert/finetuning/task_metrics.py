"""The scores fine-tuning tasks are judged by (pure NumPy).

Each metric takes ``(labels, predictions)``, the true values first as in
scikit-learn, and returns a float::

    accuracy          share of exact matches
    f1                F1 of the positive class 1 (MRPC, QQP)
    mcc               Matthews correlation coefficient (CoLA)
    pearson           Pearson correlation of scores (STS-B)
    spearman          Spearman rank correlation, ties get average ranks
    entity_precision  entity-level scores of IOB-tagged sentences (CoNLL
    entity_recall     2003), counted as the CoNLL ``conlleval`` script does
    entity_f1

:data:`METRICS` names them; which ones a task reports (GLUE's choice, the first
one being its main score) is in :data:`d2lbert.finetuning.tasks.TASKS`.

**Entities.** A tagged sentence (list of IOB tags, see
:mod:`d2lbert.data.tasks.iob`) contains *chunks*: an entity of type X
starts at ``B-X``, or at an ``I-X`` after ``O`` or after a tag of another
type (so IOB1 and IOB2 tags give the same chunks); it goes on while ``I-X``
follow. A predicted entity counts as correct only if a true entity has the
same type, start and end.

Undefined values follow scikit-learn and SciPy: precision, recall, F1 and
the Matthews correlation are 0 when their denominator is 0 (e.g. nothing
predicted positive); a correlation with a constant input is NaN.
"""
import numpy as np

from ..data.tasks.iob import split_tag

def paired_arrays(labels, predictions, min_size=1):
    """``labels`` and ``predictions`` as 1-D arrays of one length, at least
    ``min_size``."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim != 1 or labels.shape != predictions.shape:
        raise ValueError(f'labels and predictions must be 1-D and of one '
                         f'length, got shapes {labels.shape} and '
                         f'{predictions.shape}')
    if len(labels) < min_size:
        raise ValueError(f'need at least {min_size} labels, got {len(labels)}')
    return labels, predictions


def ratio(numerator, denominator):
    """numerator / denominator, or 0.0 when the denominator is 0."""
    return float(numerator / denominator) if denominator else 0.0


def accuracy(labels, predictions):
    """The share of predictions equal to the labels."""
    labels, predictions = paired_arrays(labels, predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1):
    """F1 score of the class ``positive``: 2 TP / (2 TP + FP + FN)."""
    labels, predictions = paired_arrays(labels, predictions)
    true_positives = np.sum((labels == positive) & (predictions == positive))
    return ratio(2 * true_positives,
                 np.sum(labels == positive) + np.sum(predictions == positive))


def mcc(labels, predictions):
    """Matthews correlation coefficient, for any number of classes.

    From the confusion matrix C (C[i, j]: label i predicted as j) with s
    examples, c correct, t = label counts, p = prediction counts:
    ``(c s - t.p) / sqrt((s^2 - p.p) (s^2 - t.t))``; for two classes this is
    the usual ``(TP TN - FP FN) / sqrt(...)``.
    """
    labels, predictions = paired_arrays(labels, predictions)
    classes, indices = np.unique(np.concatenate([labels, predictions]),
                                 return_inverse=True)
    label_ids, prediction_ids = np.split(indices, 2)
    confusion = np.zeros((len(classes), len(classes)))
    np.add.at(confusion, (label_ids, prediction_ids), 1)
    label_counts, prediction_counts = confusion.sum(1), confusion.sum(0)
    num, correct = confusion.sum(), np.trace(confusion)
    covariance = correct * num - label_counts @ prediction_counts
    scale = np.sqrt((num ** 2 - prediction_counts @ prediction_counts)
                    * (num ** 2 - label_counts @ label_counts))
    return ratio(covariance, scale)


def pearson(labels, predictions):
    """Pearson correlation coefficient; NaN if an input is constant."""
    x, y = paired_arrays(labels, predictions, min_size=2)
    x = x - x.mean()
    y = y - y.mean()
    scale = np.sqrt(np.sum(x * x) * np.sum(y * y))
    if scale == 0:
        return float('nan')
    return float(np.clip(np.sum(x * y) / scale, -1.0, 1.0))


def average_ranks(values):
    """Ranks 1..n of ``values``; equal values share the average of their
    ranks: [10, 20, 20, 5] -> [2, 3.5, 3.5, 1]."""
    values = np.asarray(values)
    order = np.argsort(values, kind='stable')
    sorted_values = values[order]
    starts_group = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    group = np.cumsum(starts_group) - 1
    starts = np.flatnonzero(starts_group)
    ends = np.r_[starts[1:], len(values)]  # one past each group's end
    ranks = np.empty(len(values))
    ranks[order] = ((starts + 1 + ends) / 2)[group]
    return ranks


def spearman(labels, predictions):
    """Spearman rank correlation: the Pearson correlation of the average
    ranks; NaN if an input is constant."""
    labels, predictions = paired_arrays(labels, predictions, min_size=2)
    return pearson(average_ranks(labels), average_ranks(predictions))


def entity_chunks(tags):
    """The entities ``(type, start, end)`` (end excluded) of one sentence's
    IOB1 or IOB2 tags (see the module doc).

    >>> entity_chunks(['B-PER', 'I-PER', 'O', 'I-LOC', 'B-LOC', 'I-ORG'])
    [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
    """
    chunks = []
    previous_type = ''  # '' for O and before the first word
    for position, tag in enumerate(tags):
        prefix, entity_type = split_tag(tag)
        if prefix == 'B' or (prefix == 'I' and entity_type != previous_type):
            chunks.append([entity_type, position, position + 1])
        elif prefix == 'I':
            chunks[-1][2] = position + 1
        previous_type = entity_type
    return [tuple(chunk) for chunk in chunks]


def entity_counts(true_sentences, predicted_sentences):
    """``(correct, predicted, true)`` numbers of entities over all
    sentences (lists of IOB tags)."""
    if len(true_sentences) != len(predicted_sentences):
        raise ValueError(f'{len(true_sentences)} true but '
                         f'{len(predicted_sentences)} predicted sentences')
    correct = predicted = true = 0
    for index, (true_tags, predicted_tags) in enumerate(
            zip(true_sentences, predicted_sentences)):
        if len(true_tags) != len(predicted_tags):
            raise ValueError(f'sentence {index} has {len(true_tags)} true '
                             f'but {len(predicted_tags)} predicted tags')
        true_chunks = set(entity_chunks(true_tags))
        predicted_chunks = set(entity_chunks(predicted_tags))
        correct += len(true_chunks & predicted_chunks)
        predicted += len(predicted_chunks)
        true += len(true_chunks)
    return correct, predicted, true


def entity_precision(true_sentences, predicted_sentences):
    """Share of the predicted entities that are correct."""
    correct, predicted, _ = entity_counts(true_sentences, predicted_sentences)
    return ratio(correct, predicted)


def entity_recall(true_sentences, predicted_sentences):
    """Share of the true entities that are predicted."""
    correct, _, true = entity_counts(true_sentences, predicted_sentences)
    return ratio(correct, true)


def entity_f1(true_sentences, predicted_sentences):
    """Harmonic mean of entity precision and recall: 2 C / (P + T)."""
    correct, predicted, true = entity_counts(true_sentences,
                                             predicted_sentences)
    return ratio(2 * correct, predicted + true)


METRICS = {metric.__name__: metric for metric in (
    accuracy, f1, mcc, pearson, spearman, entity_precision, entity_recall,
    entity_f1)}

