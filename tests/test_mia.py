"""Known-answer tests of the membership-inference scores, attacks and metrics."""

import warnings

import numpy as np
import pytest
from scipy.special import logit
from scipy.stats import norm

from bnpaper import mia


def test_phi_matches_float64_reference_on_extreme_logits():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 10)) * 5
    z[:50, 3] += 60.0  # p_y -> 1 - 1e-26: float32 softmax would saturate to 1
    z[50:100, 3] -= 80.0  # p_y -> 1e-35
    y = np.full(200, 3)
    z32 = z.astype(np.float32)
    zr = z32.astype(np.float64)
    ref = -np.log(np.exp(np.delete(zr, 3, 1) - zr[:, [3]]).sum(1))  # direct float64 formula
    got = mia.phi(z32, y)
    assert np.allclose(got, ref, rtol=1e-12, atol=1e-12)
    assert np.isfinite(got).all() and got[:50].min() > 25 and got[50:100].max() < -40
    # phi is the logit of p_y where that is representable
    p = np.exp(mia.log_softmax_y(z[100:], y[100:]))
    assert np.allclose(mia.phi(z[100:], y[100:]), logit(p), atol=1e-8)


def test_phi_and_attacks_reject_nan_and_inf():
    z = np.zeros((4, 3))
    z[1, 2] = np.nan
    with pytest.raises(mia.ScoreError, match="NaN/inf"):
        mia.phi(z, np.zeros(4, int))
    s = np.zeros((4, 6, 1))
    s[0, 0, 0] = np.inf
    keep = np.array([[1, 0] * 3, [0, 1] * 3] * 2, bool)
    with pytest.raises(mia.ScoreError):
        mia.lira(s, keep)


def test_auc_of_gaussian_in_out_scores_matches_closed_form():
    rng = np.random.default_rng(1)
    d, n = 1.0, 20_000
    s = np.concatenate([rng.normal(d, 1, n), rng.normal(0, 1, n)])
    y = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    expected = norm.cdf(d / np.sqrt(2))
    se = np.sqrt(expected * (1 - expected) / n)  # generous: Hanley-McNeil is smaller
    assert abs(mia.auc(s, y) - expected) < 4 * se
    from sklearn.metrics import roc_auc_score

    assert mia.auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    # TPR at FPR alpha is Phi(d - z_{1-alpha}) for this pair of Gaussians
    t = mia.tpr_at_fpr(s, y, 0.01)
    assert t == pytest.approx(norm.cdf(d - norm.ppf(0.99)), abs=0.02)


def _pool(m=16, n=400, effect=0.0, seed=0):
    """Synthetic pool: phi ~ N(mu_i + effect*IN, 1)."""
    from bnpaper.shadow import keep_matrix

    rng = np.random.default_rng(seed)
    keep = keep_matrix(m, n, seed)
    mu = rng.normal(0, 3, n)
    s = mu + effect * keep + rng.normal(0, 1, (m, n))
    return s[..., None], keep


def test_attacks_on_random_scores_have_auc_near_half():
    s, keep = _pool(effect=0.0)
    out = mia.lira(s, keep)
    for name, sc in out.items():
        aucs = [mia.auc(a, k) for a, k in zip(sc, keep)]
        assert abs(np.mean(aucs) - 0.5) < 0.03, name
    logp = -np.abs(s)
    assert abs(np.mean([mia.auc(a, k) for a, k in zip(mia.loss_attack(logp), keep)]) - 0.5) < 0.03
    lz = -np.abs(np.random.default_rng(5).normal(size=(16, 300, 1)))
    r = mia.rmia(logp, lz, keep)
    assert abs(np.mean([mia.auc(a, k) for a, k in zip(r, keep)]) - 0.5) < 0.03


def test_lira_recovers_a_known_membership_shift():
    d = 1.0
    s, keep = _pool(m=64, effect=d, n=2000)
    out = mia.lira(s, keep, targets=range(4))
    # IN/OUT phi of one example differ by d with unit noise: the Neyman-Pearson optimum is
    # Phi(d / sqrt 2); 63 shadows estimate the two means well enough to come close
    ideal = norm.cdf(d / np.sqrt(2))
    online = np.mean([mia.auc(a, k) for a, k in zip(out["online_fixed"], keep[:4])])
    assert online == pytest.approx(ideal, abs=0.025)
    assert np.mean([mia.auc(a, k) for a, k in zip(out["offline"], keep[:4])]) > 0.68
    # a global threshold cannot see per-example shifts hidden by per-example means
    glob = mia.auc(s[0, :, 0], keep[0])
    assert glob < online - 0.1


