"""The fused optimizer step (`d2lbert.fast.optimizer`) against MXNet's Adam and d2lbert's
BERTAdam (`util.bert_adam`) with the project's separate clipping, and its checkpoints
against theirs."""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np, npx

from d2lbert import fast
from d2lbert.fast import kernels
from d2lbert.run.optimizer import AdamW, load_trainer_states, make_trainer, no_decay
from d2lbert.run.step import optimizer_step, trainable_parameters

pytestmark = pytest.mark.skipif(not kernels.available(), reason="d2lbert's kernels not built")

OPTIONS = {'learning_rate': 0.01, 'wd': 0.1}
FUSED = {'adam': fast.FusedAdam, 'adamw': fast.FusedAdamW, 'bertadam': fast.FusedBERTAdam}


def small_net(ctxs, seed=0):
    """Two dense layers; a weight of more values than a kernel block, not a multiple."""
    npx.set_np()
    mx.random.seed(seed)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(67, in_units=1031), gluon.nn.Dense(3, in_units=67))
    net.initialize(mx.init.Normal(0.5), ctx=ctxs)
    net.collect_params().setattr('grad_req', 'add')
    for name, param in net.collect_params().items():
        if no_decay(name):
            param.wd_mult = 0.0
    return net


def trainer_of(net, name, fused):
    assert AdamW  # importing run.optimizer registers 'adamw' (and util.bert_adam 'bertadam')
    optimizer = FUSED[name](**OPTIONS) if fused else name
    return gluon.Trainer(net.collect_params(), optimizer, None if fused else OPTIONS,
                         update_on_kvstore=False)


def with_untouched_rows(step, grads):
    """The gradients with rows of the first weight zero, as an embedding's rows of the
    words a batch lacks: rows 0-29 at every step, rows 30-39 but at step 1 (after it
    their moments are not zero)."""
    first = grads[0].copy()
    first[:30] = 0
    if step != 1:
        first[30:40] = 0
    return [first, *grads[1:]]


def add_gradients(net, ctxs, step, size):
    """Backward through a loss whose gradient is random and the same whatever the weights
    (so the two optimizers' rounding differences don't grow through the model), each
    device a share of it."""
    rng = onp.random.RandomState(step)
    params = list(net.collect_params().values())
    totals = with_untouched_rows(step, [rng.randn(*param.shape).astype('float32') * size
                                        for param in params])
    for ctx in ctxs:
        with autograd.record():
            loss = sum((param.data(ctx) * np.array(total / len(ctxs), ctx=ctx)).sum()
                       for param, total in zip(params, totals))
        loss.backward()


def weights(net, ctx):
    return [p.data(ctx).asnumpy() for p in net.collect_params().values()]


def train(name, fused, ctxs, clip, loss_scale=1.0, steps=4):
    net = small_net(ctxs)
    trainer = trainer_of(net, name, fused)
    for step in range(steps):
        add_gradients(net, ctxs, step, size=loss_scale * (1.0 if step % 2 else 100.0))
        trainer.allreduce_grads()
        grads = [[p.grad(ctx) for p in net.collect_params().values()] for ctx in ctxs]
        if fused:
            trainer.optimizer.clip_on_update(grads, clip and clip * loss_scale)
            trainer.update(loss_scale)
        else:
            optimizer_step_without_fusion(net, trainer, clip, loss_scale)
    return net, trainer


def optimizer_step_without_fusion(net, trainer, clip, loss_scale):
    from d2lbert.run.step import clip_global_norm
    params = list(net.collect_params().values())
    if clip:
        for ctx in params[0].list_ctx():
            clip_global_norm([p.grad(ctx) for p in params], clip * loss_scale)
    trainer.update(loss_scale)
    for param in params:
        for grad in param.list_grad():
            grad[:] = 0


def reference_weights(name, clip, loss_scale, steps=4):
    """The weights after `train`'s steps, by the optimizers' formulas in float64 NumPy:
    clipping, then Adam (weight decay in the gradient, bias correction), BERTAdam
    (decoupled weight decay, no bias correction) or AdamW (decoupled weight decay, bias
    correction of the rate, which scales both terms); biases get no weight decay."""
    net = small_net([mx.cpu()])
    names = list(net.collect_params().keys())
    ws = [w.astype('float64') for w in weights(net, mx.cpu())]
    ms, vs = [onp.zeros_like(w) for w in ws], [onp.zeros_like(w) for w in ws]
    for step in range(steps):
        rng = onp.random.RandomState(step)
        size = 1.0 if step % 2 else 100.0
        gs = [g.astype('float64') for g in with_untouched_rows(
            step, [rng.randn(*w.shape).astype('float32') * size for w in ws])]
        norm = onp.sqrt(sum((g ** 2).sum() for g in gs))
        factor = min(clip / (norm + 1e-6), 1.0) if clip else 1.0
        t = step + 1
        for i, param_name in enumerate(names):
            wd = 0.0 if no_decay(param_name) else OPTIONS['wd']
            g = gs[i] * factor + (wd * ws[i] if name == 'adam' else 0.0)
            ms[i] = 0.9 * ms[i] + 0.1 * g
            vs[i] = 0.999 * vs[i] + 0.001 * g * g
            if name == 'adam':
                lr = OPTIONS['learning_rate'] * onp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
                ws[i] = ws[i] - lr * ms[i] / (onp.sqrt(vs[i]) + 1e-8)
            else:
                correction = onp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) if name == 'adamw' \
                    else 1.0
                ws[i] = ws[i] - OPTIONS['learning_rate'] * correction * (
                    ms[i] / (onp.sqrt(vs[i]) + 1e-6) + wd * ws[i])
    return ws


