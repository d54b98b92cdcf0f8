"""The BERT encoder: embeddings of tokens, segments and positions, then a stack of
Transformer encoder blocks."""
from typing import Optional

from mxnet import np
from mxnet.gluon import nn

from ..util import checks
from ..util.numpy_mode import numpy_mode_block
from .transformer import TransformerEncoderBlock


@numpy_mode_block
class BERTEmbedding(nn.HybridBlock):
    """The input side of `BERTEncoder`: its three embedding tables, `embed`, which sums
    them, and the checks of every call's inputs (`check_inputs`)."""
    def __init__(self, vocab_size: int, num_hiddens: int, dropout: float, max_len: int = 1000,
                 type_vocab_size: int = 2, embedding_layer_norm: bool = False,
                 layer_norm_eps: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.max_len, self.dropout_rate = vocab_size, max_len, dropout
        self.num_hiddens, self.type_vocab_size = num_hiddens, type_vocab_size
        with self.name_scope():
            self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
            self.segment_embedding = nn.Embedding(type_vocab_size, num_hiddens)
            self.position_embedding = nn.Embedding(max_len, num_hiddens)
            self.embedding_norm = (nn.LayerNorm(epsilon=layer_norm_eps,
                                                in_channels=num_hiddens)
                                   if embedding_layer_norm else None)
            self.embedding_dropout = nn.Dropout(dropout)

    def check_inputs(self, tokens, segments, valid_lens):
        """Validate the inputs; returns valid_lens, with None replaced by full lengths."""
        batch_size, seq_len = checks.check_encoder_inputs(
            tokens, segments, valid_lens, self.vocab_size, self.type_vocab_size, self.max_len)
        if valid_lens is None:
            valid_lens = np.full((batch_size,), seq_len, dtype='int32', ctx=tokens.ctx)
        return valid_lens

    def __call__(self, tokens, segments, valid_lens=None):
        if not checks.is_symbol(tokens):
            valid_lens = self.check_inputs(tokens, segments, valid_lens)
        return super().__call__(tokens, segments, valid_lens)

    def embed(self, F, tokens, segments):
        """Sum of the token, segment and position embeddings (then LayerNorm, if configured)
        and dropout: (batch_size, seq_len) ids -> (batch_size, seq_len, num_hiddens)."""
        positions = F.npx.arange_like(tokens, axis=1)  # 0, 1, ..., seq_len - 1
        X = (self.token_embedding(tokens) + self.segment_embedding(segments)
             + self.position_embedding(positions))     # (seq_len, H) added to every example
        if self.embedding_norm is not None:
            X = self.embedding_norm(X)
        return self.embedding_dropout(X)


@numpy_mode_block
class BERTEncoder(BERTEmbedding):
    """Embeddings, then num_blks blocks: ids (batch, seq_len), (batch,) -> (batch, seq_len, H)."""
    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int,
                 num_heads: int, num_blks: int, dropout: float, max_len: int = 1000,
                 attention_dropout: Optional[float] = None, type_vocab_size: int = 2,
                 hidden_act: str = 'relu', embedding_layer_norm: bool = False,
                 layer_norm_eps: float = 1e-5, **kwargs):
        super().__init__(vocab_size, num_hiddens, dropout, max_len, type_vocab_size,
                         embedding_layer_norm, layer_norm_eps, **kwargs)
        with self.name_scope():
            self.blocks = nn.HybridSequential()
            for _ in range(num_blks):
                self.blocks.add(TransformerEncoderBlock(
                    num_hiddens, ffn_num_hiddens, num_heads, dropout, attention_dropout,
                    hidden_act, layer_norm_eps))

    def hybrid_forward(self, F, tokens, segments, valid_lens):
        X = self.embed(F, tokens, segments)
        for block in self.blocks:
            X = block(X, valid_lens)
        return X
