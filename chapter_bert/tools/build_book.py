"""Build the book: the chapters as executed Jupyter notebooks and as HTML pages.

Run from anywhere with the project's Python (the one that imports d2lbert):

    python chapter_bert/tools/build_book.py           # the full book: _build/book/
    python chapter_bert/tools/build_book.py --quick   # tiny settings: _build/book-quick/

The output folder then holds
    eval/*.ipynb        the chapters as notebooks, executed, outputs and figures included
    html/index.html     the HTML book (navigation, code, outputs, figures, math), offline

The chapters are the pages listed in the toc of chapter_bert/index.md. The d2l book's
own builder, d2lbook 1.0.3, reads them: it lives in a virtual environment of its own
(_build/d2lbook-venv, made on first use from PyPI), because its pins (Sphinx, IPython)
differ from the project's; the notebooks run in the project's Python through a Jupyter
kernel named python3 that this script points at sys.executable. MathJax 3 is copied
into the pages (d2lbook loads it from a CDN) and so is the copy button's image, so the
pages need no network; run_d2lbook.py lists what else this book changes in d2lbook.
A second build reuses the notebooks whose chapter, figures and package code are
unchanged (d2lbook compares modification times); --clean starts over.
"""
import argparse
import fcntl
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
CHAPTER_DIR = os.path.dirname(TOOLS)
ROOT = os.path.dirname(CHAPTER_DIR)
BUILD_DIR = os.path.join(ROOT, '_build')
VENV = os.path.join(BUILD_DIR, 'd2lbook-venv')
# d2lbook 1.0.3 with the pybtex it is known to build these chapters with; the MathJax 3
# distribution comes in a wheel that holds it unchanged (installed without its Django).
BUILDER_PACKAGES = ['d2lbook==1.0.3', 'pybtex==0.24.0']
MATHJAX_PACKAGE = 'django-static-mathjax==3.2.2.1'
MATHJAX_FILE = os.path.join('mathjax', 'static', 'mathjax', 'es5', 'tex-svg.js')
COPY_BUTTON_SVG = os.path.join(TOOLS, 'copy-button.svg')
RUN_D2LBOOK = os.path.join(TOOLS, 'run_d2lbook.py')  # d2lbook with this book's changes
MARKER = '.d2lbert-book'  # marks a folder this script made, so a rebuild may write into it
ERRORS = 'notebook-errors'  # in the output folder: NAME.txt, why notebook NAME failed
ERROR_LINES = 60  # of each failed notebook's error, the last lines printed
TOC = re.compile(r'^```toc\n(.*?)^```', re.S | re.M)


class BuildError(Exception):
    """A problem the user can fix, reported as one line."""


def toc_chapters(index_path):
    """Names (without .md) of the chapters listed in the toc blocks of index.md."""
    with open(index_path, encoding='utf-8') as f:
        blocks = TOC.findall(f.read())
    names = [line.strip() for block in blocks for line in block.splitlines()
             if line.strip() and not line.strip().startswith(':')]
    missing = [n for n in names if not os.path.isfile(os.path.join(CHAPTER_DIR, n + '.md'))]
    if missing:
        raise BuildError(f'{index_path}: the toc lists {", ".join(missing)}, '
                         f'but there is no such chapter_bert/NAME.md')
    return names


def venv_python(venv):
    return os.path.join(venv, 'bin', 'python')


def ensure_builder(venv):
    """Make the virtual environment with d2lbook and MathJax unless it is complete."""
    stamp = os.path.join(venv, 'd2lbert-builder.json')
    wanted = BUILDER_PACKAGES + [MATHJAX_PACKAGE]
    if os.path.isfile(stamp):
        with open(stamp, encoding='utf-8') as f:
            if json.load(f) == wanted:
                return
    print(f'Installing {", ".join(wanted)} into {venv} (once)', flush=True)
    pip = [venv_python(venv), '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']
    steps = [] if os.path.isdir(venv) else [[sys.executable, '-m', 'venv', venv]]
    for step in steps + [pip + BUILDER_PACKAGES, pip + ['--no-deps', MATHJAX_PACKAGE]]:
        if subprocess.run(step).returncode != 0:
            raise BuildError(f'--venv {venv}: `{" ".join(step[-3:])}` failed '
                             f'(its messages are above)')
    with open(stamp, 'w', encoding='utf-8') as f:
        json.dump(wanted, f)


