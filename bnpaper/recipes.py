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
`fit_level` or the epoch cap (`epochs`) is hit. With a `wd_grid` (notebook 01), each norm then
trains at its chosen learning rate once per weight decay of the grid on the same subsets and
seeds, and its weight decay is chosen by the same rule (`settings.wd_selection`,
`lr_choice.choose_wd`).

protocol "paper": every norm trains with the notebook's `lr` for exactly `epochs` epochs (no fit
rule, no search), the recipe the paper's experiments share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .config import ConfigError, check_choice, check_number
from .data import Dataset, hold_out, make_split, with_validation
from .lr_choice import LrChoice, Recipes, WdChoice, check_grid, check_wd_grid, choose_lr, choose_wd
from .train import TrainConfig, TrainResult

PROTOCOLS = ("fair", "paper")
PROTOCOL_NAME = {
    "fair": "each norm its own learning rate, chosen on validation data, trained to fit",
    "paper": "the paper's protocol: one learning rate for every norm, fixed epochs",
}


@dataclass(frozen=True)
class Search:
    """How each norm's learning rate is chosen: the grid, the clean training subset's size, the
    held-out validation images and the seeds (one model per norm, learning rate and seed); and
    `wd_grid` (ascending, `lr_choice.check_wd_grid`; () for none): the weight decays each norm
    then trains with at its chosen learning rate."""

    grid: tuple[float, ...]
    n_train: int
    n_val: int
    seeds: tuple[int, ...]
    wd_grid: tuple[float, ...] = ()

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
        `wd_grid` where the notebook declares it, and `n_train` unless given: 03's shadows train
        on half of their pool)."""
        wd = p.get("wd_grid") or ()
        return cls(
            grid=check_grid("lr_grid", p["lr_grid"]),
            n_train=int(p["n_train"] if n_train is None else n_train),
            n_val=p["n_val"],
            seeds=tuple(p["lr_seeds"]),
            wd_grid=check_wd_grid("wd_grid", wd, p["weight_decay"]) if wd else (),
        )


def check_protocol(p: Mapping) -> str:
    """The protocol of a notebook's parameters `p`, checked with its rules (before any run):
    'fair' needs a `fit_level` in (0, 1] and a valid `lr_grid`, `n_val`, `lr_seeds` (and
    `wd_grid`, where given); 'paper' searches nothing, so a `wd_grid` is an error there."""
    protocol = p["protocol"]
    check_choice("protocol", protocol, PROTOCOLS)
    if protocol == "paper" and p.get("wd_grid"):
        raise ConfigError(
            f"wd_grid={p['wd_grid']!r} with protocol='paper'; allowed: [] (the paper's protocol "
            "searches nothing: every norm trains with weight_decay) or protocol='fair'"
        )
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
    rate (`choices`, for the fair protocol), its weight decay where one was searched
    (`wd_choices`; else `base.weight_decay`) and the fit rule (`base.fit_level`, fair only)."""

    protocol: str
    base: TrainConfig
    choices: Recipes | None = None
    search: Search | None = None
    grid_epochs: tuple[tuple[str, tuple[float, ...]], ...] = ()  # norm -> epochs used per lr
    wd_choices: tuple[WdChoice, ...] = ()

    def lr(self, norm: str) -> float:
        """The learning rate `norm` trains with."""
        if self.choices is None:
            return self.base.lr
        return self.choices.lr(self.base.arch, norm)

    def weight_decay(self, norm: str) -> float:
        """The weight decay `norm` trains with (its searched one, else the recipe's)."""
        chosen = [c.weight_decay for c in self.wd_choices if c.norm == norm]
        return chosen[0] if chosen else self.base.weight_decay

    def config(self, norm: str, **changes) -> TrainConfig:
        """The training configuration of `norm` (with `changes`, e.g. seed)."""
        own = {"norm": norm, "lr": self.lr(norm), "weight_decay": self.weight_decay(norm)}
        return replace(self.base, **{**own, **changes})

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
        epoch cap and (fair) the search with every grid point's validation accuracy; with a
        weight-decay search, each norm's weight decay and that search's grid points too."""
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
            if self.wd_choices:
                out["weight_decay"] = {n: self.weight_decay(n) for n in norms}
                out["search"]["wd_grid"] = list(self.search.wd_grid)
                out["search"]["wd_choices"] = {c.norm: c.as_dict() for c in self.wd_choices}
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


def _read(
    runs: Sequence[Sequence[TrainResult | None]],
) -> tuple[list[list[float]], list[list[bool]], tuple[float, ...]]:
    """(seeds, grid points) search models as the rule reads them: validation accuracies (NaN:
    diverged), whether each reached its fit rule within the cap, and per grid point the mean
    epochs its models used (NaN where one diverged)."""
    acc = [[_val_acc(r) for r in row] for row in runs]
    fit = [[_fitted(r) for r in row] for row in runs]
    epochs = tuple(
        float(sum(r.epochs for r in col) / len(col))
        if all(r is not None for r in col)
        else float("nan")
        for col in zip(*runs)
    )
    return acc, fit, epochs


def search_table(
    results: Mapping[tuple[str, float, int], TrainResult | None], norm: str, search: Search
) -> tuple[list[list[float]], list[list[bool]]]:
    """One norm's search as `choose_lr` reads it: (seeds, grid points) validation accuracies
    (NaN: diverged) and whether each model reached its fit rule within the cap."""
    acc, fit, _ = _read([[results[norm, lr, s] for lr in search.grid] for s in search.seeds])
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
    kept; with `search.wd_grid`, each norm's weight decay chosen after it (`weight_decays`)."""
    results = search_models(ds, base, norms, search, trainer, store)
    choices, grid_epochs = [], []
    for n in norms:
        runs = [[results[n, lr, s] for lr in search.grid] for s in search.seeds]
        acc, fit, epochs = _read(runs)
        choices.append(choose_lr(search.grid, acc, base.arch, n, fitted=fit))
        grid_epochs.append((n, epochs))
    chosen = NormRecipes("fair", base, Recipes(tuple(choices)), search, tuple(grid_epochs))
    if not search.wd_grid:
        return chosen
    return replace(chosen, wd_choices=weight_decays(ds, chosen, results, trainer, store))


