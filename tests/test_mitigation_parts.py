"""The regularizer taken apart (notebook 05, issue 26): its parts' gradients, the |gamma| bound,
BN at a lower learning rate, the channel readings and LiRA over pools."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn as nn

from bnpaper import mitigation, mitigation_lira, parts, variants
from bnpaper.config import ConfigError
from bnpaper.mitigation import GammaBound, GammaSigmaRegularizer, MitigationConfig
from bnpaper.stats import Estimate, t_mean


def _conv_bn(seed: int = 0) -> nn.Sequential:
    """conv -> BN -> relu -> linear, float64, gammas spread so some ratios exceed tau and some
    do not."""
    torch.manual_seed(seed)
    m = nn.Sequential(
        nn.Conv2d(2, 6, 3), nn.BatchNorm2d(6), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 16, 3)
    ).double()
    with torch.no_grad():
        m[1].weight.copy_(torch.tensor([0.1, 3.0, -4.0, 0.2, 5.0, -0.05], dtype=torch.float64))
    return m


def _grads(part: str, lam=0.3, tau=1.0, seed=0):
    model = _conv_bn(seed)
    x = torch.randn(8, 2, 6, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with GammaSigmaRegularizer(lam, tau, model=model, part=part) as reg:
        model(x)
        penalty = reg()
        penalty.backward()
    conv_g = model[0].weight.grad
    gamma_g = model[1].weight.grad
    zero = torch.zeros_like(model[0].weight)
    return (
        float(penalty.detach()),
        zero if conv_g is None else conv_g,
        torch.zeros(6, dtype=torch.float64) if gamma_g is None else gamma_g,
    )


def test_detached_sigma_penalty_sends_no_gradient_to_the_weights_feeding_bn_the_full_one_does():
    value_g, conv_g, gamma_g = _grads("gamma")
    value, conv_full, gamma_full = _grads("both")
    assert value_g == pytest.approx(value, rel=1e-12)  # the same penalty value
    assert torch.all(conv_g == 0)  # no path through sigma
    assert conv_full.abs().sum() > 0  # the full penalty's path through sigma
    assert gamma_g.abs().sum() > 0


def test_the_two_detached_parts_sum_to_the_full_penalty_gradient():
    """gamma does not depend on the conv weights and sigma does not depend on gamma, so the
    sigma-detached part carries exactly the full gradient on gamma, the gamma-detached part
    exactly the full gradient on the conv weights, and neither carries the other's."""
    _, conv_full, gamma_full = _grads("both")
    _, conv_g, gamma_g = _grads("gamma")
    _, conv_s, gamma_s = _grads("sigma")
    assert torch.all(gamma_s == 0)  # gamma detached: no gradient on gamma
    torch.testing.assert_close(gamma_g, gamma_full, rtol=1e-12, atol=0)
    torch.testing.assert_close(conv_s, conv_full, rtol=1e-12, atol=0)
    torch.testing.assert_close(conv_g + conv_s, conv_full, rtol=1e-12, atol=0)


def test_an_unknown_part_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"part='beta' is not allowed; choose one of"):
        GammaSigmaRegularizer(0.1, 1.0, model=_conv_bn(), part="beta")


def test_gamma_bound_equals_a_naive_sum_and_never_reaches_the_weights_feeding_bn():
    model = _conv_bn()
    bound = GammaBound(0.5, 1.0)
    gammas = model[1].weight.detach().numpy()
    want = 0.5 * sum(max(abs(g) - 1.0, 0.0) ** 2 for g in gammas)
    value = bound(model)
    value.backward()
    assert float(value.detach()) == pytest.approx(want, rel=1e-12)
    assert model[0].weight.grad is None
    sign = np.sign(gammas)
    naive = [0.5 * 2 * max(abs(g) - 1.0, 0.0) * s for g, s in zip(gammas, sign)]
    np.testing.assert_allclose(model[1].weight.grad.numpy(), naive, rtol=1e-12)


