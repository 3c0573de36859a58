"""One figure style for every notebook and `save_figure` (PNG + PDF, deterministic metadata)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from .config import output_root

COLORS = {
    "bn": "#d62728",
    "none": "#1f77b4",
    "gn": "#2ca02c",
    "bn_noaffine": "#9467bd",
    # the mitigation's alternatives (notebook 05)
    "bn_gdecay": "#8c564b",
    "bn_wd": "#e377c2",
    "bn_early": "#17becf",
    "bn_reg": "#ff7f0e",
}
LABELS = {"bn": "BN", "none": "no-BN", "gn": "GroupNorm", "bn_noaffine": "BN, gamma fixed at 1"}
STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.6,
    "svg.hashsalt": "bnpaper",
    "pdf.compression": 6,
}


def use_style() -> None:
    """Apply the project's figure style (call once per notebook)."""
    mpl.rcParams.update(STYLE)


def color(norm: str) -> str:
    return COLORS.get(norm, "#7f7f7f")


def label(norm: str) -> str:
    return LABELS.get(norm, norm)


def figure_dir(notebook: str, dataset: str) -> Path:
    return output_root() / "figures" / notebook / dataset


class FigureProblem(ValueError):
    """A figure fails a check a reader would make (an unlabelled axis, a legend over the data)."""


def _visible_data_points(ax: plt.Axes) -> np.ndarray:
    """Display coordinates (n, 2) of the plotted points of lines and scatters inside the axes."""
    pts = []
    for line in ax.get_lines():
        xy = np.column_stack(
            [np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)]
        )
        if len(xy) and line.get_visible():
            pts.append(line.get_transform().transform(xy))
    for coll in ax.collections:
        offs = np.asarray(coll.get_offsets(), float)
        if coll.get_visible() and len(offs) and type(coll).__name__ == "PathCollection":
            pts.append(coll.get_offset_transform().transform(offs))
    if not pts:
        return np.zeros((0, 2))
    pts = np.concatenate(pts)
    pts = pts[np.isfinite(pts).all(1)]
    box = ax.get_window_extent()
    inside = (
        (pts[:, 0] >= box.x0)
        & (pts[:, 0] <= box.x1)
        & (pts[:, 1] >= box.y0)
        & (pts[:, 1] <= box.y1)
    )
    return pts[inside]


def audit(fig: plt.Figure) -> list[str]:
    """What a reader would object to, checked mechanically on every axes with data: an unlabelled
    x or y axis (unless its tick labels are hidden, as in a shared grid), a legend box over
    plotted points, non-integer ticks on an axis labelled 'epoch'."""
    fig.canvas.draw()
    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not (
            ax.get_lines() or ax.collections or ax.patches or ax.images
        ):
            continue
        name = f"axes {i} ({ax.get_title() or 'untitled'})"
        for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
            ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
            shown = any(t.get_visible() and t.get_text() for t in ticks)
            if not label.strip() and shown:
                problems.append(f"{name}: the {axis} axis has no label")
        if "epoch" in ax.get_xlabel().lower():
            lo, hi = sorted(ax.get_xlim())
            ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
            if any(abs(t - round(t)) > 1e-9 for t in ticks):
                problems.append(f"{name}: fractional ticks on the epoch axis: {ticks}")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            box = legend.get_window_extent()
            pts = _visible_data_points(ax)
            covered = int(
                (
                    (pts[:, 0] > box.x0)
                    & (pts[:, 0] < box.x1)
                    & (pts[:, 1] > box.y0)
                    & (pts[:, 1] < box.y1)
                ).sum()
            )
            if covered:
                problems.append(f"{name}: the legend covers {covered} plotted point(s)")
    return problems


