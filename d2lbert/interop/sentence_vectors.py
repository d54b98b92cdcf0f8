"""One vector per text, for many texts: `encode_texts`, and `d2lbert encode --data`
(both `text_vectors`, so row i is text i's vector in both, a blank text's too).

    net, vocab = d2lbert.load_pretrained('all-MiniLM-L6-v2/')   # a Hugging Face folder
    vectors = encode_texts(net, vocab, ['A man is eating.', 'Someone eats.'],
                           pooling='mean', normalize=True)     # (2, 384) float32
    float(vectors[0] @ vectors[1])                             # their cosine similarity

Each text is tokenized as the model's vocabulary says (`data.tasks.encode_text_pair`,
cut to max_len tokens); the texts run in batches of similar length
(`run.inference.outputs_by_length`) on the fast path (`d2lbert.fast`), and each text's
token encodings are pooled into one vector (`model.SentenceEncoder`). The texts are
taken CHUNK_BATCHES batches at a time (`vectors_in_chunks`), sorted by length within
each chunk: a file of a million texts is never held in memory, as tokens or vectors.
"""
import itertools
from typing import Iterable, Optional

import numpy as onp

from .. import fast
from ..data.tasks import EncodedExample, encode_text_pair
from ..model import SentenceEncoder
from ..model.precision import feed_forward_inputs_in_float32
from ..run.calibration import CALIBRATION_TEXTS, calibration_batches, int8_inference
from ..run.inference import outputs_by_length
from ..run.precision import INFERENCE_PRECISIONS, inference_precision
from ..run.setup import prepare_model
from ..util.hashing import sha1_of_strings
from ..util.numpy_mode import in_numpy_mode
from ..util.options import check_choice

CHUNK_BATCHES = 64  # sorted by length within 64 batches: about as little padding as all


@in_numpy_mode
def encode_texts(net, vocab, texts: Iterable[str], pooling: str = 'mean',
                 batch_size: int = 64, normalize: bool = False,
                 max_len: Optional[int] = None, precision: str = 'fp32',
                 calibration: Optional[Iterable[str]] = None) -> onp.ndarray:
    """The vectors of `texts`, one row per text, in order.

    net, vocab: a pretrained BERT (`load_pretrained`), left as it was: the texts run
      on a model of its own that shares net's parameters (`sentence_encoder`: the
      fast path, hybridized)
    texts: a list (or any iterable) of str, one row each, a blank text too (its vector
      is that of `<cls> <sep>`, as sentence-transformers gives it); a str alone is
      refused (TypeError naming `texts`: it would be read as its characters), as is
      an item that is not a str
    pooling: 'mean' (of each text's token encodings) or 'cls' (`<cls>`'s encoding);
      normalize: each vector divided by its length (`model.SentenceEncoder`)
    max_len: the most tokens of a text, `<cls>` and `<sep>` included (default: the
      model's max_len); longer texts are cut
    precision: the type the matrix products compute in: 'fp32', 'bf16' (a CPU with
      avx512_bf16 or AMX), 'auto' (bf16 where the CPU has them, else fp32, as
      `d2lbert encode --data`; never int8) or 'int8' (a CPU with AVX2: the encoder's
      products on oneDNN's integer kernels, `run.calibration`)
    calibration: with 'int8', the texts to calibrate on (default: the first
      CALIBRATION_TEXTS of texts); a calibration kept for the model and them is reused
    returns: float32 NumPy array (len(texts), num_hiddens)

        net, vocab = d2lbert.load_pretrained('all-MiniLM-L6-v2/')  # a Hugging Face folder
        vectors = d2lbert.encode_texts(net, vocab, ['A man eats.', 'Someone is eating.'],
                                       normalize=True)      # (2, 384)
        vectors[0] @ vectors[1]                             # their cosine similarity
    """
    check_choice('precision', precision, INFERENCE_PRECISIONS)
    ctx = net.encoder.token_embedding.weight.list_ctx()[0]
    if calibration is not None:
        calibration = list(calibration)
        calibration = (calibration, sha1_of_strings(*calibration))
    vectors, _ = text_vectors(net, vocab, texts, pooling, batch_size, normalize, max_len,
                              inference_precision(precision, ctx), calibration)
    chunks = list(vectors)
    if not chunks:
        return onp.zeros((0, net.encoder.num_hiddens), dtype='float32')
    return onp.concatenate(chunks)


