"""Notebook 01's measurements from training histories, paired over seeds, and its verdict rows.

What is measured: memorization of each atypical subset, how fast the typical samples are
learned and what that costs.

Memorization, per evaluated epoch:
  flip, ood  accuracy on the corrupted samples with respect to the labels they were trained with
             (no rule links those inputs to those labels: what is right is memorized);
  rare       accuracy on the trained members of the rare class minus accuracy on held-out test
             samples of that class (Feldman's train-versus-held-out reading: what the model gets
             right about the rare members only because it saw them).
Typical samples are the clean training samples (the rest of the subset). Compute only: the
table and readings are in `text`, the figures in `plot_memorization`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import claims
from .claims import Verdict
from .stats import Estimate, area_under_curve, epochs_to, t_paired_diff

SUBSET = {"flip": "label-flipped subset", "ood": "OOD subset", "rare": "rare samples"}
CONTROLS = ("gn", "bn_noaffine")
NAME = {"bn": "BN", "none": "no-BN", "gn": "GroupNorm", "bn_noaffine": "BN with gamma fixed at 1"}


def memorization_curve(history: dict, corruption: str) -> np.ndarray:
    """Memorization of the atypical subset per evaluated epoch (see the module docstring)."""
    fit = np.asarray(history["noisy_acc"], float)
    return fit - np.asarray(history["rare_test_acc"], float) if corruption == "rare" else fit


def crossing(curve: Sequence[float], epochs: Sequence[float], level: float) -> float:
    """First epoch at which `curve` reaches `level`, linearly interpolated between the evaluated
    epochs around the crossing (inf if it never does; the first epoch if it starts there)."""
    c, e = np.asarray(curve, float), np.asarray(epochs, float)
    hit = np.flatnonzero(c >= level)
    if not hit.size:
        return float("inf")
    i = int(hit[0])
    if i == 0:
        return float(e[0])
    return float(e[i - 1] + (level - c[i - 1]) / (c[i] - c[i - 1]) * (e[i] - e[i - 1]))


def at_epoch(curve: Sequence[float], epochs: Sequence[float], epoch: float) -> float:
    """`curve` at a (fractional) epoch, linearly interpolated; NaN for an epoch never reached."""
    return float(np.interp(epoch, epochs, curve)) if np.isfinite(epoch) else float("nan")


def paired(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """Mean of a - b over seeds with the Student-t interval; no interval (an inconclusive
    verdict) when a seed has no value (e.g. a level it never reached)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if not np.all(np.isfinite(d)):
        return Estimate(float("nan"), -np.inf, np.inf, len(d))
    return t_paired_diff(a, b)


def held(values: Sequence[float], length: int) -> np.ndarray:
    """A per-epoch curve of a model that stopped at fit, extended to `length` evaluated epochs
    with its last value: a stopped model is frozen, so every later reading equals its last."""
    v = np.asarray(values, float)
    return np.concatenate([v, np.full(length - len(v), v[-1])]) if len(v) < length else v


