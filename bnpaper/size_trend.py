"""Notebook 03's size sweep: the BN - no-BN delta-AUC against the pool size N (each size's own
pools, its interval over them, its own matched-fit check), and its trend per doubling of N fitted
by weighted least squares within the sizes measured: nothing is predicted beyond them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as _sps

from . import claims, mia, pool_units
from .lira_fit import at_fit, censored_note, fit_of
from .plots import label
from .pool_effects import METRICS, delta_over_pools
from .shadow import ShadowPool
from .stats import Estimate

SIZE_MIX = 0.0  # the sweep's pools hold clean data: the paper's "overall" and clean-data claim
NORMS = ("bn", "none")


class OutsideMeasured(ValueError):
    """A pool size outside the sizes the sweep measured: the sweep reports nothing there."""


# ---------------------------------------------------------------- the trend
@dataclass(frozen=True)
class Trend:
    """A straight line y = a + b log2 N fitted by weighted least squares over the pool sizes
    `sizes`: the slope `slope` (per doubling of N) with its interval, the covariance `cov` of
    (a, b), `df` (Student-t degrees of freedom when the scatter set the scale, else None: normal)
    and `chi2_red`."""

    intercept: float
    slope: Estimate
    cov: np.ndarray
    df: int | None
    chi2_red: float
    sizes: tuple[int, ...] = ()

    def predict(self, n: float, level: float = 0.95) -> Estimate:
        """The line at pool size `n` with its interval, for `n` within the sizes fitted only:
        beyond them (an extrapolation) it raises `OutsideMeasured`."""
        if not self.sizes or not min(self.sizes) <= n <= max(self.sizes):
            raise OutsideMeasured(
                f"pool size n={n!r} is not allowed: the sweep measured N in "
                f"[{min(self.sizes, default=0)}, {max(self.sizes, default=0)}] and reports "
                "nothing outside it (no extrapolation)"
            )
        x = np.array([1.0, np.log2(n)])
        value, se = float(x @ [self.intercept, self.slope.value]), float(np.sqrt(x @ self.cov @ x))
        q = _quantile(level, self.df)
        return Estimate(
            value, value - q * se, value + q * se, self.slope.n, level, se=se, df=self.df
        )


def _quantile(level: float, df: int | None) -> float:
    return float(_sps.t.ppf(0.5 + level / 2, df) if df else _sps.norm.ppf(0.5 + level / 2))


def _se(e: Estimate) -> float:
    se = e.se if e.se is not None else (e.hi - e.lo) / (2 * _quantile(e.level, None))
    return max(float(se), 1e-6)


def fit_trend(sizes: Sequence[int], estimates: Sequence[Estimate], level: float = 0.95) -> Trend:
    """Weighted least squares of the estimates' values on log2 N, weights 1/se^2 (their bootstrap
    standard errors): the slope per doubling of N with a `level` interval. The covariance is the
    weighted one, scaled by the reduced chi-square chi2/(k - 2) when the points scatter more than
    their standard errors allow (never shrunk), and the interval is then Student t with k - 2
    degrees of freedom, else normal. The sizes' estimates are taken as independent (separate
    pools; nested data correlates them positively, which widens a slope's interval:
    conservative). Where the sizes' standard errors come from a few pools each (their `df`), the
    quantile is Student t with the smallest of those df (and k - 2 when the scatter set the
    scale). When a size's estimate has no interval (one pool), neither has the slope (NaN ends:
    the line unweighted)."""
    if len(sizes) != len(estimates) or len(sizes) < 3:
        raise ValueError(
            f"fit_trend needs at least 3 sizes with one estimate each, got "
            f"{len(sizes)} sizes and {len(estimates)} estimates"
        )
    x = np.column_stack([np.ones(len(sizes)), np.log2(np.asarray(sizes, float))])
    y = np.array([e.value for e in estimates])
    se_k = np.array([_se(e) if np.isfinite([e.lo, e.hi]).all() else np.nan for e in estimates])
    known = bool(np.isfinite(se_k).all())
    w = 1 / se_k**2 if known else np.ones(len(sizes))
    cov = np.linalg.inv(x.T @ (w[:, None] * x))
    beta = cov @ x.T @ (w * y)
    dof = len(sizes) - 2
    chi2_red = float((w * (y - x @ beta) ** 2).sum() / dof)
    df = dof if chi2_red > 1 else None
    # standard errors estimated from a few pools each (Student t, df = pools - 1): the slope's
    # quantile is Student t with the fewest degrees of freedom of any size (conservative)
    few = [int(e.df) for e in estimates if e.df]
    if few:
        df = min([df or min(few), *few])
    cov = cov * max(1.0, chi2_red)
    se, q = float(np.sqrt(cov[1, 1])), _quantile(level, df)
    b = float(beta[1])
    if not known:
        se, q, cov = float("nan"), float("nan"), cov * np.nan
    return Trend(
        float(beta[0]),
        Estimate(b, b - q * se, b + q * se, len(sizes), level, se=se, df=df),
        cov,
        df,
        chi2_red,
        tuple(int(n) for n in sizes),
    )


# ---------------------------------------------------------------- the sweep
def size_pools(
    ds, p: Mapping, pools: Mapping[tuple, ShadowPool], recipe: pool_units.LiraRecipe | None = None
) -> dict:
    """The sweep's shadow pools {(N, seed, norm): ShadowPool} for N in p['size_sweep'], every
    seed of p['seeds'], BN and no-BN, on clean data (`SIZE_MIX`), built with `pool_units.lira_pool`
    (03's recipe at each N: the same epochs, so a smaller pool also trains fewer steps); at
    N = n_train they are the main clean pools of `pools` {(mix, seed, norm)} (the same units).
    `recipe`: the main pools' (default: the paper's protocol, `LiraRecipe.from_params(p)`); under
    the fair protocol every N trains to the same fit level with the same learning rates."""
    recipe = recipe or pool_units.LiraRecipe.from_params(p)
    return {
        (n, s, norm): pools[SIZE_MIX, s, norm]
        if n == p["n_train"] and (SIZE_MIX, s, norm) in pools
        else pool_units.lira_pool(ds, recipe.at_end_only(n_train=n), SIZE_MIX, s, norm)
        for n in p["size_sweep"]
        for s in p["seeds"]
        for norm in NORMS
    }


@dataclass(frozen=True)
class SizeSweep:
    """The delta-AUC against the pool size N: per N the paired BN - no-BN online-LiRA delta-AUC
    in points (`delta`: a t interval over that size's pools), and per N and norm the mean
    per-target AUC, clean test accuracy and train-test gap (`auc`, `acc`, `gap`: means over
    models and seeds) and how the models fit (`fit`: `lira_fit.fit_of`, for each size's own
    matched-fit check); the `trend` on log2 N within the sizes measured; `reused`: the sizes whose
    pools are the main clean pools; `per_attack`: per N, attack (`mia.ATTACKS`) and metric
    (`pool_effects.METRICS`: AUC, TPR at 1% and 0.1% FPR) the same paired BN - no-BN effect in
    points over that size's pools (its online AUC is `delta`). Nothing is reported beyond the
    largest size measured."""

    sizes: tuple[int, ...]
    seeds: tuple[int, ...]
    dataset: str
    delta: Mapping[int, Estimate]
    auc: Mapping[int, Mapping[str, float]]
    acc: Mapping[int, Mapping[str, float]]
    gap: Mapping[int, Mapping[str, float]]
    fit: Mapping[int, Mapping[str, dict]]
    trend: Trend
    reused: tuple[int, ...]
    per_attack: Mapping[int, Mapping[str, Mapping[str, Estimate]]]

    @property
    def largest(self) -> int:
        """The largest pool size measured: the headline's."""
        return self.sizes[-1]

    def at(self, n: int) -> Estimate:
        """The measured delta-AUC at pool size `n`; a size not measured raises `OutsideMeasured`
        (the sweep neither extrapolates nor interpolates)."""
        if n not in self.delta:
            raise OutsideMeasured(
                f"pool size n={n!r} is not allowed: the sweep measured N = {list(self.sizes)} "
                "and reports nothing else"
            )
        return self.delta[n]

    @property
    def fall(self) -> Estimate:
        """Minus the slope: AUC points lost per doubling of N (the claim "falls as N grows")."""
        s = self.trend.slope
        return Estimate(-s.value, -s.hi, -s.lo, s.n, s.level, se=s.se, df=s.df)

    def row_fields(self) -> dict:
        """The fields of the size trend's verdict row (utility at the smallest and largest N)."""
        ends = (self.sizes[0], self.sizes[-1])
        utility = (("clean_test_acc", self.acc), ("train_test_gap", self.gap))
        return {
            "unit": "AUC points lost per doubling of N",
            "sizes": "N = " + ", ".join(map(str, self.sizes)),
            "mix": f"{SIZE_MIX:.0%}",
            "delta_auc_points": {str(n): e.value for n, e in self.delta.items()},
            **{
                k: {f"{label(norm)}, N={n}": v[n][norm] for n in ends for norm in NORMS}
                for k, v in utility
            },
            "largest_measured": self.largest,
        }

    def rows(self, **common) -> list[claims.Verdict]:
        """The sweep's verdict rows: per size `03.size.delta` (BN minus no-BN on that size's clean
        pools, its interval over them, judged at that size's own matched fit), then the trend
        `03.size.trend` (minus the slope, within the sizes measured)."""
        rows = [
            censored_note(
                claims.judge(
                    "03.size.delta",
                    self.delta[n],
                    acc_gap=self.acc[n]["bn"] - self.acc[n]["none"],
                    unit="AUC points, BN minus no-BN (online LiRA)",
                    size=f"{n:,}",
                    n_pools=len(self.seeds),
                    clean_test_acc=dict(self.acc[n]),
                    train_test_gap=dict(self.gap[n]),
                    **at_fit(self.acc[n], self.fit[n]),
                    **common,
                )
            )
            for n in self.sizes
        ]
        return rows + [claims.judge("03.size.trend", self.fall, **common, **self.row_fields())]

    def results(self) -> dict:
        """The JSON-able results entry."""
        t = self.trend
        return {
            "mix": SIZE_MIX,
            "sizes": list(self.sizes),
            "seeds": list(self.seeds),
            "largest_measured": self.largest,
            "reused_main_pools": list(self.reused),
            **{k: {str(n): v for n, v in getattr(self, k).items()} for k in ("auc", "acc", "gap")},
            "fit": {str(n): dict(v) for n, v in self.fit.items()},
            "delta_auc_points": {str(n): e.as_dict() for n, e in self.delta.items()},
            "per_attack": {
                str(n): {a: {m: e.as_dict() for m, e in by.items()} for a, by in at.items()}
                for n, at in self.per_attack.items()
            },
            "trend": {
                "slope_points_per_doubling": t.slope.as_dict(),
                "intercept": t.intercept,
                "chi2_red": t.chi2_red,
                "df": t.df,
                "fitted_sizes": list(t.sizes),
            },
        }


def _per_norm(pools: Mapping, online: Mapping, sizes, seeds) -> dict[str, dict]:
    """Per N and norm the mean per-target AUC, clean test accuracy and train-test gap (means over
    the models of every seed), and how the models fit (`lira_fit.fit_of`)."""
    out = {k: {n: {} for n in sizes} for k in ("auc", "acc", "gap", "fit")}
    for n in sizes:
        for norm in NORMS:
            qs = [pools[n, s, norm] for s in seeds]
            aucs = [
                np.mean([mia.auc(r, y) for r, y in zip(online[n, s, norm], q.keep)])
                for s, q in zip(seeds, qs)
            ]
            out["auc"][n][norm] = float(np.mean(aucs))
            out["acc"][n][norm] = float(np.mean([q.test_acc.mean() for q in qs]))
            out["gap"][n][norm] = float(np.mean([q.gap.mean() for q in qs]))
            out["fit"][n][norm] = fit_of(qs)
    return out


def attack_deltas(
    scores: Mapping, pools: Mapping, n: int, seeds: Sequence[int]
) -> dict[str, dict[str, Estimate]]:
    """At pool size `n`: per attack of `mia.ATTACKS` and metric of `METRICS` the paired BN - no-BN
    effect in points (`delta_over_pools`: per pool the mean over its targets, a t interval over
    the pools). `scores`: {(N, seed, norm): `mia.pool_scores`}."""
    return {
        a: {
            m: delta_over_pools(
                [
                    (scores[n, s, "bn"][a], scores[n, s, "none"][a], pools[n, s, "bn"].keep)
                    for s in seeds
                ],
                metric=m,
            )
            for m in METRICS
        }
        for a in mia.ATTACKS
    }


def sweep(pools: Mapping, p: Mapping, sigma_floor: float) -> SizeSweep:
    """The delta-AUC against the pool size, pools {(N, seed, norm)} from `size_pools`: per N the
    paired BN - no-BN online-LiRA delta-AUC (`delta_over_pools`: one estimate per pool, a t
    interval over the pools), every attack's effect beside it (`attack_deltas`), utility and fit,
    and the trend fitted on log2 N within the sizes measured (`fit_trend`)."""
    sizes, seeds = list(p["size_sweep"]), list(p["seeds"])
    scores = {k: mia.pool_scores(q, sigma_floor) for k, q in pools.items()}
    online = {k: s["online"] for k, s in scores.items()}
    per_attack = {n: attack_deltas(scores, pools, n, seeds) for n in sizes}
    delta = {n: per_attack[n]["online"]["auc"] for n in sizes}
    return SizeSweep(
        sizes=tuple(sizes),
        seeds=tuple(seeds),
        dataset=p["dataset"],
        delta=delta,
        **_per_norm(pools, online, sizes, seeds),
        trend=fit_trend(sizes, [delta[n] for n in sizes]),
        reused=tuple(n for n in sizes if n == p["n_train"]),
        per_attack=per_attack,
    )
