"""Notebook 02 at matched fit: the noisy/clean gradient-norm ratio read where BN and the other
model fit the clean training data equally well.

Each run's ratio (median noisy / median clean per-sample norm, `grad_analysis.medians`) at its
probed epochs is a `matched_fit.Trajectory` against its clean training accuracy; the rows read it
where the fit first reaches each level (interpolated within the run; a run that never reaches the
level gives no reading) and at each run's last epoch once trained to fit ("convergence", runs
that hit the epoch cap unfitted marked censored), paired over seeds (`matched_fit`). The fixed
epochs of the paper's reading are `common_epochs` and `restrict`. Compute only.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from . import claims, matched_fit
from .claims import Verdict
from .config import check_choice
from .gamma_sigma import exp_estimate
from .grad_analysis import medians, probed_epochs
from .matched_fit import Comparison, Trajectory
from .stats import Estimate, t_mean

NOISY_UNIT = "BN / no-BN, median gradient norm of the noisy samples (batch definition)"
RATIO_UNIT = "median noisy / median clean gradient norm (batch definition)"
GAP_UNIT = "BN minus no-BN, noisy/clean median norm ratio (batch definition)"


def probe_schedule(protocol: str, probe_epochs: Sequence[int], cap: int) -> tuple[int, ...]:
    """The epochs a run's probe records: every epoch up to the cap under the fair protocol (a
    run stops at fit, and the matched-fit reading needs each epoch it trained); under the
    paper's protocol `probe_epochs` and the last epoch (where the convergence row reads)."""
    if protocol == "fair":
        return tuple(range(cap + 1))
    return tuple(sorted(set(probe_epochs) | {cap}))


QUANTITIES = ("ratio", "log_noisy")


def trajectories(
    histories: Sequence[dict], mode: str = "batch", quantity: str = "ratio"
) -> list[Trajectory]:
    """One `matched_fit.Trajectory` per run (`train.fit` history with probe records) of a
    `QUANTITIES` of `mode` at the run's probed epochs, against its clean training accuracy there:
    the noisy/clean median ratio ("ratio") or the log of the noisy samples' median norm
    ("log_noisy", the paper's comparison across models)."""
    check_choice("quantity", quantity, QUANTITIES)
    out = []
    for h in histories:
        index = [list(h["epoch"]).index(e) for e in probed_epochs(h)]
        sub = {k: [h[k][i] for i in index] for k in ("epoch", "clean_acc", "test_acc")}
        m = medians([h], mode)
        value = m.ratio[0] if quantity == "ratio" else np.log(m.noisy[0])
        out.append(matched_fit.trajectory(sub, value))
    return out


def comparisons(
    histories: Mapping[str, Sequence[dict]],
    levels: Sequence[float],
    fit_level: float,
    cap: int,
    other: str = "none",
    quantity: str = "ratio",
) -> tuple[Comparison, ...]:
    """BN minus `other` of a `QUANTITIES` (default the noisy/clean ratio) at each clean training
    accuracy of `levels`, then at convergence (each run's last epoch; `fit_level`, the epoch
    `cap`: censoring), paired over seeds (runs in seed order in both)."""
    a = trajectories(histories["bn"], quantity=quantity)
    b = trajectories(histories[other], quantity=quantity)
    rows = matched_fit.level_rows(a, b, levels)
    return (*rows, matched_fit.convergence_row(a, b, fit_level, cap))


def bn_ratio(comparison: Comparison) -> Estimate:
    """BN's own ratio at the reading, over the seeds where BN has one (Student t); no estimate
    (NaN) when fewer than `matched_fit.NO_ESTIMATE_BELOW` do."""
    v = comparison.a.value[np.isfinite(comparison.a.value)]
    if len(v) < matched_fit.NO_ESTIMATE_BELOW:
        return Estimate(math.nan, math.nan, math.nan, len(v))
    return t_mean(v)


def reading_name(at: float | str, fit_level: float | None) -> str:
    """A reading in words: a clean training accuracy level, or convergence."""
    if at == "convergence":
        fit = f"trained to {fit_level:g}, " if fit_level is not None else ""
        return f"convergence: each model {fit}read at its last epoch"
    return f"clean training accuracy {at:g}"


def _fields(c: Comparison, fit_level: float | None, other: str) -> dict:
    return {
        "at": reading_name(c.at, fit_level),
        "reading": "matched fit",
        **c.named("bn", other),
        "censored": dict(zip(("bn", other), c.censored)),
        "reached": {"bn": c.a.reached, other: c.b.reached, "both": c.reached_both},
    }


