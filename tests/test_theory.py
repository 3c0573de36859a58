"""The toy theory: symbolic results against hand-derived expectations, and the simulation."""

import math

import numpy as np
import pytest
import sympy as sp
import torch

from bnpaper import claims, plot_theory, stats
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
    assert T.equal(
        T.growth_ratio(centered=True).subs({c: 0 for c in T.xbar}), T.gamma**2 / T.sigma**2
    )


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
    val = T.margin_change("bn").subs(
        {T.lp: -1, T.eta: sp.Rational(1, 10), T.a: 2, T.gamma: 3, T.sigma: 1, **{c: 1 for c in T.x}}
    )
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
    rec = {
        k: torch.tensor(r["record"][k], dtype=torch.float64) for k in ("factor", "gamma", "sigma")
    }
    parts = 2 * rec["gamma"].abs().log() - 2 * rec["sigma"].log()
    assert torch.allclose(rec["factor"].log(), parts, atol=1e-5)


# ---------------------------------------------------------------- notebook 04's helpers
SMALL = T.ToyConfig(d=60, n_typical=30, n_outliers=3, steps=30)


@pytest.fixture(scope="module")
def probes():
    return T.probe_study(
        SMALL, [8, 16], [0.05, 0.1], [1.0, 3.0], [0, 1], 16, 0.1, 5, progress=False
    )


@pytest.fixture(scope="module")
def feedback():
    return T.feedback_study(SMALL, [0, 1, 2], 16, 0.1, n_last=5, progress=False)


def test_derived_factor_is_one_for_the_derivation_and_rejects_a_non_constant_quotient():
    assert T.derived_factor(T.growth_ratio()) == 1.0
    assert T.derived_factor(2 * T.gamma**2 / T.sigma**2) == 2.0
    with pytest.raises(ValueError, match="not a multiple"):
        T.derived_factor(T.gamma / T.sigma)
    row = claims.judge("04.derivation", stats.Estimate(1.0, 1.0, 1.0, 1))
    assert row["verdict"] == "reproduced"
    assert (
        claims.judge("04.derivation", stats.Estimate(2.0, 2.0, 2.0, 1))["verdict"]
        == "not reproduced"
    )


def test_latex_writes_ell_prime_as_the_ell_symbol_and_show_displays_each_equation(monkeypatch):
    tex = T.latex(T.margin_change("bn"))
    assert r"\ell'" in tex and "ell'" not in tex.replace(r"\ell'", "")
    assert r"\ell'_{1}" in T.latex(T.gamma_gradient(3)[0])
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    T.show({"a": T.gamma**2, "b": T.lp})
    T.show("c", T.sigma)
    assert shown == ["a = \\gamma^{2}", "b = \\ell'", "c = \\sigma"]


def test_term_labels_name_each_parameter_group_in_latex():
    labels = T.term_labels(T.full_update_terms("bn"), "BN")
    assert list(labels) == [
        r"\Delta m_{\text{BN}}[w]",
        r"\Delta m_{\text{BN}}[\gamma]",
        r"\Delta m_{\text{BN}}[\beta]",
        r"\Delta m_{\text{BN}}[a]",
    ]


def test_exp_estimate_exponentiates_value_and_bounds():
    e = T.exp_estimate(stats.Estimate(0.0, -1.0, 2.0, 5, 0.9))
    assert (e.value, e.lo, e.hi, e.n, e.level) == (
        1.0,
        pytest.approx(math.exp(-1)),
        pytest.approx(math.exp(2)),
        5,
        0.9,
    )


def test_probe_study_grid_uses_all_seeds_only_at_the_default_setting(probes):
    p = probes.probes
    assert probes.n_runs_grid == 2 * 2 * 2 + 2  # one seed off the default, two seeds on it
    off = (p["batch_size"] != 16) | (p["lr"] != 0.1)
    assert set(p["seed"][off]) == {0} and set(p["seed"][probes.default]) == {0, 1}
    assert all(len(v) == len(p["measured"]) for v in p.values())
    assert probes.n_probes == int(probes.default.sum()) > 0
    assert np.allclose(p["measured"], p["dm_bn"] / p["dm_twin"])


