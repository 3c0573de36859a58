"""The toy theory: symbolic results against hand-derived expectations, and the simulation."""
import pytest
import sympy as sp
import torch

from bnpaper import theory as T
from bnpaper.models import build_model

X2 = T.sq_norm(T.x)


def test_margin_change_without_bn_is_minus_eta_lprime_a2_x2():
    assert T.equal(T.margin_change("none"), -T.eta * T.lp * T.a**2 * X2)


def test_margin_change_with_bn_fixed_stats_has_gamma2_over_sigma2():
    assert T.equal(T.margin_change("bn"), -T.eta * T.lp * T.a**2 * T.gamma**2 / T.sigma**2 * X2)


def test_growth_ratio_simplifies_to_gamma_over_sigma_squared():
    assert T.equal(T.growth_ratio(), T.gamma**2 / T.sigma**2)


def test_checker_rejects_a_wrong_expected_ratio():
    assert not T.equal(T.growth_ratio(), T.gamma / T.sigma)
    assert not T.equal(T.growth_ratio(), T.gamma**2 / T.sigma)
    assert not T.equal(T.margin_change("bn"), -T.eta * T.lp * T.a**2 * X2)


def test_centered_variant_replaces_x_by_x_minus_mean():
    xc2 = T.sq_norm(T.x - T.xbar)
    assert T.equal(T.growth_ratio(centered=True), T.gamma**2 / T.sigma**2 * xc2 / X2)
    assert T.equal(T.growth_ratio(centered=True).subs({c: 0 for c in T.xbar}),
                   T.gamma**2 / T.sigma**2)


def test_full_update_adds_gamma_beta_and_classifier_terms():
    terms = T.full_update_terms("bn")
    z = T.zhat()
    k = -T.eta * T.lp
    assert T.equal(terms["w"], k * T.a**2 * T.gamma**2 / T.sigma**2 * X2)
    assert T.equal(terms["gamma"], k * T.a**2 * z**2)
    assert T.equal(terms["beta"], k * T.a**2)
    assert T.equal(terms["a"], k * (T.gamma * z + T.beta) ** 2)
    assert T.equal(T.margin_change("bn", ("w", "gamma", "beta", "a")), sum(terms.values()))


def test_margin_grows_when_loss_decreases_in_margin():
    # l' < 0 for a decreasing loss, so every first-order term is >= 0
    val = T.margin_change("bn").subs({T.lp: -1, T.eta: sp.Rational(1, 10), T.a: 2, T.gamma: 3,
                                      T.sigma: 1, **{c: 1 for c in T.x}})
    assert val == sp.Rational(1, 10) * 4 * 9 * 3


def test_gamma_gradient_is_sum_of_lprime_y_a_zhat():
    g, terms = T.gamma_gradient(3)
    ys, zs = sp.symbols("y_1:4", real=True), sp.symbols("zhat_1:4", real=True)
    lps = sp.symbols("ell'_1:4", real=True)
    expected = sum(l * yy * T.a * z for l, yy, z in zip(lps, ys, zs)) / 3
    assert T.equal(g, expected)
    assert T.equal(sum(terms), g)
    assert not T.equal(g, expected * T.gamma)


def test_logistic_loss_derivative_vanishes_for_fitted_samples_only():
    lp = T.logistic_loss_derivative()
    m = sp.Symbol("m", real=True)
    assert T.equal(lp, -1 / (1 + sp.exp(m)))
    assert sp.limit(lp, m, sp.oo) == 0
    assert sp.limit(lp, m, -sp.oo) == -1


def test_probe_matches_exact_first_order_prediction_at_tiny_step():
    cfg = T.ToyConfig(d=100, n_typical=60, n_outliers=4, batch_size=32, steps=40)
    x, y, mask = T.toy_data(cfg)
    model = T.Toy(cfg.d, "bn", 1.0, 0)
    xb, yb = x[:32].double(), y[:32].double()
    model = model.double()
    p = T.probe_margin_growth(model, xb, yb, 0, 1e-7)
    assert p["dm_bn"] > 0 and p["dm_twin"] > 0
    assert p["measured"] == pytest.approx(p["predicted_full"], rel=1e-3)


