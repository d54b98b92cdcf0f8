"""A fine-tuned model: the pretrained encoder with a task head, and what it was
trained for, in one folder that `d2lbert predict` (and `load_task_model`) reads::

    FOLDER/  config.json   the encoder's BERTConfig
             vocab.json    the vocabulary (or vocab.txt + tokenizer_config.json)
             task.json     `TaskInfo`: task, head, labels, max_len, dropout, metrics
                           (question answering: also doc_stride, max_query_len and
                           the null threshold)
             model.params  the parameters of the task model (encoder and head)
             manifest.json every file's size and SHA-1 (see `checkpoint`)
"""
import dataclasses
import json
import os
from typing import Optional, Tuple

import mxnet as mx

from ..model import (BERTClassifier, BERTForQuestionAnswering, BERTModel, BERTTagger,
                     MeanPooledClassifier)
from ..run import checkpoint as ckpt
from .tasks import DEFAULT_TASKS

TASK_FILE = 'task.json'
POOLINGS = ('cls', 'mean')  # TaskInfo.pooling: BERTClassifier, MeanPooledClassifier


@dataclasses.dataclass
class TaskInfo:
    """What a task model was trained for.

    task: the task's name (a key of `tasks.TASKS`).
    head: 'classifier' (a class or, without labels, a number per text or pair),
        'tagger' (a tag per word) or 'question_answering' (an answer span).
    labels: the class names or tags in id order; None for regression and question
        answering.
    max_len: the longest input, in tokens, it was trained on (question answering:
        a window's).
    dropout: the head's dropout.
    metrics: the task's metrics, the first one chosen the best checkpoint.
    doc_stride, max_query_len: question answering's windows (see
        ``data.squad.windows``); None for the other heads.
    null_threshold: question answering: answer '' when the null odds exceed it
        (``qa_predictions.best_answers``); the model folder holds the threshold
        chosen on the dev set, None (meaning 0) elsewhere.
    pooling: what a classifier reads: 'cls' (`BERTClassifier`, `<cls>`'s encoding)
        or 'mean' (`MeanPooledClassifier`, the mean of the tokens'); the other heads
        and the task.json of older runs: 'cls'.
    """
    task: str
    head: str
    labels: Optional[Tuple[str, ...]]
    max_len: int
    dropout: float = 0.1
    metrics: Tuple[str, ...] = ('accuracy',)
    doc_stride: Optional[int] = None
    max_query_len: Optional[int] = None
    null_threshold: Optional[float] = None
    pooling: str = 'cls'

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        values = dict(values)
        for name in ('labels', 'metrics'):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls(**values)


def build_task_model(bert, info):
    """The task model of `info.head` on top of `bert` (a `BERTModel`), sharing its
    encoder (and pooler); the new output layer is not initialized."""
    if info.head == 'classifier':
        classifier = MeanPooledClassifier if info.pooling == 'mean' else BERTClassifier
        return classifier(bert, len(info.labels) if info.labels else 1, info.dropout)
    if info.head == 'tagger':
        return BERTTagger(bert, len(info.labels), info.dropout)
    if info.head == 'question_answering':
        return BERTForQuestionAnswering(bert)
    raise ValueError(f'unknown task head {info.head!r} (classifier, tagger or '
                     'question_answering)')


HEADS = {BERTClassifier: 'classifier', MeanPooledClassifier: 'classifier',
         BERTTagger: 'tagger', BERTForQuestionAnswering: 'question_answering'}


def task_info_of(net, labels=None, task=None):
    """The `TaskInfo` of a task model built in Python (a `BERTClassifier`,
    `MeanPooledClassifier`, `BERTTagger` or `BERTForQuestionAnswering`), for saving it.

    labels: the class names or tags in id order (default '0', '1', ...; a classifier
        of one output is a regression); task: a key of `tasks.TASKS` whose files
        `d2lbert predict` will read (default: `DEFAULT_TASKS` of the head).
    """
    head = HEADS.get(type(net))
    if head is None:
        raise ValueError(f'{type(net).__name__} is not a task model: expected one of '
                         f'{sorted(cls.__name__ for cls in HEADS)}')
    num_outputs = {'classifier': getattr(net, 'num_classes', None),
                   'tagger': getattr(net, 'num_tags', None)}.get(head)
    if labels is None and num_outputs and num_outputs > 1:
        labels = [str(i) for i in range(num_outputs)]
    if labels is not None and len(labels) != num_outputs:
        raise ValueError(f'labels names {len(labels)} classes, the model has {num_outputs}')
    return TaskInfo(task=task or DEFAULT_TASKS[head], head=head,
                    labels=None if labels is None else tuple(labels),
                    max_len=net.config.max_len, dropout=getattr(net, 'dropout_rate', 0.1),
                    pooling='mean' if isinstance(net, MeanPooledClassifier) else 'cls')


def save_task_model(folder, net, config, vocab, info):
    """Write (or atomically replace) the task model folder."""
    return ckpt.save_model_folder(folder, net, config, vocab, {TASK_FILE: info.to_dict()})


def is_task_model(folder):
    return os.path.isfile(os.path.join(folder, TASK_FILE))


def read_task_info(folder):
    with open(os.path.join(folder, TASK_FILE), encoding='utf-8') as f:
        return TaskInfo.from_dict(json.load(f))


def load_task_info(folder):
    """The `TaskInfo` of a task model folder; a CheckpointError if it is none."""
    if not is_task_model(folder):
        raise ckpt.CheckpointError(f'{folder} is not a fine-tuned model folder (it has no '
                                   f'{TASK_FILE}; `d2lbert finetune --out` writes one in '
                                   'OUT/model)')
    return read_task_info(folder)


def load_task_model(folder, ctx=None):
    """(net, config, vocab, info) of a task model folder (or of a fine-tuning checkpoint),
    every file checked against its manifest; net on ctx (default CPU), not hybridized."""
    info = load_task_info(folder)
    ckpt.verify_checkpoint(folder)
    config, vocab = ckpt.read_config_and_vocab(folder)
    net = build_task_model(BERTModel.from_config(config), info)
    ckpt.load_parameters(net, folder, ctx or mx.cpu())
    return net, config, vocab, info
