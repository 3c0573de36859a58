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


# ---------------------------------------------------------------- 04 theory
_CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#d62728")


def theory_margin_growth(study, batch_sizes: Sequence[int], lrs: Sequence[float]) -> plt.Figure:
    """Left: measured vs predicted margin growth of outliers per probe (`theory.ProbeStudy`) at
    the default lr, one colour per batch size, tiny-step probes as crosses, the paper's
    prediction (identity) dashed; the axes span the plotted probes. Right, per batch size and
    lr: the verdict's statistic (ratio estimator per run, mean over runs, filled; its bootstrap
    interval at the verdict's setting) and the median probe's measured / predicted (open)."""
    from matplotlib.lines import Line2D

    p, rising, lr0, B0 = study.probes, study.rising, study.default_lr, study.default_batch_size
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.5, 6.4))
    shown = [study.tiny["predicted"], study.tiny["measured"]]
    for i, B in enumerate(batch_sizes):
        sel = (p["batch_size"] == B) & (p["lr"] == lr0) & rising
        n_runs = study.setting_stats(B, lr0)["n_runs"]
        ax.scatter(
            p["predicted"][sel],
            p["measured"][sel],
            s=8,
            alpha=0.5,
            color=_CYCLE[i % len(_CYCLE)],
            label=f"batch {B}: {int(sel.sum())} probes from {n_runs} runs",
        )
        shown += [p["predicted"][sel], p["measured"][sel]]
    ax.scatter(
        study.tiny["predicted"],
        study.tiny["measured"],
        s=12,
        marker="x",
        color="k",
        label=f"batch {B0}, step $10^{{-6}}$: {len(study.tiny['measured'])} probes",
    )
    v = np.concatenate(shown)
    v = v[np.isfinite(v) & (v > 0)]
    lims = (v.min() / 2, v.max() * 2) if v.size else (0.1, 10.0)
    ax.plot(lims, lims, "k--", lw=1, label=r"paper: measured = predicted $(\gamma/\sigma)^2$")
    falling = int((~rising & (p["lr"] == lr0)).sum())
    ax.set(
        xscale="log",
        yscale="log",
        xlim=lims,
        ylim=lims,
        xlabel=r"predicted factor $(\gamma/\sigma)^2$ (batch $\sigma$ before the step)",
        ylabel=r"measured $\Delta m_{BN}\,/\,\Delta m_{no\text{-}BN}$ (one probe)",
        title=f"each point: one outlier's SGD step on its own loss, lr {lr0:g}"
        + (f"\n({falling} probes whose margin fell not shown)" if falling else ""),
    )
    plain_log_axis(ax, "x")
    plain_log_axis(ax, "y")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7.5)
    lr_cols = ("#2ca02c", "#1f77b4", "#d62728", "#9467bd")
    vals = []
    for i, eta in enumerate(lrs):
        st = [study.setting_stats(B, eta) for B in batch_sizes]
        c = lr_cols[i % len(lr_cols)]
        est = [s["ratio_estimator"] for s in st]
        med = [s["median_ratio"] for s in st]
        bx.plot(batch_sizes, est, "o-", color=c)
        bx.plot(batch_sizes, med, "s--", color=c, mfc="white", lw=1.1)
        vals += est + med
    a = study.agreement
    bx.errorbar(
        [B0],
        [a.value],
        yerr=[[a.value - a.lo], [a.hi - a.value]],
        fmt="none",
        ecolor="k",
        capsize=4,
        lw=1.2,
    )
    tiny = study.tiny_median_ratio()
    bx.plot([B0], [tiny], "kx", ms=8, mew=1.6)
    bx.axhline(1, color="k", ls="--", lw=1)
    vals = np.array(vals + [a.lo, a.hi, tiny, 1.0], float)
    vals = vals[np.isfinite(vals) & (vals > 0)]
    from matplotlib.ticker import NullFormatter

    bx.set(
        xscale="log",
        yscale="log",
        xlabel="batch size",
        xticks=list(batch_sizes),
        xticklabels=[str(b) for b in batch_sizes],
        ylim=(vals.min() / 1.6, vals.max() * 1.6),
        xlim=(min(batch_sizes) / 1.5, max(batch_sizes) * 1.5),
        ylabel=r"measured / predicted $(\gamma/\sigma)^2$",
        title=f"agreement per setting; the verdict (batch {B0}, lr {lr0:g}):\n"
        f"ratio estimator {a.value:.2f} [{a.lo:.2f}, {a.hi:.2f}] over {a.n} runs",
    )
    bx.xaxis.set_minor_formatter(NullFormatter())  # only the batch sizes are labelled
    plain_log_axis(bx, "y")
    handles = [
        Line2D([], [], color=lr_cols[i % len(lr_cols)], lw=2, label=f"lr {eta:g}")
        for i, eta in enumerate(lrs)
    ]
    handles += [
        Line2D(
            [],
            [],
            color="grey",
            marker="o",
            label="ratio estimator (the verdict's): per run "
            r"$\Sigma\Delta m_{BN}/\Sigma(\gamma/\sigma)^2\Delta m_{no\text{-}BN}$, mean over runs;"
            "\n  weights probes by predicted growth, so the largest $(\\gamma/\\sigma)^2$ dominate",
        ),
        Line2D(
            [],
            [],
            color="grey",
            marker="s",
            mfc="white",
            ls="--",
            label="median probe (geometric; each probe counts once)",
        ),
        Line2D(
            [],
            [],
            color="k",
            marker="|",
            ms=10,
            ls="none",
            label="95% bootstrap interval over runs (the verdict's setting)",
        ),
        Line2D(
            [],
            [],
            color="k",
            marker="x",
            ls="none",
            label=f"step $10^{{-6}}$, median probe (vs the exact first order: "
            f"{study.tiny_median_ratio(full=True):.2f})",
        ),
        Line2D([], [], color="k", ls="--", lw=1, label="paper: measured = predicted"),
    ]
    bx.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7.5, ncol=1
    )
    fig.tight_layout()
    return fig


