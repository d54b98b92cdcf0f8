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
  Sphinx then rejects: the tables are written at full width instead.
"""
import sys

import d2lbook.library
import d2lbook.main
import d2lbook.resource
import d2lbook.sphinx_template
import nbconvert.exporters.templateexporter
import nbconvert.filters.pandoc

COPY_BUTTON_URL = ('https://raw.githubusercontent.com/choldgraf/sphinx-copybutton/master/'
                   'sphinx_copybutton/_static/copy-button.svg')
TABLE_COLUMNS = '--columns=1000'


def convert_pandoc(source, from_format, to_format, extra_args=None):
    """nbconvert's pandoc filter, with lines (and so table rows) of up to 1000
    characters."""
    return nbconvert.filters.pandoc.convert_pandoc(
        source, from_format, to_format, extra_args=list(extra_args or []) + [TABLE_COLUMNS])


def main():
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
