"""Notebook 01's readings at matched fit: memorization where BN and the compared model fit their
clean training samples equally well (the primary reading of the fair protocol, `recipes`).

Per corruption, BN minus no-BN, paired over seeds: memorization where each run's clean training
accuracy first reaches each of `levels` (`matched_fit.level_rows`: interpolated within the run; a
run that never reaches a level gives no reading there), and at the end of training
(`matched_fit.convergence_row`, runs that hit the epoch cap below `fit_level` marked censored);
each control minus no-BN at the end of training; and the effective-learning-rate arm, BN minus
no-BN trained at a multiple of its own learning rate. Every row carries both models' clean
training and test accuracy at the reading, which the `matched_fit` confound rule checks.
Compute only: histories in, verdict rows and frozen curves out.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from . import claims, matched_fit
from .claims import Verdict
from .matched_fit import Comparison, FitCurve, Trajectory
from .memorization import CONTROLS, NAME, SUBSET, memorization_curve

FIGURE_LEVELS = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))  # 0.50 .. 0.99


def trajectories(histories: Sequence[Mapping], corr: str) -> list[Trajectory]:
    """The memorization of `corr`'s atypical subset along each history, against clean training
    accuracy (one `Trajectory` per run, in seed order)."""
    return [matched_fit.trajectory(h, memorization_curve(h, corr)) for h in histories]


def by_norm(histories: Mapping, corr: str, norm: str, seeds: Sequence[int]) -> list[Trajectory]:
    """`trajectories` of one (corruption, norm) of notebook 01's {(corr, norm, seed): history}."""
    return trajectories([histories[corr, norm, s] for s in seeds], corr)


def curves(
    histories: Mapping, corrs: Sequence[str], norms: Sequence[str], seeds: Sequence[int]
) -> dict[str, dict[str, FitCurve]]:
    """{corruption: {norm: memorization against clean training accuracy}} on `FIGURE_LEVELS`."""
    return {
        c: {
            n: matched_fit.value_vs_fit(by_norm(histories, c, n, seeds), FIGURE_LEVELS)
            for n in norms
        }
        for c in corrs
    }


def arm_norm(factor: float) -> str:
    """The key of no-BN trained at `factor` times its own learning rate in notebook 01's
    histories {(corruption, norm, seed): history}."""
    return f"none x{factor:g}"


def arm_curves(
    histories: Mapping, corrs: Sequence[str], factors: Sequence[float], seeds: Sequence[int]
) -> dict[str, dict[str, FitCurve]]:
    """{corruption: {legend: memorization against clean training accuracy}} of the arm."""
    return {
        c: {
            f"no-BN, {f:g}x its lr": matched_fit.value_vs_fit(
                by_norm(histories, c, arm_norm(f), seeds), FIGURE_LEVELS
            )
            for f in factors
            if all((c, arm_norm(f), s) in histories for s in seeds)
        }
        for c in corrs
    }


def epochs_used(
    histories: Mapping,
    corrs: Sequence[str],
    norms: Sequence[str],
    seeds: Sequence[int],
    fit_level: float | None,
) -> dict[str, dict[str, dict[str, float]]]:
    """{corruption: {norm: {'mean', 'max', 'fitted', 'runs', 'train_acc', 'test_acc'}}}: the
    epochs each model trained (it stops once fitted), how many reached the fit level (its last
    clean training accuracy at or above it: `TrainConfig.fit_level`) and its final clean
    training and test accuracy (means over seeds); norms without histories are left out."""
    out: dict = {}
    for c in corrs:
        for n in norms:
            hs = [histories.get((c, n, s)) for s in seeds]
            if any(h is None for h in hs):
                continue
            used = [h["epoch"][-1] for h in hs]
            out.setdefault(c, {})[n] = {
                "mean": float(sum(used) / len(used)),
                "max": float(max(used)),
                "runs": len(hs),
                "fitted": sum(
                    fit_level is not None and h["clean_acc"][-1] >= fit_level for h in hs
                ),
                "train_acc": float(sum(h["clean_acc"][-1] for h in hs) / len(hs)),
                "test_acc": float(sum(h["test_acc"][-1] for h in hs) / len(hs)),
            }
    return out


