"""An exploratory probe, not a judged run: notebook 03's BN minus no-BN LiRA AUC on its clean
pools, with BN's shadows trained at each of several learning rates instead of the one its search
chose, and no-BN's at its chosen rate. It asks how far 03's verdicts depend on BN's rate when the
search cannot tell BN's grid rates apart (docs/results.md). No verdict reads it.

The pools, shadows and search are 03's own cached units (the same keys as the notebook's, so a
rate the notebook already trained is served from the run cache); the parameters are 03's,
resolved as the notebook resolves them (defaults, params/<dataset>.yaml, params/<budget>.yaml).
Each line printed is one BN rate, as JSON: the shadows' fit (clean training accuracy on their IN
examples, epochs, censored models) and clean test accuracy per norm, and BN minus no-BN in online
and fixed-variance online LiRA AUC (points; a t interval over the pools) at the end of training
and at each of 03's `fit_levels`. For example, on the quick reference's pools:

    python scripts/probe_lira_lr.py --bn-lrs 0.005 0.0158 0.05 0.158
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from bnpaper import exposure, lira_fit, params
from bnpaper.config import ConfigError, check_number
from bnpaper.data import load_dataset
from bnpaper.lr_choice import LR_MAX
from bnpaper.pool_units import LiraRecipe


def _estimate(e) -> list[float]:
    return [round(e.value, 3), round(e.lo, 3), round(e.hi, 3)]


def _reading(pools: exposure.Pools, sigma_floor: float) -> dict:
    """BN minus no-BN on the clean pools' examples, per attack, and each norm's fit."""
    scores = exposure.attack_scores(pools, sigma_floor)
    out = {}
    for attack in ("online", "online_fixed"):
        deltas = exposure.online_deltas(pools, scores, attack=attack)
        out[f"delta_auc_{attack}"] = _estimate(deltas[0.0, "all"])
    for norm in ("bn", "none"):
        fit = pools.fit[0.0][norm]
        out[norm] = {
            "clean_train_acc": round(fit["train_clean_acc"], 4),
            "epochs_mean": round(fit["epochs_mean"], 1),
            "censored": f"{fit['censored']} of {fit['models']}",
            "test_acc": round(pools.acc[0.0][norm], 4),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="fashion_mnist")
    ap.add_argument("--budget", default="quick", help="which params/<budget>.yaml applies")
    ap.add_argument("--bn-lrs", type=float, nargs="+", required=True, help="BN's rates to try")
    args = ap.parse_args(argv)
    try:  # bad input: one line, before any training
        p = params.resolve("03_lira", {"dataset": args.dataset, "budget": args.budget}).values
        if p["protocol"] != "fair":
            raise ConfigError(
                f"budget={args.budget!r} runs 03 under protocol={p['protocol']!r}; "
                "allowed: a budget whose 03 runs the fair protocol"
            )
        for i, lr in enumerate(args.bn_lrs):
            check_number(f"--bn-lrs[{i}]", lr, 0.0, LR_MAX, lo_open=True)
        ds = load_dataset(p["dataset"])
    except ConfigError as e:
        raise SystemExit(f"probe_lira_lr: {e}") from None
    p = {**p, "norms": ["bn", "none"]}
    recipe = LiraRecipe.from_params(p, exposure.lira_norm_recipes(ds, p))
    chosen = dict(recipe.norm_lr)
    for lr in args.bn_lrs:
        start = time.time()
        at_lr = replace(recipe, norm_lr=(("bn", float(lr)), ("none", chosen["none"])))
        pools = exposure.lira_pools(ds, p, [0.0], at_lr)
        row = {"bn_lr": lr, "chosen": chosen, "pools": len(pools.seeds)}
        row["end"] = _reading(pools, p["sigma_floor"])
        for level in pools.levels:
            row[f"at_{level:g}"] = _reading(pools.at_level(level), p["sigma_floor"])
        row["at_fit_gaps"] = lira_fit.at_fit(pools.acc[0.0], pools.fit[0.0])
        row["seconds"] = round(time.time() - start, 1)
        print(json.dumps(row, default=float), flush=True)


if __name__ == "__main__":
    main()
