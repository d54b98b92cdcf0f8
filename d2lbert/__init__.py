"""d2lbert: BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it.

Importing d2lbert sets OMP_NUM_THREADS (when unset) before MXNet loads and switches
MXNet to its NumPy interface (`npx.set_np()`), which all blocks here use.
"""
from .threads import set_default_threads

set_default_threads()

from mxnet import npx  # noqa: E402  (after the thread count is set)

npx.set_np()

from .attention import MultiHeadAttention, masked_softmax  # noqa: E402
from .checks import skip_value_checks  # noqa: E402
from .config import BERTConfig  # noqa: E402
from .data import Vocab, load_data_wiki  # noqa: E402
from .devices import try_all_gpus, try_gpu  # noqa: E402
from .encoder import BERTEncoder  # noqa: E402
from .encoding import get_bert_encoding, load_pretrained  # noqa: E402
from .heads import MaskLMDecoder, NextSentenceClassifier  # noqa: E402
from .model import BERTModel  # noqa: E402
from .transformer import PositionWiseFFN, TransformerEncoderBlock  # noqa: E402

__version__ = '0.1.0'
