"""The toy's two studies: outliers' margin growth against (gamma/sigma)^2, and gamma's feedback."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Sequence

import numpy as np

from .stats import Estimate, bootstrap_mean, t_mean, t_paired_diff
from .toy import ToyConfig, one_thread, toy_test_accuracy, toy_train

PROBE_FIELDS = (
    "batch_size",
    "lr",
    "w_scale",
    "seed",
    "measured",
    "predicted",
    "predicted_full",
    "dm_bn",
    "dm_twin",
)  # one array each in `ProbeStudy.probes`
TINY_FIELDS = ("w_scale", "seed", "measured", "predicted", "predicted_full")  # `ProbeStudy.tiny`


def ratio_by_run(run_ids, dm_bn, dm_predicted) -> tuple[list, list[float]]:
    """The ratio estimator of measured / predicted margin growth, one value per run:
    sum(dm_bn) / sum(dm_predicted) over the run's probes (dm_predicted = (gamma/sigma)^2 times
    the twin's margin change). No probe is dropped: one whose margin fell (dm_bn <= 0) lowers
    its run's ratio instead of vanishing from a log. Returns (run ids in sorted order, ratios)."""
    ids = [tuple(r) if np.ndim(r) else r for r in run_ids]
    num, den = np.asarray(dm_bn, float), np.asarray(dm_predicted, float)
    if not (len(ids) == len(num) == len(den)):
        raise ValueError("run_ids, dm_bn and dm_predicted need one entry per probe")
    if np.any(den <= 0):
        raise ValueError("predicted margin changes must be positive (a decreasing loss)")
    keys = sorted(set(ids))
    out = []
    for k in keys:
        sel = np.array([i == k for i in ids])
        out.append(float(num[sel].sum() / den[sel].sum()))
    return keys, out


def geo_mean_by_run(run_ids, measured, predicted) -> tuple[list, np.ndarray]:
    """log of each run's geometric mean of measured / predicted over its probes (tiny-step
    probes: both positive). Returns (run ids in sorted order, the logs)."""
    ids = [tuple(r) if np.ndim(r) else r for r in run_ids]
    meas, pred = np.asarray(measured, float), np.asarray(predicted, float)
    if not (len(ids) == len(meas) == len(pred)):
        raise ValueError("run_ids, measured and predicted need one entry per probe")
    if np.any(meas <= 0) or np.any(pred <= 0):
        raise ValueError("tiny-step margin growths must be positive (first order: a square)")
    keys = sorted(set(ids))
    logs = np.log(meas / pred)
    return keys, np.array([logs[[i == k for i in ids]].mean() for k in keys])


def exp_t_mean(logs) -> Estimate:
    """The geometric mean of exp(logs) (one per run) with the Student-t interval of the logs."""
    e = t_mean(logs)
    return Estimate(math.exp(e.value), math.exp(e.lo), math.exp(e.hi), e.n, e.level)


