"""bnpaper: the reproducible companion to "Batch Normalization Amplifies Memorization and
Privacy Risks" (Doan, Gu, Alouani, 2026). Compute modules take and return tensors or
dataclasses; notebooks compose them; `plots` draws; `store` persists; `units` builds every
cached unit; `params` declares and resolves every notebook's parameters; `claims` judges.

A unit's cache key holds the source of the modules its computation imports (`closure`). The
package's files are read once per process, when `closure` is first imported, which is here, at
`import bnpaper`; every compute module is imported here in the same moment, so the sources hashed
are the code this process runs (an edit after import does not pass for new code: it runs, under
its own key, in the next process)."""

from . import closure  # first: the package's sources are read now (see above)
from .config import ConfigError, seed_everything
from .data import Dataset, Split, flip_labels, inject_ood, load_dataset, make_split
from .models import ARCHS, NORMS, build_model
from .train import TrainConfig, TrainResult, fit
from .mitigation import GammaSigmaProjection, GammaSigmaRegularizer
from . import (
    claims,
    exposure,
    grads,
    memorization,
    mia,
    frontier,
    mitigation,  # noqa: E402
    mitigation_claims,
    mitigation_lira,
    reduction,
    selection,
    variants,
    notebook,
    packed,
    params,
    probes,
    progress,
    shadow,
    stats,
    store,
    theory,
    units,
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
    "claims",
    "closure",
    "exposure",
    "grads",
    "memorization",
    "mia",
    "mitigation",
    "frontier",
    "mitigation_claims",
    "mitigation_lira",
    "reduction",
    "selection",
    "variants",
    "notebook",
    "packed",
    "params",
    "probes",
    "progress",
    "shadow",
    "stats",
    "store",
    "theory",
    "units",
]
__version__ = "0.2.0"
