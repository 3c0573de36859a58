"""Notebook 03's membership-inference exposure: its shadow pools, every attack per example group,
the paired BN - no-BN delta-AUC, the pools with a rare class, and the verdict rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from . import claims, mia, pool_units
from .recipes import NormRecipes, norm_recipes
from .memorization import CONTROLS
from .plots import label
from .lira_fit import NEVER, at_fit, censored_note, fit_of, model_mean  # noqa: F401 (API)
from .shadow import ShadowPool
from .pool_effects import METRICS, MIN_NONMEMBERS, delta_over_pools, mean_over_pools
from .pool_effects import over_pools, scale
from .stats import Estimate

if TYPE_CHECKING:
    from .data import Dataset
    from .size_trend import SizeSweep

ONLINE = "AUC points, BN minus no-BN (online LiRA)"  # the unit of every BN - no-BN row


def over_seeds(
    per_seed: Sequence[mia.TargetMetrics],
    group: str,
    metrics: Sequence[str] = ("auc", "balanced_acc", "tpr@0.01", "tpr@0.001"),
) -> dict[str, Estimate]:
    """Each metric per pool (seed) as the mean over its targets, then the mean over the pools
    with a Student-t interval over them (`pool_effects.mean_over_pools`; one pool: no interval)."""
    return {m: mean_over_pools([t.values[group][m] for t in per_seed]) for m in metrics}


# ---------------------------------------------------------------- the pools
@dataclass(frozen=True)
class Pools:
    """Shadow pools `shadow` {(mix, seed, norm): ShadowPool} with the (N,) outlier (or rare-class)
    mask of each (mix, seed) pool; `acc` and `gap` {mix: {norm: float}}: clean test accuracy and
    train-test gap, means over the models of every seed; `fit` {mix: {norm: `fit_of`}}: clean
    training accuracy on the IN examples, epochs used, censored models. The norms of a (mix, seed)
    share one keep matrix: every comparison between them is paired."""

    shadow: Mapping[tuple, ShadowPool]
    masks: Mapping[tuple, np.ndarray]
    acc: Mapping[object, Mapping[str, float]]
    gap: Mapping[object, Mapping[str, float]]
    fit: Mapping[object, Mapping[str, dict]]

    @classmethod
    def of(cls, shadow: Mapping[tuple, ShadowPool], masks: Mapping[tuple, np.ndarray]) -> Pools:
        """The pools with their utility, means over the models of every seed."""
        mixes, seeds, norms = (list(dict.fromkeys(k[i] for k in shadow)) for i in range(3))
        means = {
            f: {
                m: {n: model_mean([shadow[m, s, n] for s in seeds], f) for n in norms}
                for m in mixes
            }
            for f in ("test_acc", "gap")
        }
        fit = {m: {n: fit_of([shadow[m, s, n] for s in seeds]) for n in norms} for m in mixes}
        return cls(dict(shadow), dict(masks), means["test_acc"], means["gap"], fit)

    @property
    def mixes(self) -> list:
        return list(dict.fromkeys(k[0] for k in self.shadow))

    @property
    def seeds(self) -> list[int]:
        return list(dict.fromkeys(k[1] for k in self.shadow))

    @property
    def norms(self) -> list[str]:
        return list(dict.fromkeys(k[2] for k in self.shadow))

    @property
    def n_models(self) -> int:
        return sum(len(p.keep) for p in self.shadow.values())

    def groups(self, mix, seed: int) -> dict[str, np.ndarray]:
        """The example groups of the (mix, seed) pool: all, outliers, inliers."""
        return mia.example_groups(self.masks[mix, seed])

    @property
    def levels(self) -> list[float]:
        """The clean training accuracies every shadow was also kept at (`at_level`)."""
        kept = [set(p.at_levels or ()) for p in self.shadow.values()]
        return sorted(set.intersection(*kept)) if kept else []

    def at_level(self, level: float) -> Pools:
        """The same pools read at clean training accuracy `level`: every shadow at its first
        epoch reaching it (`ShadowPool.at_levels`; one that never did: at its end, censored)."""
        return Pools.of({k: p.at_levels[level] for k, p in self.shadow.items()}, self.masks)


def lira_pools(
    ds: Dataset, p: Mapping, mixes: Sequence, recipe: pool_units.LiraRecipe | None = None
) -> Pools:
    """Notebook 03's pools from its resolved parameters `p` and shadow `recipe` (default: the
    paper's protocol, `LiraRecipe.from_params(p)`): per mix (or "rare") and seed of p['seeds']
    one pool of examples, and p['n_shadows'] models per norm of p['norms']."""
    recipe = recipe or pool_units.LiraRecipe.from_params(p)
    seeds = p["seeds"]
    masks = {
        (m, s): pool_units.lira_split(ds, recipe, m, s).mask.numpy() for m in mixes for s in seeds
    }
    shadow = {
        (m, s, n): pool_units.lira_pool(ds, recipe, m, s, n) for m, s in masks for n in p["norms"]
    }
    return Pools.of(shadow, masks)


def lira_norm_recipes(
    ds: Dataset, p: Mapping, extra: Sequence[str] = (), store=None
) -> NormRecipes:
    """The recipes of 03's norms (`p['norms']`, and `extra` ones: 05's frontier alternatives)
    from its resolved parameters `p`: under the fair protocol each norm's learning rate searched
    (cached units, one per norm, lr and seed) on n_train // 2 clean images, the shadows'
    training-set size; the same units whoever asks (03, 05)."""
    p, norms, n_train = lira_search_params(p, extra)
    return norm_recipes(ds, p, norms, p["trainer"], n_train=n_train, store=store)


def lira_search_params(p: Mapping, extra: Sequence[str] = ()) -> tuple[dict, list[str], int]:
    """What 03's learning-rate search reads of its resolved parameters `p`: the parameters (no
    protocol named: the paper's; augment 'auto' resolved as the shadows' is), the norms (`p`'s,
    then `extra`) and the search's training-set size (n_train // 2, the shadows')."""
    p = {"protocol": "paper", **p, "augment": pool_units.augment_of(p)}
    norms = list(dict.fromkeys([*p.get("norms", ("bn", "none")), *extra]))
    return p, norms, p["n_train"] // 2


def per_model(pools: Pools) -> dict:
    """Every model's clean test accuracy, training accuracy (all and clean IN examples), train-test
    gap, epochs trained and censoring, by pool key."""
    return {
        "/".join(map(str, k)): {
            "test_acc": p.test_acc.tolist(),
            "train_acc": p.train_acc.tolist(),
            "train_clean_acc": p.train_clean_acc.tolist(),
            "gap": p.gap.tolist(),
            "epochs": None if p.epochs is None else p.epochs.tolist(),
            "censored": None if p.censored is None else p.censored.tolist(),
        }
        for k, p in pools.shadow.items()
    }


def recipe_results(recipes: NormRecipes, recipe: pool_units.LiraRecipe, pools) -> dict:
    """What results.json records of the recipes: `recipes.as_dict()` (the protocol, each
    norm's learning rate, the fit rule, the search), the shadows' rule (`shadows`) and how every
    norm's shadows fit per pool (`fit`, `fit_results` of `pools`)."""
    return {**recipes.as_dict(), "shadows": recipe.as_dict(), "fit": fit_results(pools)}


def fit_results(pools: Pools | Sequence[Pools | None]) -> dict:
    """How every norm's models fit per mix of `pools` (one or a list; None left out), as
    results.json stores it {"mix/norm": `fit_of`}."""
    every = [p for p in (pools if isinstance(pools, (list, tuple)) else [pools]) if p is not None]
    return {f"{m}/{n}": f for p in every for m, by in p.fit.items() for n, f in by.items()}


# ---------------------------------------------------------------- the attacks
def attack_scores(pools: Pools, sigma_floor: float) -> dict:
    """Every attack's membership scores {(mix, seed, norm): {attack: (M targets, N)}}."""
    return {key: mia.pool_scores(pool, sigma_floor) for key, pool in pools.shadow.items()}


def target_metrics(pools: Pools, scores: Mapping) -> dict:
    """Every attack's per-target metrics on each example group {key: {attack: TargetMetrics}}."""
    return {
        key: {
            a: mia.evaluate_targets(s[a], pools.shadow[key].keep, pools.groups(*key[:2]))
            for a in mia.ATTACKS
        }
        for key, s in scores.items()
    }


def attack_table(pools: Pools, metrics: Mapping) -> dict[str, dict]:
    """Every attack's metrics per (mix, norm, group): per pool the mean over its targets, then the
    mean over the pools with a t interval over them (`over_seeds`; one pool: n/a), next to clean
    test accuracy and train-test gap: the results entry {"mix/norm/group/attack": {metric:
    estimate, n_nonmembers, clean_test_acc, ...}}."""
    seeds, table = pools.seeds, {}
    for mix in pools.mixes:
        for norm in pools.norms:
            for group, mask in pools.groups(mix, seeds[0]).items():
                n_out = int((~pools.shadow[mix, seeds[0], norm].keep[0][mask]).sum())
                for attack in mia.ATTACKS:
                    per_seed = [metrics[mix, s, norm][attack] for s in seeds]
                    e = over_seeds(per_seed, group)
                    table[f"{mix}/{norm}/{group}/{attack}"] = {
                        **{m: v.as_dict() for m, v in e.items()},
                        "n_nonmembers": n_out,
                        "clean_test_acc": pools.acc[mix][norm],
                        "train_test_gap": pools.gap[mix][norm],
                    }
    return table


# ---------------------------------------------------------------- the paired effects, over pools
def n_nonmembers(pools: Pools, mix, group: str) -> int:
    """The fewest non-members a target has in `group` at `mix`, over every pool and target."""
    return min(
        int((~p.keep[:, pools.groups(mix, s)[group]]).sum(1).min())
        for (m, s, _), p in pools.shadow.items()
        if m == mix
    )


def attack_effects(
    pools: Pools, metrics: Mapping, norm: str = "bn", base: str = "none"
) -> dict[tuple, Estimate]:
    """`norm` minus `base` (default BN minus no-BN) for every attack of `mia.ATTACKS` and metric of
    `pool_effects.METRICS` (AUC, TPR at 1% and 0.1% FPR), in points, per (mix, group, attack,
    metric): per pool the mean over its targets of the paired difference (the norms of a pool
    share its keep matrix: the same targets and examples), then a t interval over the pools
    (`over_pools`; one pool: n/a). `metrics`: `target_metrics`."""
    out = {}
    for mix in pools.mixes:
        for g in pools.groups(mix, pools.seeds[0]):
            for attack in mia.ATTACKS:
                for m in METRICS:
                    per_pool = [
                        np.nanmean(
                            metrics[mix, s, norm][attack].values[g][m]
                            - metrics[mix, s, base][attack].values[g][m]
                        )
                        for s in pools.seeds
                    ]
                    out[mix, g, attack, m] = scale(over_pools(per_pool))
    return out


def effect_results(pools: Pools, effects: Mapping[tuple, Estimate]) -> dict:
    """The effect per attack as results.json stores it (key "effect_per_attack"):
    {"mix/group/attack/metric": {value, lo, hi, n (pools), level, n_nonmembers (the fewest a
    target has), resolvable (enough non-members for the metric: `MIN_NONMEMBERS`)}}, in points,
    BN minus no-BN."""
    out = {}
    for (mix, g, attack, m), e in effects.items():
        n0 = n_nonmembers(pools, mix, g)
        out[f"{mix}/{g}/{attack}/{m}"] = {
            **e.as_dict(),
            "n_nonmembers": n0,
            "resolvable": n0 >= MIN_NONMEMBERS[m],
        }
    return out


def online_deltas(
    pools: Pools,
    scores: Mapping,
    norm: str = "bn",
    base: str = "none",
    attack: str = "online",
    metric: str = "auc",
) -> dict[tuple, Estimate]:
    """`norm` minus `base` (default BN minus no-BN) in `attack`'s `metric` (default online LiRA's
    AUC), in points, per (mix, group): `pool_effects.delta_over_pools`, one paired estimate per
    pool (targets and examples nested inside it), a t interval over the pools (one pool: n/a).
    The norms of one (mix, seed) share their keep matrix: paired on the same targets and
    examples."""
    seeds, out = pools.seeds, {}
    for mix in pools.mixes:
        runs = [
            (
                scores[mix, s, norm][attack],
                scores[mix, s, base][attack],
                pools.shadow[mix, s, norm].keep,
            )
            for s in seeds
        ]
        for g in pools.groups(mix, seeds[0]):
            masks = [pools.groups(mix, s)[g] for s in seeds]
            out[mix, g] = delta_over_pools(runs, masks, metric)
    return out


@dataclass(frozen=True)
class LevelReading:
    """LiRA at matched fit below the fit level: per level of `Pools.levels` the pools read there
    (`pools`) and BN minus no-BN in online-LiRA AUC points per (mix, group) (`deltas`, over
    pools as `online_deltas`)."""

    pools: Mapping[float, Pools]
    deltas: Mapping[float, Mapping[tuple, Estimate]]

    def results(self) -> dict:
        """What results.json stores: per level and mix, the delta on all examples with both
        norms' clean training and test accuracy, epochs used and censored models."""
        return {
            f"{level:g}": {
                f"{mix}": {
                    "delta_auc": self.deltas[level][mix, "all"].as_dict(),
                    **at_fit(lp.acc[mix], lp.fit[mix]),
                    "clean_test_acc": dict(lp.acc[mix]),
                }
                for mix in lp.mixes
            }
            for level, lp in self.pools.items()
        }


def level_reading(pools: Pools, sigma_floor: float) -> LevelReading:
    """BN minus no-BN online-LiRA delta-AUC at every level the shadows were kept at, from
    the same models' weights at the first epoch each reached it (no model trained again)."""
    at = {level: pools.at_level(level) for level in pools.levels}
    deltas = {}
    for level, lp in at.items():
        scores = {k: mia.lira(p.phi, p.keep, sigma_floor=sigma_floor) for k, p in lp.shadow.items()}
        deltas[level] = online_deltas(lp, scores)
    return LevelReading(at, deltas)


def delta_results(deltas: Mapping[tuple, Estimate]) -> dict:
    """The delta-AUC estimates as results.json stores them {"mix/group": estimate}."""
    return {f"{m}/{g}": e.as_dict() for (m, g), e in deltas.items()}


def pooled_rocs(pools: Pools, scores: Mapping, mix: float) -> dict:
    """Online LiRA's ROC curve per group (all, outliers) and norm at `mix`, every target of every
    seed pooled: {group: {norm: (fpr, tpr)}}."""
    seeds, out = pools.seeds, {}
    for g in [g for g in ("all", "outliers") if g in pools.groups(mix, seeds[0])]:
        for n in pools.norms:
            s = [scores[mix, sd, n]["online"][:, pools.groups(mix, sd)[g]].ravel() for sd in seeds]
            y = [pools.shadow[mix, sd, n].keep[:, pools.groups(mix, sd)[g]].ravel() for sd in seeds]
            out.setdefault(g, {})[n] = mia.roc(np.concatenate(s), np.concatenate(y))
    return out


# ---------------------------------------------------------------- memorization
@dataclass(frozen=True)
class Memorization:
    """Feldman-Zhang memorization scores {norm: (N over every seed's pool,)} at one mix, and the
    outlier mask over the same examples."""

    scores: Mapping[str, np.ndarray]
    outliers: np.ndarray

    def means(self) -> dict:
        """The mean score of the inliers and of the outliers per norm (None: no such example)."""
        groups = (("inliers", ~self.outliers), ("outliers", self.outliers))
        return {
            n: {g: float(m[sel].mean()) if sel.any() else None for g, sel in groups}
            for n, m in self.scores.items()
        }


def memorization(pools: Pools, mix: float) -> Memorization:
    """mem(i) = P[correct | IN] - P[correct | OUT] of every example of the `mix` pools, per norm."""
    seeds = pools.seeds
    return Memorization(
        {
            n: np.concatenate(
                [
                    mia.memorization_score(
                        pools.shadow[mix, s, n].correct, pools.shadow[mix, s, n].keep
                    )
                    for s in seeds
                ]
            )
            for n in pools.norms
        },
        np.concatenate([pools.masks[mix, s] for s in seeds]),
    )


# ---------------------------------------------------------------- the pools with a rare class
RARE_GROUPS = ("all", "rare", "common")


def rare_groups(mask: np.ndarray) -> dict[str, np.ndarray]:
    """All examples, the rare class's members (`mask`) and the rest."""
    return {"all": np.ones_like(mask), "rare": mask, "common": ~mask}


@dataclass(frozen=True)
class RareExposure:
    """Online LiRA on the pools with a rare class, per norm and group (all, rare, common): mean
    per-target AUC with a t interval over pools, TPR at 1% FPR, mean memorization score,
    the pooled ROC curve {(norm, group): (fpr, tpr)}; per group the count of examples over the
    pools, of non-members of a target, and BN minus no-BN in AUC points (t interval over pools);
    clean test accuracy and train-test gap per norm (means over models)."""

    auc: Mapping[str, Mapping[str, Estimate]]
    tpr: Mapping[str, Mapping[str, float]]
    mem: Mapping[str, Mapping[str, float]]
    roc: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]]
    delta: Mapping[str, Estimate]
    n: Mapping[str, int]
    n_nonmembers: Mapping[str, int]
    acc: Mapping[str, float]
    gap: Mapping[str, float]
    fit: Mapping[str, dict] | None = None  # {norm: `fit_of`}

    def results(self) -> dict:
        """The JSON-able results entry."""
        return {
            "auc": {n: {g: e.as_dict() for g, e in d.items()} for n, d in self.auc.items()},
            "delta_auc_points": {g: e.as_dict() for g, e in self.delta.items()},
            "tpr": self.tpr,
            "mem": self.mem,
            "acc": self.acc,
            "gap": self.gap,
            "fit": self.fit,
            "n": self.n,
        }


