"""d2lbert: BERT in MXNet Gluon, the way "Dive into Deep Learning" teaches it.

The public names are :data:`__all__`: the book's blocks (`BERTEncoder`, `BERTModel`,
the task heads, ...), `BERTConfig`, loading, saving and encoding text
(`load_pretrained`, `save_pretrained`, `encode_batch`, `encode_texts`), and the
vocabularies. Each is
imported when first used (PEP 562), so ``import d2lbert`` itself loads nothing,
MXNet included, and changes nothing global: no environment variable, not MXNet's
NumPy mode, no file. The blocks' own methods (building, initializing, calling,
hybridizing, saving and loading them) and d2lbert's functions run in MXNet's NumPy
mode whether or not the caller switched it on (`npx.set_np()`, as every d2l chapter
does), and legacy `mx.nd` code runs beside them. The caller's own code on the arrays
they return (a sum of two losses, `backward`, a `gluon.Trainer`) runs in NumPy mode
too: inside `with d2lbert.numpy_mode():`, which leaves the mode as it was, or after
`npx.set_np()`.

Layers, each importing only those before it: `util` (helpers), `model` (the book's
blocks), `fast` (the same model, faster on a CPU: `fast.accelerate`), `data`, `run`
(what every training command shares), `pretraining` and `finetuning`; then `interop`,
`bench`, `launch` and the `d2lbert` command (`cli`). Each is reachable as an attribute
(``d2lbert.data``, ``d2lbert.interop``, ...).

Versions follow semantic versioning; a public name is removed only after a minor
version in which it warns (docs/changelog.md).
"""
import importlib

__version__ = '0.2.0'

# public name: the module of d2lbert it comes from
PUBLIC_NAMES = {
    # the book's blocks
    'MultiHeadAttention': 'model', 'masked_softmax': 'model', 'AddNorm': 'model',
    'PositionWiseFFN': 'model', 'TransformerEncoderBlock': 'model', 'BERTEncoder': 'model',
    'MaskLMDecoder': 'model', 'NextSentenceClassifier': 'model', 'BERTModel': 'model',
    'BERTConfig': 'model',
    # task heads
    'BERTClassifier': 'model', 'MeanPooledClassifier': 'model', 'BERTTagger': 'model',
    'BERTForQuestionAnswering': 'model',
    # text in, models in and out
    'Vocab': 'data', 'WordPieceVocab': 'data', 'encode_batch': 'data',
    'load_data_wiki': 'data', 'load_pretrained': 'interop', 'save_pretrained': 'interop',
    'get_bert_encoding': 'interop', 'encode_texts': 'interop',
    # the process and the devices
    'configure_cpu': 'util.process', 'check_values': 'util.checks',
    'skip_value_checks': 'util.checks', 'numpy_mode': 'util.numpy_mode',
    'try_gpu': 'run', 'try_all_gpus': 'run',
}
LAYERS = ('util', 'model', 'fast', 'data', 'run', 'pretraining', 'finetuning', 'interop',
          'bench', 'launch')

__all__ = ['__version__', *PUBLIC_NAMES, 'fast']


def __getattr__(name):
    """`d2lbert.BERTModel`, `d2lbert.data`, ...: their layer imported on first use."""
    if name in PUBLIC_NAMES:
        return getattr(importlib.import_module(f'{__name__}.{PUBLIC_NAMES[name]}'), name)
    if name in LAYERS:
        return importlib.import_module(f'{__name__}.{name}')
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__():
    return sorted(set(globals()) | set(PUBLIC_NAMES) | set(LAYERS))
