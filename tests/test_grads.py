"""Per-sample gradient norms (bnpaper.grads) against a naive loop of single backward passes."""

import copy

import pytest
import torch
from torch import nn

from bnpaper import grad_rules, grads
from bnpaper.models import NORMS, RELU_GAMMA, ResNet, ScaledStdConv2d, bn_layers, build_model


def _model(arch, norm, seed=0):
    """LeNet-5 on 28x28, or a small ResNet (2 stages of one basic block, 4 and 8 channels, a
    strided conv shortcut) on 8x8, in float32, with 8 samples."""
    torch.manual_seed(seed)
    c, size = (1, 28) if arch == "lenet" else (3, 8)
    if arch == "small_resnet":
        m = ResNet((4, 8), (1, 1), norm, c, 10)
    else:
        m = build_model(arch, norm, c, 10, size)
    with torch.no_grad():
        for p in m.parameters():  # move away from the initialization (gamma=1, beta=0,
            p.add_(0.1 * torch.randn_like(p))  # biases=0) so that every group is non-trivial
        for _, bn in bn_layers(m):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(8, c, size, size)
    y = torch.randint(0, 10, (8,))
    return m, x, y


def _fixed_bn_forward(bn):
    """BN normalizing with its batch's mean and biased variance, detached from autograd."""

    def forward(x):
        dims = [0] + list(range(2, x.dim()))
        mean, var = x.mean(dims).detach(), x.var(dims, unbiased=False).detach()
        return torch.nn.functional.batch_norm(x, mean, var, bn.weight, bn.bias, False, 0.0, bn.eps)

    return forward


def _naive(model, x, y, mode):
    """One forward of the whole batch (train-mode BN for "batch", BN with detached batch
    statistics for "batch_fixed"), then one backward per loss term, reading .grad: the
    definition, written as plainly as possible."""
    m = copy.deepcopy(model)
    m.train(mode == "batch")
    if mode == "batch_fixed":
        for _, bn in bn_layers(m):
            bn.forward = _fixed_bn_forward(bn)
    groups = grads.param_groups(m)
    out = {g: [] for g in set(groups.values())}
    out["total"] = []
    terms = torch.nn.functional.cross_entropy(m(x), y, reduction="none")
    for i in range(len(x)):
        m.zero_grad(set_to_none=True)
        terms[i].backward(retain_graph=True)
        sq = {g: 0.0 for g in set(groups.values())}
        for n, p in m.named_parameters():
            if p.grad is not None:
                sq[groups[n]] += float(p.grad.pow(2).sum())
        for g, v in sq.items():
            out[g].append(v**0.5)
        out["total"].append(sum(sq.values()) ** 0.5)
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in out.items()}


def _assert_close(got: grads.GradNorms, ref: dict):
    d = got.as_dict()
    assert set(d) == set(ref)
    for k in ref:
        rel = ((d[k] - ref[k]).abs() / ref[k].abs().clamp_min(1e-12)).max()
        assert rel < 1e-4, (k, float(rel))


CASES = [(a, n) for a in ("lenet", "small_resnet") for n in NORMS]


@pytest.mark.parametrize("arch,norm", CASES)
@pytest.mark.parametrize("mode", grads.MODES)
def test_norms_match_naive_loop_of_single_backward_passes(arch, norm, mode):
    m, x, y = _model(arch, norm)
    ref = _naive(m, x, y, mode)
    _assert_close(grads.per_sample_grad_norms(m, x, y, mode=mode), ref)
    if arch == "small_resnet" and (mode == "eval" or norm in ("none", "gn")):
        _assert_close(grads.per_sample_grad_norms(m, x, y, mode=mode, method="func"), ref)
    if mode != "eval":  # the batched-cotangent path and the loop, on the same definition
        _assert_close(grads.per_sample_grad_norms(m, x, y, mode=mode, method="exact", chunk=3), ref)
    if mode == "batch_fixed":
        _assert_close(grads.per_sample_grad_norms(m, x, y, mode=mode, method="loop"), ref)


@pytest.mark.parametrize("norm", ["bn", "none"])
@pytest.mark.parametrize("mode", grads.MODES)
def test_densenet_norms_match_naive_loop(mode, norm):
    m, x, y = _model("densenet", norm)
    x, y = x[:3], y[:3]
    _assert_close(grads.per_sample_grad_norms(m, x, y, mode=mode), _naive(m, x, y, mode))