def test_probe_study_agreement_is_the_mean_of_run_ratio_estimators(probes):
    p, d = probes.probes, probes.default
    assert len(probes.run_ratios) == 4  # 2 seeds x 2 initial |w| at the default setting
    for (ws, s), r in zip(probes.run_keys, probes.run_ratios):
        sel = d & (p["w_scale"] == ws) & (p["seed"] == s)
        assert r == pytest.approx(
            p["dm_bn"][sel].sum() / (p["predicted"][sel] * p["dm_twin"][sel]).sum()
        )
    assert probes.agreement.value == pytest.approx(np.mean(probes.run_ratios))
    assert probes.agreement.lo <= probes.agreement.value <= probes.agreement.hi
    assert probes.agreement.n == 4


def test_tiny_step_probes_match_the_full_first_order_prediction(probes):
    assert len(probes.tiny["measured"]) > 0
    assert probes.tiny_full_error == pytest.approx(1.0, abs=0.05)  # within 5%
    assert probes.median_factor(16, 0.1) >= 1.0
    assert math.isnan(probes.median_factor(999, 0.1))


def test_probe_study_row_fields_and_summary_carry_the_counts(probes):
    f = probes.row_fields()
    assert (
        f["n_runs"] == 4 and f["n_probes"] == probes.n_probes and f"{probes.n_bad} of" in f["unit"]
    )
    s = probes.summary()
    assert s["ratio_estimator_mean_over_runs"] == probes.agreement.as_dict()
    assert set(s["run_ratios"]) == {
        "w_scale=1, seed=0",
        "w_scale=1, seed=1",
        "w_scale=3, seed=0",
        "w_scale=3, seed=1",
    }


def test_feedback_factor_gap_splits_exactly_into_gamma_and_sigma_parts(feedback):
    fb = feedback
    assert fb.factor_gap.value == pytest.approx(
        fb.factor_gamma.value + fb.factor_sigma.value, abs=1e-5
    )
    assert fb.driver == ("gamma" if fb.factor_gamma.value >= fb.factor_sigma.value else "sigma")
    assert fb.arr("bn", "gamma").shape == (3, SMALL.steps) and fb.arr("none", "test_acc").shape == (
        3,
    )
    assert fb.population_share == pytest.approx(3 / 33)
    assert set(fb.test_acc) == {"bn", "bn_no_outliers", "none"}
    assert all(0 <= a <= 1 for a in fb.test_acc.values())
    final = fb.arr("bn", "gamma")[:, -1] - fb.arr("bn_clean", "gamma")[:, -1]
    assert fb.gap_gamma.value == pytest.approx(final.mean()) and fb.gap_gamma.n == 3


def test_feedback_story_says_plainly_when_the_loop_fails(feedback):
    fb = feedback
    fb_driver = fb.driver
    try:
        fb.driver = "sigma"
        text = fb.story("inconclusive")
        assert (
            "Gamma is lower with the outliers"
            if fb.gap_gamma.hi < 0
            else "Gamma does not grow measurably with the outliers"
        ) in text
        assert "driven by the batch sigma falling, not by gamma" in text
        assert "does not hold in this toy" in text
        fb.driver = "gamma"
        assert "Consistent with the paper's loop" in fb.story("reproduced")
        assert ("does not hold" if fb.gap_gamma.hi < 0 else "is not supported") in fb.story(
            "not reproduced"
        )
    finally:
        fb.driver = fb_driver


