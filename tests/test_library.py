"""d2lbert as a library: importing it changes nothing of the process, its blocks run in
any NumPy mode beside legacy `mx.nd` code, and its public names are declared and
documented (`d2lbert.__all__`)."""
import ast
import inspect
import json
import os
import re
import subprocess
import sys

import pytest

import d2lbert

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A fresh process: the environment and NumPy mode before and after `import d2lbert`
# and a forward call of a d2lbert block, then a legacy Gluon block on mx.nd arrays.
PROCESS_CHECK = '''
import json, os
import mxnet as mx
before = dict(os.environ)
import d2lbert
from d2lbert import BERTModel
net = BERTModel(50, 16, 32, 2, 1, 0.0, max_len=8)
net.initialize()
tokens = mx.np.array([[2, 7, 9, 3]], dtype='int32')
encoded, mlm, nsp = net(tokens, mx.np.zeros((1, 4), dtype='int32'), mx.np.array([3]),
                        mx.np.array([[1, 2]], dtype='int32'))
net.hybridize()
hybridized = net(tokens, mx.np.zeros((1, 4), dtype='int32'), mx.np.array([3]))[0]
dense = mx.gluon.nn.Dense(3)
dense.initialize()
legacy = dense(mx.nd.ones((2, 4)))
print(json.dumps({
    'changed': sorted(k for k in set(before) | set(os.environ)
                      if before.get(k) != os.environ.get(k)),
    'np_mode': [mx.util.is_np_array(), mx.util.is_np_shape()],
    'shapes': [encoded.shape, mlm.shape, nsp.shape, hybridized.shape],
    'types': [type(encoded).__module__, type(legacy).__module__]}))
'''


def run_check(home, code=PROCESS_CHECK):
    env = {k: v for k, v in os.environ.items()
           if k not in ('OMP_NUM_THREADS', 'GOMP_SPINCOUNT', 'OPENBLAS_CORETYPE')}
    env.update(HOME=str(home), PYTHONPATH=ROOT, PYTHONWARNINGS='ignore')
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=str(home) if home != '/proc' else None)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_and_a_block_change_nothing_global(tmp_path):
    """No environment variable changes, NumPy mode stays off, nothing is written under
    HOME; the block computes in NumPy mode and legacy code beside it in legacy mode."""
    home = tmp_path / 'home'
    home.mkdir()
    report = run_check(home)
    assert report['changed'] == []
    assert report['np_mode'] == [False, False]
    assert report['shapes'] == [[1, 4, 16], [1, 2, 50], [1, 2], [1, 4, 16]]
    assert report['types'] == ['mxnet.numpy', 'mxnet.ndarray.ndarray']
    assert list(home.iterdir()) == []


def test_an_unwritable_home_does_not_break_the_import():
    assert run_check('/proc')['np_mode'] == [False, False]


def test_import_loads_nothing_until_a_name_is_used():
    code = ('import sys, d2lbert; print(sorted(m for m in sys.modules '
            'if m.split(".")[0] in ("mxnet", "d2lbert")))')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    assert done.stdout.split() == ["['d2lbert']"]


@pytest.mark.parametrize('name', d2lbert.__all__)
def test_every_public_name_resolves_and_is_documented(name):
    value = getattr(d2lbert, name)
    if name == '__version__':
        return
    assert inspect.getdoc(value), f'd2lbert.{name} has no docstring'


def test_the_api_holds_the_blocks_and_the_model_io():
    expected = {'BERTEncoder', 'MaskLMDecoder', 'NextSentenceClassifier', 'BERTModel',
                'BERTClassifier', 'BERTTagger', 'BERTForQuestionAnswering', 'BERTConfig',
                'load_pretrained', 'save_pretrained', 'encode_batch', '__version__'}
    assert expected <= set(d2lbert.__all__)
    assert len(set(d2lbert.__all__)) == len(d2lbert.__all__)


def test_the_version_is_in_the_changelog():
    with open(os.path.join(ROOT, 'docs', 'changelog.md'), encoding='utf-8') as f:
        assert f'## {d2lbert.__version__}' in f.read()
    assert os.path.isfile(os.path.join(ROOT, 'LICENSE'))


def setup_keywords():
    """The keywords setup.py passes to `setup()`, read from its syntax tree (so nothing
    at build time can decide them)."""
    with open(os.path.join(ROOT, 'setup.py'), encoding='utf-8') as f:
        tree = ast.parse(f.read())
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, 'id', None) == 'setup')
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords
            if keyword.arg in ('install_requires', 'extras_require', 'version')}


def test_the_blocks_install_without_the_book_and_the_bench():
    keywords = setup_keywords()
    names = [requirement.split('=')[0].split('<')[0].split('>')[0].split('[')[0].strip()
             for requirement in keywords['install_requires']]
    assert not {'d2l', 'gluonnlp'} & set(names)
    assert {'book', 'bench', 'hf', 'test'} <= set(keywords['extras_require'])
    assert keywords['version'] == d2lbert.__version__


def test_the_api_page_describes_every_public_name():
    """chapter_bert/api.md (a page of the book, run like the chapters) prints the
    documentation of every name of `__all__`, each once."""
    with open(os.path.join(ROOT, 'chapter_bert', 'api.md'), encoding='utf-8') as f:
        tree = ast.parse('\n'.join(re.findall(r'^```\{\.python \.input\}\n(.*?)^```$',
                                              f.read(), re.S | re.M)))
    described = [arg.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, 'id', None) == 'describe' for arg in node.args]
    assert sorted(described) == sorted(set(d2lbert.__all__) - {'__version__'})