def test_the_three_definitions_differ_with_bn_and_coincide_without():
    m, x, y = _model("lenet", "bn")
    b, e, f = (grads.per_sample_grad_norms(m, x, y, mode=md).total for md in grads.MODES)
    assert (b - e).abs().max() > 1e-3 * e.max()
    assert (b - f).abs().max() > 1e-3 * f.max()
    m, x, y = _model("lenet", "none")
    b, e, f = (grads.per_sample_grad_norms(m, x, y, mode=md).total for md in grads.MODES)
    torch.testing.assert_close(b, e, rtol=1e-10, atol=0)
    torch.testing.assert_close(f, e, rtol=1e-10, atol=0)


@pytest.mark.parametrize("norm", ["bn", "bn_noaffine"])
def test_mixed_mode_lenet_matches_the_naive_loop_on_cifar_shapes_and_selected_rows(norm):
    torch.manual_seed(1)
    m = build_model("lenet", norm, 3, 10, 32)  # 3 channels, 32x32, no conv1 padding
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x, y = torch.randn(12, 3, 32, 32), torch.randint(0, 10, (12,))
    sel = torch.arange(12) % 3 == 0
    got = grads.per_sample_grad_norms(m, x, y, mode="batch", method="mixed", select=sel)
    ref = _naive(m, x[:], y, "batch")
    for k, v in got.as_dict().items():
        rel = ((v[sel] - ref[k][sel]).abs() / ref[k][sel]).max()
        assert rel < 1e-4, (k, float(rel))
    assert torch.isnan(got.total[~sel]).all()


def test_mixed_mode_refuses_models_it_does_not_cover():
    m, x, y = _model("small_resnet", "bn")
    with pytest.raises(ValueError, match="mixed"):
        grads.per_sample_grad_norms(m, x, y, mode="batch", method="mixed")
    m, x, y = _model("lenet", "gn")
    with pytest.raises(ValueError, match="mixed"):
        grads.per_sample_grad_norms(m, x, y, mode="batch", method="mixed")


def test_exact_batch_norms_do_not_depend_on_the_chunk_size():
    m, x, y = _model("small_resnet", "bn")
    one = grads.per_sample_grad_norms(m, x, y, mode="batch", chunk=1)
    for chunk in (3, 8):
        other = grads.per_sample_grad_norms(m, x, y, mode="batch", chunk=chunk)
        for k, v in one.as_dict().items():
            torch.testing.assert_close(other.as_dict()[k], v, rtol=1e-5, atol=0)


def test_batch_mode_splits_into_training_batches_and_mean_reduction_divides_by_batch():
    m, x, y = _model("lenet", "bn")
    whole = grads.per_sample_grad_norms(m, x, y, mode="batch", batch_size=4)
    first = grads.per_sample_grad_norms(m, x[:4], y[:4], mode="batch")
    torch.testing.assert_close(whole.total[:4], first.total)
    mean = grads.per_sample_grad_norms(m, x, y, mode="batch", batch_size=4, reduction="mean")
    torch.testing.assert_close(mean.total, whole.total / 4)


@pytest.mark.parametrize("mode", grads.MODES)
def test_computing_gradients_leaves_running_statistics_mode_and_weights_unchanged(mode):
    m, x, y = _model("small_resnet", "bn")
    m.train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    grads.per_sample_grad_norms(m, x, y, mode=mode)
    assert m.training and all(mod.training for mod in m.modules())
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert all(p.grad is None for p in m.parameters())


def test_groups_cover_every_parameter_and_sum_to_total():
    m, x, y = _model("small_resnet", "none")
    groups = grads.param_groups(m)
    assert set(groups) == {n for n, _ in m.named_parameters()}
    assert {"weight", "bias", "other"} <= set(groups.values())
    r = grads.per_sample_grad_norms(m, x, y)
    total = sum(v.pow(2) for v in r.groups.values()).sqrt()
    torch.testing.assert_close(total, r.total)


