"""Every cached unit the notebooks use, built in one place: trained models and shadow pools.

A trained model (02, with its gradient probes), a list of trained models packed where they are
LeNets (01, 04, 05), a shadow-model pool (03, 05), and notebook 03's LiRA pool from its resolved
parameters (03, 05).
Notebooks never build cache keys; the key is the unit's configuration, the data fingerprint, the
source of the modules this module imports (its import closure) and the torch version
(`bnpaper.store`)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields, replace
from functools import partial
from typing import Mapping, Sequence

from . import packed_fit, progress, shadow
from .config import ConfigError, check_choice
from .data import Dataset, Split, make_split
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


def _packed_key(job: Job, logits_at: Sequence[int] = ()) -> dict:
    """A packed member's unit: `trained`'s key and the trainer (float rounding differs), and the
    checkpoint epochs whose logits it keeps, if any."""
    key = {
        "train": job.cfg.as_dict(),
        "mitigation": job.mitigation.as_dict(),
        "probe": None,
        "trainer": "packed",
    }
    return {**key, "logits_at": sorted(logits_at)} if logits_at else key


def trained_all(
    jobs: Sequence[Job],
    trainer: str = "auto",
    pack_size: int = 16,
    descs: Sequence[str] | None = None,
    store: Store | None = None,
    logits_at: Sequence[int] = (),
) -> list[TrainResult]:
    """The models of `jobs` (each a cached unit), in order. trainer "auto" trains the missing
    LeNets packed (`packed_fit`: one pack per norm and mitigation, at most `pack_size` members,
    each stored as its own unit with its share of the pack's seconds) and other models with
    `trained`; "plain" trains every model with `trained`; "packed" needs LeNets. With
    `logits_at`, packed members keep their logits at those epochs (`TrainResult.logits`)."""
    check_choice("trainer", trainer, shadow.TRAINERS)
    store = store or Store()
    descs = descs or [f"{j.cfg.arch}/{j.cfg.norm} seed {j.cfg.seed}" for j in jobs]
    packed = [trainer != "plain" and j.cfg.arch == "lenet" and j.rows is None for j in jobs]
    if (trainer == "packed" or logits_at) and not all(packed):
        raise ConfigError("trainer='packed' and logits_at support arch='lenet' only, packed")
    out: list[TrainResult | None] = [None] * len(jobs)
    todo = []
    for i, job in enumerate(jobs):
        fp = job.split.fingerprint()
        if not packed[i]:
            out[i] = trained(job.split, job.cfg, job.mitigation, desc=descs[i], store=store)
        elif store.has("train", _packed_key(job, logits_at), fp, module=__name__):
            out[i] = store.load("train", _packed_key(job, logits_at), fp, module=__name__)
        else:
            todo.append(i)
    for pack in packed_fit.packs([jobs[i] for i in todo], pack_size):
        members = [todo[p] for p in pack]
        t0 = time.perf_counter()
        results = packed_fit.fit_pack(
            [jobs[i] for i in members], logits_at=logits_at, progress=True
        )
        seconds = time.perf_counter() - t0
        for i, res in zip(members, results):
            key, fp = _packed_key(jobs[i], logits_at), jobs[i].split.fingerprint()
            store.put("train", key, res, fp, module=__name__, seconds=seconds, pack=len(members))
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
) -> list[TrainResult | None]:
    """`trained_all`, where a job whose training diverges (a NaN or infinite loss) gives None
    instead of stopping the run: the divergence is stored as a unit of its own (a re-run does
    not train it again), and a pack it broke is trained again without it."""
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
                [jobs[i] for i in left], trainer, descs=[descs[i] for i in left], store=store
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


@dataclass(frozen=True)
class LiraRecipe:
    """How notebook 03 draws a pool of examples and trains its shadow models: one object built
    from 03's resolved parameters and its norms' recipes (`from_params`), passed whole wherever a
    pool is made (03's pools and size sweep, 05's LiRA comparison and frontier). Under the fair
    protocol each norm trains with its own learning rate (`norm_lr`) until its clean training
    accuracy on its IN examples reaches `fit_level` (`epochs`: the cap); under the paper's, every
    norm trains with `lr` for exactly `epochs`. A variation: `dataclasses.replace(recipe, ...)`."""

    dataset: str
    arch: str
    n_train: int  # pool size N (each shadow trains on N/2 of it)
    n_test: int  # clean test images
    outlier_kind: str  # flip | ood
    ood_source: str
    rare_share: float  # the rare class's share of a 'rare' pool
    rare_class: int  # -1: a seeded choice
    n_shadows: int  # models per norm and pool (even)
    epochs: int  # fair: the epoch cap; paper: the epochs
    batch_size: int
    lr: float  # the paper's protocol: every norm's learning rate
    weight_decay: float
    augment: bool
    executor: str
    trainer: str
    pack_size: int
    bn_query_mode: str
    protocol: str = "paper"  # fair | paper
    norm_lr: tuple[tuple[str, float], ...] = ()  # fair: (norm, its chosen learning rate)
    fit_level: float | None = None  # fair: the clean training accuracy each shadow trains to

    @classmethod
    def from_params(cls, p: Mapping, recipes=None) -> LiraRecipe:
        """The recipe of 03's resolved parameters `p` (augment 'auto': on for CIFAR) and its
        norms' `recipes` (a `recipes.NormRecipes`, `exposure.lira_norm_recipes`; needed when
        p['protocol'] is 'fair'; without them, parameters that name no protocol give the
        paper's)."""
        names = [f.name for f in fields(cls) if f.name not in _LIRA_RULES]
        base = cls(augment=augment_of(p), **{name: p[name] for name in names})
        protocol = p.get("protocol", "paper") if recipes is None else recipes.protocol
        if recipes is None or protocol == "paper":
            if protocol != "paper":
                raise ConfigError(
                    f"protocol={protocol!r} needs the norms' recipes (exposure.lira_norm_recipes)"
                )
            return base
        searched = [c.norm for c in recipes.choices.choices]
        return replace(
            base,
            protocol=protocol,
            norm_lr=tuple((n, float(recipes.lr(n))) for n in searched),
            fit_level=recipes.base.fit_level,
            epochs=recipes.base.epochs,
        )

    def norm_lr_of(self, norm: str) -> float:
        """The learning rate `norm`'s shadows train with."""
        if self.protocol == "paper":
            return self.lr
        lrs = dict(self.norm_lr)
        if norm not in lrs:
            raise ConfigError(
                f"norm={norm!r} has no learning rate chosen (searched: {sorted(lrs)}); "
                "allowed: a norm of the notebook's `norms`"
            )
        return lrs[norm]

    def train_config(self, norm: str) -> TrainConfig:
        """A shadow model's training configuration for `norm` (its learning rate, the fit rule)."""
        return TrainConfig(
            arch=self.arch,
            norm=norm,
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.norm_lr_of(norm),
            weight_decay=self.weight_decay,
            augment=self.augment,
            fit_level=self.fit_level,
        )

    @property
    def words(self) -> str:
        """The shadows' training rule in words (the paper's protocol named as such)."""
        if self.protocol == "paper":
            return f"the paper's protocol: lr {self.lr:g} for every norm, {self.epochs} epochs"
        lrs = ", ".join(f"{n} {lr:.3g}" for n, lr in self.norm_lr)
        return f"fair protocol: lr {lrs}, to clean fit {self.fit_level:g}, <= {self.epochs} epochs"

    def as_dict(self) -> dict:
        """The shadows' training rule as results.json records it."""
        return {
            "protocol": self.protocol,
            "lr": dict(self.norm_lr) if self.norm_lr else self.lr,
            "fit_level": self.fit_level,
            "epoch_cap" if self.protocol == "fair" else "epochs": self.epochs,
        }


def augment_of(p: Mapping) -> bool:
    """Whether 03's models train (and are queried) with augmentation: p['augment'], 'auto' being
    on for CIFAR."""
    augment = p["augment"]
    if augment == "auto":
        augment = p["dataset"] in ("cifar10", "cifar100")
    return bool(augment)


_LIRA_RULES = ("augment", "protocol", "norm_lr", "fit_level")  # not read from the parameters


def lira_split(ds: Dataset, recipe: LiraRecipe, mix: float | str, seed: int) -> Split:
    """The pool of examples: `recipe.n_train` training images drawn with `seed`, a `mix` share
    of them outliers of `recipe.outlier_kind` (0: clean data), or, for mix 'rare', one class kept
    at `recipe.rare_share` of it. The seed alone decides the data (the same for every norm);
    clean pools of one seed are nested (a smaller one is a prefix)."""
    r = recipe
    if mix == "rare":
        return make_split(
            ds, r.n_train, "rare", 0.0, seed, r.ood_source, r.n_test, r.rare_share, r.rare_class
        )
    kind = r.outlier_kind if mix > 0 else "none"
    return make_split(ds, r.n_train, kind, mix, seed, r.ood_source, r.n_test)


def lira_pool(
    ds: Dataset,
    recipe: LiraRecipe,
    mix: float | str,
    seed: int,
    norm: str,
    mitigation: MitigationConfig = NO_MITIGATION,
    store: Store | None = None,
) -> shadow.ShadowPool:
    """`recipe.n_shadows` shadow models of `norm` on `lira_split(ds, recipe, mix, seed)`, the
    same units whoever asks (03's pools and size sweep, 05's LiRA comparison); with a
    `mitigation` (the gamma/sigma regularizer), the same pool trained with it."""
    return shadow_pool(
        lira_split(ds, recipe, mix, seed),
        recipe.train_config(norm),
        recipe.n_shadows,
        seed,
        mitigation,
        recipe.executor,
        recipe.trainer,
        recipe.pack_size,
        recipe.bn_query_mode,
        store,
    )
