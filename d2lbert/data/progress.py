"""A progress line on stderr while a corpus is read: bytes done, rate, time left.

Preparing a 500 MB corpus takes minutes (the vocabulary is learned in one pass over
the text, the text is encoded in a second one); every ``PRINT_EVERY`` seconds a line such
as::

    d2lbert: wiki.train.tokens: encoding 212 MB of 540 MB (39%), 4.1 MB/s, 80 s left

says how far it is. The bytes are counted from the characters read (one byte each,
which UTF-8 text in English nearly is), so the last line is printed with the file's
true size. `TextProgress` counts texts instead (``d2lbert encode --data``)::

    d2lbert: sents.txt: encoding 12,288 of 20,000 texts (61%), 512 texts/s, 15 s left
"""
import os
import sys
import time

PRINT_EVERY = 5.0  # seconds between two lines of a pass


class ReadProgress:
    """Counts the bytes of a corpus pass and prints a line every ``every`` seconds.

    >>> progress = ReadProgress('wiki.train.tokens', 'counting words', 540e6)
    >>> progress.advance(1 << 20)   # another MB read
    >>> progress.finish()           # the last line
    """

    def __init__(self, path, task, total_bytes=None, every=None, stream=None):
        self.name, self.task = os.path.basename(path), task
        self.total = total_bytes if total_bytes is not None else os.path.getsize(path)
        self.every = PRINT_EVERY if every is None else every
        self.stream = stream or sys.stderr
        self.done = 0
        self.start = self.last_line = time.monotonic()

    def advance(self, num_bytes):
        """Count ``num_bytes`` more read; print a line if ``every`` seconds passed."""
        self.done += num_bytes
        now = time.monotonic()
        if now - self.last_line >= self.every:
            self.last_line = now
            self.print_line(min(self.done, self.total), now)

    def finish(self):
        """Print the last line, the whole file done and how long it took, if the pass
        printed any (a pass shorter than ``every`` seconds prints nothing)."""
        if self.last_line > self.start:
            self.print_line(self.total, time.monotonic(), finished=True)

    def print_line(self, done, now, finished=False):
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        if finished:
            tail = f'done in {elapsed:.0f} s'
        else:
            left = (self.total - done) / rate if rate else float('inf')
            tail = f'{self.rate_text(rate)}, {left:.0f} s left'
        percent = 100 * done / self.total if self.total else 100
        print(f'd2lbert: {self.name}: {self.task} {self.amount_text(done)} '
              f'({percent:.0f}%), {tail}', file=self.stream, flush=True)

    def amount_text(self, done):
        return f'{done / 1e6:.0f} MB of {self.total / 1e6:.0f} MB'

    def rate_text(self, rate):
        return f'{rate / 1e6:.1f} MB/s'


class TextProgress(ReadProgress):
    """`ReadProgress` of a pass that counts texts: ``advance(n)`` after n more texts.

    >>> progress = TextProgress('sents.txt', 'encoding', total_texts=20000)
    """
    def __init__(self, path, task, total_texts, every=None, stream=None):
        super().__init__(path, task, total_texts, every, stream)

    def amount_text(self, done):
        return f'{done:,} of {self.total:,} texts'

    def rate_text(self, rate):
        return f'{rate:.0f} texts/s'


def paragraphs_with_progress(paragraphs, progress):
    """Yield ``paragraphs`` (lists of sentences), counting each one's characters (and
    the line end) in ``progress``; finish it at the end."""
    for paragraph in paragraphs:
        progress.advance(sum(map(len, paragraph)) + len(paragraph))
        yield paragraph
    progress.finish()
