"""Notebook 03's figures: delta-AUC, log-log ROC curves, memorization and utility, pool size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .plots import color, label, legend_below, panels, roc_loglog

if TYPE_CHECKING:
    from .exposure import LevelReading, Memorization, Pools, RareExposure
    from .size_trend import SizeSweep


def paper_band(ax: plt.Axes, paper_range: tuple[float, float] | None, note: str = "") -> None:
    """The paper's overall magnitude as a grey band (nothing when it gives none)."""
    if paper_range is None:
        return
    lo, hi = paper_range
    words = f"paper: overall {lo:g}-{hi:g} points{note}"
    ax.axhspan(lo, hi, color="grey", alpha=0.15, lw=0, label=words)


def delta_auc_points(
    ax: plt.Axes,
    mixes: Sequence[float],
    deltas: dict,
    minimums: dict,
    paper_range: tuple[float, float] | None,
    acc: dict,
    title: str,
) -> None:
    """BN - no-BN AUC points with intervals per outlier mix, all examples and outliers only.
    minimums {mix: the paper's 'at least' (all examples) or None}; paper_range: the paper's
    overall magnitude (all examples); acc {mix: {norm: clean test accuracy}} under each mix."""
    paper_band(ax, paper_range, " (all examples)")
    for j, (group, col) in enumerate((("all", "#1f77b4"), ("outliers", "#ff7f0e"))):
        pts = [
            (i + 0.15 * (2 * j - 1), deltas[m, group])
            for i, m in enumerate(mixes)
            if (m, group) in deltas
        ]
        if pts:
            ax.errorbar(
                [x for x, _ in pts],
                [e.value for _, e in pts],
                fmt="o",
                capsize=3,
                color=col,
                yerr=[[e.value - e.lo for _, e in pts], [e.hi - e.value for _, e in pts]],
                label="all examples" if group == "all" else "outliers only (no paper number)",
            )
    shown = False
    for i, m in enumerate(mixes):
        if minimums.get(m) is not None:
            ax.plot(
                [i - 0.3, i],
                [minimums[m]] * 2,
                "k--",
                lw=1.2,
                label=None if shown else "paper: at least (all examples)",
            )
            shown = True
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(
        range(len(mixes)),
        [f"{m:.0%}\nBN {acc[m]['bn']:.2f}\nno-BN {acc[m]['none']:.2f}" for m in mixes],
        fontsize=8,
    )
    ax.set(
        xlim=(-0.6, len(mixes) - 0.4),
        xlabel="outlier mix of the pool (below it: clean test accuracy)",
        ylabel="AUC(BN) - AUC(no-BN) (points)",
        title=title,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)


def delta_auc_figure(
    mixes: Sequence[float],
    deltas: dict,
    minimums: dict,
    paper_range: tuple[float, float] | None,
    acc: dict,
    title: str,
) -> plt.Figure:
    """The BN - no-BN delta-AUC per outlier mix in one panel (`delta_auc_points`)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    delta_auc_points(ax, mixes, deltas, minimums, paper_range, acc, title)
    fig.tight_layout()
    return fig


def _curves(rocs: Mapping, aucs: Mapping, acc: Mapping) -> dict:
    """Legend {norm: (fpr, tpr)} curves for `plots.roc_loglog`: the mean per-target AUC and the
    clean test accuracy of each norm in its label."""
    return {
        f"{label(n)}: AUC {aucs[n]:.3f}, test acc. {acc[n]:.2f}": (*roc, color(n))
        for n, roc in rocs.items()
    }


def roc_figure(rocs: dict, table: dict, pools: Pools, mix: float) -> plt.Figure:
    """Online LiRA's log-log ROC curves at `mix`, a panel per group (`exposure.pooled_rocs`),
    every target pooled; the legend gives the mean per-target AUC (`table`, the results entry of
    `exposure.attack_table`) and clean test accuracy."""
    seed = pools.seeds[0]
    n_targets = len(pools.shadow[mix, seed, pools.norms[0]].keep)
    n_out = int(pools.masks[mix, seed].sum())
    fig, axes = panels(len(rocs), 4.4, 4.6)
    for ax, (group, by_norm) in zip(axes, rocs.items()):
        aucs = {n: table[f"{mix}/{n}/{group}/online"]["auc"]["value"] for n in by_norm}
        n_ex = int(pools.groups(mix, seed)[group].sum())
        what = "all examples" if group == "all" else "outliers only"
        roc_loglog(
            ax,
            _curves(by_norm, aucs, pools.acc[mix]),
            f"{what}: {n_ex} examples ({n_out} outliers)\n"
            f"curve: {n_targets} targets pooled; AUC: mean per target",
        )
    fig.tight_layout()
    return fig


def rare_roc_figure(rare: RareExposure, n_targets: int) -> plt.Figure:
    """Online LiRA's log-log ROC curves on the pools with a rare class: all examples and the
    rare class's members, with the BN - no-BN delta-AUC in each title."""
    fig, axes = panels(2, 4.8, 4.8)
    for ax, g in zip(axes, ("all", "rare")):
        rocs = {n: rare.roc[n, g] for n in rare.auc}
        aucs = {n: rare.auc[n][g].value for n in rare.auc}
        what = "all examples" if g == "all" else "rare members"
        roc_loglog(
            ax,
            _curves(rocs, aucs, rare.acc),
            f"{what} ({rare.n[g]}) of the pool(s) with a rare class\n"
            f"BN - no-BN: {rare.delta[g].fmt(1)} AUC points\n"
            f"curve: {n_targets} targets pooled; AUC: mean per target",
        )
    fig.tight_layout()
    return fig


