"""The pre-registered choice of the regularizer's setting, on selection seeds and held-out data.

Every candidate and plain BN train on subsets of the training set minus held-out validation
images (`selection_splits`), on seeds disjoint from the evaluation seeds; the rule written in
claims.yaml (`settings.selection`) picks one candidate from their validation accuracy and
memorization (`selection_scores`, `choose`); only that one is judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .variants import ACCURACY, GRID, MEMORIZATION, SplitRecipe, Variant, finals, train_grid


def selection_splits(
    ds, corruptions: Sequence[str], seeds: Sequence[int], recipe: SplitRecipe, n_val: int
) -> dict[tuple[str, int], object]:
    """The selection splits {(corruption, seed): Split} of the flip and OOD kinds, drawn by
    `recipe` (its size, share and OOD source; one test image, unused): subsets of
    `ds`'s training set minus `n_val` held-out validation images (`data.hold_out`), the
    validation images as their test set (`data.with_validation`): a selection model never sees
    a test image. A rare kind is refused: it is judged only (`variants.grid_kinds`)."""
    from .data import hold_out, make_split, with_validation

    if set(corruptions) - set(GRID):
        raise ValueError(
            f"selection on corruptions={list(corruptions)!r}: the setting is chosen on "
            f"{list(GRID)} only (a rare kind is judged, never chosen on)"
        )
    rest, x_val, y_val = hold_out(ds, n_val)
    return {
        (c, s): with_validation(
            make_split(rest, recipe.n_train, c, recipe.noise_frac, s, recipe.ood_source, 1),
            x_val,
            y_val,
        )
        for c in corruptions
        for s in seeds
    }


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


def qualifies(score: Mapping, max_cost: float) -> bool:
    """Whether a candidate's validation cost is within the rule's `max_cost`."""
    return score["val_cost"] <= max_cost + 1e-12


def choose(scores: Mapping[str, dict], max_cost: float) -> str:
    """The rule: among candidates whose `val_cost` is at most `max_cost`, the largest
    `reduction` (ties: the smaller cost, then the earlier candidate); if none qualifies, the
    smallest cost (ties: the earlier candidate)."""
    names = list(scores)
    ok = [n for n in names if qualifies(scores[n], max_cost)]
    if ok:
        return max(
            ok, key=lambda n: (scores[n]["reduction"], -scores[n]["val_cost"], -names.index(n))
        )
    return min(names, key=lambda n: (scores[n]["val_cost"], names.index(n)))


@dataclass(frozen=True)
class Selection:
    """The outcome of the selection: the rule (claims.yaml), every candidate's scores, the
    candidates in order, the chosen one, the selection seeds and the kinds chosen on."""

    rule: dict
    scores: dict
    candidates: tuple[Variant, ...]
    chosen: Variant
    seeds: tuple[int, ...]
    kinds: tuple[str, ...]

    @property
    def max_cost(self) -> float:
        """The most validation accuracy a candidate may cost."""
        return float(self.rule["max_val_cost"])

    def as_dict(self) -> dict:
        """The selection as results.json stores it."""
        return {
            "rule": self.rule,
            "scores": self.scores,
            "chosen": self.chosen.name,
            "seeds": list(self.seeds),
        }


def select(
    runs: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    base: Variant,
    candidates: Sequence[Variant],
    section: str = "05",
) -> Selection:
    """Score the candidates against `base` on the selection runs and apply the written rule."""
    rule = selection_rule(section)
    scores = selection_scores(runs, corruptions, seeds, base, candidates)
    name = choose(scores, rule["max_val_cost"])
    chosen = next(v for v in candidates if v.name == name)
    return Selection(rule, scores, tuple(candidates), chosen, tuple(seeds), tuple(corruptions))


def train_selection(
    ds,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    models: Sequence[Variant],
    config,
    recipe: SplitRecipe,
    n_val: int,
    trainer: str = "auto",
) -> dict[tuple[str, str, int], object]:
    """Every model of `models` trained from `config` (a `train.TrainConfig`) on the selection
    splits (`selection_splits`) as cached units: {(corruption, name, seed): TrainResult}."""
    splits = selection_splits(ds, corruptions, seeds, recipe, n_val)
    return train_grid(splits, models, config, "selection: ", trainer)
