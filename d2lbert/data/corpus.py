"""Reading a text corpus as a stream of paragraphs, each a list of sentences.

Two file formats are understood:

* ``'wikitext'`` (files named ``wiki.*.tokens``): one paragraph per line,
  tokens already separated by spaces, headings written `` = Title = ``.
  Sentences end at the `` . `` token, as in the d2l book, but unlike the book
  every sentence keeps its final ``.`` token (the book's ``split(' . ')``
  drops it from all sentences but the last one, which keeps a stray ``.``).
* ``'text'`` (anything else), for your own corpora: one paragraph per line or,
  if the file contains a blank line, paragraphs separated by blank lines.
  A sentence ends after a token ending with ``.``, ``!`` or ``?``.

As in the book, text is lowercased, headings are skipped, and paragraphs with
fewer than two sentences are skipped (they contain no sentence pair). Tokens
are whitespace separated: ``sentence.split()``.

Everything is a generator, so a 500 MB corpus is never held in memory.
"""
import os
import re

_TEXT_SENTENCE_END = re.compile(r'(?<=[.!?])\s+')


def guess_file_format(path):
    """``'wikitext'`` for ``wiki.*.tokens`` files, ``'text'`` otherwise."""
    name = os.path.basename(path)
    is_wikitext = name.startswith('wiki.') and name.endswith('.tokens')
    return 'wikitext' if is_wikitext else 'text'


def split_wikitext_sentences(line):
    """``'a b . c d . e'`` -> ``['a b .', 'c d .', 'e']``.

    Every sentence that ended with the `` . `` token keeps it.
    """
    parts = f' {line} '.split(' . ')
    sentences = [part.strip() + ' .' for part in parts[:-1] if part.strip()]
    if parts[-1].strip():
        sentences.append(parts[-1].strip())
    return sentences


def split_text_sentences(paragraph):
    """``'The cat sat. It purred!'`` -> ``['The cat sat.', 'It purred!']``."""
    return [s for s in _TEXT_SENTENCE_END.split(paragraph.strip()) if s]


def is_wikitext_heading(line):
    """`` = Title = `` and `` = = Section = = `` lines are headings."""
    line = line.strip()
    return len(line) >= 2 and line[0] == '=' and line[-1] == '='


def read_paragraphs(path, file_format='auto', lowercase=True):
    """Yield each usable paragraph of ``path`` as a list of sentence strings.

    A usable paragraph has at least two sentences. Each sentence string is
    tokenized by ``sentence.split()``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` is not valid UTF-8 (the message names the file).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'corpus file not found: {path!r}')
    if file_format == 'auto':
        file_format = guess_file_format(path)
    if file_format not in ('wikitext', 'text'):
        raise ValueError(f"file_format must be 'auto', 'wikitext' or 'text', "
                         f'got {file_format!r}')
    for paragraph in _read_raw_paragraphs(path, file_format):
        if lowercase:
            paragraph = paragraph.lower()
        if file_format == 'wikitext':
            sentences = split_wikitext_sentences(paragraph)
        else:
            sentences = split_text_sentences(paragraph)
        if len(sentences) >= 2:
            yield sentences


def _read_raw_paragraphs(path, file_format):
    """Yield paragraphs as single strings (not yet split into sentences)."""
    blank_line_separated = (file_format == 'text'
                            and _contains_blank_line(path))
    block = []
    for line in _read_utf8_lines(path):
        if file_format == 'wikitext' and is_wikitext_heading(line):
            continue
        if not blank_line_separated:
            if line.strip():
                yield line
        elif line.strip():
            block.append(line.strip())
        elif block:
            yield ' '.join(block)
            block = []
    if block:
        yield ' '.join(block)


def _contains_blank_line(path):
    """True if a blank line lies between two non-blank lines of ``path``."""
    seen_text = seen_blank_after_text = False
    for line in _read_utf8_lines(path):
        if line.strip():
            if seen_blank_after_text:
                return True
            seen_text = True
        elif seen_text:
            seen_blank_after_text = True
    return False


def _read_utf8_lines(path):
    """Yield the lines of ``path``; a clear error if it is not UTF-8."""
    with open(path, encoding='utf-8') as f:
        try:
            yield from f
        except UnicodeDecodeError as error:
            raise ValueError(
                f'{path!r} is not UTF-8 text ({error.reason} near byte '
                f'{error.start} of a read block); convert it with e.g. '
                f'`iconv -t utf-8`') from None