def test_loop_verdict_needs_the_gamma_claim(feedback):
    rise = claims.judge("04.amplification.toy", stats.Estimate(8.0, 2.0, 30.0, 3))
    assert rise["verdict"] == "reproduced"
    no_gamma = claims.judge("04.gamma_feedback.toy", stats.Estimate(-0.05, -0.4, 0.3, 3))
    yes_gamma = claims.judge("04.gamma_feedback.toy", stats.Estimate(0.2, 0.1, 0.3, 3))
    out = T.loop_verdict(rise, no_gamma, feedback)
    assert out["verdict"] == "inconclusive" and "not the paper's loop" in out["magnitude"]
    assert (
        f"driven by {feedback.driver}" in out["magnitude"]
        and out["requires_verdict"] == "inconclusive"
    )
    assert T.loop_verdict(rise, yes_gamma, feedback)["verdict"] == "reproduced"
    flat = claims.judge("04.amplification.toy", stats.Estimate(0.9, 0.7, 1.1, 3))
    assert T.loop_verdict(flat, yes_gamma, feedback)["verdict"] == "inconclusive"
    with pytest.raises(ValueError, match="requires"):
        other = claims.judge("04.most_channels", stats.Estimate(0.9, 0.8, 1.0, 9), arch="lenet")
        T.loop_verdict(rise, other, feedback)


@pytest.mark.parametrize(
    "cid, est, verdict",
    [
        ("04.simulation", (1.0, 0.85, 1.2), "reproduced"),  # inside [0.8, 1.25]
        ("04.simulation", (0.82, 0.62, 0.96), "inconclusive"),  # straddles 0.8
        ("04.simulation", (0.5, 0.4, 0.7), "not reproduced"),  # wholly below the band
        ("04.most_channels", (0.96, 0.93, 0.98), "reproduced"),
        ("04.most_channels", (0.36, 0.32, 0.39), "not reproduced"),
        ("04.most_channels", (0.55, 0.45, 0.65), "inconclusive"),
        ("04.gamma_noisy_vs_clean", (0.98, 0.976, 0.987), "not reproduced"),
        ("04.gamma_noisy_vs_clean", (1.12, 1.07, 1.2), "reproduced"),
        ("04.gamma_noisy_vs_clean", (1.03, 1.01, 1.04), "not reproduced"),  # significant, below 5%
        ("04.gamma_noisy_vs_clean", (1.04, 1.01, 1.07), "inconclusive"),
        ("04.amplification.toy", (1.05, 1.02, 1.08), "not reproduced"),  # significant, below 10%
        ("04.amplification.toy", (16.9, 14.1, 20.1), "reproduced"),
    ],
)
def test_04_claims_keep_their_bands_most_and_minimum_effects(cid, est, verdict):
    assert claims.judge(cid, stats.Estimate(*est, 100), arch="lenet")["verdict"] == verdict


def test_channel_fractions_pool_channels_per_layer_and_over_the_network():
    layers = [
        {
            "ratio_running": torch.tensor([0.5, 2.0]),
            "ratio_batch": torch.tensor([2.0, 3.0]),
            "gamma": torch.tensor([1.0, 2.0]),
        },
        {
            "ratio_running": torch.tensor([1.5, 1.5, 0.1, 3.0]),
            "ratio_batch": torch.tensor([0.1] * 4),
            "gamma": torch.tensor([1.0, 1.0, 4.0, 1.0]),
        },
    ]
    f = T.channel_fractions(layers)
    assert f["running"] == [0.5, 0.75] and f["batch"] == [1.0, 0.0]
    assert f["all_running"].tolist() == [False, True, True, True, False, True]
    assert f["all_batch"].mean() == pytest.approx(2 / 6)


def test_trained_gamma_sigma_reads_a_train_result(tiny_split):
    from bnpaper.train import TrainResult

    torch.manual_seed(0)
    model = build_model("lenet", "bn", 1, 4, 28)
    res = TrainResult(
        {"arch": "lenet", "norm": "bn"},
        model.state_dict(),
        {"test_acc": [0.25, 0.5], "noisy_acc": [0.0, 0.1]},
    )
    out = T.trained_gamma_sigma(res, tiny_split, batch_size=32, n_batches=2)
    assert (out["test_acc"], out["noisy_acc"]) == (0.5, 0.1)
    assert [l["layer"] for l in out["layers"]] == ["norm1", "norm2", "norm3", "norm4"]
    assert torch.all(out["layers"][0]["ratio_batch"] > 0)


