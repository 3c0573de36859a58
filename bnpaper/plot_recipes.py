"""The figure of how each norm's learning rate was chosen (the fair protocol, `recipes`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .plots import color, label, legend_below, panels, plain_log_axis


def lr_choice_figure(recipes, title: str) -> plt.Figure:
    """Validation accuracy (mean over the search seeds) against the learning rate, one curve per
    norm on a log axis, the chosen learning rate ringed; a grid point whose training diverged is
    left out of its curve and named in the legend."""
    fig, (ax,) = panels(1, width=5.6, height=3.6)
    for c in recipes.choices.choices:
        grid, acc = np.asarray(c.grid), np.asarray(c.mean_val_acc, float)
        ok = ~np.asarray(c.failed)
        name = f"{label(c.norm)}: lr {c.lr:.3g}"
        if not ok.all():
            name += f" (diverged at {', '.join(f'{x:.3g}' for x in grid[~ok])})"
        ax.plot(grid[ok], acc[ok], "o-", color=color(c.norm), label=name, markersize=4)
        pick = list(grid).index(c.lr)
        ax.plot(
            [c.lr], [acc[pick]], "o", color=color(c.norm), markersize=11, fillstyle="none", mew=1.5
        )
    ax.set_xscale("log")
    plain_log_axis(ax, "x")
    ax.set(xlabel="peak learning rate", ylabel="validation accuracy\n(held-out training images)")
    ax.set_title(title)
    legend_below(ax, title="chosen learning rate (ringed)")
    return fig
