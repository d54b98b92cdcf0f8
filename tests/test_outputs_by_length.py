"""`run.inference.outputs_by_length` (predict --data, encode --data): every example's
outputs, computed in length-sorted batches, equal the model's on that example alone."""
import numpy as onp

from conftest import make_model


def encoded_examples(count, seed=0):
    from d2lbert.data.tasks.encoding import EncodedExample
    rng = onp.random.default_rng(seed)
    examples = []
    for _ in range(count):
        length = int(rng.integers(2, 12))
        examples.append(EncodedExample([int(i) for i in rng.integers(5, 50, length)],
                                       [0] * length, None))
    return examples


def test_each_examples_outputs_are_the_models_on_it_alone():
    import d2lbert
    import mxnet as mx
    from d2lbert.run.inference import outputs_by_length
    net = d2lbert.BERTClassifier(make_model(num_layers=2), 3, dropout=0.0)
    net.output.initialize()
    net.hybridize(static_alloc=True)
    examples = encoded_examples(23)
    found = {}
    for indices, outputs in outputs_by_length(net, examples, mx.cpu(), batch_size=5):
        assert len(indices) == len(outputs)
        found.update(zip(indices.tolist(), outputs))
    assert sorted(found) == list(range(len(examples)))
    for i, example in enumerate(examples):
        alone = net(mx.np.array([example.token_ids]), mx.np.array([example.segments]),
                    mx.np.array([len(example.token_ids)])).asnumpy()[0]
        onp.testing.assert_allclose(found[i], alone, rtol=1e-4, atol=1e-5)
