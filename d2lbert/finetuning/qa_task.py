"""The data of a question-answering fine-tuning run (``--task squad2`` or ``squad1``):
SQuAD files -> windows -> training batches, and the dev set scored with the official
SQuAD metric. The task object's interface is described in `labelled_task`.

* **Files**: --data and --dev are SQuAD JSON files, or the names of SQuAD's own files
  ('train-v2.0.json', ...), downloaded once; without --data, the task's training and
  dev files are downloaded (`tasks.TASKS`: `task_readers.SquadFiles`). With a local --data and no
  --dev there is no dev set.
* **Training** runs on the windows of the questions (`data.squad.windows`) in
  batches of similar lengths (`qa_training_batches`), the loss that of
  `BERTForQuestionAnswering`. An answer whose ``answer_start`` does not point at its
  text is counted and reported, and its question skipped, as the reference scripts
  do; a file where that is the case for most answers is refused (its offsets are
  not SQuAD's character offsets). ``squad1`` refuses files with unanswerable
  questions (SQuAD 1.1 has none; its model can't answer ''): use ``squad2``.
* **Evaluation** answers every dev question with its best span and scores them with
  the null odds at threshold 0 (a question whose odds exceed 0 counts as answered
  ''): ``exact``, ``f1``, ``HasAns_*``, ``NoAns_*``, and ``best_exact``, ``best_f1``
  with their thresholds (SQuAD 1.1: ``exact`` and ``f1`` of the spans).
* **The best model** is the one with the best ``best_f1`` (SQuAD 1.1: ``f1``), and
  it is saved with ``best_f1_thresh`` as its null threshold (SQuAD 1.1: 0): its
  predictions on the dev set then score exactly ``best_f1``, so the model is chosen
  by the score it is used at (the threshold is tuned on the dev set, as Google's
  BERT and Hugging Face's recipes do, so it is slightly optimistic).
"""
import dataclasses

from mxnet import init
from tqdm import tqdm

from ..data.squad import make_windows, qa_training_batches, read_squad, squad_path
from ..run.errors import RunError
from .qa_predict import allows_null, window_logits
from .qa_predictions import NULL_THRESHOLD, best_answers
from .squad_metric import gold_answers, squad_evaluate
from .task_model import TaskInfo


class QuestionAnsweringTask:
    """SQuAD's training windows and the dev questions with their windows (or None).

    train: a list of labelled ``QAWindow``; dev: a list of ``SquadExample``;
    dev_windows: their ``QAWindow`` s without labels.
    """

    def __init__(self, info, train, dev, dev_windows, pad_id, progress=False):
        self.info, self.train, self.dev, self.dev_windows = info, train, dev, dev_windows
        self.pad_id, self.progress = pad_id, progress

    def training_batches(self, batch_size, epoch, seed, start=0):
        return qa_training_batches(self.train, batch_size, epoch, seed, self.info.max_len,
                                   self.pad_id, start)

    def initialize_output(self, net, ctxs):
        net.output.initialize(init.Normal(0.02), ctx=ctxs)

    def evaluate(self, net, ctx):
        """The official scores of the dev set (see the module doc), without the
        question counts; None without a dev set."""
        if self.dev is None:
            return None
        starts, ends = window_logits(net, self.dev_windows, ctx, self.pad_id,
                                     self.info.max_len, progress=self.progress)
        spans, null_odds = best_answers(self.dev, self.dev_windows, starts, ends,
                                        allow_null=False)
        scores = squad_evaluate(gold_answers(self.dev), spans,
                                null_odds if allows_null(self.info) else None,
                                null_odds_threshold=NULL_THRESHOLD)
        return {name: value for name, value in scores.items() if not name.endswith('total')}

    def model_info(self, scores):
        """The run's info with the null threshold of these dev scores."""
        threshold = NULL_THRESHOLD
        if scores is not None and allows_null(self.info):
            threshold = scores['best_f1_thresh']
        return dataclasses.replace(self.info, null_threshold=threshold)


def read_qa_task(task, options, vocab):
    """The `QuestionAnsweringTask` of task (a `tasks.Task`) and `FinetuneOptions` (task,
    data, dev, max_len, doc_stride, max_query_len, progress), its windows made with
    vocab."""
    files = task.reader
    train = read_squad_flag('--data', options.data or files.train_file, files)
    dev = None
    if options.dev is not None or options.data is None:
        dev = read_squad_flag('--dev', options.dev or files.dev_file, files).examples
    info = TaskInfo(options.task, task.head, None, options.max_len, 0.0,
                    task.metrics_of(None), options.doc_stride,
                    options.max_query_len)
    windows = windows_of(training_questions(train), vocab, options, 'training')
    dev_windows = None if dev is None else windows_of(dev, vocab, options, 'dev', False)
    return QuestionAnsweringTask(info, windows, dev, dev_windows, vocab.pad_id,
                                 options.progress)


def windows_of(examples, vocab, options, split, with_labels=True):
    """`make_windows` with the options' sizes, showing progress."""
    examples = tqdm(examples, desc=f'{split} windows', leave=False, unit='question',
                    disable=not options.progress)
    return make_windows(examples, vocab, options.max_len, options.doc_stride,
                        options.max_query_len, with_labels)


def read_squad_flag(name, data, files):
    """The `SquadData` of --data or --dev (a file, or a SQuAD file name to download);
    a task without unanswerable questions (`task_readers.SquadFiles`, squad1) refuses
    them."""
    try:
        squad = read_squad(squad_path(data))
    except FileNotFoundError as error:
        raise RunError(f'{name} {error}') from None
    unanswerable = sum(example.is_impossible for example in squad.examples)
    if not files.unanswerable and unanswerable:
        raise RunError(f'{name} {squad.source}: {unanswerable} unanswerable questions; '
                       'SQuAD 1.1 has none (a squad1 model always answers): use '
                       '--task squad2')
    return squad


def training_questions(squad):
    """The questions to train on: the unanswerable ones, and those whose first answer
    is where answer_start says (the others are reported by `read_squad`); a file
    where most answerable questions are not is refused."""
    questions = squad.training_examples()
    answerable = sum(not example.is_impossible for example in squad.examples)
    skipped = len(squad.examples) - len(questions)
    if 2 * skipped > answerable:
        raise RunError(f'--data {squad.source}: {skipped} of its {answerable} '
                       'answerable questions have no answer to train on (no '
                       '"answers", or an answer_start that does not point at the '
                       "answer's text: are they character offsets into the "
                       'context?)')
    return questions
