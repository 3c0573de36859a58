"""One figure style for every notebook and `save_figure` (PNG + PDF, deterministic metadata)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from .config import output_root

COLORS = {"bn": "#d62728", "none": "#1f77b4", "gn": "#2ca02c", "bn_noaffine": "#9467bd",
          "bn_reg": "#ff7f0e"}
LABELS = {"bn": "BN", "none": "no-BN", "gn": "GroupNorm", "bn_noaffine": "BN, gamma fixed at 1"}
STYLE = {
    "figure.dpi": 100, "savefig.dpi": 150, "font.size": 10, "axes.titlesize": 10,
    "axes.labelsize": 10, "legend.fontsize": 8, "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3, "lines.linewidth": 1.6,
    "svg.hashsalt": "bnpaper", "pdf.compression": 6,
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
        xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
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
    inside = (pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)
    return pts[inside]


def audit(fig: plt.Figure) -> list[str]:
    """What a reader would object to, checked mechanically on every axes with data: an unlabelled
    x or y axis (unless its tick labels are hidden, as in a shared grid), a legend box over
    plotted points, non-integer ticks on an axis labelled 'epoch'."""
    fig.canvas.draw()
    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not (ax.get_lines() or ax.collections or ax.patches or ax.images):
            continue
        name = f"axes {i} ({ax.get_title() or 'untitled'})"
        for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
            ticks = (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())
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
            covered = int(((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) &
                           (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)).sum())
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
    checks = d / "figure_checks.json"  # every saved figure's audit (a test reads the committed ones)
    record = json.loads(checks.read_text()) if checks.exists() else {}
    record[name] = problems
    checks.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
    png = d / f"{name}.png"
    fig.savefig(png, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(d / f"{name}.pdf", bbox_inches="tight",
                metadata={"CreationDate": None, "ModDate": None, "Producer": None,
                          "Creator": None})
    return png


def band(ax: plt.Axes, x: Sequence[float], runs: np.ndarray, norm: str, name: str | None = None,
         linestyle: str = "-") -> None:
    """Mean curve over runs (rows) with a min-max band, coloured by norm."""
    runs = np.asarray(runs, dtype=float)
    mean = np.nanmean(runs, 0)
    ax.plot(x, mean, color=color(norm), linestyle=linestyle, label=name or label(norm))
    epoch_axis(ax)
    if len(runs) > 1:
        ax.fill_between(x, np.nanmin(runs, 0), np.nanmax(runs, 0), color=color(norm), alpha=0.2,
                        linewidth=0)


def panels(n: int, width: float = 4.6, height: float = 3.4):
    """A figure with `n` side-by-side panels: (fig, list of axes)."""
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])


def epoch_axis(ax: plt.Axes) -> None:
    """Integer ticks on an epoch axis."""
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def roc_loglog(ax: plt.Axes, curves: dict[str, tuple[np.ndarray, np.ndarray, str]],
               title: str, floor: float = 1e-3) -> None:
    """Log-log ROC curves {label: (fpr, tpr, color)} with the chance diagonal; the legend sits
    below the axes, never over a curve."""
    for name, (fpr, tpr, col) in curves.items():
        ax.plot(fpr, tpr, color=col, label=name)
    ax.plot([floor / 10, 1], [floor / 10, 1], color="grey", lw=0.8, ls=":", label="chance")
    ax.set(xscale="log", yscale="log", xlim=(floor, 1), ylim=(floor, 1),
           xlabel="false positive rate", ylabel="true positive rate", title=title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8)


# ---------------------------------------------------------------- 04 theory
_CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#d62728")


def theory_margin_growth(study, batch_sizes: Sequence[int], lrs: Sequence[float]) -> plt.Figure:
    """Left: measured vs predicted margin growth of outliers per probe (`theory.ProbeStudy`) at
    the default lr, one colour per batch size, tiny-step probes as crosses, the identity dashed.
    Right: the median factor |measured/predicted| per batch size and lr (rising margins)."""
    p, rising, lr0 = study.probes, study.rising, study.default_lr
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.2, 3.8))
    for i, B in enumerate(batch_sizes):
        sel = (p["batch_size"] == B) & (p["lr"] == lr0) & rising
        ax.scatter(p["predicted"][sel], p["measured"][sel], s=8, alpha=0.5,
                   color=_CYCLE[i % len(_CYCLE)], label=f"batch {B}")
    ax.scatter(study.tiny["predicted"], study.tiny["measured"], s=10, marker="x", color="k",
               label=f"batch {study.default_batch_size}, step 1e-6")
    lims = [min(p["predicted"].min(), p["measured"][rising].min()),
            max(p["predicted"].max(), p["measured"][rising].max())]
    ax.plot(lims, lims, "k--", lw=1, label="identity")
    falling = int((~rising & (p["lr"] == lr0)).sum())
    ax.set(xscale="log", yscale="log", xlabel=r"predicted $(\gamma/\sigma)^2$",
           ylabel=r"measured $\Delta m_{BN}/\Delta m_{no\text{-}BN}$",
           title=f"outlier margin growth, lr {lr0}" + (f" ({falling} falling not shown)" if falling else ""))
    ax.legend(fontsize=7)
    for i, eta in enumerate(lrs):
        bx.plot(batch_sizes, [study.median_factor(B, eta) for B in batch_sizes], "o-",
                color=("#2ca02c", "#1f77b4", "#d62728", "#9467bd")[i % 4], label=f"lr {eta}")
    bx.axhline(study.tiny_full_error, color="k", ls=":", lw=1, label="step 1e-6, full first order")
    bx.set(xscale="log", yscale="log", xlabel="batch size", xticks=list(batch_sizes),
           xticklabels=[str(b) for b in batch_sizes], ylabel="median factor |measured / predicted|",
           title="fixed-statistics approximation (rising margins)")
    from matplotlib.ticker import NullFormatter
    bx.xaxis.set_minor_formatter(NullFormatter())  # only the batch sizes are labelled
    bx.legend(fontsize=7)
    fig.tight_layout()
    return fig


def theory_gamma_feedback(fb) -> plt.Figure:
    """gamma, (gamma/sigma)^2 and outlier memorization per SGD step of the toy (`theory.
    FeedbackStudy`), BN with outliers vs without (grey, dashed); memorization BN vs no-BN."""
    steps = np.arange(fb.arr("bn", "gamma").shape[1])
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3))
    for ax, k in zip(axes[:2], ("gamma", "factor")):
        band(ax, steps, fb.arr("bn", k), "bn", "BN, with outliers")
        band(ax, steps, fb.arr("bn_clean", k), "bn_clean", "BN, no outliers", "--")  # grey
    axes[0].set(xlabel="SGD step", ylabel=r"$\gamma$", title=r"BN scale $\gamma$")
    axes[1].set(xlabel="SGD step", ylabel=r"$(\gamma/\sigma)^2$ (batch $\sigma$)", yscale="log",
                title="predicted amplification")
    band(axes[2], steps, fb.arr("bn", "outlier_acc"), "bn")
    band(axes[2], steps, fb.arr("none", "outlier_acc"), "none")
    axes[2].set(xlabel="SGD step", ylabel="outliers fit to flipped label",
                title="memorization (with outliers)", ylim=(-0.02, 1.02))
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def theory_gamma_sigma_layers(nets: dict, fracs: dict) -> plt.Figure:
    """Per architecture, box plots of |gamma|/sigma per channel for each BN layer, sigma from
    the running variance (BN colour) and from batch statistics (grey); `nets[arch]["layers"]`
    as from `theory.gamma_sigma`, `fracs[arch]` from `theory.channel_fractions`."""
    archs = list(nets)
    fig, axes = plt.subplots(1, len(archs), figsize=(4.2 + 2.6 * len(archs), 3.6), squeeze=False,
                             gridspec_kw={"width_ratios": [len(nets[a]["layers"]) + 3 for a in archs]})
    for ax, arch in zip(axes[0], archs):
        L = nets[arch]["layers"]
        pos = np.arange(len(L))
        for key, shift, col in (("ratio_running", -0.18, color("bn")), ("ratio_batch", 0.18, "#555555")):
            ax.boxplot([l[key].numpy() for l in L], positions=pos + shift, widths=0.3, showfliers=False,
                       boxprops={"color": col}, medianprops={"color": col})
        ax.axhline(1, color="k", lw=1, ls="--")
        ax.set(yscale="log", xticks=pos, ylabel=r"$|\gamma|/\sigma$ per channel",
               title=f"{arch} (BN): {fracs[arch]['all_running'].mean():.0%} of channels > 1 (running var)")
        ax.set_xticklabels([l["layer"].replace("blocks.", "b") for l in L], rotation=90, fontsize=6)
        ax.plot([], [], color=color("bn"), label=r"$\sigma$ from running variance")
        ax.plot([], [], color="#555555", label=r"$\sigma$ from batch statistics")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def theory_fraction_above_one(fracs: dict, seed: int) -> plt.Figure:
    """Per BN layer (forward order), the fraction of channels with |gamma|/sigma > 1, one line
    per architecture and sigma estimate, with the 'most' line at 0.5."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for i, (arch, f) in enumerate(fracs.items()):
        c = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")[i % 4]
        ax.plot(f["running"], "o-", color=c, label=f"{arch}, running variance")
        ax.plot(f["batch"], "x--", color=c, label=f"{arch}, batch statistics")
    ax.axhline(0.5, color="k", lw=1, ls=":")
    ax.set(xlabel="BN layer (forward order)", ylabel=r"fraction of channels with $|\gamma|/\sigma>1$",
           ylim=(-0.02, 1.02), title=f"per BN layer (one network per architecture, seed {seed})")
    epoch_axis(ax)  # integer ticks
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def tradeoff(ax: plt.Axes, points: list[dict], title: str,
             xlabel: str = "memorization of corrupted samples",
             ylabel: str = "clean test accuracy") -> None:
    """A utility/memorization trade-off: one marker per variant at (x, y). Each point is a dict
    with x, y, color, family (legend: one entry per family), note (an annotation, may be '') and
    kind: 'base' (star), 'penalty' (circle) or 'projection' (square)."""
    style = {"base": ("*", 70, 1.0, 3), "penalty": ("o", 28, 0.9, 2), "projection": ("s", 28, 0.6, 2)}
    for p in sorted(points, key=lambda p: list(style).index(p["kind"])):  # legend: bases first
        marker, size, alpha, z = style[p["kind"]]
        ax.scatter(p["x"], p["y"], s=size, marker=marker, color=p["color"], alpha=alpha,
                   label=p["family"], zorder=z)
        if p.get("note"):
            ax.annotate(p["note"], (p["x"], p["y"]), fontsize=6, xytext=(3, 2),
                        textcoords="offset points")
    handles = dict(zip(*ax.get_legend_handles_labels()[::-1]))  # one legend entry per family
    ax.legend(handles.values(), handles.keys(), loc="best")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)


