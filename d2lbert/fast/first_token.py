"""A classifier that reads one token's encoding, its last encoder block computed for
that token alone (`d2lbert predict`'s sentence classifiers).

    net = first_token_only(net)     # a new model of a BERTClassifier on the fast path

A `BERTClassifier` reads only `<cls>`'s encoding of its encoder's output. In the last
block, each position's add & norm and feed-forward block depend on that position alone,
so they need computing for position 0 only: the attention still reads every token (the
keys and values), its output layer runs at position 0 (`FusedMultiHeadAttention.
first_query_only`), and the rest on batch_size rows instead of batch_size * seq_len. The
logits are the same.
"""
from ..model import BERTClassifier
from ..util.numpy_mode import numpy_mode_block
from ..util.shared_blocks import copy_sharing_parameters
from .attention import FusedMultiHeadAttention
from .layer_norm import LinkedEncoderBlock


@numpy_mode_block
class FirstTokenEncoderBlock(LinkedEncoderBlock):
    """`LinkedEncoderBlock` (same parameters) computed for each sequence's first token:
    (batch_size, seq_len, H), (batch_size,) -> (batch_size, 1, H), the block's output at
    position 0."""
    def hybrid_forward(self, F, X, valid_lens):
        attended = self.attention(X, valid_lens)
        Y = self.norm1(X[:, :1, :], attended[:, :1, :])
        return self.norm2(Y, self.ffn(Y))


def first_token_only(net):
    """A new model of `net`, a `BERTClassifier` on the fast path, whose encoder's last
    block is a `FirstTokenEncoderBlock`: the same logits for less work; net is left as it
    was. Any other model (a `MeanPooledClassifier`, a tagger, the book's blocks) is
    returned as it is."""
    if type(net) is not BERTClassifier or type(net.encoder.blocks[-1]) is not LinkedEncoderBlock:
        return net
    copied = copy_sharing_parameters(net)
    last = copied.encoder.blocks[-1]
    last.__class__ = FirstTokenEncoderBlock
    last.attention.first_query_only = isinstance(last.attention, FusedMultiHeadAttention)
    return copied
