"""Data for fine-tuning BERT: task files -> examples -> padded batches.

Start with :func:`load_task` (or :func:`read_task_file` for your own data);
the modules follow the pipeline:

* reading, each returning a :class:`TaskData` (:mod:`.examples`):
  :mod:`.snli`, :mod:`.glue`, :mod:`.conll` (with :mod:`.iob`, the tagging
  schemes), :mod:`.custom` (your CSV / TSV / JSONL), all built on
  :mod:`.tables` (rows with line numbers, for clear errors);
* downloading: :mod:`.archives`; choosing the reader and file: :mod:`.load`;
  a fixed random sample of a file's rows: :mod:`.sample`;
* model inputs: :mod:`.encoding` (tokens, segments, truncation, word pieces
  and their tags), :mod:`.batches` (padding into NumPy arrays).
"""
from .batches import (TaskBatch, length_sorted_batches, make_task_batch, padded_length,
                      task_batches, training_batches)
from .conll import CONLL2003_TAGS, read_conll2003
from .custom import read_task_file
from .encoding import (IGNORE_LABEL, EncodedExample, encode_example,
                       encode_tagged_words, encode_task, encode_text_pair,
                       truncate_pair, word_predictions)
from .examples import TaggedSentence, TaskData, TaskExample
from .glue import GLUE_LAYOUTS, read_glue
from .iob import iob1_to_iob2
from .load import TASK_ARCHIVES, TASKS, load_task, task_directory
from .sample import write_sample
from .snli import SNLI_LABELS, read_snli
from ..words import word_tokenize

__all__ = ['load_task', 'TASKS', 'read_task_file', 'read_snli', 'read_glue',
           'read_conll2003', 'iob1_to_iob2', 'TaskData', 'TaskExample',
           'TaggedSentence', 'SNLI_LABELS', 'GLUE_LAYOUTS', 'CONLL2003_TAGS',
           'TASK_ARCHIVES', 'task_directory', 'EncodedExample',
           'encode_text_pair', 'encode_tagged_words', 'encode_example',
           'encode_task', 'truncate_pair', 'word_tokenize',
           'word_predictions', 'IGNORE_LABEL', 'TaskBatch', 'make_task_batch',
           'task_batches', 'training_batches', 'length_sorted_batches', 'padded_length',
           'write_sample']
