"""One pretraining step of GluonNLP 0.10's `BERTModel`, the implementation behind the
published MXNet BERT checkpoints.

GluonNLP 0.10 uses MXNet's legacy `mx.nd` arrays, so this runs with the NumPy
interface switched off (`npx.reset_np()`; the benchmark runs each implementation in its
own process). Same sizes as the others, with the book's ReLU activation and dropout;
hybridized with static memory and shapes. Loss: softmax cross-entropy of the masked-LM
predictions weighted by mlm_weights (averaged over the real slots) plus next-sentence
cross-entropy (averaged over the pairs); Adam through `gluon.Trainer`.
"""


def gluonnlp_model(config, ctx):
    """GluonNLP's BERTModel (encoder, pooler, NSP classifier, MLM decoder)."""
    import gluonnlp
    from mxnet import init
    encoder = gluonnlp.model.BERTEncoder(
        num_layers=config.num_layers, units=config.num_hiddens,
        hidden_size=config.ffn_num_hiddens, max_length=config.seq_len,
        num_heads=config.num_heads, dropout=config.dropout, activation='relu',
        layer_norm_eps=1e-5)
    net = gluonnlp.model.BERTModel(
        encoder, config.vocab_size, token_type_vocab_size=2, units=config.num_hiddens,
        embed_size=config.num_hiddens, use_pooler=True, use_decoder=True,
        use_classifier=True)
    net.initialize(init.Normal(0.02), ctx=ctx)
    net.hybridize(static_alloc=True, static_shape=True)
    return net


def pretraining_loss(net, loss, vocab_size, tokens, segments, valid_lens, pred_positions,
                     mlm_weights, mlm_labels, nsp_labels):
    """Masked-LM loss (mean over real slots) + next-sentence loss (mean over pairs)."""
    _, _, nsp_logits, mlm_logits = net(tokens, segments, valid_lens, pred_positions)
    mlm_loss = loss(mlm_logits.reshape((-1, vocab_size)), mlm_labels.reshape((-1,)),
                    mlm_weights.reshape((-1, 1))).sum() / (mlm_weights.sum() + 1e-8)
    nsp_loss = loss(nsp_logits, nsp_labels).mean()
    return mlm_loss + nsp_loss


def build_step(config, arrays, ctx, lr=1e-4):
    """A zero-argument function running one GluonNLP training step on `arrays`, on `ctx`."""
    import mxnet as mx
    from mxnet import autograd, gluon, npx
    npx.reset_np()  # legacy arrays for GluonNLP, in this whole (dedicated) process
    net = gluonnlp_model(config, ctx)
    loss = gluon.loss.SoftmaxCELoss()
    trainer = gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': lr})
    host = dict(arrays, valid_lens=arrays['valid_lens'].astype('float32'))
    names = ('tokens', 'segments', 'valid_lens', 'pred_positions', 'mlm_weights',
             'mlm_labels', 'nsp_labels')

    def step():
        batch = [mx.nd.array(host[name], dtype=host[name].dtype, ctx=ctx) for name in names]
        with autograd.record():
            total = pretraining_loss(net, loss, config.vocab_size, *batch)
        total.backward()
        trainer.step(1)
    return step
