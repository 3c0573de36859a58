"""Notebook 01's learning-rate dependence: memorization at fit against each norm's learning rate.

Validation accuracy can be flat over a learning-rate grid while memorization is not (BN's
validation accuracy varied by under 2 points over 0.005-0.5 in the quick reference), so the one
rate the search picks may decide a verdict. On the corruption kinds of notebook 01's `lr_curve`,
BN and no-BN therefore also train to fit at every rate of the search grid, on the judged runs'
subsets and seeds. Per (kind, norm, rate) `points` gives the memorization at the end of training,
clean training and test accuracy, and how many runs fitted or diverged. The rows (exploratory,
family `lr_dependence` in claims.yaml) compare at matched fit, paired over seeds:
- `01.lr.bn`: BN trained at each other grid rate minus no-BN at its chosen rate;
- `01.lr.none`: BN at its chosen rate minus no-BN trained at each other grid rate.
The chosen rates' point is the judged run itself: its row is `01.converged.<kind>` (judged in its
own family), neither trained nor judged twice. A rate where a run diverged gives no row. The
rows re-read the seeds and subsets of the judged runs, so they describe how far the judged
comparison depends on the two rates; they are no independent replication of it.
Compute only: histories in, frozen dataclasses and verdict rows out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from . import fit_rows, matched_fit
from .claims import Verdict
from .memorization import SUBSET
from .stats import Estimate, t_mean

COMPARED = ("bn", "none")  # the norms that train over the whole grid


def key(norm: str, lr: float, chosen: float) -> str:
    """The model key of `norm` at `lr` in notebook 01's histories {(kind, key, seed): history}:
    the norm itself at its chosen rate (the judged run), else '<norm> lr <lr>'."""
    return norm if lr == chosen else f"{norm} lr {lr:g}"


def extra_points(chosen: Mapping[str, float], grid: Sequence[float]) -> list[tuple[str, float]]:
    """The (norm, learning rate) pairs to train beyond the judged runs: every grid rate of each
    compared norm but its chosen one (`chosen`: {norm: chosen rate}, each a rate of `grid`), in
    increasing rate."""
    off = {n: lr for n, lr in chosen.items() if n in COMPARED and lr not in grid}
    if off:
        raise ValueError(f"chosen learning rates {off} are not rates of the grid {list(grid)}")
    return [(n, lr) for n in COMPARED for lr in sorted(grid) if lr != chosen[n]]


@dataclass(frozen=True)
class LrPoint:
    """One (norm, learning rate) over seeds at the end of training: memorization, clean training
    and test accuracy per seed (NaN for a diverged run), the epochs used, and whether every run
    reached the fit level (`fitted` of `runs`)."""

    norm: str
    lr: float
    chosen: bool
    memorization: tuple[float, ...]
    train_acc: tuple[float, ...]
    test_acc: tuple[float, ...]
    epochs: tuple[float, ...]
    fitted: int
    runs: int

    @property
    def diverged(self) -> int:
        """Runs whose training diverged (no history)."""
        return int(np.isnan(np.asarray(self.memorization, float)).sum())

    @property
    def estimate(self) -> Estimate:
        """Mean memorization with a Student-t interval over the seeds that trained (NaN
        interval with fewer than 2)."""
        vals = np.asarray(self.memorization, float)
        vals = vals[np.isfinite(vals)]
        if len(vals) < 2:
            mean = float(vals.mean()) if len(vals) else float("nan")
            return Estimate(mean, float("nan"), float("nan"), len(vals))
        return t_mean(vals)

    def as_dict(self) -> dict:
        """The point as results.json stores it."""
        return {
            "norm": self.norm,
            "lr": self.lr,
            "chosen": self.chosen,
            "memorization": list(self.memorization),
            "estimate": self.estimate.as_dict(),
            "train_acc": list(self.train_acc),
            "test_acc": list(self.test_acc),
            "epochs": list(self.epochs),
            "fitted": self.fitted,
            "runs": self.runs,
            "diverged": self.diverged,
        }


def points(
    histories: Mapping,
    kind: str,
    chosen: Mapping[str, float],
    grid: Sequence[float],
    seeds: Sequence[int],
    fit_level: float,
) -> list[LrPoint]:
    """Every (norm, grid rate) of `kind`, BN's first, in increasing rate (see `LrPoint`). A run
    missing from `histories` diverged."""
    out = []
    for norm in COMPARED:
        for lr in sorted(grid):
            hs = [histories.get((kind, key(norm, lr, chosen[norm]), s)) for s in seeds]
            runs = [fit_rows.trajectories([h], kind)[0] if h else None for h in hs]
            nan = float("nan")
            out.append(
                LrPoint(
                    norm=norm,
                    lr=float(lr),
                    chosen=lr == chosen[norm],
                    memorization=tuple(float(r.value[-1]) if r else nan for r in runs),
                    train_acc=tuple(float(r.train_acc[-1]) if r else nan for r in runs),
                    test_acc=tuple(float(r.test_acc[-1]) if r else nan for r in runs),
                    epochs=tuple(float(r.epochs[-1]) if r else nan for r in runs),
                    fitted=sum(r is not None and r.fit[-1] >= fit_level for r in runs),
                    runs=len(runs),
                )
            )
    return out


def _trajectories(histories, kind, norm, lr, chosen, seeds):
    """The runs of one point in seed order, or None when any of them diverged."""
    hs = [histories.get((kind, key(norm, lr, chosen[norm]), s)) for s in seeds]
    return None if any(h is None for h in hs) else fit_rows.trajectories(hs, kind)


def rows(
    histories: Mapping,
    kinds: Sequence[str],
    chosen: Mapping[str, float],
    grid: Sequence[float],
    seeds: Sequence[int],
    fit_level: float,
    cap: int,
    **common,
) -> list[Verdict]:
    """Per kind, `01.lr.bn` at each grid rate but BN's chosen one where no BN run diverged, then
    `01.lr.none` likewise for no-BN (see the module docstring), in increasing rate, judged at
    matched fit (`claims.yaml`'s matched_fit rule: a censored run fails its training-accuracy
    tolerance). `common` (dataset, budget) goes into every row."""
    out = []
    for kind in kinds:
        base = {n: _trajectories(histories, kind, n, chosen[n], chosen, seeds) for n in COMPARED}
        what = fit_rows.what(kind)
        kw = dict(corruption=kind, subset=SUBSET[kind], fit_level=f"{fit_level:.0%}", **common)
        for lr in sorted(grid):
            runs = _trajectories(histories, kind, "bn", lr, chosen, seeds)
            if runs is None or lr == chosen["bn"]:
                continue
            end = matched_fit.convergence_row(runs, base["none"], fit_level, cap)
            unit = f"BN at lr {lr:g} minus no-BN at its chosen {chosen['none']:g}, {what}"
            out.append(fit_rows.judged("01.lr.bn", end, unit, lr=f"{lr:g}", **kw))
        for lr in sorted(grid):
            runs = _trajectories(histories, kind, "none", lr, chosen, seeds)
            if runs is None or lr == chosen["none"]:
                continue
            end = matched_fit.convergence_row(base["bn"], runs, fit_level, cap)
            unit = f"BN at its chosen lr {chosen['bn']:g} minus no-BN at lr {lr:g}, {what}"
            out.append(fit_rows.judged("01.lr.none", end, unit, lr=f"{lr:g}", **kw))
    return out
