"""Notebook 03's tables of membership-inference exposure per subgroup, the paired BN - no-BN
delta-AUC over every pool, the pools with a rare class (online LiRA on the rare members and on
all examples), and the size sweep (the delta-AUC against the pool size N, with a fitted trend per
doubling of N), with utility beside every number. Compute only (tables are markdown text)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as _sps

from . import mia, units
from .memorization import CONTROLS
from .params import DATASET_SIZES
from .plots import color, label
from .stats import Estimate

SHOWN_ATTACKS = ("online", "offline", "loss", "rmia")


def points(e: Estimate) -> Estimate:
    """An AUC difference (0-1 scale) in AUC points."""
    return Estimate(
        100 * e.value,
        100 * e.lo,
        100 * e.hi,
        e.n,
        e.level,
        se=None if e.se is None else 100 * e.se,
        df=e.df,
    )


def _tpr(e: dict, fpr: float, n_out: int) -> str:
    return f"{e[f'tpr@{fpr:g}'].value:.3f}" if fpr * n_out >= 1 else "n/r"


def attack_table(
    metrics: dict,
    pools: dict,
    groups,
    mixes: Sequence[float],
    norms: Sequence[str],
    seeds: Sequence[int],
    acc: dict,
    gap: dict,
    n_boot: int,
) -> tuple[dict, str]:
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
                    e = mia.over_targets(
                        [metrics[mix, s, norm][attack] for s in seeds], group, n_boot
                    )
                    table[f"{mix}/{norm}/{group}/{attack}"] = {
                        **{m: v.as_dict() for m, v in e.items()},
                        "n_nonmembers": n_out,
                        "clean_test_acc": acc[mix][norm],
                        "train_test_gap": gap[mix][norm],
                    }
                    if attack in SHOWN_ATTACKS:
                        rows.append(
                            f"| {mix:.0%} | {label(norm)} | {group} | {attack} | "
                            f"{e['auc'].value:.3f} [{e['auc'].lo:.3f}, {e['auc'].hi:.3f}] | "
                            f"{e['balanced_acc'].value:.3f} | {_tpr(e, 0.01, n_out)} | "
                            f"{_tpr(e, 0.001, n_out)} | {acc[mix][norm]:.3f} | {gap[mix][norm]:+.3f} |"
                        )
    return table, (
        "| outliers | model | examples | attack | AUC [95% CI, targets] | bal. acc. "
        "| TPR@1% FPR | TPR@0.1% FPR | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


RARE_GROUPS = ("all", "rare", "common")


def _fmt_tpr(tpr: float, n_out: int, fpr: float = 0.01) -> str:
    return f"{tpr:.3f}" if fpr * n_out >= 1 else "n/r"


def rare_exposure(
    pools: dict,
    masks: dict,
    norms: Sequence[str],
    seeds: Sequence[int],
    sigma_floor: float,
    n_boot: int,
) -> dict:
    """Online LiRA on pools with a rare class, pools {(seed, norm): ShadowPool}, masks {seed: (N,)
    the rare class's members}. Returns per norm and subgroup (all, rare, common) the mean
    per-target AUC with a bootstrap interval over targets, TPR at 1% FPR, the Feldman-Zhang
    memorization score and the pooled ROC curve; BN minus no-BN delta-AUC in points per
    subgroup (hierarchical bootstrap over targets and examples, `mia.paired_delta_auc`); clean
    test accuracy and train-test gap per norm (means over models); the ROC curves with their
    legends (`curves`), a JSON-able `results` and the markdown `table`."""
    sub = lambda s: {"all": np.ones_like(masks[s]), "rare": masks[s], "common": ~masks[s]}  # noqa: E731
    online = {
        k: mia.lira(p.phi, p.keep, sigma_floor=sigma_floor)["online"] for k, p in pools.items()
    }
    out = {"auc": {}, "tpr": {}, "mem": {}, "roc": {}, "delta": {}, "n": {}}
    mean = lambda n, f: float(np.mean([getattr(pools[s, n], f).mean() for s in seeds]))  # noqa: E731
    out["acc"], out["gap"] = (
        {n: mean(n, "test_acc") for n in norms},
        {n: mean(n, "gap") for n in norms},
    )
    for n in norms:
        tm = [mia.evaluate_targets(online[s, n], pools[s, n].keep, sub(s)) for s in seeds]
        mem = {s: mia.memorization_score(pools[s, n].correct, pools[s, n].keep) for s in seeds}
        for g in RARE_GROUPS:
            e = mia.over_targets(tm, g, n_boot, metrics=("auc", "tpr@0.01"))
            out["auc"].setdefault(n, {})[g], out["tpr"].setdefault(n, {})[g] = (
                e["auc"],
                e["tpr@0.01"].value,
            )
            out["mem"].setdefault(n, {})[g] = float(
                np.mean(np.concatenate([mem[s][sub(s)[g]] for s in seeds]))
            )
            out["roc"][n, g] = mia.roc(
                np.concatenate([online[s, n][:, sub(s)[g]].ravel() for s in seeds]),
                np.concatenate([pools[s, n].keep[:, sub(s)[g]].ravel() for s in seeds]),
            )
    for g in RARE_GROUPS:
        out["n"][g] = int(sum(sub(s)[g].sum() for s in seeds))
        if "bn" in norms and "none" in norms:
            out["delta"][g] = points(
                mia.paired_delta_auc(
                    [(online[s, "bn"], online[s, "none"], pools[s, "bn"].keep) for s in seeds],
                    [sub(s)[g] for s in seeds],
                    n_boot=n_boot,
                    seed=0,
                )
            )
    n_out = {
        g: int((~pools[seeds[0], norms[0]].keep[0][sub(seeds[0])[g]]).sum()) for g in RARE_GROUPS
    }
    rows = [
        f"| {label(n)} | {g} ({out['n'][g]}) | {out['auc'][n][g].value:.3f} [{out['auc'][n][g].lo:.3f}, "
        f"{out['auc'][n][g].hi:.3f}] | {_fmt_tpr(out['tpr'][n][g], n_out[g])} | "
        f"{out['mem'][n][g]:+.3f} | {out['acc'][n]:.3f} | {out['gap'][n]:+.3f} |"
        for n in norms
        for g in RARE_GROUPS
    ]
    out["curves"] = {
        g: {
            f"{label(n)}: AUC {out['auc'][n][g].value:.3f}, test acc. {out['acc'][n]:.2f}": (
                *out["roc"][n, g],
                color(n),
            )
            for n in norms
        }
        for g in RARE_GROUPS
    }
    out["results"] = {
        "auc": {n: {g: e.as_dict() for g, e in d.items()} for n, d in out["auc"].items()},
        "delta_auc_points": {g: e.as_dict() for g, e in out["delta"].items()},
        **{k: out[k] for k in ("tpr", "mem", "acc", "gap", "n")},
    }
    out["table"] = (
        "| model | examples (count over pools) | online LiRA AUC [95% CI, targets] | TPR@1% FPR "
        "| memorization score (mean) | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
    return out


# ---------------------------------------------------------------- the main pools
def online_deltas(
    scores: dict,
    pools: dict,
    groups,
    mixes: Sequence[float],
    seeds: Sequence[int],
    n_boot: int,
    norm: str = "bn",
    base: str = "none",
) -> dict:
    """`norm` minus `base` (default BN minus no-BN) online-LiRA AUC in points per (mix,
    subgroup), scores {(mix, seed, norm): {attack: (M, N)}}: every seed's pool in one
    `mia.paired_delta_auc` call, so that the interval resamples the pools (data subset,
    outliers, keep matrix), then targets and examples. The pools of one (mix, seed) share their
    keep matrix, so the two norms are paired on the same targets and examples."""
    return {
        (mix, g): points(
            mia.paired_delta_auc(
                [
                    (
                        scores[mix, s, norm]["online"],
                        scores[mix, s, base]["online"],
                        pools[mix, s, norm].keep,
                    )
                    for s in seeds
                ],
                [groups(mix, s)[g] for s in seeds],
                n_boot=n_boot,
                seed=0,
            )
        )
        for mix in mixes
        for g in groups(mix, seeds[0])
    }


def control_rows(
    scores: dict,
    pools: dict,
    groups,
    mixes: Sequence[float],
    seeds: Sequence[int],
    norms: Sequence[str],
    n_boot: int,
    acc: Mapping,
    gap: Mapping,
    **common,
) -> list[dict]:
    """The verdict rows `03.control.<control>`, one per control in `norms` (GroupNorm: a learned
    gamma without batch coupling; BN with gamma fixed at 1: batch coupling without a learned
    gamma), mix and subgroup (all examples, outliers): the control minus no-BN in online-LiRA
    AUC points (`online_deltas`), judged with the control's clean test accuracy minus no-BN's as
    the confound. Each row's `case` names its mix and subgroup (`memorization.controls_reading`)."""
    from .claims import judge

    rows = []
    for ctrl in (n for n in CONTROLS if n in norms):
        d = online_deltas(scores, pools, groups, mixes, seeds, n_boot, norm=ctrl)
        for (mix, g), e in d.items():
            if g == "inliers":
                continue
            rows.append(
                judge(
                    f"03.control.{ctrl}",
                    e,
                    acc_gap=acc[mix][ctrl] - acc[mix]["none"],
                    compared=(ctrl, "none"),
                    mix=f"{mix:.0%}",
                    subgroup=g,
                    case=f"{mix:.0%} mix, {'all examples' if g == 'all' else g}",
                    unit=f"AUC points, {label(ctrl)} minus no-BN (online LiRA)",
                    clean_test_acc={n: acc[mix][n] for n in (ctrl, "none")},
                    train_test_gap={n: gap[mix][n] for n in (ctrl, "none")},
                    outlier_frac=mix,
                    **common,
                )
            )
    return rows


def pooled_rocs(
    scores: dict,
    pools: dict,
    groups,
    mix: float,
    seeds: Sequence[int],
    norms: Sequence[str],
    table: dict,
    acc: dict,
) -> dict:
    """Online LiRA's ROC curve per subgroup (all, outliers) and norm at `mix`, every target of
    every seed pooled, for `plots.roc_loglog`: {group: {legend (mean per-target AUC, clean test
    accuracy): (fpr, tpr, color)}}."""
    out = {}
    for g in [g for g in ("all", "outliers") if g in groups(mix, seeds[0])]:
        for n in norms:
            s = np.concatenate(
                [scores[mix, sd, n]["online"][:, groups(mix, sd)[g]].ravel() for sd in seeds]
            )
            y = np.concatenate(
                [pools[mix, sd, n].keep[:, groups(mix, sd)[g]].ravel() for sd in seeds]
            )
            a = table[f"{mix}/{n}/{g}/online"]["auc"]["value"]
            out.setdefault(g, {})[f"{label(n)}: AUC {a:.3f}, test acc. {acc[mix][n]:.2f}"] = (
                *mia.roc(s, y),
                color(n),
            )
    return out


def per_model(pools: dict) -> dict:
    """Every model's clean test accuracy, training accuracy and train-test gap, by pool key."""
    return {
        "/".join(map(str, k)): {
            "test_acc": p.test_acc.tolist(),
            "train_acc": p.train_acc.tolist(),
            "gap": p.gap.tolist(),
        }
        for k, p in pools.items()
    }


# ---------------------------------------------------------------- the size sweep
SIZE_MIX = 0.0  # the sweep's pools hold clean data: the paper's "overall" and clean-data claim
PAPER_SIZE = DATASET_SIZES  # where the paper sits: LiRA's usual pool is the whole training set
# (the paper's summary gives no size; presumably the same)


@dataclass(frozen=True)
class Trend:
    """A straight line y = a + b log2 N fitted by weighted least squares: the slope `slope`
    (per doubling of N) with its interval, the covariance `cov` of (a, b), `df` (Student-t
    degrees of freedom when the scatter set the scale, else None: normal) and `chi2_red`."""

    intercept: float
    slope: Estimate
    cov: np.ndarray
    df: int | None
    chi2_red: float

    def predict(self, n: float, level: float = 0.95) -> Estimate:
        """The line at pool size `n` with its interval (beyond the sizes fitted: extrapolation)."""
        x = np.array([1.0, np.log2(n)])
        value, se = float(x @ [self.intercept, self.slope.value]), float(np.sqrt(x @ self.cov @ x))
        q = _quantile(level, self.df)
        return Estimate(
            value, value - q * se, value + q * se, self.slope.n, level, se=se, df=self.df
        )


def _quantile(level: float, df: int | None) -> float:
    return float(_sps.t.ppf(0.5 + level / 2, df) if df else _sps.norm.ppf(0.5 + level / 2))


def _se(e: Estimate) -> float:
    se = e.se if e.se is not None else (e.hi - e.lo) / (2 * _quantile(e.level, None))
    return max(float(se), 1e-6)


def fit_trend(sizes: Sequence[int], estimates: Sequence[Estimate], level: float = 0.95) -> Trend:
    """Weighted least squares of the estimates' values on log2 N, weights 1/se^2 (their bootstrap
    standard errors): the slope per doubling of N with a `level` interval. The covariance is the
    weighted one, scaled by the reduced chi-square chi2/(k - 2) when the points scatter more than
    their standard errors allow (never shrunk), and the interval is then Student t with k - 2
    degrees of freedom, else normal. The sizes' estimates are taken as independent (separate
    pools; nested data correlates them positively, which widens a slope's interval: conservative)."""
    if len(sizes) != len(estimates) or len(sizes) < 3:
        raise ValueError(
            f"fit_trend needs at least 3 sizes with one estimate each, got "
            f"{len(sizes)} sizes and {len(estimates)} estimates"
        )
    x = np.column_stack([np.ones(len(sizes)), np.log2(np.asarray(sizes, float))])
    y = np.array([e.value for e in estimates])
    w = 1 / np.array([_se(e) for e in estimates]) ** 2
    cov = np.linalg.inv(x.T @ (w[:, None] * x))
    beta = cov @ x.T @ (w * y)
    dof = len(sizes) - 2
    chi2_red = float((w * (y - x @ beta) ** 2).sum() / dof)
    df = dof if chi2_red > 1 else None
    cov = cov * max(1.0, chi2_red)
    se, q = float(np.sqrt(cov[1, 1])), _quantile(level, df)
    b = float(beta[1])
    return Trend(
        float(beta[0]),
        Estimate(b, b - q * se, b + q * se, len(sizes), level, se=se, df=df),
        cov,
        df,
        chi2_red,
    )


def size_pools(ds, p: Mapping, pools: dict) -> dict:
    """The sweep's shadow pools {(N, seed, norm): ShadowPool} for N in p['size_sweep'], every
    seed of p['seeds'], BN and no-BN, on clean data (`SIZE_MIX`), built with `units.lira_pool`
    (03's recipe at each N: the same epochs, so a smaller pool also trains fewer steps); at
    N = n_train they are the main clean pools of `pools` (the same units)."""
    return {
        (n, s, norm): pools[SIZE_MIX, s, norm]
        if n == p["n_train"] and (SIZE_MIX, s, norm) in pools
        else units.lira_pool(ds, p, SIZE_MIX, s, norm, n_train=n)
        for n in p["size_sweep"]
        for s in p["seeds"]
        for norm in ("bn", "none")
    }


def size_sweep(pools: dict, p: Mapping, sigma_floor: float, n_boot: int) -> dict:
    """The delta-AUC against the pool size, pools {(N, seed, norm)} from `size_pools`: per N the
    paired BN - no-BN online-LiRA delta-AUC in points (every seed's pool in one bootstrap), the
    mean per-target AUC, clean test accuracy and train-test gap of each norm (means over models
    and seeds); the `trend` fitted on log2 N (`fit_trend`) and its value at the paper's scale
    (`PAPER_SIZE`, extrapolated when beyond the largest N); a JSON-able `results`, the markdown
    `table` and the `reading` (sentences)."""
    sizes, seeds = list(p["size_sweep"]), list(p["seeds"])
    online = {
        k: mia.lira(q.phi, q.keep, sigma_floor=sigma_floor)["online"] for k, q in pools.items()
    }
    per_norm = {
        "auc": lambda q, o: np.mean([mia.auc(r, y) for r, y in zip(o, q.keep)]),
        "acc": lambda q, o: q.test_acc.mean(),
        "gap": lambda q, o: q.gap.mean(),
    }
    out = {
        "sizes": sizes,
        "delta": {},
        "n_paper": PAPER_SIZE[p["dataset"]],
        "dataset": p["dataset"],
        "reused": [n for n in sizes if n == p["n_train"]],
    }
    for n in sizes:
        out["delta"][n] = points(
            mia.paired_delta_auc(
                [(online[n, s, "bn"], online[n, s, "none"], pools[n, s, "bn"].keep) for s in seeds],
                n_boot=n_boot,
                seed=0,
            )
        )
    for k, f in per_norm.items():  # means over the models of every seed
        out[k] = {
            n: {
                norm: float(np.mean([f(pools[n, s, norm], online[n, s, norm]) for s in seeds]))
                for norm in ("bn", "none")
            }
            for n in sizes
        }
    out["trend"] = fit_trend(sizes, [out["delta"][n] for n in sizes])
    out["predicted"] = out["trend"].predict(out["n_paper"])
    out["extrapolated"] = out["n_paper"] > sizes[-1]
    out["table"] = _size_table(out)
    out["reading"] = size_reading(out)
    s = out[
        "trend"
    ].slope  # the claim "falls as N grows": minus the slope, points lost per doubling
    out["fall"] = Estimate(-s.value, -s.hi, -s.lo, s.n, s.level, se=s.se, df=s.df)
    ends = (sizes[0], sizes[-1])
    out["row"] = {
        "unit": "AUC points lost per doubling of N",
        "sizes": "N = " + ", ".join(map(str, sizes)),
        "mix": f"{SIZE_MIX:.0%}",
        "delta_auc_points": {str(n): e.value for n, e in out["delta"].items()},
        **{
            k: {f"{label(norm)}, N={n}": out[f][n][norm] for n in ends for norm in ("bn", "none")}
            for k, f in (("clean_test_acc", "acc"), ("train_test_gap", "gap"))
        },
        "predicted_at": out["n_paper"],
        "predicted": out["predicted"].as_dict(),
        "extrapolated": out["extrapolated"],
    }
    t = out["trend"]
    out["results"] = {
        "mix": SIZE_MIX,
        "sizes": sizes,
        "seeds": seeds,
        "reused_main_pools": out["reused"],
        **{k: {str(n): v for n, v in out[k].items()} for k in ("auc", "acc", "gap")},
        "delta_auc_points": {str(n): e.as_dict() for n, e in out["delta"].items()},
        "trend": {
            "slope_points_per_doubling": t.slope.as_dict(),
            "intercept": t.intercept,
            "chi2_red": t.chi2_red,
            "df": t.df,
        },
        "predicted": {
            "n": out["n_paper"],
            "extrapolated": out["extrapolated"],
            **out["predicted"].as_dict(),
        },
    }
    return out


def _size_table(sw: dict) -> str:
    rows = [
        f"| {n:,}{' (main pools)' if n in sw['reused'] else ''} | {sw['delta'][n].fmt(1)} | "
        f"{sw['auc'][n]['bn']:.3f} / {sw['auc'][n]['none']:.3f} | "
        f"{sw['acc'][n]['bn']:.3f} / {sw['acc'][n]['none']:.3f} | "
        f"{sw['gap'][n]['bn']:+.3f} / {sw['gap'][n]['none']:+.3f} |"
        for n in sw["sizes"]
    ]
    return (
        "| pool size N (each shadow trains on N/2) | BN - no-BN AUC points [95% CI] | online LiRA AUC "
        "BN / no-BN | clean test acc. BN / no-BN | train-test gap BN / no-BN |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows)
    )


def size_reading(sw: dict, paper_range: tuple[float, float] = (3.0, 5.0)) -> str:
    """The size sweep in sentences: the delta-AUC at the smallest and largest pool, the trend per
    doubling, utility beside it, and the line's value at the paper's scale, labelled as the
    extrapolation it is (or not, when the sweep reaches that scale)."""
    a, b, s, pr = sw["sizes"][0], sw["sizes"][-1], sw["trend"].slope, sw["predicted"]
    trend = (
        "falls"
        if s.hi < 0
        else "rises"
        if s.lo > 0
        else "shows no trend that the interval can tell from 0"
    )
    lo, hi = paper_range
    where = (
        f"still above the paper's {lo:g}-{hi:g}"
        if pr.lo > hi
        else f"below the paper's {lo:g}-{hi:g}"
        if pr.hi < lo
        else f"within the paper's {lo:g}-{hi:g}"
        if lo <= pr.lo and pr.hi <= hi
        else f"an interval that overlaps the paper's {lo:g}-{hi:g}"
    )
    sign = {"acc": "", "gap": "+"}
    acc = lambda k, norm: f"{sw[k][a][norm]:{sign[k]}.2f} to {sw[k][b][norm]:{sign[k]}.2f}"  # noqa: E731
    text = (
        f"From N = {a:,} to {b:,} clean examples the BN - no-BN delta-AUC goes from "
        f"{sw['delta'][a].fmt(1)} to {sw['delta'][b].fmt(1)} points: it {trend}, "
        f"{s.value:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}] points per doubling of N. Over the same range "
        f"clean test accuracy goes from {acc('acc', 'bn')} (BN) and from {acc('acc', 'none')} (no-BN), "
        f"the train-test gap from {acc('gap', 'bn')} (BN) and from {acc('gap', 'none')} (no-BN). "
    )
    n = sw["n_paper"]
    if not sw["extrapolated"]:
        return text + (
            f"At N = {n:,} (the paper's scale, inside the sweep) the line gives "
            f"{pr.fmt(1)} points, {where}."
        )
    return text + (
        f"*Extrapolated* {np.log2(n / b):.1f} doublings beyond the largest pool, to N = {n:,} "
        f"(the whole {sw['dataset']} training set: LiRA's usual pool and, presumably, the paper's), "
        f"the line predicts {pr.fmt(1)} points, {where}: this assumes the trend stays "
        "linear in log N where it was never measured, a plausibility check, not a measurement."
    )
