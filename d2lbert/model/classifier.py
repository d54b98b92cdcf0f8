"""`BERTClassifier`: a pretrained BERT and a new output layer for a label (or a number)
per sentence or sentence pair, as the book's fine-tuning chapters build it; and
`MeanPooledClassifier`, the same reading the mean of every token's encoding instead
of `<cls>`'s."""
from mxnet.gluon import nn

from ..util.numpy_mode import numpy_mode_block
from .bert import cross_entropy


@numpy_mode_block
class BERTClassifier(nn.HybridBlock):
    """bert's encoder and pooler, then a new layer: ids (batch, seq_len) -> (batch, classes)."""
    def __init__(self, bert, num_classes: int, dropout: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        if num_classes < 1:
            raise ValueError(f'num_classes must be at least 1, got {num_classes}')
        self.num_classes, self.dropout_rate = num_classes, dropout
        self.config = bert.config  # the architecture of its BERT: save_pretrained writes it
        with self.name_scope():
            self.encoder = bert.encoder
            self.pooler = bert.nsp.pooler
            self.dropout = nn.Dropout(dropout)
            self.output = nn.Dense(num_classes, in_units=bert.encoder.num_hiddens)

    def hybrid_forward(self, F, tokens, segments, valid_lens):
        encoded = self.encoder(tokens, segments, valid_lens)
        return self.output(self.dropout(self.pooler(encoded[:, 0, :])))

    def loss(self, logits, labels):
        """Per example: cross-entropy of the labels (batch_size,) ints, or for
        regression the squared error of the values (batch_size,) floats."""
        if self.num_classes == 1:
            return (logits[:, 0] - labels.astype('float32')) ** 2
        return cross_entropy(logits, labels)



@numpy_mode_block
class MeanPooledClassifier(BERTClassifier):
    """`BERTClassifier` that reads the mean of the encodings of each text's valid
    tokens (`<cls>` and `<sep>` included, padding not) instead of `<cls>`'s encoding.

    forward(tokens, segments, valid_lens): as `BERTClassifier`'s.

    Pretraining teaches `<cls>` one thing: whether two texts follow each other. A model
    pretrained on little text learns that for its own sentence pairs only, and its
    `<cls>` encoding carries little else about one text; the mean keeps what every
    token's encoding learned (the tokens' meaning in context), as Sentence-BERT reads
    texts (Reimers and Gurevych, 2019). Built like `BERTClassifier`::

        classifier = MeanPooledClassifier(bert, num_classes=2)
    """
    def hybrid_forward(self, F, tokens, segments, valid_lens):
        encoded = self.encoder(tokens, segments, valid_lens)
        pooled = self.pooler(mean_of_valid(F, encoded, valid_lens))
        return self.output(self.dropout(pooled))


def mean_of_valid(F, X, valid_lens):
    """Mean over the positions of X (batch_size, seq_len, num_hiddens) before each
    row's valid length (batch_size,): (batch_size, num_hiddens). A weighted sum of each
    row's positions, weight 1 / valid length before it and 0 after, as one batched
    matrix product (MXNet's sum over the middle axis takes several times as long)."""
    lens = F.np.expand_dims(valid_lens.astype('float32'), -1)  # (batch_size, 1)
    valid = F.npx.arange_like(X, axis=1) < lens  # (batch_size, seq_len): pads False
    weights = F.np.expand_dims(valid.astype('float32') / lens, 1)  # (batch_size, 1, seq_len)
    return F.np.squeeze(F.np.matmul(weights, X), axis=1)
