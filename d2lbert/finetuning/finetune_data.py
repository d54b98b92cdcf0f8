"""Which data a `d2lbert finetune --task NAME` run reads, and what it predicts.

    --task       head        labels                metrics (the first picks the best model)
    snli         classifier  entailment ...        accuracy
    glue/NAME    classifier  the task's (STS-B: a  GLUE's: F1 (MRPC, QQP), Matthews (CoLA),
                             number)               Pearson/Spearman (STS-B), else accuracy
    conll2003    tagger      CoNLL-2003's 9 tags   entity F1, precision, recall
    csv          classifier  the training file's   accuracy; --label-type number: Pearson,
                             (or a number)         Spearman
    squad2       question_   an answer span or     SQuAD 2.0's: best_f1 (the F1 at the
                 answering   none                  null threshold stored), f1, exact, ...
    squad1       question_   an answer span        SQuAD 1.1's: f1, exact
                 answering

--data is a folder holding the task's split files under their usual names (or, for
csv, the training file); without --data SNLI and GLUE are downloaded. The dev set
is --dev, else the task's dev split in the --data folder (if there is one).
SQuAD's --data and --dev are JSON files (`qa_task` reads them).
"""
import os

from ..data.tasks import GLUE_LAYOUTS, load_task, read_task_file
from ..data.tasks.load import read_task_split
from .task_metrics import TASK_METRICS

# SQuAD: the training and dev files downloaded when --data is not given
SQUAD_TASKS = {'squad2': ('train-v2.0.json', 'dev-v2.0.json'),
               'squad1': ('train-v1.1.json', 'dev-v1.1.json')}
SQUAD_METRICS = {'squad2': ('best_f1', 'f1', 'exact', 'HasAns_f1', 'NoAns_f1'),
                 'squad1': ('f1', 'exact')}
TASK_NAMES = ('snli', *(f'glue/{name}' for name in GLUE_LAYOUTS), 'conll2003', 'csv',
              *SQUAD_TASKS)
LABEL_TYPES = ('class', 'number')
DEV_SPLITS = {'glue/mnli': 'dev_matched'}


def data_task(task):
    """The name `data.tasks` and `task_metrics` use: 'glue/mrpc' -> 'mrpc'."""
    return task.split('/', 1)[1] if task.startswith('glue/') else task


def task_head(task):
    if task in SQUAD_TASKS:
        return 'question_answering'
    return 'tagger' if task == 'conll2003' else 'classifier'


def task_metrics(task, labels):
    """The metrics of a task (see the module doc); labels None means regression."""
    if task in SQUAD_TASKS:
        return SQUAD_METRICS[task]
    if task == 'csv':
        return ('accuracy',) if labels is not None else ('pearson', 'spearman')
    return TASK_METRICS[data_task(task)]


def read_train_split(task, data, label_type='class'):
    """The training `TaskData` of --task/--data (see the module doc)."""
    if task == 'csv':
        return read_task_file(data, label_type)
    return load_task(data_task(task), 'train', data)


def read_dev_split(task, data, dev, train_labels, label_type='class'):
    """The dev `TaskData`, or None when there is none: --dev if given, else the task's
    dev split in the --data folder."""
    if task == 'csv':
        return None if dev is None else read_task_file(dev, label_type, train_labels)
    if dev is not None:
        return read_task_split(data_task(task), dev)
    if data is not None and os.path.isfile(data):
        return None
    try:
        return load_task(data_task(task), DEV_SPLITS.get(task, 'dev'), data)
    except FileNotFoundError:
        return None


def read_task_file_of(task, path, labels, label_type='class'):
    """Any file of the task (e.g. for `d2lbert predict`), read with its reader; csv
    files take the model's labels so that class ids agree."""
    if task == 'csv':
        return read_task_file(path, label_type, labels)
    return read_task_split(data_task(task), path)