def rare_exposure(pools: Pools, sigma_floor: float) -> RareExposure:
    """Online LiRA on pools with a rare class (`lira_pools(..., ["rare"])`: the masks are the
    rare class's members); the BN - no-BN delta-AUC per group with `delta_over_pools` (a t
    interval over the pools; one pool: n/a)."""
    mix, seeds, norms = "rare", pools.seeds, pools.norms
    sub = {s: rare_groups(pools.masks[mix, s]) for s in seeds}
    shadow = {(s, n): pools.shadow[mix, s, n] for s in seeds for n in norms}
    online = {
        k: mia.lira(p.phi, p.keep, sigma_floor=sigma_floor)["online"] for k, p in shadow.items()
    }
    auc, tpr, mem, roc = {}, {}, {}, {}
    for n in norms:
        tm = [mia.evaluate_targets(online[s, n], shadow[s, n].keep, sub[s]) for s in seeds]
        score = {s: mia.memorization_score(shadow[s, n].correct, shadow[s, n].keep) for s in seeds}
        for g in RARE_GROUPS:
            e = over_seeds(tm, g, metrics=("auc", "tpr@0.01"))
            auc.setdefault(n, {})[g], tpr.setdefault(n, {})[g] = e["auc"], e["tpr@0.01"].value
            mem.setdefault(n, {})[g] = float(
                np.mean(np.concatenate([score[s][sub[s][g]] for s in seeds]))
            )
            roc[n, g] = mia.roc(
                np.concatenate([online[s, n][:, sub[s][g]].ravel() for s in seeds]),
                np.concatenate([shadow[s, n].keep[:, sub[s][g]].ravel() for s in seeds]),
            )
    delta = {}
    if "bn" in norms and "none" in norms:
        runs = [(online[s, "bn"], online[s, "none"], shadow[s, "bn"].keep) for s in seeds]
        for g in RARE_GROUPS:
            masks = [sub[s][g] for s in seeds]
            delta[g] = delta_over_pools(runs, masks)
    first = shadow[seeds[0], norms[0]].keep[0]
    return RareExposure(
        auc=auc,
        tpr=tpr,
        mem=mem,
        roc=roc,
        delta=delta,
        n={g: int(sum(sub[s][g].sum() for s in seeds)) for g in RARE_GROUPS},
        n_nonmembers={g: int((~first[sub[seeds[0]][g]]).sum()) for g in RARE_GROUPS},
        acc={n: pools.acc[mix][n] for n in norms},
        gap={n: pools.gap[mix][n] for n in norms},
        fit={n: pools.fit[mix][n] for n in norms},
    )


