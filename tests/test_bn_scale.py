"""Scale-free readings of BN channels: the effective step and gamma/sigma at unit weight norm."""

import copy

import pytest
import torch
import torch.nn as nn

from bnpaper import bn_scale, gamma_sigma
from bnpaper.models import build_model


def small_bn_net(k: float) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 4, bias=False), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 3))
    net = net.double()
    net[1].eps = 1e-12  # scale invariance up to float64 rounding
    with torch.no_grad():
        net[1].weight.copy_(torch.tensor([0.5, 1.0, 2.0, 3.0]))
        net[0].weight.mul_(k)
    return net


def sgd_step(net: nn.Module, x, y, lr_first: float, lr_rest: float) -> None:
    first = list(net[0].parameters())
    rest = [p for p in net.parameters() if all(p is not q for q in first)]
    opt = torch.optim.SGD([{"params": first, "lr": lr_first}, {"params": rest, "lr": lr_rest}])
    opt.zero_grad()
    nn.functional.cross_entropy(net(x), y).backward()
    opt.step()


def test_rescaled_weights_change_gamma_sigma_but_the_effective_step_predicts_the_update():
    torch.manual_seed(1)
    x, y = torch.randn(32, 6, dtype=torch.float64), torch.randint(0, 3, (32,))
    k, lr = 3.0, 0.1
    a, b = small_bn_net(1.0), small_bn_net(k)
    read_a = gamma_sigma.gamma_sigma(a, x, batch_size=32, n_batches=1)
    read_b = gamma_sigma.gamma_sigma(b, x, batch_size=32, n_batches=1)
    # gamma/sigma moves by 1/k with the weights' scale ...
    torch.testing.assert_close(read_b[0]["ratio_batch"], read_a[0]["ratio_batch"] / k)
    free_a, free_b = bn_scale.scale_free(a, read_a, lr), bn_scale.scale_free(b, read_b, lr * k**2)
    # ... while the effective step (lr scaled by k^2) and gamma/sigma at unit |w| do not
    torch.testing.assert_close(free_b[0]["effective_step"], free_a[0]["effective_step"])
    torch.testing.assert_close(free_b[0]["ratio_unit_w"], free_a[0]["ratio_unit_w"])
    # and equal effective steps give the same function after a step
    sgd_step(a, x, y, lr, lr)
    sgd_step(b, x, y, lr * k**2, lr)
    torch.testing.assert_close(b(x), a(x), rtol=1e-9, atol=1e-10)
    # at the unscaled lr the rescaled net moves less: gamma/sigma alone does not predict it
    c = small_bn_net(k)
    sgd_step(c, x, y, lr, lr)
    assert (c(x) - a(x)).abs().max() > 1e-3


def test_effective_step_is_lr_over_squared_channel_norm():
    torch.manual_seed(0)
    net = small_bn_net(1.0)
    layers = gamma_sigma.gamma_sigma(
        net, torch.randn(16, 6, dtype=torch.float64), batch_size=16, n_batches=1
    )
    free = bn_scale.scale_free(net, layers, 0.2)[0]
    naive = torch.tensor([0.2 / float(w @ w) for w in net[0].weight.detach()], dtype=torch.float64)
    torch.testing.assert_close(free["effective_step"], naive)
    assert free["layer"] == "1"


def test_feeding_layers_pair_each_directly_fed_bn_layer():
    lenet = build_model("lenet", "bn", 1, 10, 28)
    assert {k: type(v).__name__ for k, v in bn_scale.feeding_layers(lenet).items()} == {
        "norm1": "Conv2d",
        "norm2": "Conv2d",
        "norm3": "Linear",
        "norm4": "Linear",
    }
    resnet = build_model("resnet20", "bn", 1, 10, 28)
    fed = bn_scale.feeding_layers(resnet)
    assert len(fed) == len(bn_scale.bn_layers(resnet))
    assert fed["blocks.3.shortcut.1"] is resnet.blocks[3].shortcut[0]
    # DenseNet's BN layers normalize concatenations: no single weight feeds them
    densenet = build_model("densenet", "bn", 1, 10, 28)
    assert len(bn_scale.feeding_layers(densenet)) < len(bn_scale.bn_layers(densenet))


def test_scale_free_refuses_a_non_positive_lr():
    net = small_bn_net(1.0)
    layers = gamma_sigma.gamma_sigma(
        copy.deepcopy(net), torch.randn(8, 6, dtype=torch.float64), 8, 1
    )
    with pytest.raises(ValueError, match="lr"):
        bn_scale.scale_free(net, layers, 0.0)