def test_sigma_floor_keeps_scores_finite_with_identical_shadows():
    keep = np.array([[1, 0, 1, 0], [0, 1, 0, 1]] * 2, bool)
    s = np.ones((4, 4, 1))
    out = mia.lira(s, keep, sigma_floor=1e-3)
    assert all(np.isfinite(v).all() for v in out.values())


def test_low_fpr_warning_when_too_few_nonmembers():
    rng = np.random.default_rng(0)
    s, y = rng.normal(size=200), np.r_[np.ones(100, bool), np.zeros(100, bool)]
    with pytest.warns(mia.LowFPRWarning, match="0.001"):
        res = mia.attack_metrics(s, y, n_boot=20)
    assert res["resolvable"] == {0.01: True, 0.001: False}
    e = res["estimates"]["auc"]
    assert e.lo <= e.value <= e.hi and 0.3 < e.value < 0.7


def test_balanced_accuracy_is_one_for_separable_scores():
    y = np.r_[np.ones(50, bool), np.zeros(50, bool)]
    s = np.r_[np.arange(50) + 100.0, np.arange(50)]
    assert mia.balanced_accuracy(s, y) == 1.0 and mia.auc(s, y) == 1.0


def test_paired_delta_auc_detects_a_real_difference_and_not_a_fake_one():
    rng = np.random.default_rng(3)
    t, n = 8, 1000
    y = rng.random((t, n)) < 0.5
    a = y * 1.0 + rng.normal(size=(t, n))  # AUC ~ Phi(1/sqrt2) = 0.76
    b = y * 0.5 + rng.normal(size=(t, n))  # AUC ~ Phi(0.5/sqrt2) = 0.64
    est = mia.paired_delta_auc([(a, b, y)], n_boot=200)
    assert est.lo > 0.05 and est.value == pytest.approx(
        norm.cdf(1 / 2**0.5) - norm.cdf(0.5 / 2**0.5), abs=0.03
    )
    same = mia.paired_delta_auc([(a, a + 1e-9 * rng.normal(size=a.shape), y)], n_boot=200)
    assert same.lo <= 0 <= same.hi
    sub = mia.paired_delta_auc([(a, b, y)], [np.arange(n) < 100], n_boot=100)
    assert sub.hi - sub.lo > est.hi - est.lo  # fewer examples, wider interval


def test_memorization_score_of_a_memorized_example():
    keep = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], bool)
    correct = np.array([[1, 1], [0, 1], [1, 1], [0, 1]], bool)  # example 0 correct only when IN
    assert mia.memorization_score(correct, keep).tolist() == [1.0, 0.0]


def test_lira_with_a_single_in_shadow_falls_back_to_the_pooled_sigma():
    """Four models: each target's three shadows hold an example IN once or twice. A variance from
    one shadow is 0 (floored to 1e-3), which used to invert the attack (AUC near 0)."""
    rng = np.random.default_rng(0)
    keep = np.array(
        [[1, 1, 0, 0] * 25, [1, 0, 1, 0] * 25, [0, 1, 0, 1] * 25, [0, 0, 1, 1] * 25], bool
    )
    phi = np.where(keep, 2.0, 0.0) + rng.normal(0, 1.0, keep.shape)
    s = mia.lira(phi, keep)
    aucs = [mia.auc(s["online"][t], keep[t]) for t in range(4)]
    assert min(aucs) > 0.75


def test_tpr_at_fpr_counts_tied_thresholds():
    """s >= 2 flags 2 of 4 members and 2 of 4 non-members: TPR 0.5 at FPR 0.5 (was 0.25)."""
    s, y = np.array([3, 3, 2, 2, 1, 1, 0, 0], float), np.array([1, 0] * 4, bool)
    assert mia.tpr_at_fpr(s, y, 0.5) == 0.5 and mia.tpr_at_fpr(s, y, 0.25) == 0.25


def test_rmia_offline_corrects_the_population_as_the_pool():
    """Offline RMIA equals a naive loop of its definition: p(.) = ((1+a) p_out(.) + (1-a)) / 2 for
    the pool example x AND for the population samples z (OUT for every model); the old code
    left z uncorrected."""
    rng = np.random.default_rng(1)
    m, n, z, a = 6, 4, 5, 0.5
    keep = np.zeros((m, n), bool)
    keep[:3, :2] = True
    px, pz = rng.uniform(0.05, 0.95, (m, n)), rng.uniform(0.05, 0.95, (m, z))
    got = mia.rmia(np.log(px), np.log(pz), keep, offline_a=a)
    for t in range(m):
        sh = [j for j in range(m) if j != t]
        for i in range(n):
            p_out = np.mean([px[j, i] for j in sh if not keep[j, i]])
            ratio_x = px[t, i] / (((1 + a) * p_out + (1 - a)) / 2)
            ratio_z = [pz[t, k] / (((1 + a) * np.mean(pz[sh, k]) + (1 - a)) / 2) for k in range(z)]
            assert got[t, i] == pytest.approx(np.mean([ratio_x / rz > 1 for rz in ratio_z]))


