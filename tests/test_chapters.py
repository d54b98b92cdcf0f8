"""The book chapters in chapter_bert/: no drift from the package, they run, and the
command that builds the book is the one the book documents.

* Every ```{.python .input}``` cell whose first line is `#@save` must be byte-identical
  (minus that line) to `inspect.getsource` of the d2lbert objects it defines.
* Every chapter runs top to bottom as a script in quick mode (D2LBERT_QUICK=1), on the
  CPU, offline, in a subprocess with a temp working dir and D2LBERT_HOME.
* `BOOK_COMMAND` (which builds the notebooks and the HTML book) is the one that
  chapter_bert/index.md and chapter_bert/README.md document; tests/test_book.py runs it.

The chapter scripts are subprocesses of one OpenMP thread each, run two at a time (one
per core of a two-core machine) as soon as the first is needed.
"""
import ast
import concurrent.futures
import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAPTER_DIR = os.path.join(ROOT, 'chapter_bert')


def toc_chapters():
    """The chapter files named in the ```toc``` block of chapter_bert/index.md, in order."""
    with open(os.path.join(CHAPTER_DIR, 'index.md'), encoding='utf-8') as f:
        block = re.search(r'^```toc\n(.*?)^```', f.read(), re.S | re.M)
    assert block, 'chapter_bert/index.md has no ```toc``` block'
    return [line.strip() + '.md' for line in block.group(1).split('\n')
            if line.strip() and not line.strip().startswith(':')]


CHAPTERS = toc_chapters()
CELL = re.compile(r'^```\{\.python \.input\}\n(.*?)^```$', re.S | re.M)
# The command that builds the book, as the book documents it (run from the repository
# root; tests/test_book.py runs it with --quick).
BOOK_COMMAND = 'python chapter_bert/tools/build_book.py'


def code_cells(name):
    with open(os.path.join(CHAPTER_DIR, name), encoding='utf-8') as f:
        return [cell.rstrip('\n') for cell in CELL.findall(f.read())]


def saved_cells():
    for name in CHAPTERS:
        for cell in code_cells(name):
            if cell.split('\n', 1)[0].strip() == '#@save':
                yield name, cell.split('\n', 1)[1]


def package_objects():
    """{name: [objects]} of the top-level functions and classes of d2lbert's modules."""
    import d2lbert
    found = {}
    for info in pkgutil.walk_packages(d2lbert.__path__, 'd2lbert.'):
        if '.bench' in info.name or info.name.endswith('__main__'):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001  (optional dependencies)
            continue
        for obj_name, obj in vars(module).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) \
                    and obj.__module__ == module.__name__:
                found.setdefault(obj_name, []).append(obj)
    return found


def test_chapters_have_code_and_saved_cells():
    assert os.path.isfile(os.path.join(CHAPTER_DIR, 'index.md'))
    assert {'transformer-encoder.md', 'bert.md', 'bert-dataset.md',
            'bert-pretraining.md'} <= set(CHAPTERS)
    for name in CHAPTERS:
        assert code_cells(name), name
    assert len(list(saved_cells())) >= 10


@pytest.mark.parametrize('chapter, code', list(saved_cells()),
                         ids=lambda v: v if v in CHAPTERS else None)
def test_saved_cell_matches_package_source(chapter, code):
    tree = ast.parse(code)
    defined = [node.name for node in tree.body
               if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert defined, f'{chapter}: #@save cell defines no function or class:\n{code[:200]}'
    objects = package_objects()
    sources = []
    for obj_name in defined:
        candidates = objects.get(obj_name)
        assert candidates, f'{chapter}: d2lbert has no function or class {obj_name!r}'
        texts = {inspect.getsource(obj).rstrip('\n') for obj in candidates}
        assert len(texts) == 1, f'{obj_name!r} is ambiguous in d2lbert'
        sources.append(texts.pop())
    expected = '\n\n\n'.join(sources)
    assert code == expected, (
        f'{chapter}: the #@save cell defining {defined} differs from the package source; '
        'copy the source into the chapter (or fix the package)')


def chapter_script(name):
    return '\n\n'.join(code_cells(name)) + '\n'


def run_quick(name, folder):
    """The finished process of chapter `name` run as a script in quick mode in `folder`,
    and what it left in its own temporary folder ($TMPDIR): [] if it cleaned up."""
    script = folder / (name[:-3].replace('-', '_') + '.py')
    script.write_text(chapter_script(name), encoding='utf-8')
    temporary = folder / 'tmp'
    temporary.mkdir()
    env = dict(os.environ, D2LBERT_QUICK='1', MPLBACKEND='Agg', OMP_NUM_THREADS='1',
               D2LBERT_HOME=str(folder / 'home'), CUDA_VISIBLE_DEVICES='',
               TMPDIR=str(temporary))
    work = folder / 'work'
    work.mkdir()
    result = subprocess.run([sys.executable, str(script)], cwd=work, env=env,
                            capture_output=True, text=True, timeout=300)
    return result, sorted(os.listdir(temporary))


# The longest first, so that the two lanes end at about the same time.
LONGEST_FIRST = ['bert-squad.md', 'bert-nli.md', 'bert-transfer.md', 'bert-fine-tuning.md',
                 'bert-pretraining.md',
                 'bert-fast.md', 'bert-fast-kernels.md', 'bert.md', 'bert-dataset.md',
                 'transformer-encoder.md']


def longest_first(name):
    """Sort key: a run's place in LONGEST_FIRST, chapters not listed last."""
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.fixture(scope='module')
def subprocess_runs(request, tmp_path_factory):
    """{chapter name: future of its finished process}, for the chapters this session's
    tests check, started two at a time."""
    wanted = set()
    for item in request.session.items:
        if item.originalname == 'test_chapter_runs_in_quick_mode':
            wanted.add(item.callspec.params['name'])
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    runs = {}
    for name in sorted(wanted, key=longest_first):
        folder = tmp_path_factory.mktemp(name.replace('.', '-'))
        runs[name] = pool.submit(run_quick, name, folder)
    yield runs
    pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize('name', CHAPTERS)
def test_chapter_runs_in_quick_mode(name, subprocess_runs):
    """It runs, and leaves nothing in the temporary folder (the book build's and the
    tests' runs would pile up in /tmp)."""
    result, left_in_tmp = subprocess_runs[name].result()
    assert result.returncode == 0, (
        f'{name} failed in quick mode:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}')
    assert left_in_tmp == [], f'{name} left {left_in_tmp} in its temporary folder'


@pytest.mark.parametrize('name', ['index.md', 'README.md'])
def test_the_book_documents_the_book_command(name):
    with open(os.path.join(CHAPTER_DIR, name), encoding='utf-8') as f:
        assert BOOK_COMMAND in f.read()
    assert os.path.isfile(os.path.join(ROOT, *BOOK_COMMAND.split()[1].split('/')))


@pytest.mark.parametrize('name', CHAPTERS)
def test_run_folders_have_names_the_book_can_print(name):
    """A chapter prints the paths of its runs, and a path ending in an underscore is a
    link in reStructuredText ("Unknown target name": the build fails). tempfile's random
    names hold underscores, one build in ~37 ended in one; util.files.numbered_folder
    names them runs/<chapter>-1, -2, ..."""
    source = '\n'.join(code_cells(name))
    assert not re.search(r'\bmkdtemp\(|TemporaryDirectory\(\)\.name', source), (
        f'{name} names a run folder with tempfile: use numbered_folder')
