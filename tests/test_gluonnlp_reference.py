"""`BERTConfig.original` computes exactly what GluonNLP 0.10's BERT computes.

We build GluonNLP's `BERTModel` (the implementation behind the published MXNet BERT
checkpoints) at the same tiny size, give it random weights, copy every weight into a
d2lbert model, and compare the outputs on a padded batch with two segments.

Intentional differences, none of which shows here:

* GluonNLP applies dropout to the embeddings *before* their LayerNorm; d2lbert applies it
  *after*, as Google's BERT does. In inference mode (no `autograd.record()`) dropout is
  the identity, so the order does not matter.
* GluonNLP sets the sequence output at padded positions to 0 (`SequenceMask`); d2lbert
  leaves whatever the padded queries computed. So sequence outputs are compared at the
  valid positions only, and the masked-LM prediction positions lie inside the valid
  lengths (at a padded position GluonNLP's MLM head would read the zeroed vector).
* GluonNLP runs time-major (seq_len, batch, units) inside and uses the legacy `mx.nd`
  arrays, so it is built and called with MXNet's NumPy mode switched off.
"""
import mxnet as mx
import numpy as onp
import pytest

import d2lbert
from conftest import make_batch, randomize_parameters, to_numpy, tiny_config

gluonnlp = pytest.importorskip('gluonnlp')

TOLERANCE = 1e-4


def legacy_mode():
    """MXNet's legacy (non-NumPy) array and shape semantics, which GluonNLP 0.10 needs."""
    return mx.util.np_array(False), mx.util.np_shape(False)


def gluonnlp_bert(config):
    """GluonNLP's BERTModel with the architecture of `config`, randomly initialized."""
    np_array, np_shape = legacy_mode()
    with np_array, np_shape:
        encoder = gluonnlp.model.BERTEncoder(
            num_layers=config.num_layers, units=config.num_hiddens,
            hidden_size=config.ffn_num_hiddens, max_length=config.max_len,
            num_heads=config.num_heads, dropout=config.dropout, activation='gelu',
            layer_norm_eps=config.layer_norm_eps)
        net = gluonnlp.model.BERTModel(
            encoder, config.vocab_size, token_type_vocab_size=config.type_vocab_size,
            units=config.num_hiddens, embed_size=config.num_hiddens, use_pooler=True,
            use_decoder=True, use_classifier=True)
        net.initialize()
        # GluonNLP infers some input sizes at the first call: run one, then randomize.
        ones = mx.nd.ones((1, 2))
        net(ones, ones, mx.nd.array([2]), ones)
        randomize_parameters(net, seed=7)
    return net


def parameter_pairs(ours, theirs):
    """(d2lbert parameter, GluonNLP parameter) for every weight of the model."""
    def pairs(a, b, names):
        return [(getattr(a, x), getattr(b, y)) for x, y in names]

    dense = [('weight', 'weight'), ('bias', 'bias')]
    norm = [('gamma', 'gamma'), ('beta', 'beta')]
    enc, genc = ours.encoder, theirs.encoder
    result = [(enc.token_embedding.weight, theirs.word_embed[0].weight),
              (enc.segment_embedding.weight, theirs.token_type_embed[0].weight),
              (enc.position_embedding.weight, genc.position_weight)]
    result += pairs(enc.embedding_norm, genc.layer_norm, norm)
    for block, cell in zip(enc.blocks, genc.transformer_cells):
        result += pairs(block.attention, cell.attention_cell,
                        [(f'{n}_{k}', f'{n}_{k}') for n in ('query', 'key', 'value')
                         for k in ('weight', 'bias')])
        result += pairs(block.attention.output, cell.proj, dense)
        result += pairs(block.norm1, cell.layer_norm, norm)
        result += pairs(block.ffn.dense1, cell.ffn.ffn_1, dense)
        result += pairs(block.ffn.dense2, cell.ffn.ffn_2, dense)
        result += pairs(block.norm2, cell.ffn.layer_norm, norm)
    result += pairs(ours.nsp.pooler, theirs.pooler, dense)
    result += pairs(ours.nsp.output, theirs.classifier, dense)
    result += pairs(ours.mlm.transform[0], theirs.decoder[0], dense)
    result += pairs(ours.mlm.transform[2], theirs.decoder[2], norm)
    # The decoder's output weight is tied to the word embedding in both models.
    result.append((ours.mlm.output_bias, theirs.decoder[3].bias))
    return result


def copy_weights(theirs, ours):
    pairs = parameter_pairs(ours, theirs)
    assert {mine.name for mine, _ in pairs} == set(ours.collect_params().keys()), \
        'every d2lbert parameter is copied'
    for mine, other in pairs:
        assert mine.shape == other.shape, (mine.name, other.name)
        mine.set_data(mx.np.array(other.data().asnumpy()))


def run_gluonnlp(net, batch):
    np_array, np_shape = legacy_mode()
    with np_array, np_shape:
        args = [mx.nd.array(batch[k].asnumpy()) for k in
                ('tokens', 'segments', 'valid_lens', 'pred_positions')]
        encoded, _pooled, nsp, mlm = net(*args)
        return [x.asnumpy().astype('float64') for x in (encoded, nsp, mlm)]


def test_original_matches_gluonnlp_bert():
    """With GluonNLP's weights, `BERTConfig.original` gives the same sequence output
    (valid positions), NSP logits and MLM logits within 1e-4 on a padded batch with
    two segments."""
    config = tiny_config('original')
    theirs = gluonnlp_bert(config)
    ours = d2lbert.BERTModel.from_config(config)
    ours.initialize()
    copy_weights(theirs, ours)

    batch = make_batch(seed=8, batch_size=4, seq_len=12)
    assert set(batch['segments'].asnumpy().ravel()) == {0, 1}
    assert batch['valid_lens'].asnumpy().min() < 12

    encoded, mlm, nsp = to_numpy(*ours(**batch))
    ref_encoded, ref_nsp, ref_mlm = run_gluonnlp(theirs, batch)
    for i, length in enumerate(batch['valid_lens'].asnumpy()):
        assert onp.abs(encoded[i, :length] - ref_encoded[i, :length]).max() < TOLERANCE
    assert onp.abs(nsp - ref_nsp).max() < TOLERANCE
    assert onp.abs(mlm - ref_mlm).max() < TOLERANCE
    # Not trivially equal: the logits vary across examples and vocabulary entries.
    assert ref_mlm.std() > 0.1 and ref_nsp.std() > 0.01


def test_gluonnlp_and_d2lbert_differ_without_the_copy():
    """Sanity check of the comparison above: two independently initialized models do
    not agree, so agreement really comes from identical computation."""
    config = tiny_config('original')
    theirs = gluonnlp_bert(config)
    ours = d2lbert.BERTModel.from_config(config)
    ours.initialize()
    randomize_parameters(ours, seed=9)
    batch = make_batch(seed=8, batch_size=4, seq_len=12)
    _, mlm, _ = to_numpy(*ours(**batch))
    _, _, ref_mlm = run_gluonnlp(theirs, batch)
    assert onp.abs(mlm - ref_mlm).max() > 0.1
