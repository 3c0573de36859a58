"""Notebook 01 at matched fit: rows read where BN and no-BN fit equally, the arm, held curves."""

import dataclasses
import math

import pytest

from bnpaper import claims, fit_rows, memorization, text
from bnpaper.config import ConfigError
from bnpaper.declarations import check_values
from bnpaper.stats import t_paired_diff


def _history(clean, noisy, test=None):
    n = len(clean)
    return {
        "epoch": list(range(n)),
        "clean_acc": list(clean),
        "noisy_acc": list(noisy),
        "test_acc": list(test or [0.8] * n),
        "rare_test_acc": [0.0] * n,
    }


# BN fits in 2 epochs, no-BN in 4; per seed the memorization they carry along the way
BN = [
    _history([0.5, 0.9, 1.0], [0.0, 0.4, 0.8]),
    _history([0.5, 0.94, 0.99], [0.0, 0.3, 0.6]),
]
NONE = [
    _history([0.3, 0.6, 0.9, 0.96, 1.0], [0.0, 0.1, 0.2, 0.3, 0.5]),
    _history([0.3, 0.6, 0.9, 0.98, 0.99], [0.0, 0.1, 0.2, 0.4, 0.45]),
]


def _histories(none=NONE):
    h = {("flip", "bn", s): BN[s] for s in (0, 1)}
    h.update({("flip", "none", s): none[s] for s in (0, 1)})
    return h


def test_the_row_at_a_level_is_the_paired_difference_of_hand_interpolated_memorization():
    rows = fit_rows.verdict_rows(_histories(), ["flip"], ["bn", "none"], [0, 1], [0.95], 0.99, 4)
    at95 = rows[0]
    # BN seed 0: 0.95 halfway from 0.9 to 1.0 -> 0.6; seed 1: a sixth of the way from 0.94 to 0.99
    # -> 0.3 + 0.2 * 0.3 = 0.36. no-BN seed 0: 5/6 of 0.9 -> 0.96 -> 0.2 + 5/6 * 0.1; seed 1:
    # 0.05 / 0.08 of the way -> 0.2 + 0.625 * 0.2
    bn = [0.6, 0.36]
    none = [0.2 + 5 / 6 * 0.1, 0.2 + 0.625 * 0.2]
    want = t_paired_diff(bn, none)
    assert at95.id == "01.fit.flip" and at95.fields["level"] == "95%"
    assert at95.measured == pytest.approx(want.value)
    assert (at95.lo, at95.hi) == pytest.approx((want.lo, want.hi))
    # both read at the same clean training accuracy: the train gap is zero, test gap from history
    assert at95.fields["clean_train_acc"]["bn"] == pytest.approx(0.95)
    assert at95.fields["clean_train_acc"]["none"] == pytest.approx(0.95)


def test_a_level_one_model_never_reaches_gives_no_estimate_and_an_inconclusive_row():
    never = [_history([0.3, 0.6, 0.9], [0.0, 0.1, 0.2])] * 2  # no-BN stops at the cap below 0.95
    rows = fit_rows.verdict_rows(
        _histories(never), ["flip"], ["bn", "none"], [0, 1], [0.95], 0.99, 2
    )
    at95, end = rows
    assert math.isnan(at95.measured) and at95.verdict == "inconclusive"
    assert "no-BN 2/2" in at95.fields["unit"]
    assert end.id == "01.converged.flip"
    # at the end BN fits (1.0, 0.99) while no-BN hit the cap at 0.9: not matched, and named
    assert "censored" in end.fields["unit"] and end.verdict != "reproduced"
    assert "clean training accuracy at the reading differs" in end.magnitude


def test_the_end_of_training_row_reads_both_fitted_models_last_epoch():
    rows = fit_rows.verdict_rows(_histories(), ["flip"], ["bn", "none"], [0, 1], [], 0.99, 40)
    (end,) = rows
    want = t_paired_diff([0.8, 0.6], [0.5, 0.45])
    assert end.measured == pytest.approx(want.value)
    assert end.fields["epoch_read"] == {"bn": 2.0, "none": 4.0}


def test_the_arm_reads_bn_against_no_bn_at_a_raised_lr_and_skips_a_diverged_factor():
    h = _histories()
    h.update({("flip", fit_rows.arm_norm(3.0), s): BN[s] for s in (0, 1)})  # memorizes like BN
    h[("flip", fit_rows.arm_norm(9.0), 0)] = BN[0]  # seed 1 diverged: no reading at 9x
    rows = fit_rows.arm_rows(h, ["flip"], [3.0, 9.0], [0, 1], 0.99, 40)
    assert [r.fields["factor"] for r in rows] == ["3"]
    assert rows[0].measured == 0.0 and rows[0].verdict == "not supported"  # exploratory
    base = fit_rows.verdict_rows(h, ["flip"], ["bn", "none"], [0, 1], [], 0.99, 40)
    reading = text.effective_lr_reading(base + rows)
    assert len(reading) == 1 and "x3 lr +0.000" in reading[0]