# ---------------------------------------------------------------- the verdict rows
def control_rows(pools: Pools, scores: Mapping, **common) -> list[claims.Verdict]:
    """The verdict rows `03.control.<control>`, one per control in the pools' norms (GroupNorm: a
    learned gamma without batch coupling; BN with gamma fixed at 1: batch coupling without a
    learned gamma), mix and group (all examples, outliers): the control minus no-BN in online-LiRA
    AUC points (`online_deltas`), judged at matched fit (`at_fit`: the control's clean training
    and test accuracy minus no-BN's). Each row's `case` names its mix and group
    (`text.controls_reading`)."""
    rows, acc, gap = [], pools.acc, pools.gap
    for ctrl in (n for n in CONTROLS if n in pools.norms):
        for (mix, g), e in online_deltas(pools, scores, norm=ctrl).items():
            if g == "inliers":
                continue
            case = f"{mix:.0%} mix, {'all examples' if g == 'all' else g}"
            row = claims.judge(
                f"03.control.{ctrl}",
                e,
                acc_gap=acc[mix][ctrl] - acc[mix]["none"],
                compared=(ctrl, "none"),
                mix=f"{mix:.0%}",
                subgroup=g,
                case=case,
                unit=f"AUC points, {label(ctrl)} minus no-BN (online LiRA)",
                clean_test_acc={n: acc[mix][n] for n in (ctrl, "none")},
                train_test_gap={n: gap[mix][n] for n in (ctrl, "none")},
                outlier_frac=mix,
                **at_fit(acc[mix], pools.fit[mix], (ctrl, "none")),
                **common,
            )
            rows.append(censored_note(row))
    return rows


