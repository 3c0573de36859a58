"""Figures of per-sample gradient norms (notebook 02)."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .plots import epoch_axis, plain_log_axis


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
