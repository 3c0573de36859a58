"""Notebook 05's figures: memorization curves, the frontier, LiRA's ROC and gamma/sigma."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from . import mitigation_text, plot_memorization, plots
from .frontier import frontier_points
from .plots import color, legend_below
from .reduction import summarize
from .variants import ACCURACY, MEMORIZATION, Variant, curves, finals

LIRA_COLORS = {"bn": "bn", "none": "none", "reg": "bn_reg"}  # pool name -> plots.COLORS key


_ALT_MARKERS = ("s", "D", "^", "v", "P", "X", "h", "p")


def _errorbar_point(
    ax: plt.Axes, p: dict, color: str, marker: str, size: float, label: str, zorder: int = 3, **kw
) -> None:
    """One point at (p['x'].value, p['y'].value) with its 95% intervals (Estimates) as bars
    where they are finite."""
    x, y = p["x"], p["y"]
    x_bar, y_bar = (bool(np.isfinite(e.lo) and np.isfinite(e.hi)) for e in (x, y))
    if x_bar or y_bar:
        ax.errorbar(
            [x.value],
            [y.value],
            xerr=[[x.value - x.lo], [x.hi - x.value]] if x_bar else None,
            yerr=[[y.value - y.lo], [y.hi - y.value]] if y_bar else None,
            fmt="none",
            ecolor=color,
            alpha=0.55,
            lw=1,
            capsize=2,
            zorder=zorder - 1,
        )
    ax.scatter(
        [x.value], [y.value], s=size, marker=marker, color=color, label=label, zorder=zorder, **kw
    )


def _clip_to_unit(ax: plt.Axes) -> None:
    """Axis limits within [-0.02, 1.02] on both axes (accuracies, shares, AUCs: an interval
    reaching past 0 or 1 is cut at the frame)."""
    for get, set_ in ((ax.get_xlim, ax.set_xlim), (ax.get_ylim, ax.set_ylim)):
        lo, hi = get()
        set_(max(lo, -0.02), min(hi, 1.02))


def frontier_panel(
    ax: plt.Axes,
    front: Sequence[dict],
    alternatives: Sequence[dict],
    chosen: dict | None,
    title: str,
    ylabel: str = "memorization\n(accuracy on the corrupted labels)",
    over: str = "seeds",
    chance: float | None = None,
) -> None:
    """Notebook 05's frontier: clean test accuracy (x) against memorization (y), lower at equal
    accuracy is better. `front`: the regularizer's points in order of strength, BN first, each
    {"x": Estimate, "y": Estimate, "label"} (mean and 95% interval over seeds), joined by a line
    and annotated with their setting; `alternatives`: {"x", "y", "label", "color": a COLORS key}
    points, one marker each; `chosen`: the pre-registered setting (a star). Legend below.
    LiRA's frontier: `ylabel` the AUC, `over` the targets (in place of seeds), `chance` 0.5
    dotted."""
    xs, ys = [p["x"].value for p in front], [p["y"].value for p in front]
    ax.plot(
        xs,
        ys,
        color=color("bn_reg"),
        lw=1.2,
        zorder=2,
        label=r"BN + regularizer over $\lambda$ (BN at $\lambda$ = 0)",
    )
    for i, p in enumerate(front):  # labels alternately above and below: neighbours often crowd
        _errorbar_point(
            ax, p, color("bn" if i == 0 else "bn_reg"), "o", 22, "BN" if i == 0 else None
        )
        ax.annotate(
            p["label"],
            (xs[i], ys[i]),
            fontsize=6,
            xytext=(4, 3 if i % 2 else -8),
            textcoords="offset points",
            color="0.3",
        )
    for j, p in enumerate(alternatives):
        _errorbar_point(
            ax, p, color(p["color"]), _ALT_MARKERS[j % len(_ALT_MARKERS)], 34, p["label"]
        )
    if chosen is not None:
        _errorbar_point(
            ax, chosen, "k", "*", 140, chosen["label"], zorder=5, facecolors="none", linewidths=1.2
        )
    if chance is not None:
        ax.axhline(chance, color="grey", lw=0.8, ls=":", label=f"chance ({chance:g})")
    ax.margins(0.12)
    _clip_to_unit(ax)
    ax.set(
        title=title,
        xlabel=f"clean test accuracy (mean over {over}; bars: 95% t interval)",
        ylabel=ylabel,
    )
    legend_below(ax, ncol=2)


def _histories(runs: Mapping, corr: str, v: Variant, seeds: Sequence[int]) -> list[dict]:
    return [runs[corr, v.name, s].history for s in seeds]


def memorization_figure(
    runs: Mapping,
    splits: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    judged: Sequence[Variant],
    n_train: int,
    n_classes: int,
) -> plt.Figure:
    """Figure 1: per corruption kind, memorization (top) and clean test accuracy (bottom) over
    epochs of the judged models (mean over seeds, band = range)."""
    n = len(corruptions)
    fig, axes = plt.subplots(2, n, figsize=(4.8 * n, 6.4), squeeze=False, sharex=True)
    epochs = np.array(runs[corruptions[0], judged[0].name, seeds[0]].history["epoch"])
    for j, c in enumerate(corruptions):
        lines = {}
        for v in judged:
            h = _histories(runs, c, v, seeds)
            label = mitigation_text.curve_label(v.label, summarize(h, c))
            lines[label] = (curves(h, c, MEMORIZATION), curves(h, c, ACCURACY), v.color)
        n_atypical = int(splits[c, seeds[0]].mask.sum())
        title = mitigation_text.kind_title(c, n_atypical, n_train, n_classes)
        plot_memorization.memorization_column_of_kind(
            axes[:, j], epochs, lines, title, c, n_classes
        )
    fig.tight_layout()
    return fig


def lira_roc_figure(comparison, labels: Mapping[str, str], tol: float) -> plt.Figure:
    """LiRA's ROC on a pool (05's first own pool) per family (`mitigation_lira.LiraComparison`),
    `labels` {pool name: label}; the title says what the comparison reads
    (`mitigation_text.lira_title`)."""
    fig, ax = plt.subplots(figsize=(5.6, 5.6))
    rocs = {
        label: (*comparison.roc(n), color(LIRA_COLORS[n]))
        for n, label in mitigation_text.lira_labels(comparison, labels).items()
    }
    plots.roc_loglog(ax, rocs, mitigation_text.lira_title(comparison, "bn", "reg", tol))
    fig.tight_layout()
    return fig


def frontier_figure(
    runs: Mapping,
    seeds: Sequence[int],
    frontiers,
    chosen: Variant,
    frontier_tau: float,
    lira_frontier: Mapping | None = None,
    lira=None,
) -> plt.Figure:
    """Figure 2: per kind of `frontiers` (`frontier.Frontiers`) the regularizer's frontier, the
    alternatives and the chosen setting (mean over seeds, 95% t intervals); last, if given,
    LiRA's frontier (`mitigation_lira.own_lira_frontier`, its pools in place of seeds; the attack
    and the pools named as in `lira`, the `mitigation_lira.LiraComparison` on those pools)."""
    kinds = list(frontiers.fronts)
    fig, axes = plots.panels(len(kinds) + bool(lira_frontier), 5.2, 4.6)
    for ax, c in zip(axes, kinds):
        at = [finals(runs, c, chosen.name, seeds, k) for k in (ACCURACY, MEMORIZATION)]
        points = frontier_points(frontiers.fronts[c], frontiers.alts[c], *at, chosen.label)
        words = mitigation_text.CORRUPTION_WORDS.get(c, c)
        title = f"{words}: {len(seeds)} evaluation seeds, $\\tau$ = {frontier_tau:g}"
        frontier_panel(ax, *points, title)
    if lira_frontier:
        lf = lira_frontier
        points = frontier_points(lf["front"], lf["alts"], *lf["chosen"], chosen.label)
        title = mitigation_text.lira_frontier_title(lira.variant, lira.pool, lf["n_shadows"])
        over = "pools" if "n_pools" in lf else "targets"
        ylabel = f"LiRA AUC (mean over {over})"
        frontier_panel(axes[-1], *points, title, ylabel=ylabel, over=over, chance=0.5)
    fig.tight_layout()
    return fig


def gamma_sigma_figure(
    scales: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]],
    runs: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    models: Sequence[Variant],
    tau: float,
) -> plt.Figure:
    """Figure 3: per kind, histograms of |gamma_c|/sigma_c over every BN channel of every layer
    and seed (`reduction.channel_scales_by_kind`) of `models`, with the bound `tau` and the
    paper's reference 1."""
    fig, axes = plots.panels(len(corruptions), 4.8, 4.0)
    for ax, c in zip(axes, corruptions):
        values = {}
        for v in models:
            gamma, sigma = scales[c, v.name]
            acc = summarize(_histories(runs, c, v, seeds), c)["clean_test_acc"]
            label = mitigation_text.scale_label(v.label, gamma / sigma, len(seeds), acc)
            values[label] = (gamma / sigma, color(v.color))
        plots.log_histograms(
            ax,
            values,
            f"{mitigation_text.CORRUPTION_WORDS.get(c, c)}: BN channels of every layer and seed",
            r"$|\gamma_c| / \sigma_c$ per channel ($\sigma_c$ from the running variance)",
            "channels per bin",
            vlines=mitigation_text.scale_lines(tau),
            zero_note=r"{n} channels with $\gamma$ = 0 not shown",
        )
    fig.tight_layout()
    return fig
