"""Reading a plain text file as a stream of documents, each a list of texts
(sentences, or whole lines).

Four layouts (``file_format``) are understood:

* ``'wikitext'`` (files named ``wiki.*.tokens``): one paragraph per line,
  tokens already separated by spaces, headings written `` = Title = ``.
  Sentences end at the `` . `` token, as in the d2l book, but unlike the book
  every sentence keeps its final ``.`` token (the book's ``split(' . ')``
  drops it from all sentences but the last one, which keeps a stray ``.``).
* ``'paragraphs'``, your own text without a blank line: one paragraph per
  line. A sentence ends after a token ending with ``.``, ``!`` or ``?``.
* ``'sentences'``, your own text with blank lines: Google BERT's pretraining
  format, one sentence per line and a blank line between documents. Every
  line ends a sentence (a line holding several sentences is split as above).
* ``'lines'`` (``--line-by-line``): every non-blank line is one text and a
  document of its own, whatever its sentences (reviews, tweets, SST-2's
  sentences).

``'text'`` (and ``'auto'`` for any file not named ``wiki.*.tokens``) is
``'sentences'`` if blank lines break the file's text into many documents (at
least ``MIN_DOCUMENT_BREAKS`` breaks, and one per ``MAX_LINES_PER_DOCUMENT``
lines of text, `text_layout`), else ``'paragraphs'``: a stray blank line or two
in a file of a sentence per line does not make it two giant documents.

As in the book, text is lowercased and headings are skipped; documents with
fewer than ``min_sentences`` texts are skipped (2 by default: a document
without a sentence pair is no use to next sentence prediction). The texts are
tokenized later, by the vocabulary (`words.word_tokenize` for a vocabulary of words,
WordPiece for word pieces). A byte-order mark is dropped;
Windows line ends (CRLF) read as line ends.

Everything is a generator, so a 500 MB corpus is never held in memory; a document
is built line by line as it is read (`read_texts`), so one of Google's layout is held
once, however long it is.
"""
import os
import re

_TEXT_SENTENCE_END = re.compile(r'(?<=[.!?])\s+')
FILE_FORMATS = ('wikitext', 'paragraphs', 'sentences', 'lines')
# Google's layout is guessed when blank lines break the text into many documents
MIN_DOCUMENT_BREAKS = 2
MAX_LINES_PER_DOCUMENT = 1000


def guess_file_format(path, file_format='auto'):
    """The layout of ``path``: ``'wikitext'`` for ``wiki.*.tokens`` files;
    ``'sentences'`` or ``'paragraphs'`` for other text (``'text'``), by its
    blank lines (`text_layout` of `document_breaks`); a layout in
    ``FILE_FORMATS`` is returned as is."""
    if file_format == 'auto':
        file_format = 'wikitext' if is_wikitext_name(path) else 'text'
    if file_format == 'text':
        return text_layout(*document_breaks(path))
    if file_format not in FILE_FORMATS:
        raise ValueError(f"file_format must be 'auto', 'text' or one of {FILE_FORMATS}, "
                         f'got {file_format!r}')
    return file_format


def is_wikitext_name(path):
    """Whether ``path`` is named as WikiText's files are: ``wiki.*.tokens``."""
    name = os.path.basename(path)
    return name.startswith('wiki.') and name.endswith('.tokens')


def text_layout(text_lines, breaks):
    """``'sentences'`` (Google's layout) if ``breaks`` blank-line breaks split
    ``text_lines`` lines of text into many documents: at least
    ``MIN_DOCUMENT_BREAKS``, and one per ``MAX_LINES_PER_DOCUMENT`` lines; else
    ``'paragraphs'``."""
    many = breaks >= max(MIN_DOCUMENT_BREAKS, text_lines / MAX_LINES_PER_DOCUMENT)
    return 'sentences' if many else 'paragraphs'


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


def read_paragraphs(path, file_format='auto', lowercase=True, min_sentences=2):
    """Yield each document of ``path`` with at least ``min_sentences`` texts, as a
    list of text strings (sentences; whole lines for ``'lines'``).

    The texts are not tokenized yet (see the module doc).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` is not UTF-8 text, or holds a NUL byte (the message
            names the file).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'corpus file not found: {path!r}')
    file_format = guess_file_format(path, file_format)
    for texts in read_texts(path, file_format, lowercase):
        if len(texts) >= min_sentences:
            yield texts


def read_texts(path, file_format, lowercase):
    """Yield every document of ``path`` that holds a text, as the list of its texts,
    built line by line as the file is read: each line is stripped, lowercased and
    split into its texts at once, so only the document being read is held (once),
    however long it is. A document is a block of lines between blank lines for
    ``'sentences'``, else a line."""
    split = {'wikitext': split_wikitext_sentences, 'lines': lambda line: [line]}.get(
        file_format, split_text_sentences)
    texts = []
    for line in read_utf8_lines(path):
        line = line.strip()
        if file_format == 'wikitext' and is_wikitext_heading(line):
            continue
        if line:
            texts.extend(split(line.lower() if lowercase else line))
        if texts and (file_format != 'sentences' or not line):
            yield texts
            texts = []
    if texts:
        yield texts


def document_breaks(path):
    """``(text_lines, breaks)`` of ``path``: its lines of text, and the runs of blank
    lines between two of them (one pass over the file)."""
    text_lines = breaks = 0
    blank_after_text = False
    for line in read_utf8_lines(path):
        if line.strip():
            breaks += blank_after_text
            text_lines += 1
            blank_after_text = False
        elif text_lines:
            blank_after_text = True
    return text_lines, breaks


def read_utf8_lines(path):
    """Yield the lines of ``path`` (a byte-order mark dropped, CRLF read as a line
    end); a ValueError naming the file if it is not UTF-8 text or holds a NUL byte
    (a binary file)."""
    with open(path, encoding='utf-8-sig') as f:
        try:
            for line_number, line in enumerate(f, start=1):
                if '\0' in line:
                    raise ValueError(f'{path} holds a NUL byte on line {line_number}: '
                                     'a binary file, not text')
                yield line
        except UnicodeDecodeError as error:
            raise ValueError(
                f'{path!r} is not UTF-8 text ({error.reason} near byte '
                f'{error.start} of a read block); convert it with e.g. '
                f'`iconv -t utf-8`') from None
