"""`SentenceEncoder`: one vector per text, a BERT encoder's token encodings pooled, as
sentence-transformers reads a text (Reimers and Gurevych, 2019)."""
from mxnet.gluon import nn

from ..util.numpy_mode import numpy_mode_block
from .classifier import mean_of_valid

POOLINGS = ('mean', 'cls')
NORM_EPSILON = 1e-12  # the smallest norm divided by, as torch's F.normalize


@numpy_mode_block
class SentenceEncoder(nn.HybridBlock):
    """A text's vector from its tokens' encodings.

    forward(tokens, segments, valid_lens): (batch_size, seq_len) ids, (batch_size,)
      returns: (batch_size, num_hiddens), one vector per text

    encoder: a `BERTEncoder` (e.g. a pretrained `BERTModel`'s `encoder`), shared, not
    copied. pooling: 'mean', the mean of the encodings of each text's valid tokens
    (`<cls>` and `<sep>` included, padding not: sentence-transformers' mean pooling),
    or 'cls', the encoding of `<cls>` (as it is: no pooler layer). normalize: divide
    each vector by its length (then a dot product is the cosine similarity).
    """
    def __init__(self, encoder, pooling='mean', normalize=False, **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f'pooling must be one of {POOLINGS}, got {pooling!r}')
        self.pooling, self.normalize = pooling, normalize
        with self.name_scope():
            self.encoder = encoder

    def hybrid_forward(self, F, tokens, segments, valid_lens):
        encoded = self.encoder(tokens, segments, valid_lens)
        if self.pooling == 'mean':
            vectors = mean_of_valid(F, encoded, valid_lens)
        else:
            vectors = encoded[:, 0, :]
        if not self.normalize:
            return vectors
        norms = F.np.sqrt((vectors * vectors).sum(axis=-1, keepdims=True))
        return vectors / F.np.maximum(norms, NORM_EPSILON)
