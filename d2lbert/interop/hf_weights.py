"""Which Hugging Face tensor is which d2lbert parameter, and moving the values across.

Hugging Face names every tensor of `BertForPreTraining` by its module path:

    bert.embeddings.word_embeddings.weight           encoder.token_embedding.weight
    bert.embeddings.token_type_embeddings.weight     encoder.segment_embedding.weight
    bert.embeddings.position_embeddings.weight       encoder.position_embedding.weight
    bert.embeddings.LayerNorm.{weight,bias}          encoder.embedding_norm.{gamma,beta}
    bert.encoder.layer.i.attention.self.query.*      encoder.blocks[i].attention.query_*
      (key, value alike)
    bert.encoder.layer.i.attention.output.dense.*    encoder.blocks[i].attention.output
    bert.encoder.layer.i.attention.output.LayerNorm  encoder.blocks[i].norm1
    bert.encoder.layer.i.intermediate.dense.*        encoder.blocks[i].ffn.dense1
    bert.encoder.layer.i.output.dense.*              encoder.blocks[i].ffn.dense2
    bert.encoder.layer.i.output.LayerNorm.*          encoder.blocks[i].norm2
    bert.pooler.dense.*                              nsp.pooler
    cls.predictions.transform.dense.*                mlm.transform[0]
    cls.predictions.transform.LayerNorm.*            mlm.transform[2]
    cls.predictions.bias                             mlm.output_bias
    cls.predictions.decoder.weight                   mlm.output_weight (only if untied)
    cls.seq_relationship.*                           nsp.output

`encoder_map` gives the `bert.embeddings.*` and `bert.encoder.*` rows alone, which the
fine-tuned models of `hf_tasks` share. PyTorch's `Linear.weight` is (out_features,
in_features), the layout of Gluon's `Dense.weight`, so every tensor is copied as it is,
without transposing.
"""
import warnings

import numpy as onp
from mxnet import np


class MissingHeadsWarning(UserWarning):
    """A checkpoint lacks pretraining heads (pooler, masked LM, next sentence): they
    stay randomly initialized. A command that draws them fresh on purpose (`pretrain
    --model`) or never uses them (`finetune`) says so in its own words instead."""

# Optional parts of a checkpoint: `BertModel` has no `cls.*` heads, and may lack a pooler.
HEADS = {'pooler': 'bert.pooler.', 'mlm': 'cls.predictions.', 'nsp': 'cls.seq_relationship.'}
# Saved by some versions of transformers, but not weights.
_BUFFERS = ('bert.embeddings.position_ids',)


def dense(name, layer):
    """The names of a linear layer `name` (a PyTorch `Linear`, or a Gluon `Dense` in a
    parameter file) -> a Gluon `Dense`'s Parameters."""
    return {f'{name}.weight': layer.weight, f'{name}.bias': layer.bias}


def layer_norm(name, norm):
    """The tensor names of a PyTorch `LayerNorm` called `name` -> a Gluon `LayerNorm`'s
    Parameters."""
    return {f'{name}.weight': norm.gamma, f'{name}.bias': norm.beta}


def encoder_map(encoder):
    """Hugging Face tensor name -> Parameter of a `BERTEncoder` built by
    `BERTConfig.original`: the `bert.embeddings.*` and `bert.encoder.*` rows of the
    table above."""
    params = {'bert.embeddings.word_embeddings.weight': encoder.token_embedding.weight,
              'bert.embeddings.token_type_embeddings.weight': encoder.segment_embedding.weight,
              'bert.embeddings.position_embeddings.weight': encoder.position_embedding.weight,
              **layer_norm('bert.embeddings.LayerNorm', encoder.embedding_norm)}
    for i, block in enumerate(encoder.blocks):
        layer = f'bert.encoder.layer.{i}'
        for kind in ('query', 'key', 'value'):
            params[f'{layer}.attention.self.{kind}.weight'] = getattr(block.attention,
                                                                      f'{kind}_weight')
            params[f'{layer}.attention.self.{kind}.bias'] = getattr(block.attention,
                                                                    f'{kind}_bias')
        params.update(dense(f'{layer}.attention.output.dense', block.attention.output))
        params.update(layer_norm(f'{layer}.attention.output.LayerNorm', block.norm1))
        params.update(dense(f'{layer}.intermediate.dense', block.ffn.dense1))
        params.update(dense(f'{layer}.output.dense', block.ffn.dense2))
        params.update(layer_norm(f'{layer}.output.LayerNorm', block.norm2))
    return params


