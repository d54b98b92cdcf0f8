"""One fine-tuning step of the d2l book's NLI chapter ("Natural Language Inference:
Fine-Tuning BERT", MXNet edition, with d2l 1.0.3).

The chapter wraps its pretrained `d2l.BERTModel` (bert.small: hidden 256, FFN 512,
4 heads, 2 blocks, dropout 0.1, 512 positions) in a `BERTClassifier` (the encoder,
the pretrained `hidden` tanh layer, a new `Dense(3)`), an imperative `nn.Block`. Its
`SNLIBERTDataset` pads every pair to max_len (128); the `DataLoader` hands over
MXNet arrays (token ids and segments int32, valid lengths and labels float32) and
`d2l.train_ch13` runs `d2l.train_batch_ch13` per batch: forward, softmax
cross-entropy, backward, `trainer.step` (Adam, lr 1e-4), then the batch's loss
and accuracy read back. We run exactly that, from random weights (the speed does
not depend on them).
"""
from mxnet.gluon import nn


class BookBERTClassifier(nn.Block):
    """The book's `BERTClassifier`: forward((tokens, segments, valid_lens)) -> (batch, 3)."""
    def __init__(self, bert):
        super().__init__()
        self.encoder = bert.encoder
        self.hidden = bert.hidden
        self.output = nn.Dense(3)

    def forward(self, inputs):
        tokens_X, segments_X, valid_lens_x = inputs
        encoded_X = self.encoder(tokens_X, segments_X, valid_lens_x)
        return self.output(self.hidden(encoded_X[:, 0, :]))


def book_classifier(config, ctx):
    """The chapter's model of `config`'s size, initialized (Xavier, as the book's
    pretraining; the output layer with its default)."""
    from d2l import mxnet as d2l
    from mxnet import init
    bert = d2l.BERTModel(config.vocab_size, config.num_hiddens, config.ffn_num_hiddens,
                         config.num_heads, config.num_layers, config.dropout,
                         config.num_positions)
    bert.initialize(init.Xavier(), ctx=[ctx])
    net = BookBERTClassifier(bert)
    net.output.initialize(ctx=[ctx])
    return net


def book_arrays(batch):
    """The book's batch from a host `TaskBatch` padded to max_len: fresh MXNet arrays,
    features (tokens, segments, valid_lens as float32) and float32 labels."""
    from mxnet import np
    features = [np.array(batch.tokens, dtype='int32'), np.array(batch.segments, dtype='int32'),
                np.array(batch.valid_lens, dtype='float32')]
    return features, np.array(batch.labels, dtype='float32')


def host_batches(config, pairs):
    """The book's batches of `pairs`: in order, every pair padded to max_len."""
    from .finetune_pairs import in_order, padded_like_the_book
    return [padded_like_the_book(chunk, config.max_len)
            for chunk in in_order(pairs, config.batch_size)]


def build_step(config, batches, ctx, lr=1e-4):
    """A zero-argument function running one book step on the next of `batches` (host
    `TaskBatch`es, taken in turn)."""
    import itertools
    from d2l import mxnet as d2l
    from mxnet import gluon
    net = book_classifier(config, ctx)
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': lr})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    turns = itertools.cycle(batches)

    def step():
        features, labels = book_arrays(next(turns))
        d2l.train_batch_ch13(net, features, labels, loss, trainer, [ctx],
                             d2l.split_batch_multi_inputs)
    return step
