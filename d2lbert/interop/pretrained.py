"""Reuse a pretrained BERT: load a checkpoint, encode text."""
import os

import mxnet as mx
from mxnet import np

from ..model import BERTModel
from ..train import checkpoint as ckpt


def load_pretrained(path, ctx=None):
    """Load a pretrained model from a run's output folder (its newest checkpoint), a
    checkpoint folder, or a model folder written by `d2lbert convert --from-hf`.
    Returns (net, vocab); net is hybridized, on ctx (default CPU)."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f'no pretrained model folder at {path!r}')
    if os.path.isfile(os.path.join(path, 'model.params')) and not os.path.isfile(
            os.path.join(path, 'manifest.json')):
        from .convert import load_model_dir
        net, vocab, _ = load_model_dir(path)
        net.collect_params().reset_ctx(ctx or mx.cpu())
    else:
        checkpoint = ckpt.find_checkpoint(path)
        config, vocab, _ = ckpt.read_checkpoint_meta(checkpoint)
        net = BERTModel.from_config(config)
        net.load_parameters(os.path.join(checkpoint, 'model.params'), ctx=ctx or mx.cpu())
    net.hybridize(static_alloc=True)
    return net, vocab


def get_bert_encoding(net, vocab, tokens_a, tokens_b=None):
    """Encode one sentence (or a pair) with a pretrained BERT.

    tokens_a, tokens_b: lists of tokens (e.g. `'a crane is flying'.split()`)
    returns: (1, len(tokens_a) + len(tokens_b or []) + 2 or 3, num_hiddens), the
    encodings of `<cls> a <sep> [b <sep>]`.
    """
    ids = [vocab.cls_id] + vocab[list(tokens_a)] + [vocab.sep_id]
    segments = [0] * len(ids)
    if tokens_b is not None:
        ids_b = vocab[list(tokens_b)] + [vocab.sep_id]
        ids, segments = ids + ids_b, segments + [1] * len(ids_b)
    ctx = next(iter(net.collect_params().values())).list_ctx()[0]
    token_ids = np.array([ids], dtype='int32', ctx=ctx)
    segment_ids = np.array([segments], dtype='int32', ctx=ctx)
    encoded, _, _ = net(token_ids, segment_ids)
    return encoded
