"""chapter_bert/tools/prose_density.py: it counts what its docstring says, and the chapters
that issue 26 names reach 8 words of prose per line of code."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'chapter_bert', 'tools', 'prose_density.py')
spec = importlib.util.spec_from_file_location('prose_density', SCRIPT)
prose_density = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prose_density)

# Counted by hand: the prose words are marked in the comments on the right.
SYNTHETIC = '''# A Title Here
:label:`sec_title`

Two words. <!-- result bench.json a.b -->
See ![the figure](img/a-long-path.svg) and `num_hiddens` = 3.
:label:`fig_a`

```{.python .input}
x = 1

y = 2  # a comment is code
```

```bash
echo not counted
```

```toc
:maxdepth: 2

bert
```

## Second: heading
$x$ + $y$
'''
# Words: "A Title Here" 3; "Two words." 2 (the marker is a comment); "See ![the figure]
# and `num_hiddens` = 3." -> See, ![the, figure], and, `num_hiddens`, 3. = 6 ('=' has
# no letter or digit); "Second: heading" 2; "$x$ + $y$" 2. Total 15.
# Code lines: the 2 non-blank lines of the python cell (bash and toc blocks are neither).


def test_measure_counts_a_synthetic_chapter_by_hand():
    assert prose_density.measure(SYNTHETIC) == (15, 2)


def test_toc_chapters_reads_the_toc_block(tmp_path):
    index = tmp_path / 'index.md'
    index.write_text('# Book\n\n```toc\n:maxdepth: 2\n\nfirst\nsecond\n```\n')
    assert prose_density.toc_chapters(str(index)) == ['first', 'second']


@pytest.mark.parametrize('chapter', ['bert.md', 'bert-dataset.md', 'bert-pretraining.md'])
def test_chapter_has_at_least_8_words_of_prose_per_line_of_code(chapter):
    with open(os.path.join(ROOT, 'chapter_bert', chapter), encoding='utf-8') as f:
        words, lines = prose_density.measure(f.read())
    assert words >= 8 * lines, f'{chapter}: {words} words for {lines} lines of code'


def test_readme_table_is_current():
    with open(os.path.join(ROOT, 'chapter_bert', 'README.md'), encoding='utf-8') as f:
        written = prose_density.readme_table(f.read())
    assert written == prose_density.toc_table(), (
        'the table in chapter_bert/README.md ("Prose density") is out of date: run '
        'python chapter_bert/tools/prose_density.py --update-readme')
