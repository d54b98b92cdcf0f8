"""`d2lbert finetune`: train a pretrained BERT with a new head on a labelled task, with
progress, dev evaluation, the best model kept, atomic checkpoints and exact resume.

An output folder::

    OUT/model/                 the best model by the dev metric (`task_model`), which
                               `d2lbert predict` reads (without a dev set: the last)
    OUT/checkpoints/step-N/    for --resume (as pretraining's, plus task.json)
    OUT/metrics.jsonl          'train' records (loss, lr, examples/s) and 'dev' records
    OUT/loss.png               (the task's metrics, see `tasks`)

The training loop is the one pretraining runs too (`run.loop`); `Finetuning` gives it
fine-tuning's data, loss, evaluation and checkpoint state. What is task-specific
(reading the data, batches, the new layer's start, scoring the dev set) is a task
object: `labelled_task.LabelledTask` (classes, numbers, tags) or
`qa_task.QuestionAnsweringTask` (SQuAD).
"""
import dataclasses
import math
import os

import numpy as np

from ..data.coverage import unknown_line, unknown_share
from ..data.squad import DOC_STRIDE, MAX_QUERY_LEN
from ..data.tasks.custom import LABEL_TYPES
from ..run import checkpoint as ckpt
from ..run.devices import check_devices, training_contexts
from ..run.errors import RunError
from ..run.files import disk_fault
from ..run.folder import prepare_out_dir, record_run
from ..run.loop import Cadence, TrainingLoop
from ..run.schedule import Schedule
from ..run.metrics import MetricsLog
from ..run.models import random_model_like
from ..run.optimizer import load_trainer_states
from ..run.loss_scale import DynamicLossScale
from ..run.precision import check_hardware, needs_loss_scaling
from ..run.setup import prepare_training
from ..run.step import seed_step
from ..run.options import choice, fraction, integer, number, option, optional, text
from ..run.training_options import TrainingOptions
from ..util.numpy_mode import in_numpy_mode
from ..util.options import flag
from .fast_choice import load_fast_path
from .labelled_task import read_labelled_task
from .qa_task import read_qa_task
from .task_model import (POOLINGS, TASK_FILE, build_task_model, read_task_info,
                         save_task_model)
from .task_step import task_forward_backward
from .tasks import TASK_NAMES, TASK_OPTIONS, TASKS, tasks_with

# fp16 needs the dynamic loss scaling that only pretraining's loop has so far
SMALL_MODEL_LR, LARGE_MODEL_LR = 1e-4, 3e-5
SMALL_MODEL_HIDDENS = 256  # up to the book's bert.small
TASK_DROPOUT = 0.1  # --dropout of the tasks but SQuAD's (which has none)
# the defaults of the options that apply to some tasks only (`tasks.Task.options`;
# --pooling's, 'cls', is set by `labelled_task.read_labelled_task`)
TASK_OPTION_DEFAULTS = {'dropout': TASK_DROPOUT, 'label_type': 'class',
                        'doc_stride': DOC_STRIDE, 'max_query_len': MAX_QUERY_LEN}
EPOCHS = 3  # --epochs, unless a small training set needs more to make MIN_STEPS steps
MIN_STEPS = 1000
# the options --resume must not change
TRAJECTORY = ('task', 'model', 'data', 'dev', 'label_type', 'batch_size', 'max_len',
              'doc_stride', 'max_query_len', 'lr', 'optimizer', 'warmup', 'weight_decay',
              'dropout', 'clip', 'epochs', 'seed', 'from_scratch')


