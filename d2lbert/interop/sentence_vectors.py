"""One vector per text, for many texts: `encode_texts`, and `d2lbert encode --data`.

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
from ..data.tasks import EncodedExample, encode_text_pair, length_sorted_batches
from ..model import SentenceEncoder
from ..model.precision import feed_forward_inputs_in_float32
from ..run.calibration import CALIBRATION_TEXTS, int8_inference
from ..run.devices import to_device
from ..run.inference import outputs_by_length
from ..run.setup import prepare_model
from ..util.hashing import sha1_of_strings
from ..util.numpy_mode import in_numpy_mode

CHUNK_BATCHES = 64  # sorted by length within 64 batches: about as little padding as all


@in_numpy_mode
def encode_texts(net, vocab, texts: Iterable[str], pooling: str = 'mean',
                 batch_size: int = 64, normalize: bool = False,
                 max_len: Optional[int] = None, precision: str = 'fp32',
                 calibration: Optional[Iterable[str]] = None) -> onp.ndarray:
    """The vectors of `texts`, one row per text, in order.

    net, vocab: a pretrained BERT (`load_pretrained`); net's blocks are switched to the
      fast path and its matrix products to `precision` ('fp32', or 'bf16' on a CPU with
      avx512_bf16 or AMX: `sentence_encoder`), in place (the same parameters); 'int8'
      (a CPU with AVX2): the encoder's products in int8 on a new model
      (`run.calibration`), calibrated on `calibration` (texts; default: the first
      CALIBRATION_TEXTS of texts), a calibration kept for the model reused
    texts: a list (or any iterable) of str
    pooling: 'mean' (of each text's token encodings) or 'cls' (`<cls>`'s encoding);
      normalize: each vector divided by its length (`model.SentenceEncoder`)
    max_len: the most tokens of a text, `<cls>` and `<sep>` included (default: the
      model's max_len); longer texts are cut
    returns: float32 NumPy array (len(texts), num_hiddens)

        net, vocab = d2lbert.load_pretrained('all-MiniLM-L6-v2/')  # a Hugging Face folder
        vectors = d2lbert.encode_texts(net, vocab, ['A man eats.', 'Someone is eating.'],
                                       normalize=True)      # (2, 384)
        vectors[0] @ vectors[1]                             # their cosine similarity
    """
    model = sentence_encoder(net, pooling, normalize, precision)
    if precision == 'int8':
        texts = iter(texts)
        first = list(itertools.islice(texts, CALIBRATION_TEXTS))
        if calibration is None:
            model, _ = int8_model(model, vocab, first, max_len)
        else:
            calibration = list(calibration)
            model, _ = int8_model(model, vocab, calibration, max_len,
                                  sha1_of_strings(*calibration))
        texts = itertools.chain(first, texts)
    chunks = list(vectors_in_chunks(model, vocab, texts, batch_size, max_len))
    if not chunks:
        return onp.zeros((0, net.encoder.num_hiddens), dtype='float32')
    return onp.concatenate(chunks)


def sentence_encoder(net, pooling='mean', normalize=False, precision='fp32'):
    """A `SentenceEncoder` of net's encoder (shared), on the fast path, in `precision`
    (bf16: but the feed-forward blocks' first layers,
    `model.precision.feed_forward_inputs_in_float32`), hybridized."""
    model = prepare_model(SentenceEncoder(net.encoder, pooling, normalize), precision, fast)
    if precision == 'int8':
        return model  # float32, not hybridized: `int8_model` makes its int8 model
    if precision == 'bf16':
        feed_forward_inputs_in_float32(model)
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
        for _, batch in length_sorted_batches(encoded, 64, vocab.pad_id):
            yield [to_device(array, ctx) for array in batch[:3]]
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
