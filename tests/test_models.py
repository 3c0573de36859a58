import pytest
import torch
import torch.nn.functional as F

from bnpaper import models

CASES = [
    ("lenet", 1, 28),
    ("lenet", 3, 32),
    ("resnet20", 3, 32),
    ("resnet20", 1, 28),
    ("densenet", 3, 32),
]


@pytest.mark.parametrize("norm", models.NORMS)
@pytest.mark.parametrize("arch,c,size", CASES)
def test_every_model_and_norm_runs_forward_and_backward(arch, c, size, norm):
    torch.manual_seed(0)
    m = models.build_model(arch, norm, c, 10, size)
    x = torch.randn(4, c, size, size)
    out = m(x)
    assert out.shape == (4, 10)
    F.cross_entropy(out, torch.tensor([0, 1, 2, 3])).backward()
    grads = [p.grad for p in m.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_resnet18_shapes():
    m = models.build_model("resnet18", "bn", 3, 100, 32)
    assert m(torch.randn(2, 3, 32, 32)).shape == (2, 100)


@pytest.mark.parametrize(
    "norm,kinds",
    [
        ("bn", {"BatchNorm2d", "BatchNorm1d"}),
        ("gn", {"GroupNorm"}),
        ("none", set()),
        ("bn_noaffine", {"BatchNorm2d", "BatchNorm1d"}),
    ],
)
def test_norm_choice_builds_the_named_layers(norm, kinds):
    m = models.build_model("lenet", norm, 1, 10, 28)
    found = {type(x).__name__ for x in m.modules()} & {"BatchNorm2d", "BatchNorm1d", "GroupNorm"}
    assert found == kinds
    if norm == "bn_noaffine":
        assert all(layer.weight is None for _, layer in models.bn_layers(m))


def test_bad_norm_is_rejected():
    with pytest.raises(ValueError, match=r"norm='batch' is not allowed"):
        models.build_model("lenet", "batch", 1, 10, 28)
