"""`d2lbert pretrain`: pretrain BERT on WikiText (or your text), with progress,
held-out evaluation, atomic checkpoints and exact resume.

The training loop is the one fine-tuning runs too (`run.loop`); `Pretraining` gives it
pretraining's data, losses, evaluation and checkpoint state."""
import dataclasses
import os

import mxnet as mx
from mxnet import init


from ..data import load_data_wiki, save_vocab
from ..data.corpus import FILE_FORMATS
from ..data.coverage import unknown_line, unknown_share
from ..data.download import WIKITEXT_ARCHIVES
from ..data.loader import VOCABULARIES
from ..model import BERTConfig, BERTModel
from ..model.config import SIZES
from ..run import checkpoint as ckpt
from ..run.devices import check_devices, training_contexts
from ..run.errors import RunError
from ..run.files import disk_fault
from ..run.folder import prepare_out_dir, record_run
from ..run.loop import Cadence, TrainingLoop
from ..run.schedule import Schedule, TimeBudget
from ..run.loss_scale import DynamicLossScale
from ..run.metrics import MetricsLog
from ..run.optimizer import load_trainer_states
from ..run.precision import check_hardware, needs_loss_scaling, resolve_precision
from ..run.setup import prepare_training
from ..run.step import seed_step
from ..run.options import choice, integer, number, option, optional, text
from ..run.training_options import TrainingOptions
from ..util.numpy_mode import in_numpy_mode
from ..util.options import check_int
from .collapse import collapse_warning
from .distributed import DIST_KVSTORES, HOROVOD, ShardStream, join_job
from .evaluate import evaluate
from .step import forward_backward
from .start import CONTINUE_RECIPE, continued_config, continued_net
from .text_data import run_text
from .text_identity import (RECORD_KEY as TEXT_RECORD, check_same_text,
                            check_same_tokenizer, text_files, tokenizer_record)


# MXNet's kvstores for the gradient all-reduce that fit this trainer; dist_* and horovod:
# a job of several processes (see distributed.py). dist_async can't be one: its servers
# update the weights as each worker's gradient arrives, with no clipping of the sum.
KVSTORES = ('device', 'local', *DIST_KVSTORES, HOROVOD)
MIN_MAX_LEN = 5  # <cls> a <sep> b <sep>, one token per sentence
DEFAULT_STEPS = 500
# The defaults that depend on --data (with the vocabulary: `vocabulary`). The bundled
# corpus: the book's size, batch and lr. Other text: the small size, measured on 48
# WikiText-2 articles for 30 minutes (docs/pretraining.md, transfer_study.py): the
# book's size learns them by heart after 6 minutes, its held-out accuracy falling;
# the small one, five times the work per pair, still gains at 30.
BUNDLED_RECIPE = {'preset': 'book', 'batch_size': 64, 'lr': 1e-3}
REAL_TEXT_RECIPE = {'preset': 'small', 'batch_size': 128, 'lr': 5e-4}
# --objective mlm from random weights: AdamW (decoupled weight decay, bias correction),
# batch 256, lr 1.4e-3. BERTAdam's first steps (3 to 6.5 times the learning rate, see
# WARMUP_SHARE) throw the masked LM alone onto the plateau where it predicts one frequent
# token at every evaluation of a 300-step run on SST-2's sentences; MXNet's Adam leaves it
# for a second plateau near 0.08, its weight decay (added to the gradient, then normalized)
# pulling the embeddings of words a batch lacks towards 0. AdamW with batches of 256
# packed sequences at 1.4e-3 is above the most-frequent-token baseline + 0.05 at step 300
# on SST-2's sentences and WikiText-2's lines, both seeds measured (at 7e-4 WikiText-2's
# lines were 0.001 short; chapter_bert/studies/first_steps_study.py, docs/pretraining.md).
MLM_RECIPE = {'optimizer': 'adamw', 'lr': 1.4e-3, 'batch_size': 256}
DEFAULT_EVERY = 100  # the default --eval-every and --save-every of a --steps run
# Held-out batches an evaluation reads by default: a fixed sample of the held-out text
# (the same batches every time), whatever its size. An evaluation batch costs at most
# two thirds of a training step (one forward pass; a second one scores whole words of a
# WordPiece vocabulary) against a step's forward and backward, so the default run's
# evaluations (after every 100 of 500 steps, and at step 0 when continuing a model: 6)
# take at most 6 * 10 * 2/3 = 40 step-times, 8% of the run. In full, a 540 MB file's
# held-out 5% (27 MB) was read at every evaluation.
VALID_BATCHES = 10
# Without --warmup, the learning rate rises over the first fifth of the steps. BERTAdam
# (Google's BERT optimizer) has no bias correction: over its first hundred updates a
# step is 3 to 6.5 times the learning rate, and a short warmup at lr 1e-3 throws this
# post-LayerNorm model onto the plateau where it predicts token frequencies.
WARMUP_SHARE = 0.2
# The book pretrains with dropout 0.2; with 0.1 (Google's BERT) next sentence prediction
# leaves its plateau at chance within the default 500 steps on every seed measured.
PRESET_DROPOUT = 0.1
# 'dynamic': the masked tokens are drawn afresh every epoch (RoBERTa); 'static': once,
# as the book does. On 48 WikiText-2 articles, 2,000 steps are 16 epochs: with static
# masks the model memorizes them and its held-out perplexity rises from step 500 on.
MASKINGS = ('dynamic', 'static')
# What the loss is made of, and the weight of the next-sentence loss in it. 'mlm':
# the masked LM alone, as RoBERTa (Liu et al., 2019) and Cramming (Geiping and
# Goldstein, 2022) pretrain, on RoBERTa's FULL-SENTENCES inputs (consecutive texts packed
# to --max-len, `data.full_sentences`), no pairs; the NSP head stays, untrained, so a
# model of either objective loads and fine-tunes alike.
OBJECTIVES = {'mlm+nsp': 1.0, 'mlm': 0.0}
# the options --resume must not change (--steps may grow: the run continues to it)
TRAJECTORY = ('data', 'valid', 'line_by_line', 'layout', 'text_column', 'model', 'preset', 'config',
              'batch_size', 'max_len', 'lr', 'warmup', 'weight_decay', 'clip', 'dropout',
              'masking', 'objective', 'optimizer',
              'accumulate',
              'seed', 'min_freq', 'vocab', 'vocab_size')


