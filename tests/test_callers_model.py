"""No helper changes the caller's model: the fast path and the precision come as a new
model sharing the parameters (`fast.accelerate`, `model.precision.compute_in`,
`load_pretrained(..., fast=, precision=)`, `run.setup`), built by
`util.shared_blocks.copy_sharing_parameters`; `encode_texts` leaves the model it is
given as it was, whatever precision it runs in."""
import collections

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon

import d2lbert
from conftest import make_batch, make_model, save_tiny_model
from d2lbert import fast
from d2lbert.model.precision import (COMPUTE_DTYPES, compute_dtype, compute_in,
                                     feed_forward_inputs_in_float32, keep_float32)
from d2lbert.run.setup import prepare_inference, prepare_training
from d2lbert.util.shared_blocks import copy_sharing_parameters
from test_packing import on_device, pretraining_batch
from test_precision import HAS_BF16


def snapshot(net):
    """What decides what `net` computes: each block's name, class, compute type,
    hybridization and attributes (such as the links of reduced layers)."""
    found = []
    net.apply(lambda block: found.append((
        block.name, type(block), compute_dtype(block), getattr(block, '_active', None),
        {name: value for name, value in vars(block).items()
         if isinstance(value, (bool, int, float, str))})))
    return found


def same_parameters(net, other):
    """The very same Parameter objects, under the same structural names (the keys
    `save_parameters` writes)."""
    params = net._collect_params_with_prefix()
    others = other._collect_params_with_prefix()
    return list(params) == list(others) and all(params[k] is others[k] for k in params)


def forward(net, batch):
    """The MLM and NSP logits of a `make_batch` batch, as NumPy arrays."""
    outputs = net(batch['tokens'], batch['segments'], batch['valid_lens'],
                  batch['pred_positions'])
    return [out.asnumpy() for out in outputs[1:]]


def attention_in_float32(net):
    return keep_float32(net, [net.encoder.blocks[0].attention])


MAKERS = {
    'accelerate': fast.accelerate,
    'compute_in bf16': lambda net: compute_in(net, 'bfloat16'),
    'accelerate, compute_in bf16': lambda net: compute_in(fast.accelerate(net), 'bfloat16'),
    'keep_float32': lambda net: attention_in_float32(compute_in(net, 'bfloat16')),
    'feed_forward_inputs_in_float32':
        lambda net: feed_forward_inputs_in_float32(compute_in(net, 'bfloat16')),
    'prepare_inference': lambda net: prepare_inference(net, 'bf16', fast),
    'prepare_training': lambda net: prepare_training(net, 'adam', precision='bf16',
                                                     fast_path=fast)[0],
}


@pytest.mark.parametrize('make', list(MAKERS.values()), ids=list(MAKERS))
def test_a_new_model_shares_the_parameters_and_leaves_the_callers(make):
    net = make_model('d2l', seed=1)
    net.hybridize()
    batch = make_batch(seed=2)
    expected = forward(net, batch)
    before = snapshot(net)
    model = make(net)
    assert model is not net and same_parameters(model, net)
    assert snapshot(net) == before
    assert all(onp.array_equal(a, b) for a, b in zip(forward(net, batch), expected))


def copy_blocks_of(net):
    found = []
    net.apply(found.append)
    return found


def test_the_copy_has_no_block_of_the_original():
    net = make_model('d2l', seed=1)
    model = fast.accelerate(net)
    assert {id(b) for b in copy_blocks_of(model)}.isdisjoint(
        {id(b) for b in copy_blocks_of(net)})
    assert model.encoder is model._children['encoder']


def test_the_reduced_precision_model_is_what_it_says_and_the_callers_float32():
    net = make_model('d2l', seed=1)
    model = feed_forward_inputs_in_float32(compute_in(fast.accelerate(net), 'bfloat16'))
    block, book_block = model.encoder.blocks[0], net.encoder.blocks[0]
    assert compute_dtype(block.attention) == COMPUTE_DTYPES['bfloat16']
    assert compute_dtype(block.ffn.dense1) == COMPUTE_DTYPES['float32']
    assert compute_dtype(block.ffn.dense2) == COMPUTE_DTYPES['bfloat16']
    assert type(block).__name__ == 'LinkedEncoderBlock' and block.norm2.takes_reduced
    assert type(book_block).__name__ == 'TransformerEncoderBlock'
    assert {compute_dtype(b) for b in copy_blocks_of(net)} == {COMPUTE_DTYPES['float32']}


def test_keep_float32_undoes_the_links_of_the_layers_it_keeps():
    model = compute_in(fast.accelerate(make_model('d2l', seed=1)), 'bfloat16')
    assert model.encoder.blocks[0].norm1.takes_reduced
    kept = keep_float32(model, [model.encoder.blocks[0].attention])
    assert not kept.encoder.blocks[0].norm1.takes_reduced
    assert kept.encoder.blocks[0].attention.output.casts_output
    assert model.encoder.blocks[0].norm1.takes_reduced  # the model given: as it was
    with pytest.raises(ValueError, match='keep_float32: .* is not a block of'):
        keep_float32(model, [kept.encoder.blocks[0]])


def test_training_one_trains_the_other():
    net = make_model('d2l', seed=3)
    model = fast.accelerate(net)
    model.hybridize()
    batch = make_batch(seed=4)
    before = forward(net, batch)
    trainer = gluon.Trainer(model.collect_params(), 'sgd', {'learning_rate': 0.5})
    with autograd.record():
        mlm, nsp = model.pretraining_loss(*on_device(pretraining_batch(seed=4)))
        loss = mlm + nsp
    loss.backward()
    trainer.step(1)
    after = forward(net, batch)
    assert not onp.allclose(after[0], before[0])
    assert all(onp.allclose(a, b, atol=1e-5) for a, b in zip(forward(model, batch), after))


