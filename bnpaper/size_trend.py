"""Notebook 03's size sweep: the BN - no-BN delta-AUC against the pool size N, and its trend per
doubling of N fitted by weighted least squares, with its value at the paper's scale."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as _sps

from . import mia, units
from .declarations import DATASET_SIZES
from .plots import label
from .shadow import ShadowPool
from .stats import Estimate

SIZE_MIX = 0.0  # the sweep's pools hold clean data: the paper's "overall" and clean-data claim
PAPER_SIZE = DATASET_SIZES  # where the paper sits: LiRA's usual pool is the whole training set
# (the paper's summary gives no size; presumably the same)
NORMS = ("bn", "none")


# ---------------------------------------------------------------- the trend
@dataclass(frozen=True)
class Trend:
    """A straight line y = a + b log2 N fitted by weighted least squares: the slope `slope`
    (per doubling of N) with its interval, the covariance `cov` of (a, b), `df` (Student-t
    degrees of freedom when the scatter set the scale, else None: normal) and `chi2_red`."""

    intercept: float
    slope: Estimate
    cov: np.ndarray
    df: int | None
    chi2_red: float

    def predict(self, n: float, level: float = 0.95) -> Estimate:
        """The line at pool size `n` with its interval (beyond the sizes fitted: extrapolation)."""
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
    conservative)."""
    if len(sizes) != len(estimates) or len(sizes) < 3:
        raise ValueError(
            f"fit_trend needs at least 3 sizes with one estimate each, got "
            f"{len(sizes)} sizes and {len(estimates)} estimates"
        )
    x = np.column_stack([np.ones(len(sizes)), np.log2(np.asarray(sizes, float))])
    y = np.array([e.value for e in estimates])
    w = 1 / np.array([_se(e) for e in estimates]) ** 2
    cov = np.linalg.inv(x.T @ (w[:, None] * x))
    beta = cov @ x.T @ (w * y)
    dof = len(sizes) - 2
    chi2_red = float((w * (y - x @ beta) ** 2).sum() / dof)
    df = dof if chi2_red > 1 else None
    cov = cov * max(1.0, chi2_red)
    se, q = float(np.sqrt(cov[1, 1])), _quantile(level, df)
    b = float(beta[1])
    return Trend(
        float(beta[0]),
        Estimate(b, b - q * se, b + q * se, len(sizes), level, se=se, df=df),
        cov,
        df,
        chi2_red,
    )


# ---------------------------------------------------------------- the sweep
def size_pools(
    ds, p: Mapping, pools: Mapping[tuple, ShadowPool], recipe: units.LiraRecipe | None = None
) -> dict:
    """The sweep's shadow pools {(N, seed, norm): ShadowPool} for N in p['size_sweep'], every
    seed of p['seeds'], BN and no-BN, on clean data (`SIZE_MIX`), built with `units.lira_pool`
    (03's recipe at each N: the same epochs, so a smaller pool also trains fewer steps); at
    N = n_train they are the main clean pools of `pools` {(mix, seed, norm)} (the same units).
    `recipe`: the main pools' (default: the paper's protocol, `LiraRecipe.from_params(p)`); under
    the fair protocol every N trains to the same fit level with the same learning rates."""
    recipe = recipe or units.LiraRecipe.from_params(p)
    return {
        (n, s, norm): pools[SIZE_MIX, s, norm]
        if n == p["n_train"] and (SIZE_MIX, s, norm) in pools
        else units.lira_pool(ds, dataclasses.replace(recipe, n_train=n), SIZE_MIX, s, norm)
        for n in p["size_sweep"]
        for s in p["seeds"]
        for norm in NORMS
    }


