"""`--precision int8`: a model's int8 calibration, measured once and kept.

    net8, line = int8_inference(net, batches, d2lbert.fast)   # net: float32, fast path
    line   # 'int8: 18 of 24 encoder products, 6 kept fp32; calibration kept in ...'

The calibration (`d2lbert.fast.int8.calibrate`: each product's column scales, and which
products stay float32) is measured on the user's own texts, the first CALIBRATION_TEXTS
of a run's data (or of --calibration FILE), and kept as a JSON file in the folder
`calibration_folder()` (``$D2LBERT_HOME/int8``, the user's cache), named by the model's
checksum (of its encoder's parameters) and where the texts came from: a later run of the
same model finds it and calibrates no more. A file that names another model's checksum,
or other layers, or other weight rounding (`d2lbert.fast.int8.pairs_bounded`: measured on
another CPU), or was measured on fewer texts (a run on fewer than CALIBRATION_TEXTS
texts calibrates each time), is ignored and replaced. It is written whole or not at all.
"""
import hashlib
import json
import os

from ..data.cache import data_home
from ..data.tasks import length_sorted_batches
from ..util.hashing import sha1_of_strings
from .devices import to_device
from .errors import RunError
from .files import write_file_atomically

CALIBRATION_TEXTS = 128  # texts measured: MiniLM's vectors were as close to fp32 as with 256
# texts per calibration batch, by length. Batches of 16 compute fewer padding positions
# (2,320 against 4,224 on SST-2's first 128 sentences) and calibrated 0.1 s sooner, but
# held to AVX2 MiniLM's vectors came out farther from fp32 (least cosine 0.988 against
# 0.994), as they did with the padding positions left out of the measurement
CALIBRATION_BATCH_SIZE = 64
FORMAT = 6  # the file's format; a file of another is measured again


def calibration_folder():
    """Where calibrations are kept: ``$D2LBERT_HOME/int8`` (default ~/.d2lbert/int8)."""
    folder = os.path.join(data_home(), 'int8')
    os.makedirs(folder, exist_ok=True)
    return folder


def model_checksum(net):
    """SHA-1 of the names, shapes and values of net's encoder's parameters."""
    sha1 = hashlib.sha1()
    for name, param in sorted(net.encoder.collect_params().items()):
        values = param.data().asnumpy()
        sha1.update(f'{name}{values.shape}{values.dtype}'.encode())
        sha1.update(values.tobytes())
    return sha1.hexdigest()


def calibration_path(checksum, source='data'):
    """The file of the calibration of the model `checksum` on texts from `source`
    ('data': a run's first texts; else a --calibration file's SHA-1)."""
    return os.path.join(calibration_folder(),
                        f'{checksum[:16]}-{sha1_of_strings(FORMAT, source)[:8]}.json')


def load_calibration(path, checksum, fast_path):
    """The `Int8Calibration` kept in `path` for the model `checksum`, or None if there
    is none, or it is for another model or format, or measured on fewer than
    CALIBRATION_TEXTS texts (a short first run's), or unreadable."""
    try:
        with open(path, encoding='utf-8') as f:
            kept = json.load(f)
        if (kept['format'] != FORMAT or kept['model_sha1'] != checksum
                or kept['texts'] < CALIBRATION_TEXTS):
            return None
        return fast_path.Int8Calibration(kept['errors'], kept['column_scales'],
                                         kept['pairs_bounded'])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_calibration(path, checksum, calibration, texts):
    """Keep `calibration` (an `Int8Calibration`) for the model `checksum`, measured on
    `texts` texts, in `path`, whole or not at all."""
    record = {'format': FORMAT, 'model_sha1': checksum, 'texts': texts,
              'pairs_bounded': calibration.pairs_bounded, 'errors': calibration.errors,
              'column_scales': calibration.column_scales}
    write_file_atomically('calibration', path, lambda f: json.dump(record, f, indent=1))


def calibration_batches(encoded, pad_id, ctx):
    """The batches (tokens, segments, valid_lens) on ctx of the first CALIBRATION_TEXTS
    of `encoded` (`EncodedExample`s), as a model takes them, by length."""
    for _, batch in length_sorted_batches(encoded[:CALIBRATION_TEXTS],
                                          CALIBRATION_BATCH_SIZE, pad_id):
        yield [to_device(array, ctx) for array in batch[:3]]


def int8_inference(net, batches, fast_path, source='data'):
    """A new model, net's products in int8 as its calibration says (`fast_path.
    int8_model`), hybridized, and the line that says what runs in int8; net (float32,
    on the fast path) is left unchanged. batches: a function returning the calibration
    batches (called only if no calibration is kept for net and `source`)."""
    if not fast_path.kernels.available():
        raise RunError("--precision int8 needs d2lbert's CPU kernels, which could not be "
                       'built here (see the warning above); use --precision fp32')
    try:
        pairs_bounded = fast_path.pairs_bounded()
    except RuntimeError as error:  # no rounding of the weights sums exactly here
        raise RunError(f'--precision int8: {error}') from None
    checksum = model_checksum(net)
    path = calibration_path(checksum, source)
    calibration = load_calibration(path, checksum, fast_path)
    if (calibration is not None
            and set(calibration.errors) == set(fast_path.quantizable_layers(net))
            and calibration.pairs_bounded == pairs_bounded):
        how = f'calibration kept in {path}'
    else:
        batches = list(batches())
        calibration = fast_path.calibrate(net, batches)
        texts = sum(len(batch[2]) for batch in batches)
        save_calibration(path, checksum, calibration, texts)
        counted = '1 text' if texts == 1 else f'{texts} texts'
        how = f'calibrated on {counted}, kept in {path}'
    net8 = fast_path.int8_model(net, calibration)
    net8.hybridize(static_alloc=True)
    total = len(calibration.errors)
    kept = total - len(calibration.int8_layers())
    return net8, (f'int8: {total - kept} of {total} encoder products, {kept} kept fp32; '
                  f'{how}')