def log_histograms(ax: plt.Axes, values: dict[str, tuple[np.ndarray, str]], title: str,
                   xlabel: str, ylabel: str = "count", vline: float | None = None,
                   per_decade: int = 10, zero_note: str = "{n} zeros not shown") -> None:
    """Overlaid histograms {label: (values, color)} on a log x axis, with log bins covering every
    positive value and at least 1e-3..10 (nothing piles up in an edge bin); zeros cannot be
    drawn on a log axis and are counted in the title instead."""
    pos = np.concatenate([np.asarray(v)[np.asarray(v) > 0] for v, _ in values.values()])
    lo = min(-3.0, np.floor(np.log10(pos.min()))) if pos.size else -3.0
    hi = max(1.0, np.ceil(np.log10(pos.max()))) if pos.size else 1.0
    edges = np.logspace(lo, hi, int(round(per_decade * (hi - lo))) + 1)
    n_zero = sum(int((np.asarray(v) == 0).sum()) for v, _ in values.values())
    for name, (v, col) in values.items():
        v = np.asarray(v)
        ax.hist(v[v > 0], bins=edges, color=col, alpha=0.5, label=name)
    if vline is not None:
        ax.axvline(vline, color="k", linestyle="--", linewidth=1)
    ax.set(xscale="log", xlabel=xlabel, ylabel=ylabel,
           title=title + (f" ({zero_note.format(n=n_zero)})" if n_zero else ""))
    ax.legend()


