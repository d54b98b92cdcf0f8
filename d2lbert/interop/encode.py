"""`d2lbert encode`: the contextual vectors of a sentence or a pair (its options, and how
the text is split and tokenized); with --data, one vector per text of a file
(`encode_file`)."""
import dataclasses
import os

from ..data.progress import TextProgress
from ..data.tasks.encoding import tokenizer_for
from ..data.text_sources import count_rows, is_table_file, text_source, texts_by_row
from ..model.sentence_encoder import POOLINGS
from ..run.files import write_file_atomically
from ..run.npy_rows import write_npy_rows
from ..run.options import Options, choice, integer, option, optional, text
from ..run.precision import INFERENCE_PRECISIONS
from ..util.hashing import sha1_of_file
from ..util.options import flag
from .sentence_config import folder_max_len, folder_pooling

# texts per batch: 128 ran MiniLM over 20,000 SST-2 sentences in 48.7 s, 64 in 51.8 s and
# 256 in 49.8 s (2 threads, AMD EPYC Zen 4, 2026-11-28, whole processes)
ENCODE_BATCH_SIZE = 128
# the options that apply to one text, and those that apply to --data
TEXT_OPTIONS, DATA_OPTIONS = ('save',), ('out', 'text_column', 'pooling', 'normalize',
                                         'batch_size', 'calibration')


@dataclasses.dataclass
class EncodeOptions(Options):
    """The options of `d2lbert encode`, each declared once (`run.options`)."""
    model: str = option(None, "a pretraining output folder, a Hugging Face BERT folder, the "
                        "book's bert.small or bert.base (name, zip or folder)", text(),
                        required=True)
    save: str = option(None, 'save the vectors to this .npy file (.npy added if missing)',
                       text(optional=True))
    overwrite: bool = option(False, 'replace the file --save (--out) if it exists '
                             '(default: refuse)')
    data: str = option(None, 'a file of texts: one per line, or a .tsv, .csv or .jsonl '
                       "table's --text-column; one vector per line (row) to --out, a "
                       "blank one's too", text(optional=True))
    out: str = option(None, 'with --data: the .npy file to write, (texts, hidden size) '
                      'float32, row i the vector of text i', text(optional=True))
    text_column: str = option(None, "a table's column of texts", text(optional=True),
                              shown_default='text')
    pooling: str = option(None, "with --data: a text's vector is the mean of its tokens' "
                          "vectors, or <cls>'s", optional(choice(POOLINGS)),
                          shown_default="the model folder's sentence-transformers pooling "
                          '(1_Pooling/config.json), else mean')
    normalize: bool = option(False, 'with --data: scale every vector to length 1')
    batch_size: int = option(ENCODE_BATCH_SIZE, 'with --data: texts per batch',
                             integer(1))
    precision: str = option('auto', 'the type the matrix products compute in: fp32, bf16 '
                            '(a CPU with avx512_bf16 or AMX; the feed-forward blocks\' first '
                            'layers stay fp32), int8 (with --data, a CPU with AVX2: the '
                            "encoder's products, calibrated on the first texts; products "
                            'too far from fp32 stay fp32) or auto (with --data, bf16 where '
                            'the CPU has it; one text, fp32; never int8)',
                            choice(INFERENCE_PRECISIONS))
    calibration: str = option(None, 'with --data --precision int8: calibrate on the texts '
                              'of this file (one per line) instead of the first of --data',
                              text(optional=True))
    text: str = option(None, 'a sentence; separate a pair with " ||| " (or give --data)',
                       positional=True)

    def check_together(self):
        """A text, or --data with --out; each flag only where it applies."""
        if (self.text is None) == (self.data is None):
            raise ValueError('give a text to encode, or --data FILE --out FILE.npy (not '
                             'both)')
        given = [name for name in (DATA_OPTIONS if self.text is not None else TEXT_OPTIONS)
                 if getattr(self, name) != getattr(EncodeOptions, name, None)]
        if given:
            applies = '--data' if self.text is not None else 'a single text'
            raise ValueError(f'{flag(given[0])} applies to {applies}: leave it out')
        if self.text is not None and self.precision == 'int8':
            raise ValueError('--precision int8 applies to --data (one text: fp32 or bf16)')
        if self.calibration is not None and self.precision != 'int8':
            raise ValueError('--calibration applies to --precision int8')
        if self.data is not None and self.out is None:
            raise ValueError('--data needs --out, the .npy file to write')
        if self.text_column is not None and not is_table_file(self.data):
            raise ValueError(f'--text-column applies to a table (.tsv, .csv, .jsonl), not to '
                             f'{self.data}')


