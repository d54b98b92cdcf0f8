"""Data for extractive question answering (SQuAD 1.1 and 2.0): files -> examples ->
windows -> padded batches.

The modules follow the pipeline:

* :mod:`.examples`: reading SQuAD's JSON (:func:`read_squad`), with clear errors;
* :mod:`.download`: the SQuAD files, checked and cached (:func:`squad_path`);
* :mod:`.tokenize`: tokens with their character offsets in the passage;
* :mod:`.windows`: question + passage windows and their answer labels
  (:func:`make_windows`);
* :mod:`.batches`: padded ``TaskBatch`` es of windows;
* :mod:`.generated`: a small SQuAD 2.0-style task from the bundled corpus.

Turning the model's logits back into answers, and the official metric, are in
``d2lbert.finetuning.qa_predictions`` and ``d2lbert.finetuning.squad_metric``.
"""
from .batches import qa_batch, qa_batches, qa_training_batches
from .download import SQUAD_FILES, squad_file, squad_path
from .examples import Answer, SquadData, SquadExample, SquadFormatError, read_squad
from .generated import baseline_predictions, bundled_squad_task, write_squad_json
from .tokenize import tokenize_with_offsets_for, word_tokenize_with_offsets
from .windows import (DOC_STRIDE, MAX_LEN, MAX_QUERY_LEN, NO_ANSWER, QAWindow,
                      make_windows)

__all__ = ['read_squad', 'SquadData', 'SquadExample', 'Answer', 'SquadFormatError',
           'SQUAD_FILES', 'squad_file', 'squad_path', 'word_tokenize_with_offsets',
           'tokenize_with_offsets_for', 'make_windows', 'QAWindow', 'NO_ANSWER',
           'MAX_LEN', 'DOC_STRIDE', 'MAX_QUERY_LEN', 'qa_batch', 'qa_batches',
           'qa_training_batches', 'bundled_squad_task', 'baseline_predictions',
           'write_squad_json']