@dataclass(frozen=True)
class ProbeStudy:
    """Margin-growth probes of mislabeled outliers over the grid batch size x lr x |w_0| x seed
    (all seeds only at the default batch size and lr), and the same probes with a tiny step.

    probes: one array per PROBE_FIELDS entry (one value per probe); tiny: the tiny-step probes'
    TINY_FIELDS (every run at the default setting, probed again with a tiny step on the same
    batches). The verdict statistic is `tiny_agreement`: per run (seed x |w_0|) the geometric
    mean of measured / (gamma/sigma)^2 over its tiny-step probes, then the geometric mean over
    runs with a t interval over runs (probes of a run are not independent); `tiny_exact` the
    same against the exact first order. `agreement` is the finite step's: per run the ratio
    estimator sum dm_BN / sum (gamma/sigma)^2 dm_no-BN, mean over runs, bootstrap over runs."""

    probes: dict[str, np.ndarray]
    tiny: dict[str, np.ndarray]
    default_batch_size: int
    default_lr: float
    n_runs_grid: int
    tiny_lr: float = 1e-6

    def _select(self, sel: np.ndarray) -> tuple[list, list[float]]:
        """`ratio_by_run` over the probes in `sel`, runs keyed by (|w_0|, seed)."""
        p = self.probes
        return ratio_by_run(
            np.column_stack([p["w_scale"][sel], p["seed"][sel]]),
            p["dm_bn"][sel],
            p["predicted"][sel] * p["dm_twin"][sel],
        )

    @cached_property
    def _runs(self) -> tuple[list, list[float]]:
        return self._select(self.default)

    @property
    def run_keys(self) -> list:
        """The runs (|w_0|, seed) at the default setting, sorted."""
        return self._runs[0]

    @property
    def run_ratios(self) -> list[float]:
        """Each run's ratio estimator at the default setting (in `run_keys` order)."""
        return self._runs[1]

    @cached_property
    def agreement(self) -> Estimate:
        """Mean of the runs' ratio estimators, bootstrap over runs (not probes)."""
        return bootstrap_mean(self.run_ratios, seed=0)

    @cached_property
    def geo_mean_rising(self) -> float:
        """exp(mean log |measured / predicted|) over the rising probes at the default setting."""
        return float(np.exp(np.mean(self.log_error[self.default & self.rising])))

    @cached_property
    def loglog_slope(self) -> float:
        """Slope of log measured on log predicted, rising probes at the default setting."""
        p, ok = self.probes, self.default & self.rising
        if ok.sum() < 2:
            return float("nan")
        return float(np.polyfit(np.log(p["predicted"][ok]), np.log(p["measured"][ok]), 1)[0])

    def tiny_runs(self, full: bool = False) -> tuple[list, np.ndarray]:
        """`geo_mean_by_run` of the tiny-step probes against (gamma/sigma)^2, or with `full`
        against the exact first order; runs keyed by (|w_0|, seed)."""
        t = self.tiny
        ids = np.column_stack([t["w_scale"], t["seed"]])
        return geo_mean_by_run(ids, t["measured"], t["predicted_full" if full else "predicted"])

    @cached_property
    def tiny_agreement(self) -> Estimate:
        """Tiny-step measured / (gamma/sigma)^2: geometric mean over runs, t interval over runs."""
        return exp_t_mean(self.tiny_runs()[1])

    @cached_property
    def tiny_exact(self) -> Estimate:
        """Tiny-step measured / exact first order: geometric mean over runs, t over runs."""
        return exp_t_mean(self.tiny_runs(full=True)[1])

    def tiny_fields(self) -> dict:
        """Side numbers of the tiny-step rows: runs, probes, each run's geometric mean (both
        predictions) and the median probe's measured / (gamma/sigma)^2."""
        keys = [f"w_scale={k[0]:g}, seed={int(k[1])}" for k in self.tiny_runs()[0]]
        return {
            "n_runs": len(keys),
            "n_probes": len(self.tiny["measured"]),
            "tiny_lr": self.tiny_lr,
            "run_ratio_simplified": dict(zip(keys, np.exp(self.tiny_runs()[1]).tolist())),
            "run_ratio_exact": dict(zip(keys, np.exp(self.tiny_runs(full=True)[1]).tolist())),
        }

    @cached_property
    def tiny_fixed(self) -> Estimate:
        """log(measured / (gamma/sigma)^2) of the tiny-step probes, bootstrap mean."""
        return bootstrap_mean(np.log(self.tiny["measured"] / self.tiny["predicted"]), seed=0)

    @cached_property
    def tiny_full_error(self) -> float:
        """exp(median |log measured / exact first order|) of the tiny-step probes."""
        t = self.tiny
        return float(np.exp(np.median(np.abs(np.log(t["measured"] / t["predicted_full"])))))

    @property
    def rising(self) -> np.ndarray:
        """Probes whose margin grew (a step so large that the margin fell has no log ratio)."""
        return self.probes["measured"] > 0

    @property
    def default(self) -> np.ndarray:
        """Probes at the default batch size and lr (the verdict's setting)."""
        p = self.probes
        return (p["batch_size"] == self.default_batch_size) & (p["lr"] == self.default_lr)

    @property
    def log_error(self) -> np.ndarray:
        """log |measured / predicted| per probe (nan for a falling margin)."""
        p = self.probes
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.rising, np.log(np.abs(p["measured"] / p["predicted"])), np.nan)

    @property
    def n_probes(self) -> int:
        """Probes at the default setting."""
        return int(self.default.sum())

    @property
    def n_bad(self) -> int:
        """Probes at the default setting whose margin fell (kept in the ratio estimator)."""
        return int((self.default & ~self.rising).sum())

    def median_factor(self, batch_size: int, lr: float) -> float:
        """exp(median |log measured/predicted|) over the rising probes of one grid setting."""
        p = self.probes
        sel = (p["batch_size"] == batch_size) & (p["lr"] == lr) & self.rising
        return float(np.exp(np.median(np.abs(self.log_error[sel])))) if sel.any() else float("nan")

    def setting_stats(self, batch_size: int, lr: float) -> dict:
        """The two statistics of one grid setting that the figure shows: the verdict's ratio
        estimator (per run sum dm_BN / sum (gamma/sigma)^2 dm_no-BN, mean over the setting's
        runs; weights probes by predicted growth) and the median probe's measured / predicted
        (geometric, rising margins; each probe counts once), with the counts behind them."""
        p, nan = self.probes, float("nan")
        sel = (p["batch_size"] == batch_size) & (p["lr"] == lr)
        up = sel & self.rising
        out = {
            "n_probes": int(sel.sum()),
            "n_falling": int((sel & ~self.rising).sum()),
            "n_runs": 0,
            "ratio_estimator": nan,
            "median_ratio": nan,
        }
        if sel.any():
            ratios = self._select(sel)[1]
            out.update(n_runs=len(ratios), ratio_estimator=float(np.mean(ratios)))
        if up.any():
            log_ratio = np.log(p["measured"][up] / p["predicted"][up])
            out["median_ratio"] = float(np.exp(np.median(log_ratio)))
        return out

    def tiny_median_ratio(self, full: bool = False) -> float:
        """Median (geometric) of the tiny-step probes' measured / predicted: over (gamma/sigma)^2,
        or over the exact first order (`predicted_full`) with `full`."""
        t = self.tiny
        predicted = t["predicted_full" if full else "predicted"]
        return float(np.exp(np.median(np.log(t["measured"] / predicted))))

    def run_ratio_table(self) -> dict[str, float]:
        """Each run's ratio estimator keyed 'w_scale=.., seed=..' (as results.json stores it)."""
        keys = (f"w_scale={k[0]:g}, seed={int(k[1])}" for k in self.run_keys)
        return dict(zip(keys, self.run_ratios))

    def row_fields(self) -> dict:
        """The side numbers of the simulation claim's verdict row (its unit: `text`)."""
        return {
            "n_runs": self.agreement.n,
            "n_probes": self.n_probes,
            "n_bad": self.n_bad,
            "geo_mean_probes_rising": self.geo_mean_rising,
            "loglog_slope": self.loglog_slope,
        }

    def summary(self) -> dict:
        """The study's numbers for results.json."""
        return {
            "ratio_estimator_mean_over_runs": self.agreement.as_dict(),
            "run_ratios": self.run_ratio_table(),
            "geo_mean_probes_rising": self.geo_mean_rising,
            "n_probes": self.n_probes,
            "n_bad": self.n_bad,
            "loglog_slope": self.loglog_slope,
            "tiny_step_fixed_ratio": math.exp(self.tiny_fixed.value),
            "tiny_step_full_error": self.tiny_full_error,
            "tiny_step_over_runs": self.tiny_agreement.as_dict(),
            "tiny_step_exact_over_runs": self.tiny_exact.as_dict(),
            **{f"tiny_{k}": v for k, v in self.tiny_fields().items()},
        }