@dataclass(frozen=True)
class Runs:
    """The histories of notebook 01, {(corruption, norm, seed): per-epoch history}, evaluated
    once per epoch. Models that stopped at fit (`TrainConfig.fit_level`) have shorter histories:
    every curve is read on the epochs 0..`cap` (the epoch cap), a stopped model held at its last
    evaluated value (`held`). Reading to the cap, not to the longest run, keeps a BN-minus-no-BN
    row independent of which other norms share the histories. `cap=None` reads to the longest run
    (every run of the paper's protocol trains the same number of epochs)."""

    histories: dict
    seeds: tuple
    cap: int | None = None

    @property
    def epochs(self) -> np.ndarray:
        longest = np.asarray(max((h["epoch"] for h in self.histories.values()), key=len), float)
        if self.cap is None or longest[-1] >= self.cap:
            return longest
        return np.concatenate([longest, np.arange(longest[-1] + 1, self.cap + 1, dtype=float)])

    def curves(self, corr: str, norm: str, key: str) -> np.ndarray:
        """(seeds, evaluated epochs) of one history entry."""
        n = len(self.epochs)
        return np.array([held(self.histories[corr, norm, s][key], n) for s in self.seeds])

    def stopped(self, corr: str, norm: str) -> np.ndarray:
        """(seeds,) the epoch each model stopped training (at fit, or its epoch cap)."""
        return np.array([self.histories[corr, norm, s]["epoch"][-1] for s in self.seeds], float)

    def last(self, corr: str, norm: str, key: str) -> float:
        """The mean over seeds of one history entry at the last evaluated epoch."""
        return float(self.curves(corr, norm, key)[:, -1].mean())

    def by_case(self, corrs: Sequence[str], norms: Sequence[str], key: str | None = None) -> dict:
        """{corruption: {norm: (seeds, epochs)}} of a history entry, or of the memorization
        when `key` is None (what the figures plot)."""
        return {
            c: {n: self.mem(c, n) if key is None else self.curves(c, n, key) for n in norms}
            for c in corrs
        }

    def mem(self, corr: str, norm: str) -> np.ndarray:
        """(seeds, evaluated epochs) memorization of the corruption's atypical subset."""
        n = len(self.epochs)
        return np.array(
            [held(memorization_curve(self.histories[corr, norm, s], corr), n) for s in self.seeds]
        )

    def test_acc(self, corr: str, norms: Sequence[str]) -> dict[str, float]:
        """Final clean test accuracy per norm, mean over seeds."""
        return {n: float(self.curves(corr, n, "test_acc")[:, -1].mean()) for n in norms}

    def level_epochs(self, corr: str, norm: str, level: float) -> np.ndarray:
        """(seeds,) epochs (interpolated) to reach `level` clean training accuracy."""
        return np.array(
            [crossing(c, self.epochs, level) for c in self.curves(corr, norm, "clean_acc")]
        )

    def mem_at_level(self, corr: str, norm: str, level: float) -> np.ndarray:
        """(seeds,) memorization at the epoch the model reaches `level` clean training accuracy."""
        return np.array(
            [
                at_epoch(m, self.epochs, e)
                for m, e in zip(self.mem(corr, norm), self.level_epochs(corr, norm, level))
            ]
        )

    def auc(self, corr: str, norm: str, key: str | None = None) -> np.ndarray:
        """(seeds,) mean over training (area under the curve) of a history entry, or of the
        memorization when `key` is None."""
        rows = self.mem(corr, norm) if key is None else self.curves(corr, norm, key)
        return np.array([area_under_curve(c, self.epochs) for c in rows])

    def summary(self, corr: str, norm: str, level: float) -> dict[str, float]:
        """Means over seeds: speed and strength of memorization, typical learning, utility."""
        mem = self.mem(corr, norm)
        return {
            "final_memorization": float(mem[:, -1].mean()),
            "memorization_auc": float(self.auc(corr, norm).mean()),
            "epochs_to_50": float(np.mean([epochs_to(c, self.epochs, 0.5) for c in mem])),
            "epochs_to_90": float(np.mean([epochs_to(c, self.epochs, 0.9) for c in mem])),
            "subset_acc": self.last(corr, norm, "noisy_acc"),
            "noisy_true_acc": self.last(corr, norm, "noisy_true_acc"),
            "rare_heldout_acc": self.last(corr, norm, "rare_test_acc"),
            "clean_train_acc": self.last(corr, norm, "clean_acc"),
            "clean_test_acc": self.last(corr, norm, "test_acc"),
            "epochs_to_clean_level": float(self.level_epochs(corr, norm, level).mean()),
            "clean_train_auc": float(self.auc(corr, norm, "clean_acc").mean()),
            "memorization_at_clean_level": float(self.mem_at_level(corr, norm, level).mean()),
        }


def verdict_rows(
    runs: Runs,
    corruptions: Sequence[str],
    norms: Sequence[str],
    level: float,
    fit_level: float | None = None,
    **common,
) -> list[Verdict]:
    """Every verdict row of notebook 01, each a paired difference over seeds (`claims.judge`):
    first the typical samples over all corruptions (`typical_rows`), then each corruption's
    memorization rows (`corruption_rows`; `fit_level`: the fair protocol's, None under the
    paper's). `common` (dataset, budget) goes into every row."""
    rows = typical_rows(runs, corruptions, norms, level, **common)
    for corr in corruptions:
        rows += corruption_rows(runs, corr, norms, level, fit_level, **common)
    return rows


