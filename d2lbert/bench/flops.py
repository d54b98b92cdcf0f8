"""How many floating-point operations one pretraining step needs (the "model FLOPs").

A matrix product (m x k) @ (k x n) costs 2·m·k·n FLOPs (one multiply, one add). Its
backward pass computes two products of the same size (gradient of the input and of the
weight), so forward + backward = 3 × forward. For a dense layer with W parameters
applied to T rows that is 3 · 2·W·T = **6·W·T**. Per step, with
T = the batch's real (non-padding) tokens, sum(valid_lens), h = num_hiddens,
f = ffn_num_hiddens, L = num_layers, V = vocab_size, B = batch_size, P = num_preds
(prediction slots per sequence):

    N_dense   = L · (4·h² + 2·h·f)          Q, K, V, output projections + the FFN's 2 layers
    dense     = 6 · N_dense · T             every real token goes through every layer
    attention = 3 · L · 2·2·sum(l²)·h       Q·Kᵀ and weights·V of a sequence of l real
                                            tokens: 2·l²·h FLOPs each, forward, ×3 for
                                            forward + backward (summed over heads)
    mlm       = 6 · (h² + h·V) · B·P        the MLM head (Dense h->h, Dense h->V) on the
                                            predicted slots only
    nsp       = 6 · (h² + 2·h) · B          pooler (h->h) and classifier (h->2) on <cls>
    total     = dense + attention + mlm + nsp

These are the FLOPs the model needs for the batch ("model FLOPs", as in model FLOPs
utilization): work on padding is not counted, whether an implementation does it (d2l
and GluonNLP compute every padded position) or skips it (d2lbert packs the valid
tokens, `d2lbert.packing`). Not counted either (small next to the matrix products):
biases, softmax, LayerNorm, activations, dropout, embeddings, the loss and the Adam
update.
"""


def dense_parameters(config):
    """N_dense: weights of the Q/K/V/output projections and the FFN of all layers."""
    h, f = config.num_hiddens, config.ffn_num_hiddens
    return config.num_layers * (4 * h * h + 2 * h * f)


def step_flops(config, valid_lens):
    """The model FLOPs of one training step on a batch with these valid lengths, term
    by term, as a dict (see the module docstring); 'total' is their sum."""
    h, L, V = config.num_hiddens, config.num_layers, config.vocab_size
    B, P = config.batch_size, config.num_preds
    lengths = [int(length) for length in valid_lens]
    terms = {
        'dense': 6 * dense_parameters(config) * sum(lengths),
        'attention': 3 * L * 2 * 2 * sum(length * length for length in lengths) * h,
        'mlm': 6 * (h * h + h * V) * B * P,
        'nsp': 6 * (h * h + 2 * h) * B,
    }
    terms['total'] = sum(terms.values())
    return terms
