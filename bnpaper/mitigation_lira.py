"""LiRA with and without the chosen setting, and LiRA's frontier, on pools trained with 05's own
recipe (`own_recipe`: 03's way of drawing a pool of examples, 05's epochs, batch size, weight
decay and each norm's learning rate), one pool per seed of `lira_seeds`; the pools are the unit
(`over_pools`: an interval over pools, none from one pool).

LiRA's frontier is clean accuracy against LiRA AUC over lambda, beside the alternatives, with
pools in place of seeds (per pool the mean over its targets).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from . import frontier, mia, pool_units
from .claims import Verdict, judge
from .stats import t_mean
from .variants import Lineup, Variant


@dataclass(frozen=True)
class LiraComparison:
    """LiRA on shadow pools that share one keep matrix: membership scores (T, N) per variant;
    `summary` (per variant and example group the mean over targets of AUC, balanced accuracy and
    TPR at low FPR; the shadows' mean clean test accuracy; the paired change in AUC); `delta`
    (group -> Estimate of AUC(base) - AUC(mitigated)); `per_target` (per variant the AUC of
    every target on all examples and every shadow's clean test accuracy, (T,)); the pool's
    LiRA `variant`, the pool's outlier `mix`, its words and its number of shadows."""

    scores: dict
    keep: np.ndarray
    summary: dict
    delta: dict
    per_target: dict
    variant: str = ""  # the LiRA variant
    mix: float = float("nan")  # the pool's outlier mix (notebook 03's largest)
    pool: str = ""  # the pool in words, e.g. '10% ood outliers in 200 examples'
    n_shadows: int = 0

    def roc(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(fpr, tpr) of variant `name`'s membership scores, all targets pooled."""
        return mia.roc(self.scores[name].ravel(), self.keep.ravel())


def own_recipe(p03: Mapping, p05: Mapping, n_shadows: int) -> pool_units.LiraRecipe:
    """The pool recipe of 05's LiRA: 03's pool of examples (`n_train`, outlier kind and source,
    `n_test`, from 03's resolved parameters `p03`) with 05's training (`epochs` fixed, no fit
    rule, `batch_size`, `weight_decay`, `lr`, `trainer` of 05's parameters `p05`) and
    `n_shadows` shadows; each family's learning rate is set by `family_recipe`."""
    base = pool_units.LiraRecipe.from_params({**p03, "protocol": "paper"})
    keys = ("epochs", "batch_size", "weight_decay", "lr", "trainer")
    return dataclasses.replace(base, n_shadows=n_shadows, **{k: p05[k] for k in keys})


def family_recipe(recipe: pool_units.LiraRecipe, v: Variant, lrs: Mapping[str, float]):
    """`recipe` for family `v`: its norm's learning rate (`lrs`, 05's recipes; times the family's
    `lr_scale`) and its own weight decay when it has one."""
    lr = lrs.get(v.norm, recipe.lr) * (v.lr_scale if v.lr_scale is not None else 1.0)
    wd = recipe.weight_decay if v.weight_decay is None else v.weight_decay
    return dataclasses.replace(recipe, lr=float(lr), weight_decay=float(wd), protocol="paper")


def own_pools(ds, recipe, lrs: Mapping[str, float], mix: float, seed: int, families: Mapping):
    """{key: ShadowPool} of `families` ({key: Variant}) on pool `seed` of `recipe` at outlier
    `mix`, each trained with its `family_recipe`, all with one keep matrix; and the pool's
    outlier mask."""
    pools = {
        k: pool_units.lira_pool(
            ds, family_recipe(recipe, v, lrs), mix, seed, v.norm, mitigation=v.mit
        )
        for k, v in families.items()
    }
    return pools, pool_units.lira_split(ds, recipe, mix, seed).mask.numpy()


def over_pools(comparisons: Sequence[LiraComparison]) -> LiraComparison:
    """Several pools' comparisons as one: the first pool's scores (for ROC curves); `summary`
    the mean over pools of every number; `delta` per group the mean over pools of each pool's
    paired AUC change with a Student-t interval over pools (one pool: no interval, (-inf, inf));
    `per_target` every pool's targets concatenated."""
    first = comparisons[0]
    delta = {g: t_mean([c.delta[g].value for c in comparisons]) for g in first.delta}
    summary = _mean_tree([c.summary for c in comparisons])
    summary["delta_auc_bn_minus_reg"] = {g: d.as_dict() for g, d in delta.items()}
    summary["n_pools"] = len(comparisons)
    per_target = {
        n: {k: np.concatenate([c.per_target[n][k] for c in comparisons]) for k in pt}
        for n, pt in first.per_target.items()
    }
    return dataclasses.replace(first, summary=summary, delta=delta, per_target=per_target)


def _mean_tree(trees: Sequence):
    """The element-wise mean of dicts of numbers with one shape (non-numbers: the first's)."""
    if isinstance(trees[0], dict):
        return {k: _mean_tree([t[k] for t in trees]) for k in trees[0]}
    if isinstance(trees[0], (int, float)) and not isinstance(trees[0], bool):
        return float(np.mean(trees))
    return trees[0]


def on_own_pools(
    ds, recipe, lrs: Mapping[str, float], mix: float, seeds: Sequence[int], families, variant, floor
) -> LiraComparison:
    """LiRA `variant` on one pool per seed of `seeds` (`own_pools`) for `families` {'bn', 'reg',
    'none'}: each pool compared as `compare_lira` does (BN minus the chosen setting, every example
    group), then the pools combined (`over_pools`)."""
    from .mitigation_text import own_pool_words

    comps = []
    for seed in seeds:
        pools, mask = own_pools(ds, recipe, lrs, mix, seed, families)
        groups = mia.example_groups(mask, ("corrupted", "clean"))
        comps.append(compare_lira(pools, variant, groups, "bn", "reg", sigma_floor=floor))
    words = own_pool_words(mix, recipe, len(seeds))
    return dataclasses.replace(
        over_pools(comps), variant=variant, mix=mix, pool=words, n_shadows=recipe.n_shadows
    )


def own_lira_frontier(
    ds, recipe, lrs: Mapping[str, float], mix: float, seeds: Sequence[int], lineup: Lineup, how
) -> dict:
    """LiRA's frontier on 05's own pools (one per seed of `seeds`): per pool and family the mean
    over its targets of the clean test accuracy and of LiRA's AUC on all examples (`how`: the
    LiRA variant and sigma floor); the pools play the seeds' part of `frontier`. Keys as
    `lira_frontier` (`n_pools` for the interval's unit)."""
    variant, floor = how
    bn, points, alternatives, chosen = (
        lineup.bn,
        lineup.frontier,
        lineup.alternatives,
        lineup.chosen,
    )

    def measure(v: Variant) -> tuple[np.ndarray, np.ndarray]:
        acc, auc = [], []
        for seed in seeds:
            trained = family_recipe(recipe, v, lrs)
            pool = pool_units.lira_pool(ds, trained, mix, seed, v.norm, mitigation=v.mit)
            s = mia.lira(pool.phi, pool.keep, sigma_floor=floor)[variant]
            every = {"all": np.ones(pool.keep.shape[1], bool)}
            auc.append(np.mean(mia.evaluate_targets(s, pool.keep, every).values["all"]["auc"]))
            acc.append(np.mean(pool.test_acc))
        return np.asarray(acc, float), np.asarray(auc, float)

    got = {v.name: measure(v) for v in dict.fromkeys([bn, *points, *alternatives, chosen])}
    vs = [bn, *points]
    front = frontier.frontier_of(
        bn, points, *(np.stack([got[v.name][i] for v in vs], 1) for i in (0, 1))
    )
    alts = {
        v.name: {"label": v.label, "color": v.color, "acc": got[v.name][0], "mem": got[v.name][1]}
        for v in alternatives
    }
    return {
        "front": front,
        "alts": alts,
        "chosen": got[chosen.name],
        "n_shadows": recipe.n_shadows,
        "n_pools": len(seeds),
        "mix": float(mix),
        "cmp": {n: frontier.at_equal_accuracy(front, a) for n, a in alts.items()},
    }


def lira_frontier_rows(lf: Mapping, variant: str, **common) -> list[Verdict]:
    """The verdict rows `05.frontier.lira` of an `own_lira_frontier`: per alternative its LiRA
    AUC minus the regularizer's at its clean accuracy, t interval over pools (one pool: no
    interval)."""
    return frontier.frontier_rows(
        {"lira": lf["alts"]},
        {"lira": lf["cmp"]},
        range(lf["n_pools"]),
        "05.frontier.lira",
        f"LiRA ({variant}) AUC on {lf['n_pools']} pools of 05's recipe, "
        f"{lf['n_shadows']} shadows each (per pool the mean over its targets)",
        "pools",
        **common,
    )


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
) -> Verdict:
    """The verdict row `05.lira`: the paired AUC change on all examples, BN minus the chosen
    setting (`variants` {'bn', 'reg', 'none'}: Variant), its shadows' clean-accuracy cost (BN's
    minus the chosen setting's) as the confound, every family's clean test accuracy beside it."""
    acc = {v.name: comparison.summary[n]["shadow_test_acc"] for n, v in variants.items()}
    bn, reg = variants["bn"], variants["reg"]
    cost = acc[bn.name] - acc[reg.name]
    return judge(
        "05.lira",
        comparison.delta["all"],
        acc_gap=cost,
        unit=f"LiRA ({variant}) AUC, BN minus {reg.name}, {pool}",
        clean_test_acc=acc,
        acc_cost=cost,
        acc_tolerance=tol,
        pool=pool,
        regularizer=reg.mit.as_dict(),
        **common,
    )