@dataclasses.dataclass
class FinetuneOptions(TrainingOptions):
    """Every setting of a fine-tuning run, each declared once with its flag's help and
    its check (`run.options`; those pretraining shares: `run.training_options`): the
    `d2lbert finetune` parser is generated from them.

    lr None picks the learning rate by model size: 1e-4 for models up to 256 hidden
    units (the book's NLI chapter, bert.small) and 3e-5 for larger ones (BERT-base,
    GluonNLP's and Google's recipes). warmup is the share of all steps.

    max_len None means 384 for the SQuAD tasks (one question and passage window, as
    Google's BERT, GluonNLP and Hugging Face) and 128 for the others. An option that
    concerns some tasks only is None for the others, and refused when given for them:
    doc_stride and max_query_len are the SQuAD tasks' (`data.squad.windows`), dropout
    the other tasks', label_type csv's.
    """
    defaults_shown = {'lr': '1e-4 for models up to 256 hidden units, else 3e-5',
                      'dropout': f'{TASK_DROPOUT}, before the new output layer; none for '
                                 'SQuAD, as the references',
                      'out': 'runs/finetune-TASK-DATE-TIME'}
    required_here = ('model',)
    task: str = option(None, f'one of {", ".join(TASK_NAMES)}', choice(TASK_NAMES),
                       required=True, parse=str.lower)
    data: str = option(None, "a folder with the task's files under their usual names, or "
                       'one training file (csv: required; squad2/squad1: a SQuAD JSON '
                       'file); default: download SNLI / GLUE / SQuAD', text(optional=True))
    dev: str = option(None, "the dev file (default: the task's dev file in --data; SQuAD: "
                      'downloaded when --data is not given)', text(optional=True))
    label_type: str = option(None, "csv: 'class' (label is a class name) or 'number' "
                             '(regression)', optional(choice(LABEL_TYPES)),
                             shown_default='class')
    epochs: int = option(None, f'passes over the training set (default: {EPOCHS}, or as '
                         f'many as make {MIN_STEPS:,} steps when the training set is small)',
                         optional(integer(1)))
    batch_size: int = option(32, 'examples per step', integer(1))
    max_len: int = option(None, 'longest input in tokens; longer pairs are cut longest '
                          'first; SQuAD: a question and passage window (default: 384 for '
                          'squad2/squad1, else 128)', integer(4))
    doc_stride: int = option(None, "squad2/squad1: a long passage's windows start this "
                             'many tokens apart', optional(integer(1)),
                             shown_default=DOC_STRIDE)
    max_query_len: int = option(None, 'squad2/squad1: the most question tokens (the rest is '
                                'cut off)', optional(integer(1)), shown_default=MAX_QUERY_LEN)
    warmup: float = option(0.1, 'share of the steps with linear warmup; then linear decay '
                           'to 0', fraction)
    pooling: str = option(None, "what a classifier reads of each text: 'cls' (the <cls> "
                          "token's encoding, as Hugging Face's classifiers, so the model "
                          "converts with convert --to-hf) or 'mean' (the mean of its "
                          "tokens' encodings: better from a model pretrained on little "
                          "text, but Hugging Face has no such classifier)",
                          optional(choice(POOLINGS)), shown_default='cls')
    eval_every: int = option(0, 'evaluate on dev (and checkpoint) every N steps and after '
                             'each epoch (0: after each epoch only)',
                             integer(0, note=' (0: at the end of each epoch)'))
    keep: int = option(2, 'keep the newest K checkpoints', integer(1))
    from_scratch: bool = option(False, "the architecture and vocabulary of --model with "
                                'random parameters (drawn as pretraining draws them, '
                                'seeded by --seed): the no-pretraining baseline')

    def __post_init__(self):
        if isinstance(self.task, str):  # glue/MRPC as GLUE's folders, glue/mrpc as HF's
            self.task = self.task.lower()
        if self.task in TASK_NAMES:
            self.fill_task_defaults()
        super().__post_init__()

    def fill_task_defaults(self):
        """The defaults of the options of this task (the others stay None)."""
        task = TASKS[self.task]
        if self.max_len is None:
            self.max_len = task.max_len
        for name, default in TASK_OPTION_DEFAULTS.items():
            if name in task.options and getattr(self, name) is None:
                setattr(self, name, default)

    def check_together(self):
        """--task csv needs --data; a SQuAD window must leave room for the passage; an
        option of other tasks is refused; --cpu and --gpus exclude each other."""
        check_devices(self.cpu, self.gpus)
        task = TASKS[self.task]
        for name in TASK_OPTIONS:
            if name not in task.options and getattr(self, name) is not None:
                raise ValueError(f'{flag(name)} does not apply to --task {self.task}, only '
                                 f'to {tasks_with(name)}')
        if task.reader.needs_data and self.data is None:
            raise ValueError(f'--task {self.task} needs --data, {task.reader.needs_data}')
        if 'max_query_len' in task.options and self.max_len - self.max_query_len - 3 < 1:
            raise ValueError(f'--max-query-len {self.max_query_len} leaves no room for the '
                             f'passage in --max-len {self.max_len} tokens (<cls> question '
                             '<sep> passage <sep>)')


