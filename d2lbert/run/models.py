"""Which model a path means: one answer for every command (`predict`, `convert`,
`encode`, `finetune --model`) and for `load_pretrained`.

    a fine-tuning run folder     its best model, OUT/model (what `predict` uses)
    a pretraining run folder     its newest complete checkpoint
    a checkpoint or model folder itself
    anything else                itself (a Hugging Face folder, a book model's zip or name)
"""
import json
import os

import mxnet as mx

from ..model import BERTModel
from . import checkpoint as ckpt

MODEL_DIR = 'model'
INIT_SIGMA = 0.02  # pretraining draws every weight from Normal(0, 0.02), as Google's BERT


def model_folder(path):
    """The folder of model files that `path` means (see the module doc)."""
    best = os.path.join(path, MODEL_DIR)
    if os.path.isfile(os.path.join(path, 'model.params')):
        return path
    if os.path.isfile(os.path.join(best, 'model.params')):
        return best
    checkpoints = ckpt.list_checkpoints(path)
    return checkpoints[-1] if checkpoints else path


def model_step(folder):
    """The training step of the model in a `model_folder` (None if unknown): a
    checkpoint's own; a run's best model's, as its newest checkpoint records it."""
    state = os.path.join(folder, 'state.json')
    if not os.path.isfile(state):
        parent = os.path.dirname(os.path.abspath(folder))
        checkpoints = ckpt.list_checkpoints(parent)
        if os.path.basename(os.path.abspath(folder)) != MODEL_DIR or not checkpoints:
            return None
        state = os.path.join(checkpoints[-1], 'state.json')
    try:
        with open(state, encoding='utf-8') as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    best = saved.get('best') if os.path.basename(os.path.abspath(folder)) == MODEL_DIR \
        else saved
    return (best or {}).get('step')


def random_model_like(bert, seed=0):
    """A new `BERTModel` of bert's config (`bert.config`) with random parameters, drawn
    as pretraining draws them: weights from Normal(0, INIT_SIGMA) after
    `mx.random.seed(seed)`, LayerNorm scales 1 and shifts and biases 0. The model
    `finetune --from-scratch` trains: the baseline every transfer claim needs."""
    net = BERTModel.from_config(bert.config)
    mx.random.seed(seed)
    net.initialize(mx.init.Normal(INIT_SIGMA))
    return net