@dataclasses.dataclass
class PretrainOptions(TrainingOptions):
    """Every setting of a pretraining run, each declared once with its flag's help and
    its check (`run.options`; those fine-tuning shares: `run.training_options`): the
    `d2lbert pretrain` parser is generated from them.

    Constructing (and `pretrain`) checks every setting: a bad one raises a `ValueError`
    naming its flag, e.g. "--lr must be a finite number > 0, got nan".
    """
    defaults_shown = {'optimizer': "bertadam; adamw with --objective mlm (without --model)",
                      'lr': '0.001 for the bundled corpus, 0.0005 for other text, '
                            '0.0014 with --objective mlm, 0.0001 with --model',
                      'dropout': '0.1 with --preset; a --config file keeps its own',
                      'out': 'runs/bert-DATE-TIME',
                      'model': 'random weights; a model given is continued on --data with '
                               'its architecture and vocabulary, a head it lacks drawn fresh'}
    data: str = option('bundled', "'bundled' (offline, generated by d2lbert), 'wikitext-2', "
                       "'wikitext-103' (downloaded once), a folder with "
                       'wiki.{train,valid}.tokens, or a file: plain text (a paragraph per '
                       "line, Google BERT's sentence per line with blank lines between "
                       'documents, or --line-by-line), or a table (.tsv, .csv, .jsonl, .json) '
                       'read with --text-column (see docs/pretraining.md)', text())
    valid: str = option(None, 'held-out text to evaluate on, a file in any format --data '
                        'takes', text(optional=True),
                        shown_default="the valid split of a named corpus or folder; the last "
                        '5%% of the documents of a --data file')
    line_by_line: bool = option(False, 'read a plain text file (--data, --valid) as one '
                                'text per line, whatever its sentences (with --objective '
                                'mlm: there are no sentence pairs)')
    layout: str = option(None, "how a plain text file (--data, --valid) is laid out: "
                         "'paragraphs' (a paragraph per line), 'sentences' (Google BERT's: "
                         "a sentence per line, a blank line between documents), 'lines' "
                         "(one text per line, as --line-by-line) or 'wikitext'",
                         optional(choice(FILE_FORMATS)),
                         shown_default="wikitext for wiki.*.tokens; else sentences when "
                         'blank lines break the text into many documents (one per 1,000 '
                         'lines, at least 2), paragraphs otherwise')
    text_column: str = option(None, "the column of a table file (--data, --valid) holding "
                              'the text: a .tsv or .csv header name or a .jsonl/.json field',
                              text(optional=True), shown_default='text')
    preset: str = option(None, "model size: 'book' (128 hidden, 2 layers), 'small' (256, "
                         "4) or 'base' (768, 12); d2l architecture", optional(choice(SIZES)),
                         shown_default='book for the bundled corpus, small for other text')
    config: str = option(None, 'a BERTConfig JSON file instead of --preset',
                         text(optional=True))
    batch_size: int = option(None, 'sentence pairs per step (split over devices)',
                             optional(integer(1)),
                             shown_default='64 for the bundled corpus, 128 for other text, 256 '
                             'with --objective mlm, 64 with --model')
    max_len: int = option(64, 'longest <cls> a <sep> b <sep> sequence, in tokens',
                          integer(MIN_MAX_LEN))
    steps: int = option(None, 'optimizer steps in total (a resumed run continues to it)',
                        optional(integer(1)), shown_default=DEFAULT_STEPS)
    minutes: float = option(None, 'train for this many minutes of wall-clock time instead of '
                            '--steps: the warmup (a fifth of the time, or --warmup steps) '
                            'and the linear decay to 0 span the time; without --eval-every '
                            'and --save-every it evaluates and checkpoints at every fifth '
                            'of it; it stops early enough that its last evaluation and '
                            'checkpoint end inside it (timed as the run goes); the time '
                            'counts from the first step (reading the data and building the '
                            'model come before); --resume continues the same budget',
                            optional(number(0, inclusive=False)))
    warmup: int = option(None, 'steps of linear warmup, then linear decay to 0 (default: '
                         'a fifth of --steps or of --minutes)', optional(integer(0)))
    masking: str = option('dynamic', "'dynamic' (new masked tokens every epoch) or "
                          "'static' (masked once, as the book)", choice(MASKINGS))
    objective: str = option('mlm+nsp', "'mlm+nsp' (BERT's: masked words and next-sentence "
                            "prediction on sentence pairs) or 'mlm' (masked words only, as "
                            'RoBERTa: consecutive texts packed to --max-len, joined by <sep>; '
                            'the NSP head is kept, untrained)', choice(tuple(OBJECTIVES)))
    accumulate: int = option(1, 'batches whose gradients make one step', integer(1))
    amp: bool = option(False, 'the same as --precision fp16')
    eval_every: int = option(None, 'held-out evaluation every N steps and after the last (0: '
                             'only after the last)',
                             optional(integer(0, note=' (0: only after the last step)')),
                             shown_default=f'{DEFAULT_EVERY}; with --minutes, at every '
                             'fifth of the time')
    save_every: int = option(None, 'checkpoint every N steps and after the last (0: only '
                             'after the last)',
                             optional(integer(0, note=' (0: only after the last step)')),
                             shown_default=f'{DEFAULT_EVERY}; with --minutes, at every '
                             'fifth of the time')
    keep: int = option(3, 'keep the newest K checkpoints (at least 1: --resume needs it)',
                       integer(1))
    valid_batches: int = option(VALID_BATCHES, 'held-out batches each evaluation reads: a '
                                'sample of the held-out text drawn once (0: all of it)',
                                integer(0, note=' (0: all of the held-out text)'))
    kvstore: str = option('device', 'MXNet kvstore for gradient all-reduce: '
                          f'{", ".join(KVSTORES)} (dist_*: a job of several processes, see '
                          'd2lbert launch)', choice(KVSTORES))
    num_workers: int = option(0, 'processes preparing the data (0: this process)',
                              integer(0, note=' (0: in this process)'))
    vocab: str = option(None, "the vocabulary learned from --data: 'words' (the book's: the "
                        "words seen --min-freq times) or 'wordpiece' (--vocab-size subwords, "
                        'trained with Hugging Face tokenizers; whole words are masked, and '
                        'held-out records add word_mlm_accuracy); default: words for the '
                        'bundled corpus, wordpiece for other text',
                        optional(choice(VOCABULARIES)))
    vocab_size: int = option(8000, '--vocab wordpiece: the most word pieces', integer(100))
    min_freq: int = option(5, "--vocab words: drop words seen fewer times", integer(1))

    def __post_init__(self):
        recipe = dict(BUNDLED_RECIPE if self.data == 'bundled' else REAL_TEXT_RECIPE)
        if self.objective == 'mlm':
            recipe.update(MLM_RECIPE)
        if self.model:
            recipe = dict(CONTINUE_RECIPE)
        if self.config:
            recipe.pop('preset', None)
        for name, default in recipe.items():
            if getattr(self, name) is None:
                setattr(self, name, default)
        super().__post_init__()

    def check_together(self):
        """--max-len must fit the preset's positions (a --config is checked when read);
        --preset and --config, --cpu and --gpus, --steps and --minutes exclude each other;
        a time budget runs in one process."""
        check_devices(self.cpu, self.gpus)
        for name in ('preset', 'config', 'vocab'):
            if self.model and getattr(self, name) is not None:
                raise ValueError(f'--{name} and --model {self.model}: the run takes the '
                                 "model's architecture and vocabulary; leave --{name} out")
        if self.line_by_line and self.layout not in (None, 'lines'):
            raise ValueError(f'--line-by-line and --layout {self.layout}: --line-by-line is '
                             '--layout lines; give one of them')
        if (self.line_by_line or self.layout == 'lines') and self.objective == 'mlm+nsp':
            raise ValueError('--line-by-line reads each line as one text, with no sentence '
                             'pairs for next sentence prediction: pass --objective mlm')
        if self.config and self.preset is not None:
            raise ValueError(f'--preset {self.preset} and --config {self.config} both give '
                             "the model's size: choose one")
        if self.minutes is not None and self.steps is not None:
            raise ValueError('--steps and --minutes: give one of them (a number of steps '
                             'or a time budget)')
        if self.minutes is not None and self.kvstore in (*DIST_KVSTORES, HOROVOD):
            raise ValueError(f'--minutes: a time budget runs in one process, not with '
                             f'--kvstore {self.kvstore} (give --steps)')
        if not self.config and not self.model:
            check_int('--max-len', self.max_len, MIN_MAX_LEN,
                      BERTConfig.d2l(1, self.preset).max_len)