@pytest.mark.parametrize('name', ['adam', 'adamw', 'bertadam'])
@pytest.mark.parametrize('clip,loss_scale', [(1.0, 1.0), (None, 1.0), (1000.0, 8.0)])
def test_fused_step_follows_the_optimizers_formulas(name, clip, loss_scale):
    """Within 2e-6 of float64 after 4 steps of lr 0.01 (gradient norms about 27000
    and 270 in turn: clip 1000 clips every other step).
    MXNet's Adam and d2lbert's BERTAdam, same steps, are within 1e-5 of the same
    reference (measured 8e-7 and 7e-6): it is their algorithm."""
    ctxs = [mx.cpu()]
    expected = reference_weights(name, clip, loss_scale)
    ours, _ = train(name, True, ctxs, clip, loss_scale)
    theirs, _ = train(name, False, ctxs, clip, loss_scale)
    for a, b, reference in zip(weights(ours, ctxs[0]), weights(theirs, ctxs[0]), expected):
        onp.testing.assert_allclose(a, reference, rtol=0, atol=2e-6)
        onp.testing.assert_allclose(b, reference, rtol=0, atol=1e-5)
    for param in ours.collect_params().values():   # the update zeroed the gradients
        assert not param.grad(ctxs[0]).asnumpy().any()


def test_fused_step_on_two_devices_equals_the_optimizers_own():
    ctxs = [mx.cpu(0), mx.cpu(1)]
    ours, _ = train('bertadam', True, ctxs, clip=1.0)
    expected = reference_weights('bertadam', clip=1.0, loss_scale=1.0)
    for ctx in ctxs:
        for a, reference in zip(weights(ours, ctx), expected):
            onp.testing.assert_allclose(a, reference, rtol=0, atol=2e-6)


def test_global_norm_is_the_float64_norm():
    rng = onp.random.RandomState(0)
    arrays = [rng.randn(*shape).astype('float32') * 3
              for shape in [(30522, 25), (1,), (65537,), (17, 3)]]
    norm = onp.sqrt(sum((a.astype('float64') ** 2).sum() for a in arrays))
    optimizer = fast.FusedBERTAdam()
    ours = optimizer.clip_on_update([[mx.nd.array(a) for a in arrays]], max_norm=1.0)
    assert abs(float(ours[0].asscalar()) - norm) <= 1e-6 * norm
    scale = optimizer.clip_scale_on(mx.cpu()).asscalar()
    assert abs(scale - 1.0 / norm) <= 1e-6 / norm


@pytest.mark.parametrize('name', ['adam', 'adamw', 'bertadam'])
@pytest.mark.parametrize('first,second', [(True, False), (False, True)])
def test_trainer_states_load_across_fused_and_plain(tmp_path, name, first, second):
    """A checkpoint of either variant resumes in the other with the same result, keeping
    the resuming optimizer's class and how many parameters its update takes at once
    (aggregate_num, which the trainer's `Updater` was set up for)."""
    ctxs = [mx.cpu()]
    net, trainer = train(name, first, ctxs, clip=1.0, steps=2)
    trainer.save_states(str(tmp_path / 'trainer.states'))
    net.save_parameters(str(tmp_path / 'model.params'))
    resumed = small_net(ctxs, seed=1)
    resumed.load_parameters(str(tmp_path / 'model.params'), ctx=ctxs)
    resumed_trainer = trainer_of(resumed, name, second)
    aggregate_num = resumed_trainer.optimizer.aggregate_num
    load_trainer_states(resumed_trainer, str(tmp_path / 'trainer.states'))
    assert type(resumed_trainer.optimizer) is (FUSED[name] if second else
                                                mx.optimizer.Optimizer.opt_registry[name])
    assert resumed_trainer.optimizer.aggregate_num == aggregate_num
    for model, opt in ((net, trainer), (resumed, resumed_trainer)):
        add_gradients(model, ctxs, 7, size=1.0)
        optimizer_step(trainable_parameters(model), opt, clip=1.0)
    for a, b in zip(weights(net, ctxs[0]), weights(resumed, ctxs[0])):
        onp.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_make_trainer_fuses_only_on_the_fast_path():
    from d2lbert.model import BERTClassifier, BERTConfig, BERTModel
    npx.set_np()
    bert = BERTModel.from_config(BERTConfig(vocab_size=50, num_hiddens=16, ffn_num_hiddens=32,
                                            num_heads=2, num_layers=1, max_len=16))
    bert.initialize()
    net = BERTClassifier(bert, 3, 0.1)
    net.output.initialize()
    assert not isinstance(make_trainer(net, 'bertadam', fast_path=fast).optimizer,
                          fast.FusedUpdate)  # not switched to it
    net = fast.accelerate(net)
    assert not isinstance(make_trainer(net, 'bertadam').optimizer, fast.FusedUpdate)
    assert isinstance(make_trainer(net, 'bertadam', fast_path=fast).optimizer,
                      fast.FusedBERTAdam)
    assert isinstance(make_trainer(net, 'adam', fast_path=fast).optimizer, fast.FusedAdam)
    assert not isinstance(make_trainer(net, 'lamb', fast_path=fast).optimizer,
                          fast.FusedUpdate)
