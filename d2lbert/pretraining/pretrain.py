"""`d2lbert pretrain`: pretrain BERT on WikiText (or your text), with progress,
held-out evaluation, atomic checkpoints and exact resume."""
import dataclasses
import math
import os
import time

import mxnet as mx
from mxnet import init, np

from .. import fast
from ..data import load_data_wiki
from ..data.download import WIKITEXT_ARCHIVES
from ..model import BERTConfig, BERTModel
from ..model.config import SIZES
from ..run import checkpoint as ckpt
from ..run.devices import parse_gpu_ids, training_contexts
from ..run.errors import RunError, TrainingDiverged
from ..run.folder import due, prepare_out_dir
from ..run.metrics import IntervalMeans, MetricsLog
from ..run.optimizer import OPTIMIZERS, learning_rate, load_trainer_states, make_trainer
from ..run.step import forward_backward, optimizer_step, seed_step
from ..util.options import (check_bool, check_choice, check_int, check_number, check_text,
                            flag)
from .distributed import DIST_KVSTORES, HOROVOD, ShardStream, join_job
from .evaluate import evaluate
from .loss_scale import DynamicLossScale


# MXNet's kvstores for the gradient all-reduce that fit this trainer; dist_* and horovod:
# a job of several processes (see distributed.py). dist_async can't be one: its servers
# update the weights as each worker's gradient arrives, with no clipping of the sum.
KVSTORES = ('device', 'local', *DIST_KVSTORES, HOROVOD)
MAX_SEED = 2 ** 32 - 1
MIN_MAX_LEN = 5  # <cls> a <sep> b <sep>, one token per sentence
# the options --resume must not change (--steps may grow: the run continues to it)
TRAJECTORY = ('data', 'preset', 'config', 'batch_size', 'max_len', 'lr', 'warmup',
              'weight_decay', 'clip', 'optimizer', 'accumulate', 'seed', 'min_freq')


