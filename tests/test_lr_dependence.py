"""Notebook 01's learning-rate curve: every grid rate of BN and no-BN read at the end of training
(trained to fit), its rows against the other norm's chosen rate, its table and its reading."""

import math

import pytest

from bnpaper import claims, lr_dependence, text
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
    extra = lr_dependence.extra_points({"bn": 0.1, "none": 1.0}, GRID)
    assert extra == [("bn", 0.01), ("bn", 1.0), ("none", 0.01), ("none", 0.1)]


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
    assert lr_dependence.fitted_range(pts, "bn") == pytest.approx((0.35, 0.875))
    assert lr_dependence.fitted_range(pts, "none") == pytest.approx((0.425, 0.425))


def test_rows_pair_each_rate_with_the_other_norms_chosen_run_and_skip_diverged_rates():
    rows = lr_dependence.rows(_curve(), ["flip"], CHOSEN, GRID, [0, 1], 0.99, 2)
    assert [(r.id, r.fields["lr"]) for r in rows] == [
        ("01.lr.bn", "0.01"), ("01.lr.bn", "0.1"), ("01.lr.bn", "1"),
        ("01.lr.none", "0.01"), ("01.lr.none", "0.1"),
    ]  # fmt: skip
    bn_high = rows[2]
    want = t_paired_diff([0.9, 0.85], [0.4, 0.45])
    assert bn_high.measured == pytest.approx(want.value)
    assert (bn_high.lo, bn_high.hi) == pytest.approx((want.lo, want.hi))
    # the chosen rates' rows are the judged comparison itself (01.converged.flip's numbers)
    assert rows[1].measured == pytest.approx(rows[4].measured)
    # no-BN at 0.01 hit the cap at 0.9 clean training accuracy: not at matched fit, named
    censored = rows[3]
    assert censored.verdict == "inconclusive"
    assert "clean training accuracy at the reading differs" in censored.magnitude
    assert claims.family_of("01.lr.bn") == claims.family_of("01.lr.none") == "lr_dependence"


def test_the_reading_counts_the_rates_where_the_excess_holds():
    rows = claims.correct(lr_dependence.rows(_curve(), ["flip"], CHOSEN, GRID, [0, 1], 0.99, 2))
    (line,) = text.lr_dependence_reading(rows)
    held = sum(r.verdict == "supported" for r in rows if r.id == "01.lr.bn")
    assert line.startswith("flip: BN at lr: BN's excess holds at ")
    assert f"holds at {held} of 3" in line and "no-BN at lr: BN's excess holds at" in line
    assert all(r.verdict in ("supported", "not supported", "inconclusive") for r in rows)


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
