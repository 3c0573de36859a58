"""The chosen setting judged: the share of BN's memorization it removes, its cost, its gamma/sigma.

On the evaluation seeds: per kind the share of BN's final memorization the chosen setting
removes, what it costs in clean accuracy, and |gamma|/sigma of its BN channels beside BN's.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from .claims import Verdict, judge
from .mitigation import relative_reductions
from .models import bn_layers
from .stats import Estimate, t_mean, t_paired_diff
from .mitigation_text import MEMORIZATION_WORDS
from .variants import ACCURACY, HELD_OUT, MEMORIZATION, SUBSET_ACC, Variant, curves, finals


BATCH = 128  # images of one training-mode forward pass in `channel_scales` (batch statistics)


def summarize(histories: Sequence[dict], corr: str) -> dict:
    """One variant over its seeds on `corr` splits, mean over seeds: final memorization and
    clean test accuracy."""
    mem, acc = (float(np.mean(curves(histories, corr, w)[:, -1])) for w in (MEMORIZATION, ACCURACY))
    return {"final_memorization": mem, "clean_test_acc": acc, "n_seeds": len(histories)}


def reduction(base: Sequence[float], mitigated: Sequence[float]) -> Estimate:
    """The share of the baseline's final memorization the mitigation removes, per paired seed
    (`relative_reductions`), mean with a 95% Student-t interval over seeds; NaN (inconclusive)
    if the baseline memorized nothing in some seed (no share to reduce)."""
    b = np.asarray(base, np.float64)
    if not np.all(b > 0):
        return Estimate(float("nan"), float("nan"), float("nan"), len(b))
    return t_mean(relative_reductions(b, mitigated))


def paired_changes(
    mem_base: Sequence[float],
    mem_mitigated: Sequence[float],
    acc_base: Sequence[float],
    acc_mitigated: Sequence[float],
) -> dict:
    """Beside the verdict, per paired seed with a Student-t interval: the absolute reduction of
    memorization (base minus mitigated) and the change of clean test accuracy (mitigated minus
    base)."""
    return {
        "absolute_reduction": t_paired_diff(mem_base, mem_mitigated).as_dict(),
        "clean_acc_change": t_paired_diff(acc_mitigated, acc_base).as_dict(),
    }


def reduction_rows(
    runs: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    bn: Variant,
    chosen: Variant,
    nobn: Variant,
    tol: float,
    chosen_on: str,
    **common,
) -> list[Verdict]:
    """The verdict rows `05.reduction.<kind>`, one per corruption kind: per evaluation seed the
    share of BN's final memorization of that kind (`curve`) the chosen setting removes
    (`reduction`), judged with its clean-accuracy cost (BN's minus the chosen setting's clean
    test accuracy, mean over seeds) as the confound. Beside it: the three models' clean test
    accuracy, the absolute changes (`paired_changes`), `chosen_on` (the kinds the setting was
    chosen on) and, for rare, the rare class's held-out accuracy."""
    rows = []
    for c in corruptions:
        mem, acc = (
            {v.name: finals(runs, c, v.name, seeds, what) for v in (bn, chosen, nobn)}
            for what in (MEMORIZATION, ACCURACY)
        )
        cost = float(np.mean(acc[bn.name] - acc[chosen.name]))
        rare = (
            {
                "rare_heldout_acc": {
                    n: float(finals(runs, c, n, seeds, HELD_OUT).mean()) for n in mem
                }
            }
            if c == "rare"
            else {}
        )
        rows.append(
            judge(
                f"05.reduction.{c}",
                reduction(mem[bn.name], mem[chosen.name]),
                acc_gap=cost,
                unit=f"share of BN's final {MEMORIZATION_WORDS.get(c, 'memorization')} removed by "
                f"{chosen.name}, per evaluation seed",
                clean_test_acc={n: float(a.mean()) for n, a in acc.items()},
                corruption=c,
                acc_cost=cost,
                acc_tolerance=tol,
                regularizer=chosen.mit.as_dict(),
                chosen_on=chosen_on,
                **rare,
                **paired_changes(mem[bn.name], mem[chosen.name], acc[bn.name], acc[chosen.name]),
                **common,
            )
        )
    return rows


def judged_finals(
    runs: Mapping, corruptions: Sequence[str], seeds: Sequence[int], variants: Sequence[Variant]
) -> dict[tuple[str, str], dict[str, np.ndarray | None]]:
    """Per (corruption, variant label) the final values per seed of the judged models:
    `memorization` (per kind), `subset_acc` the atypical subset's accuracy on its training
    labels, `held_out` for rare the rare class's held-out accuracy (None otherwise; memorization
    = the first minus the second) and `accuracy` the clean test accuracy."""
    out = {}
    for c in corruptions:
        for v in variants:
            out[c, v.label] = {
                "memorization": finals(runs, c, v.name, seeds, MEMORIZATION),
                "subset_acc": finals(runs, c, v.name, seeds, SUBSET_ACC),
                "held_out": finals(runs, c, v.name, seeds, HELD_OUT) if c == "rare" else None,
                "accuracy": finals(runs, c, v.name, seeds, ACCURACY),
            }
    return out


def channel_scales(results: Sequence, splits: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel |gamma| and running sigma = sqrt(running_var + eps), pooled over every BN layer
    with a learned gamma of every trained model (TrainResults, each with the Split it trained on;
    `gamma_sigma.gamma_sigma`)."""
    from .data import normalize
    from .gamma_sigma import gamma_sigma

    gamma, sigma = [], []
    for result, split in zip(results, splits):
        model = result.model(split.x.shape[1], split.n_classes, split.x.shape[2])
        x = normalize(split.x[:BATCH], split.mean, split.std)
        affine = {name for name, layer in bn_layers(model) if layer.weight is not None}
        for layer in gamma_sigma(model, x, BATCH, 1):
            if layer["layer"] in affine:
                gamma.append(layer["gamma"])
                sigma.append(layer["sigma_running"])
    return torch.cat(gamma).numpy(), torch.cat(sigma).numpy()


def scale_summary(gamma: np.ndarray, sigma: np.ndarray, tau: float) -> dict:
    """Median gamma/sigma, the share of channels above 1 and above `tau`, median |gamma| and
    median sigma: whether a bound was met by a smaller gamma or by a larger sigma."""
    r = gamma / sigma
    return {
        "median": float(np.median(r)),
        "frac_above_1": float((r > 1).mean()),
        "frac_above_tau": float((r > tau).mean()),
        "median_gamma": float(np.median(gamma)),
        "median_sigma": float(np.median(sigma)),
    }


def channel_scales_by_kind(
    runs: Mapping,
    splits: Mapping,
    corruptions: Sequence[str],
    seeds: Sequence[int],
    models: Sequence[Variant],
) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """`channel_scales` of each model over the evaluation seeds, per corruption kind:
    {(corruption, variant name): (gamma, sigma)}."""
    return {
        (c, v.name): channel_scales(
            [runs[c, v.name, s] for s in seeds], [splits[c, s] for s in seeds]
        )
        for c in corruptions
        for v in models
    }


def scale_summaries(
    scales: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]], tau: float
) -> dict[str, dict]:
    """`scale_summary` of every (corruption, variant name) of `scales`, keyed 'flip/bn'."""
    return {f"{c}/{name}": scale_summary(g, s, tau) for (c, name), (g, s) in scales.items()}