def test_twin_has_the_same_margins_as_bn_model():
    cfg = T.ToyConfig(d=50, n_typical=40, n_outliers=2)
    x, y, _ = T.toy_data(cfg)
    model = T.Toy(cfg.d, "bn", 2.0, 1)
    with torch.no_grad():
        mu, sig = model.stats(x)
        wt, bt = model.gamma * model.w / sig, model.beta - model.gamma * mu / sig
        assert torch.allclose(model(x), x @ wt + bt, atol=1e-5)


def test_toy_data_outliers_are_mislabeled_and_typical_samples_shared():
    cfg = T.ToyConfig(d=20, n_typical=30, n_outliers=3)
    x, y, mask = T.toy_data(cfg)
    x0, y0, m0 = T.toy_data(cfg, outliers=False)
    assert int(mask.sum()) == 3 and not m0.any()
    assert torch.equal(x[~mask], x0) and torch.equal(y[~mask], y0)
    assert torch.all(torch.sign(x[mask, 0]) == -y[mask])  # label disagrees with class mean


def test_toy_train_bn_memorizes_and_records_gamma():
    cfg = T.ToyConfig(d=200, n_typical=60, n_outliers=4, steps=150, batch_size=32)
    r = T.toy_train(cfg, "bn", probe_every=50)
    rec = r["record"]
    assert len(rec["gamma"]) == cfg.steps and rec["typical_acc"][-1] == 1.0
    assert all(0 <= s <= 1 for s in rec["gamma_share"])
    assert len(r["probes"]) > 0 and r["outlier_share"] == pytest.approx(4 / 64)


def test_gamma_sigma_reads_every_bn_layer_and_keeps_running_stats():
    torch.manual_seed(0)
    model = build_model("lenet", "bn", 1, 10, 28)
    before = {k: v.clone() for k, v in model.state_dict().items() if "running" in k}
    x = torch.randn(64, 1, 28, 28)
    out = T.gamma_sigma(model, x, batch_size=32, n_batches=2)
    assert [o["layer"] for o in out] == ["norm1", "norm2", "norm3", "norm4"]
    assert out[0]["ratio_running"].shape == (6,) and out[3]["ratio_batch"].shape == (84,)
    # fresh BN: gamma = 1, running_var = 1 -> ratio 1/sqrt(1 + eps)
    assert torch.allclose(out[0]["ratio_running"], torch.full((6,), (1 + 1e-5) ** -0.5))
    after = {k: v for k, v in model.state_dict().items() if "running" in k}
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert model.training


def test_ratio_by_run_keeps_falling_probes_and_pools_within_runs():
    ids = [(1.0, 0), (1.0, 0), (3.0, 0), (3.0, 1)]
    keys, r = T.ratio_by_run(ids, [2.0, -1.0, 3.0, 4.0], [1.0, 1.0, 2.0, 4.0])
    assert keys == [(1.0, 0), (3.0, 0), (3.0, 1)]
    assert r == pytest.approx([0.5, 1.5, 1.0])  # the falling probe lowers run (1, 0) to 1/2
    with pytest.raises(ValueError):
        T.ratio_by_run(ids, [1.0] * 4, [1.0, 0.0, 1.0, 1.0])


def test_log_factor_splits_into_gamma_and_sigma_parts():
    r = T.toy_train(T.ToyConfig(d=50, n_typical=30, n_outliers=2, steps=20, batch_size=16), "bn")
    rec = {k: torch.tensor(r["record"][k], dtype=torch.float64) for k in ("factor", "gamma", "sigma")}
    parts = 2 * rec["gamma"].abs().log() - 2 * rec["sigma"].log()
    assert torch.allclose(rec["factor"].log(), parts, atol=1e-5)