def total_steps(options):
    """--steps, or its default (None with --minutes: the time decides)."""
    if options.minutes is not None:
        return None
    return DEFAULT_STEPS if options.steps is None else options.steps


def warmup_steps(options):
    """The number of warmup steps: --warmup, or by default a fifth of --steps (None: a
    fifth of --minutes)."""
    if options.warmup is None:
        steps = total_steps(options)
        return None if steps is None else round(WARMUP_SHARE * steps)
    return options.warmup


def schedule_of(options, spent):
    """The run's `Schedule` (--steps), or its `TimeBudget` (--minutes; spent: the seconds
    a resumed run has trained)."""
    if options.minutes is None:
        return Schedule(options.lr, warmup_steps(options), total_steps(options))
    return TimeBudget(options.lr, 60 * options.minutes, WARMUP_SHARE, options.warmup,
                      spent=spent)


def cadence_of(options):
    """Every how many steps the run logs, evaluates and checkpoints: by default every
    DEFAULT_EVERY steps, or (--minutes) at every fifth of the time only."""
    default = DEFAULT_EVERY if options.minutes is None else 0
    return Cadence(options.log_every,
                   default if options.eval_every is None else options.eval_every,
                   default if options.save_every is None else options.save_every)


def vocabulary(options):
    """--vocab, or by default 'words' for the bundled corpus (the book's recipe, whose
    generated words all recur) and 'wordpiece' for real text, where a word list learned
    from WikiText-2 leaves a quarter of GLUE SST-2's tokens <unk> (docs/pretraining.md)."""
    if options.vocab is not None:
        return options.vocab
    return 'words' if options.data == 'bundled' else 'wordpiece'