def text_vectors(net, vocab, texts, pooling='mean', batch_size=64, normalize=False,
                 max_len=None, precision='fp32', calibration=None):
    """The vectors of `texts` (as `encode_texts` takes them), chunk by chunk, and the
    line that says what runs in int8 (None but for precision 'int8'). The vectors: an
    iterator of float32 NumPy arrays (chunk_size, num_hiddens), one row per text in
    order (`vectors_in_chunks`). The core of `encode_texts` and of `d2lbert encode
    --data`, which streams the chunks to its .npy file. calibration: None (int8
    calibrates on the first CALIBRATION_TEXTS texts) or (texts, the name of where they
    came from)."""
    texts = checked_texts(texts)
    model = sentence_encoder(net, pooling, normalize, precision)
    int8_line = None
    if precision == 'int8':
        first = list(itertools.islice(texts, CALIBRATION_TEXTS))
        calibration_texts, source = calibration or (first, 'data')
        model, int8_line = int8_model(model, vocab, calibration_texts, max_len, source)
        texts = itertools.chain(first, texts)
    return vectors_in_chunks(model, vocab, texts, batch_size, max_len), int8_line


def checked_texts(texts):
    """`texts` read as it goes, each item checked: a TypeError naming `texts` for a str
    (or bytes) given whole, which would be read as its characters, for something not
    iterable, or (when it is reached) for an item that is not a str."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f'texts must be a list (or an iterable) of str, got one '
                        f'{type(texts).__name__} ({texts[:40]!r}); for one text, pass '
                        '[text]')
    try:
        items = iter(texts)
    except TypeError:
        raise TypeError(f'texts must be a list (or an iterable) of str, got '
                        f'{type(texts).__name__}') from None
    return (checked_text(index, text) for index, text in enumerate(items))


def checked_text(index, text):
    if not isinstance(text, str):
        raise TypeError(f'texts[{index}] is {text!r} ({type(text).__name__}), not a str')
    return text


def sentence_encoder(net, pooling='mean', normalize=False, precision='fp32'):
    """A new `SentenceEncoder` on a copy of net's encoder that shares its parameters,
    on the fast path, in `precision` ('fp32' or 'bf16'; bf16: but the feed-forward
    blocks' first layers, `model.precision.feed_forward_inputs_in_float32`),
    hybridized; net stays as it was. 'int8': float32, not hybridized, for `int8_model`
    to make its int8 model of."""
    model = prepare_model(SentenceEncoder(net.encoder, pooling, normalize), precision, fast)
    if precision == 'int8':
        return model
    if precision == 'bf16':
        model = feed_forward_inputs_in_float32(model)
    model.hybridize(static_alloc=True)
    return model


def int8_model(model, vocab, texts, max_len=None, source='data'):
    """(an int8 model of `model`, a float32 `SentenceEncoder`, and the line that says
    what runs in int8: `run.calibration.int8_inference`), calibrated on the first
    CALIBRATION_TEXTS of `texts` unless a calibration is kept for it and `source`."""
    encoder = model.encoder
    ctx = encoder.token_embedding.weight.list_ctx()[0]

    def batches():
        encoded = [EncodedExample(*encode_text_pair(text, None, vocab,
                                                    max_len or encoder.max_len)[:2], None)
                   for text in itertools.islice(texts, CALIBRATION_TEXTS)]
        return calibration_batches(encoded, vocab.pad_id, ctx)
    return int8_inference(model, batches, fast, source)


def vectors_in_chunks(model, vocab, texts, batch_size=64, max_len=None):
    """Yield the vectors of consecutive chunks of `texts` (an iterable of str, read as
    it goes), each a float32 NumPy array (chunk_size, num_hiddens) in the texts' order;
    model: a `SentenceEncoder` (`sentence_encoder`)."""
    encoder = model.encoder
    max_len = max_len or encoder.max_len
    ctx = encoder.token_embedding.weight.list_ctx()[0]
    texts = iter(texts)
    while True:
        chunk = list(itertools.islice(texts, batch_size * CHUNK_BATCHES))
        if not chunk:
            return
        encoded = [EncodedExample(*encode_text_pair(text, None, vocab, max_len)[:2], None)
                   for text in chunk]
        vectors = onp.empty((len(chunk), encoder.num_hiddens), dtype='float32')
        for indices, rows in outputs_by_length(model, encoded, ctx, vocab.pad_id,
                                               batch_size):
            vectors[indices] = rows
        yield vectors
