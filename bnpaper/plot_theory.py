"""Notebook 04's figures: margin growth, gamma feedback, gamma/sigma in trained networks."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from . import theory_text
from .plots import band, color, figure_legend, plain_log_axis


_CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#d62728")
_PART_STYLE = {
    "total": ("k", "o", r"$(\gamma/\sigma)^2$ (the product of the two)"),
    "gamma": ("#ff7f0e", "^", r"from $\gamma^2$ (gamma growth)"),
    "sigma": ("#17becf", "s", r"from $1/\sigma^2$ (sigma shrinkage)"),
}


def _key(label: str, **style) -> Line2D:
    """A legend entry drawn with `style` (no data)."""
    return Line2D([], [], label=label, **style)


def margin_growth(study, batch_sizes: Sequence[int], lrs: Sequence[float]) -> plt.Figure:
    """Left: measured vs predicted margin growth of outliers per probe (a
    `toy_studies.ProbeStudy`) at the default lr, one colour per batch size, tiny-step probes as
    crosses, the paper's prediction (identity) dashed; the axes span the plotted probes. Right,
    per batch size and lr: the verdict's statistic (ratio estimator per run, mean over runs,
    filled; its bootstrap interval at the verdict's setting) and the median probe's measured /
    predicted (open)."""
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
    tiny_label = f"batch {B0}, step $10^{{-6}}$: {len(study.tiny['measured'])} probes"
    ax.scatter(shown[0], shown[1], s=12, marker="x", color="k", label=tiny_label)
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
    yerr = [[a.value - a.lo], [a.hi - a.value]]
    bx.errorbar([B0], [a.value], yerr=yerr, fmt="none", ecolor="k", capsize=4, lw=1.2)
    tiny = study.tiny_median_ratio()
    bx.plot([B0], [tiny], "kx", ms=8, mew=1.6)
    bx.axhline(1, color="k", ls="--", lw=1)
    vals = np.array(vals + [a.lo, a.hi, tiny, 1.0], float)
    vals = vals[np.isfinite(vals) & (vals > 0)]
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
        _key(f"lr {eta:g}", color=lr_cols[i % len(lr_cols)], lw=2) for i, eta in enumerate(lrs)
    ]
    handles += [
        _key(
            "ratio estimator (the verdict's): per run "
            r"$\Sigma\Delta m_{BN}/\Sigma(\gamma/\sigma)^2\Delta m_{no\text{-}BN}$, mean over runs;"
            "\n  weights probes by predicted growth, so the largest $(\\gamma/\\sigma)^2$ dominate",
            color="grey",
            marker="o",
        ),
        _key(
            "median probe (geometric; each probe counts once)",
            color="grey",
            marker="s",
            mfc="white",
            ls="--",
        ),
        _key(
            "95% bootstrap interval over runs (the verdict's setting)",
            color="k",
            marker="|",
            ms=10,
            ls="none",
        ),
        _key(
            f"step $10^{{-6}}$, median probe (vs the exact first order: "
            f"{study.tiny_median_ratio(full=True):.2f})",
            color="k",
            marker="x",
            ls="none",
        ),
        _key("paper: measured = predicted", color="k", ls="--", lw=1),
    ]
    bx.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=7.5, ncol=1
    )
    fig.tight_layout()
    return fig


def gamma_feedback(fb) -> plt.Figure:
    """gamma, (gamma/sigma)^2 (from step 1: the random initial w is off the scale) and outlier
    memorization per SGD step of the toy (`toy_studies.FeedbackStudy`), BN with outliers vs without
    (grey, dashed); memorization BN vs no-BN. The panels' notes (`theory_text.feedback_notes`)
    say from the data whether gamma is higher with outliers and what drives the factor."""
    notes, acc, n = theory_text.feedback_notes(fb), fb.test_acc, len(fb.seeds)
    steps = np.arange(fb.arr("bn", "gamma").shape[1])
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.6))
    for ax, k, s0 in zip(axes[:2], ("gamma", "factor"), (0, 1)):
        band(ax, steps[s0:], fb.arr("bn", k)[:, s0:], "bn", "BN, with outliers")
        clean = "BN, no outliers (same typical samples)"
        band(ax, steps[s0:], fb.arr("bn_clean", k)[:, s0:], "bn_clean", clean, "--")  # grey
    axes[0].set(xlabel="SGD step", ylabel=r"BN scale $\gamma$", title=notes["gamma"])
    axes[1].set(
        xlabel="SGD step",
        ylabel=r"$(\gamma/\sigma)^2$ (batch $\sigma$)",
        yscale="log",
        title=f"predicted amplification $(\\gamma/\\sigma)^2$\n{notes['factor']}\n{notes['start']}",
    )
    plain_log_axis(axes[1], "y")
    for key, name in (("bn", "BN"), ("none", "no-BN")):
        label = f"{name} (toy clean test acc. {acc[key]:.2f})"
        band(axes[2], steps, fb.arr(key, "outlier_acc"), key, label)
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


def gamma_sigma_layers(
    nets: dict, fracs: dict, seed: int | None = None, noise_frac: float | None = None
) -> plt.Figure:
    """Per architecture, box plots of |gamma|/sigma per channel for each BN layer, sigma from
    the running variance (BN red) and from batch statistics (teal); boxes: quartiles, whiskers:
    5th-95th percentile; `nets[arch]` as from `gamma_sigma.trained_gamma_sigma` (test_acc
    optional), `fracs[arch]` from `gamma_sigma.channel_fractions`."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

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
        layers = nets[arch]["layers"]
        pos = np.arange(len(layers))
        for key, shift in (("ratio_running", -0.19), ("ratio_batch", 0.19)):
            c = cols[key]
            ax.boxplot(
                [layer[key].numpy() for layer in layers],
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
        above = fracs[arch]["all_running"]
        acc = nets[arch].get("test_acc")
        ax.set(
            yscale="log",
            xticks=pos,
            xlim=(-0.6, len(layers) - 0.4),
            xlabel="BN layer (forward order)",
            ylabel=r"$|\gamma|/\sigma$ per channel",
            title=f"{arch} with BN"
            + (f", clean test acc. {acc:.2f}" if acc is not None else "")
            + f"\n{above.mean():.0%} of its {len(above)} channels > 1 (running variance)",
        )
        names = [layer["layer"].replace("blocks.", "b") for layer in layers]
        ax.set_xticklabels(names, rotation=90, fontsize=6.5)
        plain_log_axis(ax, "y")
    how = (
        "one network per architecture"
        + (f" (seed {seed})" if seed is not None else "")
        + (f", trained with {noise_frac:.0%} flipped labels" if noise_frac is not None else "")
    )
    sigmas = {
        "ratio_running": r"$\sigma = \sqrt{\mathrm{running\ variance}+\epsilon}$ (at test time)",
        "ratio_batch": r"$\sigma$ from batch statistics (median over 4 training batches)",
    }
    handles = [
        Patch(facecolor=to_rgba(cols[k], 0.55), edgecolor=cols[k], label=lab)
        for k, lab in sigmas.items()
    ]
    one = r"$|\gamma|/\sigma = 1$: above it BN amplifies (paper: > 1 in most cases)"
    handles.append(_key(one, color="k", ls="--", lw=1))
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


def factor_drivers(study) -> plt.Figure:
    """Rows: trained / initialization (every architecture) and flipped / clean labels (the
    architectures trained on both); per BN layer and for all channels pooled, the factor on
    (gamma/sigma)^2 and its gamma and sigma parts (geometric mean over channels; marker: mean
    over seeds, bar: 95% t interval over seeds) of a `gamma_sigma.TrainedStudy`."""
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
            _drivers_panel(ax, study, arch, versus)
    fig.tight_layout()
    figure_legend(
        fig,
        [ax for row in axes for ax in row],
        ncol=3,
        title="geometric mean over each layer's channels (sigma from batch statistics); marker: "
        f"mean over {len(study.seeds)} seeds (networks), bar: 95% t interval over seeds",
    )
    return fig


def _drivers_panel(ax: plt.Axes, study, arch: str, versus: str) -> None:
    """One panel of `factor_drivers`: the factor and its parts per BN layer of `arch`."""
    if versus == "clean" and arch not in study.clean_archs():
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
        return
    rs = study.drivers(arch, versus)
    x = np.arange(len(rs), dtype=float)
    x[-1] += 0.6  # the pooled value apart from the layers
    for k, (part, (c, m, lab)) in enumerate(_PART_STYLE.items()):
        v = np.exp([r[part].value for r in rs])
        err = np.abs(np.exp([[r[part].lo for r in rs], [r[part].hi for r in rs]]) - v)
        ax.errorbar(
            x + (k - 1) * 0.22, v, yerr=err, fmt=m, color=c, ms=4.5, lw=1, capsize=1.5, label=lab
        )
    ax.axhline(1, color="0.3", lw=0.8, ls="--")
    names = [n.replace("blocks.", "b") for n in study.layer_names(arch)] + ["all channels"]
    ax.set_xticks(x, names, rotation=90, fontsize=6.5)
    a, b = theory_text.VERSUS[versus]
    acc = f"{study.test_acc(arch):.2f}"
    if versus == "clean":
        acc += f" / {study.test_acc(arch, 'none'):.2f}"
    ax.set(
        yscale="log",
        xlim=(-0.7, x[-1] + 0.7),
        xlabel="BN layer (forward order)",
        ylabel=f"factor on $(\\gamma/\\sigma)^2$\n{a} / {b}",
        title=f"{arch} with BN, {a} / {b}; clean test acc. {acc}",
    )
    plain_log_axis(ax, "y")


def share_over_seeds(study) -> plt.Figure:
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
            title=f"{arch} with BN, clean test acc. {study.test_acc(arch):.2f}\nshare of a "
            f"network's channels > 1: {e.value:.2f} [{e.lo:.2f}, {e.hi:.2f}] over {e.n} networks",
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


def first_order(study, band_: Sequence[float]) -> plt.Figure:
    """The first-order test (a `toy_studies.ProbeStudy`'s tiny-step probes): per run (seed x
    |w_0|) its geometric mean of measured / predicted, against the paper's (gamma/sigma)^2 and
    against the exact first order (d sigma/dw kept), each with its geometric mean over runs and
    t interval; the claims file's band shaded."""
    keys = study.tiny_runs()[0]
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    ax.axhspan(*band_, color="0.9", label=f"claims band [{band_[0]:g}, {band_[1]:g}]")
    ax.axhline(1, color="k", ls="--", lw=1)
    parts = (
        (False, r"over $(\gamma/\sigma)^2$ (the paper's factor)", "#d62728", study.tiny_agreement),
        (True, r"over the exact first order ($d\sigma/dw$ kept)", "#1f77b4", study.tiny_exact),
    )
    xs = np.arange(len(keys))
    for j, (full, label, c, est) in enumerate(parts):
        vals = np.exp(study.tiny_runs(full=full)[1])
        ax.plot(xs + 0.12 * (2 * j - 1), vals, "o", color=c, label=f"{label}: one run")
        x_est = len(keys) + 0.5 + 0.4 * j
        yerr = [[est.value - est.lo], [est.hi - est.value]]
        ax.errorbar([x_est], [est.value], yerr=yerr, fmt="s", color=c, capsize=4)
        ax.annotate(
            f"{est.value:.2f}\n[{est.lo:.2f}, {est.hi:.2f}]",
            (x_est, est.hi),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
            fontsize=7,
            color=c,
        )
    names = [f"|w0| {k[0]:g}\nseed {int(k[1])}" for k in keys] + ["over\nruns"]
    ax.set_xticks(list(xs) + [len(keys) + 0.7])
    ax.set_xticklabels(names, fontsize=7)
    ax.set(
        yscale="log",
        xlabel="run (initial |w|, seed), then the geometric mean over runs",
        ylabel=r"tiny-step measured / predicted (geometric mean)",
        title=f"the first order at step {study.tiny_lr:g}: what the simplification drops\n"
        f"({len(study.tiny['measured'])} probes, {len(keys)} runs, t interval over runs)",
    )
    plain_log_axis(ax, "y")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7.5, ncol=1)
    fig.tight_layout()
    return fig