def test_theory_figures_draw_from_the_studies(probes, feedback):
    import matplotlib

    matplotlib.use("Agg")

    layers = T.gamma_sigma(build_model("lenet", "bn", 1, 10, 28), torch.randn(64, 1, 28, 28), 32, 2)
    nets, fracs = {"lenet": {"layers": layers}}, {"lenet": T.channel_fractions(layers)}
    figs = [
        plot_theory.margin_growth(probes, [8, 16], [0.05, 0.1]),
        plot_theory.gamma_feedback(feedback),
        plot_theory.gamma_sigma_layers(nets, fracs),
    ]
    assert [len(f.axes) for f in figs] == [2, 3, 1]


# ---------------------------------------------------------------- trained networks over seeds
def _layers(gammas, sigmas, sigmas_running=None):
    """Layer dicts as `theory.gamma_sigma` returns them, from per-layer lists of channel values."""
    out = []
    for i, (g, s) in enumerate(zip(gammas, sigmas)):
        g, s = torch.tensor(g, dtype=torch.float64), torch.tensor(s, dtype=torch.float64)
        sr = s if sigmas_running is None else torch.tensor(sigmas_running[i], dtype=torch.float64)
        out.append(
            {
                "layer": f"norm{i + 1}",
                "gamma": g,
                "sigma_batch": s,
                "sigma_running": sr,
                "ratio_batch": g / s,
                "ratio_running": g / sr,
            }
        )
    return out


def test_factor_parts_split_the_log_factor_into_gamma_and_sigma_exactly():
    a = _layers([[2.0, 1.0], [1.0, 1.0, 4.0]], [[0.5, 1.0], [2.0, 1.0, 1.0]])
    b = _layers([[1.0, 1.0], [1.0, 1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0, 1.0]])
    p = T.factor_parts(a, b)
    assert np.allclose(p["gamma"], [np.log(2), 2 * np.log(4) / 3])  # 2 mean log(ga/gb)
    assert np.allclose(p["sigma"], [np.log(2), -2 * np.log(2) / 3])  # -2 mean log(sa/sb)
    ratio = lambda L: np.concatenate([(l["gamma"] / l["sigma_batch"]).numpy() ** 2 for l in L])  # noqa: E731
    assert p["all_total"] == pytest.approx(np.mean(np.log(ratio(a) / ratio(b))))
    assert p["all_gamma"] == pytest.approx(2 * (np.log(2) + np.log(4)) / 5)
    assert np.allclose(p["total"], p["gamma"] + p["sigma"])


def test_driver_is_the_part_that_carries_the_change_in_its_direction():
    assert T.driver_of(1.0, 0.2) == "gamma" and T.driver_of(0.2, 1.0) == "sigma"
    assert T.driver_of(-0.5, 2.0) == "sigma"  # the factor rises through sigma, gamma fell
    assert T.driver_of(-2.0, 0.5) == "gamma"  # the factor falls, gamma carries the fall
    assert list(T.driver_of(np.array([1.0, -1.0]), np.array([0.0, 3.0]))) == ["gamma", "sigma"]


def test_initial_model_is_the_model_train_fit_starts_from(tiny_split):
    from bnpaper import train

    seen = {}
    cfg = train.TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=32, seed=3)
    hook = lambda epoch, m: seen.setdefault(
        epoch, {k: v.clone() for k, v in m.state_dict().items()}
    )  # noqa: E731
    res = train.fit(tiny_split, cfg, on_epoch_end=hook, progress=False)
    init = T.initial_model(res.config, tiny_split).state_dict()
    assert all(torch.equal(init[k], seen[0][k]) for k in init)
    assert not torch.equal(init["conv1.weight"], res.state["conv1.weight"])


