"""d2lbert runs without GluonNLP and d2l (issue 51): they are the bench's peers
(`d2lbert.bench`) and test references only. In a process where neither can be
imported, every other module of the package imports, a `WordPieceVocab` tokenizes and a
model takes a BERTAdam step."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from test_inputs import minilm_folder
from test_interop_wordpiece import slow_tokenizer

TEXT = 'Unaffable café, [MASK]! 中国 naïve résumé'
SCRIPT = r'''
import importlib
import importlib.abc
import json
import os
import sys

BLOCKED = ('gluonnlp', 'd2l')


class Unimportable(importlib.abc.MetaPathFinder):
    """Refuses gluonnlp and d2l (and their submodules), installed or not, and notes
    each attempt (an import in a try block would go unseen otherwise)."""
    refused = []

    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            self.refused.append(name)
            raise ModuleNotFoundError(f'{name} is blocked by the test', name=name)
        return None


sys.meta_path.insert(0, Unimportable())

import d2lbert


def runtime_modules():
    """The names of d2lbert's modules but the bench's (and `__main__`, the command)."""
    root = os.path.dirname(d2lbert.__file__)
    for folder, _, files in os.walk(root):
        package = os.path.relpath(folder, os.path.dirname(root)).replace(os.sep, '.')
        for name in sorted(files):
            module = package if name == '__init__.py' else f'{package}.{name[:-3]}'
            if (name.endswith('.py') and not module.startswith('d2lbert.bench')
                    and module != 'd2lbert.__main__'):
                yield module


imported = [importlib.import_module(module).__name__ for module in runtime_modules()]

from d2lbert.data import WordPieceVocab
tokens = WordPieceVocab.load(sys.argv[1]).tokenize(sys.argv[2])

import mxnet as mx
from mxnet import autograd, np, npx
from d2lbert.model import BERTConfig, BERTModel
from d2lbert.run.optimizer import make_trainer

npx.set_np()  # for the loss computed here, outside d2lbert's blocks
mx.random.seed(0)
net = BERTModel.from_config(BERTConfig(vocab_size=100, num_hiddens=16, ffn_num_hiddens=32,
                                       num_heads=2, num_layers=1, max_len=16))
net.initialize(mx.init.Normal(0.02))
trainer = make_trainer(net, 'bertadam', lr=0.01)
before = {name: p.data().asnumpy() for name, p in net.collect_params().items()}
batch = (np.array([[1, 5, 6, 2, 7, 2, 0, 0], [1, 8, 9, 10, 2, 11, 12, 2]]),
         np.array([[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]]),
         np.array([6, 8]), np.array([[1, 4, 0], [2, 5, 6]]))
with autograd.record():
    loss = sum(output.sum() for output in net(*batch))
loss.backward()
trainer.step(1)
moved = sum(not (p.data().asnumpy() == before[name]).all()
            for name, p in net.collect_params().items())
print(json.dumps({'imported': imported, 'tokens': tokens, 'moved': moved,
                  'parameters': len(before),
                  'optimizer': type(trainer.optimizer).__module__,
                  'refused': Unimportable.refused}))
'''


def test_runtime_needs_neither_gluonnlp_nor_d2l():
    vocab_file = os.path.join(minilm_folder(), 'vocab.txt')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT,
                                                       os.environ.get('PYTHONPATH', '')]))
    done = subprocess.run([sys.executable, '-c', SCRIPT, vocab_file, TEXT], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {'d2lbert.cli', 'd2lbert.data.wordpiece', 'd2lbert.fast.optimizer',
            'd2lbert.run.optimizer', 'd2lbert.interop'} <= set(result['imported'])
    assert len(result['imported']) > 100
    assert result['tokens'] == slow_tokenizer(vocab_file, lowercase=True).tokenize(TEXT)
    assert result['optimizer'] == 'd2lbert.util.bert_adam'
    assert result['moved'] == result['parameters'] > 0
    assert result['refused'] == []
