"""MXNet's NumPy mode without `npx.set_np()`: every block class of the model and the
fast path is marked by one decorator (`util.numpy_mode.numpy_mode_block`), and the
caller's own training loop runs inside `d2lbert.numpy_mode()`, which leaves the
process's mode as it was."""
import inspect
import json
import os
import subprocess
import sys

import pytest
from mxnet.gluon import HybridBlock

import d2lbert
from d2lbert import fast, model
from d2lbert.model import precision
from d2lbert.util.numpy_mode import numpy_mode_block

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def block_classes():
    """Every HybridBlock class defined in d2lbert.model and d2lbert.fast."""
    found = set()
    for module in (model, fast, precision, *vars(model).values(), *vars(fast).values()):
        if inspect.ismodule(module) and module.__name__.startswith('d2lbert.'):
            found.update(obj for obj in vars(module).values()
                         if inspect.isclass(obj) and issubclass(obj, HybridBlock)
                         and obj.__module__.startswith(('d2lbert.model', 'd2lbert.fast')))
    return sorted(found, key=lambda cls: cls.__name__)


@pytest.mark.parametrize('block_class', block_classes(), ids=lambda cls: cls.__name__)
def test_every_block_class_computes_in_numpy_mode(block_class):
    """Its own methods and the inherited ones (`__call__`, `hybridize`, ...) are
    scoped to NumPy mode: the class carries the decorator."""
    for name in ('__init__', '__call__', 'hybridize', 'save_parameters', 'hybrid_forward'):
        method = inspect.getattr_static(block_class, name)
        assert getattr(method, 'in_numpy_mode', False), f'{block_class.__name__}.{name}'
    own = [value for name, value in vars(block_class).items()
           if inspect.isfunction(value) and not name.startswith('__')]
    assert all(getattr(method, 'in_numpy_mode', False) for method in own)
    assert len(block_classes()) >= 20


def test_the_decorator_wraps_a_method_once():
    @numpy_mode_block
    class Parent(HybridBlock):
        def hybrid_forward(self, F, x):
            return x

    @numpy_mode_block
    class Child(Parent):
        pass
    assert vars(Child).get('hybrid_forward') is None  # inherited as it was wrapped
    assert Child.hybrid_forward.__wrapped__.__name__ == 'hybrid_forward'
    assert not hasattr(Child.hybrid_forward.__wrapped__, '__wrapped__')


# A user's own training step in a fresh process that never calls set_np: the model's
# two losses summed, backward, a gluon.Trainer made and stepped, inside the context;
# then the mode is off and legacy mx.nd code runs.
OWN_LOOP = '''
import json
import mxnet as mx
from mxnet import autograd, gluon, np
import d2lbert
net = d2lbert.BERTModel(50, 16, 32, 2, 1, 0.0, max_len=8)
net.initialize(mx.init.Normal(0.2))
tokens = np.array([[2, 7, 9, 3], [4, 5, 3, 0]], dtype='int32')
segments = np.array([[0, 0, 1, 1], [0, 0, 1, 0]], dtype='int32')
valid_lens, positions = np.array([4, 3]), np.array([[1, 2], [1, 2]], dtype='int32')
weights, labels, nsp_labels = np.ones((2, 2)), np.array([[7, 9], [5, 3]]), np.array([0, 1])
losses = []
with d2lbert.numpy_mode():
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 0.01})
    for step in range(3):
        with autograd.record():
            mlm, nsp = net.pretraining_loss(tokens, segments, valid_lens, positions,
                                            weights, labels, nsp_labels)
            loss = mlm + nsp
        loss.backward()
        trainer.step(1)
        losses.append(loss.item())
legacy = mx.nd.ones((2, 3)) + mx.nd.ones((2, 3))
print(json.dumps({'losses': losses, 'np_mode': [mx.util.is_np_array(), mx.util.is_np_shape()],
                  'legacy': [type(legacy).__module__, float(legacy.sum().asscalar())]}))
'''


def test_a_training_step_of_ones_own_in_the_context_leaves_the_mode_off():
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS='ignore', OMP_NUM_THREADS='1')
    done = subprocess.run([sys.executable, '-c', OWN_LOOP], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report['np_mode'] == [False, False]
    assert report['legacy'] == ['mxnet.ndarray.ndarray', 12.0]
    assert report['losses'][-1] < report['losses'][0]


def test_numpy_mode_is_public_and_restores_the_mode_it_found():
    import mxnet as mx
    assert 'numpy_mode' in d2lbert.__all__ and d2lbert.numpy_mode.__doc__
    with mx.util.np_array(False), mx.util.np_shape(False):
        with d2lbert.numpy_mode():
            inside = [mx.util.is_np_array(), mx.util.is_np_shape()]
        after = [mx.util.is_np_array(), mx.util.is_np_shape()]
    assert inside == [True, True] and after == [False, False]
