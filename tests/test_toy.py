"""The toy model and its two studies: probes against the first order, the feedback's parts."""

import math

import numpy as np
import pytest
import torch

from bnpaper import theory_text, toy, toy_studies


def test_probe_matches_exact_first_order_prediction_at_tiny_step():
    cfg = toy.ToyConfig(d=100, n_typical=60, n_outliers=4, batch_size=32, steps=40)
    x, y, mask = toy.toy_data(cfg)
    model = toy.Toy(cfg.d, "bn", 1.0, 0).double()
    xb, yb = x[:32].double(), y[:32].double()
    p = toy.probe_margin_growth(model, xb, yb, 0, 1e-7)
    assert p.dm_bn > 0 and p.dm_twin > 0
    assert p.measured == pytest.approx(p.predicted_full, rel=1e-3)


def _symmetric_batch(d: int = 20, half: int = 8):
    """A BN toy (gamma 1.7, beta 0.4) and a batch of pairs x, -x (its mean is 0 for every w,
    so mu cannot move) whose first sample is orthogonal to w (zhat_0 = 0: d sigma/dw has no
    lever on its margin at first order)."""
    model = toy.Toy(d, "bn", 1.0, 0).double()
    with torch.no_grad():
        model.gamma.fill_(1.7)
        model.beta.fill_(0.4)
    w = model.w.detach()
    g = torch.Generator().manual_seed(3)
    xs = torch.randn(half, d, generator=g, dtype=torch.float64)
    xs[0] -= (xs[0] @ w) / (w @ w) * w
    y = torch.ones(2 * half, dtype=torch.float64)
    return model, torch.cat([xs, -xs]), y


def test_tiny_step_probe_converges_to_gamma_over_sigma_squared_when_statistics_cannot_move():
    model, xb, yb = _symmetric_batch()
    steps = (1e-1, 1e-3, 1e-5, 1e-7)
    errors = [toy.probe_margin_growth(model, xb, yb, 0, s) for s in steps]
    predicted = errors[0].predicted
    with torch.no_grad():
        assert predicted == pytest.approx(float((model.gamma / model.stats(xb)[1]) ** 2))
    errors = [abs(p.measured / predicted - 1) for p in errors]
    assert all(a > b for a, b in zip(errors, errors[1:]))  # converges as the step shrinks
    assert errors[-1] < 1e-5
    # a sample off the batch mean (zhat != 0) in the same batch keeps the d sigma/dw term
    other = toy.probe_margin_growth(model, xb, yb, 1, 1e-7)
    assert abs(other.measured / other.predicted - 1) > 0.05
    assert other.measured == pytest.approx(other.predicted_full, rel=1e-4)


def test_geo_mean_by_run_averages_log_ratios_within_runs():
    ids = [(1.0, 0), (1.0, 0), (3.0, 1)]
    keys, logs = toy_studies.geo_mean_by_run(ids, [2.0, 8.0, 1.0], [1.0, 2.0, 2.0])
    assert keys == [(1.0, 0), (3.0, 1)]
    assert logs == pytest.approx([math.log(math.sqrt(2 * 4)), math.log(0.5)])
    with pytest.raises(ValueError, match="positive"):
        toy_studies.geo_mean_by_run(ids, [1.0, -1.0, 1.0], [1.0, 1.0, 1.0])


def test_twin_has_the_same_margins_as_bn_model():
    cfg = toy.ToyConfig(d=50, n_typical=40, n_outliers=2)
    x, y, _ = toy.toy_data(cfg)
    model = toy.Toy(cfg.d, "bn", 2.0, 1)
    with torch.no_grad():
        mu, sig = model.stats(x)
        wt, bt = model.gamma * model.w / sig, model.beta - model.gamma * mu / sig
        assert torch.allclose(model(x), x @ wt + bt, atol=1e-5)


def test_toy_data_outliers_are_mislabeled_and_typical_samples_shared():
    cfg = toy.ToyConfig(d=20, n_typical=30, n_outliers=3)
    x, y, mask = toy.toy_data(cfg)
    x0, y0, m0 = toy.toy_data(cfg, outliers=False)
    assert int(mask.sum()) == 3 and not m0.any()
    assert torch.equal(x[~mask], x0) and torch.equal(y[~mask], y0)
    assert torch.all(torch.sign(x[mask, 0]) == -y[mask])  # label disagrees with class mean


def test_toy_train_bn_memorizes_and_records_gamma():
    cfg = toy.ToyConfig(d=200, n_typical=60, n_outliers=4, steps=150, batch_size=32)
    run = toy.toy_train(cfg, "bn", probe_every=50)
    rec = run.record
    assert set(rec) == set(toy.RECORDED)
    assert len(rec["gamma"]) == cfg.steps and rec["typical_acc"][-1] == 1.0
    assert all(0 <= s <= 1 for s in rec["gamma_share"])
    assert len(run.probes) > 0 and run.outlier_share == pytest.approx(4 / 64)
    assert {p.step for p in run.probes} <= {0, 50, 100}


def test_log_factor_splits_into_gamma_and_sigma_parts():
    cfg = toy.ToyConfig(d=50, n_typical=30, n_outliers=2, steps=20, batch_size=16)
    run = toy.toy_train(cfg, "bn")
    rec = {
        k: torch.tensor(run.record[k], dtype=torch.float64) for k in ("factor", "gamma", "sigma")
    }
    parts = 2 * rec["gamma"].abs().log() - 2 * rec["sigma"].log()
    assert torch.allclose(rec["factor"].log(), parts, atol=1e-5)


