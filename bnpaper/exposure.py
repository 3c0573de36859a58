"""Notebook 03's tables of membership-inference exposure per subgroup, and the pools with a rare
class: online LiRA on the rare members and on all examples, BN vs no-BN paired on the same
targets and examples, with utility beside every number. Compute only (tables are markdown text)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import mia
from .plots import color, label
from .stats import Estimate

SHOWN_ATTACKS = ("online", "offline", "loss", "rmia")


def points(e: Estimate) -> Estimate:
    """An AUC difference (0-1 scale) in AUC points."""
    return Estimate(100 * e.value, 100 * e.lo, 100 * e.hi, e.n, e.level,
                    se=None if e.se is None else 100 * e.se, df=e.df)


def _tpr(e: dict, fpr: float, n_out: int) -> str:
    return f"{e[f'tpr@{fpr:g}'].value:.3f}" if fpr * n_out >= 1 else "n/r"


def attack_table(metrics: dict, pools: dict, groups, mixes: Sequence[float], norms: Sequence[str],
                 seeds: Sequence[int], acc: dict, gap: dict, n_boot: int) -> tuple[dict, str]:
    """Every attack's metrics per (mix, norm, subgroup), mean over the targets of every seed with
    a bootstrap interval over targets, next to clean test accuracy and train-test gap: the
    results entry {"mix/norm/group/attack": ...} and the markdown table (four attacks shown;
    TPR at an FPR below 1/non-members is "n/r", not resolvable)."""
    table, rows = {}, []
    for mix in mixes:
        for norm in norms:
            for group, mask in groups(mix, seeds[0]).items():
                n_out = int((~pools[mix, seeds[0], norm].keep[0][mask]).sum())
                for attack in mia.ATTACKS:
                    e = mia.over_targets([metrics[mix, s, norm][attack] for s in seeds], group, n_boot)
                    table[f"{mix}/{norm}/{group}/{attack}"] = {
                        **{m: v.as_dict() for m, v in e.items()}, "n_nonmembers": n_out,
                        "clean_test_acc": acc[mix][norm], "train_test_gap": gap[mix][norm]}
                    if attack in SHOWN_ATTACKS:
                        rows.append(f"| {mix:.0%} | {label(norm)} | {group} | {attack} | "
                                    f"{e['auc'].value:.3f} [{e['auc'].lo:.3f}, {e['auc'].hi:.3f}] | "
                                    f"{e['balanced_acc'].value:.3f} | {_tpr(e, 0.01, n_out)} | "
                                    f"{_tpr(e, 0.001, n_out)} | {acc[mix][norm]:.3f} | {gap[mix][norm]:+.3f} |")
    return table, ("| outliers | model | examples | attack | AUC [95% CI, targets] | bal. acc. "
                   "| TPR@1% FPR | TPR@0.1% FPR | clean test acc. | train-test gap |\n"
                   "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))


RARE_GROUPS = ("all", "rare", "common")


def _fmt_tpr(tpr: float, n_out: int, fpr: float = 0.01) -> str:
    return f"{tpr:.3f}" if fpr * n_out >= 1 else "n/r"


def rare_exposure(pools: dict, masks: dict, norms: Sequence[str], seeds: Sequence[int],
                  sigma_floor: float, n_boot: int) -> dict:
    """Online LiRA on pools with a rare class, pools {(seed, norm): ShadowPool}, masks {seed: (N,)
    the rare class's members}. Returns per norm and subgroup (all, rare, common) the mean
    per-target AUC with a bootstrap interval over targets, TPR at 1% FPR, the Feldman-Zhang
    memorization score and the pooled ROC curve; BN minus no-BN delta-AUC in points per
    subgroup (hierarchical bootstrap over targets and examples, `mia.paired_delta_auc`); clean
    test accuracy and train-test gap per norm (means over models); the ROC curves with their
    legends (`curves`), a JSON-able `results` and the markdown `table`."""
    sub = lambda s: {"all": np.ones_like(masks[s]), "rare": masks[s], "common": ~masks[s]}  # noqa: E731
    online = {k: mia.lira(p.phi, p.keep, sigma_floor=sigma_floor)["online"] for k, p in pools.items()}
    out = {"auc": {}, "tpr": {}, "mem": {}, "roc": {}, "delta": {}, "n": {}}
    mean = lambda n, f: float(np.mean([getattr(pools[s, n], f).mean() for s in seeds]))  # noqa: E731
    out["acc"], out["gap"] = ({n: mean(n, "test_acc") for n in norms}, {n: mean(n, "gap") for n in norms})
    for n in norms:
        tm = [mia.evaluate_targets(online[s, n], pools[s, n].keep, sub(s)) for s in seeds]
        mem = {s: mia.memorization_score(pools[s, n].correct, pools[s, n].keep) for s in seeds}
        for g in RARE_GROUPS:
            e = mia.over_targets(tm, g, n_boot, metrics=("auc", "tpr@0.01"))
            out["auc"].setdefault(n, {})[g], out["tpr"].setdefault(n, {})[g] = e["auc"], e["tpr@0.01"].value
            out["mem"].setdefault(n, {})[g] = float(np.mean(np.concatenate([mem[s][sub(s)[g]] for s in seeds])))
            out["roc"][n, g] = mia.roc(np.concatenate([online[s, n][:, sub(s)[g]].ravel() for s in seeds]),
                                       np.concatenate([pools[s, n].keep[:, sub(s)[g]].ravel() for s in seeds]))
    for g in RARE_GROUPS:
        out["n"][g] = int(sum(sub(s)[g].sum() for s in seeds))
        if "bn" in norms and "none" in norms:
            out["delta"][g] = points(mia.paired_delta_auc(
                [(online[s, "bn"], online[s, "none"], pools[s, "bn"].keep) for s in seeds],
                [sub(s)[g] for s in seeds], n_boot=n_boot, seed=0))
    n_out = {g: int((~pools[seeds[0], norms[0]].keep[0][sub(seeds[0])[g]]).sum()) for g in RARE_GROUPS}
    rows = [f"| {label(n)} | {g} ({out['n'][g]}) | {out['auc'][n][g].value:.3f} [{out['auc'][n][g].lo:.3f}, "
            f"{out['auc'][n][g].hi:.3f}] | {_fmt_tpr(out['tpr'][n][g], n_out[g])} | "
            f"{out['mem'][n][g]:+.3f} | {out['acc'][n]:.3f} | {out['gap'][n]:+.3f} |"
            for n in norms for g in RARE_GROUPS]
    out["curves"] = {g: {f"{label(n)}: AUC {out['auc'][n][g].value:.3f}, test acc. {out['acc'][n]:.2f}":
                         (*out["roc"][n, g], color(n)) for n in norms} for g in RARE_GROUPS}
    out["results"] = {"auc": {n: {g: e.as_dict() for g, e in d.items()} for n, d in out["auc"].items()},
                      "delta_auc_points": {g: e.as_dict() for g, e in out["delta"].items()},
                      **{k: out[k] for k in ("tpr", "mem", "acc", "gap", "n")}}
    out["table"] = ("| model | examples (count over pools) | online LiRA AUC [95% CI, targets] | TPR@1% FPR "
                    "| memorization score (mean) | clean test acc. | train-test gap |\n"
                    "|---|---|---|---|---|---|---|\n" + "\n".join(rows))
    return out
