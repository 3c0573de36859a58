"""Figures of per-sample gradient norms (notebook 02)."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .plots import color, epoch_axis, figure_legend, label, legend_below, panels, plain_log_axis


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


# ---------------------------------------------------------------- notebook 02's figures
# `medians` arguments: {probe definition: {norm: grad_analysis.Medians}} (runs x probe epochs
# arrays); `names`: {norm: legend label}; `bars`: the legend title saying what markers and bars
# are.
def histogram_figure(pooled: dict, names: dict, title: str) -> plt.Figure:
    """A row per model and a column per probe epoch of log10 norm histograms, noisy against
    clean; pooled {(norm, epoch): (log10 norms, noisy mask)}, rows and columns in order."""
    norms, shown = (
        list(dict.fromkeys(n for n, _ in pooled)),
        list(dict.fromkeys(e for _, e in pooled)),
    )
    fig, axes = plt.subplots(
        len(norms),
        len(shown),
        figsize=(3.3 * len(shown) + 1.6, 2.5 * len(norms)),
        squeeze=False,
        sharex=True,
    )
    cells = {
        (i, j): (*pooled[n, e], f"{names[n]}, epoch {e}")
        for i, n in enumerate(norms)
        for j, e in enumerate(shown)
    }
    colors = [color(n) for n in norms]
    grad_norm_histograms(axes, cells, colors, "per-sample gradient l2 norm (log scale)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def median_figure(epochs: Sequence[float], medians: dict, names: dict, titles: dict, bars: str):
    """A panel per probe definition (titles {definition: title}): the median norm of noisy
    (solid) and clean (dashed) probe samples per model, log y."""
    fig, axes = panels(len(titles), 4.6, 3.6)
    for ax, mode in zip(axes, titles):
        m = medians[mode]
        curves = {f"{names[n]}: noisy": (m[n].noisy, color(n), "-", "o") for n in m}
        curves.update({f"{label(n)}: clean": (m[n].clean, color(n), "--", "s") for n in m})
        probe_curves(ax, epochs, curves)
        ax.set(
            title=titles[mode],
            xlabel="epoch",
            ylabel="median per-sample gradient l2 norm",
            yscale="log",
        )
        plain_log_axis(ax)
    fig.tight_layout()
    figure_legend(fig, axes, bars, ncol=len(names))
    return fig


def ratio_figure(
    epochs: Sequence[float], medians: dict, names: dict, titles: dict, share: tuple, bars: str
) -> plt.Figure:
    """Median noisy / median clean norm per model under each definition of `titles` (one panel
    each, the same y axis), then the share of the summed norms carried by noisy samples in the
    "eval" probe; share = (noisy share of the samples, number of probe samples)."""
    fig, axes = panels(len(titles) + 1, 3.7, 3.4)
    for ax, mode in zip(axes, titles):
        if ax is not axes[0]:
            ax.sharey(axes[0])
        m = medians[mode]
        probe_curves(ax, epochs, {names[n]: (m[n].ratio, color(n), "-", "o") for n in m})
        ax.axhline(1, color="grey", lw=0.8, ls=":", label="equal medians (ratio 1)")
        ax.set(
            title=titles[mode],
            xlabel="epoch",
            ylabel="median noisy / median clean norm",
            yscale="log",
        )
    plain_log_axis(axes[0])
    m, (noise_frac, n_probe) = medians["eval"], share
    probe_curves(axes[-1], epochs, {names[n]: (m[n].share, color(n), "-", "o") for n in m})
    axes[-1].axhline(
        noise_frac, color="k", ls=":", lw=1, label=f"noisy share of the samples ({noise_frac:.0%})"
    )
    axes[-1].set(
        title=f"running statistics, all {n_probe} probe samples",
        xlabel="epoch",
        ylim=(0, 1),
        ylabel="share of the summed gradient norm\ncarried by noisy samples",
    )
    fig.tight_layout()
    figure_legend(fig, axes, bars, ncol=2)
    return fig


def fixed_statistics_figure(
    epochs: Sequence[float],
    fixed: dict,
    medians: dict,
    names: dict,
    words: dict,
    left_title: str,
    bars: str,
) -> plt.Figure:
    """Left: per BN-like model (fixed {norm: (noisy, clean)}), the median over probe samples of
    the "batch_fixed" / "batch" norm, noisy solid and clean dashed; right: the noisy/clean ratio
    under both definitions (words {definition: its name})."""
    fig, axes = panels(2, 4.6, 3.6)
    left, right = {}, {}
    for n, (noisy, clean) in fixed.items():
        left[f"{names[n]}: noisy"] = (noisy, color(n), "-", "o")
        left[f"{label(n)}: clean"] = (clean, color(n), "--", "s")
        for mode, ls, mk in (("batch", "-", "o"), ("batch_fixed", "-.", "^")):
            right[f"{label(n)}, {words[mode]}"] = (medians[mode][n].ratio, color(n), ls, mk)
    for ax, cur in zip(axes, (left, right)):
        probe_curves(ax, epochs, cur)
    axes[0].axhline(1.0, color="grey", lw=0.8, ls=":", label="held fixed = exact (ratio 1)")
    axes[0].set(
        xlabel="epoch",
        ylabel="norm, statistics held fixed / exact norm\n(median over probe samples)",
        title=left_title,
    )
    axes[1].set(
        xlabel="epoch",
        ylabel="median noisy / median clean norm",
        yscale="log",
        title="noisy/clean ratio under both definitions",
    )
    plain_log_axis(axes[1])
    fig.tight_layout()
    for ax in axes:
        legend_below(ax, title=bars, title_fontsize=7)
    return fig


def group_ratio_figure(epochs: Sequence[float], ratios: dict, ylabel: str, bars: str):
    """`group_ratio_panels` in a figure of its own, one panel per model, legend below."""
    fig, axes = panels(len(ratios), 3.8, 3.4)
    group_ratio_panels(axes, epochs, ratios, ylabel)
    fig.tight_layout()
    figure_legend(fig, axes, bars)
    return fig


def ratio_fit_figure(runs: dict, curves: dict, names: dict, levels: Sequence[float], title: str):
    """The noisy/clean median norm ratio against the clean training error (1 - clean training
    accuracy, log axis, decreasing to the right: training goes left to right and the levels near
    fit spread out), one colour per norm: each run's probed epochs as a thin line (`runs` {norm:
    [matched_fit.Trajectory]}), the mean over runs at the levels read (`curves` {norm:
    matched_fit.FitCurve}) as dots; dotted verticals at `levels`."""
    floor = 1e-3  # an error below it (all clean samples fitted) is drawn at it
    fig, (ax,) = panels(1, width=5.6, height=3.8)
    for n, trajs in runs.items():
        for i, t in enumerate(trajs):
            ax.plot(
                np.maximum(1 - t.fit, floor),
                t.value,
                "-",
                color=color(n),
                alpha=0.35,
                linewidth=1,
                label=names[n] if i == 0 else None,
            )
        c = curves[n]
        ax.plot(1 - c.levels, c.mean, "o", color=color(n), markersize=6, markeredgecolor="k")
    for x in levels:
        ax.axvline(1 - x, color="0.6", linestyle=":", linewidth=1)
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    plain_log_axis(ax, "x")
    plain_log_axis(ax, "y")
    ax.set(
        xlabel="clean training error (1 - clean training accuracy)",
        ylabel="median noisy / median clean norm",
    )
    ax.set_title(title)
    legend_below(ax, title="lines: one run (its probed epochs); dots: mean at the levels read")
    return fig
