"""Readings at matched fit: a value (memorization, ...) where compared models fit equally well.

A model's fit along training is its clean training accuracy, or minus its clean training loss
(`fit_curve`; higher is a better fit either way). A value is read where the fit first reaches a
level (`at_level`, interpolated linearly between the two evaluated epochs around the crossing,
within the run: a run that never reaches the level is censored and gives NaN, never an
extrapolation), or at the last epoch of each run (`at_end`, with the runs that hit the epoch cap
before the fit level marked censored). `compare` pairs BN (a) with another model (b) over seeds;
`level_rows` and `convergence_row` are the rows a notebook judges, `value_vs_fit` the curves it
plots. The interpolation is `memorization.crossing` and `memorization.at_epoch`, shared with
`memorization.Runs.mem_at_level`. Compute only: arrays in, frozen dataclasses out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .config import check_choice
from .memorization import at_epoch, crossing
from .stats import Estimate, t_paired_diff

FIT_MEASURES = ("clean_acc", "clean_loss")
LEVELS = (0.95, 0.98, 0.99)  # clean training accuracy of the rows at fixed levels


def fit_curve(history: Mapping[str, Sequence[float]], measure: str = "clean_acc") -> np.ndarray:
    """The fit per evaluated epoch of a `train.fit` history: clean training accuracy
    ('clean_acc'), or minus the clean training loss ('clean_loss', nats), so higher fits better."""
    check_choice("measure", measure, FIT_MEASURES)
    curve = np.asarray(history[measure], float)
    return -curve if measure == "clean_loss" else curve


def at_level(fit: Sequence[float], value: Sequence[float], level: float) -> float:
    """`value` where `fit` first reaches `level` (both per evaluated epoch of one run), linearly
    interpolated between the two evaluated epochs around that first crossing; the first value
    when the run starts at or above the level; NaN when the run never reaches it (censored)."""
    index = np.arange(len(fit), dtype=float)
    return at_epoch(value, index, crossing(fit, index, level))


@dataclass(frozen=True, eq=False)
class Trajectory:
    """One trained model along training, one entry per evaluated epoch (epoch 0 = init): the
    epochs, its fit (see `fit_curve`), the value read, clean training and test accuracy."""

    epochs: np.ndarray
    fit: np.ndarray
    value: np.ndarray
    train_acc: np.ndarray
    test_acc: np.ndarray


def trajectory(
    history: Mapping[str, Sequence[float]], value: Sequence[float], measure: str = "clean_acc"
) -> Trajectory:
    """A `train.fit` history as a `Trajectory` of `value` (e.g. `memorization_curve(history,
    corruption)`), one entry per evaluated epoch, with the fit by `measure`."""
    arrays = [np.asarray(history[k], float) for k in ("epoch", "clean_acc", "test_acc")]
    out = Trajectory(arrays[0], fit_curve(history, measure), np.asarray(value, float), *arrays[1:])
    lengths = {len(x) for x in (out.epochs, out.fit, out.value, out.train_acc, out.test_acc)}
    if len(lengths) != 1:
        raise ValueError(f"a trajectory needs one entry per evaluated epoch; lengths {lengths}")
    return out


def censored(run: Trajectory, level: float, cap: float) -> bool:
    """Whether the run stopped at the epoch cap without its fit ever reaching `level` (a run
    stopped earlier, by a plateau rule, is not censored)."""
    return bool(run.epochs[-1] >= cap and not np.any(run.fit >= level))


@dataclass(frozen=True, eq=False)
class Reading:
    """One model's reading over seeds (one entry per seed, in the order of its runs): the value,
    the (fractional) epoch read, clean training and test accuracy there; NaN where the run never
    reached the level read. `censored`: runs without a reading at a level, or (at convergence)
    runs that hit the epoch cap before the fit level."""

    value: np.ndarray
    epoch: np.ndarray
    train_acc: np.ndarray
    test_acc: np.ndarray
    censored: np.ndarray

    @property
    def reached(self) -> int:
        """How many runs have a reading."""
        return int(np.isfinite(self.value).sum())


def reading_at_level(runs: Sequence[Trajectory], level: float) -> Reading:
    """Each run read where its fit first reaches `level` (`at_level`); NaN where it never does."""
    cols = [
        [at_level(r.fit, getattr(r, k), level) for r in runs]
        for k in ("value", "epochs", "train_acc", "test_acc")
    ]
    value, epoch, train, test = (np.asarray(c, float) for c in cols)
    return Reading(value, epoch, train, test, ~np.isfinite(epoch))


def reading_at_end(runs: Sequence[Trajectory], level: float, cap: float) -> Reading:
    """Each run read at its last evaluated epoch; `censored` marks the runs that hit the epoch
    `cap` before their fit reached `level` (see `censored`)."""
    cols = [
        [float(getattr(r, k)[-1]) for r in runs]
        for k in ("value", "epochs", "train_acc", "test_acc")
    ]
    value, epoch, train, test = (np.asarray(c, float) for c in cols)
    return Reading(
        value, epoch, train, test, np.array([censored(r, level, cap) for r in runs], bool)
    )


NO_ESTIMATE_BELOW = 2  # seeds with a reading in both models: fewer gives no interval


@dataclass(frozen=True, eq=False)
class Comparison:
    """Model a (BN) minus model b at one reading (`at`: a fit level, or 'convergence'), paired
    over the seeds read in both; `estimate` has a NaN interval (an inconclusive verdict) when
    fewer than `NO_ESTIMATE_BELOW` seeds were read in both. The accuracy gaps (a minus b, means
    over those seeds) are what `claims.judge` checks a matched-fit row against."""

    at: float | str
    a: Reading
    b: Reading
    estimate: Estimate

    @property
    def both(self) -> np.ndarray:
        """(seeds,) bool: the seeds read in both models."""
        return np.isfinite(self.a.value) & np.isfinite(self.b.value)

    @property
    def seeds(self) -> int:
        """How many seeds were compared (read or not)."""
        return len(self.a.value)

    @property
    def reached_both(self) -> int:
        """How many seeds were read in both models (the estimate's seeds)."""
        return int(self.both.sum())

    @property
    def censored(self) -> tuple[int, int]:
        """How many runs of a and of b are censored."""
        return int(self.a.censored.sum()), int(self.b.censored.sum())

    def _gap(self, key: str) -> float:
        both = self.both
        if not both.any():
            return float("nan")
        return float(np.mean(getattr(self.a, key)[both] - getattr(self.b, key)[both]))

    @property
    def train_acc_gap(self) -> float:
        """a's minus b's clean training accuracy at the reading (mean over `both`; NaN if none)."""
        return self._gap("train_acc")

    @property
    def test_acc_gap(self) -> float:
        """a's minus b's clean test accuracy at the reading (mean over `both`; NaN if none)."""
        return self._gap("test_acc")

    @property
    def accuracies(self) -> dict[str, dict[str, float]]:
        """{'a'/'b': {'train_acc', 'test_acc', 'epoch'}}: means over the seeds read in both."""
        both = self.both
        return {
            side: {
                k: float(np.mean(getattr(r, k)[both])) if both.any() else float("nan")
                for k in ("train_acc", "test_acc", "epoch")
            }
            for side, r in (("a", self.a), ("b", self.b))
        }

    def named(self, a: str, b: str) -> dict[str, dict[str, float]]:
        """A verdict row's fields of the reading, keyed by the compared models' names `a`, `b`:
        their clean training and test accuracy and the epoch read (`accuracies`)."""
        acc = self.accuracies
        return {
            f"clean_{k}" if k != "epoch" else "epoch_read": {a: acc["a"][k], b: acc["b"][k]}
            for k in ("train_acc", "test_acc", "epoch")
        }

    def as_dict(self) -> dict:
        """The row's numbers as results.json stores them (the estimate, seeds read, censored
        runs, accuracy gaps and both models' accuracies at the reading)."""
        return {
            "at": self.at,
            "estimate": self.estimate.as_dict(),
            "seeds": self.seeds,
            "reached": [self.a.reached, self.b.reached],
            "reached_both": self.reached_both,
            "censored": list(self.censored),
            "train_acc_gap": self.train_acc_gap,
            "test_acc_gap": self.test_acc_gap,
            "accuracies": self.accuracies,
        }


def compare(a: Reading, b: Reading, at: float | str) -> Comparison:
    """a minus b paired over the seeds read in both (Student t, as `memorization.paired`); no
    estimate (NaN value and interval, n = the seeds read in both) when fewer than
    `NO_ESTIMATE_BELOW` of them were."""
    if len(a.value) != len(b.value):
        raise ValueError(
            f"paired readings need one run per seed in both: {len(a.value)} and {len(b.value)}"
        )
    both = np.isfinite(a.value) & np.isfinite(b.value)
    n = int(both.sum())
    if n < NO_ESTIMATE_BELOW:
        est = Estimate(float("nan"), float("nan"), float("nan"), n)
    else:
        est = t_paired_diff(a.value[both], b.value[both])
    return Comparison(at, a, b, est)


def level_rows(
    a: Sequence[Trajectory], b: Sequence[Trajectory], levels: Sequence[float] = LEVELS
) -> tuple[Comparison, ...]:
    """a minus b at each fit level, paired over seeds (runs in seed order in both)."""
    return tuple(compare(reading_at_level(a, x), reading_at_level(b, x), x) for x in levels)


def convergence_row(
    a: Sequence[Trajectory], b: Sequence[Trajectory], level: float, cap: float
) -> Comparison:
    """a minus b at the last epoch of each run, paired over seeds; the runs that hit the epoch
    `cap` before the fit `level` are marked censored."""
    return compare(reading_at_end(a, level, cap), reading_at_end(b, level, cap), "convergence")


@dataclass(frozen=True, eq=False)
class FitCurve:
    """The value against the fit for a figure: `values` (runs, levels) read at each of `levels`
    (`at_level`; NaN past a run's best fit), `reached` (levels,) runs with a reading."""

    levels: np.ndarray
    values: np.ndarray
    reached: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """(levels,) mean over the runs with a reading; NaN where none has one."""
        v, k = np.where(np.isfinite(self.values), self.values, 0.0), self.reached
        return np.where(k > 0, v.sum(0) / np.maximum(k, 1), np.nan)


def value_vs_fit(runs: Sequence[Trajectory], levels: Sequence[float]) -> FitCurve:
    """Each run's value where its fit first reaches each of `levels` (one curve per run, on a
    shared grid of fit levels; the raw curves are each `Trajectory`'s `fit` and `value`)."""
    grid = np.asarray(levels, float)
    values = np.array([[at_level(r.fit, r.value, x) for x in grid] for r in runs], float)
    values = values.reshape(len(runs), len(grid))
    return FitCurve(grid, values, np.isfinite(values).sum(0))