def test_the_arms_reading_counts_no_row_read_off_matched_fit():
    h = _histories()
    h.update({("flip", fit_rows.arm_norm(3.0), s): BN[s] for s in (0, 1)})
    (arm,) = fit_rows.arm_rows(h, ["flip"], [3.0], [0, 1], 0.99, 40)
    base = fit_rows.verdict_rows(h, ["flip"], ["bn", "none"], [0, 1], [], 0.99, 40)
    above = dataclasses.replace(arm, measured=0.2, lo=0.1, hi=0.3)  # BN's excess stays
    (said,) = text.effective_lr_reading(base + [above])
    assert said.endswith("no tested no-BN learning rate closes BN's excess at matched fit")
    off = dataclasses.replace(above, magnitude=claims.OFF_FIT + "clean training accuracy ...")
    (said,) = text.effective_lr_reading(base + [off])
    assert "+0.200 [+0.100, +0.300] (not at matched fit)" in said
    assert said.endswith("not separated at this budget")  # an unmatched row counts for no side


def test_a_model_stopped_at_fit_is_held_at_its_last_value_on_the_longest_runs_epochs():
    assert memorization.held([0.1, 0.5], 4).tolist() == [0.1, 0.5, 0.5, 0.5]
    runs = memorization.Runs(_histories(), (0, 1))
    assert runs.epochs.tolist() == [0, 1, 2, 3, 4]
    assert runs.mem("flip", "bn")[0].tolist() == [0.0, 0.4, 0.8, 0.8, 0.8]
    assert runs.stopped("flip", "bn").tolist() == [2.0, 2.0]


def test_epochs_used_counts_the_runs_that_reached_the_fit_level():
    used = fit_rows.epochs_used(_histories(), ["flip"], ["bn", "none"], [0, 1], 0.99)
    assert used["flip"]["bn"]["fitted"] == 2 and used["flip"]["none"]["fitted"] == 2
    assert used["flip"]["none"]["mean"] == 4.0
    used = fit_rows.epochs_used(_histories(), ["flip"], ["bn", "none"], [0, 1], 1.0)
    assert used["flip"]["bn"]["fitted"] == 1


def test_a_matched_fit_row_prints_both_models_training_and_test_accuracy():
    rows = fit_rows.verdict_rows(_histories(), ["flip"], ["bn", "none"], [0, 1], [0.95], 0.99, 4)
    line = rows[0].line()
    assert "clean training accuracy BN 0.95, no-BN 0.95" in line and "clean test accuracy" in line
    assert claims.holm(rows)[0].id == "01.fit.flip"


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"fit_levels": [0.95, 0.995]}, "above fit_level"),
        ({"effective_lr": [100.0]}, "exceeds 10"),
        ({"lr_grid": [0.01, 0.02, 0.03, 0.04, 0.05]}, "spans"),
        ({"n_val": 70_000}, "n_val=70000 is out of range"),
    ],
)
def test_notebook_01_refuses_a_bad_fair_protocol_parameter_before_any_run(changes, match):
    from bnpaper import params

    values = params.defaults("01_forced_memorization")
    with pytest.raises(ConfigError, match=match):
        check_values("01_forced_memorization", {**values, **changes})


def test_the_matched_fit_and_lr_choice_figures_pass_the_figure_checks():
    from bnpaper import lr_choice, plot_memorization, plot_recipes, plots, recipes
    from bnpaper.train import TrainConfig

    h = _histories()
    h.update({("flip", fit_rows.arm_norm(3.0), s): BN[s] for s in (0, 1)})
    curves = fit_rows.curves(h, ["flip"], ["bn", "none"], [0, 1])
    arm = fit_rows.arm_curves(h, ["flip"], [3.0], [0, 1])
    fig = plot_memorization.matched_fit_figure(curves, arm, [0.95], {"flip": "flips"}, "2 seeds")
    assert plots.audit(fig) == []
    # the curve stops at the highest accuracy both runs reached (0.99 for BN's seed 1)
    line = fig.axes[0].lines[0]
    assert max(line.get_xdata()) == pytest.approx(0.99)
    grid = (0.01, 0.03, 0.1, 0.3, 1.0)
    choice = lr_choice.choose_lr(grid, [[0.5, 0.7, 0.8, 0.6, float("nan")]], "lenet", "none")
    chosen = recipes.NormRecipes("fair", TrainConfig(fit_level=0.99), lr_choice.Recipes((choice,)))
    fig = plot_recipes.lr_choice_figure(chosen, "search")
    assert (
        plots.audit(fig) == [] and "diverged at 1" in fig.axes[0].get_legend().texts[0].get_text()
    )
