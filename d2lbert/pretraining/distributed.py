"""Data-parallel pretraining over several processes, on one machine or several.

Every worker process runs the same training loop on its own share of the data; MXNet's
parameter server (ps-lite, `--kvstore dist_sync`) or Horovod (`--kvstore horovod`,
`horovod_store.py`) adds up the workers' gradients. Three rules make the job's update
exactly the update of one process that reads all the workers' batches (with
`--accumulate` times more of them):

* **Sharding.** The single process reads one stream of batches: epoch 0's batches in
  order, then epoch 1's, and so on. A step of the job takes the next
  `accumulate * num_workers` batches of that stream; worker `r` takes those at offsets
  `r, r + W, r + 2W, ...` (W workers). So in every epoch each batch is read by exactly
  one worker (none twice, none skipped), and every worker knows the job's position in
  the stream: the checkpoint stores it (it does not depend on the number of workers),
  and a resumed job continues there.
* **Weighting.** Each device weights its loss by its share of the prediction slots
  (MLM) and sentence pairs (NSP) of the *whole job's* step (`Worker.step_totals` adds
  up the workers' counts), and the kvstore sums the gradients over devices and workers:
  the sum is the gradient of the mean loss over the job's batch. Every worker then holds
  the same summed gradient, clips its global norm, and makes the same update.
* **One writer.** Only the first worker (rank 0) writes checkpoints, metrics and the
  plot; the workers' logged losses are added up (`Worker.add_up`) before it writes them.
  It also decides for the job whether a --resume continues from a checkpoint or starts
  over, and which vocabulary every worker reads the text with (`Worker.broadcast`,
  `Worker.share_vocabulary`).

`d2lbert launch` (in `d2lbert.launch`) starts the processes of a ps-lite job,
Horovod's `horovodrun` those of a Horovod job.
"""
import atexit
import dataclasses
import os
import warnings

import numpy as onp

from ..data.vocab_files import vocab_as_bytes, vocab_from_bytes
from ..util.exit import exit_at_once, flush_output

# The kvstores that make a job of several worker processes: MXNet's parameter server's,
# and Horovod's.
DIST_KVSTORES = ('dist_sync', 'dist_device_sync')
HOROVOD = 'horovod'
# What horovodrun (or Open MPI's mpirun, or another PMI launcher) sets: the job's size.
HOROVOD_SIZE_VARIABLES = ('HOROVOD_SIZE', 'OMPI_COMM_WORLD_SIZE', 'PMI_SIZE')
HOROVOD_INSTALL = ('HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 '
                   'HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 '
                   'pip install --no-build-isolation horovod==0.28.1')  # .ci/run's
# What `d2lbert launch` (or MXNet's own launcher) sets in every process of a ps-lite job.
DMLC_VARIABLES = ('DMLC_ROLE', 'DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT', 'DMLC_NUM_SERVER',
                  'DMLC_NUM_WORKER')
# The exit code of a worker that leaves a ps-lite job unfinished (`leave_unless_done`).
LEFT_UNFINISHED = 1
# kvstore keys of the small vectors that workers add up; the Trainer's keys are the
# parameter indices 0, 1, 2, ...
SUM_KEY_BASE = 1_000_000_000
# `Worker.broadcast_bytes` sends a length as two digits of this base, each exact in float32.
BYTES_LENGTH_DIGIT = 2 ** 16


class DistributedError(ValueError):
    """This process can't take part in the job it was asked to join."""


