"""The BERT encoder on d2lbert's kernels, and on packed rows."""
from ..model.encoder import BERTEncoder
from ..util import checks
from ..util.numpy_mode import numpy_mode_block
from . import kernels


@numpy_mode_block
class FusedBERTEncoder(BERTEncoder):
    """`BERTEncoder` (same parameters, same results) whose input embedding runs the
    `d2lbert_embedding` kernel: the segment and position lookups, the sum and dropout
    in one operator. `packed` runs the encoder on a batch's valid tokens only."""
    def embed(self, F, tokens, segments):
        if not kernels.usable(self.token_embedding.weight):
            return super().embed(F, tokens, segments)
        return self.fused_embed(F, tokens, segments, positions_of(F, tokens))

    def packed(self, F, tokens, segments, valid_lens, token_index):
        """The encoder on the valid tokens only, for a hybrid_forward (`d2lbert.data.
        packing` says why and how the rows are chosen).

        tokens, segments: (batch_size, seq_len); valid_lens: (batch_size,)
        token_index: (num_rows,) flat index b * seq_len + t of each packed row's token
        returns: (num_rows, num_hiddens), row i encoding the token at token_index[i]
        """
        def pick(ids):
            return F.np.take(ids.reshape(-1), token_index)
        X = self.fused_embed(F, pick(tokens), pick(segments),
                             pick(positions_of(F, tokens)))
        for block in self.blocks:
            X = block(X, valid_lens)
        return X

    def fused_embed(self, F, tokens, segments, positions):
        """The input representation with `d2lbert_embedding`; with a LayerNorm, dropout
        after it. tokens, segments, positions: ids of any one shape (...);
        returns (..., num_hiddens)."""
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


def positions_of(F, tokens):
    """(batch_size, seq_len): every example's positions 0, 1, ..., seq_len - 1.

    The same shape as tokens, so that the three embeddings are summed elementwise;
    adding a broadcast (seq_len, num_hiddens), as the book's encoder does, makes
    the backward pass sum over the batch with MXNet's slow CPU reduction.
    """
    return (F.npx.arange_like(tokens, axis=1).reshape(1, -1)
            + F.np.zeros_like(tokens, dtype='int32'))
