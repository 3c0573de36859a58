"""Notebook 05's experiment: a gamma/sigma regularizer chosen in advance on held-out data, its
frontier (clean accuracy against memorization over lambda), what a practitioner would try
instead, the comparison at equal clean accuracy, and LiRA on notebook 03's shadow pools.

- `curve` / `finals`: the one place a measure is read off a history (memorization per kind).
- `Variant`: one model family (a norm, a mitigation, a weight decay): its name, label, colour.
- `train_grid` / `lira_pools`: the cached units (`bnpaper.units`), built here, never in a notebook;
  `grid_kinds`, `evaluation_splits`, `plan`: which kinds and models train where.
- selection: `selection_rule` (from claims.yaml), `selection_scores`, `choose`.
- frontier: `frontier`, `alternative_points` (with `early_stop`), `decreasing_fit`,
  `memorization_at`, `at_equal_accuracy`, `pooled_difference`, `frontier_rows`.
- the chosen setting: `summarize`, `reduction`, `paired_changes`, `reduction_rows`,
  `channel_scales`, `scale_summary`; LiRA: `compare_lira`, `LiraComparison`, `lira_row`.
- text: Markdown tables and the legends and titles of notebook 05's figures.

Memorization (`MEMORIZATION`, read only through `curve`) depends on the corruption kind, as in
notebook 01 (`memorization.memorization_curve`): for label flips and OOD images, the accuracy on
the corrupted training samples with respect to their corrupted labels; for a rare class (labels
true), the accuracy on its trained members minus that on its held-out test samples. Utility is
the clean test accuracy (`ACCURACY`; for a selection model trained with `data.with_validation`,
its validation accuracy).

The rare kind is judged only: the setting is chosen, and the frontier and the alternatives are
drawn, on the flip and OOD kinds (`grid_kinds`); on rare splits only BN, the chosen setting and
no-BN train (`plan`), so the question is whether a setting chosen on corrupted labels protects
rare samples, with nothing chosen on them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from .memorization import memorization_curve
from .mitigation import MitigationConfig, affine_bn_layers, relative_reductions, running_sigma
from .stats import Estimate, t_mean, t_paired_diff

MEMORIZATION = "memorization"  # a measure (`curve`), not a history key
ACCURACY, SUBSET_ACC, HELD_OUT = "test_acc", "noisy_acc", "rare_test_acc"  # history keys
GRID = ("flip", "ood")  # the kinds the setting is chosen on (`grid_kinds`)
FAMILIES = {"bn": "BN", "none": "no-BN", "gn": "GroupNorm", "bn_noaffine": "BN, gamma fixed at 1"}
CORRUPTION_WORDS = {"flip": "label flips", "ood": "OOD samples", "rare": "a rare class"}
MEMORIZATION_WORDS = {
    "flip": "memorization (accuracy on the corrupted labels)",
    "ood": "memorization (accuracy on the corrupted labels)",
    "rare": "memorization (trained minus held-out accuracy of the rare class)",
}


# ---------------------------------------------------------------- the measures
def curve(history: Mapping[str, list], corr: str, what: str) -> np.ndarray:
    """One model's per-epoch `what` on a split of corruption `corr`: `MEMORIZATION` (per kind,
    `memorization.memorization_curve`: flip, ood the accuracy on the corrupted labels; rare the
    rare class's trained minus held-out accuracy), else the history entry `what` (`ACCURACY`,
    `SUBSET_ACC` the atypical subset's accuracy on its training labels, `HELD_OUT` the rare
    class's held-out accuracy). Every memorization in this module is read here."""
    if what == MEMORIZATION:
        return np.asarray(memorization_curve(history, corr), float)
    return np.asarray(history[what], float)


def curves(histories: Sequence[Mapping[str, list]], corr: str, what: str) -> np.ndarray:
    """`curve` of several runs (e.g. seeds): (runs, evaluated epochs)."""
    return np.array([curve(h, corr, what) for h in histories])


def finals(runs: Mapping, corr: str, name: str, seeds: Sequence[int], what: str) -> np.ndarray:
    """The final value of `what` (`curve`) per seed: (seeds,)."""
    return np.array(
        [curve(runs[corr, name, s].history, corr, what)[-1] for s in seeds], dtype=float
    )


