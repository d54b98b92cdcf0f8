"""The package's layers import in one direction only (`d2lbert/__init__.py` lists them):
a reader's model never depends on the fast path, the data pipeline or training; the run
layer is shared by pretraining and fine-tuning, which never import each other."""
import ast
import os
import re
import subprocess
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'd2lbert')
# layer: the layers of d2lbert it may import (besides itself)
ALLOWED = {
    'util': set(),
    'model': {'util'},
    'fast': {'model', 'util'},
    'data': {'util'},
    'run': {'model', 'data', 'util'},  # the fast path is handed in (`run/setup.py`)
    'pretraining': {'run', 'model', 'fast', 'data', 'util'},
    'finetuning': {'run', 'model', 'fast', 'data', 'util'},
}


def sources():
    """{path relative to the package: source text} of every Python module."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                with open(path, encoding='utf-8') as f:
                    found[os.path.relpath(path, PACKAGE)] = f.read()
    return found


def module_name(relative_path):
    """'model/bert.py' -> 'd2lbert.model.bert'; 'model/__init__.py' -> 'd2lbert.model'."""
    parts = ['d2lbert'] + relative_path[:-3].split(os.sep)
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def imported_modules(relative_path, text):
    """The absolute names of the modules a module imports (top level or in functions)."""
    module = module_name(relative_path)
    package = module if relative_path.endswith('__init__.py') else module.rpartition('.')[0]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split('.')
            if node.level:
                base = base[:len(base) - node.level + 1]
                name = '.'.join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            yield name
            yield from (f'{name}.{alias.name}' for alias in node.names)


def layer_of(module):
    """'model' for d2lbert.model.*, ...; None outside the layered folders."""
    parts = module.split('.')
    if parts[0] != 'd2lbert' or len(parts) < 2 or parts[1] not in ALLOWED:
        return None
    return parts[1]


def violations(texts):
    """One line for each module and layer it may not import but does."""
    found = set()
    for relative_path, text in texts.items():
        module = module_name(relative_path)
        layer = layer_of(module)
        if layer is None:
            continue
        for name in imported_modules(relative_path, text):
            other = layer_of(name)
            if name.split('.')[0] == 'd2lbert' and other is None and len(name.split('.')) > 1:
                other = name.split('.')[1]  # interop, bench, cli: above every layer
            if other is not None and other != layer and other not in ALLOWED[layer]:
                found.add(f'{module} imports d2lbert.{other} ({layer}/ may import '
                          f'{sorted(ALLOWED[layer]) or "nothing of d2lbert"})')
    return sorted(found)


def test_layers_import_in_one_direction():
    assert violations(sources()) == []


@pytest.mark.parametrize('path, line', [('model/bert.py', 'from ..fast import kernels'),
                                        ('util/checks.py', 'from ..model import BERTModel'),
                                        ('data/vocab.py', 'from ..run import step'),
                                        ('fast/model.py', 'import d2lbert.data'),
                                        ('run/step.py', 'from ..finetuning import task_step'),
                                        ('run/setup.py', 'from .. import fast'),
                                        ('finetuning/finetune.py',
                                         'from ..pretraining.pretrain import pretrain'),
                                        ('pretraining/pretrain.py',
                                         'from d2lbert.finetuning import predict')])
def test_a_forbidden_import_is_found(path, line):
    """The checker itself: one forbidden import added to a module is reported."""
    texts = sources()
    texts[path] += f'\n\ndef late():\n    {line}\n'
    assert len(violations(texts)) == 1


def test_importing_the_model_loads_no_other_layer():
    """`import d2lbert.model` (and `import d2lbert`) load the book's blocks and util only:
    the fast path, the data pipeline and training load when first used."""
    code = ('import sys, d2lbert.model; print(" ".join(sorted({m.split(".")[1] for m in '
            'sys.modules if m.startswith("d2lbert.")})))')
    loaded = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded == ['model', 'util']


def test_lazy_top_level_names_load_their_layer():
    """`d2lbert.Vocab`, `d2lbert.fast`, ... still work, from the layer that defines them."""
    import d2lbert
    from d2lbert import data, fast, interop, run
    assert d2lbert.fast is fast and d2lbert.Vocab is data.Vocab
    assert d2lbert.load_pretrained is interop.load_pretrained and d2lbert.try_gpu is run.try_gpu
    with pytest.raises(AttributeError, match='no_such_name'):
        d2lbert.no_such_name


def calls_of(text, name):
    """The lines of the calls of a function or method `name` in a module's source."""
    return [node.lineno for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)
            and name in (getattr(node.func, 'id', None), getattr(node.func, 'attr', None))]


def test_the_fast_path_is_handed_to_the_run_layer():
    """run/ never asks which modules were imported (`sys.modules`): whoever runs the fast
    path hands it in, and `run/setup.py` is the one place outside fast/ that switches a
    model to it."""
    texts = sources()
    assert [path for path, text in texts.items()
            if path.startswith('run' + os.sep) and 'sys.modules' in text] == []
    callers = {path: len(calls_of(text, 'accelerate')) for path, text in texts.items()
               if not path.startswith('fast' + os.sep) and calls_of(text, 'accelerate')}
    assert callers == {os.path.join('run', 'setup.py'): 1}


def test_the_book_model_says_nothing_of_the_fast_path():
    """model/ (the book's blocks, mixed precision included) names neither the fast path
    nor its kernels: precision and the fast path meet through `link_reduced_layers`."""
    mention = re.compile(r'd2lbert\.fast|\bfast path|\bfast\.|kernel|accelerat', re.I)
    assert [f'{path}: {found.group()}' for path, text in sources().items()
            if path.startswith('model' + os.sep) for found in mention.finditer(text)] == []