def test_per_member_penalties_of_every_part_sum_to_the_whole_penalty():
    model = _conv_bn()
    x = torch.randn(8, 2, 6, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for part in mitigation.PARTS:
        with GammaSigmaRegularizer(0.2, 1.0, model=model, part=part) as reg:
            model(x)
            whole = reg()
            model(x)
            split = reg.per_member(model, 3)
        assert split.shape == (3,)
        assert float(split.sum().detach()) == pytest.approx(float(whole.detach()), rel=1e-12)
    bound = GammaBound(0.2, 1.0)
    whole = float(bound(model).detach())
    assert float(bound.per_member(model, 2).sum().detach()) == pytest.approx(whole, rel=1e-12)


def test_the_parts_are_cached_methods_whose_keys_leave_the_regularizers_key_unchanged():
    assert MitigationConfig("penalty", 0.01, 1.0).as_dict() == {
        "method": "penalty",
        "lam": 0.01,
        "tau": 1.0,
    }
    names = [v.name for v in variants.parts(0.01, 1.0)]
    assert names == [
        "bn+pen_g(l=0.01,t=1)",
        "bn+pen_s(l=0.01,t=1)",
        "bn+gbound(l=0.01,t=1)",
    ]
    reg, proj = MitigationConfig("penalty_sigma", 0.01, 1.0).hooks(_conv_bn())
    assert isinstance(reg, GammaSigmaRegularizer) and reg.part == "sigma" and proj is None
    reg.remove()


def test_bn_at_a_lower_learning_rate_trains_with_its_norms_rate_times_the_scale():
    from bnpaper.train import TrainConfig

    low = variants.lower_lrs([0.25])[0]
    assert low.name == "bn+lr(x0.25)" and "lower learning rate" in low.family
    base = TrainConfig(arch="lenet", norm="none", lr=0.05)
    assert low.config(base, 3).lr == pytest.approx(0.0125)
    assert low.config(base, 3, 0.2).lr == pytest.approx(0.05)  # the norm's recipe, times 0.25
    assert variants.Variant("gn").config(base, 3, 0.3).lr == 0.3
    assert variants.Variant("gn").config(base, 3).lr == 0.05


def test_parts_setting_is_the_chosen_penalty_else_the_middle_lambda_at_the_frontier_tau():
    chosen = variants.penalties([0.01], [2.0])[0]
    assert variants.parts_setting(chosen, [1e-4, 1e-3, 1e-1], 1.0) == (0.01, 2.0)
    proj = variants.projections([0.5])[0]
    assert variants.parts_setting(proj, [1e-1, 1e-4, 1e-3], 1.0) == (1e-3, 1.0)


def test_channel_readings_equal_a_naive_computation_on_a_trained_lenet():
    """One LeNet trained one epoch; its readings against gamma, batch sigma and the conv/linear
    weights read by hand."""
    from bnpaper import data, train
    from bnpaper.gamma_sigma import gamma_sigma

    ds = data.load_dataset("fashion_mnist")
    split = data.make_split(ds, 256, "flip", 0.1, 0, n_test=64)
    cfg = train.TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=64, lr=0.05, seed=0)
    result = train.fit(split, cfg)
    got = parts.channel_readings(result, split, 0.05)
    model = result.model(split.x.shape[1], split.n_classes, split.x.shape[2])
    x = data.normalize(split.x[:128], split.mean, split.std)
    layers = gamma_sigma(model, x, 128, 1)
    feeding = {"norm1": model.conv1, "norm2": model.conv2, "norm3": model.fc1}
    feeding["norm4"] = model.fc2  # LeNet: norm_k normalizes the k-th conv/linear layer's output
    g = torch.cat([lay["gamma"] for lay in layers])
    s = torch.cat([lay["sigma_batch"] for lay in layers])
    w = torch.cat([feeding[lay["layer"]].weight.detach().flatten(1).norm(dim=1) for lay in layers])
    assert got.gamma == pytest.approx(float(g.median()), rel=1e-6)
    assert got.sigma == pytest.approx(float(s.median()), rel=1e-6)
    assert got.ratio == pytest.approx(float((g / s).median()), rel=1e-6)
    assert got.effective_step == pytest.approx(float((0.05 / w**2).median()), rel=1e-6)


def _comparison(delta: float) -> mitigation_lira.LiraComparison:
    e = Estimate(delta, delta - 0.01, delta + 0.01, 10)
    summary = {"bn": {"all": {"auc": 0.6 + delta}, "shadow_test_acc": 0.8}, "reg": {}}
    per_target = {"bn": {"auc": np.array([0.6 + delta]), "test_acc": np.array([0.8])}}
    return mitigation_lira.LiraComparison(
        {}, np.zeros((1, 1), bool), summary, {"all": e}, per_target
    )


def test_lira_over_pools_gives_a_t_interval_over_pools_and_none_from_one_pool():
    three = mitigation_lira.over_pools([_comparison(d) for d in (0.02, 0.05, 0.03)])
    want = t_mean([0.02, 0.05, 0.03])
    assert three.delta["all"].value == pytest.approx(want.value)
    assert (three.delta["all"].lo, three.delta["all"].hi) == pytest.approx((want.lo, want.hi))
    assert three.summary["bn"]["all"]["auc"] == pytest.approx(0.6 + np.mean([0.02, 0.05, 0.03]))
    assert three.summary["n_pools"] == 3
    assert len(three.per_target["bn"]["auc"]) == 3
    one = mitigation_lira.over_pools([_comparison(0.05)])
    assert not np.isfinite(one.delta["all"].lo) and not np.isfinite(one.delta["all"].hi)


def test_05s_own_recipe_keeps_03s_pool_and_trains_with_05s_epochs_and_each_norms_rate():
    from bnpaper import params

    p03 = params.resolve("03_lira", {"budget": "ci"}).values
    p05 = params.resolve("05_mitigation", {"budget": "ci"}).values
    r = mitigation_lira.own_recipe(p03, p05, 4)
    assert (r.n_train, r.outlier_kind, r.n_shadows) == (p03["n_train"], p03["outlier_kind"], 4)
    assert (r.epochs, r.batch_size, r.fit_level) == (p05["epochs"], p05["batch_size"], None)
    lrs = {"bn": 0.1, "none": 0.5}
    low = mitigation_lira.family_recipe(r, variants.lower_lrs([0.5])[0], lrs)
    assert low.train_config("bn").lr == pytest.approx(0.05)
    wd = mitigation_lira.family_recipe(r, variants.stronger_weight_decays([5e-3])[0], lrs)
    assert wd.train_config("bn").weight_decay == 5e-3
    none = mitigation_lira.family_recipe(r, variants.Variant("none"), lrs)
    assert none.train_config("none").lr == 0.5
    assert dataclasses.replace(r, lr=1.0).protocol == "paper"


def test_which_part_names_the_arms_whose_row_holds():
    arms = variants.parts(0.01, 1.0)

    class Row:
        def __init__(self, verdict):
            self.verdict = verdict

    rows = [Row("not reproduced"), Row("reproduced"), Row("inconclusive")]
    assert parts.which_part(rows, arms) == [arms[1].label]
    rows = [Row("supported"), Row("not supported"), Row("inconclusive")]
    assert parts.which_part(rows, arms) == [arms[0].label]