def parameter_map(net):
    """Hugging Face `BertForPreTraining` tensor name -> Parameter of a `BERTModel`
    built by `BERTConfig.original` (in the table above)."""
    params = encoder_map(net.encoder)
    params.update(dense('bert.pooler.dense', net.nsp.pooler))
    params.update(dense('cls.predictions.transform.dense', net.mlm.transform[0]))
    params.update(layer_norm('cls.predictions.transform.LayerNorm', net.mlm.transform[2]))
    params['cls.predictions.bias'] = net.mlm.output_bias
    if net.mlm.output_weight is not net.encoder.token_embedding.weight:
        params['cls.predictions.decoder.weight'] = net.mlm.output_weight
    params.update(dense('cls.seq_relationship', net.nsp.output))
    return params


def canonical_names(tensors):
    """Rename a checkpoint's tensors to `BertForPreTraining`'s names (returns a new dict).

    `BertModel` checkpoints lack the 'bert.' prefix; old ones call the LayerNorm
    parameters gamma/beta; `cls.predictions.decoder.bias` is another name of
    `cls.predictions.bias`.
    """
    has_prefix = any(name.startswith('bert.') for name in tensors)
    renamed = {}
    for name, value in tensors.items():
        if not has_prefix and not name.startswith('cls.'):
            name = 'bert.' + name
        name = name.replace('LayerNorm.gamma', 'LayerNorm.weight')
        name = name.replace('LayerNorm.beta', 'LayerNorm.bias')
        if name == 'cls.predictions.decoder.bias':
            renamed.setdefault('cls.predictions.bias', value)
        else:
            renamed[name] = value
    return renamed


def missing_heads(params, tensors, source):
    """The heads (names of `HEADS`) that `tensors` lacks entirely.

    Raises ValueError for any other missing tensor (or a partly present head).
    """
    absent = [name for name in params if name not in tensors]
    heads = [head for head, prefix in HEADS.items()
             if all(name in absent for name in params if name.startswith(prefix))]
    for name in absent:
        if not any(name.startswith(HEADS[head]) for head in heads):
            raise ValueError(f'{source} lacks the tensor {name!r}')
    return heads


def check_shapes(params, tensors, source):
    """Raise ValueError naming the first tensor whose shape differs from its parameter's."""
    for name, param in params.items():
        shape = tuple(tensors[name].shape) if name in tensors else param.shape
        if shape != param.shape:
            raise ValueError(f'{source}: tensor {name!r} has shape {shape}, but the config '
                             f'implies {param.shape}')


def load_tensors(net, tensors, source, unused_heads=()):
    """Copy a checkpoint's tensors (name -> NumPy array) into `net`'s parameters.

    Raises ValueError for a missing tensor, a shape the config does not imply, or a NaN
    or infinite value (a corrupt file). Returns the list of missing heads, whose
    parameters keep their initial values;
    warns about them (but those in `unused_heads`, which the caller has no use for)
    and about tensors that are ignored (e.g. a fine-tuned classifier's).
    """
    tensors = canonical_names(tensors)
    params = parameter_map(net)
    if 'cls.predictions.decoder.weight' not in params:
        tensors.pop('cls.predictions.decoder.weight', None)  # the tied word embedding
    heads = missing_heads(params, tensors, source)
    check_shapes(params, tensors, source)
    for name in params:
        if name in tensors and not onp.isfinite(tensors[name]).all():
            raise ValueError(f'{source} is corrupt: tensor {name!r} holds NaN or infinite '
                             'values')
    for name, param in params.items():
        if name in tensors:
            param.set_data(np.array(onp.asarray(tensors[name], dtype='float32')))
    ignored = sorted(set(tensors) - set(params) - set(_BUFFERS))
    missing = [head for head in heads if head not in unused_heads]
    if missing:
        warnings.warn(f'{source} has no {missing} head(s): their parameters stay randomly '
                      'initialized', MissingHeadsWarning, stacklevel=3)
    if ignored:
        warnings.warn(f'{source}: ignored tensor(s) {ignored}', stacklevel=3)
    return heads


def tensors_of(params):
    """The values of `params` (Hugging Face name -> Parameter, e.g. `parameter_map(net)`)
    as float32 NumPy arrays, by name.

    An untied decoder is a Linear layer with its own bias in `transformers`, so
    `cls.predictions.bias` is then also written as `cls.predictions.decoder.bias`.
    """
    tensors = {name: param.data().asnumpy().astype('float32')
               for name, param in params.items()}
    if 'cls.predictions.decoder.weight' in tensors:
        tensors['cls.predictions.decoder.bias'] = tensors['cls.predictions.bias']
    return tensors