def test_bad_arguments_are_clear_errors():
    m, x, y = _model("lenet", "bn")
    with pytest.raises(ValueError, match="mode"):
        grads.per_sample_grad_norms(m, x, y, mode="train")
    with pytest.raises(ValueError, match="batch coupling"):
        grads.per_sample_grad_norms(m, x, y, mode="batch", method="func")
    with pytest.raises(ValueError, match="batch_fixed"):
        grads.per_sample_grad_norms(m, x, y, mode="batch_fixed", method="func")
    with pytest.raises(ValueError, match="at least 2"):
        grads.per_sample_grad_norms(m, x, y, mode="batch_fixed", batch_size=1)


def test_select_computes_only_the_chosen_samples_inside_the_full_batch():
    m, x, y = _model("lenet", "bn")
    sel = torch.tensor([True, False, False, True, False, True, False, False])
    part = grads.per_sample_grad_norms(m, x, y, mode="batch", select=sel)
    whole = grads.per_sample_grad_norms(m, x, y, mode="batch")
    torch.testing.assert_close(part.total[sel], whole.total[sel])
    assert torch.isnan(part.total[~sel]).all()


@pytest.mark.parametrize("method", ["mixed", "exact", "loop"])
def test_a_trailing_batch_of_one_is_the_same_clear_error_for_every_method(method):
    m, x, y = _model("lenet", "bn")
    n = len(x)
    with pytest.raises(ValueError, match=rf"N={n + 1} with batch_size={n} leaves a batch of one"):
        grads.per_sample_grad_norms(
            m,
            torch.cat([x, x[:1]]),
            torch.cat([y, y[:1]]),
            mode="batch",
            batch_size=n,
            method=method,
        )


@pytest.mark.parametrize("arch", ["lenet", "resnet20", "resnet18", "densenet"])
def test_auto_picks_the_measured_method_of_each_architecture_and_matches_the_naive_loop(arch):
    torch.manual_seed(0)
    c, size = (1, 28) if arch == "lenet" else (3, 8)
    m = build_model(arch, "bn", c, 10, size)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x, y = torch.randn(4, c, size, size), torch.randint(0, 10, (4,))
    assert grads.auto_method(m, "batch") == grads.AUTO_BATCH[type(m).__name__]
    assert grads.auto_method(m, "batch") == ("mixed" if arch == "lenet" else "loop")
    assert grads.auto_method(m, "eval") == grads.auto_method(m, "batch_fixed") == "hooks"
    _assert_close(grads.per_sample_grad_norms(m, x, y, mode="batch"), _naive(m, x, y, "batch"))


def test_auto_falls_back_to_the_loop_where_mixed_mode_does_not_apply():
    m, x, y = _model("lenet", "bn")
    m.fc3.bias.requires_grad_(False)  # mixed mode needs every parameter to train
    assert grads.auto_method(m, "batch") == "loop"
    _assert_close(grads.per_sample_grad_norms(m, x, y, mode="batch"), _naive(m, x, y, "batch"))
    assert grads.auto_method(_model("lenet", "none")[0], "batch") == "hooks"  # no BN, no coupling
    assert (
        grads.auto_method(
            torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2)), "batch"
        )
        == "loop"
    )  # a class outside the table


# ---------------------------------------------------------------- one test per layer rule
def _only(trained: nn.Module, *layers: nn.Module) -> nn.Sequential:
    """A small network of `layers` in which only `trained` (one of them) has trainable
    parameters; a BatchNorm without affine parameters after a ReLU couples the samples in
    "batch" (directly after the layer it would cancel its bias's gradient)."""
    net = nn.Sequential(*layers)
    for mod in net.modules():
        for p in mod.parameters(recurse=False):
            p.requires_grad_(any(p is q for q in trained.parameters(recurse=False)))
    return net


