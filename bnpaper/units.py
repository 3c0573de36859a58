"""Every cached unit the notebooks use, built in one place: trained models and shadow pools.

A trained model (01, 02, 04, 05), a shadow-model pool (03, 05), and notebook 03's LiRA pool from
its resolved parameters (03, 05).
Notebooks never build cache keys; the key is the unit's configuration, the data fingerprint, the
source of the modules this module imports (its import closure) and the torch version
(`bnpaper.store`)."""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from functools import partial
from typing import Mapping

from . import progress, shadow
from .data import Dataset, Split, make_split
from .mitigation import MitigationConfig, fit_mitigated
from .probes import GradProbe
from .store import Store
from .train import TrainConfig, TrainResult

NO_MITIGATION = MitigationConfig()


def _fit(
    split: Split,
    cfg: TrainConfig,
    mitigation: MitigationConfig,
    probe: GradProbe | None,
    desc: str | None,
    checkpoint,
) -> TrainResult:
    hook = probe.hook(split) if probe is not None else None
    t0 = time.perf_counter()
    result = fit_mitigated(
        split, cfg, mitigation, checkpoint=checkpoint, on_epoch_end=hook, desc=desc
    )
    progress.counter("model").add(seconds=time.perf_counter() - t0, detail=desc or "")
    return result


def trained(
    split: Split,
    cfg: TrainConfig,
    mitigation: MitigationConfig = NO_MITIGATION,
    probe: GradProbe | None = None,
    desc: str | None = None,
    store: Store | None = None,
) -> TrainResult:
    """The model of `cfg` trained on `split` (with a gamma/sigma `mitigation`, recording gradient
    norms with `probe`), from the cache or trained now; a killed run resumes from its last epoch.
    The same (split, cfg) gives the same unit in every notebook."""
    key = {
        "train": asdict(cfg),
        "mitigation": mitigation.as_dict(),
        "probe": asdict(probe) if probe is not None else None,
    }
    compute = partial(
        _fit, split, cfg, mitigation, probe, desc or f"{cfg.arch}/{cfg.norm} seed {cfg.seed}"
    )
    return (store or Store()).cached(
        "train", key, compute, data=split.fingerprint(), resumable=True
    )


def shadow_pool(
    split: Split,
    base: TrainConfig,
    n_shadows: int,
    seed: int,
    mitigation: MitigationConfig = NO_MITIGATION,
    executor: str = "inprocess",
    trainer: str = "auto",
    pack_size: int = 8,
    bn_query_mode: str = "eval",
    store: Store | None = None,
) -> shadow.ShadowPool:
    """`n_shadows` shadow models of `base` on `split` with one balanced keep matrix seeded by
    `seed` (every example IN for half of them), each a cached unit; their scores as a pool.
    The pool of a regularized BN model is the same call with `mitigation`."""
    keep = shadow.keep_matrix(n_shadows, len(split.x), seed)
    return shadow.run_shadows(
        split,
        base,
        keep,
        seed=seed,
        executor=executor,
        trainer=trainer,
        pack_size=pack_size,
        bn_query_mode=bn_query_mode,
        store=store,
        mitigation=mitigation,
    )


def _lira_config(p: Mapping, norm: str) -> TrainConfig:
    """Notebook 03's shadow training config for `norm` from its resolved parameters `p`
    (augment 'auto': on for CIFAR)."""
    augment = (p["dataset"] in ("cifar10", "cifar100")) if p["augment"] == "auto" else p["augment"]
    return TrainConfig(
        arch=p["arch"],
        norm=norm,
        epochs=p["epochs"],
        batch_size=p["batch_size"],
        lr=p["lr"],
        weight_decay=p["weight_decay"],
        augment=augment,
    )


def lira_split(
    ds: Dataset, p: Mapping, mix: float | str, seed: int, n_train: int | None = None
) -> Split:
    """Notebook 03's pool of examples: `n_train` (default p['n_train']) training images drawn
    with `seed`, a `mix` share of them outliers of p['outlier_kind'] (0: clean data), or, for
    mix 'rare', one class kept at p['rare_share'] of it. The seed alone decides the data (the
    same for every norm); clean pools of one seed are nested (a smaller one is a prefix)."""
    n = p["n_train"] if n_train is None else n_train
    if mix == "rare":
        return make_split(
            ds, n, "rare", 0.0, seed, p["ood_source"], p["n_test"], p["rare_share"], p["rare_class"]
        )
    return make_split(
        ds, n, p["outlier_kind"] if mix > 0 else "none", mix, seed, p["ood_source"], p["n_test"]
    )


def lira_pool(
    ds: Dataset,
    p: Mapping,
    mix: float | str,
    seed: int,
    norm: str,
    mitigation: MitigationConfig = NO_MITIGATION,
    trainer: str | None = None,
    n_train: int | None = None,
    store: Store | None = None,
    weight_decay: float | None = None,
) -> shadow.ShadowPool:
    """Notebook 03's pool of p['n_shadows'] shadow models of `norm` on `lira_split(ds, p, mix,
    seed, n_train)`, built from 03's resolved parameters `p` exactly as 03 builds it: whoever
    asks for it (03's pools and size sweep, 05's LiRA comparison) gets the very cache units 03
    trained. trainer: None for p['trainer']; a `mitigation` (the gamma/sigma regularizer) or a
    `weight_decay` (None: p['weight_decay']) is the same pool trained with it."""
    cfg = _lira_config(p, norm)
    cfg = cfg if weight_decay is None else replace(cfg, weight_decay=weight_decay)
    return shadow_pool(
        lira_split(ds, p, mix, seed, n_train),
        cfg,
        p["n_shadows"],
        seed,
        mitigation,
        p["executor"],
        p["trainer"] if trainer is None else trainer,
        p["pack_size"],
        p["bn_query_mode"],
        store,
    )