def probe_study(
    base: ToyConfig,
    batch_sizes: Sequence[int],
    lrs: Sequence[float],
    w_scales: Sequence[float],
    seeds: Sequence[int],
    default_batch_size: int,
    default_lr: float,
    probe_every: int,
    tiny_lr: float = 1e-6,
    progress: bool = True,
) -> ProbeStudy:
    """Train the BN toy (with outliers) over the grid and probe the outliers' margin growth every
    `probe_every` steps with the training lr; every run at the default setting (all seeds and
    |w_0|) also probes the same outliers on the same batches with step `tiny_lr` (the first-order
    term alone)."""
    from tqdm.auto import tqdm

    default = (default_batch_size, default_lr)
    grid = [
        (size, lr, scale, seed)
        for size in batch_sizes
        for lr in lrs
        for scale in w_scales
        for seed in seeds
        if seed == seeds[0] or (size, lr) == default
    ]
    rows, tiny = [], []
    with one_thread():
        for size, lr, scale, seed in tqdm(grid, desc="toy probe runs", disable=not progress):
            cfg = replace(base, batch_size=size, lr=lr, w_scale=scale, seed=seed)
            on_default = (size, lr) == default
            run = toy_train(cfg, "bn", True, probe_every, tiny_lr=tiny_lr if on_default else None)
            for p in run.probes:
                rows.append((size, lr, scale, seed, *(getattr(p, k) for k in PROBE_FIELDS[4:])))
            tiny += [
                (scale, seed, *(getattr(p, k) for k in TINY_FIELDS[2:])) for p in run.tiny_probes
            ]
    rows = np.array(rows, dtype=float).reshape(-1, len(PROBE_FIELDS))
    tiny = np.array(tiny, dtype=float).reshape(-1, len(TINY_FIELDS))
    return ProbeStudy(
        {k: rows[:, j] for j, k in enumerate(PROBE_FIELDS)},
        {k: tiny[:, j] for j, k in enumerate(TINY_FIELDS)},
        default_batch_size,
        default_lr,
        len(grid),
        tiny_lr,
    )


