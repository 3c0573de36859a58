"""bnpaper: the reproducible companion to "Batch Normalization Amplifies Memorization and
Privacy Risks" (Doan, Gu, Alouani, 2026).

Compute modules take and return tensors or frozen dataclasses; notebooks compose them; `plots`
and the `plot_*` modules draw; `text`, `theory_text` and `mitigation_text` write the sentences
and tables; `store` persists; `units` builds every cached unit; `declarations` declares and
`params` resolves every notebook's parameters; `claims` judges. The package map, one line per
module: docs/layout.md.

A unit's cache key holds the source of the modules its computation imports (`closure`). The
package's files are read once per process, when `closure` is first imported, which is here, at
`import bnpaper`; every module is imported here in the same moment, so the sources hashed are the
code this process runs (an edit after import does not pass for new code: it runs, under its own
key, in the next process)."""

from . import closure  # first: the package's sources are read now (see above)
from .config import ConfigError, seed_everything
from .data import Dataset, Split, flip_labels, inject_ood, load_dataset, make_split
from .models import ARCHS, NORMS, build_model
from .train import TrainConfig, TrainResult, fit
from .mitigation import GammaSigmaProjection, GammaSigmaRegularizer
from . import (
    claims,
    data,
    datasets,
    declarations,
    derivation,
    exposure,
    frontier,
    gamma_sigma,
    grad_analysis,
    grad_rules,
    grads,
    lenet_grads,
    memorization,
    mia,
    mitigation,
    mitigation_claims,
    mitigation_lira,
    mitigation_text,
    models,
    notebook,
    packed,
    params,
    plot_gradients,
    plot_lira,
    plot_memorization,
    plot_mitigation,
    plot_theory,
    plots,
    probes,
    progress,
    reduction,
    results_tables,
    selection,
    shadow,
    size_trend,
    sources,
    stats,
    store,
    text,
    theory,
    theory_text,
    toy,
    toy_studies,
    train,
    units,
    variants,
)

__all__ = [
    "ConfigError",
    "seed_everything",
    "Dataset",
    "Split",
    "flip_labels",
    "inject_ood",
    "load_dataset",
    "make_split",
    "ARCHS",
    "NORMS",
    "build_model",
    "TrainConfig",
    "TrainResult",
    "fit",
    "GammaSigmaRegularizer",
    "GammaSigmaProjection",
    "closure",
    "claims",
    "data",
    "datasets",
    "declarations",
    "derivation",
    "exposure",
    "frontier",
    "gamma_sigma",
    "grad_analysis",
    "grad_rules",
    "grads",
    "lenet_grads",
    "memorization",
    "mia",
    "mitigation",
    "mitigation_claims",
    "mitigation_lira",
    "models",
    "notebook",
    "packed",
    "params",
    "plot_gradients",
    "plot_lira",
    "plot_memorization",
    "plot_mitigation",
    "plot_theory",
    "plots",
    "probes",
    "progress",
    "reduction",
    "results_tables",
    "selection",
    "shadow",
    "size_trend",
    "sources",
    "stats",
    "store",
    "mitigation_text",
    "text",
    "theory_text",
    "theory",
    "toy",
    "toy_studies",
    "train",
    "units",
    "variants",
]
__version__ = "0.2.0"