def test_a_copy_of_a_fast_model_runs_its_own_pretraining_objective():
    """`FastBERTModel`'s cached objective graphs belong to the model that made them: a
    copy of the model (here: in another precision) makes its own, on its own blocks."""
    quick = fast.accelerate(make_model('d2l', seed=3))
    batch = on_device(pretraining_batch(seed=4))
    quick.pretraining_loss(*batch)
    copy = compute_in(quick, 'float32')
    copy.pretraining_loss(*batch)
    objective, = copy.objectives().values()
    assert objective._model() is copy and next(iter(quick.objectives().values()))._model() \
        is quick


@pytest.mark.parametrize('saved_by', ['book', 'fast'])
def test_a_checkpoint_of_either_loads_into_the_other(saved_by, tmp_path):
    book = make_model('d2l', seed=5)
    quick = fast.accelerate(make_model('d2l', seed=6))
    source, target = (book, quick) if saved_by == 'book' else (quick, book)
    path = str(tmp_path / 'model.params')
    source.save_parameters(path)
    target.load_parameters(path)
    batch = make_batch(seed=7)
    assert all(onp.allclose(a, b, atol=1e-5)
               for a, b in zip(forward(source, batch), forward(target, batch)))


def test_the_copy_hybridizes_and_exports_under_the_originals_names(tmp_path):
    net = make_model('d2l', seed=8)
    model = copy_sharing_parameters(net)
    model.hybridize()
    forward(model, make_batch(seed=9))
    model.export(str(tmp_path / 'copy'))
    saved = mx.nd.load(str(tmp_path / 'copy-0000.params'))
    assert {key.split(':', 1)[1] for key in saved} == set(net.collect_params().keys())


def test_a_block_met_twice_is_copied_once():
    net = make_model('d2l', seed=1)
    shared = net.encoder.blocks[0]
    twice = gluon.nn.HybridSequential()
    twice.add(shared, shared)
    copy = copy_sharing_parameters(twice)
    assert copy[0] is copy[1] and copy[0] is not shared


@pytest.fixture(scope='module')
def tiny_folder(tmp_path_factory):
    words = 'a man is eating food someone eats the film was long and dull'.split()
    vocab = d2lbert.Vocab(collections.Counter(words))
    return save_tiny_model(tmp_path_factory.mktemp('tiny'), vocab)


@pytest.mark.parametrize('precision', ['fp32', 'bf16'])
@pytest.mark.parametrize('fast_path', [False, True], ids=['book', 'fast'])
def test_load_pretrained_builds_the_model_it_is_asked_for(tiny_folder, fast_path, precision):
    net, _ = d2lbert.load_pretrained(tiny_folder, fast=fast_path, precision=precision)
    assert fast.is_fast(net) == fast_path
    assert compute_dtype(net.encoder.blocks[0].attention) == COMPUTE_DTYPES[
        {'fp32': 'float32', 'bf16': 'bfloat16'}[precision]]


@pytest.mark.parametrize('argument, value', [('fast', 'yes'), ('precision', 'bfloat16')])
def test_load_pretrained_names_a_bad_choice(tiny_folder, argument, value):
    with pytest.raises(ValueError, match=f'^{argument} must be'):
        d2lbert.load_pretrained(tiny_folder, **{argument: value})


TEXTS = ['a man is eating food', 'someone eats', 'the film was long and dull', 'a']


@pytest.mark.parametrize('precision', ['fp32', 'auto'])
def test_encode_texts_leaves_the_callers_model_as_it_was(tiny_folder, precision):
    """Whatever the caller made of the model (here: bf16 where the CPU computes it,
    hybridized), encode_texts leaves every block's class, compute type and
    hybridization as they were, and the model computes what it computed before."""
    net, vocab = d2lbert.load_pretrained(tiny_folder, precision='bf16' if HAS_BF16 else 'fp32')
    net.hybridize()
    batch = make_batch(seed=10, vocab_size=len(vocab))
    expected = forward(net, batch)
    before = snapshot(net)
    vectors = d2lbert.encode_texts(net, vocab, TEXTS, precision=precision)
    assert vectors.shape == (len(TEXTS), 32)
    assert snapshot(net) == before
    assert all(onp.array_equal(a, b) for a, b in zip(forward(net, batch), expected))


def test_encode_texts_auto_is_the_commands_auto(tiny_folder, monkeypatch):
    """'auto' runs bf16 where the CPU computes it and fp32 elsewhere
    (`run.precision.inference_precision`): its vectors are those of that precision."""
    from d2lbert.run import precision as run_precision
    net, vocab = d2lbert.load_pretrained(tiny_folder)
    choices = ((set(), 'fp32'), ({'avx512_bf16'}, 'bf16')) if HAS_BF16 else ((set(), 'fp32'),)
    for flags, chosen in choices:  # bf16 only where oneDNN has its kernels
        monkeypatch.setattr(run_precision, 'cpu_flags', lambda flags=flags: flags)
        auto = d2lbert.encode_texts(net, vocab, TEXTS, precision='auto')
        assert onp.array_equal(auto, d2lbert.encode_texts(net, vocab, TEXTS,
                                                           precision=chosen))
    with pytest.raises(ValueError, match='^precision must be one of auto, fp32, bf16'):
        d2lbert.encode_texts(net, vocab, TEXTS, precision='fp16')
