"""The regularizer's frontier over lambda, and each alternative compared with it at equal accuracy.

On the evaluation seeds, BN (lambda = 0) and the regularizer at every lambda form a frontier;
each alternative (no-BN, GroupNorm, BN without gamma, decay on gamma, stronger weight decay, BN
stopped early) is compared with the regularizer's memorization where the regularizer's accuracy
falls to the alternative's (`memorization_at`, on non-increasing fits of both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .claims import Verdict, judge
from .stats import Estimate, t_mean
from .variants import ACCURACY, MEMORIZATION, Lineup, Variant, curve, finals


def frontier(
    runs: Mapping, corr: str, seeds: Sequence[int], bn: Variant, points: Sequence[Variant]
) -> dict:
    """The regularizer's frontier on the evaluation seeds: BN (lambda = 0) then `points` (one tau)
    in order of strength; `acc`, `mem`: (seeds, 1 + len(points)); `names`, `labels` ('BN',
    'lambda=0.001', ...: the figure's) and `rows` (the table's labels)."""
    vs = [bn, *points]
    return frontier_of(
        bn,
        points,
        np.stack([finals(runs, corr, v.name, seeds, ACCURACY) for v in vs], 1),
        np.stack([finals(runs, corr, v.name, seeds, MEMORIZATION) for v in vs], 1),
    )


def frontier_of(bn: Variant, points: Sequence[Variant], acc: np.ndarray, mem: np.ndarray) -> dict:
    """A frontier's record from its accuracies and memorizations (runs, 1 + len(points))."""
    return {
        "names": [v.name for v in (bn, *points)],
        "labels": ["BN"] + [v.point_label for v in points],
        "rows": [v.label for v in (bn, *points)],
        "acc": acc,
        "mem": mem,
    }


def early_stop(history: Mapping[str, list], corr: str, level: float) -> dict:
    """BN stopped early at a memorization `level` (no-BN's, same seed), read off its per-epoch
    history on a `corr` split: the last evaluated epoch >= 1 whose memorization is at most
    `level` (if none, the epoch >= 1 of least memorization); its epoch, clean test accuracy and
    memorization."""
    mem, acc = curve(history, corr, MEMORIZATION), curve(history, corr, ACCURACY)
    below = [i for i in range(1, len(mem)) if mem[i] <= level]
    i = below[-1] if below else 1 + int(np.argmin(mem[1:]))
    return {"epoch": int(history["epoch"][i]), "acc": float(acc[i]), "mem": float(mem[i])}


def alternative_points(
    runs: Mapping,
    corr: str,
    seeds: Sequence[int],
    alternatives: Sequence[Variant],
    bn: Variant,
    nobn: Variant,
) -> dict[str, dict]:
    """Per alternative (by name), its label, colour key and per-seed `acc`, `mem` (seeds,); and
    'bn@early': BN stopped at no-BN's final memorization of the same seed (`early_stop`, with
    the epochs it stopped at)."""
    out = {
        v.name: {
            "label": v.label,
            "color": v.color,
            "acc": finals(runs, corr, v.name, seeds, ACCURACY),
            "mem": finals(runs, corr, v.name, seeds, MEMORIZATION),
        }
        for v in alternatives
    }
    level = finals(runs, corr, nobn.name, seeds, MEMORIZATION)
    stops = [early_stop(runs[corr, bn.name, s].history, corr, lv) for s, lv in zip(seeds, level)]
    out["bn@early"] = {
        "label": "BN stopped early at no-BN's memorization",
        "color": "bn_early",
        "acc": np.array([e["acc"] for e in stops]),
        "mem": np.array([e["mem"] for e in stops]),
        "epoch": [e["epoch"] for e in stops],
    }
    return out


def decreasing_fit(y: Sequence[float]) -> np.ndarray:
    """The least-squares non-increasing fit of `y` (pool adjacent violators, equal weights)."""
    blocks: list[list[float]] = []  # [sum, count] of each pooled block
    for v in np.asarray(y, float):
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    return np.concatenate([np.full(int(c), s / c) for s, c in blocks])


def memorization_at(acc: Sequence[float], mem: Sequence[float], a: float) -> tuple[float, float]:
    """The regularizer's memorization at clean accuracy `a` on one seed's frontier (points in
    order of strength, BN first): accuracy and memorization are fitted non-increasing in the
    strength (`decreasing_fit`: more regularization, never more of either), and memorization is
    read, linearly between points, where the fitted accuracy falls to `a`. Outside the
    frontier's range: at its strongest point, or (for an `a` above every fitted accuracy) at the
    strongest point of its most accurate plateau. Returns (memorization, accuracy there)."""
    A, M = decreasing_fit(acc), decreasing_fit(mem)
    if a > A[0]:
        k = int(np.flatnonzero(A >= A[0] - 1e-12)[-1])
        return float(M[k]), float(A[0])
    if a <= A[-1]:
        return float(M[-1]), float(A[-1])
    k = int(np.flatnonzero(A >= a)[-1])  # A[k] >= a > A[k + 1]
    t = (A[k] - a) / (A[k] - A[k + 1])
    return float(M[k] + t * (M[k + 1] - M[k])), float(a)


def at_equal_accuracy(front: Mapping, alt: Mapping) -> dict[str, np.ndarray]:
    """Per seed: the regularizer's memorization at the alternative's clean accuracy
    (`memorization_at`), `diff` = the alternative's memorization minus it (> 0: the regularizer
    memorizes less) and `gap` = the alternative's accuracy minus the regularizer's there (> 0:
    the regularizer cannot reach the alternative's accuracy)."""
    at = [memorization_at(a, m, x) for a, m, x in zip(front["acc"], front["mem"], alt["acc"])]
    reg_mem, reg_acc = (np.array([p[i] for p in at]) for i in (0, 1))
    return {
        "reg_mem": reg_mem,
        "reg_acc": reg_acc,
        "diff": np.asarray(alt["mem"]) - reg_mem,
        "gap": np.asarray(alt["acc"]) - reg_acc,
    }


