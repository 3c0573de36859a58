"""Figures of memorization along training (notebooks 01 and 05)."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .plots import band, color, figure_legend, label, legend_below, panels, plain_log_axis


MEMORIZATION_YLABEL = {
    "flip": "memorization\n(accuracy on the corrupted labels)",
    "ood": "memorization\n(accuracy on the corrupted labels)",
    "rare": "memorization of rare samples\n(trained minus held-out accuracy)",
}


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


def loss_figure(
    epochs: Sequence[int], noisy: dict, clean: dict, subsets: dict, titles: dict, band_title: str
) -> plt.Figure:
    """One panel per corruption, log y: mean cross-entropy on the atypical samples (solid, named
    by subsets {corr: name}) and on the clean training samples (dashed), per model; noisy,
    clean {corr: {norm: (seeds, epochs)}}. Legends below the panels."""
    fig, axes = panels(len(noisy))
    for ax, corr in zip(axes, noisy):
        for norm, runs in noisy[corr].items():
            band(ax, epochs, runs, norm, f"{label(norm)}: {subsets[corr]}")
            band(ax, epochs, clean[corr][norm], norm, f"{label(norm)}: clean samples", "--")
        ax.set(
            title=titles[corr],
            xlabel="epoch",
            yscale="log",
            ylabel="mean cross-entropy (nats, log scale)",
        )
        plain_log_axis(ax)
    fig.tight_layout()
    for ax in axes:
        legend_below(ax, title=band_title, title_fontsize=7, ncol=2)
    return fig


def clean_accuracy_figure(
    epochs: Sequence[int], test: dict, titles: dict, band_title: str
) -> plt.Figure:
    """One panel per corruption: clean test accuracy per epoch and model; test {corr: {norm:
    (seeds, epochs)}}. Legends below the panels."""
    fig, axes = panels(len(test))
    for ax, corr in zip(axes, test):
        for norm, runs in test[corr].items():
            band(ax, epochs, runs, norm)
        ax.set(title=titles[corr], xlabel="epoch", ylabel="clean test accuracy")
    fig.tight_layout()
    for ax in axes:
        legend_below(ax, title=band_title, title_fontsize=7, ncol=2)
    return fig


def matched_fit_figure(
    curves: dict, arm: dict, levels: Sequence[float], titles: dict, band_title: str
) -> plt.Figure:
    """Memorization against clean training accuracy, one panel per corruption kind, every norm on
    it (`fit_rows.curves`: {corr: {norm: FitCurve}}): the mean over the runs, the band their
    min..max, drawn up to the highest accuracy every run reached (beyond it a mean over fewer runs
    would jump); `arm` {corr: {legend: FitCurve}}: no-BN at raised learning rates, dashed;
    vertical dotted lines at the matched-fit `levels` the verdicts read."""
    fig, axes = panels(len(curves), height=3.8)
    for ax, (corr, by_norm) in zip(axes, curves.items()):
        for norm, fc in by_norm.items():
            ok = fc.reached == len(fc.values)
            ax.plot(fc.levels[ok], fc.mean[ok], color=color(norm), label=label(norm))
            if len(fc.values) > 1:
                lo, hi = np.nanmin(fc.values[:, ok], 0), np.nanmax(fc.values[:, ok], 0)
                ax.fill_between(fc.levels[ok], lo, hi, color=color(norm), alpha=0.15, lw=0)
        for name, fc in arm.get(corr, {}).items():
            ok = fc.reached == len(fc.values)
            ax.plot(fc.levels[ok], fc.mean[ok], color=color("none"), ls="--", label=name)
        for x in levels:
            ax.axvline(x, color="k", lw=0.7, ls=":")
        ax.set(
            title=titles[corr],
            xlabel="clean training accuracy (typical samples)",
            ylabel=MEMORIZATION_YLABEL[corr],
        )
    fig.tight_layout()
    figure_legend(fig, axes, title=band_title + "; dotted: the levels the verdicts read", ncol=5)
    return fig


def _lr_series(ax: plt.Axes, pts: Sequence, values: str, norm: str) -> None:
    """One norm's points of `lr_dependence.points` on `ax`: the mean of `values` per rate over the
    runs that trained, a 95% t bar for memorization, the chosen rate ringed, hollow where a run
    hit the cap unfitted, a cross at the axis' foot where a run diverged."""
    mine = [p for p in pts if p.norm == norm]
    lrs = np.array([p.lr for p in mine])
    if values == "memorization":
        est = [p.estimate for p in mine]
        mean = np.array([e.value for e in est])
        err = np.array([[e.value - e.lo, e.hi - e.value] for e in est]).T
    else:
        mean = np.array([np.nanmean(p.test_acc) if p.runs > p.diverged else np.nan for p in mine])
        err = None
    ax.plot(lrs, mean, color=color(norm), label=label(norm))
    fitted = np.array([p.fitted == p.runs for p in mine])
    for full, face in ((True, color(norm)), (False, "white")):
        sel = fitted == full
        ax.errorbar(
            lrs[sel],
            mean[sel],
            yerr=None if err is None else err[:, sel],
            fmt="o",
            color=color(norm),
            mfc=face,
            capsize=3,
        )
    chosen = np.array([p.chosen for p in mine])
    ax.plot(lrs[chosen], mean[chosen], "o", ms=14, mfc="none", color=color(norm))
    gone = lrs[[p.diverged > 0 for p in mine]]
    if len(gone):  # at the axis' foot whatever its limits become (x: data, y: axes fraction)
        ax.plot(
            gone,
            np.full(len(gone), 0.02),
            "x",
            color=color(norm),
            ms=9,
            transform=ax.get_xaxis_transform(),
            clip_on=False,
        )


def lr_curve_figure(points: dict, titles: dict, band_title: str) -> plt.Figure:
    """Per corruption kind of `points` ({kind: `lr_dependence.points`}), memorization at the end
    of training (trained to fit) against the learning rate and clean test accuracy against it,
    BN and no-BN on each panel (see `_lr_series`)."""
    fig, axes = panels(2 * len(points), height=3.8)
    for i, (kind, pts) in enumerate(points.items()):
        left, right = axes[2 * i], axes[2 * i + 1]
        for norm in dict.fromkeys(p.norm for p in pts):
            _lr_series(left, pts, "memorization", norm)
            _lr_series(right, pts, "test_acc", norm)
        left.set(title=titles[kind], ylabel=MEMORIZATION_YLABEL[kind])
        right.set(title=f"{titles[kind]}\nclean test accuracy", ylabel="clean test accuracy")
        for ax in (left, right):
            ax.set_xscale("log")
            ax.set_xlabel("peak learning rate (trained to fit)")
            plain_log_axis(ax, "x")
    fig.tight_layout()
    note = "; bars: 95% t interval over seeds; ringed: chosen; hollow: censored; x: diverged"
    figure_legend(fig, axes, title=band_title.split(";")[0] + note, ncol=2)
    return fig