def memorization_utility_figure(mem: Memorization, pools: Pools, mix: float) -> plt.Figure:
    """Left: memorization scores at `mix`, inliers and outliers apart (`memorization_hists`);
    right: clean test accuracy against the train-test gap of every model of every mix."""
    fig, axes = panels(3, 4.2, 3.6)
    memorization_hists(axes[:2], mem.scores, mem.outliers, pools.acc[mix], f"{mix:.0%} outliers")
    seeds, models = pools.seeds, pools.shadow
    scatter = {
        f"{label(n)}, {m:.0%} outliers": (
            np.concatenate([models[m, s, n].gap for s in seeds]),
            np.concatenate([models[m, s, n].test_acc for s in seeds]),
            color(n),
            "os^v"[i % 4],
        )
        for n in pools.norms
        for i, m in enumerate(pools.mixes)
    }
    accuracy_vs_gap(axes[2], scatter, f"every model ({pools.n_models})")
    fig.tight_layout()
    return fig


def memorization_hists(
    axes: Sequence[plt.Axes], mem: dict, outliers: np.ndarray, acc: dict, title: str
) -> None:
    """Feldman-Zhang memorization scores of the inliers (axes[0]) and the outliers (axes[1]),
    filled histograms per norm; acc {norm: clean test accuracy}."""
    bins = np.linspace(-0.3, 1.0, 27)
    for ax, sel, what in ((axes[0], ~outliers, "inliers"), (axes[1], outliers, "outliers")):
        for norm, m in mem.items():
            if sel.any():
                ax.hist(
                    m[sel],
                    bins,
                    color=color(norm),
                    alpha=0.45,
                    density=True,
                    label=f"{label(norm)} (test acc. {acc[norm]:.2f}): mean {m[sel].mean():.2f}",
                )
        ax.set(
            xlabel="memorization score\n(< 0: predicted better when held out)",
            ylabel="density",
            title=f"{title}: {int(sel.sum())} {what}",
        )
        ax.legend(loc="upper center", fontsize=7)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # room for the legend above the bars


def accuracy_vs_gap(ax: plt.Axes, points: dict, title: str) -> None:
    """Clean test accuracy against the train-test gap, one marker per model;
    points {legend label: (gap array, accuracy array, colour, marker)}; legend outside."""
    for name, (gap, acc, col, marker) in points.items():
        ax.scatter(gap, acc, color=col, marker=marker, s=14, label=name)
    ax.set(xlabel="train - test accuracy gap", ylabel="clean test accuracy", title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)


