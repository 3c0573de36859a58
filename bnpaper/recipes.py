"""Each norm's training recipe: its own learning rate, chosen in advance on held-out data, and
training to fit (the fair protocol), or the paper's protocol (one recipe for every norm).

protocol "fair": for every norm, models train on clean data (a subset of the training set minus
`n_val` held-out validation images, `data.hold_out`) at every learning rate of `lr_grid`, on the
`lr_seeds`, with the notebook's recipe otherwise (batch size, weight decay, schedule over the
epoch cap, stopping once the clean training accuracy reaches `fit_level`); each is a cached unit,
and one whose training diverges fails its grid point. The learning rate is chosen by the rule in
claims.yaml (`settings.lr_selection`, `lr_choice.choose_lr`) from the validation accuracies of
the grid points whose models reached the fit level within the cap, and
every judged model of that norm trains with it, until its clean training accuracy reaches
`fit_level` or the epoch cap (`epochs`) is hit.

protocol "paper": every norm trains with the notebook's `lr` for exactly `epochs` epochs (no fit
rule, no search), the recipe the paper's experiments share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .config import ConfigError, check_choice, check_number
from .data import Dataset, hold_out, make_split, with_validation
from .lr_choice import LrChoice, Recipes, check_grid, choose_lr
from .train import TrainConfig, TrainResult

PROTOCOLS = ("fair", "paper")
PROTOCOL_NAME = {
    "fair": "each norm its own learning rate, chosen on validation data, trained to fit",
    "paper": "the paper's protocol: one learning rate for every norm, fixed epochs",
}


@dataclass(frozen=True)
class Search:
    """How each norm's learning rate is chosen: the grid, the clean training subset's size, the
    held-out validation images and the seeds (one model per norm, learning rate and seed)."""

    grid: tuple[float, ...]
    n_train: int
    n_val: int
    seeds: tuple[int, ...]

    def __post_init__(self):
        check_number("n_train", self.n_train, 2, None, integer=True)
        check_number("n_val", self.n_val, 1, None, integer=True)
        if not self.seeds:
            raise ConfigError("lr_seeds=[] is empty; allowed: a list of at least one seed >= 0")
        for i, s in enumerate(self.seeds):
            check_number(f"lr_seeds[{i}]", s, 0, None, integer=True)

    @classmethod
    def from_params(cls, p: Mapping, n_train: int | None = None) -> Search:
        """The search of a notebook's resolved parameters `p` (`lr_grid`, `n_val`, `lr_seeds`,
        and `n_train` unless given: 03's shadows train on half of their pool)."""
        return cls(
            grid=check_grid("lr_grid", p["lr_grid"]),
            n_train=int(p["n_train"] if n_train is None else n_train),
            n_val=p["n_val"],
            seeds=tuple(p["lr_seeds"]),
        )


def check_protocol(p: Mapping) -> str:
    """The protocol of a notebook's parameters `p`, checked with its rules (before any run):
    'fair' needs a `fit_level` in (0, 1] and a valid `lr_grid`, `n_val`, `lr_seeds`."""
    protocol = p["protocol"]
    check_choice("protocol", protocol, PROTOCOLS)
    if protocol == "fair":
        if p.get("fit_level") is None:
            raise ConfigError(
                "fit_level=None with protocol='fair'; allowed: a clean training accuracy in "
                "(0, 1] that every model trains to (or protocol='paper')"
            )
        check_number("fit_level", p["fit_level"], 0.0, 1.0, lo_open=True)
        Search.from_params(p)
    return protocol


@dataclass(frozen=True)
class NormRecipes:
    """The training recipe of every norm: `base` (the notebook's recipe) with each norm's learning
    rate (`choices`, for the fair protocol) and the fit rule (`base.fit_level`, fair only)."""

    protocol: str
    base: TrainConfig
    choices: Recipes | None = None
    search: Search | None = None
    grid_epochs: tuple[tuple[str, tuple[float, ...]], ...] = ()  # norm -> epochs used per lr

    def lr(self, norm: str) -> float:
        """The learning rate `norm` trains with."""
        if self.choices is None:
            return self.base.lr
        return self.choices.lr(self.base.arch, norm)

    def config(self, norm: str, **changes) -> TrainConfig:
        """The training configuration of `norm` (with `changes`, e.g. seed)."""
        return replace(self.base, **{"norm": norm, "lr": self.lr(norm), **changes})

    def choice(self, norm: str) -> LrChoice | None:
        """The grid and validation accuracies `norm`'s learning rate was chosen from."""
        if self.choices is None:
            return None
        return next(c for c in self.choices.choices if c.norm == norm)

    @property
    def name(self) -> str:
        """The protocol in words."""
        return PROTOCOL_NAME[self.protocol]

    def as_dict(self) -> dict:
        """What results.json records: the protocol, each norm's learning rate, the fit rule, the
        epoch cap and (fair) the search with every grid point's validation accuracy."""
        norms = [c.norm for c in self.choices.choices] if self.choices else []
        out = {
            "protocol": self.protocol,
            "name": self.name,
            "fit_level": self.base.fit_level,
            "epoch_cap": self.base.epochs,
            "lr": {n: self.lr(n) for n in norms} if norms else self.base.lr,
        }
        if self.choices is not None and self.search is not None:
            out["search"] = {
                "grid": list(self.search.grid),
                "n_train": self.search.n_train,
                "n_val": self.search.n_val,
                "seeds": list(self.search.seeds),
                "choices": self.choices.as_dict(),
                "grid_epochs": {n: list(e) for n, e in self.grid_epochs},
            }
        return out


