"""`pretrain --model M`: continue a trained BERT on your text instead of starting from
random weights (domain-adaptive pretraining, Gururangan et al. 2020).

The command loads M (`interop.load_pretrained`: a d2lbert run or model folder, a Hugging
Face BERT folder, a book model) and hands it to `pretrain` as a `StartModel`; the run
takes M's architecture (`net.config`) and its vocabulary, so its tokenizer too. A head
that M lacks (a Hugging Face `BertModel` has no masked-LM transform and no next-sentence
head) was drawn fresh when M was loaded; its output layer is the word embedding (tied).
"""
import dataclasses

import mxnet as mx

from ..model import BERTModel
from ..run.errors import RunError

# The defaults of a run that continues a model (`pretrain.PretrainOptions`): measured
# with MiniLM-L6 on SST-2's training sentences, held-out MLM on its dev sentences at
# equal steps (docs/pretraining.md, "Continuing a checkpoint").
CONTINUE_RECIPE = {'batch_size': 64, 'lr': 1e-4}
# A masked-LM head that M lacks starts from random weights while the encoder is trained:
# its transform and output bias learn at FRESH_HEAD_LR_MULT times the learning rate (the
# output weight is the word embedding, at the learning rate). Measured alike: 0.196
# against 0.164 held-out whole-word MLM accuracy at step 60.
FRESH_HEAD_LR_MULT = 10.0


@dataclasses.dataclass
class StartModel:
    """The model a run continues.

    net: a `BERTModel` with `net.config`, its parameters initialized (on the CPU)
    vocab: its `Vocab` or `WordPieceVocab`
    source: what run.json records of it: {'path': ..., 'kind': ..., 'sha1': ...}
    """
    net: object
    vocab: object
    source: dict


def continued_config(start, dropout, max_len):
    """M's `BERTConfig`, with --dropout if given; --max-len must fit its positions."""
    config = start.net.config
    if dropout is not None:
        config = dataclasses.replace(config, dropout=dropout, attention_dropout=dropout)
    if config.max_len < max_len:
        raise RunError(f"--max-len {max_len} exceeds --model's max_len {config.max_len}")
    return config


def continued_net(start, config, ctxs):
    """A new `BERTModel` of `config` on ctxs holding M's parameters (so --dropout
    applies), copied in order: the two nets are built alike."""
    net = BERTModel.from_config(config)
    net.initialize(mx.init.Normal(0.02), ctx=ctxs)
    params = list(net.collect_params().values())
    start_params = list(start.net.collect_params().values())
    for param, start_param in zip(params, start_params, strict=True):
        if param.shape != start_param.shape:
            raise RunError(f'--model {start.source["path"]}: parameter {start_param.name} '
                           f'has shape {start_param.shape}, its config implies {param.shape}')
        param.set_data(start_param.data().copyto(mx.cpu()))
    if 'mlm' in getattr(start.net, 'missing_heads', ()):
        for param in fresh_head_parameters(net):
            param.lr_mult = FRESH_HEAD_LR_MULT
    return net


def fresh_heads_line(model, missing_heads):
    """What the run says of the heads ('pooler', 'mlm', 'nsp') --model lacks."""
    names = {'pooler': 'pooler', 'mlm': 'masked-LM', 'nsp': 'next-sentence'}
    *others, last = [names[head] for head in missing_heads]
    heads = f'{", ".join(others)} or {last}' if others else last
    tied = " (the masked LM's output tied to the word embeddings)" if 'mlm' in missing_heads \
        else ''
    return f'--model {model} has no {heads} head: drawn fresh{tied}'


def fresh_head_parameters(net):
    """The parameters of net's masked-LM head but its output weight (which may be the
    word embedding): the transform's and the output bias."""
    return [*net.mlm.transform.collect_params().values(), net.mlm.output_bias]