def theory_gamma_feedback(fb) -> plt.Figure:
    """gamma, (gamma/sigma)^2 (from step 1: the random initial w is off the scale) and outlier
    memorization per SGD step of the toy (`theory.FeedbackStudy`), BN with outliers vs without
    (grey, dashed); memorization BN vs no-BN. The panels' notes (`FeedbackStudy.figure_notes`)
    say from the data whether gamma is higher with outliers and what drives the factor."""
    notes, acc, n = fb.figure_notes(), fb.test_acc, len(fb.seeds)
    steps = np.arange(fb.arr("bn", "gamma").shape[1])
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.6))
    for ax, k, s0 in zip(axes[:2], ("gamma", "factor"), (0, 1)):
        band(ax, steps[s0:], fb.arr("bn", k)[:, s0:], "bn", "BN, with outliers")
        band(
            ax,
            steps[s0:],
            fb.arr("bn_clean", k)[:, s0:],
            "bn_clean",
            "BN, no outliers (same typical samples)",
            "--",
        )  # grey
    axes[0].set(xlabel="SGD step", ylabel=r"BN scale $\gamma$", title=notes["gamma"])
    axes[1].set(
        xlabel="SGD step",
        ylabel=r"$(\gamma/\sigma)^2$ (batch $\sigma$)",
        yscale="log",
        title=f"predicted amplification $(\\gamma/\\sigma)^2$\n{notes['factor']}\n{notes['start']}",
    )
    plain_log_axis(axes[1], "y")
    band(
        axes[2],
        steps,
        fb.arr("bn", "outlier_acc"),
        "bn",
        f"BN (toy clean test acc. {acc['bn']:.2f})",
    )
    band(
        axes[2],
        steps,
        fb.arr("none", "outlier_acc"),
        "none",
        f"no-BN (toy clean test acc. {acc['none']:.2f})",
    )
    axes[2].set(
        xlabel="SGD step",
        ylabel="outliers fit to their flipped label (share)",
        title=f"memorization (trained with outliers)\nfinal BN $-$ no-BN: {fb.mem_gap.fmt(2)} "
        f"(95% t interval, {fb.mem_gap.n} seeds)",
        ylim=(-0.02, 1.02),
    )
    for ax in axes:
        ax.title.set_fontsize(8.5)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=7.5)
    fig.suptitle(
        f"toy model, {n} seeds (line: mean, band: range over seeds); outliers (flipped labels) are "
        f"{fb.population_share:.1%} of the samples and carry {fb.gamma_share:.0%} of "
        r"$\Sigma_i|\partial L/\partial\gamma_i|$",
        fontsize=9.5,
    )
    fig.tight_layout()
    return fig


