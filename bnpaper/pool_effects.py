"""Effects over pools, the replicate unit of notebook 03: one estimate per pool (its own data
draw, outliers and keep matrix), the targets and examples nested inside it, then a Student-t
interval over the pools. Fewer than 2 pools give no interval (NaN ends, n = the pools): one data
draw says nothing about the spread between draws."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import mia
from .stats import Estimate, t_mean

METRICS = ("auc", "tpr@0.01", "tpr@0.001")  # the effect per attack: AUC and TPR at low FPR
# TPR at FPR f needs at least 1/f non-members per target for one false positive to be allowed;
# the claim rows ask 1,000 per target (each pool's targets share them) before judging TPR at 0.1%
MIN_NONMEMBERS = {"auc": 1, "tpr@0.01": 100, "tpr@0.001": 1000}


def over_pools(values: Sequence[float], level: float = 0.95) -> Estimate:
    """The mean of one value per pool with its Student-t interval over the pools (df = pools -
    1); non-finite values (a pool without the group) are left out. Fewer than 2 pools: the
    value with a NaN interval (n/a) and n = the pools, so a verdict on it is inconclusive."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if v.size < 2:
        value = float(v.mean()) if v.size else float("nan")
        return Estimate(value, float("nan"), float("nan"), int(v.size), level)
    return t_mean(v, level)


def scale(e: Estimate, factor: float = 100.0) -> Estimate:
    """`e` in points (a 0-1 difference times 100)."""
    se = None if e.se is None else factor * e.se
    return Estimate(factor * e.value, factor * e.lo, factor * e.hi, e.n, e.level, se, e.df)


def _metric(scores: np.ndarray, member: np.ndarray, metric: str) -> float:
    """One target's `metric` ("auc" or "tpr@<fpr>") of scores against membership."""
    if metric == "auc":
        return mia.auc(scores, member)
    if metric.startswith("tpr@"):
        return mia.tpr_at_fpr(scores, member, float(metric[4:]))
    raise ValueError(f"metric={metric!r} is not allowed; allowed: auc, tpr@<fpr>")


def pool_delta(a: np.ndarray, b: np.ndarray, member: np.ndarray, metric: str = "auc") -> float:
    """One pool's paired effect: the mean over its targets (rows of a, b, member: (T, n)) of
    metric(a) - metric(b), the same target and examples on both sides."""
    d = [_metric(x, y, metric) - _metric(z, y, metric) for x, z, y in zip(a, b, member)]
    return float(np.nanmean(d)) if np.isfinite(d).any() else float("nan")


def delta_over_pools(
    runs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    masks: Sequence[np.ndarray] | None = None,
    metric: str = "auc",
    level: float = 0.95,
) -> Estimate:
    """The paired effect of one attack, a minus b, in points: runs holds one (scores_a (T, N),
    scores_b (T, N), member (T, N)) per pool, masks an (N,) example group per pool (None: all);
    each pool's `pool_delta`, then `over_pools`."""
    masks = masks or [None] * len(runs)
    per_pool = []
    for (a, b, y), mk in zip(runs, masks):
        mk = np.ones(np.shape(a)[1], bool) if mk is None else np.asarray(mk, bool)
        y = np.asarray(y, bool)
        per_pool.append(pool_delta(np.asarray(a)[:, mk], np.asarray(b)[:, mk], y[:, mk], metric))
    return scale(over_pools(per_pool, level))


def mean_over_pools(per_pool_targets: Sequence[np.ndarray], level: float = 0.95) -> Estimate:
    """A metric's mean over each pool's targets (one array per pool), then `over_pools`."""
    means = [np.nanmean(v) if np.isfinite(v).any() else np.nan for v in per_pool_targets]
    return over_pools(means, level)
