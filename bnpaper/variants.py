"""Notebook 05's model families, where each trains, and the measures read off their histories.

A family is a norm, a mitigation and a weight decay (`Variant`; its words come from one record
per mitigation method, `METHOD_WORDS`). Memorization (`MEMORIZATION`, read only through `curve`)
depends on the corruption kind, as in notebook 01 (`memorization.memorization_curve`): for label
flips and OOD images, the accuracy on the corrupted training samples with respect to their
corrupted labels; for a rare class (labels true), the accuracy on its trained members minus that
on its held-out test samples. Utility is the clean test accuracy (`ACCURACY`; for a selection
model trained with `data.with_validation`, its validation accuracy).

The rare kind is judged only: the setting is chosen, and the frontier and the alternatives are
drawn, on the flip and OOD kinds (`grid_kinds`); on rare splits only BN, the chosen setting and
no-BN train (`plan`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from .memorization import memorization_curve
from .mitigation import MitigationConfig

MEMORIZATION = "memorization"  # a measure (`curve`), not a history key
ACCURACY, SUBSET_ACC, HELD_OUT = "test_acc", "noisy_acc", "rare_test_acc"  # history keys
GRID = ("flip", "ood")  # the kinds the setting is chosen on (`grid_kinds`)
FAMILIES = {"bn": "BN", "none": "no-BN", "gn": "GroupNorm", "bn_noaffine": "BN, gamma fixed at 1"}


# ---------------------------------------------------------------- the measures
def curve(history: Mapping[str, list], corr: str, what: str) -> np.ndarray:
    """One model's per-epoch `what` on a split of corruption `corr`: `MEMORIZATION` (per kind,
    `memorization.memorization_curve`), else the history entry `what` (`ACCURACY`, `SUBSET_ACC`
    the atypical subset's accuracy on its training labels, `HELD_OUT` the rare class's held-out
    accuracy). Every memorization of notebook 05 is read here."""
    if what == MEMORIZATION:
        return np.asarray(memorization_curve(history, corr), float)
    return np.asarray(history[what], float)


def curves(histories: Sequence[Mapping[str, list]], corr: str, what: str) -> np.ndarray:
    """`curve` of several runs (e.g. seeds): (runs, evaluated epochs)."""
    return np.array([curve(h, corr, what) for h in histories])


def finals(runs: Mapping, corr: str, name: str, seeds: Sequence[int], what: str) -> np.ndarray:
    """The final value of `what` (`curve`) per seed: (seeds,)."""
    return np.array(
        [curve(runs[corr, name, s].history, corr, what)[-1] for s in seeds], dtype=float
    )


# ---------------------------------------------------------------- model families
@dataclass(frozen=True)
class MethodWords:
    """How a model family names its mitigation method (templates over `lam`, `tau`): `short` in
    results ('pen(l=0.01,t=1)'), `family` added to the norm's name (' + regularizer'),
    `params` in mathtext, `point` the label of a frontier point (None: `params`), `color` a
    `plots.COLORS` key (None: the norm's)."""

    short: str
    family: str
    params: str
    point: str | None
    color: str | None


METHOD_WORDS: dict[str, MethodWords] = {
    "none": MethodWords("", "", "", None, None),
    "penalty": MethodWords(
        "pen(l={lam:g},t={tau:g})",
        " + regularizer",
        "$\\lambda$={lam:g}, $\\tau$={tau:g}",
        "$\\lambda$={lam:g}",
        "bn_reg",
    ),
    "projection": MethodWords(
        "proj(t={tau:g})", " + projection", "$\\tau$={tau:g}", None, "bn_reg"
    ),
    "gamma_decay": MethodWords(
        "gdecay({lam:g})", " + decay on gamma", "{lam:g}", None, "bn_gdecay"
    ),
    # the regularizer taken apart (`mitigation.ratio_terms`, `mitigation.GammaBound`)
    "penalty_gamma": MethodWords(
        "pen_g(l={lam:g},t={tau:g})",
        " + penalty, sigma detached",
        "$\\lambda$={lam:g}, $\\tau$={tau:g}",
        None,
        "bn_gdecay",
    ),
    "penalty_sigma": MethodWords(
        "pen_s(l={lam:g},t={tau:g})",
        " + penalty, gamma detached",
        "$\\lambda$={lam:g}, $\\tau$={tau:g}",
        None,
        "bn_wd",
    ),
    "gamma_bound": MethodWords(
        "gbound(l={lam:g},t={tau:g})",
        " + bound on |gamma|",
        "$\\lambda$={lam:g}, $\\tau$={tau:g}",
        None,
        "bn_gdecay",
    ),
}
PARTS = ("penalty_gamma", "penalty_sigma", "gamma_bound")  # `parts`: the regularizer taken apart


@dataclass(frozen=True)
class Variant:
    """One model family: a norm, a mitigation and, if set, its own weight decay (else the run's).
    `name` keys results.json; `label` and `color` (a key of `bnpaper.plots.COLORS`) are for
    figures; `config(base, seed)` is its training configuration."""

    norm: str
    mit: MitigationConfig = MitigationConfig()
    weight_decay: float | None = None
    lr_scale: float | None = None  # its learning rate: the recipe's times this (None: the recipe's)

    def _words(self, template: str) -> str:
        return template.format(lam=self.mit.lam, tau=self.mit.tau)

    @property
    def _method(self) -> MethodWords:
        return METHOD_WORDS[self.mit.method]

    @property
    def short(self) -> str:
        """'pen(l=0.01,t=1)', 'proj(t=1)', 'gdecay(0.05)', 'wd(0.005)', 'lr(x0.25)'; '' for a
        plain norm."""
        wd = f"wd({self.weight_decay:g})" if self.weight_decay is not None else ""
        lr = f"lr(x{self.lr_scale:g})" if self.lr_scale is not None else ""
        return "+".join(p for p in (self._words(self._method.short), wd, lr) if p)

    @property
    def name(self) -> str:
        """'bn', 'none', 'gn', 'bn+pen(l=0.01,t=1)', 'bn+proj(t=1)', 'bn+wd(0.005)', ..."""
        return f"{self.norm}+{self.short}" if self.short else self.norm

    @property
    def family(self) -> str:
        """'BN', 'no-BN', 'GroupNorm', 'BN + regularizer', 'BN + decay on gamma', ..."""
        wd = " + stronger weight decay" if self.weight_decay is not None else ""
        lr = " at a lower learning rate" if self.lr_scale is not None else ""
        return FAMILIES.get(self.norm, self.norm) + self._method.family + wd + lr

    @property
    def params(self) -> str:
        """The mitigation's parameters in mathtext ('' for none)."""
        wd = f"{self.weight_decay:g}" if self.weight_decay is not None else ""
        lr = f"lr x{self.lr_scale:g}" if self.lr_scale is not None else ""
        return ", ".join(x for x in (self._words(self._method.params), wd, lr) if x)

    @property
    def label(self) -> str:
        """The family with its parameters: 'BN + regularizer ($\\lambda$=0.01, $\\tau$=1)'."""
        return f"{self.family} ({self.params})" if self.params else self.family

    @property
    def point_label(self) -> str:
        """The label of a frontier point: '$\\lambda$=0.01' for the penalty, else `params`."""
        point = self._method.point
        return self.params if point is None else self._words(point)

    @property
    def color(self) -> str:
        """A key of `plots.COLORS`: the weight decay's, the method's or the norm's."""
        if self.weight_decay is not None or self.lr_scale is not None:
            return "bn_wd"
        return self._method.color or self.norm

    def config(self, base, seed: int, lr: float | None = None):
        """`base` (a `train.TrainConfig`) with this family's norm, weight decay and learning rate
        (`lr`: its norm's recipe, default `base.lr`; times `lr_scale` when set), at `seed`."""
        wd = base.weight_decay if self.weight_decay is None else self.weight_decay
        lr = base.lr if lr is None else lr
        lr = lr * self.lr_scale if self.lr_scale is not None else lr
        return replace(base, norm=self.norm, weight_decay=wd, lr=lr, seed=seed)


def penalties(lams: Sequence[float], taus: Sequence[float]) -> list[Variant]:
    """BN with the gamma/sigma penalty at every (lambda, tau), lambda varying fastest."""
    return [Variant("bn", MitigationConfig("penalty", lam, tau)) for tau in taus for lam in lams]


def projections(taus: Sequence[float]) -> list[Variant]:
    """BN with the gamma/sigma projection at every bound tau."""
    return [Variant("bn", MitigationConfig("projection", tau=tau)) for tau in taus]


def gamma_decays(lams: Sequence[float]) -> list[Variant]:
    """BN with an extra L2 penalty on its gammas only, at every coefficient."""
    return [Variant("bn", MitigationConfig("gamma_decay", lam=lam)) for lam in lams]


def stronger_weight_decays(weight_decays: Sequence[float]) -> list[Variant]:
    """BN with a stronger global weight decay, at every value."""
    return [Variant("bn", weight_decay=w) for w in weight_decays]


def parts(lam: float, tau: float) -> list[Variant]:
    """The regularizer at (`lam`, `tau`) taken apart: sigma detached (moves gamma only), gamma
    detached (moves only the weights feeding BN, through sigma), and the bound on |gamma| itself
    (`mitigation.METHODS`)."""
    return [Variant("bn", MitigationConfig(m, lam, tau)) for m in PARTS]


def parts_setting(chosen: Variant, lams: Sequence[float], tau: float) -> tuple[float, float]:
    """The (lambda, tau) the regularizer is taken apart at: the chosen setting's when it is a
    penalty, else the middle lambda of `lams` at the frontier's `tau`."""
    if chosen.mit.method == "penalty":
        return chosen.mit.lam, chosen.mit.tau
    return sorted(lams)[len(lams) // 2], tau


def full_penalty(lam: float, tau: float) -> Variant:
    """BN with the whole regularizer at (`lam`, `tau`)."""
    return Variant("bn", MitigationConfig("penalty", lam, tau))


def lower_lrs(scales: Sequence[float]) -> list[Variant]:
    """BN at its recipe's learning rate times each of `scales` (< 1): the effective-learning-rate
    alternative to the regularizer (a larger |w| lowers BN's effective step lr/|w|^2 the same
    way)."""
    return [Variant("bn", lr_scale=float(k)) for k in scales]


@dataclass(frozen=True)
class Lineup:
    """The families of one evaluation: BN, the chosen setting and no-BN (`judged` on every kind),
    the regularizer's frontier in order of strength and the alternatives (with them, `every`
    family, on the frontier's kinds)."""

    bn: Variant
    chosen: Variant
    no_bn: Variant
    frontier: tuple[Variant, ...]
    alternatives: tuple[Variant, ...]

    def __post_init__(self):
        object.__setattr__(self, "frontier", tuple(self.frontier))
        object.__setattr__(self, "alternatives", tuple(self.alternatives))

    @property
    def judged(self) -> list[Variant]:
        """BN, the chosen setting and no-BN."""
        return [self.bn, self.chosen, self.no_bn]

    @property
    def every(self) -> list[Variant]:
        """BN, the chosen setting, the frontier and the alternatives."""
        return [self.bn, self.chosen, *self.frontier, *self.alternatives]


# ---------------------------------------------------------------- where each family trains
@dataclass(frozen=True)
class SplitRecipe:
    """How every training subset is drawn (`data.make_split`): `n_train` samples, a share
    `noise_frac` corrupted (flip, ood), OOD images from `ood_source`, `n_test` clean test
    images, a rare class at `rare_share` of the subset (`rare_class`, or -1: a seeded choice)."""

    n_train: int
    noise_frac: float
    ood_source: str
    n_test: int
    rare_share: float
    rare_class: int


def grid_kinds(corruptions: Sequence[str]) -> list[str]:
    """The corruption kinds the setting is chosen on and the frontier and alternatives are drawn
    for: the flip and OOD kinds among `corruptions` (a rare kind is judged only: `plan`)."""
    return [c for c in corruptions if c in GRID]


def frontier_kinds(corruptions: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The kinds the frontier and the alternatives train on: those of `wanted` (the parameter
    `frontier_corruption`) that `corruptions` has, or, if it has none of them, its first flip or
    OOD kind (`grid_kinds`)."""
    return [c for c in corruptions if c in wanted] or grid_kinds(corruptions)[:1]


def plan(
    corruptions: Sequence[str],
    grid: Sequence[Variant],
    judged: Sequence[Variant],
    frontier_kinds: Sequence[str] | None = None,
) -> dict[str, list[Variant]]:
    """Which models train on the evaluation splits of each kind: `grid` (BN, the chosen setting,
    the frontier, the alternatives) on `frontier_kinds` (default: every kind of `grid_kinds`),
    `judged` (BN, the chosen setting, no-BN) on the others."""
    kinds = grid_kinds(corruptions) if frontier_kinds is None else list(frontier_kinds)
    return {c: list(grid if c in kinds else judged) for c in corruptions}


def evaluation_splits(
    ds, corruptions: Sequence[str], seeds: Sequence[int], recipe: SplitRecipe
) -> dict[tuple[str, int], object]:
    """The evaluation splits {(corruption, seed): Split} drawn by `recipe` (`data.make_split`)."""
    from .data import make_split

    r = recipe
    return {
        (c, s): make_split(
            ds, r.n_train, c, r.noise_frac, s, r.ood_source, r.n_test, r.rare_share, r.rare_class
        )
        for c in corruptions
        for s in seeds
    }


def train_grid(
    splits: Mapping[tuple[str, int], object],
    variants: Sequence[Variant] | Mapping[str, Sequence[Variant]],
    base,
    what: str = "",
    trainer: str = "auto",
    lrs: Mapping[str, float] | None = None,
) -> dict[tuple[str, str, int], object]:
    """Every variant (a list, or {corruption: list} as `plan` gives) trained on every split
    ({(corruption, seed): Split}) from that seed, as cached units (`units.trained_all`: LeNets
    packed under trainer "auto"): {(corruption, variant name, seed): TrainResult}. `lrs`: each
    norm's learning rate (its recipe, `baseline_lrs`; default `base.lr` for every norm)."""
    from . import units

    jobs = {}
    for (corr, seed), split in splits.items():
        for v in dict.fromkeys(variants[corr] if isinstance(variants, Mapping) else variants):
            cfg = v.config(base, seed, (lrs or {}).get(v.norm))
            jobs[corr, v.name, seed] = units.Job(split, cfg, mitigation=v.mit)
    descs = [f"{what}{corr} {name} seed {seed}" for corr, name, seed in jobs]
    return dict(zip(jobs, units.trained_all(list(jobs.values()), trainer, descs=descs)))


def baseline_recipes(ds, p: Mapping, norms: Sequence[str], trainer: str = "auto"):
    """Each norm's recipe for notebook 05 (`recipes.norm_recipes` on 05's resolved parameters
    `p`): under the fair protocol each norm's learning rate chosen on `n_val` held-out images by
    claims.yaml's rule (its search models train to `fit_level` within the `epochs` cap); under
    the paper's, `p['lr']` for every norm. 05's judged models then train with these rates for a
    fixed `epochs` (`evaluation_config`)."""
    from .recipes import norm_recipes

    return norm_recipes(ds, p, norms, trainer)


def evaluation_config(p: Mapping):
    """The training recipe of 05's judged models: 05's parameters, a fixed number of epochs and no
    fit rule (the regularizer lowers training fit by design, so its models are compared at equal
    clean test accuracy on the frontier, not at matched training fit)."""
    from .train import TrainConfig

    return replace(TrainConfig.from_params(p), fit_level=None)