def check_sources(options):
    """--config must be a valid BERTConfig file, a local --data must exist, and a
    --data or --valid file must be text the run can use (`text_data.run_text`):
    checked before the run folder is made. Returns the `RunText`."""
    if options.config and not os.path.isfile(options.config):
        raise RunError(f'--config {options.config}: no such file (a BERTConfig JSON '
                       'file)')
    if options.config:
        read_config_flag(options.config)
    named = ('bundled', *WIKITEXT_ARCHIVES)
    if options.data not in named and not os.path.exists(options.data):
        raise RunError(f'--data {options.data}: no such file or folder (or one of '
                       f'{", ".join(named)})')
    return run_text(options)


def resolve_contexts(options):
    """The devices to train on (see `devices.training_contexts`)."""
    ctxs = training_contexts(options.cpu, options.gpus)
    check_hardware(resolve_precision(options.precision, options.amp), ctxs)
    return ctxs


def output_folder(options, worker):
    """(the run's folder, whether the run continues from a checkpoint): the first worker
    prepares it (`prepare_out_dir`) and alone writes there, and decides for every
    worker whether the run continues (a --resume of a run killed before its first
    checkpoint starts over); the others only read the checkpoint they resume from."""
    if worker.is_first:
        out, resumes = prepare_out_dir(options, 'pretrain', 'bert-%Y%m%d-%H%M%S',
                                       {'--data': options.data, '--valid': options.valid,
                                        '--config': options.config, '--model': options.model},
                                       TRAJECTORY)
        worker.broadcast([int(resumes)])
        return out, resumes
    resumes = bool(worker.broadcast([0])[0])
    if resumes and not (options.out and ckpt.list_checkpoints(options.out)):
        raise RunError(f'--resume: worker {worker.rank} finds no complete checkpoint '
                       f'in --out {options.out} (every machine must see it: a shared '
                       'folder, or a copy at the same path)')
    return options.out, resumes


