"""Readings at matched fit: interpolation at a level, censored runs, paired rows, convergence."""

import math

import numpy as np
import pytest

from bnpaper import claims, matched_fit as MF
from bnpaper.stats import t_paired_diff


def _run(fit, value, train=None, test=None, epochs=None):
    n = len(fit)
    return MF.Trajectory(
        np.arange(n, dtype=float) if epochs is None else np.asarray(epochs, float),
        np.asarray(fit, float),
        np.asarray(value, float),
        np.asarray(fit if train is None else train, float),
        np.asarray(np.full(n, 0.8) if test is None else test, float),
    )


def test_at_level_interpolates_linearly_between_the_two_points_straddling_the_level():
    # 0.95 lies halfway from 0.9 to 1.0: the value halfway from 0.3 to 0.6
    assert MF.at_level([0.5, 0.9, 1.0], [0.1, 0.3, 0.6], 0.95) == pytest.approx(0.45)
    # a quarter of the way from 0.5 to 0.9: 0.1 + 0.25 * 0.2
    assert MF.at_level([0.5, 0.9, 1.0], [0.1, 0.3, 0.6], 0.6) == pytest.approx(0.15)


def test_a_run_that_starts_above_the_level_reads_at_epoch_zero():
    assert MF.at_level([0.97, 0.99], [0.2, 0.5], 0.95) == 0.2
    reading = MF.reading_at_level([_run([0.97, 0.99], [0.2, 0.5])], 0.95)
    assert reading.epoch.tolist() == [0.0] and reading.value.tolist() == [0.2]


def test_a_run_that_never_reaches_the_level_gives_nan_not_an_extrapolation():
    assert math.isnan(MF.at_level([0.5, 0.8, 0.94], [0.1, 0.2, 0.3], 0.95))
    reading = MF.reading_at_level([_run([0.5, 0.94], [0.1, 0.3]), _run([0.5, 1.0], [0, 1])], 0.95)
    assert reading.censored.tolist() == [True, False] and reading.reached == 1
    assert math.isnan(reading.epoch[0]) and reading.epoch[1] == pytest.approx(0.9)


def test_a_non_monotone_fit_curve_is_read_at_its_first_crossing():
    fit, value = [0.5, 0.96, 0.9, 0.99], [0.0, 0.4, 0.5, 0.9]
    # 0.95 is first crossed between epochs 0 and 1 (later dips and recrossings do not count)
    assert MF.at_level(fit, value, 0.95) == pytest.approx(0.4 * 0.45 / 0.46)
    # 0.98 is first crossed between epochs 2 and 3, after the dip
    assert MF.at_level(fit, value, 0.98) == pytest.approx(0.5 + 0.4 * 0.08 / 0.09)


def test_the_fit_by_clean_loss_is_minus_the_loss_so_a_lower_loss_is_a_higher_level():
    h = {"clean_loss": [2.0, 0.5, 0.1], "clean_acc": [0.1, 0.8, 0.97]}
    assert MF.fit_curve(h, "clean_loss").tolist() == [-2.0, -0.5, -0.1]
    # loss 0.3 is reached halfway from 0.5 to 0.1
    assert MF.at_level(MF.fit_curve(h, "clean_loss"), [0, 0.2, 0.4], -0.3) == pytest.approx(0.3)
    with pytest.raises(claims.ConfigError, match="measure='test_acc'"):
        MF.fit_curve(h, "test_acc")


def test_a_trajectory_from_a_history_keeps_every_entry_and_refuses_ragged_lists():
    h = {"epoch": [0, 1, 2], "clean_acc": [0.1, 0.5, 0.9], "test_acc": [0.1, 0.4, 0.8]}
    run = MF.trajectory(h, [0.0, 0.1, 0.2])
    assert run.fit.tolist() == [0.1, 0.5, 0.9] and run.test_acc.tolist() == [0.1, 0.4, 0.8]
    with pytest.raises(ValueError, match="one entry per evaluated epoch"):
        MF.trajectory(h, [0.0, 0.1])


