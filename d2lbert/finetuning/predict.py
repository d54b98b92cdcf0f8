"""`d2lbert predict`: a fine-tuned model's predictions for a task file, one JSON line per
example, in the file's order::

    {"label": "entailment", "probabilities": {"entailment": 0.91, ...}}   classification
    {"value": 3.8}                                                        regression
    {"words": [...], "tags": ["B-PER", "O", ...],                         tagging
     "probabilities": [{"O": 0.01, "B-PER": 0.97, ...}, ...]}

(Tagging: words cut off by the model's max_len get the tag 'O' and no probabilities.)
When the file has labels, the task's scores are computed too.
"""
import dataclasses
import json
import os

import mxnet as mx

from ..data.tasks import encode_task
from ..run.calibration import calibration_batches, int8_inference
from ..run.files import check_new_file, check_output, write_file_atomically
from ..run.models import model_folder
from ..run.options import Options, choice, integer, option, optional, text
from ..run.precision import INFERENCE_PRECISIONS
from ..run.setup import prepare_model
from ..util.hashing import sha1_of_file
from ..util.options import check_output_file, flag
from .fast_choice import load_fast_path
from .task_model import load_task_model
from .task_predictions import predict_encoded, task_scores_of
from .tasks import TASKS

DIGITS = 6
PREDICT_BATCH_SIZE = 128  # as encode's (interop.encode.ENCODE_BATCH_SIZE)


@dataclasses.dataclass
class PredictOptions(Options):
    """The options of `d2lbert predict`, each declared once (`run.options`)."""
    model: str = option(None, 'a fine-tuning output folder (or its model/ folder)', text(),
                        required=True)
    data: str = option(None, "a file in the task's format (SQuAD: its JSON)",
                       text(optional=True))
    out: str = option(None, 'the JSON lines file to write (SQuAD: a folder)',
                      text(optional=True))
    question: str = option(None, "question answering: one question about --context "
                           "(printed: the answer, or '' for none)")
    context: str = option(None, 'question answering: the passage of --question')
    batch_size: int = option(None, 'examples per batch (with --data)', optional(integer(1)),
                             shown_default=PREDICT_BATCH_SIZE)
    overwrite: bool = option(False, 'replace the file --out if it exists (SQuAD: the '
                             'folder --out, whole) (default: refuse)')
    precision: str = option('auto', 'the type the matrix products compute in: fp32, bf16 (a '
                            'CPU with avx512_bf16 or AMX), int8 (with --data, a CPU with '
                            "AVX2: the encoder's products, calibrated on the first examples; "
                            'products too far from fp32 stay fp32) or auto (bf16 where the '
                            'CPU has it, else fp32; never int8)', choice(INFERENCE_PRECISIONS))
    calibration: str = option(None, 'with --data --precision int8: calibrate on the first '
                              "examples of this file (in the task's format, as --data) "
                              "instead of --data's", text(optional=True))

    def __post_init__(self):
        if self.batch_size is None and not self.answers_one_question():
            self.batch_size = PREDICT_BATCH_SIZE
        super().__post_init__()

    def answers_one_question(self):
        return self.question is not None or self.context is not None

    def check_together(self):
        """--question answers one question: --data's options do not apply; --calibration
        only with --precision int8 (whichever model: a question-answering one too)."""
        if self.answers_one_question():
            if self.precision == 'int8':
                raise ValueError('--precision int8 applies to --data (a question: fp32 or '
                                 'bf16)')
            for name in ('data', 'out', 'batch_size', 'calibration'):
                if getattr(self, name) is not None:
                    raise ValueError(f'{flag(name)} does not apply to --question and '
                                     '--context (one question): leave it out')
        if self.calibration is not None and self.precision != 'int8':
            raise ValueError('--calibration applies to --precision int8')