def check_sources(options):
    """--data and --dev must exist (when given; a SQuAD task may also name a SQuAD file
    to download): checked before anything is written."""
    for name in ('data', 'dev'):
        path = getattr(options, name)
        downloadable = TASKS[options.task].reader.downloadable(path)
        if path is not None and not os.path.exists(path) and not downloadable:
            raise RunError(f'{flag(name)} {path}: no such file or folder')


def default_epochs(steps_per_epoch):
    """EPOCHS passes, or more for a small training set: with 1,000 SST-2 sentences,
    3 epochs are 96 steps of 32 and leave the model at chance; fine-tuning a small set
    for more steps is the remedy of Mosbach et al. (2021) and Zhang et al. (2021)."""
    return max(EPOCHS, math.ceil(MIN_STEPS / steps_per_epoch))


def default_lr(config):
    return SMALL_MODEL_LR if config.num_hiddens <= SMALL_MODEL_HIDDENS else LARGE_MODEL_LR


def read_task(options, vocab):
    """The task object of the run (see the module doc), its data read and encoded."""
    task = TASKS[options.task]
    read = read_qa_task if task.head == 'question_answering' else read_labelled_task
    return read(task, options, vocab)


def print_unknown_share(options, train, vocab):
    """Say how much of the training text --model's vocabulary leaves unknown
    (`data.coverage`); train: the encoded training items (with `token_ids`)."""
    ids = np.fromiter((i for item in train for i in item.token_ids), dtype=np.int64)
    text = f'--data {options.data}' if options.data else f'--task {options.task}'
    print(unknown_line(options.model, text, unknown_share(ids, vocab)), flush=True)


def resume_state(checkpoint, info, config, vocab, seed):
    """The state of the checkpoint a run resumes from, which must have been made with
    the same task settings, model and seed."""
    saved_config, saved_vocab, state = ckpt.read_checkpoint_meta(checkpoint)
    saved = read_task_info(checkpoint)
    if saved != info:
        raise RunError(f'--resume: the task settings differ from {checkpoint}/'
                       f'{TASK_FILE} (saved {saved.to_dict()}, now {info.to_dict()})')
    if saved_config != config or saved_vocab != vocab:
        raise RunError(f'--resume: --model is not the model {checkpoint} was '
                       'fine-tuned from (its config or vocabulary differ)')
    if state['seed'] != seed:
        raise RunError(f'--resume: --seed {seed} differs from the seed '
                       f'{state["seed"]} of {checkpoint}')
    return state


@in_numpy_mode  # MXNet's NumPy mode, for a caller from Python that did not switch it on
def finetune(options, pretrained):
    """Run fine-tuning of pretrained = (bert, vocab), the `BERTModel` and vocabulary that
    `d2lbert.load_pretrained(options.model)` returns; returns a summary dict (output
    folder, best dev scores)."""
    options.validate()
    check_sources(options)
    ctxs = training_contexts(options.cpu, options.gpus)
    check_hardware(options.precision, ctxs)
    bert, vocab = pretrained
    if options.from_scratch:
        bert = random_model_like(bert, options.seed)
    config = bert.config
    if options.max_len > config.max_len:
        raise RunError(f'--max-len {options.max_len} exceeds the model\'s '
                       f'{config.max_len} positions')
    task = read_task(options, vocab)
    print_unknown_share(options, task.train, vocab)
    info = task.info
    out, resumes = prepare_out_dir(
        options, 'finetune', f'finetune-{options.task.replace("/", "-")}-%Y%m%d-%H%M%S',
        {'--data': options.data, '--dev': options.dev, '--model': options.model}, TRAJECTORY)
    net = build_task_model(bert, info)
    state = {'epoch': 0, 'index': 0, 'step': 0, 'best': None, 'seed': options.seed}
    log = MetricsLog(out)
    if resumes:
        checkpoint = ckpt.find_checkpoint(out)
        state = resume_state(checkpoint, info, config, vocab, options.seed)
        net.load_parameters(os.path.join(checkpoint, 'model.params'), ctx=ctxs)
        log.truncate(state['step'])
    else:
        bert.collect_params().reset_ctx(ctxs)
        seed_step(options.seed, 0)
        task.initialize_output(net, ctxs)
    record_run(out, 'finetune', options)  # the run has started (data read, model built)
    if not resumes:
        log.truncate(0)  # empty (a --resume starting over a run killed before a checkpoint)
    lr = options.lr or default_lr(config)
    net, trainer = prepare_training(net, options.optimizer, lr, options.weight_decay,
                               options.precision, load_fast_path(options.plain))
    if resumes:
        load_trainer_states(trainer, os.path.join(checkpoint, 'trainer.states'))
    steps_per_epoch = math.ceil(len(task.train) / options.batch_size)
    total_steps = steps_per_epoch * (options.epochs or default_epochs(steps_per_epoch))
    recipe = Finetuning(options, task, net, ctxs, config, vocab, out, steps_per_epoch, state)
    loop = TrainingLoop(
        recipe, net, trainer,
        Schedule(lr, round(options.warmup * total_steps), total_steps, steps_per_epoch),
        Cadence(options.log_every, options.eval_every, options.eval_every,
                log_with_saves=False),
        out, log, options.clip, options.keep, progress=options.progress,
        loss_scale=DynamicLossScale() if needs_loss_scaling(options.precision) else None)
    try:
        steps = loop.run(state['step'])
    except OSError as error:  # a full disk while writing metrics, plots or checkpoints
        raise disk_fault(error.filename or out, error) from None
    return {'out': out, 'model': os.path.join(out, 'model'), 'steps': steps,
            'best': recipe.best}


