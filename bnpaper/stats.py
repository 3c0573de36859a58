"""Small statistics shared by the notebooks: intervals over seeds and units, curve summaries.

Intervals over seeds (Student t), bootstrap intervals over many units (targets, examples), and
curve summaries (epochs to a level, the mean over training).

Why two intervals: a notebook compares BN with no-BN over a handful of seeds. A percentile
bootstrap of 3 values is the min-max range of the seeds (each extreme is resampled three
times with probability 1/27 > 2.5%), so it overstates certainty; over seeds we use the t
interval, mean +- t_{n-1} s / sqrt(n). The bootstrap serves where there are many units."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as _sps


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a (lo, hi) confidence interval at `level`, from `n` values; `se`
    (standard error) and `df` (Student-t degrees of freedom, None: normal) when known."""

    value: float
    lo: float
    hi: float
    n: int
    level: float = 0.95
    se: float | None = None
    df: float | None = None

    def p_above(self, null: float) -> float:
        """One-sided p-value of H0: effect <= `null` (t with `df`, else normal). Without a
        recorded `se`, the interval's half-width gives it (normal approximation); NaN when
        there is no interval."""
        se, df = self.se, self.df
        if se is None:
            if not (np.isfinite(self.lo) and np.isfinite(self.hi)):
                return float("nan")
            se, df = (self.hi - self.lo) / (2 * _sps.norm.ppf(0.5 + self.level / 2)), None
        if not np.isfinite(se):
            return float("nan")
        if se == 0:
            return 0.0 if self.value > null else 1.0
        z = (self.value - null) / se
        return float(_sps.t.sf(z, df) if df else _sps.norm.sf(z))

    def p_below(self, null: float) -> float:
        """One-sided p-value of H0: effect >= `null`."""
        flipped = Estimate(-self.value, -self.hi, -self.lo, self.n, self.level, self.se, self.df)
        return flipped.p_above(-null)

    def fmt(self, digits: int = 3, scale: float = 1.0) -> str:
        v, lo, hi = (round(x * scale, digits) for x in (self.value, self.lo, self.hi))
        return f"{v:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"

    def as_dict(self) -> dict:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n, "level": self.level}


def bootstrap_mean(
    values: Sequence[float], n_boot: int = 10_000, level: float = 0.95, seed: int = 0
) -> Estimate:
    """Mean of `values` with a percentile-bootstrap interval (seeded, deterministic)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"bootstrap_mean needs finite values, got {v.tolist()}")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(1)
    a = (1 - level) / 2
    return Estimate(
        float(v.mean()),
        float(np.quantile(means, a)),
        float(np.quantile(means, 1 - a)),
        int(v.size),
        level,
        se=float(means.std(ddof=1)) if n_boot > 1 else None,
    )


def t_mean(values: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean of `values` (one per seed) with the Student-t interval mean +- t_{n-1} s/sqrt(n).
    A single value has no spread to estimate: its interval is (-inf, inf)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"t_mean needs finite values, got {v.tolist()}")
    m = float(v.mean())
    if v.size < 2:
        return Estimate(m, -np.inf, np.inf, 1, level)
    se = float(v.std(ddof=1) / np.sqrt(v.size))
    half = float(_sps.t.ppf(0.5 + level / 2, v.size - 1) * se)
    return Estimate(m, m - half, m + half, int(v.size), level, se=se, df=v.size - 1)


def t_paired_diff(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Estimate:
    """Mean of a - b over paired runs (same seed) with the Student-t interval."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"paired values need equal shapes, got {a.shape} and {b.shape}")
    return t_mean(a - b, level)


def epochs_to(curve: Sequence[float], epochs: Sequence[int], threshold: float) -> float:
    """First epoch at which `curve` reaches `threshold` (inf if it never does)."""
    for e, v in zip(epochs, curve):
        if v is not None and v >= threshold:
            return float(e)
    return float("inf")


def area_under_curve(curve: Sequence[float], epochs: Sequence[int]) -> float:
    """Mean value of `curve` over the epoch range (trapezoid rule): speed and height in one."""
    e, c = np.asarray(epochs, float), np.asarray(curve, float)
    if e[-1] == e[0]:
        return float(c[-1])
    return float(np.trapezoid(c, e) / (e[-1] - e[0]))
