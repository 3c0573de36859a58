"""Notebook 05's verdict rows, every claim of the run in one call (`verdict_rows`)."""

from __future__ import annotations

from typing import Mapping, Sequence

from .claims import Verdict, acc_tolerance
from .frontier import Frontiers, frontier_rows
from .mitigation_lira import LiraComparison, lira_frontier_rows, lira_row
from .reduction import reduction_rows
from .mitigation_text import chosen_on_words
from .variants import Lineup, grid_kinds


def verdict_rows(
    runs: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    lineup: Lineup,
    frontiers: Frontiers,
    lira: LiraComparison | None,
    lira_frontier: Mapping | None,
    *,
    dataset: str,
    budget: str,
) -> list[Verdict]:
    """Every verdict row of notebook 05, before the verdict families' correction: the share of BN's
    memorization the chosen setting removes per kind (`05.reduction.<kind>`), its LiRA AUC change
    on 05's own pools, interval over pools (`05.lira`, if `lira`), each alternative against the
    frontier at equal accuracy (`05.frontier`) and against LiRA's frontier (`05.frontier.lira`,
    if `lira_frontier`, read with `lira`'s attack)."""
    bn, chosen, nobn = lineup.judged
    common = {"dataset": dataset, "budget": budget}
    tol = acc_tolerance("05")
    chosen_on = chosen_on_words(grid_kinds(corruptions))
    rows = reduction_rows(runs, corruptions, seeds, bn, chosen, nobn, tol, chosen_on, **common)
    if lira is not None:
        families = {"bn": bn, "reg": chosen, "none": nobn}
        rows.append(lira_row(lira, families, lira.variant, tol, lira.pool, **common))
    rows += frontier_rows(frontiers.alts, frontiers.cmp, seeds, **common)
    if lira_frontier:
        rows += lira_frontier_rows(lira_frontier, lira.variant, **common)
    return rows
