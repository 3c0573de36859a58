import math

import numpy as np
import pytest

from bnpaper import claims, stats


def test_t_mean_equals_the_closed_form_student_interval():
    e = stats.t_mean([1.0, 2.0, 3.0])
    p = 0.975  # Student t with 2 degrees of freedom has the closed-form quantile below
    half = (2 * p - 1) / math.sqrt(2 * p * (1 - p)) / math.sqrt(3)  # t_{0.975,2} s / sqrt(n), s = 1
    assert (e.value, e.n) == (2.0, 3)
    assert e.lo == pytest.approx(2.0 - half, abs=1e-12) and e.hi == pytest.approx(
        2.0 + half, abs=1e-12
    )


def test_t_paired_diff_is_the_t_interval_of_the_differences():
    a, b = [0.9, 0.8, 0.85, 0.7], [0.5, 0.45, 0.6, 0.4]
    assert stats.t_paired_diff(a, b) == stats.t_mean(np.subtract(a, b))
    with pytest.raises(ValueError, match="equal shapes"):
        stats.t_paired_diff([1.0, 2.0], [1.0])


def test_a_single_seed_has_an_unbounded_t_interval():
    e = stats.t_mean([0.3])
    assert e.lo == -math.inf and e.hi == math.inf
    assert claims.judge("01.final.flip", e)["verdict"] == "inconclusive"  # nothing to sign


def test_bootstrap_of_three_seeds_collapses_to_their_range_which_is_why_seeds_use_t():
    v = [0.1, 0.2, 0.6]
    b = stats.bootstrap_mean(v)
    assert (b.lo, b.hi) == (pytest.approx(0.1), pytest.approx(0.6))
    t = stats.t_mean(v)
    assert t.lo < b.lo and t.hi > b.hi


def test_epochs_to_and_area_under_curve_on_known_curves():
    ep = [0, 1, 2, 3, 4]
    assert stats.epochs_to([0.0, 0.2, 0.6, 0.95, 1.0], ep, 0.5) == 2.0
    assert stats.epochs_to([0.0, 0.1, 0.2, 0.3, 0.4], ep, 0.5) == math.inf
    assert stats.area_under_curve([0.0, 0.25, 0.5, 0.75, 1.0], ep) == pytest.approx(0.5)


def test_p_value_of_a_t_interval_equals_scipys_one_sided_t_test():
    from scipy import stats as sps

    v = [0.3, 0.1, 0.25, 0.05]
    e = stats.t_mean(v)
    ref = sps.ttest_1samp(v, 0.02, alternative="greater").pvalue
    assert abs(e.p_above(0.02) - ref) < 1e-12
    ref_less = sps.ttest_1samp(v, 0.4, alternative="less").pvalue
    assert abs(e.p_below(0.4) - ref_less) < 1e-12


def test_p_value_without_a_standard_error_comes_from_the_interval():
    from scipy import stats as sps

    e = stats.Estimate(2.0, 2.0 - 1.959964, 2.0 + 1.959964, 10)  # se = 1 under the normal
    assert abs(e.p_above(0.0) - sps.norm.sf(2.0)) < 1e-6
    assert np.isnan(stats.Estimate(1.0, -np.inf, np.inf, 1).p_above(0.0))
