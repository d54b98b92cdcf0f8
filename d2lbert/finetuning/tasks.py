"""The fine-tuning tasks, one entry each: what `d2lbert finetune --task NAME` reads,
the head it puts on the encoder, the metrics it judges by, the options that apply and
what `d2lbert predict` writes::

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

To add a task: write its reader (a data file reader in `data.tasks`, named in
`data.tasks.load.TASK_FILES`, or a reader of `task_readers`) and add one entry to
`TASKS`. A new head is a block in `model` and a branch of `task_model.build_task_model`.
"""
import dataclasses
from typing import Optional, Tuple

from ..data.squad import MAX_LEN
from .task_readers import NamedTaskFiles, OwnTaskFile, SquadFiles

HEADS = ('classifier', 'tagger', 'question_answering')  # see `task_model`
TASK_MAX_LEN = 128  # --max-len of the tasks but SQuAD's (whose default is MAX_LEN, 384)
# the options that apply to some tasks only (`Task.options`; `FinetuneOptions`)
TASK_OPTIONS = ('dropout', 'pooling', 'label_type', 'doc_stride', 'max_query_len')
CLASSIFIER_OPTIONS = ('dropout', 'pooling')
TAGGER_OPTIONS = ('dropout',)
SQUAD_OPTIONS = ('doc_stride', 'max_query_len')  # its output layer has no dropout


@dataclasses.dataclass(frozen=True)
class Task:
    """One fine-tuning task.

    head: the task model's head (`HEADS`, `task_model.build_task_model`).
    metrics: its metrics (`task_metrics.METRICS`, `squad_metric`), the first one
        picking the best model; number_metrics: those of a file whose labels are
        numbers (regression), if they may be.
    reader: how it reads its files (`task_readers`).
    options: the options of `TASK_OPTIONS` that apply to it (the others are refused).
    max_len: the default --max-len.
    predictions: what `d2lbert predict --out` writes: a JSON lines file or a folder.
    """
    head: str
    metrics: Tuple[str, ...]
    reader: object
    options: Tuple[str, ...]
    number_metrics: Optional[Tuple[str, ...]] = None
    max_len: int = TASK_MAX_LEN
    predictions: str = 'predictions.jsonl'

    def metrics_of(self, labels):
        """The metrics of a training set with these labels (None: numbers)."""
        if labels is None and self.number_metrics is not None:
            return self.number_metrics
        return self.metrics


def glue(name, metrics=('accuracy',), dev_split='dev'):
    """A GLUE task (`data.tasks.glue`)."""
    return Task('classifier', metrics, NamedTaskFiles(name, dev_split), CLASSIFIER_OPTIONS)


def squad(train_file, dev_file, unanswerable, metrics):
    """A SQuAD task (`qa_task`): its files, and whether a question may have no answer."""
    return Task('question_answering', metrics, SquadFiles(train_file, dev_file, unanswerable),
                SQUAD_OPTIONS, max_len=MAX_LEN, predictions='predictions/')


TASKS = {
    'snli': Task('classifier', ('accuracy',), NamedTaskFiles('snli'), CLASSIFIER_OPTIONS),
    'glue/cola': glue('cola', ('mcc',)),
    'glue/sst2': glue('sst2'),
    'glue/mrpc': glue('mrpc', ('f1', 'accuracy')),  # F1 of class id 1 (label '1'), as QQP
    'glue/stsb': glue('stsb', ('pearson', 'spearman')),
    'glue/qqp': glue('qqp', ('f1', 'accuracy')),
    'glue/mnli': glue('mnli', dev_split='dev_matched'),
    'glue/qnli': glue('qnli'),
    'glue/rte': glue('rte'),
    'glue/wnli': glue('wnli'),
    'conll2003': Task('tagger', ('entity_f1', 'entity_precision', 'entity_recall'),
                      NamedTaskFiles('conll2003'), TAGGER_OPTIONS),
    'csv': Task('classifier', ('accuracy',), OwnTaskFile(),
                (*CLASSIFIER_OPTIONS, 'label_type'), number_metrics=('pearson', 'spearman')),
    'squad2': squad('train-v2.0.json', 'dev-v2.0.json', True,
                    ('best_f1', 'f1', 'exact', 'HasAns_f1', 'NoAns_f1')),
    'squad1': squad('train-v1.1.json', 'dev-v1.1.json', False, ('f1', 'exact')),
}
TASK_NAMES = tuple(TASKS)
# the task a head is saved for when its user names none (`task_model.task_info_of`): each
# reads the files of its kind (a CSV or TSV of texts, CoNLL-2003's words, SQuAD's JSON)
DEFAULT_TASKS = {'classifier': 'csv', 'tagger': 'conll2003', 'question_answering': 'squad1'}


def tasks_with(option):
    """Which tasks an option of `TASK_OPTIONS` applies to, in words: 'squad2 and
    squad1', 'every task but squad2 and squad1'."""
    names = [name for name, task in TASKS.items() if option in task.options]
    if 2 * len(names) <= len(TASKS):
        return in_words(names)
    return 'every task but ' + in_words([name for name in TASKS if name not in names])


def in_words(names):
    """['a', 'b', 'c'] -> 'a, b and c'."""
    return ' and '.join(filter(None, [', '.join(names[:-1]), names[-1]]))
