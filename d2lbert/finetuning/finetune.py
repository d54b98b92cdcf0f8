"""`d2lbert finetune`: train a pretrained BERT with a new head on a labelled task, with
progress, dev evaluation, the best model kept, atomic checkpoints and exact resume.

An output folder::

    OUT/model/                 the best model by the dev metric (`task_model`), which
                               `d2lbert predict` reads (without a dev set: the last)
    OUT/checkpoints/step-N/    for --resume (as pretraining's, plus task.json)
    OUT/metrics.jsonl          'train' records (loss, lr, examples/s) and 'dev' records
    OUT/loss.png               (the task's metrics, see `finetune_data`)

What is task-specific (reading the data, batches, the new layer's start, scoring the
dev set) is a task object: `labelled_task.LabelledTask` (classes, numbers, tags) or
`qa_task.QuestionAnsweringTask` (SQuAD).
"""
import dataclasses
import math
import os
import time

from ..data.squad import DOC_STRIDE, MAX_LEN, MAX_QUERY_LEN, SQUAD_FILES
from ..run import checkpoint as ckpt
from ..run.devices import check_gpu_ids, training_contexts
from ..run.errors import RunError, TrainingDiverged
from ..run.files import disk_fault
from ..run.folder import due, prepare_out_dir
from ..run.metrics import IntervalMeans, MetricsLog
from ..run.models import random_model_like
from ..run.optimizer import learning_rate, load_trainer_states, make_trainer
from ..run.step import optimizer_step, seed_step
from ..run.options import (Options, choice, fraction, integer, number, option, optional,
                           text)
from ..util.options import flag
from .finetune_data import LABEL_TYPES, SQUAD_TASKS, TASK_NAMES
from .labelled_task import read_labelled_task
from .qa_task import read_qa_task
from .task_model import TASK_FILE, build_task_model, read_task_info, save_task_model
from .task_step import task_forward_backward

MAX_SEED = 2 ** 32 - 1
SMALL_MODEL_LR, LARGE_MODEL_LR = 1e-4, 3e-5
SMALL_MODEL_HIDDENS = 256  # up to the book's bert.small
TASK_MAX_LEN = 128  # --max-len of the tasks but SQuAD's (whose default is MAX_LEN, 384)
# the options --resume must not change
TRAJECTORY = ('task', 'model', 'data', 'dev', 'label_type', 'batch_size', 'max_len',
              'doc_stride', 'max_query_len', 'lr', 'warmup', 'weight_decay', 'dropout', 'clip',
              'epochs', 'seed', 'from_scratch')


