"""Prose builders: the sentences and markdown tables the notebooks print, kept apart from the
compute that produces the numbers (each takes numbers or frozen results, returns a string)."""

from __future__ import annotations

# ---------------------------------------------------------------- shared: tables and intervals

# ---------------------------------------------------------------- 01 forced memorization, 02 gradients

# ---------------------------------------------------------------- 03 LiRA
LIRA_SHOWN_ATTACKS = ("online", "offline", "loss", "rmia")  # the attacks 03's table shows


def _tpr(tpr: float, n_nonmembers: int, fpr: float) -> str:
    """A TPR at `fpr`, or "n/r" (not resolvable) when fpr < 1 / non-members."""
    return f"{tpr:.3f}" if fpr * n_nonmembers >= 1 else "n/r"


def attack_table(table: dict) -> str:
    """Notebook 03's attack table in markdown from its results entry {"mix/norm/group/attack":
    ...} (`exposure.attack_table`): the four attacks of `LIRA_SHOWN_ATTACKS`, AUC with its
    interval over targets, balanced accuracy, TPR at 1% and 0.1% FPR, utility beside them."""
    from .plots import label

    rows = []
    for key, e in table.items():
        mix, norm, group, attack = key.split("/")
        if attack not in LIRA_SHOWN_ATTACKS:
            continue
        auc, n_out = e["auc"], e["n_nonmembers"]
        tprs = [_tpr(e[f"tpr@{f:g}"]["value"], n_out, f) for f in (0.01, 0.001)]
        rows.append(
            f"| {float(mix):.0%} | {label(norm)} | {group} | {attack} | "
            f"{auc['value']:.3f} [{auc['lo']:.3f}, {auc['hi']:.3f}] | "
            f"{e['balanced_acc']['value']:.3f} | {tprs[0]} | {tprs[1]} | "
            f"{e['clean_test_acc']:.3f} | {e['train_test_gap']:+.3f} |"
        )
    return (
        "| outliers | model | examples | attack | AUC [95% CI, targets] | bal. acc. "
        "| TPR@1% FPR | TPR@0.1% FPR | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def rare_table(rare) -> str:
    """The pools with a rare class in markdown (`exposure.RareExposure`): per norm and group,
    online LiRA's AUC with its interval over targets, TPR at 1% FPR, memorization, utility."""
    from .plots import label

    rows = [
        f"| {label(n)} | {g} ({rare.n[g]}) | {rare.auc[n][g].value:.3f} "
        f"[{rare.auc[n][g].lo:.3f}, {rare.auc[n][g].hi:.3f}] | "
        f"{_tpr(rare.tpr[n][g], rare.n_nonmembers[g], 0.01)} | "
        f"{rare.mem[n][g]:+.3f} | {rare.acc[n]:.3f} | {rare.gap[n]:+.3f} |"
        for n in rare.auc
        for g in rare.auc[n]
    ]
    return (
        "| model | examples (count over pools) | online LiRA AUC [95% CI, targets] | TPR@1% FPR "
        "| memorization score (mean) | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def size_table(sweep) -> str:
    """The size sweep in markdown (`size_trend.SizeSweep`): per pool size N the BN - no-BN
    delta-AUC with its interval, online LiRA's AUC, clean test accuracy and train-test gap."""
    rows = [
        f"| {n:,}{' (main pools)' if n in sweep.reused else ''} | {sweep.delta[n].fmt(1)} | "
        f"{sweep.auc[n]['bn']:.3f} / {sweep.auc[n]['none']:.3f} | "
        f"{sweep.acc[n]['bn']:.3f} / {sweep.acc[n]['none']:.3f} | "
        f"{sweep.gap[n]['bn']:+.3f} / {sweep.gap[n]['none']:+.3f} |"
        for n in sweep.sizes
    ]
    return (
        "| pool size N (each shadow trains on N/2) | BN - no-BN AUC points [95% CI] "
        "| online LiRA AUC BN / no-BN | clean test acc. BN / no-BN "
        "| train-test gap BN / no-BN |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows)
    )


def _where(pr, paper_range: tuple[float, float]) -> str:
    """Where an interval `pr` sits against the paper's range."""
    lo, hi = paper_range
    if pr.lo > hi:
        return f"still above the paper's {lo:g}-{hi:g}"
    if pr.hi < lo:
        return f"below the paper's {lo:g}-{hi:g}"
    if lo <= pr.lo and pr.hi <= hi:
        return f"within the paper's {lo:g}-{hi:g}"
    return f"an interval that overlaps the paper's {lo:g}-{hi:g}"


def size_reading(sweep, paper_range: tuple[float, float] = (3.0, 5.0)) -> str:
    """The size sweep in sentences: the delta-AUC at the smallest and largest pool, the trend per
    doubling, utility beside it, and the line's value at the paper's scale, labelled as the
    extrapolation it is (or not, when the sweep reaches that scale)."""
    a, b, s, pr = sweep.sizes[0], sweep.sizes[-1], sweep.trend.slope, sweep.predicted
    if s.hi < 0:
        trend = "falls"
    elif s.lo > 0:
        trend = "rises"
    else:
        trend = "shows no trend that the interval can tell from 0"

    def change(values: dict, norm: str, sign: str = "") -> str:
        return f"{values[a][norm]:{sign}.2f} to {values[b][norm]:{sign}.2f}"

    acc, gap = sweep.acc, sweep.gap
    text = (
        f"From N = {a:,} to {b:,} clean examples the BN - no-BN delta-AUC goes from "
        f"{sweep.delta[a].fmt(1)} to {sweep.delta[b].fmt(1)} points: it {trend}, "
        f"{s.value:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}] points per doubling of N. Over the same "
        f"range clean test accuracy goes from {change(acc, 'bn')} (BN) and from "
        f"{change(acc, 'none')} (no-BN), the train-test gap from {change(gap, 'bn', '+')} (BN) "
        f"and from {change(gap, 'none', '+')} (no-BN). "
    )
    n, where = sweep.n_paper, _where(pr, paper_range)
    if not sweep.extrapolated:
        return text + (
            f"At N = {n:,} (the paper's scale, inside the sweep) the line gives "
            f"{pr.fmt(1)} points, {where}."
        )
    from math import log2

    doublings = log2(n / b)
    return text + (
        f"*Extrapolated* {doublings:.1f} doublings beyond the largest pool, to N = {n:,} "
        f"(the whole {sweep.dataset} training set: LiRA's usual pool and, presumably, the "
        f"paper's), the line predicts {pr.fmt(1)} points, {where}: this assumes the trend stays "
        "linear in log N where it was never measured, a plausibility check, not a measurement."
    )


# ---------------------------------------------------------------- 04 theory

# ---------------------------------------------------------------- 05 mitigation
