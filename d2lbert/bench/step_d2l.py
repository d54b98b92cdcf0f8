"""One pretraining step of the d2l book (d2l 1.0.3, MXNet edition, section 15.10).

The book's `BERTModel` is an imperative `nn.Block` (it cannot be hybridized). Its
`train_bert` loop, for one device, does per batch: split the batch over the devices,
`_get_batch_loss_bert` (forward, softmax cross-entropy of the masked-LM predictions
weighted by mlm_weights, and of next-sentence prediction) under `autograd.record()`,
backward, `trainer.step(1)` with Adam. We run exactly that; only the learning rate is
the benchmark's (it does not change the speed). As in the book's data, valid_lens are
float32.
"""


def d2l_model(config, max_len, ctx):
    """The book's `d2l.BERTModel` of the benchmark's size, initialized like the book."""
    from d2l import mxnet as d2l
    from mxnet import init
    net = d2l.BERTModel(config.vocab_size, num_hiddens=config.num_hiddens,
                        ffn_num_hiddens=config.ffn_num_hiddens, num_heads=config.num_heads,
                        num_blks=config.num_layers, dropout=config.dropout, max_len=max_len)
    net.initialize(init.Xavier(), ctx=[ctx])
    return net


def book_step(net, loss, trainer, vocab_size, batch, devices):
    """The body of the book's `train_bert` loop, for one batch of device arrays."""
    from d2l import mxnet as d2l
    from mxnet import autograd, gluon
    shards = [gluon.utils.split_and_load(elem, devices, even_split=False) for elem in batch]
    with autograd.record():
        mlm_ls, nsp_ls, ls = d2l._get_batch_loss_bert(net, loss, vocab_size, *shards)
    for l in ls:
        l.backward()
    trainer.step(1)
    return mlm_ls, nsp_ls


def build_step(config, arrays, ctx, lr=1e-4):
    """A zero-argument function running one book training step on `arrays`, on `ctx`."""
    from mxnet import gluon, np
    devices = [ctx]
    net = d2l_model(config, config.seq_len, ctx)
    loss = gluon.loss.SoftmaxCELoss()
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': lr})
    host = dict(arrays, valid_lens=arrays['valid_lens'].astype('float32'))
    names = ('tokens', 'segments', 'valid_lens', 'pred_positions', 'mlm_weights',
             'mlm_labels', 'nsp_labels')

    def step():
        # The book's DataLoader hands over fresh MXNet arrays every batch.
        batch = [np.array(host[name], dtype=host[name].dtype) for name in names]
        book_step(net, loss, trainer, config.vocab_size, batch, devices)
    return step
