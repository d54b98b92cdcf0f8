"""What the README promises a new user: CI's commands, and no time it cannot back."""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A duration: "~1 min", "a minute", "2 minutes", "45 s", "an hour" ...
DURATION = re.compile(r'\b(\d+(\.\d+)?\s*(s|sec|seconds?|min|minutes?|hours?|h)|'
                      r'(a|an|one|two|a few)\s+(minute|hour)s?)\b', re.I)


def read(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return f.read()


def commands(lines):
    """The shell commands of `lines`: comments and blank lines dropped."""
    found = (line.split('  #')[0].strip() for line in lines)
    return [line for line in found if line and not line.startswith('#')]


def readme_test_block():
    """The README's code block that ends with the test command."""
    blocks = re.findall(r'^```bash\n(.*?)^```', read('README.md'), re.S | re.M)
    return next(b for b in blocks if 'python -m pytest -q tests' in b).splitlines()


def test_the_readme_opens_with_the_main_job_and_the_test_command():
    """Its first code block: two commands, the main job and `bash .ci/run` (what CI runs)."""
    first = re.search(r'^```bash\n(.*?)^```', read('README.md'), re.S | re.M).group(1)
    assert commands(first.splitlines()) == ['pip install -e ".[cpu]" && d2lbert pretrain',
                                            'bash .ci/run']


def test_ci_runs_exactly_the_readmes_test_commands():
    ci = [line for line in commands(read('.ci', 'run').splitlines())
          if not line.startswith(('set ', 'cd ', 'export '))]
    assert ci == commands(readme_test_block())


def test_no_help_promises_a_time():
    """`d2lbert --help` and every command's help state no duration (the machine decides;
    the README quotes measured ones, marked)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    for command in ([], ['pretrain'], ['finetune'], ['predict'], ['encode'], ['fill-mask'],
                    ['convert'], ['bench'], ['launch']):
        text = subprocess.run([sys.executable, '-m', 'd2lbert', *command, '--help'],
                              capture_output=True, text=True, env=env).stdout
        assert text and not DURATION.search(text), (command, DURATION.search(text))


def test_every_time_the_readmes_quote_comes_from_a_results_file():
    """A duration in README.md or chapter_bert/README.md carries the marker of
    tests/test_quoted_numbers.py right after it (which checks the number); a marked
    number before its unit ('2.7<!-- result ... --> minutes') is no match here."""
    for path in (('README.md',), ('chapter_bert', 'README.md')):
        text = read(*path)
        for match in DURATION.finditer(text):
            assert text[match.end():].startswith('<!-- result '), (path, match.group(0))


def test_the_readmes_encode_example_uses_words_the_default_model_knows():
    """`d2lbert pretrain`'s vocabulary: the bundled corpus's training words seen at least
    5 times (--min-freq); the README's `encode` example holds none it lacks."""
    from d2lbert.data.bundled import bundled_corpus_directory
    from d2lbert.pretraining.pretrain import PretrainOptions
    with open(os.path.join(bundled_corpus_directory(), 'wiki.train.tokens'),
              encoding='utf-8') as f:
        words = f.read().lower().split()
    counts = collections.Counter(words)
    known = {w for w, n in counts.items() if n >= PretrainOptions().min_freq}
    example = re.search(r'd2lbert encode --model \S+ "([^"]+)"', read('README.md')).group(1)
    lacking = [w for w in example.replace('|||', ' ').lower().split() if w not in known]
    assert lacking == [], lacking


def test_the_readmes_book_paragraph_says_where_and_what_it_needs():
    """The folders build_book.py writes (full and --quick), pandoc, the builder's venv."""
    section = read('README.md').split('## The book', 1)[1].split('\n## ', 1)[0]
    script = read('chapter_bert', 'tools', 'build_book.py')
    assert "'book-quick' if quick else 'book'" in script  # the folders named below
    for folder in ('_build/book/html/index.html', '_build/book-quick/html/index.html',
                   '_build/d2lbook-venv/'):
        assert folder in section, folder
    assert 'pandoc' in section and '--setup' in section


def test_the_readme_stays_a_front_page():
    """Under 300 lines: what a new user needs first; the detail lives in docs/."""
    assert len(read('README.md').splitlines()) < 300