def test_ratio_by_run_keeps_falling_probes_and_pools_within_runs():
    ids = [(1.0, 0), (1.0, 0), (3.0, 0), (3.0, 1)]
    keys, r = toy_studies.ratio_by_run(ids, [2.0, -1.0, 3.0, 4.0], [1.0, 1.0, 2.0, 4.0])
    assert keys == [(1.0, 0), (3.0, 0), (3.0, 1)]
    assert r == pytest.approx([0.5, 1.5, 1.0])  # the falling probe lowers run (1, 0) to 1/2
    with pytest.raises(ValueError):
        toy_studies.ratio_by_run(ids, [1.0] * 4, [1.0, 0.0, 1.0, 1.0])


# ---------------------------------------------------------------- the studies
SMALL = toy.ToyConfig(d=60, n_typical=30, n_outliers=3, steps=30)


@pytest.fixture(scope="module")
def probes():
    return toy_studies.probe_study(
        SMALL, [8, 16], [0.05, 0.1], [1.0, 3.0], [0, 1], 16, 0.1, 5, progress=False
    )


@pytest.fixture(scope="module")
def feedback():
    return toy_studies.feedback_study(SMALL, [0, 1, 2], 16, 0.1, n_last=5, progress=False)


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
    assert set(map(tuple, np.column_stack([probes.tiny["w_scale"], probes.tiny["seed"]]))) == {
        (1.0, 0.0),
        (1.0, 1.0),
        (3.0, 0.0),
        (3.0, 1.0),
    }  # every run at the default setting, every seed
    assert probes.tiny_full_error == pytest.approx(1.0, abs=1e-3)  # float64 probes: exact
    assert probes.tiny_exact.value == pytest.approx(1.0, abs=1e-3) and probes.tiny_exact.n == 4
    t = probes.tiny
    for (ws, s), log_r in zip(*probes.tiny_runs()):
        sel = (t["w_scale"] == ws) & (t["seed"] == s)
        assert log_r == pytest.approx(np.log(t["measured"][sel] / t["predicted"][sel]).mean())
    est = probes.tiny_agreement
    assert est.value == pytest.approx(math.exp(np.mean(probes.tiny_runs()[1])))
    assert est.lo <= est.value <= est.hi and est.n == 4
    assert probes.median_factor(16, 0.1) >= 1.0
    assert math.isnan(probes.median_factor(999, 0.1))


def test_probe_study_row_fields_and_summary_carry_the_counts(probes):
    f = probes.row_fields()
    assert f["n_runs"] == 4 and f["n_probes"] == probes.n_probes
    assert f"{probes.n_bad} of {probes.n_probes} probes" in theory_text.probe_unit(probes)
    s = probes.summary()
    assert s["ratio_estimator_mean_over_runs"] == probes.agreement.as_dict()
    assert set(s["run_ratios"]) == {
        "w_scale=1, seed=0",
        "w_scale=1, seed=1",
        "w_scale=3, seed=0",
        "w_scale=3, seed=1",
    }
    assert f"over {probes.n_runs_grid} runs" in theory_text.toy_probe_counts(probes)


def test_feedback_factor_gap_splits_exactly_into_gamma_and_sigma_parts(feedback):
    fb = feedback
    assert fb.factor_gap.value == pytest.approx(
        fb.factor_gamma.value + fb.factor_sigma.value, abs=1e-5
    )
    assert fb.driver == ("gamma" if fb.factor_gamma.value >= fb.factor_sigma.value else "sigma")
    assert fb.arr("bn", "gamma").shape == (3, SMALL.steps)
    assert fb.arr("none", "test_acc").shape == (3,)
    assert fb.population_share == pytest.approx(3 / 33)
    assert set(fb.test_acc) == {"bn", "bn_no_outliers", "none"}
    assert all(0 <= a <= 1 for a in fb.test_acc.values())
    final = fb.arr("bn", "gamma")[:, -1] - fb.arr("bn_clean", "gamma")[:, -1]
    assert fb.gap_gamma.value == pytest.approx(final.mean()) and fb.gap_gamma.n == 3
    assert set(theory_text.feedback_notes(fb)) == {"gamma", "factor", "start"}


class _Driven:
    """A feedback study whose driver is set by hand (the rest read from the real one)."""

    def __init__(self, fb, driver):
        self._fb, self.driver = fb, driver

    def __getattr__(self, name):
        return getattr(self._fb, name)


def test_feedback_story_says_plainly_when_the_loop_fails(feedback):
    fb = _Driven(feedback, "sigma")
    story = theory_text.feedback_story(fb, "inconclusive")
    lower = feedback.gap_gamma.hi < 0
    assert (
        "Gamma is lower with the outliers"
        if lower
        else "Gamma does not grow measurably with the outliers"
    ) in story
    assert "driven by the batch sigma falling, not by gamma" in story
    assert "does not hold in this toy" in story
    fb = _Driven(feedback, "gamma")
    assert "Consistent with the paper's loop" in theory_text.feedback_story(fb, "reproduced")
    end = "does not hold" if lower else "is not supported"
    assert end in theory_text.feedback_story(fb, "not reproduced")


def test_gamma_share_row_is_the_seed_mean_of_share_over_population_minus_one(feedback):
    per_seed = feedback.arr("bn", "gamma_share").mean(1) / feedback.population_share
    assert feedback.share_excess.value == pytest.approx(per_seed.mean() - 1)
    assert feedback.share_excess.n == 3
    assert feedback.share_fields()["share_ratio_per_seed"] == pytest.approx(per_seed.tolist())
