"""The training loop both commands run (`run.loop`): fine-tuning's loss scales as
pretraining's does, so a loss scale (reduced precision) gives the unscaled update."""
import mxnet as mx
import numpy as onp
from mxnet import init

from d2lbert.data.tasks import EncodedExample, make_task_batch
from d2lbert.finetuning.task_model import TaskInfo, build_task_model
from d2lbert.finetuning.task_step import task_forward_backward
from d2lbert.run.loss_scale import DynamicLossScale
from d2lbert.run.optimizer import make_trainer
from d2lbert.run.step import optimizer_step, trainable_parameters
from conftest import make_model


def test_a_scaled_fine_tuning_loss_gives_the_unscaled_update():
    """Two fine-tuning steps with the loss times 2^16 (clipping at 0.5, so the clip bound
    scales too) end at the weights of two unscaled steps; the returned loss is unscaled."""
    info = TaskInfo('csv', 'classifier', ('a', 'b'), 12, dropout=0.0)
    rng = onp.random.default_rng(0)
    encoded = [EncodedExample([2] + list(rng.integers(5, 60, n)) + [3], [0] * (n + 2),
                              int(rng.integers(2))) for n in (3, 7, 5, 9)]
    batch = make_task_batch(encoded)

    def train(loss_scale):
        mx.random.seed(1)
        net = build_task_model(make_model(), info)
        net.output.initialize(init.Normal(0.02))
        net.collect_params().setattr('grad_req', 'add')
        trainer = make_trainer(net, 'bertadam', 1e-3, 0.01)
        losses = []
        for _ in range(2):
            scale = loss_scale.scale if loss_scale else 1.0
            losses.append(float(task_forward_backward(net, batch, [mx.cpu()], scale)))
            assert optimizer_step(trainable_parameters(net), trainer, clip=0.5,
                                  loss_scale=loss_scale)
        return losses, [p.data().asnumpy() for p in net.collect_params().values()]

    plain_losses, plain = train(None)
    scaled_losses, scaled = train(DynamicLossScale())
    onp.testing.assert_allclose(scaled_losses, plain_losses, rtol=1e-5)
    assert plain_losses[1] != plain_losses[0]  # the first step changed the weights
    worst = max(float(onp.abs(ours - reference).max() / (onp.abs(reference).max() + 1e-3))
                for ours, reference in zip(scaled, plain))
    assert worst < 1e-4, worst  # float32 rounding: the scale is a power of 2