# ---------------------------------------------------------------- 03 LiRA
def delta_auc_points(ax: plt.Axes, mixes: Sequence[float], deltas: dict, minimums: dict,
                     paper_range: tuple[float, float] | None, acc: dict, title: str) -> None:
    """BN - no-BN AUC points with intervals per outlier mix, all examples and outliers only.
    minimums {mix: the paper's 'at least' (all examples) or None}; paper_range: the paper's
    overall magnitude (all examples); acc {mix: {norm: clean test accuracy}} under each mix."""
    if paper_range is not None:
        ax.axhspan(*paper_range, color="grey", alpha=0.15, lw=0,
                   label=f"paper: overall {paper_range[0]:g}-{paper_range[1]:g} points (all examples)")
    for j, (group, col) in enumerate((("all", "#1f77b4"), ("outliers", "#ff7f0e"))):
        pts = [(i + 0.15 * (2 * j - 1), deltas[m, group]) for i, m in enumerate(mixes) if (m, group) in deltas]
        if pts:
            ax.errorbar([x for x, _ in pts], [e.value for _, e in pts], fmt="o", capsize=3, color=col,
                        yerr=[[e.value - e.lo for _, e in pts], [e.hi - e.value for _, e in pts]],
                        label="all examples" if group == "all" else "outliers only (no paper number)")
    shown = False
    for i, m in enumerate(mixes):
        if minimums.get(m) is not None:
            ax.plot([i - 0.3, i], [minimums[m]] * 2, "k--", lw=1.2,
                    label=None if shown else "paper: at least (all examples)")
            shown = True
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(range(len(mixes)), [f"{m:.0%} outliers\nclean acc. BN {acc[m]['bn']:.2f}\n"
                                      f"no-BN {acc[m]['none']:.2f}" for m in mixes], fontsize=8)
    ax.set(xlim=(-0.6, len(mixes) - 0.4), xlabel="outlier mix of the pool",
           ylabel="AUC(BN) - AUC(no-BN) (points)", title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)


