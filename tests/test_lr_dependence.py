"""Notebook 01's learning-rate curve: every grid rate of BN and no-BN read at the end of training
(trained to fit), its rows against the other norm's chosen rate, its table and its reading."""

import math

import pytest

from bnpaper import claims, fit_rows, lr_dependence, text
from bnpaper.config import ConfigError
from bnpaper.declarations import check_values
from bnpaper.stats import t_mean, t_paired_diff

GRID = [0.01, 0.1, 1.0]
CHOSEN = {"bn": 0.1, "none": 0.1}


def _history(clean, noisy, test=0.8):
    n = len(clean)
    return {
        "epoch": list(range(n)),
        "clean_acc": list(clean),
        "noisy_acc": list(noisy),
        "test_acc": [test] * n,
        "rare_test_acc": [0.0] * n,
    }


def _curve():
    """Two seeds; BN memorizes more the larger its rate; no-BN at 0.01 hits the cap (3 epochs)
    unfitted, at 1.0 it diverged (no history)."""
    fitted = [0.5, 0.9, 0.995]
    h = {}
    for s in (0, 1):
        h["flip", "bn", s] = _history(fitted, [0.0, 0.3, 0.6 + 0.1 * s])
        h["flip", "bn lr 0.01", s] = _history(fitted, [0.0, 0.2, 0.3 + 0.1 * s])
        h["flip", "bn lr 1", s] = _history(fitted, [0.0, 0.5, 0.9 - 0.05 * s])
        h["flip", "none", s] = _history(fitted, [0.0, 0.2, 0.4 + 0.05 * s])
        h["flip", "none lr 0.01", s] = _history([0.3, 0.6, 0.9], [0.0, 0.05, 0.1 + 0.1 * s])
    return h


def test_the_chosen_rate_is_the_judged_run_and_only_the_others_are_trained():
    assert lr_dependence.key("bn", 0.1, 0.1) == "bn"
    assert lr_dependence.key("none", 0.0158, 0.05) == "none lr 0.0158"
    extra = lr_dependence.extra_points({"bn": 0.1, "none": 1.0}, [1.0, 0.01, 0.1])  # unsorted
    assert extra == [("bn", 0.01), ("bn", 1.0), ("none", 0.01), ("none", 0.1)]
    with pytest.raises(ValueError, match="not rates of the grid"):
        lr_dependence.extra_points({"bn": 0.2, "none": 1.0}, GRID)


def test_points_read_the_last_epoch_count_fitted_and_diverged_runs():
    pts = lr_dependence.points(_curve(), "flip", CHOSEN, GRID, [0, 1], 0.99)
    assert [(p.norm, p.lr, p.chosen) for p in pts] == [
        ("bn", 0.01, False), ("bn", 0.1, True), ("bn", 1.0, False),
        ("none", 0.01, False), ("none", 0.1, True), ("none", 1.0, False),
    ]  # fmt: skip
    bn_low, none_low, none_high = pts[0], pts[3], pts[5]
    assert bn_low.memorization == pytest.approx((0.3, 0.4))
    want = t_mean([0.3, 0.4])
    assert (bn_low.estimate.value, bn_low.estimate.lo) == pytest.approx((want.value, want.lo))
    assert (bn_low.fitted, bn_low.runs, bn_low.diverged) == (2, 2, 0)
    assert (none_low.fitted, none_low.epochs) == (0, (2.0, 2.0))  # capped at 0.9 < 0.99
    assert none_high.diverged == 2 and math.isnan(none_high.estimate.value)
    # one seed diverged: the point keeps the survivor's mean and counts the diverged run
    h = _curve()
    del h["flip", "bn lr 1", 1]
    partial = lr_dependence.points(h, "flip", CHOSEN, GRID, [0, 1], 0.99)[2]
    assert partial.diverged == 1 and partial.estimate.value == pytest.approx(0.9)
    assert math.isnan(partial.estimate.lo) and partial.fitted == 1


