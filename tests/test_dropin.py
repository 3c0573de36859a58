"""The drop-in regularizer on a model this project did not build: the README's example runs as
written on a torchvision ResNet-18 (random weights, tiny random data, no network), and the
penalty it adds is the paper's, channel by channel."""

import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from bnpaper import GammaSigmaRegularizer, config

torchvision = pytest.importorskip("torchvision")
SECTION = "## Using the gamma/sigma regularizer in your own training loop"


def readme_example() -> str:
    """The first python code block of the README's regularizer section."""
    text = (config.repo_root() / "README.md").read_text()
    assert SECTION in text, "the README lost its regularizer section"
    block = re.search(r"```python\n(.*?)```", text[text.index(SECTION) :], re.S)
    assert block, "the README's regularizer section has no python block"
    return block.group(1)


def _bn_layers(model):
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def test_readme_example_trains_a_torchvision_resnet18_and_removes_its_hooks():
    code = readme_example()
    assert len(code.strip().splitlines()) <= 14 and "resnet18" in code and "reg()" in code
    g = torch.Generator().manual_seed(0)
    batches = [
        (torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g))
        for _ in range(2)
    ]
    ns: dict = {}

    class Loader:  # records the BN scales the example starts from
        def __iter__(self):
            ns["gamma0"] = torch.cat([m.weight.detach().clone() for m in _bn_layers(ns["model"])])
            return iter(batches)

    ns["loader"] = Loader()
    torch.manual_seed(0)
    exec(compile(code, "README.md", "exec"), ns)
    model, reg = ns["model"], ns["reg"]
    assert isinstance(model, torchvision.models.ResNet) and isinstance(reg, GammaSigmaRegularizer)
    gamma = torch.cat([m.weight.detach() for m in _bn_layers(model)])
    assert not torch.equal(gamma, ns["gamma0"])  # two SGD steps moved the scales
    assert torch.isfinite(ns["loss"]) and not reg.active
    assert all(not m._forward_hooks for m in model.modules())  # reg.remove() left nothing behind


def _captured_inputs(model, x):
    """Each BN layer's input in one training-mode forward pass (plain hooks, no regularizer)."""
    seen = {}
    hooks = [
        m.register_forward_hook(lambda m, i, o: seen.__setitem__(m, i[0].detach()))
        for m in _bn_layers(model)
    ]
    model(x)
    for h in hooks:
        h.remove()
    return seen


def _resnet(seed=1):
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(num_classes=10).double().train()
    with torch.no_grad():  # scales of both signs and sizes: some channels above tau, some below
        for m in _bn_layers(model):
            m.weight.copy_(torch.randn_like(m.weight) * 2)
    return model


def test_penalty_on_resnet18_equals_a_naive_per_channel_sum_and_its_gradient_reaches_gamma():
    model, lam, tau = _resnet(), 0.3, 1.5
    x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    inputs = _captured_inputs(model, x)
    want, grads, on = 0.0, {}, {}
    for m, a in inputs.items():  # naive: one channel at a time, python floats
        grads[m], on[m] = [], []
        for c in range(a.shape[1]):
            v = a[:, c].numpy().ravel()
            sigma = float(np.sqrt(np.mean((v - v.mean()) ** 2) + m.eps))
            gamma = float(m.weight.detach()[c])
            excess = max(abs(gamma) / sigma - tau, 0.0)
            want += lam * excess**2
            grads[m].append(2 * lam * excess * np.sign(gamma) / sigma)  # with sigma held fixed
            on[m].append(excess > 0)
    n_on = sum(map(sum, on.values()))
    assert 0 < n_on < sum(m.num_features for m in inputs)  # the case is mixed
    for detach in (True, False):
        model.zero_grad()
        reg = GammaSigmaRegularizer(lam, tau, model=model, detach_sigma=detach)
        model(x)
        penalty = reg()
        penalty.backward()
        reg.remove()
        assert float(penalty.detach()) == pytest.approx(want, rel=1e-9)
        if detach:  # the gradient through gamma alone: the closed form, channel by channel
            for m in inputs:
                np.testing.assert_allclose(m.weight.grad.numpy(), grads[m], rtol=1e-7, atol=1e-12)
            assert model.conv1.weight.grad is None or not model.conv1.weight.grad.any()
        else:  # and through sigma: into the layers before each BN, gamma included
            assert all(
                m.weight.grad[torch.tensor(on[m])].abs().min() > 0 for m in inputs if any(on[m])
            )
            assert model.conv1.weight.grad.abs().sum() > 0


def test_penalty_is_zero_with_no_gradient_when_every_ratio_is_within_tau():
    model = _resnet()
    x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    inputs = _captured_inputs(model, x)
    largest = max(
        float((m.weight.abs() / torch.sqrt(a.var((0, 2, 3), unbiased=False) + m.eps)).max())
        for m, a in inputs.items()
    )
    model.zero_grad()
    with GammaSigmaRegularizer(lam=10.0, tau=largest * 1.01, model=model) as reg:
        model(x)
        penalty = reg()
        penalty.backward()
    assert float(penalty.detach()) == 0.0
    assert all(m.weight.grad is None or torch.all(m.weight.grad == 0) for m in _bn_layers(model))
    logits_loss = F.cross_entropy(model(x), torch.zeros(6, dtype=torch.long))
    assert torch.isfinite(logits_loss)  # the hooks are gone and the model still runs
