"""The text a pretraining run trains and evaluates on: `--data` and `--valid`, each
a named corpus, a folder of WikiText files, or a file read as
`data.text_sources.TextSource` (plain text in any layout, guessed or given with
`--layout` or `--line-by-line`, or a table's `--text-column`).

Every file is read before the run folder is made (`run_text`): a file that is
not text, holds no text, lacks the column, or gives next sentence prediction no pair
is refused in one line naming the flag and the file, and nothing is written. How each
file was read (its layout, documents, texts and words, the documents held out) is
printed in one line and recorded in run.json. What the reading found is remembered
for the file's content (`data.text_facts`): a warm start reads a file only to hash it."""
import dataclasses
import os

from ..data.corpus import document_breaks
from ..data.download import WIKITEXT_ARCHIVES
from ..data.text_facts import remembered
from ..data.text_sources import (MAX_HELD_OUT_SHARE, TextCounts, count_texts,
                                 is_table_file, split_held_out, text_source)
from ..run.errors import RunError

NAMED = ('bundled', *WIKITEXT_ARCHIVES)


@dataclasses.dataclass
class RunText:
    """train, valid: what `data.load_data_wiki` reads (a corpus name or folder, whose
    'train' and 'valid' splits are read, or a `TextSource`); lines: the lines that
    say how each file was read; record: the same for run.json."""
    train: object
    valid: object
    lines: list
    record: dict


def is_file(data):
    return data not in NAMED and os.path.isfile(data)


def run_text(options):
    """The `RunText` of the options (see the module doc); a RunError naming the flag
    and the file for text that can't be read or used."""
    check_reading_flags(options)
    train = valid = options.data
    lines, record = [], {}
    if is_file(options.data):
        source = read_source('--data', options.data, options)
        counts = counted('--data', source)
        line = f'--data {options.data}: {source.describe()}: {counts.describe()}'
        if options.valid is None:
            train, valid = split_held_out_flag(source, counts)
            held_out = counted('--data', valid)
            check_held_out_share(source, counts, held_out)
            counts = subtract(counts, held_out)
            line += (f'; held out for evaluation (no --valid): the last '
                     f'{held_out.documents:,} documents, {held_out.texts:,} texts')
            check_pairs(options, '--data (its held-out part)', source, held_out,
                        also=', or give held-out text with --valid')
            record['valid'] = described(valid, held_out)
        else:
            train = source
        lines.append(line)
        check_pairs(options, '--data', source, counts)
        record['data'] = described(train, counts)
    if options.valid is not None:
        valid = read_source('--valid', options.valid, options)
        counts = counted('--valid', valid)
        lines.append(f'--valid {options.valid}: {valid.describe()}: {counts.describe()}')
        check_pairs(options, '--valid', valid, counts)
        record['valid'] = described(valid, counts)
    return RunText(train, valid, lines, record)


def check_reading_flags(options):
    """--line-by-line, --layout and --text-column apply to a plain text and a table file
    (given as --data or --valid); refused, not ignored, where they do not."""
    files = [path for path in (options.data, options.valid) if path and is_file(path)]
    tables = [is_table_file(path) for path in files]
    for flag, given in (('--line-by-line', options.line_by_line),
                        ('--layout', options.layout is not None)):
        if given and all(tables):
            raise RunError(f'{flag} applies to a plain text file given as --data or '
                           f'--valid, not to {" or ".join(files) or options.data}')
    if options.text_column is not None and not any(tables):
        raise RunError('--text-column applies to a table file (.tsv, .csv, .jsonl, .json) given as '
                       f'--data or --valid, not to {" or ".join(files) or options.data}')


def read_source(flag, path, options):
    """The `TextSource` of a file given as `flag`."""
    if not os.path.isfile(path):
        raise RunError(f'{flag} {path}: no such file')
    try:
        return text_source(path, options.line_by_line, options.text_column, options.layout,
                           count_breaks=remembered_breaks)
    except ValueError as error:  # not UTF-8, a NUL byte (read to find a blank line)
        raise RunError(f'{flag}: {error}') from None


def remembered_breaks(path):
    """`corpus.document_breaks` of a file, remembered for its content (`data.text_facts`)."""
    return remembered(path, 'document breaks', document_breaks)


def counted(flag, source):
    """`count_texts` of source, remembered for its file's content (`data.text_facts`),
    its errors naming the flag."""
    try:
        counts = remembered(source.path, f'counts {source.key()}',
                            lambda path: dataclasses.asdict(count_texts(source)))
    except ValueError as error:
        raise RunError(f'{flag}: {error}') from None
    return TextCounts(**counts)


def split_held_out_flag(source, counts):
    try:
        return split_held_out(source, counts)
    except ValueError as error:
        raise RunError(f'--data: {error}') from None


def check_held_out_share(source, counts, held_out):
    """The documents held out of a --data file (`split_held_out`) must be a small part
    of its words, at most MAX_HELD_OUT_SHARE: of a file of 2 documents, the last one
    would be half the text."""
    share = held_out.words / max(counts.words, 1)
    if share > MAX_HELD_OUT_SHARE:
        raise RunError(f'--data {source.path}: {counts.documents:,} documents, read as '
                       f'{source.describe()}: its last {held_out.documents:,}, held out for '
                       f'evaluation, would be {share:.0%} of its words (at most '
                       f'{MAX_HELD_OUT_SHARE:.0%}): give held-out text with --valid')


def subtract(counts, part):
    """The counts of the rest of a file once `part` is taken out."""
    return TextCounts(*(getattr(counts, f.name) - getattr(part, f.name)
                        for f in dataclasses.fields(TextCounts)))


def check_pairs(options, flag, source, counts, also=''):
    """--objective mlm+nsp needs documents of two texts or more (two of them: a pair,
    and another document to draw a 'not next' sentence from). also: another remedy
    the message ends with."""
    if options.objective != 'mlm+nsp':
        return
    if source.file_format == 'lines' or source.is_table:
        raise RunError(f'{flag} {source.path}: {source.describe()} gives each text alone, '
                       'with no sentence pair for next sentence prediction: pass '
                       '--objective mlm (the masked LM alone)')
    if counts.paired_documents < 2:
        raise RunError(f'{flag} {source.path}: {counts.paired_documents} document(s) of two '
                       f'sentences or more, read as {source.describe()}: too few sentence '
                       'pairs for next sentence prediction: pass --objective mlm (the '
                       f'masked LM alone){also}')


def described(source, counts):
    """How a file was read, for run.json."""
    return {'path': os.path.abspath(source.path), 'read_as': source.describe(),
            'text_column': source.text_column, 'documents_read': source.documents,
            **dataclasses.asdict(counts)}