def test_rows_pair_each_other_rate_with_the_other_norms_chosen_run_and_skip_diverged_rates():
    rows = lr_dependence.rows(_curve(), ["flip"], CHOSEN, [1.0, 0.01, 0.1], [0, 1], 0.99, 2)
    assert [(r.id, r.fields["lr"]) for r in rows] == [
        ("01.lr.bn", "0.01"),
        ("01.lr.bn", "1"),
        ("01.lr.none", "0.01"),
    ]  # fmt: skip  (in increasing rate; the chosen pair is 01.converged.flip; no-BN 1 diverged)
    bn_high = rows[1]
    want = t_paired_diff([0.9, 0.85], [0.4, 0.45])
    assert bn_high.measured == pytest.approx(want.value)
    assert (bn_high.lo, bn_high.hi) == pytest.approx((want.lo, want.hi))
    # no-BN at 0.01 hit the cap at 0.9 clean training accuracy: not at matched fit, named
    censored = rows[2]
    assert censored.verdict == "inconclusive"
    assert "clean training accuracy at the reading differs" in censored.magnitude
    assert claims.family_of("01.lr.bn") == claims.family_of("01.lr.none") == "lr_dependence"


def test_the_declared_family_matches_the_default_grid_and_curve_kinds():
    from bnpaper import params

    p = params.defaults("01_forced_memorization")
    declared = claims.family("lr_dependence")["rows"]
    others = (len(p["lr_grid"]) - 1) * len(p["lr_curve"])  # every rate but the chosen one
    assert declared == {"01.lr.bn": [others, 0], "01.lr.none": [others, 0]}


def test_the_reading_counts_every_other_rate_names_diverged_ones_and_cites_the_judged_pair():
    h = _curve()
    del h["flip", "bn lr 1", 1]  # BN at 1 diverged on one seed: no row there
    judged = fit_rows.verdict_rows(h, ["flip"], ["bn", "none"], [0, 1], [], 0.99, 2)
    rows = claims.correct(judged + lr_dependence.rows(h, ["flip"], CHOSEN, GRID, [0, 1], 0.99, 2))
    pts = {"flip": lr_dependence.points(h, "flip", CHOSEN, GRID, [0, 1], 0.99)}
    (line,) = text.lr_dependence_reading(rows, pts)
    converged = next(r for r in rows if r.id == "01.converged.flip")
    assert line.startswith(
        f"flip: the chosen pair (BN 0.1, no-BN 0.1) is 01.converged.flip: "
        f"{converged.measured:+.3f} ({converged.verdict})"
    )
    assert "BN at its 2 other rates against no-BN at its chosen 0.1: " in line
    assert "1 without a row (a run diverged)" in line and "1 no row" in line
    assert "no-BN at its 2 other rates against BN at its chosen 0.1: " in line
    assert all(r.verdict in ("supported", "not supported", "inconclusive") for r in rows)
    assert text.lr_dependence_reading(rows, {}) == []


def test_the_table_names_every_point_with_its_fit_and_divergence():
    pts = {"flip": lr_dependence.points(_curve(), "flip", CHOSEN, GRID, [0, 1], 0.99)}
    table = text.lr_points_table(pts, 0.99)
    assert "0.1 (chosen)" in table and "0/2, 2 diverged" in table and "| 0/2 |" in table


def test_a_curve_kind_that_corruption_does_not_train_is_refused():
    from bnpaper import params

    values = {**params.defaults("01_forced_memorization"), "corruption": ["flip"]}
    check_values("01_forced_memorization", {**values, "lr_curve": []})
    with pytest.raises(ConfigError, match=r"lr_curve=\['ood'\] has \['ood'\], not in corruption"):
        check_values("01_forced_memorization", {**values, "lr_curve": ["ood"]})


def test_the_lr_curve_figure_passes_the_figure_checks_and_marks_the_chosen_and_diverged():
    from bnpaper import plot_memorization, plots

    pts = {"flip": lr_dependence.points(_curve(), "flip", CHOSEN, GRID, [0, 1], 0.99)}
    fig = plot_memorization.lr_curve_figure(pts, {"flip": "5% flips"}, "mean of 2 seeds; band")
    assert plots.audit(fig) == []
    left = fig.axes[0]
    assert left.get_xscale() == "log"
    crosses = [ln for ln in left.lines if ln.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [1.0]  # no-BN diverged at 1
