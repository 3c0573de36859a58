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


def save_figure(fig: plt.Figure, notebook: str, dataset: str, name: str) -> Path:
    """Save `fig` as `figures/<notebook>/<dataset>/<name>.png` and `.pdf`; return the PNG path.
    Metadata that would change between runs (dates, software versions) is left out."""
    d = figure_dir(notebook, dataset)
    d.mkdir(parents=True, exist_ok=True)
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
    if len(runs) > 1:
        ax.fill_between(x, np.nanmin(runs, 0), np.nanmax(runs, 0), color=color(norm), alpha=0.2,
                        linewidth=0)
