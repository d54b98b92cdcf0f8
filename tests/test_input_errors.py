"""Bad input gets a clear `ValueError` that names the argument and the offending value.

Without these checks MXNet either fails deep inside an operator with an unreadable
message or, worse, silently computes garbage (an out-of-range embedding index is
clipped to the last row; a valid length of 0 masks everything).
"""
import re

import mxnet as mx
import numpy as onp
import pytest
from mxnet import np

import d2lbert
from conftest import VOCAB_SIZE, make_batch, make_model
from test_hybridize import pretraining_targets


@pytest.fixture(scope='module')
def net():
    """A tiny model (max_len 16, vocab 64, type_vocab_size 2), shared by this module's
    tests: they only read it."""
    return make_model('original')


@pytest.fixture(scope='module')
def hybridized_net():
    net = make_model('original')
    net.hybridize()
    return net


def with_value(batch, name, index, value):
    """A copy of batch[name] with one entry replaced."""
    array = batch[name].asnumpy().copy()
    array[index] = value
    return dict(batch, **{name: np.array(array, dtype=array.dtype)})


def resized(batch, name, shape):
    return dict(batch, **{name: np.zeros(shape, dtype='int32') + 1})


# Each case: (description, function of the batch returning a bad batch, expected message).
BAD_VALUES = [
    ('token id = vocab_size', lambda b: with_value(b, 'tokens', (1, 2), VOCAB_SIZE),
     r'tokens\[1, 2\] = 64 is not a valid token id'),
    ('negative token id', lambda b: with_value(b, 'tokens', (0, 0), -1),
     r'tokens\[0, 0\] = -1 is not a valid token id'),
    ('segment id = type_vocab_size', lambda b: with_value(b, 'segments', (2, 1), 2),
     r'segments\[2, 1\] = 2 is not a valid segment id'),
    ('valid length 0', lambda b: with_value(b, 'valid_lens', 3, 0),
     r'valid_lens\[3\] = 0 is not a valid valid length .*\[1, 10\]'),
    ('valid length > seq_len', lambda b: with_value(b, 'valid_lens', 0, 11),
     r'valid_lens\[0\] = 11 is not a valid valid length .*\[1, 10\]'),
    ('position = seq_len', lambda b: with_value(b, 'pred_positions', (1, 2), 10),
     r'pred_positions\[1, 2\] = 10 is not a valid position .*\[0, 9\]'),
    ('negative position', lambda b: with_value(b, 'pred_positions', (3, 0), -1),
     r'pred_positions\[3, 0\] = -1 is not a valid position'),
]

BAD_SHAPES = [
    ('segments shape differs from tokens', lambda b: resized(b, 'segments', (4, 9)),
     r'segments shape \(4, 9\) must equal tokens shape \(4, 10\)'),
    ('seq_len > max_len', lambda b: dict(resized(b, 'tokens', (4, 17)),
                                         segments=np.zeros((4, 17), dtype='int32')),
     r'tokens has seq_len 17 > max_len 16'),
    ('tokens not 2-d', lambda b: resized(b, 'tokens', (4, 10, 1)),
     r'tokens must have 2 dimension\(s\), got shape \(4, 10, 1\)'),
    ('valid_lens of the wrong batch size', lambda b: resized(b, 'valid_lens', (3,)),
     r'valid_lens must have shape \(4,\), got \(3,\)'),
    ('valid_lens not 1-d', lambda b: resized(b, 'valid_lens', (4, 1)),
     r'valid_lens must have 1 dimension\(s\), got shape \(4, 1\)'),
    ('pred_positions of the wrong batch size', lambda b: resized(b, 'pred_positions', (3, 2)),
     r'pred_positions must have shape \(4, num_preds\), got \(3, 2\)'),
    ('pred_positions not 2-d', lambda b: resized(b, 'pred_positions', (4,)),
     r'pred_positions must have 2 dimension\(s\), got shape \(4,\)'),
]


def ids(cases):
    return [case[0] for case in cases]


@pytest.mark.parametrize('hybridize', [False, True], ids=['imperative', 'hybridized'])
@pytest.mark.parametrize('_, make_bad, message', BAD_VALUES + BAD_SHAPES,
                         ids=ids(BAD_VALUES + BAD_SHAPES))
def test_bert_model_rejects_bad_input(net, hybridized_net, hybridize, _, make_bad, message):
    """Inside `d2lbert.check_values()`, BERTModel raises a ValueError naming the argument
    and the offending value, also when hybridized (the checks run before the graph)."""
    net = hybridized_net if hybridize else net
    with d2lbert.check_values(), pytest.raises(ValueError, match=message):
        net(**make_bad(make_batch(seed=20, seq_len=10)))


@pytest.mark.parametrize('_, make_bad, message',
                         [c for c in BAD_VALUES + BAD_SHAPES if 'pred_positions' not in c[2]],
                         ids=ids([c for c in BAD_VALUES + BAD_SHAPES
                                  if 'pred_positions' not in c[2]]))
def test_bert_encoder_rejects_bad_input(net, _, make_bad, message):
    """The encoder called on its own runs the same checks."""
    batch = make_bad(make_batch(seed=21, seq_len=10))
    with d2lbert.check_values(), pytest.raises(ValueError, match=message):
        net.encoder(batch['tokens'], batch['segments'], batch['valid_lens'])