def save_figure(fig: plt.Figure, notebook: str, dataset: str, name: str) -> Path:
    """Save `fig` as `figures/<notebook>/<dataset>/<name>.png` and `.pdf` below the output root;
    return the PNG path (`notebook.Run.figure` saves without echoing it).
    Metadata that would change between runs (dates, software versions) is left out. The figure
    is `audit`ed first: its problems are a warning, and an error with $BNPAPER_STRICT_FIGURES=1
    (the reference run and `make test`)."""
    import json
    import os
    import warnings

    problems = audit(fig)
    if problems:
        msg = f"figure {notebook}/{name}: " + "; ".join(problems)
        if os.environ.get("BNPAPER_STRICT_FIGURES") == "1":
            raise FigureProblem(msg)
        warnings.warn(msg, stacklevel=2)
    d = figure_dir(notebook, dataset)
    d.mkdir(parents=True, exist_ok=True)
    checks = (
        d / "figure_checks.json"
    )  # every saved figure's audit (a test reads the committed ones)
    record = json.loads(checks.read_text()) if checks.exists() else {}
    record[name] = problems
    checks.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
    png = d / f"{name}.png"
    fig.savefig(png, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(
        d / f"{name}.pdf",
        bbox_inches="tight",
        metadata={"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    )
    return png


def band(
    ax: plt.Axes,
    x: Sequence[float],
    runs: np.ndarray,
    norm: str,
    name: str | None = None,
    linestyle: str = "-",
) -> None:
    """Mean curve over runs (rows) with a min-max band, coloured by norm."""
    runs = np.asarray(runs, dtype=float)
    mean = np.nanmean(runs, 0)
    ax.plot(x, mean, color=color(norm), linestyle=linestyle, label=name or label(norm))
    epoch_axis(ax)
    if len(runs) > 1:
        ax.fill_between(
            x, np.nanmin(runs, 0), np.nanmax(runs, 0), color=color(norm), alpha=0.2, linewidth=0
        )


def panels(n: int, width: float = 4.6, height: float = 3.4):
    """A figure with `n` side-by-side panels: (fig, list of axes)."""
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])


def epoch_axis(ax: plt.Axes) -> None:
    """Integer ticks on an epoch axis."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def roc_loglog(
    ax: plt.Axes,
    curves: dict[str, tuple[np.ndarray, np.ndarray, str]],
    title: str,
    floor: float = 1e-3,
) -> None:
    """Log-log ROC curves {label: (fpr, tpr, color)} with the chance diagonal; the legend sits
    below the axes, never over a curve."""
    for name, (fpr, tpr, col) in curves.items():
        ax.plot(fpr, tpr, color=col, label=name)
    ax.plot([floor / 10, 1], [floor / 10, 1], color="grey", lw=0.8, ls=":", label="chance")
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(floor, 1),
        ylim=(floor, 1),
        xlabel="false positive rate",
        ylabel="true positive rate",
        title=title,
    )
    plain_log_axis(ax, "x")
    plain_log_axis(ax, "y")
    legend_below(ax, fontsize=8)


def log_histograms(
    ax: plt.Axes,
    values: dict[str, tuple[np.ndarray, str]],
    title: str,
    xlabel: str,
    ylabel: str = "count",
    vlines: dict[str, float] | None = None,
    per_decade: int = 10,
    zero_note: str = "{n} zeros not shown",
) -> None:
    """Overlaid histograms {label: (values, color)} on a log x axis (plain tick labels), with log
    bins covering every positive value and at least 1e-3..10 (nothing piles up in an edge bin);
    zeros cannot be drawn on a log axis and are counted in the title instead. vlines {label: x}:
    dashed, then dotted reference lines. The legend sits below the axes."""
    from matplotlib.ticker import FuncFormatter

    pos = np.concatenate([np.asarray(v)[np.asarray(v) > 0] for v, _ in values.values()])
    lo = min(-3.0, np.floor(np.log10(pos.min()))) if pos.size else -3.0
    hi = max(1.0, np.ceil(np.log10(pos.max()))) if pos.size else 1.0
    edges = np.logspace(lo, hi, int(round(per_decade * (hi - lo))) + 1)
    n_zero = sum(int((np.asarray(v) == 0).sum()) for v, _ in values.values())
    for name, (v, col) in values.items():
        v = np.asarray(v)
        ax.hist(v[v > 0], bins=edges, color=col, alpha=0.5, label=name)
    for (name, x), ls in zip((vlines or {}).items(), ("--", ":", "-.")):
        ax.axvline(x, color="k", linestyle=ls, linewidth=1, label=name)
    ax.set(
        xscale="log",
        xlabel=xlabel,
        ylabel=ylabel,
        title=title + (f"\n({zero_note.format(n=n_zero)})" if n_zero else ""),
    )
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    legend_below(ax)


def legend_below(ax: plt.Axes, *args, **kw) -> None:
    """A legend centred below `ax`, clear of its tick labels and (multi-line) x label whatever
    the axes' size: the offset is in inches, not in axes fractions. Set the x label first."""
    from matplotlib.transforms import ScaledTranslation

    lines = ax.get_xlabel().count("\n") + 1 if ax.get_xlabel() else 0
    drop = 0.4 + 0.18 * lines  # inches: ticks and tick labels, then each line of the x label
    kw.setdefault("fontsize", 7)
    ax.legend(
        *args,
        loc="upper center",
        bbox_to_anchor=(0.5, 0),
        **kw,
        bbox_transform=ax.transAxes + ScaledTranslation(0, -drop, ax.figure.dpi_scale_trans),
    )


# ------------------------------------------------ 01 forced memorization, 02 gradient dynamics


def plain_log_axis(ax: plt.Axes, which: str = "y") -> None:
    """Plain tick labels on a log axis (0.05, 0.1, 0.2 ... 10, 20: no 3x10^1), call once the data
    are drawn: the coarsest of 1 / 1-3 / 1-2-5 / 1-2-3-5 per decade that labels at least four
    ticks in the axis' range (three on less than a decade), evenly spaced values (1, 1.5, 2 or
    2.2, 2.4, ...) on a range too narrow for any; minor ticks unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if which == "y" else ax.get_xlim())
    if lo <= 0:
        return
    powers = 10.0 ** np.arange(np.floor(np.log10(lo)) - 1, np.ceil(np.log10(hi)) + 1)
    for subs in ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0)):
        ticks = np.outer(powers, subs).ravel()
        if ((ticks >= lo) & (ticks <= hi)).sum() >= (4 if np.log10(hi / lo) > 1 else 3):
            axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=99))
            break
    else:
        axis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def figure_legend(
    fig: plt.Figure, axes: Sequence[plt.Axes], title: str | None = None, ncol: int | None = None
) -> None:
    """One legend for the whole figure, centred below it (never on the data): the entries of
    every axes, each label once, in order. Call after `fig.tight_layout()`."""
    entries: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(lab, h)
    ncol = ncol or min(len(entries), 3)
    fig.legend(
        entries.values(),
        entries.keys(),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=ncol,
        fontsize=8,
        title=title,
        title_fontsize=8,
        frameon=False,
    )