def site_packages(venv):
    out = subprocess.run([venv_python(venv), '-c', 'import sysconfig; '
                          'print(sysconfig.get_paths()["purelib"])'],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def prepare_out(out):
    """Create `out`, or accept it if an earlier build made it (never write into a folder
    of the user's), and lock it: the returned open file holds the lock until closed."""
    if os.path.islink(out) or (os.path.exists(out) and not os.path.isdir(out)):
        raise BuildError(f'--out {out}: not a folder (or a symlink); choose another one')
    if os.path.isdir(out) and os.listdir(out) and not os.path.isfile(os.path.join(out, MARKER)):
        raise BuildError(f'--out {out}: the folder exists, is not empty and was not made '
                         f'by this script; choose another one')
    os.makedirs(out, exist_ok=True)
    lock = open(os.path.join(out, MARKER), 'w')
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise BuildError(f'--out {out}: another build is writing into this folder') from None
    return lock


def package_version():
    """d2lbert's version (`d2lbert.__version__`), read without importing MXNet."""
    with open(os.path.join(ROOT, 'd2lbert', '__init__.py'), encoding='utf-8') as f:
        return re.search(r"^__version__ = '([^']+)'", f.read(), re.M).group(1)


def write_config(out, chapters):
    """d2lbook's config.ini in `out`: sources in chapter_bert/, outputs in `out`."""
    # Every file of the package (and this script) counts as a source of every notebook:
    # edit the code, and the next build runs the chapters again.
    package = os.path.relpath(os.path.join(ROOT, 'd2lbert'), CHAPTER_DIR)
    config = f"""[project]
name = d2lbert
title = d2lbert: BERT in MXNet Gluon
author = The d2lbert contributors
release = {package_version()}

[build]
index = index
notebooks = index.md {' '.join(name + '.md' for name in chapters)}
resources = img/ results/ d2lbert.bib
dependencies = tools/*.py tools/*.svg d2lbert.bib {package}/**/*.py {package}/**/*.cc {package}/**/*.h
source_dir = {CHAPTER_DIR}
output_dir = {out}
sphinx_configs = mathjax_path = 'mathjax/tex-svg.js'
    suppress_warnings = ['bibtex.duplicate_label']

[pdf]
bibfile = d2lbert.bib
"""
    with open(os.path.join(out, 'config.ini'), 'w', encoding='utf-8') as f:
        f.write(config)


def write_kernel(out):
    """A Jupyter kernel spec named python3 that runs this (the project's) Python."""
    kernel_dir = os.path.join(out, 'jupyter', 'kernels', 'python3')
    os.makedirs(kernel_dir, exist_ok=True)
    spec = {'argv': [sys.executable, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
            'display_name': 'Python 3 (d2lbert)', 'language': 'python'}
    with open(os.path.join(kernel_dir, 'kernel.json'), 'w', encoding='utf-8') as f:
        json.dump(spec, f, indent=1)
    return os.path.join(out, 'jupyter')


def builder_env(out, venv, quick):
    env = dict(os.environ)
    env['PATH'] = os.path.join(venv, 'bin') + os.pathsep + env.get('PATH', '')
    env['JUPYTER_PATH'] = write_kernel(out)
    # The notebooks run in out/eval/: they import d2lbert from this checkout.
    env['PYTHONPATH'] = os.pathsep.join(p for p in [ROOT, env.get('PYTHONPATH')] if p)
    env.pop('VIRTUAL_ENV', None)
    if quick:
        env['D2LBERT_QUICK'] = '1'
    else:
        env.pop('D2LBERT_QUICK', None)
    return env


def stage_static_files(out, venv):
    """MathJax and the copy button's image, for the pages' _static/ (Sphinx copies
    rst/_static/ there): the pages need no network."""
    static = os.path.join(out, 'rst', '_static')
    os.makedirs(os.path.join(static, 'mathjax'), exist_ok=True)
    shutil.copyfile(os.path.join(site_packages(venv), MATHJAX_FILE),
                    os.path.join(static, 'mathjax', 'tex-svg.js'))
    shutil.copyfile(COPY_BUTTON_SVG, os.path.join(static, 'copy-button.svg'))


def unbuilt(out, names):
    """The chapters in `names` whose executed notebook is missing or older than the
    chapter."""
    def stale(name):
        notebook = os.path.join(out, 'eval', name + '.ipynb')
        return (not os.path.isfile(notebook) or os.path.getmtime(notebook)
                < os.path.getmtime(os.path.join(CHAPTER_DIR, name + '.md')))
    return [name for name in names if stale(name)]


def notebook_errors(out, names):
    """What each notebook of `names` that failed left in out/notebook-errors/ (its
    failing cell and traceback: run_d2lbook.py writes them), its last ERROR_LINES lines,
    as one text; a notebook without a record is said to have none."""
    reports = []
    for name in names:
        path = os.path.join(out, ERRORS, name + '.txt')
        if os.path.isfile(path):
            with open(path, encoding='utf-8') as f:
                lines = f.read().rstrip('\n').splitlines()
            shown = lines[-ERROR_LINES:]
            cut = [f'({len(lines) - len(shown)} lines above cut)'] * (len(shown) < len(lines))
            reports.append('\n'.join([f'--- {name}: its error ---', *cut, *shown]))
        else:
            reports.append(f'--- {name}: no error recorded (its process ended without one: '
                           f'killed?); see the messages above ---')
    return '\n'.join(reports)


def build(out, quick, venv, clean):
    """Build the notebooks and the HTML pages of the book into `out`."""
    if shutil.which('pandoc') is None:
        raise BuildError('pandoc not found: install it (Debian: apt-get install pandoc)')
    if importlib.util.find_spec('ipykernel') is None:
        raise BuildError(f'ipykernel not found in {sys.executable}, which runs the notebooks: '
                         f'pip install ipykernel')
    chapters = toc_chapters(os.path.join(CHAPTER_DIR, 'index.md'))
    with prepare_out(out):
        if clean:
            for sub in ['eval', 'rst', 'html']:
                shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
        ensure_builder(venv)
        write_config(out, chapters)
        stage_static_files(out, venv)
        env = builder_env(out, venv, quick)
        shutil.rmtree(os.path.join(out, ERRORS), ignore_errors=True)
        started = time.time()
        done = subprocess.run([venv_python(venv), RUN_D2LBOOK, 'build', 'html'], cwd=out, env=env)
        if done.returncode != 0:
            failed = unbuilt(out, ['index'] + chapters)
            if failed:
                print(notebook_errors(out, failed), file=sys.stderr)
            raise BuildError(f'd2lbook build html failed (exit {done.returncode}; chapters '
                             f'without an up-to-date notebook: {", ".join(failed) or "none"}'
                             f'{": their errors are above" if failed else "; see its messages"})')
        print(f'Built {len(chapters)} chapters in {time.time() - started:.0f} s:\n'
              f'  notebooks  {os.path.join(out, "eval")}/*.ipynb\n'
              f'  HTML book  {os.path.join(out, "html", "index.html")}')


def checked_out(out, venv):
    """--out as d2lbert's commands check an output (`d2lbert.run.files.check_output`):
    never through a link however spelled, never holding the chapters or --venv."""
    if out is None:
        return None
    from d2lbert.run.errors import RunError
    from d2lbert.run.files import check_output
    try:
        return check_output('--out', out, {'--venv': venv, 'the chapters': CHAPTER_DIR})
    except RunError as err:
        sys.exit(f'build_book: {err}')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='tiny settings (D2LBERT_QUICK=1; also when that variable is set)')
    parser.add_argument('--out', help='output folder (default _build/book, '
                                      'or _build/book-quick with --quick)')
    parser.add_argument('--clean', action='store_true',
                        help='run every notebook again instead of reusing unchanged ones')
    parser.add_argument('--venv', default=VENV,
                        help=f'virtual environment of d2lbook (default {VENV})')
    parser.add_argument('--setup', action='store_true',
                        help='only install d2lbook and MathJax into --venv (CI does this '
                             'before the tests)')
    args = parser.parse_args(argv)
    quick = args.quick or bool(os.environ.get('D2LBERT_QUICK'))
    out = os.path.abspath(checked_out(args.out, args.venv) or os.path.join(
        BUILD_DIR, 'book-quick' if quick else 'book'))
    try:
        if args.setup:
            ensure_builder(os.path.abspath(args.venv))
        else:
            build(out, quick, os.path.abspath(args.venv), args.clean)
    except BuildError as err:
        sys.exit(f'build_book: {err}')


if __name__ == '__main__':
    main()
