"""d2lbert: BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it.

Importing d2lbert sets OMP_NUM_THREADS and GOMP_SPINCOUNT=1000 (when unset: see
util/threads.py) and, where MXNet's OpenBLAS would fall back to generic kernels on this
CPU, OPENBLAS_CORETYPE, before MXNet loads; it switches MXNet to its NumPy interface
(`npx.set_np()`), which all blocks here use.

Layers, each importing only those before it: `util` (helpers), `model` (the book's
blocks), `fast` (the same model, faster on a CPU: `fast.accelerate`), `data`, `run`
(what every training command shares), `pretraining` and `finetuning`; then `interop`,
`bench` and the `d2lbert` command (`cli`).

`import d2lbert` loads the model and util only; the names below from the other layers
(`d2lbert.fast`, `d2lbert.Vocab`, `d2lbert.load_pretrained`, ...) load their layer when
first used.
"""
import importlib

from .util.blas import set_blas_core
from .util.threads import set_default_threads

set_default_threads()
set_blas_core()

from mxnet import npx  # noqa: E402  (after the thread count is set)

npx.set_np()

from .model import (AddNorm, BERTClassifier, BERTConfig, BERTEncoder,  # noqa: E402
                    BERTForQuestionAnswering, BERTModel, BERTTagger, MaskLMDecoder,
                    MeanPooledClassifier, MultiHeadAttention, NextSentenceClassifier,
                    PositionWiseFFN, TransformerEncoderBlock, masked_softmax)
from .util.checks import skip_value_checks  # noqa: E402

__version__ = '0.1.0'

# name: the module of d2lbert it comes from (the name itself when it is that module)
LAZY_NAMES = {'fast': 'fast', 'Vocab': 'data', 'load_data_wiki': 'data',
              'get_bert_encoding': 'interop', 'load_pretrained': 'interop',
              'try_all_gpus': 'run', 'try_gpu': 'run'}


def __getattr__(name):
    """`d2lbert.fast`, `d2lbert.Vocab`, ...: their layer imported on first use (PEP 562)."""
    if name not in LAZY_NAMES:
        raise AttributeError(f"module 'd2lbert' has no attribute {name!r}")
    module = importlib.import_module(f'{__name__}.{LAZY_NAMES[name]}')
    return module if name == LAZY_NAMES[name] else getattr(module, name)


def __dir__():
    return sorted(set(globals()) | set(LAZY_NAMES))
