"""Every cached unit the notebooks use, built in one place: a trained model (01, 02, 04, 05) and a
shadow-model pool (03, 05). Notebooks never build cache keys; the key is the unit's configuration,
the data fingerprint, the package source and the torch version (`bnpaper.store`)."""
from __future__ import annotations

from dataclasses import asdict
from functools import partial

from . import shadow
from .data import Split
from .mitigation import MitigationConfig, fit_mitigated
from .probes import GradProbe
from .store import Store
from .train import TrainConfig, TrainResult

NO_MITIGATION = MitigationConfig()


def _fit(split: Split, cfg: TrainConfig, mitigation: MitigationConfig, probe: GradProbe | None,
         desc: str | None, checkpoint) -> TrainResult:
    hook = probe.hook(split) if probe is not None else None
    return fit_mitigated(split, cfg, mitigation, checkpoint=checkpoint, on_epoch_end=hook,
                         desc=desc)


def trained(split: Split, cfg: TrainConfig, mitigation: MitigationConfig = NO_MITIGATION,
            probe: GradProbe | None = None, desc: str | None = None,
            store: Store | None = None) -> TrainResult:
    """The model of `cfg` trained on `split` (with a gamma/sigma `mitigation`, recording gradient
    norms with `probe`), from the cache or trained now; a killed run resumes from its last epoch.
    The same (split, cfg) gives the same unit in every notebook."""
    key = {"train": asdict(cfg), "mitigation": mitigation.as_dict(),
           "probe": asdict(probe) if probe is not None else None}
    compute = partial(_fit, split, cfg, mitigation, probe,
                      desc or f"{cfg.arch}/{cfg.norm} seed {cfg.seed}")
    return (store or Store()).cached("train", key, compute, data=split.fingerprint(),
                                     resumable=True)


def shadow_pool(split: Split, base: TrainConfig, n_shadows: int, seed: int,
                mitigation: MitigationConfig = NO_MITIGATION, executor: str = "inprocess",
                trainer: str = "auto", pack_size: int = 8, bn_query_mode: str = "eval",
                store: Store | None = None) -> shadow.ShadowPool:
    """`n_shadows` shadow models of `base` on `split` with one balanced keep matrix seeded by
    `seed` (every example IN for half of them), each a cached unit; their scores as a pool.
    The pool of a regularized BN model is the same call with `mitigation`."""
    keep = shadow.keep_matrix(n_shadows, len(split.x), seed)
    return shadow.run_shadows(split, base, keep, seed=seed, executor=executor, trainer=trainer,
                              pack_size=pack_size, bn_query_mode=bn_query_mode, store=store,
                              mitigation=mitigation)
