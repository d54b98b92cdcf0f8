"""Google BERT checkpoints in and out, in Hugging Face's format, and WordPiece.

    net, tokenizer, config = from_huggingface('bert-base-uncased/')
    to_huggingface(net, config, tokenizer, 'exported/')

Model files need `safetensors` (pip install safetensors); `transformers` is not needed,
and PyTorch only to read a pickled pytorch_model.bin.
"""
from .convert import convert_from_hf, convert_to_hf, load_model_dir
from .huggingface import from_huggingface, to_huggingface
from .pretrained import get_bert_encoding, load_pretrained
from ..data.wordpiece import WordPieceVocab

__all__ = ['from_huggingface', 'to_huggingface', 'WordPieceVocab', 'convert_from_hf',
           'convert_to_hf', 'load_model_dir', 'load_pretrained', 'get_bert_encoding']
