"""Pretrained BERTs in and out: Google BERT checkpoints in Hugging Face's format (and
fine-tuned ones), WordPiece, and the d2l book's own pretrained models.

    net, tokenizer, config = from_huggingface('bert-base-uncased/')
    to_huggingface(net, config, tokenizer, 'exported/')
    net, vocab = load_pretrained('bert.small')   # or a run, model, Hugging Face folder

Model files need `safetensors` (pip install safetensors); `transformers` is not needed,
and PyTorch only to read a pickled pytorch_model.bin.
"""
from .book import BOOK_MODELS, load_book_model
from .convert import convert_from_hf, convert_task_model_to_hf, convert_to_hf, load_model_dir
from .huggingface import bert_from_huggingface, from_huggingface, to_huggingface
from .sentence_vectors import encode_texts
from .pretrained import (PRETRAINED_NAMES, get_bert_encoding, load_pretrained, model_kind,
                         save_pretrained)
from ..data.wordpiece import WordPieceVocab

__all__ = ['from_huggingface', 'to_huggingface', 'bert_from_huggingface', 'WordPieceVocab',
           'convert_from_hf', 'convert_to_hf', 'convert_task_model_to_hf', 'load_model_dir',
           'load_pretrained', 'save_pretrained', 'encode_texts', 'model_kind', 'PRETRAINED_NAMES', 'get_bert_encoding',
           'BOOK_MODELS', 'load_book_model']