FEEDBACK_RUNS = (("bn", "bn", True), ("bn_clean", "bn", False), ("none", "none", True))
TEST_ACC_NAMES = {"bn": "bn", "bn_clean": "bn_no_outliers", "none": "none"}  # results.json keys


@dataclass(frozen=True)
class FeedbackStudy:
    """The toy at one setting, per seed, trained with BN with and without the outliers (same
    typical samples) and without BN: the per-step records and their seed-level comparisons.

    All comparisons are paired by seed with Student-t intervals. The log of the factor's ratio
    (with / without outliers, mean of log over the last `n_last` steps) splits exactly into a
    gamma part (2 log|gamma|) and a sigma part (-2 log sigma); `driver` is the larger one."""

    runs: dict[tuple[str, int], dict]
    seeds: list[int]
    n_last: int

    def arr(self, key: str, k: str) -> np.ndarray:
        """(seeds, steps) array of record `k` of run `key` ('bn', 'bn_clean', 'none'); (seeds,)
        for a scalar such as test_acc."""
        return np.array([self.runs[key, s][k] for s in self.seeds], dtype=float)

    def last_log(self, key: str, k: str) -> np.ndarray:
        """Mean of log |record k| over the last `n_last` steps of run `key`, per seed."""
        return np.log(np.abs(self.arr(key, k)[:, -self.n_last :])).mean(1)

    @cached_property
    def factor_gap(self) -> Estimate:
        """log (gamma/sigma)^2 with minus without outliers."""
        return t_paired_diff(self.last_log("bn", "factor"), self.last_log("bn_clean", "factor"))

    @cached_property
    def factor_gamma(self) -> Estimate:
        """The gamma part of `factor_gap`: 2 log|gamma| with minus without outliers."""
        with_outliers, without = self.last_log("bn", "gamma"), self.last_log("bn_clean", "gamma")
        return t_paired_diff(2 * with_outliers, 2 * without)

    @cached_property
    def factor_sigma(self) -> Estimate:
        """The sigma part of `factor_gap`: -2 log sigma with minus without outliers."""
        with_outliers, without = self.last_log("bn", "sigma"), self.last_log("bn_clean", "sigma")
        return t_paired_diff(-2 * with_outliers, -2 * without)

    @property
    def driver(self) -> str:
        """The part ('gamma' or 'sigma') that carries the larger share of `factor_gap`."""
        return "gamma" if self.factor_gamma.value >= self.factor_sigma.value else "sigma"

    @cached_property
    def gap_gamma(self) -> Estimate:
        """Final gamma, with minus without outliers."""
        return t_paired_diff(self.arr("bn", "gamma")[:, -1], self.arr("bn_clean", "gamma")[:, -1])

    @cached_property
    def share_ratio(self) -> Estimate:
        """Outliers' share of sum_i |dL/dgamma_i| over their share of the samples."""
        return t_mean(self.arr("bn", "gamma_share").mean(1) / self.population_share)

    @cached_property
    def share_excess(self) -> Estimate:
        """Outliers' share of sum_i |dL/dgamma_i| (mean over steps) over their share of the
        samples, minus 1, per seed; mean with a t interval over seeds (04.gamma_share)."""
        return t_mean(self.arr("bn", "gamma_share").mean(1) / self.population_share - 1)

    def share_fields(self) -> dict:
        """Side numbers of the row 04.gamma_share: both shares and the per-seed ratios."""
        per_seed = self.arr("bn", "gamma_share").mean(1) / self.population_share
        return {
            "outlier_gamma_share": self.gamma_share,
            "outlier_population_share": self.population_share,
            "share_ratio_per_seed": per_seed.tolist(),
        }

    @cached_property
    def mem_gap(self) -> Estimate:
        """Final outlier memorization, BN minus no-BN."""
        bn, none = self.arr("bn", "outlier_acc")[:, -1], self.arr("none", "outlier_acc")[:, -1]
        return t_paired_diff(bn, none)

    @property
    def population_share(self) -> float:
        """Outliers' share of the samples."""
        return self.runs["bn", self.seeds[0]]["outlier_share"]

    @property
    def gamma_share(self) -> float:
        """Outliers' mean share of sum_i |dL/dgamma_i| over steps and seeds."""
        return float(self.arr("bn", "gamma_share").mean())

    @property
    def test_acc(self) -> dict[str, float]:
        """Mean toy clean test accuracy of each run kind."""
        return {
            TEST_ACC_NAMES[k]: float(np.mean(self.arr(k, "test_acc"))) for k, _, _ in FEEDBACK_RUNS
        }

    def gamma_over_steps(self) -> tuple[Estimate, float]:
        """gamma with minus without outliers averaged over all steps (paired by seed, Student-t),
        and the share of (seed, step) pairs at which gamma *without* outliers is the higher."""
        g, gc = self.arr("bn", "gamma"), self.arr("bn_clean", "gamma")
        return t_paired_diff(g.mean(1), gc.mean(1)), float((gc > g).mean())

    def gamma_fields(self) -> dict:
        """Side numbers of the verdict row 'gamma grows with outliers' (its unit: `text`)."""
        return {"outlier_gamma_grad_share_over_population": self.share_ratio.as_dict()}

    def factor_fields(self) -> dict:
        """Side numbers of the verdict row '(gamma/sigma)^2 with / without outliers'."""
        return {
            "factor_ratio_from_gamma": math.exp(self.factor_gamma.value),
            "factor_ratio_from_sigma": math.exp(self.factor_sigma.value),
            "log_factor_parts": {
                "gamma": self.factor_gamma.as_dict(),
                "sigma": self.factor_sigma.as_dict(),
            },
        }

    def summary(self) -> dict:
        """The study's numbers for results.json."""
        return {
            "memorization_gap_bn_minus_none": self.mem_gap.as_dict(),
            "outlier_gamma_share": self.gamma_share,
            "outlier_population_share": self.population_share,
        }


def feedback_study(
    base: ToyConfig,
    seeds: Sequence[int],
    batch_size: int,
    lr: float,
    n_last: int = 20,
    progress: bool = True,
) -> FeedbackStudy:
    """The toy (|w_0| from `base`) at `batch_size` and `lr` for each seed: BN with outliers, BN
    without them, no-BN with them; records, toy clean test accuracy and the outliers' share."""
    from tqdm.auto import tqdm

    runs = {}
    with one_thread():
        for seed in tqdm(seeds, desc="feedback runs", disable=not progress):
            cfg = replace(base, batch_size=batch_size, lr=lr, seed=seed)
            for key, norm, outliers in FEEDBACK_RUNS:
                run = toy_train(cfg, norm, outliers)
                runs[key, seed] = {
                    **run.record,
                    "test_acc": toy_test_accuracy(run.model, cfg),
                    "outlier_share": run.outlier_share,
                }
    return FeedbackStudy(runs, list(seeds), min(n_last, base.steps))
