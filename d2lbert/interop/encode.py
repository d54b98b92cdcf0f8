"""`d2lbert encode`: the contextual vectors of a sentence or a pair (its options, and how
the text is split and tokenized)."""
import dataclasses

from ..data.tasks.encoding import tokenizer_for
from ..run.options import Options, choice, option, text
from ..run.precision import INFERENCE_PRECISIONS


@dataclasses.dataclass
class EncodeOptions(Options):
    """The options of `d2lbert encode`, each declared once (`run.options`)."""
    model: str = option(None, "a pretraining output folder, a Hugging Face BERT folder, the "
                        "book's bert.small or bert.base (name, zip or folder)", text(),
                        required=True)
    save: str = option(None, 'save the vectors to this .npy file (.npy added if missing)',
                       text(optional=True))
    overwrite: bool = option(False, 'replace the file --save if it exists (default: refuse)')
    text: str = option(None, 'a sentence; separate a pair with " ||| "', positional=True)
    precision: str = option('fp32', 'the type the matrix products compute in: fp32 or bf16 '
                            '(a CPU with avx512_bf16 or AMX)', choice(INFERENCE_PRECISIONS))


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