def read_config_flag(path):
    """The `BERTConfig` of the file --config, its errors naming the flag."""
    try:
        return BERTConfig.from_json_file(path)
    except (OSError, ValueError) as error:
        raise RunError(f'--config: {error}') from None


def build_config(options, vocab):
    if options.config:
        config = read_config_flag(options.config)
        if config.vocab_size != len(vocab):
            config = dataclasses.replace(config, vocab_size=len(vocab))
        if options.dropout is not None:
            config = dataclasses.replace(config, dropout=options.dropout,
                                         attention_dropout=options.dropout)
    else:
        dropout = PRESET_DROPOUT if options.dropout is None else options.dropout
        config = BERTConfig.d2l(len(vocab), options.preset, dropout=dropout)
    if config.max_len < options.max_len:
        raise RunError(f'--max-len {options.max_len} exceeds the model\'s max_len '
                       f'{config.max_len}')
    return config


def starting_net(options, vocab, start, ctxs):
    """(net, config) on ctxs: --model's (`start.continued_net`), else a new net of
    `build_config` drawn from Normal(0, 0.02) after seeding with --seed."""
    if start:
        config = continued_config(start, options.dropout, options.max_len)
        return continued_net(start, config, ctxs), config
    config = build_config(options, vocab)
    net = BERTModel.from_config(config)
    mx.random.seed(options.seed)
    net.initialize(init.Normal(0.02), ctx=ctxs)
    return net, config


def freeze_unreached(net, objective):
    """Under --objective mlm no loss reaches the NSP head (its pooler and its output
    layer): it gets no gradient and is left out of the optimizer (`run.setup`), so no
    weight decay or trust ratio moves it either. It is kept bit-identical and saved as
    it came: --model's pooler is what a fine-tuned <cls> classifier starts from."""
    if OBJECTIVES[objective] == 0:
        net.nsp.collect_params().setattr('grad_req', 'null')


def check_same_config(checkpoint, saved_config, config):
    """The run being resumed must keep its architecture (its vocabulary is the
    checkpoint's own: `text_vocabulary`)."""
    if saved_config != config:
        diff = {k: (v, getattr(config, k)) for k, v in saved_config.to_dict().items()
                if getattr(config, k) != v}
        raise RunError(f'--resume: the model config differs from {checkpoint} '
                       f'(field: (saved, now)): {diff}')