@dataclasses.dataclass
class Worker:
    """This process's place in a data-parallel job.

    rank: 0 for the first worker (the one that writes), ..., num_workers - 1.
    kvstore: what the Trainer all-reduces the gradients with: a kvstore name for one
        process ('device', 'local'), else the job's created kvstore.
    summed_keys: the kvstore keys `sum` has created.
    kernels: whether d2lbert's C++ kernels (`fast.accelerate`) can run in this process.
    done: whether its training has ended well (see `leave_unless_done`).
    """
    rank: int = 0
    num_workers: int = 1
    kvstore: object = 'device'
    kernels: bool = True
    summed_keys: set = dataclasses.field(default_factory=set, repr=False)
    done: bool = False

    @property
    def is_first(self):
        return self.rank == 0

    def sum(self, values):
        """The element-wise sum over all workers of a list of floats (every worker must
        call this at the same point of the loop, with as many values)."""
        if self.num_workers == 1:
            return [float(v) for v in values]
        return [float(v) for v in self.sum_array(onp.asarray(values, dtype=onp.float32))]

    def sum_array(self, values):
        """`sum` of a float32 NumPy array (of any length), as a float32 NumPy array."""
        if self.num_workers == 1:
            return values
        from mxnet import nd
        key = SUM_KEY_BASE + len(values)
        if key not in self.summed_keys:  # a kvstore key is created once, by all workers
            self.kvstore.init(key, nd.zeros(len(values)))
            self.summed_keys.add(key)
        total = nd.zeros(len(values))
        self.kvstore.pushpull(key, nd.array(values), out=total)
        return total.asnumpy()

    def broadcast(self, values):
        """The first worker's list of numbers, on every worker (every worker must call
        this at the same point, with as many values; exact for integers below 2**24, as
        the kvstore adds up float32s)."""
        return self.sum(values if self.is_first else [0] * len(values))

    def broadcast_bytes(self, data):
        """The first worker's bytes `data`, on every worker (the others pass b''; each
        call of every worker at the same point): its length in two numbers below 2**24
        (exact up to 2**40 bytes), then one number per byte."""
        high, low = self.broadcast(list(divmod(len(data), BYTES_LENGTH_DIGIT)))
        size = int(high) * BYTES_LENGTH_DIGIT + int(low)
        numbers = onp.frombuffer(data, dtype=onp.uint8) if self.is_first else onp.zeros(
            size, dtype=onp.uint8)
        return self.sum_array(numbers.astype(onp.float32)).astype(onp.uint8).tobytes()

    def share_vocabulary(self, vocab):
        """The first worker's vocabulary, on every worker: the first passes its own, the
        others None (each call of every worker at the same point). It is sent as the
        bytes of its files (`vocab_as_bytes`, `broadcast_bytes`)."""
        if self.num_workers == 1:
            return vocab
        data = self.broadcast_bytes(vocab_as_bytes(vocab) if self.is_first else b'')
        return vocab if self.is_first else vocab_from_bytes(data)

    def step_totals(self, batches):
        """(prediction slots, sentence pairs) of one step of the whole job, given this
        worker's batches of the step; None for a single process (the batches' own)."""
        if self.num_workers == 1:
            return None
        slots = sum(float(batch.mlm_weights.sum()) for batch in batches)
        pairs = sum(len(batch.nsp_labels) for batch in batches)
        return tuple(self.sum([slots, pairs]))

    def share_parameters(self, trainer):
        """Have the Trainer give every worker the first worker's parameters now, before
        the first step.

        The Trainer does it lazily, in its first `allreduce_grads`, where pulling a
        parameter and push-pulling its gradient are independent engine operations: a
        worker whose gradient reached the server first pulled the gradients' sum as the
        parameter (seen here in one of the first eight 2-worker jobs, on the NSP head,
        whose gradients come first). Done before the first step, the first forward pass
        waits for the pulls.
        `save_states` is the Trainer's public call that sets up its kvstore (the states,
        still empty, go to /dev/null).
        """
        if self.num_workers > 1:
            trainer.save_states(os.devnull)

    def add_up(self, record, names):
        """record with the values of `names` replaced by their sum over the workers."""
        return {**record, **dict(zip(names, self.sum([record[n] for n in names])))}


def join_job(kvstore):
    """This process's `Worker` in a job using `kvstore` (a --kvstore name).

    For a `DIST_KVSTORES` name, creates MXNet's distributed kvstore, which waits until
    the scheduler, every server and every worker of the job have started; its rank
    (the scheduler's, in no particular order) decides which worker is the first.
    """
    if kvstore == HOROVOD:
        return join_horovod_job()
    if kvstore not in DIST_KVSTORES:
        if os.environ.get('DMLC_ROLE') == 'worker':
            raise DistributedError(
                f'this process is a worker of a job (DMLC_ROLE=worker) but --kvstore is '
                f'{kvstore}: pass --kvstore {DIST_KVSTORES[0]} (else each worker would train '
                'alone)')
        return Worker(kvstore=kvstore)
    check_dmlc_environment(kvstore)
    import mxnet as mx
    store = mx.kv.create(kvstore)
    worker = Worker(store.rank, store.num_workers, store)
    JOINED_WORKERS.append(worker)
    atexit.register(leave_unless_done, worker)  # (which keeps the kvstore until then)
    return worker


# The ps-lite workers this process has joined a job as (`join_job`), for `leave_job`.
JOINED_WORKERS = []


