"""Data for BERT pretraining: WikiText (or your text) -> NSP + MLM batches.

Start with :func:`load_data_wiki`; the modules follow the pipeline:
:mod:`.corpus` (reading plain text, sentence splitting), :mod:`.text_sources`
(a file and how it is read: its layout or a table's column, the held-out
part), :mod:`.vocab` (and
:mod:`.wordpiece`, Google BERT's, after :mod:`.basic_tokenizer`, and
:mod:`.subwords`, one learned from the corpus; :mod:`.vocab_files` on disk),
:mod:`.encoding` (flat token id arrays), :mod:`.examples` (next sentence
pairs, or :mod:`.full_sentences`: texts packed for the masked LM alone), :mod:`.masking` (masked tokens), :mod:`.batches` (bucketing and
padding), :mod:`.packing` (where the valid tokens are), :mod:`.download`,
:mod:`.bundled`, :mod:`.cache`. Fine-tuning tasks (SNLI, GLUE, CoNLL-2003,
your own files) are in :mod:`.tasks`, starting with :func:`.tasks.load_task`;
question answering (SQuAD) in :mod:`.squad`; :func:`encode_batch` turns a list of
texts into a padded batch of the model's inputs.
"""
from .batch_encoder import encode_batch
from .batches import PretrainingBatch, PretrainingBatches, bucket_lengths
from .bundled import bundled_corpus_directory
from .corpus import read_paragraphs
from .download import DownloadError, wikitext_directory
from .examples import ExampleOptions, PretrainingExamples
from .loader import build_pretraining_examples, corpus_file, load_data_wiki
from .masking import mask_tokens
from . import packing, squad, tasks
from .tasks import load_task, read_task_file
from .vocab import Vocab
from .vocab_files import load_vocab, save_vocab
from .wordpiece import WordPieceVocab

__all__ = ['encode_batch', 'load_data_wiki', 'build_pretraining_examples', 'corpus_file',
           'Vocab', 'PretrainingExamples', 'PretrainingBatches',
           'PretrainingBatch', 'ExampleOptions', 'bucket_lengths',
           'read_paragraphs', 'mask_tokens', 'wikitext_directory',
           'DownloadError', 'bundled_corpus_directory', 'packing',
           'tasks', 'squad', 'load_task', 'read_task_file', 'WordPieceVocab',
           'load_vocab', 'save_vocab']
