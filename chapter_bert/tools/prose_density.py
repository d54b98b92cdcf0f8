"""Words of prose per line of code, for every chapter of the book.

Usage (from the repository root):

    python chapter_bert/tools/prose_density.py [chapter.md ...]
    python chapter_bert/tools/prose_density.py --update-readme

Without arguments it measures the chapters of chapter_bert/index.md's toc and prints a
Markdown table (chapter, prose words, code lines, words per code line). With
--update-readme it writes that table into the section "Prose density" of
chapter_bert/README.md instead (tests/test_prose_density.py checks that it is current).

Definitions:

* *code lines* are the non-blank lines inside the book's code cells, the fenced blocks
  opened by ```{.python .input}``` (what a reader runs; `#@save` cells included).
* *prose* is the markdown outside all fenced blocks (code cells, ```bash```, ```toc```,
  ...), without: heading markup (the leading `#`s; the heading's words count), label lines
  (`:label:`...``, `:eqlabel:`), HTML comments (such as the quoted-number markers) and
  the targets of links and images (`](...)`; an image's caption counts).
* a *word* is a whitespace-separated piece of prose that holds at least one letter or
  digit, so `<cls>` and `num_hiddens` are words, a lone `=` or `$` is not.
* *density* = prose words / code lines.
"""
import os
import re
import sys

CHAPTER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE_CELL = '```{.python .input}'
FENCE = re.compile(r'^\s*```')
LABEL = re.compile(r'^\s*:(eq)?label:`[^`]*`\s*$')
COMMENT = re.compile(r'<!--.*?-->', re.S)
LINK_TARGET = re.compile(r'\]\([^)]*\)')
WORD = re.compile(r'[A-Za-z0-9]')


def measure(text):
    """(prose words, code lines) of one chapter's markdown `text`."""
    text = COMMENT.sub(' ', text)
    words = code_lines = 0
    fence = None  # the opening line of the fenced block we are in, if any
    for line in text.split('\n'):
        if fence is not None:
            if FENCE.match(line) and line.strip() == '```':
                fence = None
            elif fence == CODE_CELL and line.strip():
                code_lines += 1
            continue
        if FENCE.match(line):
            fence = line.strip()
            continue
        if LABEL.match(line):
            continue
        line = LINK_TARGET.sub('] ', line.lstrip('#'))
        words += sum(1 for piece in line.split() if WORD.search(piece))
    return words, code_lines


def toc_chapters(index_path):
    """The chapter names (without .md) of the ```toc``` block of `index_path`."""
    with open(index_path, encoding='utf-8') as f:
        block = re.search(r'^```toc\n(.*?)^```', f.read(), re.S | re.M)
    if block is None:
        return []
    return [line.strip() for line in block.group(1).split('\n')
            if line.strip() and not line.strip().startswith(':')]


def table(paths):
    """The Markdown table of `paths` (chapter files)."""
    rows = ['| chapter | prose words | code lines | words per code line |',
            '|---|---:|---:|---:|']
    for path in paths:
        with open(path, encoding='utf-8') as f:
            words, lines = measure(f.read())
        density = f'{words / lines:.1f}' if lines else '-'
        rows.append(f'| {os.path.basename(path)} | {words} | {lines} | {density} |')
    return '\n'.join(rows)


def toc_table():
    """The table of the chapters of chapter_bert/index.md's toc."""
    return table([os.path.join(CHAPTER_DIR, name + '.md')
                  for name in toc_chapters(os.path.join(CHAPTER_DIR, 'index.md'))])


def readme_table(readme_text):
    """The table (its lines starting with '|') of the section "Prose density"."""
    section = readme_text.split('## Prose density', 1)[-1].split('\n## ', 1)[0]
    return '\n'.join(line for line in section.split('\n') if line.startswith('|'))


def update_readme(path=os.path.join(CHAPTER_DIR, 'README.md')):
    """Replace the table of README.md's section "Prose density" by the current one."""
    with open(path, encoding='utf-8') as f:
        text = f.read()
    old = readme_table(text)
    if '## Prose density' not in text or not old:
        sys.exit(f'prose_density: {path} has no table in a section "## Prose density"')
    from d2lbert.run.errors import RunError
    from d2lbert.run.files import write_file_atomically
    try:  # never through a link, whole or not at all (as d2lbert's commands write)
        write_file_atomically('README.md', path, lambda f: f.write(text.replace(old, toc_table())))
    except RunError as err:
        sys.exit(f'prose_density: {err}')


def main(argv):
    if argv == ['--update-readme']:
        update_readme()
        return
    missing = [path for path in argv if not os.path.isfile(path)]
    if missing:
        sys.exit(f'prose_density: no such chapter file: {missing[0]}')
    print(table(argv) if argv else toc_table())


if __name__ == '__main__':
    main(sys.argv[1:])