def leave_job(exit_code):
    """The end of a command, with the code it exits with: a ps-lite worker whose training
    did not end well (an error, a signal) runs the exit handlers now (`atexit`'s: the
    run's lock and leftovers, logging's, MXNet's, multiprocessing's...), then exits at
    once with exit_code, skipping Python's teardown. There MXNet's kvstore would wait
    for every process of the job (ps-lite's `Finalize`), which wait for this worker's
    gradients: the job would hang instead of stopping (`d2lbert launch` stops it when a
    process exits with an error)."""
    if any(not worker.done for worker in JOINED_WORKERS):
        atexit.unregister(leave_unless_done)
        exit_at_once(exit_code)


def leave_unless_done(worker):
    """At the exit of a ps-lite worker whose training did not end well where no command
    called `leave_job` (a Python program calling `pretrain`): exit at once, with code
    `LEFT_UNFINISHED`, its error message printed, the exit handlers registered before
    `join_job` skipped (see `leave_job`)."""
    if not worker.done:
        flush_output()
        os._exit(LEFT_UNFINISHED)


def join_horovod_job():
    """This process's `Worker` in a job started by horovodrun.

    Refuses to run outside one: there, Horovod would make a job of this process alone
    (and MXNet's own `kvstore='horovod'` is a local kvstore), which trains but is not
    the job that was asked for.
    """
    size = next((os.environ[name] for name in HOROVOD_SIZE_VARIABLES if os.environ.get(name)),
                None)
    if size is None:
        raise DistributedError(
            f'--kvstore {HOROVOD} runs in a job started by horovodrun, e.g. horovodrun -np 2 '
            f'-H localhost:2 d2lbert pretrain --kvstore {HOROVOD} ... (none of '
            f'{", ".join(HOROVOD_SIZE_VARIABLES)} is set here)')
    try:
        import horovod.mxnet as hvd
    except ImportError as error:
        raise DistributedError(f'--kvstore {HOROVOD} needs Horovod built for MXNet ({error}): '
                               f'{HOROVOD_INSTALL}') from None
    from .horovod_store import HorovodStore
    hvd.init()
    if not hvd.is_initialized() or hvd.size() != int(size):
        raise DistributedError(f'--kvstore {HOROVOD}: Horovod sees {hvd.size()} process(es), '
                               f'the launcher started {size}')
    if hvd.rank() == 0:
        warnings.warn("d2lbert: with Horovod, training runs on MXNet's own operators (same "
                      "numbers, slower): Horovod's MXNet library and d2lbert's C++ kernels "
                      'crash together in one process (SIGFPE or free(): invalid pointer)')
    return Worker(hvd.rank(), hvd.size(), HorovodStore(hvd), kernels=False)


def check_dmlc_environment(kvstore):
    """A ps-lite worker needs the DMLC_* variables (without them MXNet aborts)."""
    missing = [name for name in DMLC_VARIABLES if not os.environ.get(name)]
    if missing:
        raise DistributedError(
            f'--kvstore {kvstore} runs in a job of several processes, but {", ".join(missing)} '
            f'{"is" if len(missing) == 1 else "are"} not set: start the job with '
            f'`d2lbert launch -n WORKERS -- d2lbert pretrain ... --kvstore {kvstore}`')
    if os.environ['DMLC_ROLE'] != 'worker':
        raise DistributedError(f'--kvstore {kvstore}: DMLC_ROLE is '
                               f'{os.environ["DMLC_ROLE"]!r}; a training process is a worker')


class ShardStream:
    """One worker's batches of every step, from the job's position (epoch, index) in the
    stream of batches a single process reads (see the module's docstring).

    With one worker it is that stream itself.
    """

    def __init__(self, data_iter, epoch=0, index=0, rank=0, num_workers=1):
        self.data_iter, self.rank, self.num_workers = data_iter, rank, num_workers
        self.epoch_size = len(data_iter)
        self.read = epoch * self.epoch_size + index  # batches of the stream read by the job
        self._next, self._batches = None, None  # position of _batches' next batch

    def next_step(self, accumulate=1):
        """This worker's `accumulate` batches of the job's next step."""
        start = self.read + self.rank
        batches = [self._batch(start + i * self.num_workers) for i in range(accumulate)]
        self.read += accumulate * self.num_workers
        return batches

    def _batch(self, position):
        """Batch number `position` of the stream (epoch position // epoch size)."""
        if position != self._next:
            epoch, index = divmod(position, self.epoch_size)
            self._batches = self.data_iter.batches(epoch, index, every=self.num_workers)
        batch = next(self._batches, None)
        if batch is None:  # this worker's last batch of the epoch was read
            self._next = None
            return self._batch(position)
        self._next = position + self.num_workers
        return batch

    def position(self):
        """The job's next unread batch: {'epoch', 'index'} (the same on every worker)."""
        epoch, index = divmod(self.read, self.epoch_size)
        return {'epoch': epoch, 'index': index}
