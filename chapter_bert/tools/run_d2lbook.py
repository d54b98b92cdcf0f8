"""d2lbook 1.0.3's command line, with the changes this book needs.

build_book.py runs it with the Python of d2lbook's own virtual environment, in the
folder of the config.ini it wrote: `python run_d2lbook.py build html`. The changes:

* d2lbook sorts the imports of every code cell (isort), so a page would no longer show
  the package's own code (`#@save` cells are the package's source, byte for byte);
* it guesses from a notebook's code (`try_all_gpus`, `gpu(1)`...) how many GPUs the
  notebook needs and refuses to run it on a machine without one, where the chapters
  run on the CPU;
* its pages load Google Analytics, and the copy button's image from GitHub: offline
  pages get neither, so the tracker goes and the image comes from the pages' _static/;
* pandoc wraps the cells of a markdown table wider than 72 characters, breaking inline
  code such as `<cls> a <sep>` across lines of the reStructuredText grid table, which
  Sphinx then rejects: the tables are written at full width instead;
* nbconvert writes what a cell prints as a `parsed-literal` block, whose text
  reStructuredText still reads as markup: a docstring's `name` turns italic and loses
  its backticks, a `**kwargs` becomes a broken link. Printed text is written as a plain
  code block instead (`printed_as_is`), shown exactly as the notebook shows it;
* d2lbook renders `:cite:` with sphinxcontrib-bibtex but leaves the bibliography to a
  page of its own: here every page that cites ends with a References section listing
  what it cites (its keys get the page's name as a prefix, so that two pages citing the
  same paper each hold an entry of their own and link to it);
* d2lbook runs the outdated notebooks two at a time in any order, but the sections after
  the pretraining section load the model it saves (`runs/bert-pretrained`) and pretrain
  one themselves when it is missing: two sections saving it at once, or one loading it
  while another replaces it, failed a build now and then. Here the pretraining section
  runs first, alone (again whenever its model is missing), then the others in the toc's
  order (`SectionsInOrder`); when it fails, the others are not run;
* a notebook that fails leaves its error (the failing cell, its output and traceback,
  or the last output of the notebook) in `notebook-errors/NAME.txt`, which
  build_book.py prints (`recording_errors`).
"""
import configparser
import os
import re
import sys
import traceback

BIBFILE = 'd2lbert.bib'  # in chapter_bert/, copied next to the pages' .rst files
CITE = re.compile(r'(:cite(?::[tp])?:`)([^`]+)(`)')
REFERENCES = '''

References
----------

.. bibliography:: {bibfile}
   :keyprefix: {prefix}
   :style: apa
'''

COPY_BUTTON_URL = ('https://raw.githubusercontent.com/choldgraf/sphinx-copybutton/master/'
                   'sphinx_copybutton/_static/copy-button.svg')
TABLE_COLUMNS = '--columns=1000'
PRINTED = '.. parsed-literal::\n    :class: output\n'  # nbconvert's block of a cell's print
PRINTED_AS_IS = '.. code-block:: none\n    :class: output\n'
# The section that runs first, alone, and the folder it saves for the sections after it
# (in the notebooks' folder, eval/)
RUNS_FIRST, SAVES = 'bert-pretraining', os.path.join('runs', 'bert-pretrained')
ERRORS = 'notebook-errors'  # beside config.ini: NAME.txt, the error of notebook NAME
ANSI = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')  # IPython's colours in a traceback
LAST_LINES = 40


def convert_pandoc(source, from_format, to_format, extra_args=None):
    """nbconvert's pandoc filter, with lines (and so table rows) of up to 1000
    characters."""
    import nbconvert.filters.pandoc
    return nbconvert.filters.pandoc.convert_pandoc(
        source, from_format, to_format, extra_args=list(extra_args or []) + [TABLE_COLUMNS])


def cite_locally(text, docname):
    """A page's reStructuredText with its citations prefixed by `docname` and, if it
    cites, a References section at its end; a page without citations is unchanged."""
    prefix = docname + '-'

    def prefixed(match):
        keys = ','.join(prefix + key.strip() for key in match.group(2).split(','))
        return match.group(1) + keys + match.group(3)

    cited, count = CITE.subn(prefixed, text)
    if not count:
        return text
    return cited.rstrip('\n') + '\n' + REFERENCES.format(bibfile=BIBFILE, prefix=prefix)


def printed_as_is(text):
    """A page's reStructuredText with every block of printed output a plain code
    block (no markup read in it) instead of nbconvert's parsed literal."""
    return text.replace(PRINTED, PRINTED_AS_IS)


def with_references(ipynb2rst):
    """d2lbook's notebook-to-rst step, followed by `printed_as_is` and `cite_locally`
    on the page."""
    def convert(input_fn, output_fn):
        ipynb2rst(input_fn, output_fn)
        if not os.path.isfile(output_fn):
            return
        with open(output_fn, encoding='utf-8') as f:
            text = f.read()
        docname = os.path.splitext(os.path.basename(output_fn))[0]
        with open(output_fn, 'w', encoding='utf-8') as f:
            f.write(cite_locally(printed_as_is(text), docname))
    return convert


