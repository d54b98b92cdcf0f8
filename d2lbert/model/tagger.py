"""`BERTTagger`: a pretrained BERT and a new output layer for a tag per token (named
entities, parts of speech)."""
from mxnet.gluon import nn

from ..util.numpy_mode import numpy_mode_block
from .bert import cross_entropy

IGNORED = -1  # the label of positions that carry no tag: padding, <cls>, <sep>, and a
#               word's pieces after its first with sub-word tokenizers


@numpy_mode_block
class BERTTagger(nn.HybridBlock):
    """Tags every token.

    forward(tokens, segments, valid_lens): (batch_size, seq_len) ids, (batch_size,)
      returns: logits (batch_size, seq_len, num_tags)

    The encoder is the pretrained model's own, shared; dropout and the output layer,
    one `Dense` applied to every token's vector, are new. With a sub-word tokenizer
    only the first piece of each word carries the word's tag; the others, like padding
    and the special tokens, have the label `IGNORED`, which the loss and decoding skip.

        tagger = BERTTagger(bert, num_tags=9)  # bert: a pretrained BERTModel
        tagger.output.initialize()
        tagger(tokens, segments, valid_lens).shape  # (batch_size, seq_len, 9)
    """
    def __init__(self, bert, num_tags: int, dropout: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        if num_tags < 1:
            raise ValueError(f'num_tags must be at least 1, got {num_tags}')
        self.num_tags, self.dropout_rate = num_tags, dropout
        self.config = bert.config  # the architecture of its BERT: save_pretrained writes it
        with self.name_scope():
            self.encoder = bert.encoder
            self.dropout = nn.Dropout(dropout)
            self.output = nn.Dense(num_tags, flatten=False, in_units=bert.encoder.num_hiddens)

    def hybrid_forward(self, F, tokens, segments, valid_lens):
        return self.output(self.dropout(self.encoder(tokens, segments, valid_lens)))

    def loss(self, logits, labels):
        """The mean cross-entropy over the tagged positions of each example
        (batch_size,); labels (batch_size, seq_len), `IGNORED` where untagged."""
        tagged = (labels != IGNORED).astype('float32')
        safe = labels * tagged.astype(labels.dtype)   # IGNORED -> 0, then weighted out
        per_token = cross_entropy(logits, safe) * tagged
        return per_token.sum(axis=1) / (tagged.sum(axis=1) + 1e-8)