@dataclasses.dataclass
class FinetuneOptions(Options):
    """Every setting of a fine-tuning run, each declared once with its flag's help and
    its check (`run.options`): the `d2lbert finetune` parser is generated from them.

    lr None picks the learning rate by model size: 1e-4 for models up to 256 hidden
    units (the book's NLI chapter, bert.small) and 3e-5 for larger ones (BERT-base,
    GluonNLP's and Google's recipes). warmup is the share of all steps.

    max_len None means 384 for the SQuAD tasks (one question and passage window, as
    Google's BERT, GluonNLP and Hugging Face) and 128 for the others; doc_stride and
    max_query_len only concern the SQuAD tasks (`data.squad.windows`).
    """
    task: str = option(None, f'one of {", ".join(TASK_NAMES)}', choice(TASK_NAMES),
                       required=True, parse=str.lower)
    model: str = option(None, "a d2lbert pretraining output folder, a Hugging Face BERT "
                        "folder, the book's bert.small or bert.base (name, zip or folder)",
                        text(), required=True)
    data: str = option(None, "a folder with the task's files under their usual names, or "
                       'one training file (csv: required; squad2/squad1: a SQuAD JSON '
                       'file); default: download SNLI / GLUE / SQuAD', text(optional=True))
    dev: str = option(None, "the dev file (default: the task's dev file in --data; SQuAD: "
                      'downloaded when --data is not given)', text(optional=True))
    out: str = option(None, 'output folder (default: runs/finetune-TASK-DATE-TIME)',
                      text(optional=True))
    label_type: str = option('class', "csv: 'class' (label is a class name) or 'number' "
                             '(regression)', choice(LABEL_TYPES))
    epochs: int = option(3, 'passes over the training set', integer(1))
    batch_size: int = option(32, 'examples per step', integer(1))
    max_len: int = option(None, 'longest input in tokens; longer pairs are cut longest '
                          'first; SQuAD: a question and passage window (default: 384 for '
                          'squad2/squad1, else 128)', integer(4))
    doc_stride: int = option(DOC_STRIDE, "squad2/squad1: a long passage's windows start "
                             'this many tokens apart', integer(1))
    max_query_len: int = option(MAX_QUERY_LEN, 'squad2/squad1: the most question tokens (the '
                                'rest is cut off)', integer(1))
    lr: float = option(None, 'peak learning rate (default: 1e-4 for models up to 256 hidden '
                       'units, else 3e-5)', optional(number(0, inclusive=False)))
    warmup: float = option(0.1, 'share of the steps with linear warmup; then linear decay '
                           'to 0', fraction)
    weight_decay: float = option(0.01, 'weight decay (never on biases and LayerNorm '
                                 'parameters)', number(0))
    dropout: float = option(0.1, 'dropout before the new output layer (SQuAD: none, as in '
                            'the references)', fraction)
    clip: float = option(1.0, 'clip the global gradient norm (0: off)', number(0))
    eval_every: int = option(0, 'evaluate on dev (and checkpoint) every N steps and after '
                             'each epoch (0: after each epoch only)',
                             integer(0, note=' (0: at the end of each epoch)'))
    log_every: int = option(10, 'log the mean loss every N steps', integer(1))
    keep: int = option(2, 'keep the newest K checkpoints', integer(1))
    seed: int = option(0, 'seeds the data order, the new layer and dropout',
                       integer(0, MAX_SEED))
    gpus: str = option(None, 'comma-separated GPU ids (default: all usable GPUs, else the '
                       'CPU)', check_gpu_ids)
    cpu: bool = option(False, 'train on the CPU even with GPUs')
    resume: bool = option(False, 'continue from the newest complete checkpoint in --out')
    overwrite: bool = option(False, 'replace --out whole if it holds files (default: refuse)')
    progress: bool = option(True, 'no progress bar')
    plain: bool = option(False, "run the book's model instead of the fast path")
    from_scratch: bool = option(False, "the architecture and vocabulary of --model with "
                                'random parameters (drawn as pretraining draws them, '
                                'seeded by --seed): the no-pretraining baseline')

    def __post_init__(self):
        if isinstance(self.task, str):  # glue/MRPC as GLUE's folders, glue/mrpc as HF's
            self.task = self.task.lower()
        if self.max_len is None and self.task in TASK_NAMES:
            self.max_len = MAX_LEN if self.task in SQUAD_TASKS else TASK_MAX_LEN
        super().__post_init__()

    def check_together(self):
        """--task csv needs --data; a SQuAD window must leave room for the passage."""
        if self.task == 'csv' and self.data is None:
            raise ValueError('--task csv needs --data, your training file (.csv, .tsv or '
                             '.jsonl with text[, text_pair], label columns)')
        if self.task in SQUAD_TASKS and self.max_len - self.max_query_len - 3 < 1:
            raise ValueError(f'--max-query-len {self.max_query_len} leaves no room for the '
                             f'passage in --max-len {self.max_len} tokens (<cls> question '
                             '<sep> passage <sep>)')


def check_sources(options):
    """--data and --dev must exist (when given; a SQuAD task may also name a SQuAD file
    to download): checked before anything is written."""
    for name in ('data', 'dev'):
        path = getattr(options, name)
        downloadable = options.task in SQUAD_TASKS and path in SQUAD_FILES
        if path is not None and not os.path.exists(path) and not downloadable:
            raise RunError(f'{flag(name)} {path}: no such file or folder')


def default_lr(config):
    return SMALL_MODEL_LR if config.num_hiddens <= SMALL_MODEL_HIDDENS else LARGE_MODEL_LR


def read_task(options, vocab):
    """The task object of the run (see the module doc), its data read and encoded."""
    if options.task in SQUAD_TASKS:
        return read_qa_task(options, vocab)
    return read_labelled_task(options, vocab)


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


def finetune(options, pretrained):
    """Run fine-tuning of pretrained = (bert, vocab), the `BERTModel` and vocabulary that
    `d2lbert.load_pretrained(options.model)` returns; returns a summary dict (output
    folder, best dev scores)."""
    options.validate()
    check_sources(options)
    ctxs = training_contexts(options.cpu, options.gpus)
    bert, vocab = pretrained
    if options.from_scratch:
        bert = random_model_like(bert, options.seed)
    config = bert.config
    if options.max_len > config.max_len:
        raise RunError(f'--max-len {options.max_len} exceeds the model\'s '
                       f'{config.max_len} positions')
    task = read_task(options, vocab)
    info = task.info
    out = prepare_out_dir(options, 'finetune',
                          f'finetune-{options.task.replace("/", "-")}-%Y%m%d-%H%M%S',
                          {'--data': options.data, '--dev': options.dev,
                           '--model': options.model}, TRAJECTORY)
    net = build_task_model(bert, info)
    state = {'epoch': 0, 'index': 0, 'step': 0, 'best': None, 'seed': options.seed}
    log = MetricsLog(out)
    if options.resume:
        checkpoint = ckpt.find_checkpoint(out)
        state = resume_state(checkpoint, info, config, vocab, options.seed)
        net.load_parameters(os.path.join(checkpoint, 'model.params'), ctx=ctxs)
        log.truncate(state['step'])
    else:
        bert.collect_params().reset_ctx(ctxs)
        seed_step(options.seed, 0)
        task.initialize_output(net, ctxs)
    if not options.plain:
        from .. import fast  # only here: a --plain run never loads the fast path
        fast.accelerate(net)
    net.hybridize(static_alloc=True)
    net.collect_params().setattr('grad_req', 'add')
    lr = options.lr or default_lr(config)
    trainer = make_trainer(net, 'bertadam', lr, options.weight_decay)
    if options.resume:
        load_trainer_states(trainer, os.path.join(checkpoint, 'trainer.states'))
    run = FinetuneRun(options, task, net, trainer, ctxs, config, vocab, out, log, lr)
    try:
        return run.train(state)
    except OSError as error:  # a full disk while writing metrics, plots or checkpoints
        raise disk_fault(error.filename or out, error) from None