def test_a_level_row_pairs_the_seeds_read_in_both_and_reports_the_accuracy_gaps():
    # three seeds, every run reaches 0.95: BN's value there 0.45, 0.5, 0.6; no-BN's 0.25, 0.2, 0.3
    a = [_run([0.5, 0.9, 1.0], [0.1, 0.3, v], test=[0.5, 0.8, 0.9]) for v in (0.6, 0.7, 0.9)]
    b = [_run([0.5, 0.95, 1.0], [0.0, v, 0.5], test=[0.5, 0.85, 0.9]) for v in (0.25, 0.2, 0.3)]
    (row,) = MF.level_rows(a, b, [0.95])
    assert row.a.value == pytest.approx([0.45, 0.5, 0.6]) and row.reached_both == 3
    expected = t_paired_diff([0.45, 0.5, 0.6], [0.25, 0.2, 0.3])
    assert (row.estimate.value, row.estimate.lo) == pytest.approx((expected.value, expected.lo))
    # both at 0.95 clean training accuracy; test accuracy 0.85 (halfway) against 0.85
    assert row.train_acc_gap == pytest.approx(0.0) and row.test_acc_gap == pytest.approx(0.0)
    assert row.accuracies["a"]["epoch"] == pytest.approx(1.5)


def test_censored_seeds_leave_the_estimate_to_the_rest_and_fewer_than_two_give_none():
    reach = [0.5, 0.9, 1.0]
    a = [_run(reach, [0.0, 0.2, 0.4]), _run(reach, [0.0, 0.2, 0.6]), _run(reach, [0.0, 0.2, 0.8])]
    b = [_run([0.5, 0.9], [0, 0.1]), _run(reach, [0, 0.1, 0.1]), _run(reach, [0, 0.1, 0.3])]
    row = MF.level_rows(a, b, [0.95])[0]
    assert row.censored == (0, 1) and row.reached_both == 2 and row.seeds == 3
    assert row.estimate.value == pytest.approx(np.mean([0.4 - 0.1, 0.5 - 0.2]))
    b[1] = _run([0.5, 0.94], [0, 0.1])
    row = MF.level_rows(a, b, [0.95])[0]
    assert row.reached_both == 1 and row.estimate.n == 1
    saved = row.as_dict()
    assert saved["reached"] == [3, 1] and saved["censored"] == [0, 2] and saved["at"] == 0.95
    assert all(math.isnan(x) for x in (row.estimate.value, row.estimate.lo, row.estimate.hi))
    # n/a: no interval, so the verdict is inconclusive whatever the claim's test
    verdict = claims.judge("01.typical.cost", row.estimate, clean_level="95%", subset="s")
    assert verdict["verdict"] == "inconclusive" and "no estimate" in verdict.line()


def test_convergence_reads_the_last_epoch_and_marks_runs_capped_before_the_fit_level():
    capped = _run([0.5, 0.9, 0.95], [0.1, 0.2, 0.3], epochs=[0, 5, 10])  # at the cap, below 0.99
    fitted = _run([0.5, 0.995], [0.1, 0.5], epochs=[0, 4])  # stopped once it fit
    fitted_at_cap = _run([0.5, 0.9, 0.99], [0.1, 0.2, 0.4], epochs=[0, 5, 10])
    plateau = _run([0.5, 0.9, 0.9], [0.1, 0.2, 0.2], epochs=[0, 3, 6])  # stopped before the cap
    assert [MF.censored(r, 0.99, 10) for r in (capped, fitted, fitted_at_cap, plateau)] == [
        True,
        False,
        False,
        False,
    ]
    row = MF.convergence_row([fitted, fitted_at_cap], [capped, plateau], 0.99, 10)
    assert row.at == "convergence" and row.censored == (0, 1)
    assert row.a.epoch.tolist() == [4, 10] and row.b.value.tolist() == [0.3, 0.2]
    assert row.estimate.value == pytest.approx(np.mean([0.5 - 0.3, 0.4 - 0.2]))
    assert row.train_acc_gap == pytest.approx(np.mean([0.995 - 0.95, 0.99 - 0.9]))


def test_value_against_fit_reads_each_run_on_a_shared_grid_of_levels():
    runs = [_run([0.5, 0.9, 1.0], [0.1, 0.3, 0.6]), _run([0.5, 0.7], [0.0, 0.4])]
    curve = MF.value_vs_fit(runs, [0.5, 0.6, 0.95])
    assert curve.values[0] == pytest.approx([0.1, 0.15, 0.45])
    assert curve.values[1, :2] == pytest.approx([0.0, 0.2]) and math.isnan(curve.values[1, 2])
    assert curve.reached.tolist() == [2, 2, 1]
    assert curve.mean == pytest.approx([0.05, 0.175, 0.45])
