"""The rules the book's chapters keep (chapter_bert/*.md), read from the markdown alone:
no build, no notebook runs.

* Length: the first five sections of the toc of chapter_bert/index.md (the core path a
  reader follows) are at most 450 lines each, every later section at most 650.
* Form: no code block longer than 45 lines; each section has exactly one `#` title.
* Sources: each section cites at least one paper with :cite: (or :citet:, :citep:), and
  every cited key is in a .bib file of chapter_bert/ (build_book.py renders them).
* Clean text: no control character other than newline and tab; no project-internal
  phrase (shared folders, the tests, earlier versions of the package) in the prose.

Each failure names the file, the line and the rule.
"""
import glob
import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAPTER_DIR = os.path.join(ROOT, 'chapter_bert')
CORE_SECTIONS, CORE_LINES, OTHER_LINES = 5, 450, 650
CELL_LINES = 45
FENCE = re.compile(r'^\s*```')
CITE = re.compile(r':cite[tp]?:`([^`]*)`')
BIB_KEY = re.compile(r'^\s*@\w+\s*\{\s*([^,\s]+)\s*,', re.M)
FORBIDDEN = ('../shared', 'shared folder', 'test suite', "the package's tests",
             'earlier version of this package', 'earlier versions of this package')


def toc_sections():
    """The section files of the ```toc``` blocks of chapter_bert/index.md, in order."""
    with open(os.path.join(CHAPTER_DIR, 'index.md'), encoding='utf-8') as f:
        blocks = re.findall(r'^```toc\n(.*?)^```', f.read(), re.S | re.M)
    assert blocks, 'chapter_bert/index.md: no ```toc``` block'
    return [line.strip() + '.md' for block in blocks for line in block.splitlines()
            if line.strip() and not line.strip().startswith(':')]


SECTIONS = toc_sections()
CHAPTERS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CHAPTER_DIR, '*.md')))


def read_lines(name):
    with open(os.path.join(CHAPTER_DIR, name), encoding='utf-8', newline='') as f:
        return f.read().split('\n')


def blocks_and_prose(lines):
    """([(first line number, lines of a fenced block)], [(line number, prose line)]),
    line numbers 1-based; the fence lines themselves belong to neither."""
    blocks, prose, block = [], [], None
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            if block is None:
                block = (number, [])
            else:
                blocks.append(block)
                block = None
        elif block is not None:
            block[1].append(line)
        else:
            prose.append((number, line))
    if block is not None:  # an unclosed fence: its lines count as a block
        blocks.append(block)
    return blocks, prose


def bib_keys():
    keys = set()
    for path in glob.glob(os.path.join(CHAPTER_DIR, '**', '*.bib'), recursive=True):
        with open(path, encoding='utf-8') as f:
            keys.update(BIB_KEY.findall(f.read()))
    return keys


def fail_at(problems):
    if problems:
        pytest.fail('\n'.join(problems), pytrace=False)


def test_the_toc_lists_sections():
    assert len(SECTIONS) > CORE_SECTIONS, SECTIONS


@pytest.mark.parametrize('name', SECTIONS)
def test_section_length(name):
    limit = CORE_LINES if SECTIONS.index(name) < CORE_SECTIONS else OTHER_LINES
    count = len(read_lines(name)) - (read_lines(name)[-1] == '')
    kind = 'one of the first five sections of the toc' if limit == CORE_LINES else 'a section'
    fail_at([f'chapter_bert/{name}:{count}: {count} lines, more than the {limit} of '
             f'{kind}'] if count > limit else [])


@pytest.mark.parametrize('name', SECTIONS)
def test_code_blocks_are_short(name):
    blocks, _ = blocks_and_prose(read_lines(name))
    fail_at([f'chapter_bert/{name}:{first}: a code block of {len(body)} lines, more than '
             f'{CELL_LINES}' for first, body in blocks if len(body) > CELL_LINES])


@pytest.mark.parametrize('name', SECTIONS)
def test_one_title(name):
    _, prose = blocks_and_prose(read_lines(name))
    titles = [(number, line) for number, line in prose if re.match(r'#(?!#)\s', line)]
    if len(titles) == 1:
        return
    where = titles[1][0] if titles else 1
    fail_at([f'chapter_bert/{name}:{where}: {len(titles)} `#` titles '
             f'({", ".join(str(n) for n, _ in titles) or "none"}), a section has one'])


@pytest.mark.parametrize('name', SECTIONS)
def test_section_cites_known_sources(name):
    _, prose = blocks_and_prose(read_lines(name))
    known, problems, cited = bib_keys(), [], 0
    for number, line in prose:
        for match in CITE.finditer(line):
            for key in (k.strip() for k in match.group(1).split(',')):
                cited += 1
                if key not in known:
                    problems.append(f'chapter_bert/{name}:{number}: :cite: key {key!r} is in '
                                    f'no .bib file of chapter_bert/')
    if not cited:
        problems.append(f'chapter_bert/{name}:1: cites nothing (no :cite:)')
    fail_at(problems)


@pytest.mark.parametrize('name', CHAPTERS)
def test_no_control_characters(name):
    fail_at([f'chapter_bert/{name}:{number}: control character {char!r} (column '
             f'{line.index(char) + 1})'
             for number, line in enumerate(read_lines(name), 1)
             for char in sorted(set(line))
             if (ord(char) < 32 and char != '\t') or 127 <= ord(char) < 160])


@pytest.mark.parametrize('name', CHAPTERS)
def test_no_project_language_in_prose(name):
    _, prose = blocks_and_prose(read_lines(name))
    fail_at([f'chapter_bert/{name}:{number}: project-internal phrase {phrase!r} in the prose'
             for number, line in prose for phrase in FORBIDDEN
             if phrase in line.lower()])


# The rules on sample texts, so that a rule that stops seeing its fault fails here.
def test_blocks_and_prose_split_at_fences():
    lines = ['# T', '```{.python .input}', 'x = 1', '# not a title', '```', 'text']
    blocks, prose = blocks_and_prose(lines)
    assert blocks == [(2, ['x = 1', '# not a title'])]
    assert prose == [(1, '# T'), (6, 'text')]


def test_the_bib_files_hold_the_keys_the_book_needs():
    keys = bib_keys()
    for key in ['Devlin.Chang.Lee.ea.2018', 'Vaswani.Shazeer.Parmar.ea.2017',
                'Zhang.Lipton.Li.ea.2023']:
        assert key in keys


def test_the_build_gives_each_citing_page_its_references():
    """run_d2lbook.cite_locally: the page's keys prefixed with its name, a References
    section at its end; a page that cites nothing is left alone."""
    spec = importlib.util.spec_from_file_location(
        'run_d2lbook', os.path.join(CHAPTER_DIR, 'tools', 'run_d2lbook.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = 'BERT\n====\n\nas :cite:`Devlin.Chang.Lee.ea.2018, Ba.Kiros.Hinton.2016` said\n'
    page = module.cite_locally(text, 'bert')
    assert ':cite:`bert-Devlin.Chang.Lee.ea.2018,bert-Ba.Kiros.Hinton.2016`' in page
    assert page.endswith('.. bibliography:: d2lbert.bib\n   :keyprefix: bert-\n'
                         '   :style: apa\n')
    assert module.cite_locally('no citation\n', 'api') == 'no citation\n'
