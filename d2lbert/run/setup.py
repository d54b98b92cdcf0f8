"""A model made ready to train or to predict, in one place: every command (`pretrain`,
`finetune`, `predict`, SQuAD's `predict`) and the benchmark (`d2lbert bench`) call
these, so the benchmark measures the model the commands run.

    net, trainer = prepare_training(net, 'bertadam', lr, weight_decay, 'bf16', fast_path)
    net = prepare_inference(net, 'bf16', fast_path)

Each returns a new model that shares the given one's parameters (the same Parameter
objects) and leaves the given one as it was: a block's class is what it computes, chosen
here (`fast.accelerate`, `model.precision.compute_in`).

fast_path is the caller's choice: `d2lbert.fast`, whose `accelerate` returns the
model on it, `is_fast(net)` says whether it is (where the kernels can't run it leaves
the book's model) and `fused_optimizer(name, **options)` gives the trainer its fused
optimizer; or None, the book's model (`--plain`). The run layer never imports the fast
path: a command imports it when it runs it, so a run of the book's model never loads
it. The fast path and the precision may be chosen in either order
(`d2lbert.model.precision.link_reduced_layers`).
"""
from .optimizer import make_trainer
from .precision import use_precision


def prepare_model(net, precision='fp32', fast_path=None):
    """A new model: `net` on fast_path (unless None), its matrix products in
    `precision` ('fp32', 'bf16', 'fp16'); the same parameters, and `net` as it was."""
    if fast_path is not None:
        net = fast_path.accelerate(net)
    return use_precision(net, precision)


def prepare_inference(net, precision='fp32', fast_path=None):
    """`prepare_model`'s new model, hybridized with static memory (the batches' shapes
    vary)."""
    model = prepare_model(net, precision, fast_path)
    model.hybridize(static_alloc=True)
    return model


def prepare_training(net, optimizer='adam', lr=1e-3, weight_decay=0.01, precision='fp32',
                     fast_path=None, kvstore='device', static_shape=False):
    """(model, trainer): a new model of `net` (initialized) ready to train, and its
    trainer; `net`'s blocks stay as they were, its parameters are the model's:
    `prepare_model`; the gradients added up over a step's batches (grad_req 'add',
    which `step.optimizer_step` zeroes); hybridized with static memory, and static
    shapes if every batch has the same (pretraining); a trainer of `optimizer`
    (`optimizer.make_trainer`: the fast path's fused variant on the fast path).
    A parameter whose grad_req is 'null' (one no loss reaches, e.g. the NSP head of
    a masked-LM run) stays so: no gradient, no update, no weight decay."""
    model = prepare_model(net, precision, fast_path)
    for param in model.collect_params().values():
        if param.grad_req != 'null':
            param.grad_req = 'add'
    model.hybridize(static_alloc=True, static_shape=static_shape)
    return model, make_trainer(model, optimizer, lr, weight_decay, kvstore, fast_path)
