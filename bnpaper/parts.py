"""The regularizer taken apart: which part of the gamma/sigma penalty removes memorization.

The penalty relu(|gamma|/sigma - tau)^2 can lower the ratio two ways: shrink gamma, or grow sigma
(the scale of the weights feeding BN, which lowers BN's effective step lr/|w|^2 on that layer).
Its parts (`variants.parts`, `mitigation.ratio_terms`): sigma detached (moves gamma only), gamma
detached (moves only the weights feeding BN), a bound on |gamma| itself; beside them BN at a lower
learning rate (`variants.lower_lrs`), the effective-learning-rate alternative.

`channel_readings` gives, per model, the medians over its BN channels of |gamma|/sigma, sigma,
|gamma| and the effective step (`bn_scale.scale_free`); `part_rows` judges each part by the rule
of claims.yaml (`05.part`): the share of BN's final memorization it removes, per evaluation seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .bn_scale import scale_free
from .claims import Verdict, holds, judge
from .reduction import paired_changes, reduction
from .variants import ACCURACY, MEMORIZATION, Variant, finals

READINGS = ("ratio", "sigma", "gamma", "effective_step")  # `channel_readings`' medians
BATCH = 128  # images of the training-mode forward pass that measures batch sigma


@dataclass(frozen=True)
class Readings:
    """One model's medians over the channels of its directly fed BN layers: |gamma|/sigma, sigma
    (batch statistics), |gamma| and the effective step lr/|w_c|^2."""

    ratio: float
    sigma: float
    gamma: float
    effective_step: float


def channel_readings(result, split, lr: float) -> Readings:
    """`Readings` of one trained model (a TrainResult and the Split it trained on, `lr` the
    learning rate it trained with): BN layers with a learned gamma and a weight feeding them
    (`bn_scale.feeding_layers`), sigma from one training-mode batch of its training images."""
    import torch

    from .data import normalize
    from .gamma_sigma import gamma_sigma

    model = result.model(split.x.shape[1], split.n_classes, split.x.shape[2])
    x = normalize(split.x[:BATCH], split.mean, split.std)
    layers = [g for g in gamma_sigma(model, x, BATCH, 1)]
    free = {f["layer"]: f for f in scale_free(model, layers, lr)}
    kept = [g for g in layers if g["layer"] in free]
    gamma = torch.cat([g["gamma"] for g in kept])
    sigma = torch.cat([g["sigma_batch"] for g in kept])
    step = torch.cat([free[g["layer"]]["effective_step"] for g in kept])
    med = [float(v.median()) for v in (gamma / sigma, sigma, gamma, step)]
    return Readings(*med)


def readings_table(
    runs: Mapping, splits: Mapping, kind: str, seeds: Sequence[int], models: Sequence[Variant]
) -> dict[str, dict[str, float]]:
    """Per model (name) on the `kind` splits, mean over `seeds`: final memorization, clean test
    accuracy and every `READINGS` median (each model read with the learning rate it trained
    with, from its config)."""
    out = {}
    for v in models:
        rs = [runs[kind, v.name, s] for s in seeds]
        read = [channel_readings(r, splits[kind, s], r.config["lr"]) for r, s in zip(rs, seeds)]
        out[v.name] = {
            "memorization": float(finals(runs, kind, v.name, seeds, MEMORIZATION).mean()),
            "clean_test_acc": float(finals(runs, kind, v.name, seeds, ACCURACY).mean()),
            **{k: float(np.mean([getattr(r, k) for r in read])) for k in READINGS},
        }
    return out


def part_rows(
    runs: Mapping,
    kind: str,
    seeds: Sequence[int],
    bn: Variant,
    arms: Sequence[Variant],
    tol: float,
    **common,
) -> list[Verdict]:
    """One exploratory row `05.part` per arm (a part of the regularizer, the full one, or BN at a
    lower learning rate) on the `kind` splits: per evaluation seed the share of BN's final
    memorization it removes (`reduction.reduction`), its clean-accuracy cost (BN's minus the
    arm's test accuracy, mean over seeds) the confound, as `05.reduction` judges the chosen
    setting."""
    rows = []
    for v in arms:
        mem, acc = (
            {n: finals(runs, kind, n, seeds, w) for n in (bn.name, v.name)}
            for w in (MEMORIZATION, ACCURACY)
        )
        cost = float(np.mean(acc[bn.name] - acc[v.name]))
        rows.append(
            judge(
                "05.part",
                reduction(mem[bn.name], mem[v.name]),
                acc_gap=cost,
                unit=f"share of BN's final memorization ({kind}) removed by {v.name}, per seed",
                arm=v.label,
                corruption=kind,
                clean_test_acc={n: float(a.mean()) for n, a in acc.items()},
                acc_cost=cost,
                acc_tolerance=tol,
                **paired_changes(mem[bn.name], mem[v.name], acc[bn.name], acc[v.name]),
                **common,
            )
        )
    return rows


def which_part(rows: Sequence[Verdict], arms: Sequence[Variant]) -> list[str]:
    """The labels of the arms whose `05.part` row is supported (the rule in claims.yaml: these
    are the parts that remove memorization at the run's scale)."""
    return [v.label for v, r in zip(arms, rows) if holds(r.verdict)]