class Finetuning:
    """What fine-tuning gives the training loop (the recipe of `run.loop`): the task's
    batches, one a step, epoch after epoch; its loss (`task_step.task_forward_backward`);
    the dev set's scores, after which the best model so far is kept in OUT/model.

    state: the state.json of the checkpoint the run resumes from (a new run: epoch 0,
    index 0, step 0, no best record).
    """
    loss_names = ('loss',)
    eval_split = 'dev'
    unit = 'examples'

    def __init__(self, options, task, net, ctxs, config, vocab, out, steps_per_epoch, state):
        self.options, self.task, self.net, self.ctxs = options, task, net, ctxs
        self.config, self.vocab, self.out = config, vocab, out
        self.steps_per_epoch, self.best = steps_per_epoch, state['best']
        self.score_names = task.info.metrics
        self.checkpoint_files = {TASK_FILE: task.info.to_dict()}
        self.batches = None  # the iterator of this epoch's batches still to train
        self.scores, self.is_best = None, False  # of the last evaluation

    def position(self, step):
        """(epoch, index): the epoch that `step` trains and its batches before step."""
        return divmod(step - 1, self.steps_per_epoch)

    def step_batches(self, step):
        epoch, index = self.position(step)
        if index == 0 or self.batches is None:  # an epoch starts, or the run resumes
            self.batches = iter(self.task.training_batches(
                self.options.batch_size, epoch, self.options.seed, index))
        batch = next(self.batches)
        seed_step(self.options.seed, step)
        return [batch]

    def forward_backward(self, batches, loss_scale, logging):
        return [task_forward_backward(self.net, batches[0], self.ctxs, loss_scale)], {}

    def examples(self, batches):
        return len(batches[0].valid_lens)

    def record_fields(self, step):
        return {'epoch': self.position(step)[0]}

    def progress_fields(self, record):
        return {'loss': f'{record["loss"]:.4f}'}

    def evaluate(self, step):
        """The dev set's scores (None without a dev set: the last model is then the
        best), and whether they are the best so far."""
        scores = self.scores = self.task.evaluate(self.net, self.ctxs[0])
        if scores is None:
            self.is_best, self.best = True, {'step': step, 'split': self.eval_split}
            return None, []
        main = self.task.info.metrics[0]
        self.is_best = self.best is None or scores[main] > self.best[main]
        if self.is_best:
            self.best = {'step': step, 'split': self.eval_split, **scores}
        return scores, [f'step {step}: dev ' + ', '.join(
            f'{name} {value:.4f}' for name, value in scores.items())
            + (' (best so far: saved)' if self.is_best else '')]

    def checkpoint_state(self, step):
        """Keeps the model in OUT/model if its dev scores are the best so far; the
        state: the position in the epochs, the best dev record, the seed."""
        if self.is_best:
            save_task_model(os.path.join(self.out, 'model'), self.net, self.config,
                            self.vocab, self.task.model_info(self.scores))
        epoch, index = divmod(step, self.steps_per_epoch)  # the next batch's
        return {'epoch': epoch, 'index': index, 'step': step, 'best': self.best,
                'seed': self.options.seed}