def prediction_record(info, example, prediction, probabilities):
    """The JSON object of one example's prediction (see the module doc)."""
    if info.labels is None:
        return {'value': round(float(prediction), DIGITS)}
    if info.head == 'tagger':
        tags = [info.labels[i] for i in prediction]
        tags += ['O'] * (len(example.words) - len(tags))
        return {'words': example.words, 'tags': tags,
                'probabilities': [label_probabilities(info, row) for row in probabilities]}
    return {'label': info.labels[prediction],
            'probabilities': label_probabilities(info, probabilities)}


def label_probabilities(info, row):
    return {label: round(float(p), DIGITS) for label, p in zip(info.labels, row)}


def predict(model, data, out, batch_size=PREDICT_BATCH_SIZE, plain=False, precision='fp32',
            overwrite=False, calibration=None):
    """Write the predictions of the model folder `model` for the task file `data` to
    the JSON lines file `out` (a new file, in a folder that exists; replacing a file
    there only if overwrite; never one of the inputs), checked before any work, the
    matrix products in `precision` ('fp32', 'bf16', 'int8': calibrated
    on the first examples of the task file `calibration`, or of data, `run.
    calibration`); returns {'examples': n, 'scores': {...} or None, 'int8': the line
    that says what ran in int8, or None}."""
    if calibration is not None and precision != 'int8':
        raise ValueError('--calibration applies to --precision int8')
    if calibration is not None and not os.path.isfile(calibration):
        raise ValueError(f'--calibration {calibration}: no such file')
    check_output('--out', out, {'--data': data, '--model': model,
                                '--calibration': calibration})
    check_output_file('--out', out)
    check_new_file('--out', out, overwrite)
    net, _, vocab, info = load_task_model(model_folder(model), mx.cpu())
    task_data = read_examples(info, data)
    encoded = encode_task(task_data, vocab, info.max_len)
    int8_line, fast_path = None, load_fast_path(plain)
    net = prepare_model(net, 'fp32' if precision == 'int8' else precision, fast_path)
    if fast_path is not None:  # a sentence classifier: its last block for <cls> alone
        net = fast_path.first_token_only(net)
    if precision == 'int8':
        examples, source = calibration_examples(info, vocab, data, encoded, calibration)
        net, int8_line = int8_inference(
            net, lambda: calibration_batches(examples, vocab.pad_id, mx.cpu()),
            load_fast_path(False), source)
    else:
        net.hybridize(static_alloc=True)
    predictions, probabilities = predict_encoded(net, info, encoded, mx.cpu(),
                                                 vocab.pad_id, batch_size)
    records = [prediction_record(info, example, prediction, probs) for example, prediction,
               probs in zip(task_data.examples, predictions, probabilities)]
    write_file_atomically('--out', out, lambda f: f.writelines(
        json.dumps(record, ensure_ascii=False) + '\n' for record in records),
        overwrite=overwrite)
    labelled = task_data.examples and all(
        getattr(example, 'label', True) is not None for example in task_data.examples)
    scores = task_scores_of(info, task_data, encoded, predictions) if labelled else None
    return {'examples': len(encoded), 'scores': scores, 'int8': int8_line}


def read_examples(info, path):
    """The `TaskData` of the task file `path` for a model of `info` (`TaskInfo`)."""
    return TASKS[info.task].reader.file(path, info.labels, 'class' if info.labels
                                        is not None else 'number')


def calibration_examples(info, vocab, data, encoded, calibration=None):
    """(the `EncodedExample`s --precision int8 calibrates on, where they come from: the
    `source` of `run.calibration.calibration_path`): the examples of the task file
    `calibration`, or else `encoded`, data's (the first CALIBRATION_TEXTS are taken)."""
    if calibration is None:
        examples, source, named = encoded, 'data', f'--data {data}'
    else:
        try:
            examples = encode_task(read_examples(info, calibration), vocab, info.max_len)
        except ValueError as error:  # the file's own words, named as the flag
            raise ValueError(f'--calibration {error}') from None
        source, named = sha1_of_file(calibration), f'--calibration {calibration}'
    if not examples:
        raise ValueError(f'{named}: holds no example to calibrate --precision int8 on')
    return examples, source