def histories_of(jobs: Mapping, results: Sequence, norms: Sequence[str]) -> tuple[dict, list]:
    """{key: history} of notebook 01's trained models ({(corruption, norm, seed): job} and their
    `units.trained_or_diverged` results in order), and the keys of the arm's models whose
    training diverged (left out: their factor has no reading). A compared norm's model that
    diverged stops the run with one error naming it."""
    out, diverged = {}, []
    for key, res in zip(jobs, results):
        if res is None and key[1] in norms:
            raise RuntimeError(
                f"training diverged for {key} (lr {jobs[key].cfg.lr:g}): the compared models "
                "must train; lower that norm's learning rate (lr_grid or lr)"
            )
        if res is None:
            diverged.append(key)
        else:
            out[key] = res.history
    return out, diverged


def what(corr: str) -> str:
    if corr == "rare":
        return "memorization (train minus held-out accuracy of the rare class)"
    return "memorization (accuracy on the corrupted labels)"


def _censored_note(comp: Comparison, a: str, b: str) -> str:
    """Which runs have no reading (never reached the level) or hit the epoch cap unfitted."""
    ca, cb = comp.censored
    if not (ca or cb):
        return ""
    return (
        f" (censored runs, the level never reached or the epoch cap hit below the fit level: "
        f"{a} {ca}/{comp.seeds}, {b} {cb}/{comp.seeds})"
    )


def judged(claim_id: str, comp: Comparison, unit: str, compared=("bn", "none"), **kw) -> Verdict:
    names = [NAME.get(n, n) for n in compared]
    return claims.judge(
        claim_id,
        comp.estimate,
        compared=compared,
        train_acc_gap=comp.train_acc_gap,
        test_acc_gap=comp.test_acc_gap,
        unit=unit + _censored_note(comp, *names),
        reading=comp.at,
        **comp.named(*compared),
        **kw,
    )


def verdict_rows(
    histories: Mapping,
    corrs: Sequence[str],
    norms: Sequence[str],
    seeds: Sequence[int],
    levels: Sequence[float],
    fit_level: float,
    cap: int,
    **common,
) -> list[Verdict]:
    """Every matched-fit row of notebook 01, per corruption: BN minus no-BN at each level and at
    the end of training, then each control in `norms` minus no-BN at the end (see the module
    docstring). `common` (dataset, budget) goes into every row."""
    rows = []
    for corr in corrs:
        kw = dict(corruption=corr, subset=SUBSET[corr], fit_level=f"{fit_level:.0%}", **common)
        bn, none = by_norm(histories, corr, "bn", seeds), by_norm(histories, corr, "none", seeds)
        for comp in matched_fit.level_rows(bn, none, levels):
            unit = f"BN minus no-BN, {what(corr)} at {comp.at:.0%} clean training accuracy"
            rows.append(judged(f"01.fit.{corr}", comp, unit, level=f"{comp.at:.0%}", **kw))
        end = matched_fit.convergence_row(bn, none, fit_level, cap)
        unit = f"BN minus no-BN, {what(corr)} at the end of training (trained to fit)"
        rows.append(judged(f"01.converged.{corr}", end, unit, **kw))
        for ctrl in (n for n in CONTROLS if n in norms):
            other = by_norm(histories, corr, ctrl, seeds)
            end = matched_fit.convergence_row(other, none, fit_level, cap)
            unit = f"{NAME[ctrl]} minus no-BN, {what(corr)} at the end of training"
            rows.append(
                judged(f"01.converged.control.{ctrl}", end, unit, compared=(ctrl, "none"), **kw)
            )
    return rows


def arm_rows(
    histories: Mapping,
    corrs: Sequence[str],
    factors: Sequence[float],
    seeds: Sequence[int],
    fit_level: float,
    cap: int,
    **common,
) -> list[Verdict]:
    """The effective-learning-rate arm: per corruption and factor, BN minus no-BN trained at
    `factor` times no-BN's own learning rate (key `arm_norm(factor)` in `histories`), at the
    end of training (both trained to fit)."""
    rows = []
    for corr in corrs:
        bn = by_norm(histories, corr, "bn", seeds)
        for f in factors:
            if any((corr, arm_norm(f), s) not in histories for s in seeds):
                continue  # a diverged model: no reading for this factor (the notebook says so)
            raised = by_norm(histories, corr, arm_norm(f), seeds)
            end = matched_fit.convergence_row(bn, raised, fit_level, cap)
            unit = f"BN minus no-BN at {f:g}x its learning rate, {what(corr)}, end of training"
            rows.append(
                judged(
                    "01.converged.efflr",
                    end,
                    unit,
                    compared=("bn", f"none x{f:g} lr"),
                    corruption=corr,
                    subset=SUBSET[corr],
                    factor=f"{f:g}",
                    fit_level=f"{fit_level:.0%}",
                    **common,
                )
            )
    return rows
