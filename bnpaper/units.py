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
    tag = {"members": len(pack), "digest": _digest(own, pack)}
    return [{**k, "pack": tag} for k in own]


def _digest(keys: Sequence[dict], pack: Sequence[Job]) -> str:
    """The members of a pack (their keys and data fingerprints, in order) as one digest."""
    members = [[k, j.split.fingerprint()] for k, j in zip(keys, pack)]
    text = json.dumps(members, sort_keys=True, default=str).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def _is_packed(job: Job, trainer: str) -> bool:
    """Whether `trainer` trains `job` packed: a LeNet on its whole split, unless "plain"."""
    return trainer != "plain" and job.cfg.arch == "lenet" and job.rows is None


def _groups(jobs: Sequence[Job], trainer: str, pack_size: int) -> list[list[int]]:
    """Indices of `jobs` as they train: every model trained alone, then each pack of the packed
    ones (`packed_fit.packs`, formed from `jobs` alone)."""
    todo = [i for i, j in enumerate(jobs) if _is_packed(j, trainer)]
    alone = [[i] for i, j in enumerate(jobs) if not _is_packed(j, trainer)]
    return alone + [
        [todo[p] for p in pack] for pack in packed_fit.packs([jobs[i] for i in todo], pack_size)
    ]


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
    if (trainer == "packed" or logits_at) and not all(_is_packed(j, trainer) for j in jobs):
        raise ConfigError("trainer='packed' and logits_at support arch='lenet' only, packed")
    out: list[TrainResult | None] = [None] * len(jobs)
    for members in _groups(jobs, trainer, pack_size):
        if not _is_packed(jobs[members[0]], trainer):
            (i,) = members
            job = jobs[i]
            out[i] = trained(job.split, job.cfg, job.mitigation, desc=descs[i], store=store)
            continue
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


def _diverged_key(job: Job, pack: str | None = None) -> dict:
    """The unit recording that `job`'s training diverged: trained alone, or in the pack of
    digest `pack` (a packed member's divergence belongs to its pack, as its numbers do)."""
    key = {"train": job.cfg.as_dict(), "mitigation": job.mitigation.as_dict()}
    return key if pack is None else {**key, "pack": pack}


def trained_or_diverged(
    jobs: Sequence[Job],
    trainer: str = "auto",
    descs: Sequence[str] | None = None,
    store: Store | None = None,
    fit_only: bool = False,
    pack_size: int = 16,
) -> list[TrainResult | None]:
    """`trained_all` (`fit_only` passed on), where a job whose training diverges (a NaN or
    infinite loss) gives None instead of stopping the run. The packs are formed once from
    `jobs`; a divergence is stored as a unit of its own, keyed by the pack it happened in (a
    re-run does not train it again; another request's pack tries the model itself), and only
    the pack it broke is trained again, without it."""
    check_choice("trainer", trainer, packed_fit.TRAINERS)
    store = store or Store()
    descs = list(descs or [f"{j.cfg.arch}/{j.cfg.norm} lr {j.cfg.lr:g}" for j in jobs])
    out: list[TrainResult | None] = [None] * len(jobs)
    for group in _groups(jobs, trainer, pack_size):
        pack = [jobs[i] for i in group]
        tag = None
        if _is_packed(pack[0], trainer):  # the pack's digest, whatever its members' units keep
            tag = _digest([_member_key(j) for j in pack], pack)
        left = [
            i
            for i in group
            if not store.has(
                "diverged",
                _diverged_key(jobs[i], tag),
                jobs[i].split.fingerprint(),
                module=__name__,
            )
        ]
        while left:
            try:
                results = trained_all(
                    [jobs[i] for i in left],
                    trainer,
                    pack_size=len(left),
                    descs=[descs[i] for i in left],
                    store=store,
                    fit_only=fit_only,
                )
            except TrainingDiverged as err:
                bad = _diverged_members(err, [jobs[i] for i in left])
                if not bad:
                    raise
                for p in bad:
                    job = jobs[left[p]]
                    key, fp = _diverged_key(job, tag), job.split.fingerprint()
                    store.put("diverged", key, str(err), fp, module=__name__, seconds=0.0)
                left = [i for p, i in enumerate(left) if p not in bad]
                continue
            for i, res in zip(left, results):
                out[i] = res
            left = []
    return out


def _diverged_members(err: TrainingDiverged, trained: Sequence[Job]) -> list[int]:
    """Positions in `trained` (one pack, or one model) of the models `err` says diverged: the
    pack's members it names, else (a model trained alone) those of its configurations."""
    if err.members:
        return sorted(err.members)
    return [p for p, j in enumerate(trained) if j.cfg in err.configs]
