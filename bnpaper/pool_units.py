"""Shadow-model pools as cached units: a pool of shadows on a split with a balanced keep matrix,
and notebook 03's LiRA recipe and pools from its resolved parameters (03's pools and size sweep,
05's LiRA comparison and frontier). Each shadow is a unit of `bnpaper.shadow` (its key: the
shadow's configuration, the data fingerprint and `shadow`'s import closure)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping

from . import shadow
from .config import ConfigError
from .data import Dataset, Split, make_split
from .mitigation import MitigationConfig
from .store import Store
from .train import TrainConfig

NO_MITIGATION = MitigationConfig()


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
    levels: tuple[float, ...] = (),
) -> shadow.ShadowPool:
    """`n_shadows` shadow models of `base` on `split` with one balanced keep matrix seeded by
    `seed` (every example IN for half of them), each a cached unit; their scores as a pool (with
    `levels`, also at each clean training accuracy of it: `ShadowPool.at_levels`).
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
        levels=levels,
    )


@dataclass(frozen=True)
class LiraRecipe:
    """How notebook 03 draws a pool of examples and trains its shadow models: one object built
    from 03's resolved parameters and its norms' recipes (`from_params`), passed whole wherever a
    pool is made (03's pools and size sweep, 05's LiRA comparison and frontier). Under the fair
    protocol each norm trains with its own learning rate (`norm_lr`) until its clean training
    accuracy on its IN examples reaches `fit_level` (`epochs`: the cap), and keeps its weights at
    the first epoch reaching each of `fit_levels` (LiRA at matched fit below the fit level);
    under the paper's, every norm trains with `lr` for exactly `epochs`. A variation:
    `dataclasses.replace(recipe, ...)`."""

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
    fit_levels: tuple[float, ...] = ()  # fair: lower clean training accuracies also read

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
            fit_levels=tuple(sorted(float(lv) for lv in p.get("fit_levels", ()))),
            epochs=recipes.base.epochs,
        )

    def at_end_only(self, **changes) -> LiraRecipe:
        """This recipe with `changes` and without `fit_levels`: for pools read at the end of
        training only (the rare-class pools, the size sweep's smaller pools), whose shadows then
        keep no snapshots they would never be read at."""
        return replace(self, fit_levels=(), **changes)

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
            "fit_levels": list(self.fit_levels),
            "epoch_cap" if self.protocol == "fair" else "epochs": self.epochs,
        }


def augment_of(p: Mapping) -> bool:
    """Whether 03's models train (and are queried) with augmentation: p['augment'], 'auto' being
    on for CIFAR."""
    augment = p["augment"]
    if augment == "auto":
        augment = p["dataset"] in ("cifar10", "cifar100")
    return bool(augment)


_LIRA_RULES = (
    "augment",
    "protocol",
    "norm_lr",
    "fit_level",
    "fit_levels",
)  # not read from the parameters


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
        recipe.fit_levels,
    )