def size_sweep_figure(
    sw: SizeSweep, paper_range: tuple[float, float] | None, title: str
) -> plt.Figure:
    """Notebook 03's size sweep (`size_trend.sweep`): left, BN - no-BN AUC points per
    pool size N (log axis) with 95% intervals over each size's pools, the fitted line with its
    band over the sizes measured only (nothing drawn beyond the largest), the paper's magnitude
    shaded; right, clean test accuracy and train-test gap of BN and no-BN."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig, (ax, bx) = panels(2, 4.9, 3.9)
    sizes, d, trend = sw.sizes, sw.delta, sw.trend
    paper_band(ax, paper_range)
    ax.errorbar(
        sizes,
        [d[n].value for n in sizes],
        fmt="o",
        color="k",
        capsize=3,
        zorder=3,
        yerr=[[d[n].value - d[n].lo for n in sizes], [d[n].hi - d[n].value for n in sizes]],
        label="measured (95% interval over pools)",
    )
    xs = np.geomspace(sizes[0], sizes[-1], 40)
    fit = [trend.predict(x) for x in xs]
    s = trend.slope
    ax.plot(
        xs,
        [e.value for e in fit],
        color="#1f77b4",
        label=f"fit: {s.value:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}] points per doubling",
    )
    ax.fill_between(xs, [e.lo for e in fit], [e.hi for e in fit], color="#1f77b4", alpha=0.18, lw=0)
    ticks = list(sizes)
    ax.axhline(0, color="grey", lw=0.8)
    for a in (ax, bx):
        a.set_xscale("log")
        a.xaxis.set_major_locator(FixedLocator(ticks if a is ax else sizes))
        a.xaxis.set_minor_locator(NullLocator())
        a.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        a.tick_params(axis="x", labelsize=7.5)
    ax.set(
        title=title,
        xlabel="pool size N (clean examples; each shadow trains on N/2)",
        ylabel="AUC(BN) - AUC(no-BN) (points)",
    )
    legend_below(ax, ncol=1)
    for norm in ("bn", "none"):
        bx.plot(
            sizes,
            [sw.acc[n][norm] for n in sizes],
            "o-",
            color=color(norm),
            label=f"{label(norm)}: clean test accuracy",
        )
        bx.plot(
            sizes,
            [sw.gap[n][norm] for n in sizes],
            "s--",
            color=color(norm),
            label=f"{label(norm)}: train-test gap",
        )
    bx.set_ylim(min(0.0, bx.get_ylim()[0]), 1.02)
    bx.set(
        title="utility beside it (means over models and pools)",
        xlabel="pool size N (clean examples; each shadow trains on N/2)",
        ylabel="accuracy, or gap (train - test accuracy)",
    )
    legend_below(bx, ncol=2)
    fig.tight_layout()
    return fig


def delta_auc_at_fit_figure(
    reading: LevelReading,
    deltas: Mapping[tuple, object],
    fit_level: float,
    paper_range: tuple[float, float] | None,
    title: str,
) -> plt.Figure:
    """BN - no-BN online-LiRA AUC points on all examples against the clean training accuracy it
    was read at: each level of `reading` (`exposure.level_reading`) and, at `fit_level`, the end
    of training (`deltas`, `exposure.online_deltas` of the main pools); one line per outlier mix,
    95% t intervals over pools (none drawn with one pool)."""
    levels = sorted(reading.pools)
    xs = [*levels, fit_level]
    mixes = list(next(iter(reading.pools.values())).mixes) if levels else []
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    paper_band(ax, paper_range, " (all examples)")
    for j, mix in enumerate(mixes):
        est = [reading.deltas[lv][mix, "all"] for lv in levels] + [deltas[mix, "all"]]
        shift = 0.0015 * (j - (len(mixes) - 1) / 2)
        finite = [np.isfinite(e.lo) and np.isfinite(e.hi) for e in est]
        ax.errorbar(
            [x + shift for x in xs],
            [e.value for e in est],
            yerr=[
                [e.value - e.lo if f else 0.0 for e, f in zip(est, finite)],
                [e.hi - e.value if f else 0.0 for e, f in zip(est, finite)],
            ],
            fmt="o-",
            capsize=3,
            label=f"{mix:.0%} outlier mix",
        )
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(xs, [f"{x:.0%}" + ("\n(end of training)" if x == fit_level else "") for x in xs])
    ax.set(
        xlabel="clean training accuracy on the IN examples at the reading",
        ylabel="AUC(BN) - AUC(no-BN) (points)",
        title=title,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return fig
