"""The data of a fine-tuning run on a labelled task (a class, a number or tags per text
or pair): what `finetune.Finetuning` trains on, and how it scores the dev set.

A task object tells the training loop everything it needs to know about the task (the
other kind is `qa_task.QuestionAnsweringTask`)::

    info                                the run's `TaskInfo`
    train                               one epoch's training items
    training_batches(batch_size, epoch, seed, start)
                                        epoch's batches from batch number start on
    initialize_output(net, ctxs)        the new output layer's first values
    evaluate(net, ctx)                  the dev scores {metric: value}; None without
                                        a dev set
    model_info(scores)                  the `TaskInfo` saved with a model of these
                                        dev scores
"""
from mxnet import init

from ..data.tasks import encode_task, training_batches
from ..run.errors import RunError
from .task_model import TaskInfo
from .task_predictions import predict_encoded, task_scores_of


class LabelledTask:
    """A labelled task's encoded training examples and its dev set (or None).

    train, encoded_dev: lists of `EncodedExample`; dev: the dev `TaskData`.
    """

    def __init__(self, info, train, dev, encoded_dev, pad_id):
        self.info, self.train, self.dev, self.encoded_dev = info, train, dev, encoded_dev
        self.pad_id = pad_id

    def training_batches(self, batch_size, epoch, seed, start=0):
        return training_batches(self.train, batch_size, epoch, seed, self.info.max_len,
                                self.pad_id, start)

    def initialize_output(self, net, ctxs):
        net.output.initialize(init.Normal(0.02), ctx=ctxs)
        if self.info.labels is None:
            start_at_mean(net.output, self.train)

    def evaluate(self, net, ctx):
        if self.dev is None:
            return None
        predictions, _ = predict_encoded(net, self.info, self.encoded_dev, ctx, self.pad_id)
        return task_scores_of(self.info, self.dev, self.encoded_dev, predictions)

    def model_info(self, scores):
        return self.info


def read_labelled_task(task, options, vocab):
    """The `LabelledTask` of task (a `tasks.Task`) and `FinetuneOptions` (task, data,
    dev, label_type, max_len, dropout, pooling), encoded with vocab."""
    train = task.reader.train(options.data, options.label_type)
    if not train.examples:
        raise RunError(f'--data {options.data}: the training set has no examples')
    check_training_labels(options, train)  # before the dev labels are checked against them
    dev = task.reader.dev(options.data, options.dev, train.labels, options.label_type)
    info = TaskInfo(options.task, task.head, train.labels, options.max_len, options.dropout,
                    task.metrics_of(train.labels),
                    pooling=options.pooling or 'cls')  # what Hugging Face's classifiers read
    encoded_dev = None if dev is None else encode_task(dev, vocab, options.max_len)
    return LabelledTask(info, encode_task(train, vocab, options.max_len), dev, encoded_dev,
                        vocab.pad_id)


def check_training_labels(options, train):
    """Every training example has a label, and a classifier's training set two classes
    or more (one output would mean regression)."""
    if any(getattr(example, 'label', True) is None for example in train.examples):
        raise RunError(f'--data {options.data}: the training set has examples without a '
                       'label (a training file needs a label column)')
    if train.labels is not None and len(train.labels) < 2:
        raise RunError(f'--data {options.data}: only one label ({", ".join(train.labels)}) '
                       'in the training set; a classifier needs two or more (a number to '
                       'predict: --label-type number)')


def start_at_mean(output, encoded_train):
    """A regression output starts at the mean training target (its bias), so training
    learns deviations from it: reaching the targets' level through tanh-saturated
    pooler units instead would flatten the predictions."""
    mean = sum(example.label for example in encoded_train) / len(encoded_train)
    output.bias.set_data(output.bias.data() * 0 + mean)