class FinetuneRun:
    """The training loop of one run, its evaluation and its saving; `task` is the
    task object (see the module doc)."""

    def __init__(self, options, task, net, trainer, ctxs, config, vocab, out, log, lr):
        self.options, self.task, self.net, self.trainer = options, task, net, trainer
        self.ctxs, self.config, self.vocab, self.out, self.log = ctxs, config, vocab, out, log
        self.info, self.lr = task.info, lr

    def train(self, state):
        from tqdm import tqdm
        options = self.options
        steps_per_epoch = math.ceil(len(self.task.train) / options.batch_size)
        total_steps = steps_per_epoch * options.epochs
        warmup_steps = round(options.warmup * total_steps)
        progress = tqdm(total=total_steps, initial=state['step'], unit='step',
                        disable=not options.progress, dynamic_ncols=True)
        losses = IntervalMeans(('loss',))
        step, examples, tic = state['step'], 0, time.time()
        for epoch in range(state['epoch'], options.epochs):
            start = state['index'] if epoch == state['epoch'] else 0
            batches = self.task.training_batches(options.batch_size, epoch, options.seed,
                                                 start)
            for index, batch in enumerate(batches, start + 1):
                step += 1
                seed_step(options.seed, step)
                self.trainer.set_learning_rate(
                    learning_rate(step, self.lr, warmup_steps, total_steps))
                losses.add([task_forward_backward(self.net, batch, self.ctxs)])
                optimizer_step(self.net, self.trainer, options.clip)
                examples += len(batch.valid_lens)
                progress.update(1)
                epoch_end = index == steps_per_epoch
                if due(step, options.log_every) or epoch_end:
                    record = self.log_training(step, epoch, losses, examples, tic)
                    progress.set_postfix(loss=f'{record["loss"]:.4f}')
                    examples, tic = 0, time.time()
                if epoch_end or due(step, options.eval_every):
                    position = ({'epoch': epoch + 1, 'index': 0} if epoch_end
                                else {'epoch': epoch, 'index': index})
                    state = {**state, **position, 'step': step}
                    state['best'] = self.evaluate_and_save(state, progress)
                    tic = time.time()
        progress.close()
        self.log.plot(('loss',), self.info.metrics, 'dev')
        return {'out': self.out, 'model': os.path.join(self.out, 'model'),
                'steps': step, 'best': state['best']}

    def log_training(self, step, epoch, losses, examples, tic):
        record = {'step': step, 'split': 'train', 'epoch': epoch,
                  'lr': self.trainer.learning_rate, **losses.pop_means(),
                  'examples_per_second': examples / max(time.time() - tic, 1e-9)}
        if not math.isfinite(record['loss']):
            raise TrainingDiverged(
                f'loss became {record["loss"]} by step {step}: stopped. The last good '
                f'checkpoint is kept in {self.out}; try a lower --lr or --clip')
        self.log.write(record)
        return record

    def evaluate_and_save(self, state, progress):
        """Score the dev set; keep OUT/model if it is the best so far (the last model
        without a dev set); write a checkpoint. Returns the best record so far."""
        best = state['best']
        scores = self.task.evaluate(self.net, self.ctxs[0])
        if scores is None:
            record = {'step': state['step'], 'split': 'dev'}
            is_best = True
        else:
            record = {'step': state['step'], 'split': 'dev', **scores}
            self.log.write(record)
            main = self.info.metrics[0]
            is_best = best is None or scores[main] > best[main]
            progress.write(f'step {state["step"]}: dev ' + ', '.join(
                f'{name} {value:.4f}' for name, value in scores.items())
                + (' (best so far: saved)' if is_best else ''))
        if is_best:
            save_task_model(os.path.join(self.out, 'model'), self.net, self.config,
                            self.vocab, self.task.model_info(scores))
            best = record
        ckpt.save_checkpoint(self.out, state['step'], self.net, self.trainer, self.config,
                             self.vocab, {**state, 'best': best}, self.options.keep,
                             {TASK_FILE: self.info.to_dict()})
        return best
