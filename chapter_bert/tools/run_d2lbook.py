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
  same paper each hold an entry of their own and link to it).
"""
import os
import re
import sys

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


def main():
    import d2lbook.build
    import d2lbook.library
    import d2lbook.main
    import d2lbook.resource
    import d2lbook.sphinx_template
    import nbconvert.exporters.templateexporter
    import nbconvert.filters.pandoc

    d2lbook.build.ipynb2rst = with_references(d2lbook.build.ipynb2rst)
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