def memorization_hists(axes: Sequence[plt.Axes], mem: dict, outliers: np.ndarray, acc: dict,
                       title: str) -> None:
    """Feldman-Zhang memorization scores of the inliers (axes[0]) and the outliers (axes[1]),
    filled histograms per norm; acc {norm: clean test accuracy}."""
    bins = np.linspace(-0.3, 1.0, 27)
    for ax, sel, what in ((axes[0], ~outliers, "inliers"), (axes[1], outliers, "outliers")):
        for norm, m in mem.items():
            if sel.any():
                ax.hist(m[sel], bins, color=color(norm), alpha=0.45, density=True,
                        label=f"{label(norm)} (test acc. {acc[norm]:.2f}): mean {m[sel].mean():.2f}")
        ax.set(xlabel="memorization score (< 0: predicted better when held out)", ylabel="density",
               title=f"{title}: {int(sel.sum())} {what}")
        ax.legend(loc="upper center", fontsize=7)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # room for the legend above the bars


def accuracy_vs_gap(ax: plt.Axes, points: dict, title: str) -> None:
    """Clean test accuracy against the train-test gap, one marker per model;
    points {legend label: (gap array, accuracy array, colour, marker)}; legend outside."""
    for name, (gap, acc, col, marker) in points.items():
        ax.scatter(gap, acc, color=col, marker=marker, s=14, label=name)
    ax.set(xlabel="train - test accuracy gap", ylabel="clean test accuracy", title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
