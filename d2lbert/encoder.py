"""The BERT encoder: embeddings of tokens, segments and positions, then a stack of
Transformer encoder blocks."""
from mxnet import np
from mxnet.gluon import nn

from . import checks, kernels
from .layer_norm import LayerNorm
from .transformer import TransformerEncoderBlock


class BERTEncoder(nn.HybridBlock):
    """BERT encoder.

    forward(tokens, segments, valid_lens=None):
      tokens, segments: (batch_size, seq_len) integer ids
      valid_lens: (batch_size,), the number of real (non-padding) tokens of each
        example, or None when nothing is padded
      returns: (batch_size, seq_len, num_hiddens)

    Options: attention_dropout (default: dropout), type_vocab_size=2,
    hidden_act='relu'|'gelu', embedding_layer_norm=False, layer_norm_eps=1e-5.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_layers,
                 dropout, max_len=1000, attention_dropout=None, type_vocab_size=2,
                 hidden_act='relu', embedding_layer_norm=False, layer_norm_eps=1e-5,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.max_len, self.dropout_rate = vocab_size, max_len, dropout
        self.type_vocab_size = type_vocab_size
        with self.name_scope():
            self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
            self.segment_embedding = nn.Embedding(type_vocab_size, num_hiddens)
            self.position_embedding = nn.Embedding(max_len, num_hiddens)
            self.embedding_norm = (LayerNorm(num_hiddens, layer_norm_eps)
                                   if embedding_layer_norm else None)
            self.embedding_dropout = nn.Dropout(dropout)
            self.blocks = nn.HybridSequential()
            for _ in range(num_layers):
                self.blocks.add(TransformerEncoderBlock(
                    num_hiddens, ffn_num_hiddens, num_heads, dropout, attention_dropout,
                    hidden_act, layer_norm_eps))

    def __call__(self, tokens, segments, valid_lens=None):
        if not checks.is_symbol(tokens):
            valid_lens = self.check_inputs(tokens, segments, valid_lens)
        return super().__call__(tokens, segments, valid_lens)

    def check_inputs(self, tokens, segments, valid_lens):
        """Validate the inputs; returns valid_lens, with None replaced by full lengths."""
        batch_size, seq_len = checks.check_encoder_inputs(
            tokens, segments, valid_lens, self.vocab_size, self.type_vocab_size, self.max_len)
        if valid_lens is None:
            valid_lens = np.full((batch_size,), seq_len, dtype='int32', ctx=tokens.ctx)
        return valid_lens

    def hybrid_forward(self, F, tokens, segments, valid_lens):
        return self._encode(F, tokens, segments, self._positions(F, tokens), valid_lens)

    def packed(self, F, tokens, segments, valid_lens, token_index):
        """The encoder on the valid tokens only (`d2lbert.packing`), for a hybrid_forward.

        token_index: (num_rows,) flat index b * seq_len + t of each packed row's token
        returns: (num_rows, num_hiddens), row i encoding the token at token_index[i]
        """
        def pick(ids):
            return F.np.take(ids.reshape(-1), token_index)
        return self._encode(F, pick(tokens), pick(segments),
                            pick(self._positions(F, tokens)), valid_lens)

    @staticmethod
    def _positions(F, tokens):
        # (batch_size, seq_len): every example's positions, so that all three embeddings
        # have the same shape; adding a broadcast (seq_len, num_hiddens) instead would
        # make the backward pass sum over the batch with MXNet's slow CPU reduction
        return (F.npx.arange_like(tokens, axis=1).reshape(1, -1)
                + F.np.zeros_like(tokens, dtype='int32'))

    def _encode(self, F, tokens, segments, positions, valid_lens):
        if kernels.usable(self.token_embedding.weight):
            X = self._fused_embedding(F, tokens, segments, positions)
        else:
            X = (self.token_embedding(tokens) + self.segment_embedding(segments)
                 + self.position_embedding(positions))
            if self.embedding_norm is not None:
                X = self.embedding_norm(X)
            X = self.embedding_dropout(X)
        for block in self.blocks:
            X = block(X, valid_lens)
        return X

    def _fused_embedding(self, F, tokens, segments, positions):
        """The same with d2lbert's kernels: the segment and position lookups, the sum
        and dropout in one operator (`d2lbert_embedding`); with a LayerNorm, dropout
        after it."""
        small = (self.segment_embedding.weight, self.position_embedding.weight)
        if checks.is_symbol(tokens):
            tables = [weight.var() for weight in small]
        else:
            tables = [weight.data(tokens.ctx) for weight in small]
        rate = 0.0 if self.embedding_norm is not None else self.dropout_rate
        X = kernels.embedding(F, self.token_embedding(tokens), segments, positions,
                              *tables, rate)
        if self.embedding_norm is None:
            return X
        return kernels.dropout(F, self.embedding_norm(X), self.dropout_rate)
