"""Notebook 01's measurements from training histories: memorization of each atypical subset, how
fast the typical samples are learned and what that costs, and the verdict rows, paired over seeds.

Memorization, per evaluated epoch:
  flip, ood  accuracy on the corrupted samples with respect to the labels they were trained with
             (no rule links those inputs to those labels: what is right is memorized);
  rare       accuracy on the trained members of the rare class minus accuracy on held-out test
             samples of that class (Feldman's train-versus-held-out reading: what the model gets
             right about the rare members only because it saw them).
Typical samples are the clean training samples (the rest of the subset). Compute only: tables
are markdown text, figures live in `plots`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import claims
from .plots import label
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


@dataclass(frozen=True)
class Runs:
    """The histories of notebook 01, {(corruption, norm, seed): per-epoch history}."""

    histories: dict
    seeds: tuple

    @property
    def epochs(self) -> np.ndarray:
        return np.asarray(next(iter(self.histories.values()))["epoch"], float)

    def curves(self, corr: str, norm: str, key: str) -> np.ndarray:
        """(seeds, evaluated epochs) of one history entry."""
        return np.array([self.histories[corr, norm, s][key] for s in self.seeds], dtype=float)

    def mem(self, corr: str, norm: str) -> np.ndarray:
        """(seeds, evaluated epochs) memorization of the corruption's atypical subset."""
        return np.array(
            [memorization_curve(self.histories[corr, norm, s], corr) for s in self.seeds]
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
        mem, last = (
            self.mem(corr, norm),
            lambda key: float(self.curves(corr, norm, key)[:, -1].mean()),
        )
        return {
            "final_memorization": float(mem[:, -1].mean()),
            "memorization_auc": float(self.auc(corr, norm).mean()),
            "epochs_to_50": float(np.mean([epochs_to(c, self.epochs, 0.5) for c in mem])),
            "epochs_to_90": float(np.mean([epochs_to(c, self.epochs, 0.9) for c in mem])),
            "subset_acc": last("noisy_acc"),
            "noisy_true_acc": last("noisy_true_acc"),
            "rare_heldout_acc": last("rare_test_acc"),
            "clean_train_acc": last("clean_acc"),
            "clean_test_acc": last("test_acc"),
            "epochs_to_clean_level": float(self.level_epochs(corr, norm, level).mean()),
            "clean_train_auc": float(self.auc(corr, norm, "clean_acc").mean()),
            "memorization_at_clean_level": float(self.mem_at_level(corr, norm, level).mean()),
        }


def table(summary: dict, level: float) -> str:
    """The markdown table of `summary` {"corr/norm": Runs.summary(...)}."""
    fmt = lambda v, d=3: "never" if not np.isfinite(v) else f"{v:.{d}f}"  # noqa: E731
    rows = []
    for key, s in summary.items():
        corr, norm = key.split("/")
        ref = {"flip": fmt(s["noisy_true_acc"]), "rare": fmt(s["rare_heldout_acc"])}.get(
            corr, "n/a"
        )
        rows.append(
            f"| {corr} | {label(norm)} | {fmt(s['epochs_to_50'], 1)} / {fmt(s['epochs_to_90'], 1)} | "
            f"{fmt(s['final_memorization'])} | {fmt(s['subset_acc'])} | {ref} | "
            f"{fmt(s['epochs_to_clean_level'], 1)} | {fmt(s['memorization_at_clean_level'])} | "
            f"{fmt(s['clean_train_acc'])} | {fmt(s['clean_test_acc'])} |"
        )
    return (
        "| corruption | model | epochs to 50% / 90% memorization | final memorization "
        "| subset acc. (training labels) | flip: true-label acc.; rare: held-out acc. "
        f"| epochs to {level:.0%} clean train acc. | memorization there | clean train acc. "
        "| clean test acc. |\n|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def verdict_rows(
    R: Runs, corruptions: Sequence[str], norms: Sequence[str], level: float, **common
) -> list[dict]:
    """Every verdict row of notebook 01, each a paired difference over seeds (`claims.judge`).
    First the typical samples, over all corruptions (per seed the mean over them): no-BN's minus
    BN's epochs to `level` clean training accuracy, and BN's minus no-BN's mean clean training
    accuracy over training. Then per corruption, BN minus no-BN in final memorization, in
    memorization over training and (flip, ood) in the corrupted samples' loss over training;
    BN's memorization at `level` clean training accuracy minus no-BN's at the same level (the
    cost of learning fast); every control in `norms` minus no-BN in final memorization."""
    rows = []
    mean_over = lambda f: np.mean([f(c) for c in corruptions], 0)  # noqa: E731 (per seed)
    acc = {n: float(np.mean([R.test_acc(c, norms)[n] for c in corruptions])) for n in norms}
    kw = dict(
        clean_test_acc=acc, corruption="+".join(corruptions), clean_level=f"{level:.0%}", **common
    )
    last = float(
        R.epochs[-1]
    )  # a no-BN seed that never reaches the level counts at the last epoch:
    censored = sum(int((~np.isfinite(R.level_epochs(c, "none", level))).sum()) for c in corruptions)
    none_epochs = lambda c: np.nan_to_num(R.level_epochs(c, "none", level), posinf=last)  # noqa: E731
    rows.append(
        claims.judge(
            "01.typical.epochs",
            paired(
                mean_over(none_epochs),  # a lower bound, never BN's
                mean_over(lambda c: R.level_epochs(c, "bn", level)),
            ),
            unit=f"no-BN minus BN, epochs to {level:.0%} clean training accuracy"
            + (
                f"; {censored} no-BN run(s) never reached it and count at the last epoch "
                f"({last:g}, a lower bound)"
                if censored
                else ""
            ),
            **kw,
        )
    )
    rows.append(
        claims.judge(
            "01.typical.auc",
            paired(
                mean_over(lambda c: R.auc(c, "bn", "clean_acc")),
                mean_over(lambda c: R.auc(c, "none", "clean_acc")),
            ),
            unit="BN minus no-BN, mean clean training accuracy over training",
            **kw,
        )
    )
    for corr in corruptions:
        acc = R.test_acc(corr, norms)
        kw = dict(clean_test_acc=acc, corruption=corr, subset=SUBSET[corr], **common)
        what = (
            "memorization (train minus held-out accuracy of the rare class)"
            if corr == "rare"
            else "memorization (accuracy on the corrupted labels)"
        )
        cases = [
            (
                "final",
                R.mem(corr, "bn")[:, -1],
                R.mem(corr, "none")[:, -1],
                f"BN minus no-BN, final {what}",
            ),
            (
                "speed",
                R.auc(corr, "bn"),
                R.auc(corr, "none"),
                f"BN minus no-BN, mean {what} over training",
            ),
        ]
        if corr != "rare":
            cases.append(
                (
                    "loss",
                    R.auc(corr, "none", "noisy_loss"),
                    R.auc(corr, "bn", "noisy_loss"),
                    "no-BN minus BN, mean cross-entropy (nats) of corrupted samples over training",
                )
            )
        for metric, a, b, unit in cases:
            rows.append(
                claims.judge(
                    f"01.{metric}.{corr}",
                    paired(a, b),
                    acc_gap=acc["bn"] - acc["none"],
                    unit=unit,
                    **kw,
                )
            )
        rows.append(
            claims.judge(
                "01.typical.cost",
                paired(R.mem_at_level(corr, "bn", level), R.mem_at_level(corr, "none", level)),
                unit=f"BN minus no-BN, {what} at {level:.0%} clean training accuracy",
                clean_level=f"{level:.0%}",
                **kw,
            )
        )
        for ctrl in (n for n in CONTROLS if n in norms):
            rows.append(
                claims.judge(
                    f"01.control.{ctrl}",
                    paired(R.mem(corr, ctrl)[:, -1], R.mem(corr, "none")[:, -1]),
                    acc_gap=acc[ctrl] - acc["none"],
                    compared=(ctrl, "none"),
                    unit=f"{NAME[ctrl]} minus no-BN, final {what}",
                    **kw,
                )
            )
    return rows


def controls_reading(
    rows: list[dict], prefix: str = "01.control.", key: str = "corruption", effect: str = "it"
) -> list[str]:
    """Per case (a row's `key`: the corruption in 01, the mix and subgroup in 03), what the two
    controls say about which part of BN carries its effect (from their verdict rows `prefix`*,
    after any multiple-testing correction)."""
    out = []
    for corr in dict.fromkeys(r[key] for r in rows if r["id"].startswith(prefix)):
        v = {
            r["id"].split(".")[-1]: r["verdict"]
            for r in rows
            if r["id"].startswith(prefix) and r[key] == corr
        }
        gn, na = v.get("gn"), v.get("bn_noaffine")
        if gn == "reproduced" and na == "not reproduced":
            says = f"the learned gamma carries {effect} (GroupNorm raises {effect} without batch coupling; fixed-gamma BN does not)"
        elif na == "reproduced" and gn == "not reproduced":
            says = f"batch coupling carries {effect} (BN with gamma fixed raises {effect}; GroupNorm's learned gamma does not)"
        elif gn == na == "reproduced":
            says = f"either part alone raises {effect} (GroupNorm's learned gamma and BN's batch coupling)"
        elif gn == na == "not reproduced":
            says = f"neither part alone raises {effect} by the minimum effect"
        else:
            says = "not separated at this budget"
        out.append(
            f"{corr}: GroupNorm {gn or 'not run'}, BN with gamma fixed {na or 'not run'} -> {says}"
        )
    return out
