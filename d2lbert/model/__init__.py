"""The book's BERT: plain Gluon `HybridBlock`s on MXNet's operators, the code the
chapters print. It imports nothing of d2lbert but `util`.

In reading order: :mod:`.config`, :mod:`.attention`, :mod:`.add_norm`,
:mod:`.transformer`, :mod:`.encoder`, :mod:`.heads`, :mod:`.bert`; for fine-tuning
:mod:`.classifier`, :mod:`.tagger`, :mod:`.question_answering`; for sentence vectors
:mod:`.sentence_encoder`; :mod:`.precision`
turns a model's matrix products to bfloat16 or float16 (mixed precision).
"""
from .add_norm import AddNorm
from .attention import MultiHeadAttention, masked_softmax
from .bert import BERTModel
from .classifier import BERTClassifier, MeanPooledClassifier
from .config import BERTConfig
from .encoder import BERTEncoder
from .heads import MaskLMDecoder, NextSentenceClassifier, gather_positions
from .question_answering import BERTForQuestionAnswering
from .sentence_encoder import SentenceEncoder
from .tagger import BERTTagger
from .transformer import PositionWiseFFN, TransformerEncoderBlock

__all__ = ['AddNorm', 'MultiHeadAttention', 'masked_softmax', 'BERTModel', 'BERTClassifier',
           'MeanPooledClassifier', 'BERTTagger', 'BERTForQuestionAnswering', 'BERTConfig',
           'BERTEncoder', 'MaskLMDecoder', 'NextSentenceClassifier', 'gather_positions',
           'PositionWiseFFN', 'TransformerEncoderBlock', 'SentenceEncoder']