# ---------------------------------------------------------------- model families
@dataclass(frozen=True)
class Variant:
    """One model family: a norm, a mitigation and, if set, its own weight decay (else the run's).
    `name` keys results.json; `label` and `color` (a key of `bnpaper.plots.COLORS`) are for
    figures; `config(base, seed)` is its training configuration."""

    norm: str
    mit: MitigationConfig = MitigationConfig()
    weight_decay: float | None = None

    @property
    def short(self) -> str:
        """'pen(l=0.01,t=1)', 'proj(t=1)', 'gdecay(0.05)', 'wd(0.005)'; '' for a plain norm."""
        m = self.mit
        parts = {
            "penalty": f"pen(l={m.lam:g},t={m.tau:g})",
            "projection": f"proj(t={m.tau:g})",
            "gamma_decay": f"gdecay({m.lam:g})",
            "none": "",
        }[m.method]
        wd = f"wd({self.weight_decay:g})" if self.weight_decay is not None else ""
        return "+".join(p for p in (parts, wd) if p)

    @property
    def name(self) -> str:
        """'bn', 'none', 'gn', 'bn+pen(l=0.01,t=1)', 'bn+proj(t=1)', 'bn+wd(0.005)', ..."""
        return f"{self.norm}+{self.short}" if self.short else self.norm

    @property
    def family(self) -> str:
        """'BN', 'no-BN', 'GroupNorm', 'BN + regularizer', 'BN + decay on gamma', ..."""
        what = {
            "penalty": " + regularizer",
            "projection": " + projection",
            "gamma_decay": " + decay on gamma",
            "none": "",
        }[self.mit.method]
        wd = " + stronger weight decay" if self.weight_decay is not None else ""
        return FAMILIES.get(self.norm, self.norm) + what + wd

    @property
    def params(self) -> str:
        """The mitigation's parameters in mathtext ('' for none)."""
        m = self.mit
        p = {
            "penalty": f"$\\lambda$={m.lam:g}, $\\tau$={m.tau:g}",
            "projection": f"$\\tau$={m.tau:g}",
            "gamma_decay": f"{m.lam:g}",
            "none": "",
        }[m.method]
        wd = f"{self.weight_decay:g}" if self.weight_decay is not None else ""
        return ", ".join(x for x in (p, wd) if x)

    @property
    def label(self) -> str:
        return f"{self.family} ({self.params})" if self.params else self.family

    @property
    def color(self) -> str:
        if self.weight_decay is not None:
            return "bn_wd"
        return {"penalty": "bn_reg", "projection": "bn_reg", "gamma_decay": "bn_gdecay"}.get(
            self.mit.method, self.norm
        )

    def config(self, base, seed: int):
        """`base` (a `train.TrainConfig`) with this family's norm and weight decay, at `seed`."""
        wd = base.weight_decay if self.weight_decay is None else self.weight_decay
        return replace(base, norm=self.norm, weight_decay=wd, seed=seed)


def train_grid(
    splits: Mapping[tuple[str, int], object],
    variants: Sequence[Variant] | Mapping[str, Sequence[Variant]],
    base,
    what: str = "",
) -> dict[tuple[str, str, int], object]:
    """Every variant (a list, or {corruption: list} as `plan` gives) trained on every split
    ({(corruption, seed): Split}) from that seed, as cached units (`units.trained`):
    {(corruption, variant name, seed): TrainResult}."""
    from . import units

    runs = {}
    for (corr, seed), split in splits.items():
        for v in dict.fromkeys(variants[corr] if isinstance(variants, Mapping) else variants):
            runs[corr, v.name, seed] = units.trained(
                split,
                v.config(base, seed),
                mitigation=v.mit,
                desc=f"{what}{corr} {v.name} seed {seed}",
            )
    return runs


def grid_kinds(corruptions: Sequence[str]) -> list[str]:
    """The corruption kinds the setting is chosen on and the frontier and alternatives are drawn
    for: the flip and OOD kinds among `corruptions` (a rare kind is judged only: `plan`)."""
    return [c for c in corruptions if c in GRID]