def typical_rows(
    runs: Runs, corruptions: Sequence[str], norms: Sequence[str], level: float, **common
) -> list[Verdict]:
    """How fast the typical samples are learned, per seed the mean over the corruptions: no-BN's
    minus BN's epochs to `level` clean training accuracy (a no-BN seed that never reaches it
    counts at the last epoch, a lower bound; never BN's), and BN's minus no-BN's mean clean
    training accuracy over training."""
    acc = {n: float(np.mean([runs.test_acc(c, norms)[n] for c in corruptions])) for n in norms}
    kw = dict(
        clean_test_acc=acc, corruption="+".join(corruptions), clean_level=f"{level:.0%}", **common
    )
    last = float(runs.epochs[-1])
    never = [~np.isfinite(runs.level_epochs(c, "none", level)) for c in corruptions]
    censored = sum(int(n.sum()) for n in never)
    none_epochs = [
        np.nan_to_num(runs.level_epochs(c, "none", level), posinf=last) for c in corruptions
    ]
    bn_epochs = [runs.level_epochs(c, "bn", level) for c in corruptions]
    unit = f"no-BN minus BN, epochs to {level:.0%} clean training accuracy"
    if censored:
        unit += (
            f"; {censored} no-BN run(s) never reached it and count at the last epoch "
            f"({last:g}, a lower bound)"
        )
    epochs = paired(np.mean(none_epochs, 0), np.mean(bn_epochs, 0))
    auc = paired(
        np.mean([runs.auc(c, "bn", "clean_acc") for c in corruptions], 0),
        np.mean([runs.auc(c, "none", "clean_acc") for c in corruptions], 0),
    )
    return [
        claims.judge("01.typical.epochs", epochs, unit=unit, **kw),
        claims.judge(
            "01.typical.auc",
            auc,
            unit="BN minus no-BN, mean clean training accuracy over training",
            **kw,
        ),
    ]


def corruption_rows(
    runs: Runs,
    corr: str,
    norms: Sequence[str],
    level: float,
    fit_level: float | None = None,
    **common,
) -> list[Verdict]:
    """One corruption's rows, BN minus no-BN: final memorization, memorization over training,
    (flip, ood) the corrupted samples' loss over training (no-BN minus BN); memorization at
    `level` clean training accuracy (the cost of learning fast); every control in `norms` minus
    no-BN in final memorization. Under the fair protocol (`fit_level` given) each row carries
    each norm's final clean training accuracy (`clean_train_acc`): compared models further apart
    than the matched-fit tolerance make the row inconclusive (`claims.fit_gap_note`)."""
    acc = runs.test_acc(corr, norms)
    kw = dict(clean_test_acc=acc, corruption=corr, subset=SUBSET[corr], **common)
    if fit_level is not None:
        kw["clean_train_acc"] = {n: runs.last(corr, n, "clean_acc") for n in norms}
        kw["fit_level"] = f"{fit_level:.0%}"
    gap = acc["bn"] - acc["none"]
    what = (
        "memorization (train minus held-out accuracy of the rare class)"
        if corr == "rare"
        else "memorization (accuracy on the corrupted labels)"
    )
    final = {n: runs.mem(corr, n)[:, -1] for n in norms}
    rows = [
        claims.judge(
            f"01.final.{corr}",
            paired(final["bn"], final["none"]),
            acc_gap=gap,
            unit=f"BN minus no-BN, final {what}",
            **kw,
        ),
        claims.judge(
            f"01.speed.{corr}",
            paired(runs.auc(corr, "bn"), runs.auc(corr, "none")),
            acc_gap=gap,
            unit=f"BN minus no-BN, mean {what} over training",
            **kw,
        ),
    ]
    if corr != "rare":
        loss = paired(runs.auc(corr, "none", "noisy_loss"), runs.auc(corr, "bn", "noisy_loss"))
        unit = "no-BN minus BN, mean cross-entropy (nats) of corrupted samples over training"
        rows.append(claims.judge(f"01.loss.{corr}", loss, acc_gap=gap, unit=unit, **kw))
    cost = paired(runs.mem_at_level(corr, "bn", level), runs.mem_at_level(corr, "none", level))
    unit = f"BN minus no-BN, {what} at {level:.0%} clean training accuracy"
    rows.append(claims.judge("01.typical.cost", cost, unit=unit, clean_level=f"{level:.0%}", **kw))
    for ctrl in (n for n in CONTROLS if n in norms):
        rows.append(
            claims.judge(
                f"01.control.{ctrl}",
                paired(final[ctrl], final["none"]),
                acc_gap=acc[ctrl] - acc["none"],
                compared=(ctrl, "none"),
                unit=f"{NAME[ctrl]} minus no-BN, final {what}",
                **kw,
            )
        )
    return rows
