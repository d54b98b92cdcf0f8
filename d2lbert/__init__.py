"""d2lbert: BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it.

Importing d2lbert sets OMP_NUM_THREADS (when unset) and, where MXNet's OpenBLAS would
fall back to generic kernels on this CPU, OPENBLAS_CORETYPE, before MXNet loads; it switches
MXNet to its NumPy interface (`npx.set_np()`), which all blocks here use.

Layers, each importing only those before it: `util` (helpers), `model` (the book's
blocks), `fast` (the same model, faster on a CPU: `fast.accelerate`), `data`,
`train`; then `interop`, `bench` and the `d2lbert` command (`cli`).
"""
from .util.blas import set_blas_core
from .util.threads import set_default_threads

set_default_threads()
set_blas_core()

from mxnet import npx  # noqa: E402  (after the thread count is set)

npx.set_np()

from . import fast  # noqa: E402
from .data import Vocab, load_data_wiki  # noqa: E402
from .interop import get_bert_encoding, load_pretrained  # noqa: E402
from .model import (AddNorm, BERTClassifier, BERTConfig, BERTEncoder,  # noqa: E402
                    BERTForQuestionAnswering, BERTModel, BERTTagger, MaskLMDecoder,
                    MultiHeadAttention, NextSentenceClassifier, PositionWiseFFN,
                    TransformerEncoderBlock, masked_softmax)
from .run import try_all_gpus, try_gpu  # noqa: E402
from .util.checks import skip_value_checks  # noqa: E402

__version__ = '0.1.0'
