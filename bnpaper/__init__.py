"""bnpaper: the reproducible companion to "Batch Normalization Amplifies Memorization and
Privacy Risks" (Doan, Gu, Alouani, 2026). Compute modules take and return tensors or
dataclasses; notebooks compose them; `plots` draws; `store` persists."""
from .config import ConfigError, seed_everything
from .data import Dataset, Split, flip_labels, inject_ood, load_dataset, make_split
from .models import ARCHS, NORMS, build_model
from .train import TrainConfig, TrainResult, fit
from . import grads, mia, mitigation, packed, shadow, stats, store, theory  # noqa: E402

__all__ = ["ConfigError", "seed_everything", "Dataset", "Split", "flip_labels", "inject_ood",
           "load_dataset", "make_split", "ARCHS", "NORMS", "build_model", "TrainConfig",
           "TrainResult", "fit", "grads", "mia", "mitigation", "packed", "shadow", "stats",
           "store", "theory"]
__version__ = "0.1.0"
