"""A model over many examples, fast: the examples in batches of similar length
(`data.tasks.length_sorted_batches`), each batch's outputs handed back with where its
examples came from, so that the caller puts them back in input order.

    net = prepare_inference(net, 'bf16', d2lbert.fast)   # `setup`
    for indices, logits in outputs_by_length(net, encoded, mx.cpu(), vocab.pad_id):
        predictions[indices] = logits.argmax(axis=1)

`d2lbert predict` (a task model's predictions, `finetuning.task_predictions`) and
`d2lbert encode --data` (one vector per text, `interop.sentence_vectors`) both run it.
"""
from ..data.tasks import length_sorted_batches
from .devices import to_device


def outputs_by_length(net, encoded, ctx, pad_id=0, batch_size=64):
    """Yield `(indices, outputs)` for the examples of `encoded` (a list of
    `EncodedExample`), batch by batch, longest first.

    net: called as net(tokens, segments, valid_lens), (batch_size, seq_len) and
      (batch_size,) arrays on ctx, returning one array (batch_size, ...)
    indices: int array (batch_size,), the batch's examples' positions in `encoded`
    outputs: host NumPy array (batch_size, ...), row i that of encoded[indices[i]]
    """
    for indices, batch in length_sorted_batches(encoded, batch_size, pad_id):
        tokens, segments, valid_lens = (to_device(array, ctx) for array in batch[:3])
        yield indices, net(tokens, segments, valid_lens).asnumpy()