def split_pair(text):
    """'A b ||| c' -> ('A b', 'c'); (text, None) for a single sentence."""
    first, _, second = text.partition('|||')
    if not first.split():
        raise ValueError(f'text must hold a sentence (a pair: "first ||| second"), '
                         f'got {text!r}')
    return first.strip(), second.strip() or None


def tokenize_pair(vocab, first, second):
    """The tokens of a sentence (or a pair) as the model's own tokenizer splits them:
    WordPiece for a WordPiece vocabulary, the book's words otherwise
    (`data.tasks.tokenizer_for`)."""
    tokenize = tokenizer_for(vocab)
    return tokenize(first), None if second is None else tokenize(second)


def unknown_words_line(vocab, words):
    """How many of `words` the model's vocabulary lacks: they are all encoded as the one
    unknown-word token, so their vectors say little about them."""
    unknown = [word for word in words if vocab[word] == vocab.unk_id]
    line = f"{len(unknown)} of {len(words)} words unknown to the model's vocabulary"
    if unknown:
        line += f" (each encoded as the unknown-word token): {' '.join(unknown)}"
    return line


def data_source(options):
    """The `TextSource` of --data: a table's --text-column, else one text per line;
    and how many texts it holds, one per line (row), blank ones included (one pass
    over the file), errors naming --data."""
    try:
        source = text_source(options.data, line_by_line=True,
                             text_column=options.text_column)
        return source, count_rows(source)
    except ValueError as error:
        raise ValueError(f'--data: {error}') from None


def encoding_choices(options, net):
    """(pooling, max_len) of --data: --pooling, else the model folder's, else mean; the
    folder's max_seq_length if it has one (a longer text is cut), else the model's."""
    folder = options.model if os.path.isdir(options.model) else None
    try:
        pooling = options.pooling or (folder and folder_pooling(folder)) or 'mean'
    except ValueError as error:
        raise ValueError(f'--model: {error}') from None
    max_len = net.encoder.max_len
    return pooling, min(max_len, (folder and folder_max_len(folder)) or max_len)


def encode_file(options, net, vocab):
    """Write the vectors of the texts of --data to --out (see `EncodeOptions`): the
    core of `encode_texts` (`text_vectors`), its chunks streamed to the .npy file,
    whole or not at all; row i is the vector of line (row) i, a blank one's too. A
    progress line on stderr every few seconds. Returns (number of texts, hidden size,
    pooling, what ran in int8 or None)."""
    from .sentence_vectors import text_vectors  # the fast path
    source, count = data_source(options)
    pooling, max_len = encoding_choices(options, net)
    calibration = None if options.calibration is None else calibration_file(options)
    progress = TextProgress(options.data, 'encoding', count)
    vectors, int8_line = text_vectors(net, vocab, texts_by_row(source), pooling,
                                      options.batch_size, options.normalize, max_len,
                                      options.precision, calibration)

    def chunks():
        for rows in vectors:
            progress.advance(len(rows))
            yield rows
        progress.finish()
    shape = (count, net.encoder.num_hiddens)
    write_file_atomically('--out', options.out, lambda f: write_npy_rows(f, chunks(), shape),
                          binary=True, overwrite=options.overwrite)
    return count, shape[1], pooling, int8_line


def calibration_file(options):
    """(the lines of --calibration, the texts --precision int8 calibrates on, and the
    file's SHA-1, which names the calibration kept for them)."""
    try:
        with open(options.calibration, encoding='utf-8') as f:
            texts = [line.strip() for line in f if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f'--calibration {options.calibration}: cannot read it ({error})') \
            from None
    if not texts:
        raise ValueError(f'--calibration {options.calibration}: holds no text')
    return iter(texts), sha1_of_file(options.calibration)