def text_vocabulary(saved_vocab, start):
    """The vocabulary the text is read with: on --resume the run's own (`saved_vocab`,
    its checkpoint's: a resume never learns one again, and Hugging Face's WordPiece
    trainer would not learn the same one twice), else --model's (`start`), else None
    (learned from --data)."""
    if saved_vocab is not None:
        return saved_vocab
    return start.vocab if start else None


def check_budget_left(options, state, checkpoint):
    """A resumed --minutes run continues its budget: there must be time left."""
    if options.minutes is None:
        return
    if 'elapsed_seconds' not in state:
        raise RunError(f'--resume: {checkpoint} is of a --steps run, not a --minutes one: '
                       'resume it with --steps')
    spent = state['elapsed_seconds'] / 60
    if state.get('budget_ended') and options.minutes * 60 <= state['budget_seconds']:
        raise RunError(f'--resume: the run has ended its budget of --minutes '
                       f'{state["budget_seconds"] / 60:g} (give a larger --minutes to '
                       'continue it)')
    if spent >= options.minutes:
        raise RunError(f'--resume: the run has spent {spent:.2f} of its --minutes '
                       f'{options.minutes:g}: nothing left to train (give a larger '
                       '--minutes to continue it)')


def fast_path_of(options, worker):
    """The fast path to run (`d2lbert.fast`), or None: the book's model, for --plain
    and for a worker whose kernels can't run (`Worker.kernels`)."""
    if options.plain or not worker.kernels:
        return None
    from .. import fast  # only here: a --plain run never loads the fast path
    return fast


def load_job_text(options, text, vocab, worker):
    """`load_text` on every worker of a job, with one vocabulary: `vocab` if given (the
    run's own on --resume, --model's: `text_vocabulary`), else the first worker's: it
    reads the text first, and the others then read it with its vocabulary
    (`Worker.share_vocabulary`), not one of their own (Hugging Face's WordPiece trainer
    is not deterministic, and workers on machines with caches apart would each learn
    one). On one machine the others then find the first's cache entries."""
    if worker.is_first:
        train_iter, valid_iter, vocab = load_text(options, text, vocab)
        worker.share_vocabulary(vocab)
        return train_iter, valid_iter, vocab
    return load_text(options, text, worker.share_vocabulary(None))


def load_text(options, text, vocab=None):
    """(training batches, held-out batches, vocabulary) of the `RunText`, read with
    `vocab` if given (lower-casing as it does: `reading_options`), else with a vocabulary
    learned from --data; a RunError naming the flag if the text makes no training batch
    or no held-out example."""
    full_sentences = options.objective == 'mlm'  # RoBERTa's packed texts, no pairs
    model_text = reading_options(vocab) if vocab is not None else {}
    try:
        train_iter, vocab = load_data_wiki(
            options.batch_size, options.max_len, text.train, 'train', seed=options.seed,
            num_workers=options.num_workers, min_freq=options.min_freq,
            last_batch='discard', dynamic_masking=options.masking == 'dynamic',
            vocab_kind=vocabulary(options), vocab_size=options.vocab_size,
            full_sentences=full_sentences, **model_text)
    except ValueError as error:
        raise RunError(f'--data: {error}') from None
    if len(train_iter) == 0:
        raise RunError(f'--data {options.data}: its {len(train_iter.examples):,} '
                       f'sequences of up to --max-len {options.max_len} tokens make no '
                       f'batch of --batch-size {options.batch_size}: give more text or a '
                       'smaller --batch-size')
    flag = '--valid' if options.valid else '--data (its held-out part)'
    try:  # each evaluation reads a sample of --valid-batches batches (`evaluate`)
        valid_iter, _ = load_data_wiki(
            options.batch_size, options.max_len, text.valid, 'valid',
            seed=options.seed, shuffle=True, full_sentences=full_sentences,
            **{**model_text, 'vocab': vocab})
    except ValueError as error:
        raise RunError(f'{flag}: {error}') from None
    if not valid_iter.examples.num_preds.any():
        raise RunError(f'{flag}: the held-out text has no word of the vocabulary learned '
                       'from --data to mask and predict')
    return train_iter, valid_iter, vocab