def frontier_kinds(corruptions: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The kinds the frontier and the alternatives train on: those of `wanted` (the parameter
    `frontier_corruption`) that `corruptions` has, or, if it has none of them, its first flip or
    OOD kind (`grid_kinds`)."""
    return [c for c in corruptions if c in wanted] or grid_kinds(corruptions)[:1]


def plan(
    corruptions: Sequence[str],
    grid: Sequence[Variant],
    judged: Sequence[Variant],
    frontier_kinds: Sequence[str] | None = None,
) -> dict:
    """Which models train on the evaluation splits of each kind: `grid` (BN, the chosen setting,
    the frontier, the alternatives) on `frontier_kinds` (default: every kind of `grid_kinds`),
    `judged` (BN, the chosen setting, no-BN) on the others."""
    kinds = grid_kinds(corruptions) if frontier_kinds is None else list(frontier_kinds)
    return {c: list(grid if c in kinds else judged) for c in corruptions}


def evaluation_splits(
    ds,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    n_train: int,
    noise_frac: float,
    ood_source: str,
    n_test: int,
    rare_share: float,
    rare_class: int,
) -> dict[tuple[str, int], object]:
    """The evaluation splits {(corruption, seed): Split} (`data.make_split`; a rare class kept
    at `rare_share` of the subset, `rare_class` or a seeded choice for -1)."""
    from .data import make_split

    return {
        (c, s): make_split(
            ds, n_train, c, noise_frac, s, ood_source, n_test, rare_share, rare_class
        )
        for c in corruptions
        for s in seeds
    }


def selection_splits(
    ds,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    n_train: int,
    noise_frac: float,
    ood_source: str,
    n_val: int,
) -> dict[tuple[str, int], object]:
    """The selection splits {(corruption, seed): Split} of the flip and OOD kinds: subsets of
    `ds`'s training set minus `n_val` held-out validation images (`data.hold_out`), the
    validation images as their test set (`data.with_validation`): a selection model never sees
    a test image. A rare kind is refused: it is judged only (`grid_kinds`)."""
    from .data import hold_out, make_split, with_validation

    if set(corruptions) - set(GRID):
        raise ValueError(
            f"selection on corruptions={list(corruptions)!r}: the setting is chosen on "
            f"{list(GRID)} only (a rare kind is judged, never chosen on)"
        )
    rest, x_val, y_val = hold_out(ds, n_val)
    return {
        (c, s): with_validation(
            make_split(rest, n_train, c, noise_frac, s, ood_source, 1), x_val, y_val
        )
        for c in corruptions
        for s in seeds
    }


# ---------------------------------------------------------------- pre-registered selection
def selection_rule(section: str = "05") -> dict:
    """The selection rule of a notebook, as written in claims.yaml (`settings.selection`)."""
    from .claims import setting

    return setting("selection", section)


def selection_scores(
    runs: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    base: Variant,
    candidates: Sequence[Variant],
) -> dict[str, dict]:
    """Per candidate, over every (corruption, selection seed): `reduction`, the mean share of
    the baseline's final memorization removed (a cell where the baseline memorized nothing
    counts 0), and `val_cost`, the mean validation accuracy lost against the baseline."""
    out = {}
    for v in candidates:
        shares, costs = [], []
        for corr in corruptions:
            mb, mc = (finals(runs, corr, n, seeds, MEMORIZATION) for n in (base.name, v.name))
            shares += [1 - c / b if b > 0 else 0.0 for b, c in zip(mb, mc)]
            costs += list(
                finals(runs, corr, base.name, seeds, ACCURACY)
                - finals(runs, corr, v.name, seeds, ACCURACY)
            )
        out[v.name] = {
            "reduction": float(np.mean(shares)),
            "val_cost": float(np.mean(costs)),
            "n_cells": len(shares),
        }
    return out


def choose(scores: Mapping[str, dict], max_cost: float) -> str:
    """The rule: among candidates whose `val_cost` is at most `max_cost`, the largest
    `reduction` (ties: the smaller cost, then the earlier candidate); if none qualifies, the
    smallest cost (ties: the earlier candidate)."""
    names = list(scores)
    ok = [n for n in names if scores[n]["val_cost"] <= max_cost + 1e-12]
    if ok:
        return max(
            ok, key=lambda n: (scores[n]["reduction"], -scores[n]["val_cost"], -names.index(n))
        )
    return min(names, key=lambda n: (scores[n]["val_cost"], names.index(n)))


# ---------------------------------------------------------------- the frontier and the alternatives
def frontier(
    runs: Mapping, corr: str, seeds: Sequence[int], bn: Variant, points: Sequence[Variant]
) -> dict:
    """The regularizer's frontier on the evaluation seeds: BN (lambda = 0) then `points` (one tau)
    in order of strength; `acc`, `mem`: (seeds, 1 + len(points)); `names`, `labels` ('BN',
    'lambda=0.001', ...: the figure's) and `rows` (the table's labels)."""
    vs = [bn, *points]
    return _frontier_of(
        bn,
        points,
        np.stack([finals(runs, corr, v.name, seeds, ACCURACY) for v in vs], 1),
        np.stack([finals(runs, corr, v.name, seeds, MEMORIZATION) for v in vs], 1),
    )


def _frontier_of(bn: Variant, points: Sequence[Variant], acc: np.ndarray, mem: np.ndarray) -> dict:
    lab = lambda v: f"$\\lambda$={v.mit.lam:g}" if v.mit.method == "penalty" else v.params  # noqa: E731
    return {
        "names": [v.name for v in (bn, *points)],
        "labels": ["BN"] + [lab(v) for v in points],
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
    mean = lambda key, src: float(np.mean([src[c][name][key] for c in alts]))  # noqa: E731
    return {name: mean("acc", alts), "regularizer there": mean("reg_acc", comparisons)}


def frontier_rows(
    alts: Mapping[str, Mapping],
    comparisons: Mapping[str, Mapping],
    seeds: Sequence[int],
    claim_id: str = "05.frontier",
    measure: str = "memorization",
    over: str = "seeds",
    **common,
) -> list[dict]:
    """The verdict rows `claim_id` (`05.frontier`; `05.frontier.lira` for LiRA's frontier), one per
    alternative: its `measure` minus the regularizer's at its clean accuracy over every
    (corruption, seed) cell of `alts` (the frontier's kinds; for LiRA one pool, and its targets
    in place of seeds: `over`), with the accuracy the regularizer lacks there as the confound."""
    from .claims import judge

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
                    f"{measure}, {n} minus the regularizer at {n}'s clean accuracy, {per}95% t interval over "
                    f"{len(seeds)} {over}"
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


# ---------------------------------------------------------------- the chosen setting
def summarize(histories: Sequence[dict], corr: str) -> dict:
    """One variant over its seeds on `corr` splits, mean over seeds: final memorization and
    clean test accuracy."""
    final = lambda what: float(np.mean(curves(histories, corr, what)[:, -1]))  # noqa: E731
    return {
        "final_memorization": final(MEMORIZATION),
        "clean_test_acc": final(ACCURACY),
        "n_seeds": len(histories),
    }


def reduction(base: Sequence[float], mitigated: Sequence[float]) -> Estimate:
    """The share of the baseline's final memorization the mitigation removes, per paired seed
    (`relative_reductions`), mean with a 95% Student-t interval over seeds; NaN (inconclusive)
    if the baseline memorized nothing in some seed (no share to reduce)."""
    b = np.asarray(base, np.float64)
    if not np.all(b > 0):
        return Estimate(float("nan"), float("nan"), float("nan"), len(b))
    return t_mean(relative_reductions(b, mitigated))


def paired_changes(
    mem_base: Sequence[float],
    mem_mitigated: Sequence[float],
    acc_base: Sequence[float],
    acc_mitigated: Sequence[float],
) -> dict:
    """Beside the verdict, per paired seed with a Student-t interval: the absolute reduction of
    memorization (base minus mitigated) and the change of clean test accuracy (mitigated minus
    base)."""
    return {
        "absolute_reduction": t_paired_diff(mem_base, mem_mitigated).as_dict(),
        "clean_acc_change": t_paired_diff(acc_mitigated, acc_base).as_dict(),
    }


def reduction_rows(
    runs: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    bn: Variant,
    chosen: Variant,
    nobn: Variant,
    tol: float,
    chosen_on: str,
    **common,
) -> list[dict]:
    """The verdict rows `05.reduction.<kind>`, one per corruption kind: per evaluation seed the
    share of BN's final memorization of that kind (`curve`) the chosen setting removes
    (`reduction`), judged with its clean-accuracy cost (BN's minus the chosen setting's clean
    test accuracy, mean over seeds) as the confound. Beside it: the three models' clean test
    accuracy, the absolute changes (`paired_changes`), `chosen_on` (the kinds the setting was
    chosen on) and, for rare, the rare class's held-out accuracy."""
    from .claims import judge

    rows = []
    for c in corruptions:
        mem, acc = (
            {v.name: finals(runs, c, v.name, seeds, what) for v in (bn, chosen, nobn)}
            for what in (MEMORIZATION, ACCURACY)
        )
        cost = float(np.mean(acc[bn.name] - acc[chosen.name]))
        rare = (
            {
                "rare_heldout_acc": {
                    n: float(finals(runs, c, n, seeds, HELD_OUT).mean()) for n in mem
                }
            }
            if c == "rare"
            else {}
        )
        rows.append(
            judge(
                f"05.reduction.{c}",
                reduction(mem[bn.name], mem[chosen.name]),
                acc_gap=cost,
                unit=f"share of BN's final {MEMORIZATION_WORDS.get(c, 'memorization')} removed by "
                f"{chosen.name}, per evaluation seed",
                clean_test_acc={n: float(a.mean()) for n, a in acc.items()},
                corruption=c,
                acc_cost=cost,
                acc_tolerance=tol,
                regularizer=chosen.mit.as_dict(),
                chosen_on=chosen_on,
                **rare,
                **paired_changes(mem[bn.name], mem[chosen.name], acc[bn.name], acc[chosen.name]),
                **common,
            )
        )
    return rows


def channel_scales(results: Sequence, ds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel |gamma|, running sigma = sqrt(running_var + eps) and their ratio, pooled over
    every affine BN layer of every trained model (TrainResults on dataset `ds`)."""
    g, sg = [], []
    shape = (ds.x_train.shape[1], ds.n_classes, ds.x_train.shape[2])
    for r in results:
        for _, bn in affine_bn_layers(r.model(*shape)):
            g.append(bn.weight.detach().abs())
            sg.append(running_sigma(bn))
    import torch

    g_np, s_np = torch.cat(g).numpy(), torch.cat(sg).numpy()
    return g_np, s_np, g_np / s_np


def scale_summary(gamma: np.ndarray, sigma: np.ndarray, tau: float) -> dict:
    """Median gamma/sigma, the share of channels above 1 and above `tau`, median |gamma| and
    median sigma: whether a bound was met by a smaller gamma or by a larger sigma."""
    r = gamma / sigma
    return {
        "median": float(np.median(r)),
        "frac_above_1": float((r > 1).mean()),
        "frac_above_tau": float((r > tau).mean()),
        "median_gamma": float(np.median(gamma)),
        "median_sigma": float(np.median(sigma)),
    }


# ---------------------------------------------------------------- LiRA on notebook 03's pools
@dataclass(frozen=True)
class LiraComparison:
    """LiRA on shadow pools that share one keep matrix: membership scores (T, N) per variant;
    `summary` (per variant and example group the mean over targets of AUC, balanced accuracy and
    TPR at low FPR; the shadows' mean clean test accuracy; the paired change in AUC); `delta`
    (group -> Estimate of AUC(base) - AUC(mitigated)); `per_target` (per variant the AUC of
    every target on all examples and every shadow's clean test accuracy, (T,))."""

    scores: dict
    keep: np.ndarray
    summary: dict
    delta: dict
    per_target: dict

    def roc(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(fpr, tpr) of variant `name`'s membership scores, all targets pooled."""
        from .mia import roc

        return roc(self.scores[name].ravel(), self.keep.ravel())


def lira_pools(ds, p03: Mapping, mitigation: MitigationConfig) -> tuple[dict, np.ndarray, float]:
    """Notebook 03's shadow pools at its largest outlier mix and first seed, built with 03's
    resolved parameters `p03` exactly as 03 builds them (the same split, keep matrix, configs
    and trainer: the very cache units 03 trained), for BN and no-BN, and the same pool with the
    regularizer `mitigation` (same trainer: packed LeNets carry it as one-at-a-time training does).
    Returns ({'bn', 'none', 'reg'}: ShadowPool, the pool's outlier mask, the mix); the pools come
    from `units.lira_pool`, the one definition 03 uses."""
    from . import units

    mix, seed = max(p03["outlier_frac"]), p03["seeds"][0]
    pools = {n: units.lira_pool(ds, p03, mix, seed, n) for n in ("bn", "none")}
    pools["reg"] = units.lira_pool(ds, p03, mix, seed, "bn", mitigation=mitigation)
    return pools, units.lira_split(ds, p03, mix, seed).mask.numpy(), float(mix)


def lira_frontier(
    ds,
    p03: Mapping,
    variant: str,
    n_shadows: int,
    bn: Variant,
    points: Sequence[Variant],
    alternatives: Sequence[Variant],
    chosen: Variant,
) -> dict:
    """LiRA's frontier: notebook 03's pool (its largest outlier mix, first seed, 03's recipe and
    trainer) at `n_shadows` shadows, one balanced keep matrix for all, trained for BN, every
    `points` setting (the regularizer over lambda), every alternative and the chosen setting
    (`units.lira_pool`; the keep matrix depends on the number of shadows, so these are 03's own
    units only when `n_shadows` is 03's). Per pool and target: LiRA
    `variant`'s AUC on all examples and the target's clean test accuracy. The targets play the
    seeds' part of `frontier`: `front` (`mem` is the AUC, (targets, 1 + len(points))), `alts`
    (as `alternative_points`, without the early stop: its epoch is an oracle read per seed),
    `chosen` (acc, auc), `n_shadows`, `mix` and `cmp` (per alternative `at_equal_accuracy`)."""
    from . import mia, units

    p = {**p03, "n_shadows": n_shadows}
    mix, seed = max(p["outlier_frac"]), p["seeds"][0]

    def measure(v: Variant) -> tuple[np.ndarray, np.ndarray]:
        pool = units.lira_pool(
            ds, p, mix, seed, v.norm, mitigation=v.mit, weight_decay=v.weight_decay
        )
        s = mia.lira(pool.phi, pool.keep, sigma_floor=p["sigma_floor"])[variant]
        auc = mia.evaluate_targets(s, pool.keep, {"all": np.ones(pool.keep.shape[1], bool)}).values[
            "all"
        ]["auc"]
        return np.asarray(pool.test_acc, float), np.asarray(auc, float)

    got = {v.name: measure(v) for v in dict.fromkeys([bn, *points, *alternatives, chosen])}
    vs = [bn, *points]
    front = _frontier_of(bn, points, *(np.stack([got[v.name][i] for v in vs], 1) for i in (0, 1)))
    alts = {
        v.name: {"label": v.label, "color": v.color, "acc": got[v.name][0], "mem": got[v.name][1]}
        for v in alternatives
    }
    return {
        "front": front,
        "alts": alts,
        "chosen": got[chosen.name],
        "n_shadows": n_shadows,
        "mix": float(mix),
        "cmp": {n: at_equal_accuracy(front, a) for n, a in alts.items()},
    }


def lira_frontier_rows(lf: Mapping, variant: str, **common) -> list[dict]:
    """The verdict rows `05.frontier.lira` of a `lira_frontier`: per alternative its LiRA AUC minus
    the regularizer's at its clean accuracy, t interval over the pool's targets."""
    return frontier_rows(
        {"lira": lf["alts"]},
        {"lira": lf["cmp"]},
        range(lf["n_shadows"]),
        "05.frontier.lira",
        f"LiRA ({variant}) AUC on 03's pool at {lf['n_shadows']} shadows (the targets share "
        "one data draw and serve as each other's references)",
        "targets",
        **common,
    )


LIRA_COLORS = {"bn": "bn", "none": "none", "reg": "bn_reg"}  # pool name -> plots.COLORS key


def example_groups(mask: np.ndarray) -> dict[str, np.ndarray]:
    """The example groups an attack is measured on: all, and (if any example is corrupted) the
    corrupted and the clean ones."""
    mask = np.asarray(mask, bool)
    groups = {"all": np.ones(len(mask), bool)}
    return groups | ({"corrupted": mask, "clean": ~mask} if mask.any() else {})


def compare_lira(
    pools: Mapping[str, object],
    variant: str,
    groups: Mapping[str, np.ndarray],
    base: str,
    mitigated: str,
    n_boot: int = 1000,
    sigma_floor: float = 1e-3,
) -> LiraComparison:
    """Attack every pool (`bnpaper.shadow.ShadowPool`, by variant name) with LiRA `variant`,
    each shadow in turn the target of the others (leave-one-out), and compare `base` with
    `mitigated` paired on the same targets and examples (`mia.paired_delta_auc`: bootstrap over
    targets and examples, seed 0). The pools must share their keep matrix."""
    from . import mia

    keep = np.asarray(pools[base].keep, bool)
    for name, p in pools.items():
        if not np.array_equal(p.keep, keep):
            raise ValueError(f"pool {name!r} has another keep matrix than {base!r}: not paired")
    scores = {n: mia.lira(p.phi, keep, sigma_floor=sigma_floor)[variant] for n, p in pools.items()}
    summary: dict = {}
    per_target: dict = {}
    for n, s in scores.items():
        tm = mia.evaluate_targets(s, keep, groups)
        summary[n] = {g: {k: float(np.mean(v)) for k, v in tm.values[g].items()} for g in groups}
        summary[n]["shadow_test_acc"] = float(np.mean(pools[n].test_acc))
        per_target[n] = {
            "auc": np.asarray(tm.values["all"]["auc"]),
            "test_acc": np.asarray(pools[n].test_acc, float),
        }
    delta = {
        g: mia.paired_delta_auc(
            [(scores[base], scores[mitigated], keep)],
            mask_per_run=[np.asarray(m, bool)],
            n_boot=n_boot,
            seed=0,
        )
        for g, m in groups.items()
    }
    summary["delta_auc_bn_minus_reg"] = {g: d.as_dict() for g, d in delta.items()}
    return LiraComparison(scores, keep, summary, delta, per_target)


def lira_row(
    comparison: LiraComparison,
    variants: Mapping[str, Variant],
    variant: str,
    tol: float,
    pool: str,
    **common,
) -> dict:
    """The verdict row `05.lira`: the paired AUC change on all examples, BN minus the chosen
    setting (`variants` {'bn', 'reg', 'none'}: Variant), its shadows' clean-accuracy cost (BN's
    minus the chosen setting's) as the confound, every family's clean test accuracy beside it."""
    from .claims import judge

    acc = {v.name: comparison.summary[n]["shadow_test_acc"] for n, v in variants.items()}
    bn, reg = variants["bn"], variants["reg"]
    cost = acc[bn.name] - acc[reg.name]
    return judge(
        "05.lira",
        comparison.delta["all"],
        acc_gap=cost,
        unit=f"LiRA ({variant}) AUC, BN minus {reg.name}, 03's pool",
        clean_test_acc=acc,
        acc_cost=cost,
        acc_tolerance=tol,
        pool=pool,
        regularizer=reg.mit.as_dict(),
        **common,
    )


def jsonable(obj):
    """`obj` with numpy arrays as lists (for results.json)."""
    if isinstance(obj, Mapping):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj.tolist() if isinstance(obj, np.ndarray) else obj


# ---------------------------------------------------------------- tables
def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table; floats with 3 decimals, None as 'n/a'."""
    cell = lambda x: "n/a" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows])


def _ci(e: Estimate, digits: int = 3) -> str:
    if not (np.isfinite(e.lo) and np.isfinite(e.hi)):
        return f"{e.value:.{digits}f}"
    return f"{e.value:.{digits}f} [{e.lo:.{digits}f}, {e.hi:.{digits}f}]"


def selection_table(
    scores: Mapping[str, dict], candidates: Sequence[Variant], chosen: Variant, max_cost: float
) -> str:
    """The selection: per candidate its validation cost, the memorization share removed,
    whether it qualifies (cost <= max_cost) and which one the rule chose."""
    rows = [
        [
            v.label,
            scores[v.name]["val_cost"],
            scores[v.name]["reduction"],
            "yes" if scores[v.name]["val_cost"] <= max_cost + 1e-12 else "no",
            "**chosen**" if v == chosen else "",
        ]
        for v in candidates
    ]
    return markdown_table(
        [
            "candidate",
            "validation accuracy cost vs BN",
            "share of BN's memorization removed",
            f"cost <= {max_cost:g}",
            "",
        ],
        rows,
    )


def frontier_table(
    fronts: Mapping[str, Mapping],
    alts: Mapping[str, Mapping],
    comparisons: Mapping[str, Mapping],
    measure: str = "memorization",
) -> str:
    """Per corruption: every frontier point and every alternative with clean test accuracy and
    memorization (or `measure`: LiRA's frontier, over its targets) (mean [95% t interval] over seeds); for an alternative also the regularizer's
    memorization at its accuracy, the difference (alternative minus regularizer) and the
    accuracy the regularizer lacks there."""
    rows = []
    for corr, f in fronts.items():
        for j, lab in enumerate(f["rows"]):
            rows.append(
                [corr, lab, _ci(t_mean(f["acc"][:, j])), _ci(t_mean(f["mem"][:, j])), "", "", ""]
            )
        for name, a in alts[corr].items():
            c = comparisons[corr][name]
            stop = f" (epochs {', '.join(map(str, a['epoch']))})" if "epoch" in a else ""
            rows.append(
                [
                    corr,
                    a["label"] + stop,
                    _ci(t_mean(a["acc"])),
                    _ci(t_mean(a["mem"])),
                    f"{np.mean(c['reg_mem']):.3f}",
                    _ci(t_mean(c["diff"])),
                    f"{np.mean(c['gap']):+.3f}",
                ]
            )
    return markdown_table(
        [
            "corruption",
            "model",
            "clean test acc.",
            measure,
            f"regularizer's {measure} at this acc.",
            "alternative minus regularizer",
            "acc. the regularizer lacks",
        ],
        rows,
    )


def judged_table(
    runs: Mapping, corruptions: Sequence[str], seeds: Sequence[int], variants: Sequence[Variant]
) -> str:
    """The judged models per corruption kind on the evaluation seeds: final memorization (per
    kind, `curve`) and clean test accuracy (mean [95% t interval]), and what the memorization is
    made of: the atypical subset's accuracy on its training labels and, for rare, the rare
    class's held-out accuracy (memorization = the first minus the second)."""
    rows = []
    for c in corruptions:
        for v in variants:
            f = lambda what: finals(runs, c, v.name, seeds, what)  # noqa: E731
            rows.append(
                [
                    c,
                    v.label,
                    _ci(t_mean(f(MEMORIZATION))),
                    float(f(SUBSET_ACC).mean()),
                    float(f(HELD_OUT).mean()) if c == "rare" else None,
                    _ci(t_mean(f(ACCURACY))),
                ]
            )
    return markdown_table(
        [
            "corruption",
            "model",
            "final memorization",
            "atypical samples' accuracy (training labels)",
            "rare: held-out accuracy of the class",
            "clean test acc.",
        ],
        rows,
    )


def lira_table(comparison: LiraComparison, labels: Mapping[str, str]) -> str:
    """Per variant and example group the mean AUC and TPR at 1% FPR over targets, beside the
    shadows' clean test accuracy; `labels` {pool name: label}."""
    s = comparison.summary
    rows = [
        [labels[n], g, m["auc"], m["tpr@0.01"], s[n]["shadow_test_acc"]]
        for n in labels
        for g, m in s[n].items()
        if g != "shadow_test_acc"
    ]
    return markdown_table(["model", "examples", "AUC", "TPR@1%FPR", "clean test acc."], rows)


# ---------------------------------------------------------------- figure text
LIRA_NAMES = {
    "online": "online",
    "online_fixed": "online, global variance",
    "offline": "offline",
    "offline_fixed": "offline, global variance",
}


def row_line(row: Mapping) -> str:
    """One verdict row of notebook 05 in a line of rounded text (the closing printout): what it
    measures, the estimate with its interval (or why there is none), the accuracy cost, the
    verdict and the clean test accuracy beside it."""
    if row["id"] == "05.lira":
        what = "LiRA AUC, BN minus chosen"
    elif row["id"].startswith("05.frontier"):
        what = (
            f"vs {row.get('alternative')}: {'LiRA AUC' if row['id'].endswith('lira') else 'memorization'}"
            " minus the regularizer's at equal accuracy"
        )
    else:
        c = row.get("corruption")
        what = f"{c}: share of BN's {MEMORIZATION_WORDS.get(c, 'memorization')} removed"
    est = (
        f"{row['measured']:+.3f} [{row['lo']:+.3f}, {row['hi']:+.3f}]"
        if np.isfinite(row["measured"])
        else "no estimate (BN's memorization not above 0 in every seed: no share to remove)"
    )
    accs = ", ".join(f"{n} {a:.3f}" for n, a in row["clean_test_acc"].items())
    held = ", ".join(f"{n} {a:.3f}" for n, a in row.get("rare_heldout_acc", {}).items())
    change = row.get("clean_acc_change")
    if row["id"].startswith("05.frontier"):
        cost = f"accuracy gap (compared model minus regularizer there) {row['acc_cost']:+.3f}"
    elif change is not None:
        cost = (
            f"clean accuracy change {change['value']:+.3f} [{change['lo']:+.3f}, {change['hi']:+.3f}]"
            if np.isfinite(change["lo"])
            else f"clean accuracy change {change['value']:+.3f}"
        )
    else:
        cost = f"accuracy cost {row['acc_cost']:+.3f}"
    return (
        f"- {what} {est}; {cost} -> {row['verdict']}"
        f"{' (' + row['magnitude'] + ')' if row['magnitude'] else ''}; clean test acc.: {accs}"
        f"{'; held-out acc. of the rare class: ' + held if held else ''}"
    )


def kind_title(corr: str, n_atypical: int, n_train: int, n_classes: int) -> str:
    """What the atypical samples of a corruption kind are, and how many of the training subset."""
    if corr == "rare":
        return (
            f"a rare class: {n_atypical} of {n_train} training samples "
            f"(natural share {1 / n_classes:.0%})"
        )
    return f"{CORRUPTION_WORDS.get(corr, corr)}: {n_atypical} of {n_train} training samples"


def curve_label(label: str, s: Mapping) -> str:
    """Legend entry of a memorization curve from its `summarize` row: seeds and final values."""
    return (
        f"{label}, {s['n_seeds']} seeds\nfinal: memorization {s['final_memorization']:.2f},"
        f" clean test acc. {s['clean_test_acc']:.2f}"
    )


def scale_label(label: str, ratios: np.ndarray, n_models: int, clean_acc: float) -> str:
    """Legend entry of a gamma/sigma histogram: models, channels, median, share > 1, clean acc."""
    r = np.asarray(ratios)
    return (
        f"{label}: {len(r)} channels of {n_models} models\nmedian {np.median(r):.2f}, "
        f"{(r > 1).mean():.0%} above 1; clean test acc. {clean_acc:.2f}"
    )


def scale_lines(tau: float | None) -> dict[str, float]:
    """Reference lines of the gamma/sigma histograms {label: x}: a bound tau (None: no bound)
    and the paper's reference 1 (gamma/sigma > 1 in most channels), one line if equal."""
    paper = "paper: $|\\gamma|/\\sigma$ > 1 in most channels"
    if tau is None:
        return {f"1 ({paper})": 1.0}
    if np.isclose(tau, 1.0):
        return {f"1 = $\\tau$, the regularizer's bound ({paper})": 1.0}
    return {f"$\\tau$ = {tau:g}, the regularizer's bound": tau, f"1 ({paper})": 1.0}


def lira_labels(comparison: LiraComparison, labels: Mapping[str, str]) -> dict[str, str]:
    """Legend entries of the LiRA ROC figure by pool name: AUC beside clean test accuracy."""
    s = comparison.summary
    return {
        n: f"{lab}\nmean AUC per target {s[n]['all']['auc']:.2f}, clean test acc. "
        f"{s[n]['shadow_test_acc']:.2f}"
        for n, lab in labels.items()
    }


def lira_reading(comparison: LiraComparison, base: str, mitigated: str, tol: float) -> str:
    """What the LiRA comparison says, in words computed from its numbers: a lower AUC is a
    privacy gain only if the mitigated models keep the clean test accuracy (within `tol`)."""
    s, d = comparison.summary, comparison.delta["all"]
    auc = f"{s[mitigated]['all']['auc']:.2f}, without it {s[base]['all']['auc']:.2f}"
    cost = s[base]["shadow_test_acc"] - s[mitigated]["shadow_test_acc"]
    acc = f"{s[mitigated]['shadow_test_acc']:.2f}, without it {s[base]['shadow_test_acc']:.2f}"
    if d.hi < 0:
        return f"With the regularizer the AUC is higher ({auc}); clean test accuracy {acc}."
    if not d.lo > 0:
        return (
            f"With the regularizer the AUC does not clearly change ({auc}; the 95% interval of "
            f"the difference includes 0); clean test accuracy {acc}."
        )
    if cost > tol:
        return (
            f"With the regularizer the AUC is lower ({auc}) but so is clean test accuracy "
            f"({acc}: {cost:.2f} lower, tolerance {tol:.2f}). A lower AUC at lower clean "
            "accuracy is that of a weaker model, not a privacy win."
        )
    return (
        f"With the regularizer the AUC is lower ({auc}) without losing clean test accuracy "
        f"({acc}, tolerance {tol:.2f}): a privacy gain at equal utility."
    )


def lira_title(
    comparison: LiraComparison,
    variant: str,
    n_shadows: int,
    what: str,
    base: str,
    mitigated: str,
    tol: float,
    width: int = 64,
) -> str:
    """Title of the LiRA ROC figure: the attack, the pool (`what`), then `lira_reading`."""
    head = (
        f"LiRA ({LIRA_NAMES.get(variant, variant)}) on notebook 03's pool ({what}): "
        f"{n_shadows} shadow models per family, each the target of the other {n_shadows - 1}"
    )
    return "\n".join(
        textwrap.wrap(head, width)
        + textwrap.wrap(lira_reading(comparison, base, mitigated, tol), width)
    )