def _mix_rows(pools: Pools, deltas: Mapping, **common) -> list[claims.Verdict]:
    """BN minus no-BN per mix on all examples and on the outliers, judged at matched fit."""
    acc, gap = pools.acc, pools.gap
    return [
        censored_note(
            claims.judge(
                claims.lira_claim_id(mix, group),
                e,
                acc_gap=acc[mix]["bn"] - acc[mix]["none"],
                unit=ONLINE,
                mix=f"{mix:.0%}",
                clean_test_acc=acc[mix],
                train_test_gap=gap[mix],
                **at_fit(acc[mix], pools.fit[mix]),
                **common,
                outlier_frac=mix,
                subgroup=group,
            )
        )
        for (mix, group), e in deltas.items()
        if group != "inliers"
    ]


def _rare_rows(rare: RareExposure, share: float, **common) -> list[claims.Verdict]:
    """BN minus no-BN on the rare class's members, and on every example of its pools."""
    return [
        censored_note(
            claims.judge(
                claim_id,
                rare.delta[g],
                acc_gap=rare.acc["bn"] - rare.acc["none"],
                share=f"{share:.0%}",
                subgroup=g,
                unit=ONLINE,
                clean_test_acc=rare.acc,
                train_test_gap=rare.gap,
                **at_fit(rare.acc, rare.fit),
                **common,
            )
        )
        for g, claim_id in (("rare", "03.auc.rare"), ("all", "03.auc.rare.all"))
    ]