def _case(name: str):
    """(network, input shape, groups of the trained layer) of one layer-rule case."""
    coupling2d, coupling1d = nn.BatchNorm2d(4, affine=False), nn.BatchNorm1d(6, affine=False)
    head = nn.Linear(4 * 5 * 5, 10)
    if name == "linear":
        fc = nn.Linear(12, 6)  # 6 samples < 12 inputs: the coupled rule's Gram path
        net = _only(fc, nn.Flatten(), fc, nn.ReLU(), coupling1d, nn.Linear(6, 10))
        return net, (6, 3, 2, 2), {"weight", "bias"}
    if name == "linear_sequence":
        fc = nn.Linear(4, 2)  # (B, 3, 4) inputs: per-position outer products
        net = _only(fc, fc, nn.ReLU(), nn.Flatten(), coupling1d, nn.Linear(6, 10))
        return net, (6, 3, 4), {"weight", "bias"}
    if name == "conv":
        conv = nn.Conv2d(2, 4, 3, padding=1)  # per-sample outer products
        net = _only(conv, conv, nn.ReLU(), coupling2d, nn.Flatten(), head)
        return net, (6, 2, 5, 5), {"weight", "bias"}
    if name == "conv_ghost":
        conv = nn.Conv2d(8, 4, 3, stride=2, padding=1)  # few positions: ghost norm
        net = _only(conv, conv, nn.ReLU(), coupling2d, nn.Flatten(), nn.Linear(4 * 9, 10))
        return net, (6, 8, 5, 5), {"weight", "bias"}
    if name == "batchnorm2d":
        bn = nn.BatchNorm2d(4)
        net = _only(bn, nn.Conv2d(2, 4, 3, padding=1), bn, nn.ReLU(), nn.Flatten(), head)
        return net, (6, 2, 5, 5), {"gamma", "beta"}
    if name == "batchnorm1d":
        bn = nn.BatchNorm1d(6)
        net = _only(bn, nn.Flatten(), nn.Linear(12, 6), bn, nn.ReLU(), nn.Linear(6, 10))
        return net, (6, 3, 2, 2), {"gamma", "beta"}
    if name == "groupnorm":
        gn = nn.GroupNorm(2, 4)
        layers = (nn.Conv2d(2, 4, 3, padding=1), gn, nn.ReLU(), coupling2d, nn.Flatten(), head)
        return _only(gn, *layers), (6, 2, 5, 5), {"gamma", "beta"}
    if name == "scaled_std_conv":
        conv = ScaledStdConv2d(2, 4, 3, 1, 1, gamma=RELU_GAMMA)  # raw weight, gain and bias
        net = _only(conv, conv, nn.ReLU(), coupling2d, nn.Flatten(), head)
        return net, (6, 2, 5, 5), {"weight", "bias", "other"}
    raise ValueError(name)


LAYER_CASES = {
    "linear": nn.Linear,
    "linear_sequence": nn.Linear,
    "conv": nn.Conv2d,
    "conv_ghost": nn.Conv2d,
    "batchnorm2d": nn.modules.batchnorm._BatchNorm,
    "batchnorm1d": nn.modules.batchnorm._BatchNorm,
    "groupnorm": nn.GroupNorm,
    "scaled_std_conv": ScaledStdConv2d,
}


def test_every_registered_layer_rule_has_a_case_against_the_naive_loop():
    assert set(grad_rules.RULES) == set(LAYER_CASES.values())


@pytest.mark.parametrize("name", LAYER_CASES)
@pytest.mark.parametrize("mode", grads.MODES)
def test_each_layer_rule_matches_the_naive_loop_alone(name, mode):
    """The layer's rule is the only one that runs: hooks where samples are independent given the
    statistics, the batched cotangents ("exact") in every mode."""
    torch.manual_seed(0)
    net, shape, groups = _case(name)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
        for _, bn in bn_layers(net):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x, y = torch.randn(shape), torch.randint(0, 10, (shape[0],))
    assert set(grads.param_groups(net).values()) == groups
    ref = _naive(net, x, y, mode)
    if mode != "batch":
        _assert_close(grads.per_sample_grad_norms(net, x, y, mode=mode, method="hooks"), ref)
    _assert_close(grads.per_sample_grad_norms(net, x, y, mode=mode, method="exact", chunk=4), ref)


def test_a_layer_without_a_rule_is_a_clear_error_and_leaves_no_hook_behind():
    net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Bilinear(4, 4, 2))
    with pytest.raises(NotImplementedError, match="Bilinear"):
        grad_rules.Recorder(net, fixed_stats=True)
    assert all(not m._forward_hooks for m in net.modules())
    with pytest.raises(NotImplementedError, match="grouped"):
        grad_rules.Recorder(nn.Conv2d(4, 4, 3, groups=2))