def _study(gamma_clean=0.9):
    """Three seeds of a 2-layer net: trained gamma 2 (sigma halved in layer 2), init gamma 1;
    clean-label nets with gamma scaled by `gamma_clean`^-1 (so flipped / clean = gamma_clean)."""
    nets = {}
    for s in range(3):
        eps = 0.01 * s
        init = _layers([[1.0, 1.0], [1.0, 1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0, 1.0]])
        flip = _layers(
            [[2.0 + eps, 2.0], [1.0, 1.0, 1.0 + eps]],
            [[1.0, 1.0], [0.5, 0.5, 0.5]],
            sigmas_running=[[4.0, 1.0], [0.5, 0.5, 0.5]],
        )
        clean = _layers(
            [
                [(2.0 + eps) / gamma_clean, 2.0 / gamma_clean],
                [1 / gamma_clean] * 2 + [(1.0 + eps) / gamma_clean],
            ],
            [[1.0, 1.0], [0.5, 0.5, 0.5]],
        )
        nets["lenet", "flip", s] = {"layers": flip, "init_layers": init, "test_acc": 0.8 + eps}
        nets["lenet", "none", s] = {"layers": clean, "init_layers": init, "test_acc": 0.85}
    return T.TrainedStudy(nets, ["lenet"], [0, 1, 2])


def test_trained_study_judges_most_channels_over_networks_not_channels():
    st = _study()
    per_layer, pooled = st.shares("lenet")
    assert per_layer.tolist() == [[0.5, 1.0]] * 3 and np.allclose(
        pooled, 4 / 5
    )  # |gamma|/sigma_run
    e = st.most_channels("lenet")
    assert e.n == 3 and e.value == pytest.approx(0.8)  # n counts networks, not 5 x 3 channels
    fields = st.most_fields("lenet", e)
    assert "over 3 networks" in fields["unit"] and fields["n_channels"] == 5
    assert claims.judge("04.most_channels", e, arch="lenet")["verdict"] == "reproduced"
    one = T.TrainedStudy(st.nets, ["lenet"], [0])  # one network: no interval over networks
    assert (
        claims.judge("04.most_channels", one.most_channels("lenet"), arch="lenet")["verdict"]
        == "inconclusive"
    )
    assert st.test_acc("lenet") == pytest.approx(0.81)


def test_trained_study_says_which_part_drives_each_layer_with_seed_counts():
    st = _study()
    init = st.drivers("lenet", "init")
    assert [r["layer"] for r in init] == ["norm1", "norm2", "all channels"]
    assert [r["driver"] for r in init] == ["gamma", "sigma", "sigma"]
    assert init[1]["sigma"].value == pytest.approx(2 * np.log(2)) and init[1]["agree"] == 3
    assert (
        init[0]["gamma"].n == 3
        and init[0]["gamma"].lo < init[0]["gamma"].value < init[0]["gamma"].hi
    )
    t = st.table("init")
    assert (
        list(t["driven by"]) == ["gamma", "sigma", "sigma"]
        and list(t["seeds agreeing"]) == ["3/3"] * 3
    )


def test_trained_study_gamma_ratio_and_story_say_when_outliers_do_not_raise_gamma():
    st = _study(gamma_clean=0.9)
    g = st.gamma_ratio("lenet")
    assert g.value == pytest.approx(0.9) and g.n == 3
    row = claims.judge(
        "04.gamma_noisy_vs_clean", stats.Estimate(g.value, 0.88, 0.92, 3), arch="lenet"
    )
    assert row["verdict"] == "not reproduced"
    f = st.gamma_fields("lenet", g, 0.1)
    assert f["factor_ratio_from_gamma"] == pytest.approx(0.81) and f["driver"] == "gamma"
    text = st.story()
    assert (
        "(lower with flipped labels)" in text
        and "against the paper's positive-feedback loop" in text
    )
    assert (
        "sigma drives the change in 1 of them" in text
        and "rises in 2 and falls in 0 of 2 BN layers" in text
    )
    higher = _study(gamma_clean=1.2).story().split("\n")[1]
    assert "(higher with flipped labels)" in higher and "against" not in higher
    assert set(st.summary()["lenet"]) >= {
        "layers",
        "share_above_one",
        "log_factor_init",
        "log_factor_clean",
    }


def test_trained_study_figures_draw_both_comparisons():
    import matplotlib

    matplotlib.use("Agg")
    from bnpaper import plots

    st = _study()
    fig = plot_theory.factor_drivers(st)
    assert len(fig.axes) == 2 and plots.audit(fig) == []
    fig = plot_theory.share_over_seeds(st)
    assert len(fig.axes) == 1 and plots.audit(fig) == []