def test_rmia_treats_2d_inputs_as_one_query_not_an_average_over_examples():
    rng = np.random.default_rng(2)
    keep = mia_keep = np.array([[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]], bool)
    lx, lz = np.log(rng.uniform(0.1, 0.9, (4, 4))), np.log(rng.uniform(0.1, 0.9, (4, 7)))
    two_d = mia.rmia(lx, lz, mia_keep)
    assert two_d.shape == (4, 4)
    np.testing.assert_allclose(two_d, mia.rmia(lx[..., None], lz[..., None], keep))


def test_paired_delta_auc_ignores_bootstrap_rows_without_members():
    """a separates members perfectly, b = -a inverts them: every row with members has delta 1.
    Resampled rows of a 3-example subgroup often hold no member: they carry no AUC (NaN), not a
    delta of 0 that would pull the interval below 1."""
    rng = np.random.default_rng(3)
    keep = np.array([[1, 0, 0, 1, 0, 1], [0, 1, 1, 0, 1, 0]] * 2, bool)
    a = np.where(keep, 5.0, -5.0) + rng.normal(0, 0.1, keep.shape)
    assert np.isnan(mia._auc_rows(a[:, :1], keep[:, :1])).all()
    e = mia.paired_delta_auc([(a, -a, keep)], [np.array([1, 1, 1, 0, 0, 0], bool)], n_boot=200)
    assert (e.value, e.lo, e.hi) == (1.0, 1.0, 1.0)


def test_memorization_score_is_nan_without_warning_for_an_example_in_for_every_model():

    correct = np.array([[1, 1, 0], [1, 0, 0]], bool)
    keep = np.array([[1, 1, 0], [1, 0, 1]], bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mem = mia.memorization_score(correct, keep)
    assert np.isnan(mem[0]) and mem[1] == 1.0 and mem[2] == 0.0


def test_paired_delta_auc_over_pools_includes_the_spread_between_pools():
    """Two pools whose effects differ (0.12 vs 0.0 AUC): resampling pools widens the interval to
    cover the disagreement, which resampling only targets and examples within each cannot."""
    rng = np.random.default_rng(5)
    t, n = 8, 2000
    pools = []
    for gap in (1.0, 0.0):
        y = rng.random((t, n)) < 0.5
        pools.append(
            (y * 1.0 + rng.normal(size=(t, n)), y * (1.0 - 0.5 * gap) + rng.normal(size=(t, n)), y)
        )
    est = mia.paired_delta_auc(pools, n_boot=300)
    one = [mia.paired_delta_auc([p], n_boot=300) for p in pools]
    assert est.value == pytest.approx(np.mean([e.value for e in one]), abs=1e-12)
    assert est.lo <= one[1].value + 0.01 and est.hi >= one[0].value - 0.01
    assert est.hi - est.lo > 2 * max(e.hi - e.lo for e in one)


def test_paired_delta_auc_over_few_pools_is_at_least_as_wide_as_the_t_interval_over_them():
    """Three pools with clearly different effects: the percentile bootstrap over three pools
    returns about their range; the interval must contain mean +- t_2 * s / sqrt(3) of the
    pools' own estimates, and its p-value uses that standard error with 2 degrees of freedom."""
    from bnpaper import stats

    rng = np.random.default_rng(7)
    t, n = 8, 1500
    pools = []
    for gap in (1.0, 0.5, 0.0):
        y = rng.random((t, n)) < 0.5
        pools.append(
            (y * 1.0 + rng.normal(size=(t, n)), y * (1.0 - 0.5 * gap) + rng.normal(size=(t, n)), y)
        )
    est = mia.paired_delta_auc(pools, n_boot=300)
    per = [mia.paired_delta_auc([p], n_boot=50).value for p in pools]
    want = stats.t_mean(per)
    assert est.value == pytest.approx(want.value, abs=1e-12)
    assert est.lo <= want.lo + 1e-12 and est.hi >= want.hi - 1e-12
    assert est.df == 2 and est.se == pytest.approx(want.se)
    one = mia.paired_delta_auc(pools[:1], n_boot=300)  # one pool: targets and examples only
    assert one.df is None and one.hi - one.lo < want.hi - want.lo