@pytest.mark.parametrize('positions, message', [
    (np.array([[0, 8], [8, 9]], dtype='int32'),
     r'pred_positions\[1, 1\] = 9 is not a valid position .*\[0, 8\]'),
    (np.array([[0, -2], [1, 2]], dtype='int32'),
     r'pred_positions\[0, 1\] = -2 is not a valid position'),
    (np.array([[0.5, 1], [1, 2]]), r'pred_positions\[0, 0\] = 0.5 is not a valid position'),
    (np.array([[0, 1]], dtype='int32'),
     r'pred_positions must have shape \(2, num_preds\), got \(1, 2\)'),
], ids=['too large', 'negative', 'fractional', 'wrong batch size'])
def test_mask_lm_decoder_rejects_bad_positions(net, positions, message):
    """MaskLMDecoder checks pred_positions against the encoded sequence (here 9 long):
    out of range, not an integer, or not one row per example."""
    encoded = np.zeros((2, 9, 32))
    with d2lbert.check_values(), pytest.raises(ValueError, match=message):
        net.mlm(encoded, positions)


def test_non_integer_valid_length_is_rejected(net):
    """A fractional valid length is an error, not silently truncated."""
    batch = make_batch(seed=22, seq_len=10)
    batch['valid_lens'] = batch['valid_lens'].astype('float32') - 0.5
    with d2lbert.check_values(), pytest.raises(
            ValueError, match=r'valid_lens\[0\] = \d+\.5 .*must be an integer'):
        net(**batch)


def test_valid_input_passes_all_checks(net):
    """The extreme valid values are accepted: ids vocab_size - 1 and
    type_vocab_size - 1, valid length 1 and seq_len, position seq_len - 1."""
    batch = make_batch(seed=23, seq_len=10)
    batch = with_value(batch, 'tokens', (0, 0), VOCAB_SIZE - 1)
    batch = with_value(batch, 'segments', (1, 0), 1)
    batch = with_value(batch, 'valid_lens', 0, 1)
    batch = with_value(batch, 'pred_positions', 0, 0)
    batch = with_value(batch, 'valid_lens', 1, 10)
    batch = with_value(batch, 'pred_positions', (1, 0), 9)
    encoded, mlm, nsp = net(**batch)
    assert onp.isfinite(mlm.asnumpy()).all()


@pytest.mark.parametrize('_, make_bad, message', BAD_VALUES, ids=ids(BAD_VALUES))
def test_values_are_checked_only_when_asked(net, _, make_bad, message):
    """Outside `d2lbert.check_values()` the value checks (which copy the inputs to the
    host) do not run: bad values raise no ValueError (MXNet may still fail later, inside
    an operator, with its own error). Inside the block, the checks run."""
    batch = make_bad(make_batch(seed=24, seq_len=10))
    try:
        for output in net(**batch):
            output.asnumpy()  # wait for MXNet's asynchronous computation
    except ValueError as error:
        pytest.fail(f'value check ran outside check_values(): {error}')
    except (mx.base.MXNetError, IndexError):
        pass  # e.g. gather_nd's IndexError for a position beyond the sequence
    with d2lbert.check_values(), pytest.raises(ValueError, match=message):
        net(**batch)


@pytest.mark.parametrize('_, make_bad, message', BAD_SHAPES, ids=ids(BAD_SHAPES))
def test_shapes_are_always_checked(net, _, make_bad, message):
    """Shape checks cost nothing and run outside `check_values()` too."""
    with pytest.raises(ValueError, match=message):
        net(**make_bad(make_batch(seed=25, seq_len=10)))


@pytest.mark.parametrize('pretraining_loss', [False, True], ids=['forward', 'loss'])
def test_a_hybridized_call_copies_nothing_to_the_host(hybridized_net, monkeypatch,
                                                      pretraining_loss):
    """The training path's forward call and loss never read a device array on the host
    (which would stall every step): `asnumpy` may not run until the results are read."""
    batch = make_batch(seed=27, seq_len=10)
    targets = pretraining_targets(batch, seed=27)
    hybridized_net(**batch)  # the graph is built
    copies, copy = [], mx.np.ndarray.asnumpy

    def recorded_copy(array):
        copies.append(array.shape)
        return copy(array)
    monkeypatch.setattr(mx.np.ndarray, 'asnumpy', recorded_copy)
    if pretraining_loss:
        hybridized_net.pretraining_loss(**batch, **targets)
    else:
        hybridized_net(**batch)
    assert copies == []


def test_check_values_restores_the_previous_state_after_an_error(net):
    """Leaving the block, even by an exception and from a nested block, restores
    the previous setting."""
    bad = with_value(make_batch(seed=26, seq_len=10), 'tokens', (0, 0), VOCAB_SIZE)
    with pytest.raises(RuntimeError):
        with d2lbert.check_values():
            with d2lbert.check_values():
                pass
            with pytest.raises(ValueError, match=re.escape('tokens[0, 0] = 64')):
                net(**bad)  # still checked after the inner block ended
            raise RuntimeError
    for output in net(**with_value(bad, 'tokens', (0, 0), 1)):
        output.asnumpy()  # no check after the block


def test_skip_value_checks_is_deprecated():
    """The 0.1 name warns for one minor version, and changes nothing."""
    with pytest.warns(DeprecationWarning, match='check_values'):
        with d2lbert.skip_value_checks():
            pass
