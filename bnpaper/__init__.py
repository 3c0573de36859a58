"""bnpaper: the reproducible companion to "Batch Normalization Amplifies Memorization and
Privacy Risks" (Doan, Gu, Alouani, 2026). Compute modules take and return tensors or
dataclasses; notebooks compose them; `plots` draws; `store` persists; `units` builds every
cached unit; `params` declares and resolves every notebook's parameters; `claims` judges.

Every module is imported here, at import time, so that `store.SOURCE_HASH` (the source of the
whole package, part of every cache key) describes the code this process runs."""

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
    "shadow",
    "stats",
    "store",
    "theory",
    "units",
]
__version__ = "0.2.0"