def resume_point(out, resumes, worker, files):
    """(checkpoint, its config, its vocabulary, its state) that a --resume continues
    from, once the first worker has checked that the run's text is the one it recorded
    (files: `text_identity.text_files` of the text given), tokenized as it was (a word
    vocabulary: `check_same_tokenizer`); (None, None, None, the state
    of a new run) when the run starts from step 0."""
    if not resumes:
        return None, None, None, {'epoch': 0, 'index': 0, 'step': 0}
    if worker.is_first:
        check_same_text(out, files)
    checkpoint = ckpt.find_checkpoint(out)
    config, vocab, state = ckpt.read_checkpoint_meta(checkpoint)
    if worker.is_first:
        check_same_tokenizer(out, vocab)
    return checkpoint, config, vocab, state


def reading_options(vocab):
    """The `data.load_data_wiki` options that read text as a given vocabulary's
    tokenizer does: the vocabulary, and lower-casing only for an uncased one."""
    return {'vocab': vocab, 'lowercase': getattr(vocab, 'lowercase', True)}


@in_numpy_mode  # MXNet's NumPy mode, for a caller from Python that did not switch it on
def pretrain(options, start=None):
    """Run pretraining; returns a summary dict (output folder, final metrics).
    start: the `start.StartModel` of --model (None: random weights)."""
    options.validate()
    text = check_sources(options)
    ctxs = resolve_contexts(options)
    worker = join_job(options.kvstore)
    for line in text.lines if worker.is_first else ():
        print(line, flush=True)
    out, resumes = output_folder(options, worker)
    files = text_files(text, options.valid is not None) if worker.is_first else None
    checkpoint, saved_config, saved_vocab, state = resume_point(out, resumes, worker, files)
    train_iter, valid_iter, vocab = load_job_text(options, text,
                                                  text_vocabulary(saved_vocab, start), worker)
    if start and worker.is_first:
        share = unknown_share(train_iter.examples.corpus.token_ids, vocab)
        print(unknown_line(options.model, f'--data {options.data}', share), flush=True)
    net, config = starting_net(options, vocab, start, ctxs)
    freeze_unreached(net, options.objective)
    precision = resolve_precision(options.precision, options.amp)
    net, trainer = prepare_training(net, options.optimizer, options.lr, options.weight_decay,
                               precision, fast_path_of(options, worker), worker.kvstore,
                               static_shape=True)  # every batch has the same shape
    loss_scale = DynamicLossScale() if needs_loss_scaling(precision) else None
    log = MetricsLog(out) if worker.is_first else None
    if resumes:
        check_same_config(checkpoint, saved_config, config)
        if state.get('seed') != options.seed:
            raise RunError(f'--resume: --seed {options.seed} differs from the seed '
                           f'{state.get("seed")} of {checkpoint}')
        check_budget_left(options, state, checkpoint)
        net.load_parameters(os.path.join(checkpoint, 'model.params'), ctx=ctxs)
        load_trainer_states(trainer, os.path.join(checkpoint, 'trainer.states'))
        if worker.is_first:
            log.truncate(state['step'])
    if worker.is_first:  # the run has started (data read, model built): record it first
        # (then a kill leaves a run --resume takes), with how its text was read
        record_run(out, 'pretrain', options, {
            'text': text.record, TEXT_RECORD: files, **tokenizer_record(vocab),
            **({'model': start.source} if start else {})})
    if worker.is_first and not resumes:
        log.truncate(0)  # empty (a --resume starting over a run killed before a checkpoint)
        config.to_json_file(os.path.join(out, 'config.json'))
        save_vocab(vocab, out)
    worker.share_parameters(trainer)
    stream = ShardStream(train_iter, state['epoch'], state['index'], worker.rank,
                         worker.num_workers)
    try:
        summary = _train_loop(options, net, trainer, loss_scale, ctxs, stream, valid_iter,
                              log, config, vocab, state, out, worker, start is not None)
        worker.done = True
        return summary
    except OSError as error:  # a full disk while writing metrics, plots or checkpoints
        raise disk_fault(error.filename or out, error) from None