def paper(base: TrainConfig) -> NormRecipes:
    """The paper's protocol: `base`'s learning rate for every norm, fixed epochs, no fit rule."""
    return NormRecipes("paper", replace(base, fit_level=None))


def search_splits(ds: Dataset, search: Search) -> dict[int, object]:
    """{seed: clean split} of the search: `search.n_train` images drawn (seeded) from the training
    set minus `search.n_val` held-out validation images, the validation images as its test set
    (a search model never sees a test image)."""
    rest, x_val, y_val = hold_out(ds, search.n_val)
    return {
        s: with_validation(make_split(rest, search.n_train, "none", 0.0, s, n_test=1), x_val, y_val)
        for s in search.seeds
    }


def _val_acc(result: TrainResult | None) -> float:
    """The validation accuracy at the end of a search model's training; NaN if it diverged."""
    if result is None:
        return float("nan")
    acc = float(result.history["test_acc"][-1])
    return acc if math.isfinite(acc) else float("nan")


def _fitted(result: TrainResult | None) -> bool:
    """Whether a search model reached its fit rule within the epoch cap (a diverged one: no)."""
    return result is not None and not result.censored


def search_models(
    ds: Dataset,
    base: TrainConfig,
    norms: Sequence[str],
    search: Search,
    trainer: str = "auto",
    store=None,
) -> dict[tuple[str, float, int], TrainResult | None]:
    """{(norm, lr, seed): its search model (None: diverged)}: every norm of `norms` trained at
    every learning rate of `search.grid` on every search seed (cached units, LeNets packed),
    `base`'s recipe otherwise, each record read at its last epoch only."""
    from . import units

    if base.fit_level is None:
        raise ConfigError("the fair protocol needs base.fit_level (a clean training accuracy)")
    splits = search_splits(ds, search)
    keys = [(n, lr, s) for n in norms for lr in search.grid for s in search.seeds]
    jobs = [units.Job(splits[s], replace(base, norm=n, lr=lr, seed=s), None) for n, lr, s in keys]
    descs = [f"lr search {n} lr {lr:.3g} seed {s}" for n, lr, s in keys]
    trained = units.trained_or_diverged(jobs, trainer, descs=descs, store=store, fit_only=True)
    return dict(zip(keys, trained))


def search_table(
    results: Mapping[tuple[str, float, int], TrainResult | None], norm: str, search: Search
) -> tuple[list[list[float]], list[list[bool]]]:
    """One norm's search as `choose_lr` reads it: (seeds, grid points) validation accuracies
    (NaN: diverged) and whether each model reached its fit rule within the cap."""
    acc = [[_val_acc(results[norm, lr, s]) for lr in search.grid] for s in search.seeds]
    fit = [[_fitted(results[norm, lr, s]) for lr in search.grid] for s in search.seeds]
    return acc, fit


def choose(
    ds: Dataset,
    base: TrainConfig,
    norms: Sequence[str],
    search: Search,
    trainer: str = "auto",
    store=None,
) -> NormRecipes:
    """The fair protocol's recipes: every norm's search models (`search_models`; a diverged one
    fails its grid point), the learning rate chosen by `lr_choice.choose_lr`, `base`'s fit rule
    kept."""
    results = search_models(ds, base, norms, search, trainer, store)
    choices, grid_epochs = [], []
    for n in norms:
        acc, fit = search_table(results, n, search)
        choices.append(choose_lr(search.grid, acc, base.arch, n, fitted=fit))
        epochs = [
            float(sum(results[n, lr, s].epochs for s in search.seeds) / len(search.seeds))
            if all(results[n, lr, s] is not None for s in search.seeds)
            else float("nan")
            for lr in search.grid
        ]
        grid_epochs.append((n, tuple(epochs)))
    return NormRecipes("fair", base, Recipes(tuple(choices)), search, tuple(grid_epochs))


def norm_recipes(
    ds: Dataset,
    p: Mapping,
    norms: Sequence[str],
    trainer: str = "auto",
    n_train: int | None = None,
    store=None,
) -> NormRecipes:
    """Every norm's recipe from a notebook's resolved parameters `p` (`protocol`, its recipe
    fields, and for 'fair' `lr_grid`, `n_val`, `lr_seeds`, `fit_level`); `n_train`: the search's
    subset size when it is not `p['n_train']`."""
    protocol = check_protocol(p)
    base = TrainConfig.from_params(p)
    if protocol == "paper":
        return paper(base)
    return choose(ds, base, norms, Search.from_params(p, n_train), trainer, store)
