"""`BERTForQuestionAnswering`: a pretrained BERT and a new output layer that points at
the answer's first and last token in the passage (SQuAD)."""
from mxnet.gluon import nn

from ..util.numpy_mode import numpy_mode_block
from .bert import cross_entropy

PADDING_LOGIT = -1e6  # the logit of padded positions: a probability of exactly 0


@numpy_mode_block
class BERTForQuestionAnswering(nn.HybridBlock):
    """Scores every token as the start and as the end of the answer span.

    forward(tokens, segments, valid_lens): (batch_size, seq_len) ids, (batch_size,)
      returns: (start_logits, end_logits), each (batch_size, seq_len)

    The encoder is the pretrained model's own, shared; the output layer, one
    `Dense(2)` applied to every token's vector, is new (no dropout before it, as in
    Google's BERT, GluonNLP and Hugging Face). A question without an answer in the
    window points both ends at `<cls>`, position 0.

    Padded positions (>= valid_lens) get the logit `PADDING_LOGIT`, so they never win
    and an example's loss does not depend on how much padding its batch has. The
    other positions' logits are exactly the output layer's, as Hugging Face's
    `BertForQuestionAnswering` computes them (it masks nothing).

        qa = BERTForQuestionAnswering(bert)  # bert: a pretrained BERTModel
        qa.output.initialize()
        start_logits, end_logits = qa(tokens, segments, valid_lens)  # (batch, seq_len) each
    """
    def __init__(self, bert, **kwargs):
        super().__init__(**kwargs)
        self.config = bert.config  # the architecture of its BERT: save_pretrained writes it
        with self.name_scope():
            self.encoder = bert.encoder
            self.output = nn.Dense(2, flatten=False, in_units=bert.encoder.num_hiddens)

    def hybrid_forward(self, F, tokens, segments, valid_lens=None):
        logits = self.output(self.encoder(tokens, segments, valid_lens))  # (batch, seq, 2)
        if valid_lens is not None:
            logits = F.npx.sequence_mask(logits, valid_lens.astype('float32'),
                                         use_sequence_length=True, value=PADDING_LOGIT,
                                         axis=1)
        return logits[:, :, 0], logits[:, :, 1]

    def loss(self, outputs, labels):
        """The mean of the start and the end cross-entropy of each example
        (batch_size,); outputs (start_logits, end_logits), labels (batch_size, 2)
        ints, the answer's first and last token position (0, 0 for no answer)."""
        start_logits, end_logits = outputs
        return (cross_entropy(start_logits, labels[:, 0])
                + cross_entropy(end_logits, labels[:, 1])) / 2
