"""Notebook 02's analysis of the recorded gradient norms: medians, noisy/clean ratios, per-group
ratios, the summary and the notebook's verdict rows (from `probes.GradProbe`'s records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import claims
from .claims import Verdict
from .probes import MODES
from .stats import t_mean, t_paired_diff


def probed_epochs(history: dict) -> np.ndarray:
    """The epochs at which the probe recorded norms (0 = initialization)."""
    return np.array([r["epoch"] for r in history["grads"]])


def records(history: dict, mode: str = "batch") -> list[tuple[int, np.ndarray, np.ndarray]]:
    """[(epoch, norms (k,), noisy (k,) bool)] of one run at its probe epochs, for one of
    `MODES` ('batch' and 'batch_fixed' share their samples: the noisy + as many clean)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; allowed: {MODES}")
    return [
        (r["epoch"], np.asarray(r[f"{mode}_norm"], float), np.asarray(r[f"{mode}_noisy"], bool))
        for r in history["grads"]
    ]


@dataclass(frozen=True)
class Medians:
    """(runs, probe epochs) arrays: the median norm of noisy and of clean probe samples, and the
    share of the summed norms carried by the noisy samples."""

    noisy: np.ndarray
    clean: np.ndarray
    share: np.ndarray

    @property
    def ratio(self) -> np.ndarray:
        """Median noisy / median clean norm, per run and probe epoch."""
        return self.noisy / self.clean


def medians(histories: Sequence[dict], mode: str = "batch") -> Medians:
    """The medians and noisy share of one probe definition (`MODES`), one row per run."""
    rows = [
        [(np.median(v[k]), np.median(v[~k]), v[k].sum() / v.sum()) for _, v, k in records(h, mode)]
        for h in histories
    ]
    a = np.array(rows, dtype=float)  # (runs, epochs, 3)
    return Medians(a[..., 0], a[..., 1], a[..., 2])


def group_ratio(histories: Sequence[dict], group: str) -> np.ndarray:
    """(runs, probe epochs) median noisy / median clean 'batch' norm of one parameter group."""
    out = []
    for h in histories:
        row = []
        for r in h["grads"]:
            v, k = np.asarray(r["batch_groups"][group], float), np.asarray(r["batch_noisy"], bool)
            row.append(np.median(v[k]) / np.median(v[~k]))
        out.append(row)
    return np.array(out)


def groups(history: dict) -> list[str]:
    """The parameter groups of a run's 'batch' norms (`bnpaper.grads.GROUPS` present in it)."""
    return list(history["grads"][0]["batch_groups"])


