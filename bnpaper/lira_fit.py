"""How notebook 03's shadow models fit, and the matched-fit reading of a BN - no-BN row: one
module that the pools (`exposure`) and the size sweep (`size_trend`) both read."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from . import claims
from .plots import label
from .shadow import ShadowPool


def model_mean(pools: Sequence[ShadowPool], field: str) -> float:
    """The mean over pools of each pool's mean over its models of `field` (test_acc, gap)."""
    return float(np.mean([getattr(p, field).mean() for p in pools]))


def fit_of(pools: Sequence[ShadowPool]) -> dict:
    """How the models of `pools` (one norm, every seed) fit: their mean clean training accuracy on
    their own IN examples, the epochs they trained (mean, max; NaN: not recorded) and how many hit
    the epoch cap below the fit level (censored), of how many models."""
    epochs = [p.epochs for p in pools if p.epochs is not None]
    e = np.concatenate(epochs).astype(float) if epochs else np.array([np.nan])
    censored = sum(int(p.censored.sum()) for p in pools if p.censored is not None)
    return {
        "train_clean_acc": model_mean(pools, "train_clean_acc"),
        "epochs_mean": float(e.mean()),
        "epochs_max": float(e.max()),
        "censored": censored,
        "models": sum(len(p.keep) for p in pools),
    }


def at_fit(
    acc: Mapping[str, float], fit: Mapping[str, dict], compared: tuple[str, str] = ("bn", "none")
) -> dict:
    """The matched-fit reading of `compared` (first minus second) for `claims.judge`: the gaps in
    clean training accuracy (each model on its own IN examples, mean over models) and in clean
    test accuracy, and the row's fields: both accuracies, the epochs used and the censored
    models of each."""
    a, b = compared
    return {
        "train_acc_gap": fit[a]["train_clean_acc"] - fit[b]["train_clean_acc"],
        "test_acc_gap": acc[a] - acc[b],
        "clean_train_acc": {n: fit[n]["train_clean_acc"] for n in compared},
        "epochs_used": {n: [fit[n]["epochs_mean"], fit[n]["epochs_max"]] for n in compared},
        "censored": {n: fit[n]["censored"] for n in compared},
    }


CAPPED = "hit the epoch cap below the fit level"
NEVER = "never reached the level, read at their end"


def censored_note(row: claims.Verdict, why: str = CAPPED) -> claims.Verdict:
    """`row`, saying so in its note when any compared model is censored (`why`: by default it
    hit its epoch cap below the fit level; a reading at a lower level: `NEVER`), so that its
    reading is not at the level."""
    cens = {n: c for n, c in (row.fields.get("censored") or {}).items() if c}
    if not cens:
        return row
    what = ", ".join(f"{c} {label(n)} model(s)" for n, c in cens.items())
    note = f"depends on censored models ({why}: {what})"
    return dataclasses.replace(row, magnitude=f"{row.magnitude}; {note}" if row.magnitude else note)