def pooled_difference(comparisons: Sequence[Mapping]) -> tuple[Estimate, float]:
    """The verdict's estimate for one alternative: per seed, the mean `diff` over the
    corruptions (`comparisons`, one per corruption, each over the same seeds: the cells of one
    seed share its initialization and data draw, so they are not independent), then the mean
    over seeds with a Student-t interval over them; and the mean accuracy `gap` (the confound)."""
    per_seed = np.mean(np.stack([np.asarray(c["diff"], float) for c in comparisons]), axis=0)
    gaps = np.concatenate([np.asarray(c["gap"], float) for c in comparisons])
    # the confound's size is the mean |gap| (cells short on one side and beyond on the other must
    # not cancel), its sign that of the mean gap (which side the comparison misses on)
    return t_mean(per_seed), float(np.copysign(np.mean(np.abs(gaps)), np.mean(gaps)))


def pooled_accuracies(
    alts: Mapping[str, Mapping], comparisons: Mapping[str, Mapping], name: str
) -> dict:
    """Beside an alternative's verdict: its mean clean test accuracy and the regularizer's at the
    compared points, over every corruption (keys of `alts`) and seed."""
    acc = float(np.mean([alts[c][name]["acc"] for c in alts]))
    there = float(np.mean([comparisons[c][name]["reg_acc"] for c in alts]))
    return {name: acc, "regularizer there": there}


def frontier_rows(
    alts: Mapping[str, Mapping],
    comparisons: Mapping[str, Mapping],
    seeds: Sequence[int],
    claim_id: str = "05.frontier",
    measure: str = "memorization",
    over: str = "seeds",
    **common,
) -> list[Verdict]:
    """The verdict rows `claim_id` (`05.frontier`; `05.frontier.lira` for LiRA's frontier), one per
    alternative: its `measure` minus the regularizer's at its clean accuracy over every
    (corruption, seed) cell of `alts` (the frontier's kinds; for LiRA one pool, and its targets
    in place of seeds: `over`), with the accuracy the regularizer lacks there as the confound."""
    kinds = list(alts)
    per = f"mean over {len(kinds)} corruption(s) per seed, " if over == "seeds" else ""
    rows = []
    for n, a in alts[kinds[0]].items():
        e, gap = pooled_difference([comparisons[c][n] for c in kinds])
        rows.append(
            judge(
                claim_id,
                e,
                acc_gap=gap,
                alternative=a["label"],
                unit=(
                    f"{measure}, {n} minus the regularizer at {n}'s clean accuracy, "
                    f"{per}95% t interval over {len(seeds)} {over}"
                ),
                acc_cost=gap,
                clean_test_acc=pooled_accuracies(alts, comparisons, n),
                corruption=kinds,
                **common,
            )
        )
    return rows


def _point(acc: Sequence[float], mem: Sequence[float], **kw) -> dict:
    return {"x": t_mean(acc), "y": t_mean(mem), **kw}


def frontier_points(
    front: Mapping,
    alts: Mapping[str, Mapping],
    chosen_acc: Sequence[float],
    chosen_mem: Sequence[float],
    chosen_label: str,
) -> tuple[list, list, dict]:
    """The points of `plot_mitigation.frontier_panel`: mean and 95% t interval over seeds of clean
    accuracy (x) and memorization (y) of every frontier point, every alternative and the chosen
    setting."""
    pts = [
        _point(front["acc"][:, j], front["mem"][:, j], label=lab)
        for j, lab in enumerate(front["labels"])
    ]
    others = [_point(a["acc"], a["mem"], label=a["label"], color=a["color"]) for a in alts.values()]
    return pts, others, _point(chosen_acc, chosen_mem, label=f"chosen: {chosen_label}")


@dataclass(frozen=True)
class Frontiers:
    """Per corruption kind: the regularizer's frontier (`frontier`), the alternatives' points
    (`alternative_points`) and, per alternative, the comparison at equal accuracy
    (`at_equal_accuracy`)."""

    fronts: dict
    alts: dict
    cmp: dict

    def as_dict(self) -> dict:
        """The three parts as results.json stores them (arrays as lists)."""
        return {
            "frontier": jsonable(self.fronts),
            "alternatives": jsonable(self.alts),
            "at_equal_accuracy": jsonable(self.cmp),
        }


def compare(runs: Mapping, kinds: Sequence[str], seeds: Sequence[int], lineup: Lineup) -> Frontiers:
    """The frontier of `lineup` (BN first) and every alternative at equal accuracy, per kind of
    `kinds`, on the evaluation runs."""
    bn, points, alternatives = lineup.bn, lineup.frontier, lineup.alternatives
    fronts = {c: frontier(runs, c, seeds, bn, points) for c in kinds}
    alts = {c: alternative_points(runs, c, seeds, alternatives, bn, lineup.no_bn) for c in kinds}
    cmp = {c: {n: at_equal_accuracy(fronts[c], a) for n, a in alts[c].items()} for c in kinds}
    return Frontiers(fronts, alts, cmp)


def jsonable(obj):
    """`obj` with numpy arrays as lists (for results.json)."""
    if isinstance(obj, Mapping):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj.tolist() if isinstance(obj, np.ndarray) else obj