@dataclass(frozen=True)
class SizeSweep:
    """The delta-AUC against the pool size N: per N the paired BN - no-BN online-LiRA delta-AUC
    in points (`delta`), and per N and norm the mean per-target AUC, clean test accuracy and
    train-test gap (`auc`, `acc`, `gap`: means over models and seeds); the `trend` on log2 N and
    its value `predicted` at the paper's scale `n_paper` (the whole `dataset` training set);
    `reused`: the sizes whose pools are the main clean pools."""

    sizes: tuple[int, ...]
    seeds: tuple[int, ...]
    dataset: str
    delta: Mapping[int, Estimate]
    auc: Mapping[int, Mapping[str, float]]
    acc: Mapping[int, Mapping[str, float]]
    gap: Mapping[int, Mapping[str, float]]
    trend: Trend
    n_paper: int
    predicted: Estimate
    reused: tuple[int, ...]

    @property
    def extrapolated(self) -> bool:
        """Whether the paper's scale lies beyond the largest pool measured."""
        return self.n_paper > self.sizes[-1]

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
            "predicted_at": self.n_paper,
            "predicted": self.predicted.as_dict(),
            "extrapolated": self.extrapolated,
        }

    def results(self) -> dict:
        """The JSON-able results entry."""
        t = self.trend
        return {
            "mix": SIZE_MIX,
            "sizes": list(self.sizes),
            "seeds": list(self.seeds),
            "reused_main_pools": list(self.reused),
            **{k: {str(n): v for n, v in getattr(self, k).items()} for k in ("auc", "acc", "gap")},
            "delta_auc_points": {str(n): e.as_dict() for n, e in self.delta.items()},
            "trend": {
                "slope_points_per_doubling": t.slope.as_dict(),
                "intercept": t.intercept,
                "chi2_red": t.chi2_red,
                "df": t.df,
            },
            "predicted": {
                "n": self.n_paper,
                "extrapolated": self.extrapolated,
                **self.predicted.as_dict(),
            },
        }


def _per_norm(pools: Mapping, online: Mapping, sizes, seeds) -> dict[str, dict]:
    """Per N and norm the mean per-target AUC, clean test accuracy and train-test gap (means over
    the models of every seed)."""
    means = {
        "auc": lambda q, o: np.mean([mia.auc(r, y) for r, y in zip(o, q.keep)]),
        "acc": lambda q, o: q.test_acc.mean(),
        "gap": lambda q, o: q.gap.mean(),
    }
    return {
        k: {
            n: {
                norm: float(np.mean([f(pools[n, s, norm], online[n, s, norm]) for s in seeds]))
                for norm in NORMS
            }
            for n in sizes
        }
        for k, f in means.items()
    }


def sweep(pools: Mapping, p: Mapping, sigma_floor: float, n_boot: int) -> SizeSweep:
    """The delta-AUC against the pool size, pools {(N, seed, norm)} from `size_pools`: per N the
    paired BN - no-BN online-LiRA delta-AUC (every seed's pool in one bootstrap), utility beside
    it, the trend fitted on log2 N (`fit_trend`) and its value at `PAPER_SIZE` (extrapolated
    when beyond the largest N)."""
    sizes, seeds = list(p["size_sweep"]), list(p["seeds"])
    online = {
        k: mia.lira(q.phi, q.keep, sigma_floor=sigma_floor)["online"] for k, q in pools.items()
    }
    delta = {
        n: mia.points(
            mia.paired_delta_auc(
                [(online[n, s, "bn"], online[n, s, "none"], pools[n, s, "bn"].keep) for s in seeds],
                n_boot=n_boot,
                seed=0,
            )
        )
        for n in sizes
    }
    trend = fit_trend(sizes, [delta[n] for n in sizes])
    n_paper = PAPER_SIZE[p["dataset"]]
    return SizeSweep(
        sizes=tuple(sizes),
        seeds=tuple(seeds),
        dataset=p["dataset"],
        delta=delta,
        **_per_norm(pools, online, sizes, seeds),
        trend=trend,
        n_paper=n_paper,
        predicted=trend.predict(n_paper),
        reused=tuple(n for n in sizes if n == p["n_train"]),
    )