def tracking(decays) -> plt.Figure:
    """One panel per reading of `gamma_sigma.MEASURES` (a `gamma_sigma.DecayStudy`): final
    memorization of the flips against the reading's median over channels, one marker per
    network (its weight decay in the marker's size), the seeds joined by lines in decay order;
    each panel's title gives the seeds' Spearman rank correlations (n/a: nothing to rank)."""
    from .gamma_sigma import MEASURES, spearman

    mem = decays.memorization()
    fig, axes = plt.subplots(1, len(MEASURES), figsize=(4.2 * len(MEASURES), 3.8), sharey=True)
    sizes = np.linspace(20, 80, len(decays.decays))
    for ax, (key, name) in zip(axes, MEASURES.items()):
        val = decays.measure(key)
        for j, s in enumerate(decays.seeds):
            c = _CYCLE[j % len(_CYCLE)]
            ax.plot(val[:, j], mem[:, j], "-", color=c, lw=1, alpha=0.6)
            ax.scatter(val[:, j], mem[:, j], s=sizes, color=c, label=f"seed {s}")
        raw = [spearman(mem[:, j], val[:, j]) for j in range(len(decays.seeds))]
        rho = ", ".join("n/a" if np.isnan(r) else f"{r:+.1f}" for r in raw)
        ax.set(xscale="log", xlabel=name, title=f"Spearman per seed: {rho}")
        plain_log_axis(ax, "x")
    axes[0].set_ylabel("memorization of the flips (final)")
    decay_keys = [
        Line2D([], [], ls="none", marker="o", color="grey", ms=np.sqrt(sz), label=f"wd {d:g}")
        for sz, d in zip(sizes, decays.decays)
    ]
    handles = axes[0].get_legend_handles_labels()[0] + decay_keys
    axes[-1].legend(handles=handles, fontsize=7.5, loc="best")
    fig.tight_layout()
    return fig