def _train_loop(options, net, trainer, loss_scale, ctxs, stream, valid_iter, log, config,
                vocab, state, out, worker, continues):
    """Run the training loop (`run.loop`) on pretraining's recipe from the checkpoint
    state `state` (continues: a --model run, evaluated first where the model starts);
    returns the summary (with --minutes: the seconds trained)."""
    recipe = Pretraining(options, net, ctxs, stream, valid_iter, config, vocab, worker)
    schedule = schedule_of(options, state.get('elapsed_seconds', 0.0))
    loop = TrainingLoop(recipe, net, trainer, schedule, cadence_of(options), out, log,
                        options.clip, options.keep, worker, loss_scale, options.progress,
                        evaluate_first=continues)
    steps = loop.run(state['step'])
    summary = {'out': out, 'steps': steps, 'eval': recipe.last_eval, 'rank': worker.rank}
    if options.minutes is not None:
        summary.update(minutes=options.minutes, seconds=schedule.seconds_trained)
    return summary


class Pretraining:
    """What pretraining gives the training loop (the recipe of `run.loop`): the worker's
    share of each step's batches from `stream` (a `distributed.ShardStream`), the MLM
    and NSP losses (`step.forward_backward`), the held-out evaluation on valid_iter."""
    loss_names = ('mlm_loss', 'nsp_loss')
    score_names = ('mlm_accuracy', 'nsp_accuracy', 'mlm_baseline_accuracy')
    eval_split = 'valid'
    unit = 'pairs'
    checkpoint_files = None

    def __init__(self, options, net, ctxs, stream, valid_iter, config, vocab, worker):
        self.options, self.net, self.ctxs, self.stream = options, net, ctxs, stream
        self.valid_iter, self.config, self.vocab, self.worker = valid_iter, config, vocab, worker
        self.last_eval = None  # the last 'valid' record

    def step_batches(self, step):
        batches = self.stream.next_step(self.options.accumulate)
        seed_step(self.options.seed, step, self.worker.rank)
        return batches

    def forward_backward(self, batches, loss_scale, logging):
        """The two losses; when logging, the step's MLM and NSP accuracies too."""
        values = forward_backward(self.net, batches, self.ctxs, with_accuracy=logging,
                                  loss_scale=loss_scale,
                                  step_totals=self.worker.step_totals(batches),
                                  nsp_weight=OBJECTIVES[self.options.objective])
        metrics = dict(zip(('mlm_accuracy', 'nsp_accuracy'), values[2:]))
        return values[:2], metrics

    def examples(self, batches):
        return sum(len(batch.nsp_labels) for batch in batches)

    def record_fields(self, step):
        return {}

    def progress_fields(self, record):
        return {'mlm': f'{record["mlm_loss"]:.3f}', 'nsp': f'{record["nsp_loss"]:.3f}',
                'mlm_acc': f'{record["mlm_accuracy"]:.3f}',
                'pairs_s': f'{record["pairs_per_second"]:.0f}'}

    def evaluate(self, step):
        """Held-out MLM and NSP scores (`evaluate.evaluate`) on --valid-batches batches
        of the held-out text drawn at random (the same sample every time), and a warning
        if the model has collapsed (`collapse.collapse_warning`)."""
        scores = evaluate(self.net, self.valid_iter, self.ctxs[0],
                          max_batches=self.options.valid_batches or None)
        warning = collapse_warning({'step': step, **scores}, warmup_steps(self.options) or 0)
        if warning:
            scores['warning'] = warning
        self.last_eval = {'step': step, 'split': self.eval_split, **scores}
        line = _format_eval(self.last_eval, with_nsp=self.options.objective != 'mlm')
        return scores, [line] + ([warning] if warning else [])

    def checkpoint_state(self, step):
        """The stream's position (see `distributed.ShardStream.position`) and the seed."""
        return {**self.stream.position(), 'seed': self.options.seed}


def _format_eval(record, with_nsp=True):
    """The held-out scores in one line (NSP's only when it is trained)."""
    line = (f'step {record["step"]}: held-out MLM accuracy {record["mlm_accuracy"]:.3f} '
            f'(most-frequent-token baseline {record["mlm_baseline_accuracy"]:.3f}), '
            f'perplexity {record["mlm_perplexity"]:.1f}')
    if not with_nsp:
        return line
    return (f'{line}, NSP accuracy {record["nsp_accuracy"]:.3f} (majority label '
            f'{record["nsp_majority_accuracy"]:.3f})')