def theory_gamma_sigma_layers(
    nets: dict, fracs: dict, seed: int | None = None, noise_frac: float | None = None
) -> plt.Figure:
    """Per architecture, box plots of |gamma|/sigma per channel for each BN layer, sigma from
    the running variance (BN red) and from batch statistics (teal); boxes: quartiles, whiskers:
    5th-95th percentile; `nets[arch]` as from `theory.trained_gamma_sigma` (test_acc optional),
    `fracs[arch]` from `theory.channel_fractions`."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D

    archs = list(nets)
    ratios = [max(len(nets[a]["layers"]), 6) + 3 for a in archs]
    fig, axes = plt.subplots(
        1,
        len(archs),
        figsize=(1.2 + 0.34 * sum(ratios), 4.2),
        squeeze=False,
        gridspec_kw={"width_ratios": ratios},
    )
    cols = {"ratio_running": color("bn"), "ratio_batch": "#17becf"}
    for ax, arch in zip(axes[0], archs):
        L = nets[arch]["layers"]
        pos = np.arange(len(L))
        for key, shift in (("ratio_running", -0.19), ("ratio_batch", 0.19)):
            c = cols[key]
            ax.boxplot(
                [l[key].numpy() for l in L],
                positions=pos + shift,
                widths=0.34,
                whis=(5, 95),
                showfliers=False,
                patch_artist=True,
                medianprops={"color": "k", "lw": 1.2},
                boxprops={"facecolor": to_rgba(c, 0.55), "edgecolor": c},
                whiskerprops={"color": c},
                capprops={"color": c},
            )
        ax.axhline(1, color="k", lw=1, ls="--")
        n_ch = len(fracs[arch]["all_running"])
        acc = nets[arch].get("test_acc")
        ax.set(
            yscale="log",
            xticks=pos,
            xlim=(-0.6, len(L) - 0.4),
            xlabel="BN layer (forward order)",
            ylabel=r"$|\gamma|/\sigma$ per channel",
            title=f"{arch} with BN"
            + (f", clean test acc. {acc:.2f}" if acc is not None else "")
            + f"\n{fracs[arch]['all_running'].mean():.0%} of its {n_ch} channels > 1 (running variance)",
        )
        ax.set_xticklabels(
            [l["layer"].replace("blocks.", "b") for l in L], rotation=90, fontsize=6.5
        )
        plain_log_axis(ax, "y")
    how = (
        "one network per architecture"
        + (f" (seed {seed})" if seed is not None else "")
        + (f", trained with {noise_frac:.0%} flipped labels" if noise_frac is not None else "")
    )
    handles = [
        Patch(
            facecolor=to_rgba(cols["ratio_running"], 0.55),
            edgecolor=cols["ratio_running"],
            label=r"$\sigma = \sqrt{\mathrm{running\ variance}+\epsilon}$ (used at test time)",
        ),
        Patch(
            facecolor=to_rgba(cols["ratio_batch"], 0.55),
            edgecolor=cols["ratio_batch"],
            label=r"$\sigma$ from batch statistics (median over 4 training batches)",
        ),
        Line2D(
            [],
            [],
            color="k",
            ls="--",
            lw=1,
            label=r"$|\gamma|/\sigma = 1$: above it BN amplifies (paper: > 1 in most cases)",
        ),
    ]
    fig.tight_layout()
    fig.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=2,
        fontsize=7.5,
        title=f"{how}\nbox: quartiles of the channels, line: median, whiskers: 5th-95th percentile",
        title_fontsize=8,
    )
    return fig


def theory_fraction_above_one(fracs: dict, seed: int, nets: dict | None = None) -> plt.Figure:
    """One panel per architecture: per BN layer (forward order) the fraction of channels with
    |gamma|/sigma > 1, sigma from the running variance and from batch statistics, with the
    'most' line at 0.5 (the paper: > 1 in most cases); layer names from `nets` when given."""
    from matplotlib.lines import Line2D

    archs = list(fracs)
    n_layers = [len(fracs[a]["running"]) for a in archs]
    ratios = [max(n, 6) + 3 for n in n_layers]
    fig, axes = plt.subplots(
        1,
        len(archs),
        figsize=(1.2 + 0.3 * sum(ratios), 3.8),
        squeeze=False,
        gridspec_kw={"width_ratios": ratios},
    )
    cols = {"running": color("bn"), "batch": "#17becf"}
    for ax, arch, n in zip(axes[0], archs, n_layers):
        f, acc = fracs[arch], (nets or {}).get(arch, {}).get("test_acc")
        ax.plot(range(n), f["running"], "o-", color=cols["running"], ms=5)
        ax.plot(range(n), f["batch"], "x--", color=cols["batch"], ms=6, lw=1.2)
        ax.axhline(0.5, color="k", lw=1, ls=":")
        names = (
            [l["layer"].replace("blocks.", "b") for l in nets[arch]["layers"]]
            if nets
            else [str(i) for i in range(n)]
        )
        ax.set_xticks(range(n), names, rotation=90 if nets else 0, fontsize=6.5 if nets else 8)
        ax.set(
            xlim=(-0.6, n - 0.4),
            ylim=(-0.03, 1.03),
            xlabel="BN layer (forward order)",
            ylabel=r"share of channels with $|\gamma|/\sigma>1$",
            title=f"{arch} with BN, {n} BN layers"
            + (f"\nclean test acc. {acc:.2f}; " if acc is not None else "\n")
            + f"{f['all_running'].mean():.0%} of all {len(f['all_running'])} channels > 1",
        )
    handles = [
        Line2D(
            [], [], color=cols["running"], marker="o", label=r"$\sigma$ from the running variance"
        ),
        Line2D(
            [],
            [],
            color=cols["batch"],
            marker="x",
            ls="--",
            label=r"$\sigma$ from batch statistics",
        ),
        Line2D(
            [],
            [],
            color="k",
            ls=":",
            lw=1,
            label="half of the channels (paper: > 1 'in most cases')",
        ),
    ]
    fig.tight_layout()
    fig.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=3,
        fontsize=7.5,
        title=f"one trained BN network per architecture (seed {seed})",
        title_fontsize=8,
    )
    return fig


def tradeoff(
    ax: plt.Axes,
    points: list[dict],
    title: str,
    xlabel: str = "memorization of the corrupted samples\n(final accuracy on their corrupted labels)",
    ylabel: str = "clean test accuracy (final)",
) -> None:
    """A utility/memorization trade-off: one marker per variant at (x, y). Each point is a dict
    with x, y, color, family (legend: one entry per family), note (an annotation, may be ''),
    kind: 'base' (star), 'penalty' (circle) or 'projection' (square), n (seeds behind the point:
    in the legend for a base, in the note otherwise) and x_range, y_range ((lo, hi), error bars
    drawn when n > 1). The legend sits below the axes, never on a point."""
    style = {
        "base": ("*", 70, 1.0, 3),
        "penalty": ("o", 28, 0.9, 2),
        "projection": ("s", 28, 0.6, 2),
    }
    seeds = lambda n: f"{n} seed" + ("s" if n != 1 else "")  # noqa: E731
    span = [
        np.ptp([p[k] for p in points]) or 1.0 for k in ("x", "y")
    ]  # to find a point's neighbour
    for p in sorted(points, key=lambda p: list(style).index(p["kind"])):  # legend: bases first
        marker, size, alpha, z = style[p["kind"]]
        if p.get("n", 1) > 1 and "x_range" in p:
            ax.errorbar(
                p["x"],
                p["y"],
                xerr=[[p["x"] - p["x_range"][0]], [p["x_range"][1] - p["x"]]],
                yerr=[[p["y"] - p["y_range"][0]], [p["y_range"][1] - p["y"]]],
                fmt="none",
                ecolor=p["color"],
                alpha=0.5,
                lw=1,
                capsize=2,
                zorder=1,
            )
        base = p["kind"] == "base" and "n" in p
        ax.scatter(
            p["x"],
            p["y"],
            s=size,
            marker=marker,
            color=p["color"],
            alpha=alpha,
            zorder=z,
            label=f"{p['family']} ({seeds(p['n'])})" if base else p["family"],
        )
        note = ", ".join(
            t for t in (p.get("note"), "" if base or "n" not in p else seeds(p["n"])) if t
        )
        others = [(q["x"], q["y"]) for q in points if q is not p]
        near = min(
            others,
            key=lambda q: ((q[0] - p["x"]) / span[0]) ** 2 + ((q[1] - p["y"]) / span[1]) ** 2,
            default=(p["x"], p["y"] - 1),
        )
        if note:  # to the right, above or below: away from the nearest other point
            ax.annotate(
                note,
                (p["x"], p["y"]),
                fontsize=6,
                xytext=(4, -3 if near[1] > p["y"] else 3),
                textcoords="offset points",
                va="top" if near[1] > p["y"] else "bottom",
            )
    handles = dict(zip(*ax.get_legend_handles_labels()[::-1]))  # one legend entry per family
    ax.margins(0.15)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    legend_below(ax, handles.values(), handles.keys(), ncol=2)


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


# ---------------------------------------------------------------- 03 LiRA
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
    if paper_range is not None:
        ax.axhspan(
            *paper_range,
            color="grey",
            alpha=0.15,
            lw=0,
            label=f"paper: overall {paper_range[0]:g}-{paper_range[1]:g} points (all examples)",
        )
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


# ---------------------------------------------------------------- 05 mitigation
def memorization_column(
    axes: Sequence[plt.Axes],
    epochs: Sequence[int],
    curves: dict,
    title: str,
    n_classes: int | None = None,
) -> None:
    """One column of notebook 05's curves: memorization (axes[0]) above clean test accuracy
    (axes[1]) per epoch, mean over seeds with the seed range as band (`band`), both on 0..1;
    curves {legend label: (memorization (seeds, epochs), clean accuracy (seeds, epochs), colour
    key)}, solid, dashed, dash-dotted in turn (curves that coincide stay visible); chance
    (1 / n_classes): a dotted line on axes[0]. The title says what line and band are; the
    legend sits below axes[1]."""
    for (name, (mem, acc, key)), ls in zip(curves.items(), ("-", "--", "-.", "-", "--", "-.")):
        band(axes[0], epochs, mem, key, name, ls)
        band(axes[1], epochs, acc, key, name, ls)
    if n_classes:
        axes[0].axhline(
            1 / n_classes, color="grey", lw=0.8, ls=":", label=f"chance (1/{n_classes})"
        )
    axes[0].set(
        title=f"{title}\nline: mean over seeds, band: range over seeds",
        ylim=(0, 1.02),
        ylabel="memorization\n(accuracy on the corrupted labels)",
    )
    axes[1].set(xlabel="epoch", ylim=(0, 1.02), ylabel="clean test accuracy")
    legend_below(axes[1], *axes[0].get_legend_handles_labels())


# ---------------------------------------------------------------- 04 theory (helpers)
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


# ---------------------------------------------------------------- 01 forced memorization, 02 gradient dynamics
GROUP_LABELS = {
    "weight": "conv/linear weights",
    "gamma": r"norm scale $\gamma$",
    "beta": r"norm shift $\beta$",
    "bias": "conv/linear biases",
    "other": "other (residual scale)",
}
GROUP_STYLE = {
    "weight": ("#333333", "-", "o"),
    "gamma": ("#ff7f0e", "--", "^"),
    "beta": ("#2ca02c", ":", "s"),
    "bias": ("#9467bd", "-.", "D"),
    "other": ("#8c564b", "-", "v"),
}


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


def probe_curves(ax: plt.Axes, epochs: Sequence[float], curves: dict, dodge: float = 0.015) -> None:
    """Values recorded at (possibly uneven) probe epochs: a marker at every probe epoch on the
    mean over runs, joined by a line, and a bar over the runs' range (min..max). curves {legend
    label: (runs (runs, epochs), colour, linestyle, marker)}; curve i is shifted sideways by
    i * dodge of the epoch range (centred) so that the bars of different curves do not overlap."""
    x = np.asarray(epochs, float)
    step = dodge * max(float(np.ptp(x)), 1.0)
    for i, (name, (runs, col, ls, marker)) in enumerate(curves.items()):
        runs = np.asarray(runs, float)
        xi, mean = x + (i - (len(curves) - 1) / 2) * step, np.nanmean(runs, 0)
        ax.plot(xi, mean, color=col, linestyle=ls, marker=marker, markersize=4, label=name)
        if len(runs) > 1:
            err = np.clip(
                [mean - np.nanmin(runs, 0), np.nanmax(runs, 0) - mean], 0, None
            )  # rounding
            ax.errorbar(
                xi, mean, yerr=err, fmt="none", ecolor=col, elinewidth=1, capsize=2, alpha=0.6
            )
    epoch_axis(ax)


def grad_norm_histograms(
    axes: np.ndarray, cells: dict, colors: Sequence[str], xlabel: str, per_decade: int = 15
) -> None:
    """A grid (rows x columns of `axes`) of histograms of log10 per-sample gradient norms, clean
    samples (grey) against noisy ones (the row's colour); cells {(row, column): (log10 norms,
    noisy mask, title)}. The same bins in every panel (so that shapes and densities compare),
    x ticks at powers of ten with plain labels (0.1, 1, 10), every y axis labelled, and right of
    each row a legend with the number of samples behind each histogram."""
    from matplotlib.ticker import FuncFormatter

    lv = np.concatenate([c[0] for c in cells.values()])
    edges = (
        np.arange(np.floor(lv.min() * per_decade), np.ceil(lv.max() * per_decade) + 1) / per_decade
    )
    for (i, j), (v, k, title) in sorted(cells.items()):
        ax = axes[i, j]
        ax.hist(
            v[~k],
            bins=edges,
            alpha=0.6,
            color="0.5",
            density=True,
            label=f"clean ({(~k).sum()} samples)",
        )
        ax.hist(
            v[k],
            bins=edges,
            alpha=0.6,
            color=colors[i],
            density=True,
            label=f"noisy ({k.sum()} samples)",
        )
        ax.set(title=title, ylabel="density (per decade)")
        ticks = np.arange(np.floor(edges[0]), np.ceil(edges[-1]) + 1)
        ticks = np.sort(np.r_[ticks, ticks + np.log10(3)]) if edges[-1] - edges[0] < 2.5 else ticks
        ax.set_xticks(ticks[(ticks >= edges[0]) & (ticks <= edges[-1])])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda t, _: f"{10**t:g}"))
        if i == axes.shape[0] - 1:
            ax.set_xlabel(xlabel)
        else:
            ax.tick_params(labelbottom=False)
    for i in range(axes.shape[0]):
        axes[i, -1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)


def group_ratio_panels(
    axes: Sequence[plt.Axes], epochs: Sequence[float], ratios: dict, ylabel: str
) -> None:
    """One panel per model (shared log y axis, inner tick labels hidden): the median noisy /
    median clean gradient norm of each parameter group at the probe epochs (`probe_curves`),
    one colour and marker per group (`GROUP_STYLE`), the ratio 1 dotted; ratios {panel title:
    {group: (runs, probe epochs)}}."""
    for n, (ax, (title, groups)) in enumerate(zip(axes, ratios.items())):
        if n:
            ax.sharey(axes[0])
        probe_curves(
            ax,
            epochs,
            {
                GROUP_LABELS.get(g, g): (r, *GROUP_STYLE.get(g, ("#7f7f7f", "-", "o")))
                for g, r in groups.items()
            },
        )
        ax.axhline(1, color="grey", lw=0.8, ls=":", label="equal medians (ratio 1)")
        ax.set(title=title, xlabel="epoch", yscale="log", ylabel=ylabel if n == 0 else "")
        if n:
            ax.tick_params(labelleft=False)
    plain_log_axis(axes[0])


# ---------------------------------------------------------------- 01 rare samples, typical learning, controls
MEMORIZATION_YLABEL = {
    "flip": "memorization\n(accuracy on the corrupted labels)",
    "ood": "memorization\n(accuracy on the corrupted labels)",
    "rare": "memorization of rare samples\n(trained minus held-out accuracy)",
}


def memorization_figure(
    epochs: Sequence[int], mem: dict, names: dict, titles: dict, n_classes: int, band_title: str
) -> plt.Figure:
    """One panel per corruption: memorization per epoch and norm (`band`: mean over seeds, band
    the range); mem {corruption: {norm: (seeds, epochs)}}, names {corruption: {norm: legend
    label}}; a dotted reference: chance (1/classes) for flip and ood, no memorization (0) for
    rare. Legends below the panels."""
    fig, axes = panels(len(mem), 4.6, 3.2)
    for ax, corr in zip(axes, mem):
        for norm, runs in mem[corr].items():
            band(ax, epochs, runs, norm, names[corr][norm])
        if corr == "rare":
            ax.axhline(
                0, color="grey", lw=0.8, ls=":", label="no memorization (trained = held-out)"
            )
        else:
            ax.axhline(1 / n_classes, color="grey", lw=0.8, ls=":", label=f"chance (1/{n_classes})")
            ax.set(ylim=(0, 1.02), yticks=np.linspace(0, 1, 6))
        ax.set(title=titles[corr], xlabel="epoch", ylabel=MEMORIZATION_YLABEL[corr])
    fig.tight_layout()
    for ax in axes:
        legend_below(ax, title=band_title, title_fontsize=7)
    return fig


def rare_members_figure(epochs: Sequence[int], curves: dict, band_title: str) -> plt.Figure:
    """One panel per norm, curves {panel title: (norm, trained (seeds, epochs), held-out
    (seeds, epochs), all test (seeds, epochs))}: accuracy on the trained members of the rare
    class (solid), on held-out test samples of that class (dashed) and on every held-out class
    (dotted); the gap between solid and dashed is the memorization of rare samples."""
    from matplotlib.lines import Line2D

    fig, axes = panels(len(curves), 3.6, 3.2)
    for i, (ax, (title, (norm, fit, held, test))) in enumerate(zip(axes, curves.items())):
        if i:
            ax.sharey(axes[0])
        for runs, ls in ((fit, "-"), (held, "--"), (test, ":")):
            band(ax, epochs, runs, norm, linestyle=ls)
        ax.set(title=title, xlabel="epoch", ylabel="accuracy" if i == 0 else "", ylim=(-0.02, 1.02))
        if i:
            ax.tick_params(labelleft=False)
    fig.tight_layout()
    styles = (
        ("-", "trained members of the rare class"),
        ("--", "held-out samples of the rare class"),
        (":", "every class held out (clean test accuracy)"),
    )
    fig.legend(
        [Line2D([], [], color="k", ls=ls) for ls, _ in styles],
        [t for _, t in styles],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=3,
        fontsize=8,
        frameon=False,
        title=band_title,
        title_fontsize=8,
    )
    return fig


def typical_figure(
    epochs: Sequence[int],
    clean: dict,
    mem: dict,
    level: float,
    crossings: dict,
    titles: dict,
    band_title: str,
) -> plt.Figure:
    """Per corruption (columns): top, clean training accuracy (the typical samples) per epoch and
    norm with the level and each norm's mean epoch to reach it (dots); bottom, memorization
    against clean training accuracy (means over seeds per epoch: a curve to the upper left
    memorizes more at the same accuracy), with the level. clean, mem {corr: {norm: (seeds,
    epochs)}}; crossings {corr: {norm: (seeds,) epochs}}."""
    n = len(clean)
    fig, axes = plt.subplots(2, n, figsize=(4.6 * n, 6.4), squeeze=False)
    for j, corr in enumerate(clean):
        top, bot = axes[0, j], axes[1, j]
        lo = 1.0
        for norm, runs in clean[corr].items():
            band(top, epochs, runs, norm)
            e = crossings[corr][norm]
            if np.all(np.isfinite(e)):
                top.plot([e.mean()], [level], "o", color=color(norm), ms=5)
            x, y = np.nanmean(runs, 0), np.nanmean(mem[corr][norm], 0)
            bot.plot(x, y, "-o", color=color(norm), ms=2.5, label=label(norm))
            lo = min(lo, float(x[1]) if len(x) > 1 else float(x[0]))
        for ax in (top, bot):
            (ax.axhline if ax is top else ax.axvline)(
                level, color="k", lw=0.8, ls=":", label=f"clean training accuracy {level:.0%}"
            )
        top.set(
            title=f"{titles[corr]}\ndots: mean epoch to reach {level:.0%}",
            xlabel="epoch",
            ylabel="clean training accuracy\n(typical samples)",
            ylim=(0, 1.02),
        )
        bot.set(
            xlim=(max(0.0, min(lo, level) - 0.03), 1.0),
            xlabel="clean training accuracy (typical samples)",
            ylabel=MEMORIZATION_YLABEL[corr],
            title="memorization at equal clean accuracy",
        )
    fig.tight_layout()
    figure_legend(fig, list(axes[1]), title=band_title + "; bottom: one point per epoch", ncol=5)
    return fig


def controls_figure(values: dict, acc: dict, titles: dict) -> plt.Figure:
    """Final memorization per model, one panel per corruption: a dot per seed and a bar at the
    mean; values {corr: {norm: (seeds,)}}, acc {corr: {norm: clean test accuracy}} (below each
    model's name); the no-BN mean dotted across the panel."""
    fig, axes = panels(len(values), 4.2, 3.4)
    for ax, corr in zip(axes, values):
        norms = list(values[corr])
        for i, norm in enumerate(norms):
            v = np.asarray(values[corr][norm], float)
            ax.scatter(
                np.full(len(v), i),
                v,
                s=14,
                color=color(norm),
                alpha=0.7,
                label="one seed" if i == 0 else None,
            )
            ax.plot(
                [i - 0.25, i + 0.25],
                [v.mean()] * 2,
                color=color(norm),
                lw=2.2,
                label="mean over seeds" if i == 0 else None,
            )
        if "none" in values[corr]:
            ax.axhline(
                np.mean(values[corr]["none"]), color="grey", lw=0.8, ls=":", label="no-BN mean"
            )
        ax.set_xticks(
            range(len(norms)),
            [label(n).replace(", ", ",\n") + f"\ntest {acc[corr][n]:.2f}" for n in norms],
            fontsize=7.5,
        )
        ax.set(
            xlim=(-0.6, len(norms) - 0.4),
            title=titles[corr],
            ylabel=MEMORIZATION_YLABEL[corr],
            xlabel="model (below it: clean test accuracy)",
        )
    fig.tight_layout()
    figure_legend(fig, axes)
    return fig


# ---------------------------------------------------------------- 05 mitigation: the frontier
COLORS.update({"bn_gdecay": "#8c564b", "bn_wd": "#e377c2", "bn_early": "#17becf"})
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


# ---------------------------------------------------------------- 04 theory: trained networks over seeds
_PART_STYLE = {
    "total": ("k", "o", r"$(\gamma/\sigma)^2$ (the product of the two)"),
    "gamma": ("#ff7f0e", "^", r"from $\gamma^2$ (gamma growth)"),
    "sigma": ("#17becf", "s", r"from $1/\sigma^2$ (sigma shrinkage)"),
}


def theory_factor_drivers(study) -> plt.Figure:
    """Rows: trained / initialization (every architecture) and flipped / clean labels (the
    architectures trained on both); per BN layer and for all channels pooled, the factor on
    (gamma/sigma)^2 and its gamma and sigma parts (geometric mean over channels; marker: mean
    over seeds, bar: 95% t interval over seeds) of a `theory.TrainedStudy`."""
    from .theory import VERSUS

    archs, clean = study.archs, study.clean_archs()
    widths = [len(study.layer_names(a)) + 4 for a in archs]
    rows = ["init"] + (["clean"] if clean else [])
    fig, axes = plt.subplots(
        len(rows),
        len(archs),
        figsize=(1.5 + 0.36 * sum(widths), 3.3 * len(rows) + 0.6),
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )
    for i, versus in enumerate(rows):
        for ax, arch in zip(axes[i], archs):
            if versus == "clean" and arch not in clean:
                ax.set_axis_off()
                ax.text(
                    0.5,
                    0.5,
                    f"{arch}: not trained on clean labels at this budget\n(parameter clean_reference)",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                    fontsize=8,
                    color="0.4",
                )
                continue
            rs = study.drivers(arch, versus)
            x = np.arange(len(rs), dtype=float)
            x[-1] += 0.6  # the pooled value apart from the layers
            for k, (part, (c, m, lab)) in enumerate(_PART_STYLE.items()):
                v = np.exp([r[part].value for r in rs])
                err = np.abs(np.exp([[r[part].lo for r in rs], [r[part].hi for r in rs]]) - v)
                ax.errorbar(
                    x + (k - 1) * 0.22,
                    v,
                    yerr=err,
                    fmt=m,
                    color=c,
                    ms=4.5,
                    lw=1,
                    capsize=1.5,
                    label=lab,
                )
            ax.axhline(1, color="0.3", lw=0.8, ls="--")
            names = [n.replace("blocks.", "b") for n in study.layer_names(arch)] + ["all channels"]
            ax.set_xticks(x, names, rotation=90, fontsize=6.5)
            a, b = VERSUS[versus]
            acc = study.test_acc(arch) if versus == "init" else None
            ax.set(
                yscale="log",
                xlim=(-0.7, x[-1] + 0.7),
                xlabel="BN layer (forward order)",
                ylabel=f"factor on $(\\gamma/\\sigma)^2$\n{a} / {b}",
                title=f"{arch} with BN, {a} / {b}"
                + (
                    f"; clean test acc. {acc:.2f}"
                    if acc is not None
                    else f"; clean test acc. {study.test_acc(arch):.2f} / {study.test_acc(arch, 'none'):.2f}"
                ),
            )
            plain_log_axis(ax, "y")
    fig.tight_layout()
    figure_legend(
        fig,
        [ax for row in axes for ax in row],
        ncol=3,
        title=f"geometric mean over each layer's channels (sigma from batch statistics); marker: mean "
        f"over {len(study.seeds)} seeds (networks), bar: 95% t interval over seeds",
    )
    return fig


def theory_share_over_seeds(study) -> plt.Figure:
    """One panel per architecture: per BN layer the share of channels with |gamma|/sigma > 1
    (running variance), one faint marker per seed and the mean over seeds with a 95% t interval
    (clipped to [0, 1]); the title gives the verdict's unit, a network's share over seeds."""
    from .stats import t_mean

    archs = study.archs
    widths = [max(len(study.layer_names(a)), 6) + 3 for a in archs]
    fig, axes = plt.subplots(
        1,
        len(archs),
        figsize=(1.2 + 0.3 * sum(widths), 3.9),
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )
    for ax, arch in zip(axes[0], archs):
        per_layer, _ = study.shares(arch)
        x = np.arange(per_layer.shape[1])
        for j, row in enumerate(per_layer):
            ax.plot(
                x,
                row,
                "o",
                color="0.6",
                ms=3,
                alpha=0.7,
                label="one network (seed)" if j == 0 else None,
            )
        est = [t_mean(col) for col in per_layer.T]
        m = np.array([e.value for e in est])
        lo, hi = np.clip([e.lo for e in est], 0, 1), np.clip([e.hi for e in est], 0, 1)
        ax.errorbar(
            x,
            m,
            yerr=[m - lo, hi - m],
            fmt="o-",
            color=color("bn"),
            ms=5,
            lw=1.2,
            capsize=2,
            label="mean over seeds, 95% t interval",
        )
        ax.axhline(
            0.5, color="k", lw=1, ls=":", label="half of the channels (paper: > 1 'in most cases')"
        )
        ax.set_xticks(
            x,
            [n.replace("blocks.", "b") for n in study.layer_names(arch)],
            rotation=90,
            fontsize=6.5,
        )
        e = study.most_channels(arch)
        ax.set(
            xlim=(-0.6, len(x) - 0.4),
            ylim=(-0.03, 1.03),
            xlabel="BN layer (forward order)",
            ylabel=r"share of channels with $|\gamma|/\sigma>1$",
            title=f"{arch} with BN, clean test acc. {study.test_acc(arch):.2f}\nshare of a network's channels > 1: "
            f"{e.value:.2f} [{e.lo:.2f}, {e.hi:.2f}] over {e.n} networks",
        )
    fig.tight_layout()
    figure_legend(
        fig,
        list(axes[0]),
        ncol=3,
        title=r"$\sigma$ from the running variance (as at test time); "
        f"{len(study.seeds)} networks (seeds) per architecture, trained with flipped labels",
    )
    return fig


# ---------------------------------------------------------------- 03 LiRA: the delta-AUC against the pool size
def size_sweep_figure(sw: dict, paper_range: tuple[float, float] | None, title: str) -> plt.Figure:
    """Notebook 03's size sweep (`bnpaper.exposure.size_sweep`): left, BN - no-BN AUC points per
    pool size N (log axis) with 95% intervals, the fitted line with its band over the sizes
    measured, dashed to the paper's scale with the extrapolated value as an open marker, the
    paper's magnitude shaded; right, clean test accuracy and train-test gap of BN and no-BN."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig, (ax, bx) = panels(2, 4.9, 3.9)
    sizes, d, trend = sw["sizes"], sw["delta"], sw["trend"]
    if paper_range is not None:
        ax.axhspan(
            *paper_range,
            color="grey",
            alpha=0.15,
            lw=0,
            label=f"paper: overall {paper_range[0]:g}-{paper_range[1]:g} points",
        )
    ax.errorbar(
        sizes,
        [d[n].value for n in sizes],
        fmt="o",
        color="k",
        capsize=3,
        zorder=3,
        yerr=[[d[n].value - d[n].lo for n in sizes], [d[n].hi - d[n].value for n in sizes]],
        label="measured (95% interval: pools, targets, examples)",
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
    if sw["extrapolated"]:
        n, pr = sw["n_paper"], sw["predicted"]
        xe = np.geomspace(sizes[-1], n, 20)
        ax.plot(xe, [trend.predict(x).value for x in xe], color="#1f77b4", ls="--", lw=1.2)
        ax.errorbar(
            [n],
            [pr.value],
            yerr=[[pr.value - pr.lo], [pr.hi - pr.value]],
            fmt="o",
            mfc="white",
            color="#1f77b4",
            capsize=3,
            label=f"extrapolated to N = {n:,} (not measured)",
        )
        ticks.append(n)
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
            [sw["acc"][n][norm] for n in sizes],
            "o-",
            color=color(norm),
            label=f"{label(norm)}: clean test accuracy",
        )
        bx.plot(
            sizes,
            [sw["gap"][n][norm] for n in sizes],
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
    return fig


def memorization_column_of_kind(
    axes: Sequence[plt.Axes],
    epochs: Sequence[int],
    curves: dict,
    title: str,
    kind: str,
    n_classes: int,
) -> None:
    """`memorization_column` with the memorization axis of a corruption `kind`: flip and ood on
    0..1 with chance (1/n_classes) dotted; rare (the rare class's trained minus held-out
    accuracy: small, and negative where the held-out samples do better) with 0 (no
    memorization) dotted and the axis spanning the curves (at least -0.05..0.25)."""
    if kind != "rare":
        memorization_column(axes, epochs, curves, title, n_classes)
        return
    axes[0].axhline(0, color="grey", lw=0.8, ls=":", label="no memorization (trained = held-out)")
    memorization_column(axes, epochs, curves, title)
    mems = [np.asarray(mem, float) for mem, _, _ in curves.values()]
    low, high = min(float(np.nanmin(m)) for m in mems), max(float(np.nanmax(m)) for m in mems)
    axes[0].set(
        ylim=(min(-0.05, low - 0.05), min(1.02, max(0.25, high + 0.05))),
        ylabel=MEMORIZATION_YLABEL["rare"],
    )
