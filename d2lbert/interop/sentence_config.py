"""What a sentence-transformers model folder says about its text vectors, so that
`d2lbert encode --data` computes the vectors it was trained to give:

    FOLDER/  modules.json               its modules in order: Transformer, Pooling
                                        (in the folder "path", e.g. 1_Pooling/), ...
             1_Pooling/config.json      which pooling: pooling_mode_mean_tokens: true,
                                        pooling_mode_cls_token: false, ... (or, in newer
                                        folders, "pooling_mode": "mean")
             sentence_bert_config.json  max_seq_length: the longest input, in tokens

A folder without them (a plain BERT, a d2lbert model) says nothing: None.
"""
import json
import os

from ..model.sentence_encoder import POOLINGS

MODULES_FILE = 'modules.json'
POOLING_MODULE = 'sentence_transformers.models.Pooling'
SENTENCE_BERT_FILE = 'sentence_bert_config.json'
MODE_PREFIX = 'pooling_mode_'


def folder_pooling(folder):
    """'mean' or 'cls', the pooling of the sentence-transformers folder `folder`, or
    None if it has no Pooling module (or is no folder). A ValueError naming the file
    for a pooling d2lbert does not compute (max, weighted mean, ...)."""
    path = pooling_config_path(folder)
    if path is None:
        return None
    config = read_json(path)
    if isinstance(config.get('pooling_mode'), str):
        modes = {config['pooling_mode']}
    else:
        modes = {mode_name(key) for key, value in config.items()
                 if key.startswith(MODE_PREFIX) and value is True}
    if len(modes) != 1 or not modes <= set(POOLINGS):
        raise ValueError(f'{path} asks for {" + ".join(sorted(modes)) or "no"} pooling; '
                         'd2lbert computes mean or cls pooling: choose one with --pooling')
    return modes.pop()


def mode_name(key):
    """'pooling_mode_mean_tokens' -> 'mean', 'pooling_mode_cls_token' -> 'cls'."""
    return key[len(MODE_PREFIX):].replace('_tokens', '').replace('_token', '')


def pooling_config_path(folder):
    """The config.json of the Pooling module `modules.json` lists, or None."""
    modules_path = os.path.join(folder, MODULES_FILE)
    if not os.path.isfile(modules_path):
        return None
    for module in read_json(modules_path):
        if isinstance(module, dict) and module.get('type') == POOLING_MODULE:
            path = os.path.join(folder, module.get('path', ''), 'config.json')
            return path if os.path.isfile(path) else None
    return None


def folder_max_len(folder):
    """The longest input (in tokens) of a sentence-transformers folder, or None."""
    path = os.path.join(folder, SENTENCE_BERT_FILE)
    if not os.path.isfile(path):
        return None
    length = read_json(path).get('max_seq_length')
    return length if isinstance(length, int) and length > 0 else None


def read_json(path):
    """The JSON value of a file; a ValueError naming it if it is not JSON."""
    try:
        with open(path, encoding='utf-8') as f:
            return json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f'{path} is not a JSON file ({error})') from None
