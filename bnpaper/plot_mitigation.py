"""Figures of the mitigation's frontier (notebook 05)."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .plots import color, legend_below


_ALT_MARKERS = ("s", "D", "^", "v", "P", "X", "h", "p")


def _errorbar_point(
    ax: plt.Axes, p: dict, color: str, marker: str, size: float, label: str, zorder: int = 3, **kw
) -> None:
    """One point at (p['x'].value, p['y'].value) with its 95% intervals (Estimates) as bars
    where they are finite."""
    x, y = p["x"], p["y"]
    fin = lambda e: bool(np.isfinite(e.lo) and np.isfinite(e.hi))  # noqa: E731
    if fin(x) or fin(y):
        ax.errorbar(
            [x.value],
            [y.value],
            xerr=[[x.value - x.lo], [x.hi - x.value]] if fin(x) else None,
            yerr=[[y.value - y.lo], [y.hi - y.value]] if fin(y) else None,
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
    LiRA's frontier: `ylabel` the AUC, `over` the targets (in place of seeds), `chance` 0.5 dotted."""
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