def section_name(path):
    """The section a notebook or chapter path is of: 'bert' for .../bert.md."""
    return os.path.splitext(os.path.basename(path))[0]


def error_report(error, notebook):
    """What a failed notebook run says: a cell's error (nbclient's CellExecutionError
    holds the cell, its printed output and its traceback) as it is; any other error
    (the kernel died, a timeout) with its traceback and the last lines the notebook's
    cells printed. Without IPython's colours."""
    if type(error).__name__ == 'CellExecutionError':
        text = str(error)
    else:
        printed = [output.get('text', '') for cell in notebook.cells
                   for output in cell.get('outputs', []) if output.get('output_type') == 'stream']
        tail = ''.join(printed).splitlines()[-LAST_LINES:]
        text = ''.join(traceback.format_exception(error)) + (
            '\nThe last lines the notebook printed:\n' + '\n'.join(tail) if tail else '')
    return ANSI.sub('', text)


def record_error(errors_dir, name, text):
    """Write why notebook `name` failed to errors_dir/NAME.txt (build_book.py prints it)."""
    os.makedirs(errors_dir, exist_ok=True)
    with open(os.path.join(errors_dir, name + '.txt'), 'w', encoding='utf-8') as f:
        f.write(text)


def recording_errors(job, errors_dir):
    """d2lbook's job (run a notebook, write it), which on failure also records
    `error_report` (`record_error`) before raising again."""
    def run(notebook, output_fn, *args):
        try:
            return job(notebook, output_fn, *args)
        except Exception as error:
            record_error(errors_dir, section_name(output_fn), error_report(error, notebook))
            raise
    return run


def toc_order(config_path='config.ini'):
    """The sections in the order the config's notebooks list them (index, then the toc)."""
    config = configparser.ConfigParser()
    config.read(config_path, encoding='utf-8')
    return [section_name(name) for name in config['build']['notebooks'].split()]


class NotRun(Exception):
    """A notebook not run because the one it needs failed."""


def sections_in_order(scheduler_class, order, errors_dir):
    """d2lbook's Scheduler, which runs the section RUNS_FIRST (if outdated) alone before
    the others, and those in `order`; when RUNS_FIRST fails, the others are recorded as
    not run (in errors_dir, `record_error`) instead of each pretraining its own model."""
    place = {name: i for i, name in enumerate(order)}

    class SectionsInOrder(scheduler_class):
        def run(self):
            tasks = sorted(self._tasks, key=lambda task: place.get(
                section_name(task.description), len(place)))
            first = [task for task in tasks if section_name(task.description) == RUNS_FIRST]
            rest = [task for task in tasks if task not in first]
            self._tasks = first
            super().run()
            if self._failed_tasks:
                for task in rest:
                    error = NotRun(f'not run: {RUNS_FIRST}, which saves the model it '
                                   f'loads, failed first')
                    record_error(errors_dir, section_name(task.description), str(error))
                    self._failed_tasks.append((task, error, ''))
                return
            self._tasks = rest
            super().run()
    return SectionsInOrder


def rerun_first_without_its_model(eval_dir='eval'):
    """Mark the RUNS_FIRST notebook outdated (remove it) when the model it saves for the
    others is gone, so that it runs first again instead of each section pretraining."""
    notebook = os.path.join(eval_dir, RUNS_FIRST + '.ipynb')
    if os.path.isfile(notebook) and not os.path.isdir(os.path.join(eval_dir, SAVES)):
        os.remove(notebook)


def main():
    import d2lbook.build
    import d2lbook.library
    import d2lbook.main
    import d2lbook.resource
    import d2lbook.sphinx_template
    import nbconvert.exporters.templateexporter
    import nbconvert.filters.pandoc

    d2lbook.build.ipynb2rst = with_references(d2lbook.build.ipynb2rst)
    errors_dir = os.path.abspath(ERRORS)
    d2lbook.build._job = recording_errors(d2lbook.build._job, errors_dir)
    d2lbook.resource.Scheduler = sections_in_order(d2lbook.resource.Scheduler, toc_order(),
                                                   errors_dir)
    rerun_first_without_its_model()
    d2lbook.library.format_code_nb = lambda notebook: notebook
    if not d2lbook.resource.get_available_gpus():
        d2lbook.resource.get_notebook_gpus = lambda notebook, max_gpus: 0
    template = d2lbook.sphinx_template
    template.google_tracker = ''
    assert COPY_BUTTON_URL in template.copybutton_js
    template.copybutton_js = template.copybutton_js.replace(
        COPY_BUTTON_URL, '_static/copy-button.svg')  # every page is at the top of html/
    nbconvert.exporters.templateexporter.default_filters['convert_pandoc'] = convert_pandoc
    sys.argv[0] = 'd2lbook'
    d2lbook.main.main()


if __name__ == '__main__':
    main()
