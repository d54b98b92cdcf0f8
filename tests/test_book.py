"""The book, built in quick mode and opened page by page in a real browser.

`python chapter_bert/tools/build_book.py --quick` (the documented command) builds the
notebooks and the HTML pages into _build/book-quick/. Headless Chromium (Debian's
`chromium`, driven by Playwright) then opens every page with the network cut off and
checks what a reader would see:

* every image loads (natural width > 0), figures drawn by cells included;
* every code cell whose executed notebook has an output shows it, text and figures;
* every link between pages leads to an existing page and anchor;
* the math is typeset by the pages' own MathJax (no raw \\( \\) left);
* nothing is fetched from the network, and no console error or page error occurs.

A screenshot of each page is saved in _build/book-quick/screenshots/. The notebooks
themselves must hold the chapters' code cells unchanged, every cell executed, no error.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_SCRIPT = os.path.join(ROOT, 'chapter_bert', 'tools', 'build_book.py')
OUT = os.path.join(ROOT, '_build', 'book-quick')
CHROMIUM = '/usr/bin/chromium'
# Without the background-networking flags Chromium's own connections are refused on a
# closed network and show up as errors.
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
                 '--no-first-run', '--disable-background-networking',
                 '--disable-component-update', '--disable-sync']
CELL = re.compile(r'^```\{\.python \.input\}\n(.*?)^```$', re.S | re.M)
# What each missing tool is, and the command that installs it (bash .ci/run does all)
TOOLS = (('the Python package playwright', 'pip install -e ".[test]"'),
         (f'Chromium ({CHROMIUM})', 'apt-get install chromium'),
         ('pandoc', 'apt-get install pandoc'))

# In document order: each code block of a page with its text, the output blocks and the
# figures drawn by cells (_images/output_*) that follow it; then every image's load
# state, the links, the ids, the math before and after MathJax.
PAGE_SCRIPT = """async () => {
  if (window.MathJax && MathJax.startup) { await MathJax.startup.promise; }
  const blocks = [];
  for (const el of document.querySelectorAll(
      'div.highlight-python, div.output, img[src^="_images/output_"]')) {
    if (el.tagName === 'IMG') {
      blocks.push({kind: 'image', src: el.getAttribute('src'),
                   loaded: el.complete && el.naturalWidth > 0});
    } else if (el.classList.contains('output')) {
      blocks.push({kind: 'output', text: el.innerText});
    } else {
      blocks.push({kind: 'code', text: el.innerText});
    }
  }
  const images = [...document.images].map(img => (
      {src: img.getAttribute('src'), loaded: img.complete && img.naturalWidth > 0}));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'));
  const ids = [...document.querySelectorAll('[id]')].map(el => el.id);
  const text = document.body.innerText;
  return {blocks, images, links, ids,
          math: document.querySelectorAll('.math').length,
          typeset: document.querySelectorAll('mjx-container svg').length,
          raw_math: /\\\\\\(|\\\\\\)|\\\\\\[|\\\\\\]/.test(text)};
}"""
CONTENT_HEIGHT = """() => Math.max(document.body.scrollHeight,
    ...[...document.querySelectorAll('main, .mdl-layout__content')].map(
        el => el.scrollHeight + el.getBoundingClientRect().top))"""


def playwright_installed():
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def missing_tools():
    """[(tool, install command)] of what is missing to build and open the book."""
    present = (playwright_installed(), os.path.exists(CHROMIUM),
               shutil.which('pandoc') is not None)
    return [tool for tool, there in zip(TOOLS, present) if not there]


def skip_message(missing):
    """The reason to skip: only the tools in `missing`, and how to install them."""
    return (f'{", ".join(name for name, _ in missing)} not found; to build the book and '
            f'open it in a browser: {" && ".join(command for _, command in missing)} '
            f'(bash .ci/run installs everything the tests need)')


def test_the_skip_message_names_only_what_is_missing(monkeypatch):
    monkeypatch.setattr(os.path, 'exists', lambda path: True)
    monkeypatch.setattr(shutil, 'which', lambda name: None if name == 'pandoc' else name)
    missing = missing_tools()
    assert missing == [TOOLS[2]] or not playwright_installed()
    message = skip_message([TOOLS[2]])
    assert 'pandoc' in message and 'apt-get install pandoc' in message
    assert 'playwright' not in message and 'chromium' not in message.lower()


@pytest.fixture(scope='module')
def book():
    """The folder of the book built in quick mode."""
    missing = missing_tools()
    if missing:
        pytest.skip(skip_message(missing))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in [ROOT, os.environ.get('PYTHONPATH')] if p))
    result = subprocess.run([sys.executable, BUILD_SCRIPT, '--quick'], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    with open(os.path.join(OUT, 'build.log'), 'w', encoding='utf-8') as f:
        f.write(result.stdout + result.stderr)
    return OUT


@pytest.fixture(scope='module')
def visited(book, tmp_path_factory):
    """{page name: what PAGE_SCRIPT saw, plus its console errors and network requests},
    for every page of the book, each screenshotted into the build folder."""
    from playwright.sync_api import sync_playwright
    html_dir = os.path.join(book, 'html')
    shots = os.path.join(book, 'screenshots')
    os.makedirs(shots, exist_ok=True)
    pages = sorted(name for name in os.listdir(html_dir) if name.endswith('.html'))
    seen = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp('chromium-profile')), executable_path=CHROMIUM,
            headless=True, args=CHROMIUM_ARGS, viewport={'width': 1280, 'height': 900})
        for name in pages:
            page = browser.new_page()
            errors, remote = [], []
            page.on('console', lambda msg, errors=errors:
                    msg.type == 'error' and errors.append(msg.text))
            page.on('pageerror', lambda exc, errors=errors: errors.append(str(exc)))
            page.route(re.compile(r'^(?!file:)'), lambda route, request, remote=remote: (
                remote.append(request.url), route.abort()))
            page.goto('file://' + os.path.join(html_dir, name), wait_until='load')
            result = page.evaluate(PAGE_SCRIPT)
            # The theme scrolls the text inside the window: a window as tall as the text
            # shows all of it (up to Chromium's largest screenshot).
            height = page.evaluate(CONTENT_HEIGHT)
            page.set_viewport_size({'width': 1280, 'height': min(max(height, 900), 16000)})
            page.screenshot(path=os.path.join(shots, name.replace('.html', '.png')))
            result.update(errors=errors, remote=remote)
            seen[name] = result
            page.close()
        browser.close()
    return seen


def chapter_names(book):
    return sorted(name[:-len('.ipynb')] for name in os.listdir(os.path.join(book, 'eval'))
                  if name.endswith('.ipynb'))


def read_notebook(book, name):
    with open(os.path.join(book, 'eval', name + '.ipynb'), encoding='utf-8') as f:
        return json.load(f)


def source(cell):
    return ''.join(cell['source']) if isinstance(cell['source'], list) else cell['source']


def squeeze(text):
    return ' '.join(text.split())


def test_sphinx_reports_no_errors(book):
    """An error of the reStructuredText step (say, `|V|` in a cell's output, read as a
    substitution) leaves a hole in a page that the browser does not see."""
    with open(os.path.join(book, 'build.log'), encoding='utf-8') as f:
        errors = [line.strip() for line in f if re.search(r': (ERROR|SEVERE):', line)]
    assert not errors, errors


def test_every_chapter_of_the_toc_is_a_notebook_and_a_page(book):
    with open(os.path.join(ROOT, 'chapter_bert', 'index.md'), encoding='utf-8') as f:
        toc = re.search(r'^```toc\n(.*?)^```', f.read(), re.S | re.M).group(1)
    chapters = [line.strip() for line in toc.splitlines()
                if line.strip() and not line.startswith(':')]
    assert chapter_names(book) == sorted(chapters + ['index'])
    for name in chapters + ['index']:
        assert os.path.isfile(os.path.join(book, 'html', name + '.html')), name


def test_notebooks_hold_the_chapters_code_executed(book):
    for name in chapter_names(book):
        with open(os.path.join(ROOT, 'chapter_bert', name + '.md'), encoding='utf-8') as f:
            expected = [cell.rstrip('\n') for cell in CELL.findall(f.read())]
        cells = [cell for cell in read_notebook(book, name)['cells']
                 if cell['cell_type'] == 'code']
        assert [source(cell) for cell in cells] == expected, name
        for cell in cells:
            assert cell.get('execution_count'), (name, source(cell)[:80])
            assert not [o for o in cell['outputs'] if o['output_type'] == 'error'], name


def test_pages_load_nothing_from_the_network_and_log_no_errors(visited):
    for name, page in visited.items():
        assert page['remote'] == [], name
        assert page['errors'] == [], name


def test_every_image_loads(visited):
    for name, page in visited.items():
        broken = [image['src'] for image in page['images'] if not image['loaded']]
        assert broken == [], name


def test_every_code_cell_shows_its_output(book, visited):
    """Each code cell of a notebook is found on its page, followed by as many output
    figures as the cell drew and, if it printed, an output block with its last line."""
    for name in chapter_names(book):
        blocks = visited[name + '.html']['blocks']
        position = 0
        for cell in read_notebook(book, name)['cells']:
            if cell['cell_type'] != 'code':
                continue
            code = squeeze(source(cell))
            while position < len(blocks) and not (
                    blocks[position]['kind'] == 'code'
                    and squeeze(blocks[position]['text']) == code):
                position += 1
            assert position < len(blocks), f'{name}: cell not on the page: {code[:80]}'
            position += 1
            following = []
            while position < len(blocks) and blocks[position]['kind'] != 'code':
                following.append(blocks[position])
                position += 1
            shown_text = squeeze(' '.join(b['text'] for b in following
                                          if b['kind'] == 'output'))
            shown_images = [b for b in following if b['kind'] == 'image']
            drawn = [o for o in cell['outputs'] if 'data' in o and any(
                kind.startswith('image/') for kind in o['data'])]
            assert len(shown_images) == len(drawn), f'{name}: figures of {code[:80]}'
            assert all(image['loaded'] for image in shown_images), name
            for text in printed_lines(cell, drawn):
                assert squeeze(text) in shown_text, f'{name}: output of {code[:80]}'


def printed_lines(cell, drawn):
    """The last line that each text output of `cell` leaves on screen: the streams
    together, where a carriage return (a progress bar) overwrites its line; then each
    result (a figure's text/plain aside)."""
    stream = ''.join(as_text(o['text']) for o in cell['outputs']
                     if o['output_type'] == 'stream')
    results = [as_text(o['data'].get('text/plain', '')) for o in cell['outputs']
               if 'data' in o and o not in drawn]
    for text in [stream] + results:
        lines = [line.split('\r')[-1] or line for line in text.split('\n')]
        lines = [line for line in lines if line.strip()]
        if lines:
            yield lines[-1]


def as_text(text):
    return ''.join(text) if isinstance(text, list) else text


def test_links_between_pages_resolve(book, visited):
    html_dir = os.path.join(book, 'html')
    for name, page in visited.items():
        for href in page['links']:
            parts = urllib.parse.urlsplit(href)
            if parts.scheme or href.startswith('javascript:'):
                continue  # a link out of the book (none is needed to read it)
            target = urllib.parse.unquote(parts.path) or name
            path = os.path.normpath(os.path.join(html_dir, target))
            assert os.path.isfile(path), f'{name}: {href}'
            if parts.fragment and target.endswith('.html'):
                assert parts.fragment in visited[os.path.relpath(path, html_dir)]['ids'], \
                    f'{name}: {href}'


def test_math_is_typeset(visited):
    pages_with_math = 0
    for name, page in visited.items():
        assert not page['raw_math'], f'{name}: raw \\( \\) left in the text'
        assert page['typeset'] >= page['math'], name
        pages_with_math += page['math'] > 0
    assert pages_with_math > 0