def weight_decays(
    ds: Dataset,
    chosen: NormRecipes,
    lr_results: Mapping[tuple[str, float, int], TrainResult | None],
    trainer: str = "auto",
    store=None,
) -> tuple[WdChoice, ...]:
    """Each norm's weight decay (claims.yaml `settings.wd_selection`): its search models at its
    chosen learning rate, one per weight decay of `chosen.search.wd_grid` and search seed (cached
    units; the recipe's own weight decay is `lr_results`' model at that rate), chosen by
    `lr_choice.choose_wd`."""
    from . import units

    search, base = chosen.search, chosen.base
    norms = [c.norm for c in chosen.choices.choices]
    splits = search_splits(ds, search)
    keys = [
        (n, wd, s)
        for n in norms
        for wd in search.wd_grid
        if wd != base.weight_decay
        for s in search.seeds
    ]
    cfgs = [replace(base, norm=n, lr=chosen.lr(n), weight_decay=wd, seed=s) for n, wd, s in keys]
    jobs = [units.Job(splits[s], cfg, None) for (_, _, s), cfg in zip(keys, cfgs)]
    descs = [f"wd search {n} lr {chosen.lr(n):.3g} wd {wd:g} seed {s}" for n, wd, s in keys]
    trained = units.trained_or_diverged(jobs, trainer, descs=descs, store=store, fit_only=True)
    results = dict(zip(keys, trained))
    for n in norms:
        for s in search.seeds:
            results[n, base.weight_decay, s] = lr_results[n, chosen.lr(n), s]
    out = []
    for n in norms:
        runs = [[results[n, wd, s] for wd in search.wd_grid] for s in search.seeds]
        acc, fit, epochs = _read(runs)
        out.append(choose_wd(search.wd_grid, acc, fit, n, chosen.lr(n), epochs))
    return tuple(out)


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
