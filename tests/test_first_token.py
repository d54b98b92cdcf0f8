"""`fast.first_token_only`: a sentence classifier's last block computed for `<cls>` alone
gives the logits of the whole model (the book's classifier, in float32 and bfloat16 on
the fast path), leaves the caller's model as it was, and leaves other models alone."""
import numpy as onp
import pytest

from conftest import make_batch, make_model


def classifier(kind='BERTClassifier'):
    import d2lbert
    net = getattr(d2lbert, kind)(make_model(num_layers=2), 3, dropout=0.0)
    net.output.initialize()
    return net


def logits(net, batch):
    return net(batch['tokens'], batch['segments'], batch['valid_lens']).asnumpy()


@pytest.mark.parametrize('precision', ['fp32', 'bf16'])
def test_the_logits_are_the_whole_models(precision):
    from d2lbert import fast
    from d2lbert.run.precision import inference_precision
    from d2lbert.run.setup import prepare_inference
    import mxnet as mx
    if precision == 'bf16' and inference_precision('auto', mx.cpu()) != 'bf16':
        pytest.skip('no avx512_bf16 here')
    whole = prepare_inference(classifier(), precision, fast)
    first = fast.first_token_only(whole)
    first.hybridize(static_alloc=True)
    assert type(first.encoder.blocks[-1]).__name__ == 'FirstTokenEncoderBlock'
    assert type(whole.encoder.blocks[-1]).__name__ == 'LinkedEncoderBlock'
    for seed in range(3):
        batch = make_batch(seed, batch_size=5, seq_len=9)
        expected = logits(whole, batch)
        onp.testing.assert_allclose(logits(first, batch), expected, rtol=1e-4,
                                    atol=1e-5 if precision == 'fp32' else 2e-2)


def test_other_models_are_returned_as_they_are():
    from d2lbert import fast
    from d2lbert.run.setup import prepare_model
    mean_pooled = prepare_model(classifier('MeanPooledClassifier'), 'fp32', fast)
    assert fast.first_token_only(mean_pooled) is mean_pooled
    book = classifier()  # the book's blocks, not the fast path
    assert fast.first_token_only(book) is book


def positions_into_last_output_layer(net, batch):
    """How many positions per sequence the last block's attention output layer takes
    (net run imperatively, so that the hook sees arrays)."""
    net.hybridize(False)
    seen = []
    hook = net.encoder.blocks[-1].attention.output.register_forward_pre_hook(
        lambda block, args: seen.append(args[0].shape[1]))
    logits(net, batch)
    hook.detach()
    return seen[0]


def test_the_last_attention_output_layer_takes_the_first_position_only():
    from d2lbert import fast
    from d2lbert.run.setup import prepare_inference
    whole = prepare_inference(classifier(), 'fp32', fast)
    first = fast.first_token_only(whole)
    batch = make_batch(0, batch_size=5, seq_len=9)
    assert positions_into_last_output_layer(first, batch) == 1
    assert positions_into_last_output_layer(whole, batch) == 9  # the caller's, as it was


def test_in_int8_the_logits_are_the_whole_int8_models():
    """The int8 model of the first-token model (the same calibration): the same logits
    as the whole int8 model (each row is rounded on its own), the last attention output
    layer in int8 on the first position only."""
    from d2lbert import fast
    from d2lbert.run.setup import prepare_inference
    whole = prepare_inference(classifier(), 'fp32', fast)
    first = fast.first_token_only(whole)
    batches = [[make_batch(seed, batch_size=6, seq_len=11)[name] for name in
                ('tokens', 'segments', 'valid_lens')] for seed in range(3)]
    calibration = fast.calibrate(whole, batches)
    calibration.errors = dict.fromkeys(calibration.errors, 0.0)  # every product int8
    whole8, first8 = (fast.int8_model(net, calibration) for net in (whole, first))
    assert type(first8.encoder.blocks[-1].attention.output).__name__ == 'Int8Dense'
    batch = make_batch(5, batch_size=5, seq_len=9)
    assert positions_into_last_output_layer(first8, batch) == 1
    onp.testing.assert_allclose(logits(first8, batch), logits(whole8, batch), rtol=1e-4,
                                atol=1e-5)
