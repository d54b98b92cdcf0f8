"""`--kvstore horovod`: Horovod's allreduce behind MXNet's kvstore interface.

MXNet 1.9 has no Horovod kvstore: `mx.kv.create('horovod')` quietly returns a *local*
kvstore, and every process would train alone. `HorovodStore` gives the Gluon Trainer
(and `distributed.Worker`) the three calls they make, done by Horovod across the
processes that `horovodrun` started: `broadcast` (the first worker's initial
parameters to all), `pushpull` (the sum of every worker's gradients, in place) and
`init` (nothing to do: an allreduce keeps no value between calls). It updates nothing
itself (`is_capable('optimizer')` is False), so each worker clips and updates with the
summed gradient, as with ps-lite's `dist_sync`.
"""
from mxnet.kvstore import KVStoreBase


class HorovodStore(KVStoreBase):
    """A kvstore whose push-pull is Horovod's allreduce (sum); hvd: `horovod.mxnet`,
    initialized."""

    def __init__(self, hvd):
        self.hvd = hvd

    @property
    def type(self):
        return 'horovod'

    @property
    def rank(self):
        return self.hvd.rank()

    @property
    def num_workers(self):
        return self.hvd.size()

    def is_capable(self, capability):
        return False  # no optimizer here: the workers update

    def init(self, key, value):
        """Nothing to store: an allreduce needs no initial value."""

    def broadcast(self, key, value, out, priority=0):
        """Every worker's `out` (an array or a list, one per device) gets the first
        worker's `value`."""
        self.hvd.broadcast_(value, root_rank=0, name=f'broadcast.{key}', priority=priority)
        for array in (out if isinstance(out, (list, tuple)) else [out]):
            if array is not value:
                value.copyto(array)

    def pushpull(self, key, value, out=None, priority=0):
        """`out` (default: `value`, in place) gets the sum over all workers and all
        devices of `value` (an array or a list, one per device)."""
        values = value if isinstance(value, (list, tuple)) else [value]
        total = values[0]
        if len(values) > 1:
            total = values[0].copy()
            for array in values[1:]:
                total += array.as_in_context(total.context)
        self.hvd.allreduce_(total, op=self.hvd.Sum, name=f'pushpull.{key}',
                            priority=priority)
        outs = values if out is None else (out if isinstance(out, (list, tuple)) else [out])
        for array in outs:
            if array is not total:
                total.copyto(array)

    def set_optimizer(self, optimizer):
        raise NotImplementedError('HorovodStore updates nothing: the workers do')

    def save_optimizer_states(self, fname, dump_optimizer=False):
        raise NotImplementedError('HorovodStore holds no optimizer states')

    def load_optimizer_states(self, fname):
        raise NotImplementedError('HorovodStore holds no optimizer states')
