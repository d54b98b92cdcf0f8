"""Input validation at the public entry points: a clear `ValueError` instead of a
traceback from inside MXNet or, worse, a silently wrong result.

Shape checks are free and always on. Value checks (ids in range, lengths in range)
copy the inputs to the host, which would stall every step of a training loop (on a
GPU, the whole queue of work); so they are off unless asked for, while debugging::

    with d2lbert.check_values():
        net(tokens, segments, valid_lens)   # a token id out of range is a ValueError

Data made by d2lbert (`encode_batch`, the pipelines of the commands) is valid by
construction: its values are checked where they enter, from text or files.
"""
import contextlib
import functools
import threading
import warnings

import mxnet as mx
import numpy as onp

_state = threading.local()


@contextlib.contextmanager
def check_values():
    """Within this block (this thread), the forward calls of the blocks also check the
    values of their inputs: ids and lengths in range, at the cost of a copy to the host.

        with d2lbert.check_values():
            net(tokens, segments, valid_lens)  # ValueError: tokens[0, 3] = 30522 is ...
    """
    previous = getattr(_state, 'check', False)
    _state.check = True
    try:
        yield
    finally:
        _state.check = previous


@contextlib.contextmanager
def skip_value_checks():
    """Deprecated since 0.2.0, when value checks became opt-in (`check_values`): does
    nothing but warn. Removed in 0.3.0."""
    warnings.warn('d2lbert.skip_value_checks() is deprecated and does nothing: values are '
                  'checked only inside d2lbert.check_values()', DeprecationWarning,
                  stacklevel=3)
    yield


def value_checks_enabled():
    return getattr(_state, 'check', False)


def is_symbol(x):
    return isinstance(x, mx.sym.Symbol)


def check_before_call(block_class, check):
    """Make every call of a `block_class` block on arrays (not symbols) run
    `check(block, *inputs)` first; returns the class. Keeps the book's blocks free of
    checks: `check_mlm_inputs` in `model/heads.py` is one."""
    call = block_class.__call__

    @functools.wraps(call)
    def checked_call(block, *inputs):
        if not is_symbol(inputs[0]):
            check(block, *inputs)
        return call(block, *inputs)
    block_class.__call__ = checked_call
    return block_class


def namespace(x):
    """`mx.sym` inside a hybridized graph, `mx.nd` for imperative arrays: F.np, F.npx."""
    return mx.sym if is_symbol(x) else mx.nd


def _shape(name, x, ndim):
    shape = getattr(x, 'shape', None)
    if shape is None:
        raise ValueError(f'{name} must be an array, got {type(x).__name__}')
    if len(shape) != ndim:
        raise ValueError(f'{name} must have {ndim} dimension(s), got shape {tuple(shape)}')
    return tuple(shape)


def _range(name, x, low, high, what):
    """Values of x must lie in [low, high]; report the first offender."""
    values = x.asnumpy() if hasattr(x, 'asnumpy') else onp.asarray(x)
    bad = onp.argwhere((values < low) | (values > high) | (values != onp.floor(values)))
    if bad.size:
        index = tuple(int(i) for i in bad[0])
        raise ValueError(f'{name}{list(index)} = {values[index]} is not a valid {what} '
                         f'(must be an integer in [{low}, {high}])')


def check_encoder_inputs(tokens, segments, valid_lens, vocab_size, type_vocab_size, max_len):
    """Validate (tokens, segments, valid_lens); returns (batch_size, seq_len)."""
    batch_size, seq_len = _shape('tokens', tokens, 2)
    if _shape('segments', segments, 2) != (batch_size, seq_len):
        raise ValueError(f'segments shape {tuple(segments.shape)} must equal tokens shape '
                         f'{(batch_size, seq_len)}')
    if seq_len > max_len:
        raise ValueError(f'tokens has seq_len {seq_len} > max_len {max_len} of this model')
    if valid_lens is not None and _shape('valid_lens', valid_lens, 1) != (batch_size,):
        raise ValueError(f'valid_lens must have shape ({batch_size},), '
                         f'got {tuple(valid_lens.shape)}')
    if value_checks_enabled():
        _range('tokens', tokens, 0, vocab_size - 1, 'token id')
        _range('segments', segments, 0, type_vocab_size - 1, 'segment id')
        if valid_lens is not None:
            _range('valid_lens', valid_lens, 1, seq_len, 'valid length')
    return batch_size, seq_len


def check_pred_positions(pred_positions, batch_size, seq_len):
    if _shape('pred_positions', pred_positions, 2)[0] != batch_size:
        raise ValueError(f'pred_positions must have shape ({batch_size}, num_preds), '
                         f'got {tuple(pred_positions.shape)}')
    if value_checks_enabled():
        _range('pred_positions', pred_positions, 0, seq_len - 1, 'position')


def check_pretraining_targets(pred_positions, mlm_weights, mlm_labels, nsp_labels,
                              batch_size, seq_len, vocab_size):
    """Shapes of the masked-LM and next-sentence targets; values of positions and labels."""
    check_pred_positions(pred_positions, batch_size, seq_len)
    for name, array in (('mlm_weights', mlm_weights), ('mlm_labels', mlm_labels)):
        if _shape(name, array, 2) != tuple(pred_positions.shape):
            raise ValueError(f'{name} shape {tuple(array.shape)} must equal pred_positions '
                             f'shape {tuple(pred_positions.shape)}')
    if _shape('nsp_labels', nsp_labels, 1) != (batch_size,):
        raise ValueError(f'nsp_labels must have shape ({batch_size},), '
                         f'got {tuple(nsp_labels.shape)}')
    if value_checks_enabled():
        _range('mlm_labels', mlm_labels, 0, vocab_size - 1, 'token id')
        _range('nsp_labels', nsp_labels, 0, 1, 'next-sentence label')