def _own(reading) -> dict[str, float]:
    """A model's clean training and test accuracy at its reading, means over its seeds read."""
    read = np.isfinite(reading.value)
    return {
        k: float(np.mean(getattr(reading, k)[read])) if read.any() else math.nan
        for k in ("train_acc", "test_acc")
    }


def verdict_rows(
    comps: Sequence[Comparison], fit_level: float | None, other: str = "none", **common
) -> list[Verdict]:
    """The matched-fit verdict rows, two per reading: BN's ratio (`02.noisy_vs_clean.fit`, beside
    BN's own accuracies over the seeds it was read on) and BN minus `other` (`02.bn_vs_none.fit`,
    judged with the accuracy gaps at the reading: the 'matched_fit' confound). `common`
    (dataset, budget, corruption) goes into every row."""
    rows = []
    for c in comps:
        fields = {**_fields(c, fit_level, other), **common}
        own = {**fields, "clean_train_acc": {"bn": _own(c.a)["train_acc"]}}
        own["clean_test_acc"] = {"bn": _own(c.a)["test_acc"]}
        rows.append(claims.judge("02.noisy_vs_clean.fit", bn_ratio(c), **own, unit=RATIO_UNIT))
        rows.append(
            claims.judge(
                "02.bn_vs_none.fit",
                c.estimate,
                compared=("bn", other),
                train_acc_gap=c.train_acc_gap,
                test_acc_gap=c.test_acc_gap,
                **fields,
                unit=GAP_UNIT,
            )
        )
    return rows


def noisy_norm_rows(
    comps: Sequence[Comparison], fit_level: float | None, other: str = "none", **common
) -> list[Verdict]:
    """The paper's own comparison, one row per reading (`02.noisy_norm.fit`): the noisy samples'
    median gradient norm in BN over `other`'s, from `comps` of the log noisy norm
    (`comparisons(..., quantity="log_noisy")`): the paired mean difference of logs, exponentiated
    (a geometric mean ratio over seeds), judged with the accuracy gaps at the reading."""
    return [
        claims.judge(
            "02.noisy_norm.fit",
            exp_estimate(c.estimate),
            compared=("bn", other),
            train_acc_gap=c.train_acc_gap,
            test_acc_gap=c.test_acc_gap,
            **_fields(c, fit_level, other),
            **common,
            unit=NOISY_UNIT,
        )
        for c in comps
    ]


def ratio_vs_fit(
    runs: Mapping[str, Sequence[Trajectory]], levels: Sequence[float]
) -> dict[str, matched_fit.FitCurve]:
    """{norm: each run's ratio where its clean training accuracy first reaches each of `levels`}
    (`runs` {norm: `trajectories`}; NaN past a run's best fit), for the figure."""
    return {n: matched_fit.value_vs_fit(ts, levels) for n, ts in runs.items()}


def training_record(results: Mapping[str, Sequence], lrs: Mapping[str, float]) -> dict:
    """{norm: its learning rate (`lrs`), fit level, and per seed the epochs used and whether the
    run hit the epoch cap unfitted (censored)} from {norm: [`train.TrainResult`] in seed order}."""
    return {
        n: {
            "lr": float(lrs[n]),
            "fit_level": rs[0].config.get("fit_level"),
            "epochs": [r.epochs for r in rs],
            "censored": [bool(r.censored) for r in rs],
        }
        for n, rs in results.items()
    }


def common_epochs(histories: Mapping[str, Sequence[dict]], wanted: Sequence[int]) -> list[int]:
    """The epochs of `wanted` that the probe recorded in every run of every norm (a run that
    stopped at fit was not probed after it)."""
    runs = [set(probed_epochs(h).tolist()) for hs in histories.values() for h in hs]
    return [e for e in wanted if all(e in r for r in runs)]


def restrict(
    histories: Mapping[str, Sequence[dict]], epochs: Sequence[int]
) -> dict[str, list[dict]]:
    """The histories with their probe records kept at `epochs` only (the fixed-epoch reading)."""
    keep = set(epochs)
    return {
        n: [{**h, "grads": [r for r in h["grads"] if r["epoch"] in keep]} for h in hs]
        for n, hs in histories.items()
    }


def comparison_dicts(comps: Sequence[Comparison]) -> list[dict]:
    """Each reading's numbers for results.json (`Comparison.as_dict`) with BN's own ratio."""
    return [{**c.as_dict(), "bn_ratio": bn_ratio(c).as_dict()} for c in comps]
