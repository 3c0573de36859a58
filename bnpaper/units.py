"""Trained models as cached units: one model (02, with its gradient probes), or a list of models
packed where they are LeNets (01, 04, 05), and the models of a learning-rate search (diverged
members stored as such). Shadow pools are `bnpaper.pools`' units.

Notebooks never build cache keys; the key is the unit's configuration, the data fingerprint, the
source of the modules this module imports (its import closure: the training code, not the
attacks) and the torch version (`bnpaper.store`); a packed LeNet's key also names its whole pack
(`_packed_keys`), so a request's numbers never depend on what ran before it."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from functools import partial
from typing import Sequence

from . import packed_fit, progress
from .config import ConfigError, check_choice
from .data import Split
from .mitigation import MitigationConfig, fit_mitigated
from .packed_fit import Job
from .probes import GradProbe
from .store import Store
from .train import TrainConfig, TrainingDiverged, TrainResult

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
        "train": cfg.as_dict(),
        "mitigation": mitigation.as_dict(),
        "probe": asdict(probe) if probe is not None else None,
    }
    compute = partial(
        _fit, split, cfg, mitigation, probe, desc or f"{cfg.arch}/{cfg.norm} seed {cfg.seed}"
    )
    return (store or Store()).cached(
        "train", key, compute, data=split.fingerprint(), resumable=True
    )


def _member_key(job: Job, logits_at: Sequence[int] = (), fit_only: bool = False) -> dict:
    """What a packed member is, alone: `trained`'s key and the trainer (float rounding differs),
    the checkpoint epochs whose logits it keeps, if any, and whether its history is the fit
    rule's only (`packed_fit.fit_pack`'s `fit_only`)."""
    key = {
        "train": job.cfg.as_dict(),
        "mitigation": job.mitigation.as_dict(),
        "probe": None,
        "trainer": "packed",
    }
    if logits_at:
        key["logits_at"] = sorted(logits_at)
    return {**key, "history": "fit_only"} if fit_only else key


def _packed_keys(
    pack: Sequence[Job], logits_at: Sequence[int] = (), fit_only: bool = False
) -> list[dict]:
    """The units of a pack's members: each member's own key (`_member_key`) and the pack it
    trains in (every member's key and data fingerprint, in order, as one digest). A packed
    member's numbers depend on its pack (float rounding of the stacked model), so a unit is
    served only to a request that forms the same pack: whatever ran before (another notebook
    asking for some of the same models in other packs), a request gives the same numbers."""
    own = [_member_key(j, logits_at, fit_only) for j in pack]
    members = [[k, j.split.fingerprint()] for k, j in zip(own, pack)]
    text = json.dumps(members, sort_keys=True, default=str).encode()
    digest = hashlib.sha256(text).hexdigest()[:16]
    return [{**k, "pack": {"members": len(pack), "digest": digest}} for k in own]


def trained_all(
    jobs: Sequence[Job],
    trainer: str = "auto",
    pack_size: int = 16,
    descs: Sequence[str] | None = None,
    store: Store | None = None,
    logits_at: Sequence[int] = (),
    fit_only: bool = False,
) -> list[TrainResult]:
    """The models of `jobs` (each a cached unit), in order. trainer "auto" trains LeNets packed
    (`packed_fit`: one pack per norm and mitigation, at most `pack_size` members, formed from
    `jobs` alone; each member stored as its own unit of that pack, `_packed_keys`, with its share
    of the pack's seconds; a pack with a member missing from the cache trains whole) and other
    models with `trained`; "plain" trains every model with `trained`; "packed" needs LeNets.
    With `logits_at`, packed members keep their logits at those epochs (`TrainResult.logits`).
    With `fit_only`, a packed member's history is exact at its last epoch only (the fit rule's
    evaluation, `packed_fit.fit_pack`): for callers that read nothing else of it."""
    check_choice("trainer", trainer, packed_fit.TRAINERS)
    store = store or Store()
    descs = descs or [f"{j.cfg.arch}/{j.cfg.norm} seed {j.cfg.seed}" for j in jobs]
    packed = [trainer != "plain" and j.cfg.arch == "lenet" and j.rows is None for j in jobs]
    if (trainer == "packed" or logits_at) and not all(packed):
        raise ConfigError("trainer='packed' and logits_at support arch='lenet' only, packed")
    out: list[TrainResult | None] = [None] * len(jobs)
    for i, job in enumerate(jobs):
        if not packed[i]:
            out[i] = trained(job.split, job.cfg, job.mitigation, desc=descs[i], store=store)
    todo = [i for i in range(len(jobs)) if packed[i]]
    for pack in packed_fit.packs([jobs[i] for i in todo], pack_size):
        members = [todo[p] for p in pack]
        keys = _packed_keys([jobs[i] for i in members], logits_at, fit_only)
        fps = [jobs[i].split.fingerprint() for i in members]
        if all(store.has("train", k, fp, module=__name__) for k, fp in zip(keys, fps)):
            for i, k, fp in zip(members, keys, fps):
                out[i] = store.load("train", k, fp, module=__name__)
            continue
        t0 = time.perf_counter()
        results = packed_fit.fit_pack(
            [jobs[i] for i in members], logits_at=logits_at, progress=True, fit_only=fit_only
        )
        seconds = time.perf_counter() - t0
        for i, k, fp, res in zip(members, keys, fps, results):
            store.put("train", k, res, fp, module=__name__, seconds=seconds, pack=len(members))
            progress.counter("model").add(seconds=seconds / len(members), detail=descs[i])
            out[i] = res
    return out


def _diverged_key(job: Job) -> dict:
    """The unit recording that `job`'s training diverged (the same for either trainer)."""
    return {"train": job.cfg.as_dict(), "mitigation": job.mitigation.as_dict()}


def trained_or_diverged(
    jobs: Sequence[Job],
    trainer: str = "auto",
    descs: Sequence[str] | None = None,
    store: Store | None = None,
    fit_only: bool = False,
) -> list[TrainResult | None]:
    """`trained_all` (`fit_only` passed on), where a job whose training diverges (a NaN or
    infinite loss) gives None instead of stopping the run: the divergence is stored as a unit of
    its own (a re-run does not train it again), and a pack it broke is trained again without it."""
    store = store or Store()
    descs = list(descs or [f"{j.cfg.arch}/{j.cfg.norm} lr {j.cfg.lr:g}" for j in jobs])
    out: list[TrainResult | None] = [None] * len(jobs)
    left = []
    for i, job in enumerate(jobs):
        if not store.has("diverged", _diverged_key(job), job.split.fingerprint(), module=__name__):
            left.append(i)
    while left:
        try:
            results = trained_all(
                [jobs[i] for i in left],
                trainer,
                descs=[descs[i] for i in left],
                store=store,
                fit_only=fit_only,
            )
        except TrainingDiverged as err:
            bad = [i for i in left if jobs[i].cfg in err.configs]
            if not bad:
                raise
            for i in bad:
                fp = jobs[i].split.fingerprint()
                store.put(
                    "diverged", _diverged_key(jobs[i]), str(err), fp, module=__name__, seconds=0.0
                )
            left = [i for i in left if i not in bad]
            continue
        for i, res in zip(left, results):
            out[i] = res
        left = []
    return out
