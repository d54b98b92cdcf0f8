"""`d2lbert predict` with a question-answering model: a SQuAD file's answers in the
official files, or the answer to one question about one passage.

The windows are made as in training (the model's ``max_len``, ``doc_stride`` and
``max_query_len``, in its ``task.json``), the model scores every window's tokens, and
``qa_predictions.best_answers`` turns the logits into answers with the null threshold
chosen on the dev set (``TaskInfo.null_threshold``). A ``squad1`` model always answers.

A file's scores are those of the official ``evaluate-v2.0.py --na-prob-file
null_odds.json --na-prob-thresh THRESHOLD`` (SQuAD 1.1: ``evaluate-v1.1.py``) on the
files written.
"""
import mxnet as mx
from tqdm import tqdm

from ..data.squad import SquadExample, make_windows, qa_batch, read_squad
from ..data.tasks import padded_length
from ..run.models import model_folder
from ..run.setup import prepare_inference
from .fast_choice import load_fast_path
from .qa_predictions import NULL_THRESHOLD, best_answers, write_prediction_files
from .squad_metric import gold_answers, squad_evaluate
from .task_model import load_task_model
from .task_step import task_outputs
from .tasks import TASKS

QUESTION_ID = 'question'  # the id of the question `answer_question` answers


def window_logits(net, windows, ctx, pad_id, max_len, batch_size=64, progress=False):
    """(start logits, end logits) of a list of ``QAWindow``: two lists with a 1-D NumPy
    array (valid_len,) per window, in order."""
    starts, ends = [], []
    for first in tqdm(range(0, len(windows), batch_size), disable=not progress,
                      leave=False, unit='batch', desc='windows'):
        chunk = windows[first:first + batch_size]
        batch = qa_batch(chunk, pad_id, padded_length(chunk, max_len))
        start, end = (logits.asnumpy() for logits in task_outputs(net, batch, ctx))
        starts += [row[:window.valid_len] for row, window in zip(start, chunk)]
        ends += [row[:window.valid_len] for row, window in zip(end, chunk)]
    return starts, ends


def allows_null(info):
    """Does the model answer '' (SQuAD 2.0), or always a span (SQuAD 1.1)?"""
    return TASKS[info.task].reader.unanswerable


def null_threshold(info):
    return NULL_THRESHOLD if info.null_threshold is None else info.null_threshold


def question_windows(examples, vocab, info):
    """The windows of examples (no labels), made with the model's settings."""
    return make_windows(examples, vocab, info.max_len, info.doc_stride, info.max_query_len,
                        with_labels=False)


def load_qa_model(model, plain=False, precision='fp32'):
    """(net, vocab, info) of a question-answering model folder (or a fine-tuning
    output folder), ready for inference."""
    net, _, vocab, info = load_task_model(model_folder(model), mx.cpu())
    if info.head != 'question_answering':
        raise ValueError(f'--model {model} is a {info.task!r} model ({info.head}), not a '
                         'question-answering one (d2lbert finetune --task squad2 or squad1)')
    return prepare_inference(net, precision, load_fast_path(plain)), vocab, info


def is_labelled(examples):
    """Does every question come with its answers (or as unanswerable)?"""
    return all(example.answers or example.is_impossible for example in examples)


def predict_squad(model, data, out, batch_size=64, plain=False, progress=True,
                  precision='fp32'):
    """Answer the questions of the SQuAD file `data` with the model folder `model`;
    write OUT/predictions.json and OUT/null_odds.json (atomically, after everything
    is computed). Returns {'examples': n, 'files': [paths], 'scores': the official
    scores when the file has every answer, else None}.

    Raises:
        SquadFormatError: data is not a SQuAD file (nothing is written).
    """
    net, vocab, info = load_qa_model(model, plain, precision)
    examples = read_squad(data).examples
    windows = question_windows(examples, vocab, info)
    starts, ends = window_logits(net, windows, mx.cpu(), vocab.pad_id, info.max_len,
                                 batch_size, progress)
    threshold = null_threshold(info)
    predictions, null_odds = best_answers(examples, windows, starts, ends,
                                          null_threshold=threshold,
                                          allow_null=allows_null(info))
    files = write_prediction_files(out, predictions, null_odds)
    scores = None
    if is_labelled(examples):
        scores = squad_evaluate(gold_answers(examples), predictions,
                                null_odds if allows_null(info) else None, threshold)
    return {'examples': len(examples), 'files': files, 'scores': scores}


def answer_question(model, question, context, plain=False, precision='fp32'):
    """The model's answer to one question about the passage `context`: a dict

        answer     the passage's own characters, or '' (no answer)
        best_span  the best span (also when the answer is '')
        null_odds  null score - best span score; threshold: the model's

    Raises:
        ValueError: an empty question or passage (naming --question or --context).
    """
    for name, text in (('--question', question), ('--context', context)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f'{name} must hold some text, got {text!r}')
    net, vocab, info = load_qa_model(model, plain, precision)
    examples = [SquadExample(QUESTION_ID, question, context)]
    windows = question_windows(examples, vocab, info)
    starts, ends = window_logits(net, windows, mx.cpu(), vocab.pad_id, info.max_len)
    threshold = null_threshold(info)
    answers, null_odds = best_answers(examples, windows, starts, ends,
                                      null_threshold=threshold, allow_null=allows_null(info))
    spans, _ = best_answers(examples, windows, starts, ends, allow_null=False)
    return {'answer': answers[QUESTION_ID], 'best_span': spans[QUESTION_ID],
            'null_odds': null_odds[QUESTION_ID], 'threshold': threshold}