def _level_rows(reading: LevelReading, **common) -> list[claims.Verdict]:
    """BN minus no-BN per level and mix, all examples, each judged at the fit it was read at."""
    rows = []
    for level, lp in reading.pools.items():
        for mix in lp.mixes:
            row = claims.judge(
                "03.auc.fit",
                reading.deltas[level][mix, "all"],
                acc_gap=lp.acc[mix]["bn"] - lp.acc[mix]["none"],
                unit=ONLINE,
                mix=f"{mix:.0%}",
                level=f"{level:.0%}",
                clean_test_acc=lp.acc[mix],
                train_test_gap=lp.gap[mix],
                **at_fit(lp.acc[mix], lp.fit[mix]),
                **common,
                outlier_frac=mix,
                subgroup="all",
            )
            rows.append(censored_note(row, NEVER))
    return rows


FIXED_BELOW = 64  # shadows: below this many, Carlini et al. advise LiRA's fixed variance
LOW_FPR = "tpr@0.001"  # TPR at 0.1% FPR, judged where a target has enough non-members


def _attack_rows(pools: Pools, effects: Mapping, **common) -> list[claims.Verdict]:
    """Per mix, on all examples: fixed-variance online LiRA's delta-AUC (`03.fixed.auc`) when the
    pools hold fewer than `FIXED_BELOW` models per norm, and online LiRA's delta-TPR at 0.1% FPR
    (`03.tpr.low`) when every target has at least `MIN_NONMEMBERS` non-members for it."""
    n_models = min(len(p.keep) for p in pools.shadow.values())
    rows, acc, gap = [], pools.acc, pools.gap
    for mix in pools.mixes:
        wanted = [("03.fixed.auc", "online_fixed", "auc", n_models < FIXED_BELOW)]
        n0 = n_nonmembers(pools, mix, "all")
        wanted.append(("03.tpr.low", "online", LOW_FPR, n0 >= MIN_NONMEMBERS[LOW_FPR]))
        for claim_id, attack, metric, judged in wanted:
            if not judged:
                continue
            row = claims.judge(
                claim_id,
                effects[mix, "all", attack, metric],
                acc_gap=acc[mix]["bn"] - acc[mix]["none"],
                unit=f"{'AUC' if metric == 'auc' else 'TPR'} points, BN minus no-BN ({attack})",
                mix=f"{mix:.0%}",
                clean_test_acc=acc[mix],
                train_test_gap=gap[mix],
                n_nonmembers=n0,
                shadows=n_models,
                **at_fit(acc[mix], pools.fit[mix]),
                **common,
                outlier_frac=mix,
                subgroup="all",
            )
            rows.append(censored_note(row))
    return rows