def fixed_over_batch(histories: Sequence[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(runs, probe epochs) median over probe samples of 'batch_fixed' / 'batch' norm, for noisy
    and for clean samples: how far a sample's gradient changes once the gradient through the
    batch statistics is dropped (1: not at all)."""
    noisy, clean = [], []
    for h in histories:
        rel = [
            (vf / vb, k)
            for (_, vb, k), (_, vf, _) in zip(records(h, "batch"), records(h, "batch_fixed"))
        ]
        noisy.append([np.median(r[k]) for r, k in rel])
        clean.append([np.median(r[~k]) for r, k in rel])
    return np.array(noisy), np.array(clean)


def sample_counts(histories: Sequence[dict], mode: str = "batch") -> tuple[list, list]:
    """How many noisy and how many clean probe samples each run's medians of one definition
    (`MODES`) are taken over: ([noisy per run], [clean per run])."""
    k = [records(h, mode)[0][2] for h in histories]
    return [int(x.sum()) for x in k], [int((~x).sum()) for x in k]


def final(histories: dict[str, Sequence[dict]], key: str) -> dict[str, float]:
    """{norm: mean over runs of a history entry at each run's last evaluated epoch} (e.g.
    "test_acc", the clean test accuracy; "noisy_acc", the final memorization; runs trained to
    fit may stop at different epochs)."""
    return {n: float(np.mean([float(h[key][-1]) for h in hs])) for n, hs in histories.items()}


def pooled_log10(
    histories: Sequence[dict], epoch: int, mode: str = "batch"
) -> tuple[np.ndarray, np.ndarray]:
    """log10 of the norms at one probe epoch, pooled over runs (floored at 1e-12), and the
    noisy mask."""
    rec = [(v, k) for h in histories for e, v, k in records(h, mode) if e == epoch]
    if not rec:
        raise ValueError(f"epoch {epoch} is not a probe epoch")
    v, k = np.concatenate([v for v, _ in rec]), np.concatenate([k for _, k in rec])
    return np.log10(np.maximum(v, 1e-12)), k


def after_init(per_epoch: np.ndarray, epochs: Sequence[int]) -> np.ndarray:
    """One number per run: the mean of a (runs, probe epochs) array over the probe epochs after
    initialization (epoch > 0)."""
    late = np.asarray(epochs) > 0
    if not late.any():
        raise ValueError(f"no probe epoch after initialization in {list(epochs)}")
    return np.asarray(per_epoch, float)[:, late].mean(1)


def summary(histories: dict[str, Sequence[dict]]) -> dict:
    """Every secondary number of notebook 02, per norm ({norm: histories}): the noisy/clean
    median ratio per definition and per parameter group (mean over seeds of the per-seed mean
    after initialization, 95% t interval), the batch_fixed / batch medians (BN-like norms), the
    final medians and the noisy share of the 'eval' probe's summed norms."""
    ep = probed_epochs(next(iter(histories.values()))[0])
    out: dict = {f"ratio{s}": {} for s in ("", "_eval", "_batch_fixed", "_by_group")}
    for n, hs in histories.items():
        for mode in MODES:
            key = "ratio" if mode == "batch" else f"ratio_{mode}"
            out[key][n] = t_mean(after_init(medians(hs, mode).ratio, ep)).as_dict()
        out["ratio_by_group"][n] = {
            g: t_mean(after_init(group_ratio(hs, g), ep)).as_dict() for g in groups(hs[0])
        }
    bn_like = [n for n in histories if n in ("bn", "bn_noaffine")]
    late = ep > 0
    out["fixed_over_batch_median"] = {
        n: dict(
            zip(
                ("noisy", "clean"),
                (float(v[:, late].mean()) for v in fixed_over_batch(histories[n])),
            )
        )
        for n in bn_like
    }
    batch = {n: medians(hs, "batch") for n, hs in histories.items()}
    out["median_noisy_norm_final"] = {n: float(m.noisy[:, -1].mean()) for n, m in batch.items()}
    out["median_clean_norm_final"] = {n: float(m.clean[:, -1].mean()) for n, m in batch.items()}
    out["noisy_share_eval_final"] = {
        n: float(medians(hs, "eval").share[:, -1].mean()) for n, hs in histories.items()
    }
    return out


def verdict_rows(
    histories: dict[str, Sequence[dict]], reading: str = "fixed epochs", **common
) -> list[Verdict]:
    """Notebook 02's fixed-epoch verdict rows from {norm: histories}: per seed the ratio of median
    noisy to median clean "batch" norm, averaged over the probe epochs after initialization; (1)
    BN's ratio (`t_mean`), (2) BN's minus no-BN's (`t_paired_diff`). `reading` (the epochs read,
    `text.fixed_reading`) and `common` (dataset, budget, corruption) go into every row, beside
    the clean test accuracies."""
    ep = probed_epochs(next(iter(histories.values()))[0])
    per_seed = {n: after_init(medians(hs, "batch").ratio, ep) for n, hs in histories.items()}
    acc = final(histories, "test_acc")
    fields = {"clean_test_acc": acc, "reading": reading, **common}
    return [
        claims.judge(
            "02.noisy_vs_clean",
            t_mean(per_seed["bn"]),
            **fields,
            unit="median noisy / median clean gradient norm (batch definition)",
        ),
        claims.judge(
            "02.bn_vs_none",
            t_paired_diff(per_seed["bn"], per_seed["none"]),
            acc_gap=acc["bn"] - acc["none"],
            **fields,
            unit="BN minus no-BN, noisy/clean median norm ratio",
        ),
    ]
