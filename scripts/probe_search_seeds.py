"""An exploratory probe, not a judged run: how well notebook 03's learning-rate search tells its
grid rates apart, seed by seed. It trains 03's own search models (its cached units: the same keys
as the notebook's) on more search seeds than the notebook uses, in groups of seeds that each train
as one call (a group equal to the notebook's `lr_seeds`, in the same order, forms the notebook's
own packs, so it gives the notebook's search again), and prints, per norm:

- each seed's validation accuracy at every grid rate (null: diverged), and which rate the rule of
  claims.yaml (`settings.lr_selection`, `lr_choice.choose_lr`) picks from each group and from
  every seed (null where every rate failed);
- per grid rate, the mean over every seed and its paired difference to the rate the rule picks
  from every seed, in points, with a 95% t interval over the seeds (paired: a seed's models share
  their training subset and validation images).

It asks whether more search seeds would resolve the near-ties of the search (docs/protocol.md);
no verdict reads it. For example, on the quick reference's parameters:

    python scripts/probe_search_seeds.py --groups 0,1,2 3,4,5
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace

import numpy as np

from bnpaper import exposure, params, recipes
from bnpaper.config import ConfigError, check_number
from bnpaper.data import load_dataset
from bnpaper.lr_choice import choose_lr
from bnpaper.stats import t_paired_diff
from bnpaper.train import TrainConfig


def parse_groups(texts: list[str]) -> list[tuple[int, ...]]:
    """'0,1,2' '3,4,5' -> [(0, 1, 2), (3, 4, 5)]: seeds >= 0, none in two groups; else one
    `ConfigError` naming the group and what is allowed."""
    groups, seen = [], set()
    for i, text in enumerate(texts):
        try:
            seeds = tuple(int(x) for x in text.split(","))
        except ValueError:
            raise ConfigError(
                f"--groups[{i}]={text!r} is not a comma-separated list of seeds; allowed: e.g. "
                "0,1,2"
            ) from None
        for j, s in enumerate(seeds):
            check_number(f"--groups[{i}][{j}]", s, 0, None, integer=True)
        if seen & set(seeds) or len(set(seeds)) < len(seeds):
            raise ConfigError(
                f"--groups[{i}]={text!r} repeats a seed; allowed: every seed in one group only"
            )
        seen |= set(seeds)
        groups.append(seeds)
    return groups


def _choice(grid, acc, fit, norm: str) -> float | None:
    """The rule's pick, or None where every grid rate failed (a diverged seed at each)."""
    try:
        return choose_lr(grid, acc, norm=norm, fitted=fit).lr
    except ConfigError:
        return None


def norm_report(grid, groups, acc: dict, fit: dict, norm: str = "") -> dict:
    """One norm's search, seed by seed: `acc` and `fit` {seed: per grid rate}."""
    seeds = [s for g in groups for s in g]
    best = _choice(grid, [acc[s] for s in seeds], [fit[s] for s in seeds], norm)
    k = None if best is None else grid.index(best)
    rates = []
    for i, lr in enumerate(grid):
        a = np.array([acc[s][i] for s in seeds])
        row = {"lr": lr, "mean": round(float(np.mean(a)), 4) if np.all(np.isfinite(a)) else None}
        row["fitted"] = f"{sum(fit[s][i] for s in seeds)} of {len(seeds)}"
        if k is not None and i != k and np.all(np.isfinite(a)):
            d = t_paired_diff(a, [acc[s][k] for s in seeds])
            row["vs_chosen_points"] = d.fmt(digits=2, scale=100.0)
        rates.append(row)
    return {
        "per_seed": {s: [None if math.isnan(x) else round(x, 4) for x in acc[s]] for s in seeds},
        "chosen_per_group": {
            ",".join(map(str, g)): _choice(grid, [acc[s] for s in g], [fit[s] for s in g], norm)
            for g in groups
        },
        "chosen_every_seed": best,
        "rates": rates,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="fashion_mnist")
    ap.add_argument("--budget", default="quick", help="which params/<budget>.yaml applies")
    ap.add_argument("--groups", nargs="+", required=True, help="seed groups, e.g. 0,1,2 3,4,5")
    args = ap.parse_args(argv)
    try:  # bad input: one line, before any training
        groups = parse_groups(args.groups)
        p = params.resolve("03_lira", {"dataset": args.dataset, "budget": args.budget}).values
        if p["protocol"] != "fair":
            raise ConfigError(
                f"budget={args.budget!r} runs 03 under protocol={p['protocol']!r}; "
                "allowed: a budget whose 03 runs the fair protocol"
            )
        q, norms, n_train = exposure.lira_search_params(p)
        recipes.check_protocol(q)
        base = TrainConfig.from_params(q)
        search = recipes.Search.from_params(q, n_train)
        ds = load_dataset(p["dataset"])
    except ConfigError as e:
        raise SystemExit(f"probe_search_seeds: {e}") from None
    grid = list(search.grid)
    acc: dict[str, dict[int, list[float]]] = {n: {} for n in norms}
    fit: dict[str, dict[int, list[bool]]] = {n: {} for n in norms}
    start = time.time()
    for g in groups:
        at = replace(search, seeds=g)
        models = recipes.search_models(ds, base, norms, at, q["trainer"])
        for n in norms:
            a, f = recipes.search_table(models, n, at)
            acc[n].update(zip(g, a))
            fit[n].update(zip(g, f))
    out = {
        "notebook_lr_seeds": list(p["lr_seeds"]),
        "grid": grid,
        "norms": {n: norm_report(grid, groups, acc[n], fit[n], n) for n in norms},
        "seconds": round(time.time() - start, 1),
    }
    print(json.dumps(out, indent=1, default=float), flush=True)


if __name__ == "__main__":
    main()
