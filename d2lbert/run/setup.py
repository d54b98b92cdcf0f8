"""A model made ready to train or to predict, in one place: every command (`pretrain`,
`finetune`, `predict`, SQuAD's `predict`) and the benchmark (`d2lbert bench`) call
these, so the benchmark measures the model the commands run.

    trainer = prepare_training(net, 'bertadam', lr, weight_decay, 'bf16', fast_path)
    prepare_inference(net, 'bf16', fast_path)

fast_path is the caller's choice: `d2lbert.fast`, whose `accelerate` switches the
model to it, `is_fast(net)` says whether it did (where the kernels can't run it leaves
the book's model) and `fused_optimizer(name, **options)` gives the trainer its fused
optimizer; or None, the book's model (`--plain`). The run layer never imports the fast
path: a command imports it when it runs it, so a run of the book's model never loads
it. The fast path and the precision may be chosen in either order
(`d2lbert.model.precision.link_reduced_layers`).
"""
from .optimizer import make_trainer
from .precision import use_precision


def prepare_model(net, precision='fp32', fast_path=None):
    """Switch `net` to fast_path (unless None) and its matrix products to `precision`
    ('fp32', 'bf16', 'fp16'), in place; returns net."""
    if fast_path is not None:
        fast_path.accelerate(net)
    return use_precision(net, precision)


def prepare_inference(net, precision='fp32', fast_path=None):
    """`prepare_model`, then hybridized with static memory (the batches' shapes vary);
    returns net."""
    prepare_model(net, precision, fast_path)
    net.hybridize(static_alloc=True)
    return net


def prepare_training(net, optimizer='adam', lr=1e-3, weight_decay=0.01, precision='fp32',
                     fast_path=None, kvstore='device', static_shape=False):
    """Make `net` (initialized) ready to train, in place, and return its trainer:
    `prepare_model`; the gradients added up over a step's batches (grad_req 'add',
    which `step.optimizer_step` zeroes); hybridized with static memory, and static
    shapes if every batch has the same (pretraining); a trainer of `optimizer`
    (`optimizer.make_trainer`: the fast path's fused variant on the fast path).
    A parameter whose grad_req is 'null' (one no loss reaches, e.g. the NSP head of
    a masked-LM run) stays so: no gradient, no update, no weight decay."""
    prepare_model(net, precision, fast_path)
    for param in net.collect_params().values():
        if param.grad_req != 'null':
            param.grad_req = 'add'
    net.hybridize(static_alloc=True, static_shape=static_shape)
    return make_trainer(net, optimizer, lr, weight_decay, kvstore, fast_path)