@dataclasses.dataclass
class PretrainOptions:
    """Every setting of a pretraining run; the CLI flags map onto these one to one.

    Constructing (and `pretrain`) checks every setting: a bad one raises a `ValueError`
    naming its flag, e.g. "--lr must be a finite number > 0, got nan".
    """
    data: str = 'bundled'
    preset: str = 'book'
    config: str = None
    batch_size: int = 64
    max_len: int = 64
    steps: int = 500
    lr: float = 1e-3
    warmup: int = 50
    weight_decay: float = 0.01
    clip: float = 1.0
    optimizer: str = 'bertadam'
    accumulate: int = 1
    gpus: str = None
    cpu: bool = False
    amp: bool = False
    eval_every: int = 100
    save_every: int = 100
    log_every: int = 10
    keep: int = 3
    out: str = None
    resume: bool = False
    overwrite: bool = False
    seed: int = 0
    kvstore: str = 'device'
    num_workers: int = 0
    min_freq: int = 5
    progress: bool = True
    plain: bool = False

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Raise a `ValueError` naming the flag of the first invalid setting."""
        for name in ('batch_size', 'steps', 'accumulate', 'log_every', 'keep', 'min_freq'):
            check_int(flag(name), getattr(self, name), 1)
        for name, note in (('warmup', ''), ('num_workers', ' (0: in this process)'),
                           ('eval_every', ' (0: only after the last step)'),
                           ('save_every', ' (0: only after the last step)')):
            check_int(flag(name), getattr(self, name), 0, note=note)
        check_int('--seed', self.seed, 0, MAX_SEED)
        check_number('--lr', self.lr, 0, inclusive=False)
        check_number('--weight-decay', self.weight_decay, 0)
        check_number('--clip', self.clip, 0, note=' (0: off)')
        check_choice('--preset', self.preset, tuple(SIZES))
        check_choice('--optimizer', self.optimizer, OPTIMIZERS)
        check_choice('--kvstore', self.kvstore, KVSTORES)
        check_text('--data', self.data)
        check_text('--config', self.config, optional=True)
        check_text('--out', self.out, optional=True)
        check_text('--gpus', self.gpus, optional=True)
        if self.gpus is not None:
            parse_gpu_ids(self.gpus)
        model_max_len = None if self.config else BERTConfig.d2l(1, self.preset).max_len
        check_int('--max-len', self.max_len, MIN_MAX_LEN, model_max_len)
        for name in ('cpu', 'amp', 'resume', 'overwrite', 'plain'):
            check_bool(flag(name), getattr(self, name))
        check_bool('progress', self.progress)


def check_sources(options):
    """--config and a local --data must exist: checked before the run folder is made."""
    if options.config and not os.path.isfile(options.config):
        raise RunError(f'--config {options.config}: no such file (a BERTConfig JSON '
                       'file)')
    named = ('bundled', *WIKITEXT_ARCHIVES)
    if options.data not in named and not os.path.exists(options.data):
        raise RunError(f'--data {options.data}: no such file or folder (or one of '
                       f'{", ".join(named)})')


def resolve_contexts(options):
    """The devices to train on (see `devices.training_contexts`)."""
    return training_contexts(options.cpu, options.gpus, options.amp)


def output_folder(options, worker):
    """The run's folder: the first worker prepares it and alone writes there; the
    others only read the checkpoint they resume from."""
    if worker.is_first:
        return prepare_out_dir(options, 'pretrain', 'bert-%Y%m%d-%H%M%S',
                               {'--data': options.data, '--config': options.config},
                               TRAJECTORY)
    if options.resume and not (options.out and ckpt.list_checkpoints(options.out)):
        raise RunError(f'--resume: worker {worker.rank} finds no complete checkpoint '
                       f'in --out {options.out} (every machine must see it: a shared '
                       'folder, or a copy at the same path)')
    return options.out


def build_config(options, vocab):
    if options.config:
        try:
            config = BERTConfig.from_json_file(options.config)
        except (OSError, ValueError) as error:
            raise RunError(f'--config {options.config}: {error}') from None
        if config.vocab_size != len(vocab):
            config = dataclasses.replace(config, vocab_size=len(vocab))
    else:
        config = BERTConfig.d2l(len(vocab), options.preset)
    if config.max_len < options.max_len:
        raise RunError(f'--max-len {options.max_len} exceeds the model\'s max_len '
                       f'{config.max_len}')
    return config


def check_resume_matches(checkpoint, config, vocab):
    """The run being resumed must use the same architecture and vocabulary."""
    saved_config, saved_vocab, state = ckpt.read_checkpoint_meta(checkpoint)
    if saved_config != config:
        diff = {k: (v, getattr(config, k)) for k, v in saved_config.to_dict().items()
                if getattr(config, k) != v}
        raise RunError(f'--resume: the model config differs from {checkpoint} '
                       f'(field: (saved, now)): {diff}')
    if saved_vocab != vocab:
        raise RunError(f'--resume: the vocabulary built from the data differs from '
                       f'{checkpoint}/vocab.json (different --data or --min-freq?)')
    return state


def pretrain(options):
    """Run pretraining; returns a summary dict (output folder, final metrics)."""
    options.validate()
    check_sources(options)
    ctxs = resolve_contexts(options)
    worker = join_job(options.kvstore)
    out = output_folder(options, worker)
    train_iter, vocab = load_data_wiki(
        options.batch_size, options.max_len, options.data, 'train', seed=options.seed,
        num_workers=options.num_workers, min_freq=options.min_freq, last_batch='discard')
    valid_iter, _ = load_data_wiki(
        options.batch_size, options.max_len, options.data, 'valid', vocab=vocab,
        seed=options.seed, shuffle=False)
    config = build_config(options, vocab)
    if options.amp:
        from mxnet.contrib import amp
        amp.init()
    net = BERTModel.from_config(config)
    mx.random.seed(options.seed)
    net.initialize(init.Normal(0.02), ctx=ctxs)
    if not options.plain and worker.kernels:
        fast.accelerate(net)
    net.collect_params().setattr('grad_req', 'add')  # gradients of all micro-batches add up
    trainer = make_trainer(net, options.optimizer, options.lr, options.weight_decay,
                           worker.kvstore)
    loss_scale = DynamicLossScale() if options.amp else None
    log = MetricsLog(out) if worker.is_first else None
    state = {'epoch': 0, 'index': 0, 'step': 0}
    if options.resume:
        checkpoint = ckpt.find_checkpoint(out)
        state = check_resume_matches(checkpoint, config, vocab)
        if state.get('seed') != options.seed:
            raise RunError(f'--resume: --seed {options.seed} differs from the seed '
                           f'{state.get("seed")} of {checkpoint}')
        net.load_parameters(os.path.join(checkpoint, 'model.params'), ctx=ctxs)
        load_trainer_states(trainer, os.path.join(checkpoint, 'trainer.states'))
        if worker.is_first:
            log.truncate(state['step'])
    elif worker.is_first:
        config.to_json_file(os.path.join(out, 'config.json'))
        vocab.save(os.path.join(out, 'vocab.json'))
    worker.share_parameters(trainer)
    net.hybridize(static_alloc=True, static_shape=True)
    stream = ShardStream(train_iter, state['epoch'], state['index'], worker.rank,
                         worker.num_workers)
    return _train_loop(options, net, trainer, loss_scale, ctxs, stream, valid_iter, log,
                       config, vocab, state['step'], out, worker)


def _train_loop(options, net, trainer, loss_scale, ctxs, stream, valid_iter, log, config,
                vocab, start_step, out, worker):
    from tqdm import tqdm
    progress = tqdm(total=options.steps, initial=start_step, unit='step',
                    disable=not (options.progress and worker.is_first), dynamic_ncols=True)
    losses = IntervalMeans(('mlm_loss', 'nsp_loss'))
    pairs, tic, last_eval = 0, time.time(), None
    for step in range(start_step + 1, options.steps + 1):
        batches = stream.next_step(options.accumulate)
        seed_step(options.seed, step, worker.rank)
        trainer.set_learning_rate(learning_rate(step, options.lr, options.warmup,
                                                options.steps))
        last = step == options.steps
        evaluate_now = last or due(step, options.eval_every)
        save_now = last or due(step, options.save_every)
        log_now = evaluate_now or save_now or due(step, options.log_every)
        metrics = forward_backward(net, batches, ctxs, with_accuracy=log_now,
                                   loss_scale=loss_scale.scale if loss_scale else 1.0,
                                   step_totals=worker.step_totals(batches))
        losses.add(metrics[:2])
        optimizer_step(net, trainer, options.clip, loss_scale)
        pairs += sum(len(b.nsp_labels) for b in batches)
        progress.update(1)
        if not log_now:
            continue
        record = worker.add_up(  # each worker holds its part of the job's means
            {'step': step, 'split': 'train', 'lr': trainer.learning_rate,
             **losses.pop_means(), 'mlm_accuracy': float(metrics[2]),
             'nsp_accuracy': float(metrics[3]), 'pairs': pairs},
            ('mlm_loss', 'nsp_loss', 'mlm_accuracy', 'nsp_accuracy', 'pairs'))
        if not all(math.isfinite(record[k]) for k in ('mlm_loss', 'nsp_loss')):
            progress.close()
            raise TrainingDiverged(
                f'loss became {record["mlm_loss"]}/{record["nsp_loss"]} (MLM/NSP) by step '
                f'{step}: stopped. The last good checkpoint is kept in {out}; try a lower '
                '--lr or --clip')
        record['pairs_per_second'] = record.pop('pairs') / (time.time() - tic)
        pairs, tic = 0, time.time()
        if not worker.is_first:
            continue
        log.write(record)
        progress.set_postfix(mlm=f'{record["mlm_loss"]:.3f}', nsp=f'{record["nsp_loss"]:.3f}',
                             mlm_acc=f'{record["mlm_accuracy"]:.3f}',
                             pairs_s=f'{record["pairs_per_second"]:.0f}')
        if evaluate_now:
            last_eval = {'step': step, 'split': 'valid', **evaluate(net, valid_iter, ctxs[0])}
            log.write(last_eval)
            progress.write(_format_eval(last_eval))
            tic = time.time()
        if save_now:
            _check_parameters_finite(net, step, out)
            ckpt.save_checkpoint(out, step, net, trainer, config, vocab,
                                 {**stream.position(), 'seed': options.seed}, options.keep)
            tic = time.time()
    progress.close()
    if worker.is_first:
        log.plot()
    return {'out': out, 'steps': options.steps, 'eval': last_eval, 'rank': worker.rank}


def _check_parameters_finite(net, step, out):
    """Never checkpoint parameters that an update has turned into NaN or inf."""
    total = sum(float(np.abs(p.data()).sum()) for p in net.collect_params().values())
    if not math.isfinite(total):
        raise TrainingDiverged(f'parameters became NaN/inf at step {step}: stopped without '
                               f'saving. The last good checkpoint is kept in {out}; try a '
                               'lower --lr or --clip')


def _format_eval(record):
    return (f'step {record["step"]}: held-out MLM accuracy {record["mlm_accuracy"]:.3f} '
            f'(most-frequent-token baseline {record["mlm_baseline_accuracy"]:.3f}), '
            f'perplexity {record["mlm_perplexity"]:.1f}, NSP accuracy '
            f'{record["nsp_accuracy"]:.3f}')