def verdict_rows(
    pools: Pools,
    scores: Mapping,
    deltas: Mapping[tuple, Estimate],
    rare: RareExposure | None,
    sweep: SizeSweep | None,
    effects: Mapping[tuple, Estimate] | None,
    rare_share: float,
    *,
    dataset: str,
    budget: str,
    levels: LevelReading | None = None,
) -> list[claims.Verdict]:
    """Every verdict row of notebook 03 (before the verdict families' correction): BN minus
    no-BN per mix (all examples, outliers), fixed-variance LiRA and TPR at 0.1% FPR where they apply
    (`_attack_rows`, from `effects`: `attack_effects`; None: none), on the pools with a rare
    class (its members, all examples), the size sweep (each size, and the trend within the sizes
    measured), every control minus no-BN, and BN minus no-BN at the lower fit `levels`
    (`level_reading`; None: none), each row read beside clean test accuracy. Every interval is
    over pools: `n_pools` in each row (fewer than 2: no interval, inconclusive)."""
    common = {"dataset": dataset, "budget": budget, "n_pools": len(pools.seeds)}
    rows = _mix_rows(pools, deltas, **common)
    if levels is not None:
        rows += _level_rows(levels, **common)
    if effects is not None:
        rows += _attack_rows(pools, effects, **common)
    if rare is not None:
        rows += _rare_rows(rare, rare_share, **common)
    if sweep is not None:
        rows += sweep.rows(dataset=dataset, budget=budget)
    return rows + control_rows(pools, scores, **common)
