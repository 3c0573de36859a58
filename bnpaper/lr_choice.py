"""The learning rate of each norm's recipe, chosen in advance on a grid by validation accuracy.

Every (architecture, norm) trains on clean data at each learning rate of a grid (`lr_grid`,
checked by `check_grid`: at least `min_points` values spanning at least `min_decades` decades)
and is scored on held-out validation images; `choose_lr` applies the rule written in
claims.yaml (`settings.lr_selection`): the largest mean validation accuracy over seeds, ties to
the smallest learning rate, a grid point with a diverged seed (NaN accuracy) never chosen.
`choose_recipes` does it for every (architecture, norm) and returns one `Recipes` record.
`choose_wd` applies the same rule to a grid of weight decays at a norm's chosen learning rate
(claims.yaml `settings.wd_selection`, a notebook's `wd_grid`).
Compute only: numbers in, frozen dataclasses out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .config import ConfigError, check_number

LR_MAX = 10.0  # the largest learning rate `train.TrainConfig` accepts


def lr_rule() -> dict:
    """The learning-rate selection rule, as written in claims.yaml (`settings.lr_selection`)."""
    from .claims import setting

    return setting("lr_selection")


def check_grid(name: str, lrs: Any) -> tuple[float, ...]:
    """`lrs`, sorted ascending: at least `min_points` distinct learning rates in (0, LR_MAX]
    whose largest is at least `min_decades` decades above the smallest (claims.yaml
    `settings.lr_selection`); else one `ConfigError` naming every way the grid falls short."""
    rule = lr_rule()
    points, decades = int(rule["min_points"]), float(rule["min_decades"])
    if isinstance(lrs, (str, bytes)) or not isinstance(lrs, Sequence):
        raise ConfigError(f"{name}={lrs!r} must be a list of at least {points} learning rates")
    for i, lr in enumerate(lrs):
        check_number(f"{name}[{i}]", lr, 0.0, LR_MAX, lo_open=True)
    grid = tuple(sorted(float(x) for x in lrs))
    short = []
    if len(set(grid)) < points:
        short.append(f"has {len(set(grid))} distinct values")
    span = math.log10(grid[-1] / grid[0]) if grid else 0.0
    if span < decades - 1e-9:  # 1e-9: the rounding of a log-spaced grid's ends
        short.append(f"spans {span:.3g} decades")
    if short:
        raise ConfigError(
            f"{name}={list(lrs)!r} {' and '.join(short)}; allowed: at least {points} distinct "
            f"learning rates in (0, {LR_MAX:g}], the largest at least {decades:g} decades "
            f"({10**decades:.3g} times) above the smallest (claims.yaml settings.lr_selection)"
        )
    return grid


def lr_grid(center: float, n: int = 5, decades: float = 2.0) -> tuple[float, ...]:
    """`n` learning rates log-spaced over `decades` decades, `center` their geometric middle
    (deterministic: the same arguments give the same floats), checked by `check_grid`."""
    rule = lr_rule()
    check_number("center", center, 0.0, LR_MAX, lo_open=True)
    check_number("n", n, int(rule["min_points"]), 1000, integer=True)
    check_number("decades", decades, float(rule["min_decades"]), 10.0)
    exponents = np.linspace(-decades / 2, decades / 2, n)
    return check_grid("lr_grid", [float(center * 10.0**x) for x in exponents])


@dataclass(frozen=True)
class LrChoice:
    """The learning rate chosen for one (architecture, norm): `grid` ascending, per grid point
    `mean_val_acc` (mean validation accuracy over `seeds`, NaN where it failed) and `failed`
    (a seed's training diverged)."""

    arch: str
    norm: str
    lr: float
    grid: tuple[float, ...]
    mean_val_acc: tuple[float, ...]
    failed: tuple[bool, ...]
    seeds: int
    fitted: tuple[bool, ...] = ()  # per grid point: every seed reached the fit rule (() unknown)
    fallback: bool = False  # no grid point fitted: chosen among all that did not fail

    def as_dict(self) -> dict:
        """The choice as results.json stores it (NaN accuracies as None)."""
        acc = [None if math.isnan(a) else a for a in self.mean_val_acc]
        return {
            "arch": self.arch,
            "norm": self.norm,
            "lr": self.lr,
            "grid": list(self.grid),
            "mean_val_acc": acc,
            "failed": list(self.failed),
            "fitted": list(self.fitted),
            "fallback": self.fallback,
            "seeds": self.seeds,
        }


def _select(
    grid: Sequence[float],
    val_acc: Any,
    fitted: Any,
    what: str,
    name: str,
    who: str,
    remedy: str,
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, bool, int]:
    """The rule of claims.yaml's `settings.lr_selection` on one grid of values (`grid`, in the
    order of `val_acc`'s columns): (index of the chosen point in the ascending grid, then per
    ascending grid point the mean validation accuracy (NaN where it failed), whether it failed
    and whether every seed fitted; fallback; number of seeds). `val_acc`, `fitted`: as
    `choose_lr` takes them; `what`, `name`, `who`, `remedy` word the error when every point
    failed."""
    rule = lr_rule()
    acc = np.atleast_2d(np.asarray(val_acc, float))
    if acc.ndim != 2 or acc.shape[1] != len(grid) or acc.shape[0] < 1:
        raise ValueError(
            f"val_acc of shape {np.shape(val_acc)} does not match a grid of {len(grid)} "
            f"{what}s: expected (seeds, grid points) or (grid points,)"
        )
    finite = np.isfinite(acc)
    fit = np.ones_like(acc, bool) if fitted is None else np.atleast_2d(np.asarray(fitted, bool))
    if fit.shape != acc.shape:
        raise ValueError(f"fitted of shape {fit.shape} does not match val_acc's {acc.shape}")
    if np.any((acc[finite] < 0) | (acc[finite] > 1)):
        raise ValueError(f"validation accuracies must lie in [0, 1], got {acc.tolist()}")
    order = np.argsort(np.asarray(grid, float), kind="stable")
    acc, finite, fit = acc[:, order], finite[:, order], fit[:, order]
    failed = ~finite.all(0)
    eligible = ~failed & fit.all(0)
    fallback = not eligible.any()
    if fallback:
        eligible = ~failed
    mean = np.where(failed, np.nan, np.where(finite, acc, 0.0).mean(0))
    if failed.all():
        values = sorted(float(v) for v in grid)
        raise ConfigError(
            f"every {what} of {name}={values!r} diverged for {who}; allowed: {remedy}"
        )
    best = np.nanmax(np.where(eligible, mean, np.nan))
    tied = eligible & (mean >= best - float(rule["tie_tolerance"]))
    pick = int(np.flatnonzero(tied)[0])  # ascending grid: the smallest tied value
    return pick, mean, failed, fit.all(0), bool(fallback), int(acc.shape[0])


def choose_lr(
    grid: Sequence[float], val_acc: Any, arch: str = "", norm: str = "", fitted: Any = None
) -> LrChoice:
    """Apply claims.yaml's `settings.lr_selection` rule. `val_acc`: (seeds, grid points) or
    (grid points,) validation accuracies in [0, 1], in the order of `grid`; NaN or inf marks a
    seed whose training diverged, which fails its grid point. `fitted` (same shape, bool; None:
    every run counts as fitted): whether each run reached the fit rule within its epoch cap; a
    grid point is eligible only when all its seeds fitted, unless no point is (then every point
    that did not fail is, and the choice is marked `fallback`). Raises `ConfigError` when every
    point failed (the grid has to move)."""
    lrs = check_grid("grid", grid)
    who = f"arch={arch!r}, norm={norm!r}" if arch or norm else "this grid"
    remedy = "a grid with at least one learning rate that trains (move the grid to smaller rates)"
    pick, mean, failed, fit, fallback, seeds = _select(
        grid, val_acc, fitted, "learning rate", "grid", who, remedy
    )
    return LrChoice(
        arch=arch,
        norm=norm,
        lr=lrs[pick],
        grid=lrs,
        mean_val_acc=tuple(float(m) for m in mean),
        failed=tuple(bool(f) for f in failed),
        seeds=seeds,
        fitted=tuple(bool(f) for f in fit) if fitted is not None else (),
        fallback=bool(fallback and fitted is not None),
    )


def check_wd_grid(name: str, values: Any, weight_decay: float) -> tuple[float, ...]:
    """`values`, sorted ascending: at least two distinct weight decays in [0, 1], one of them the
    recipe's `weight_decay` (the learning-rate search's models are that grid point); else one
    `ConfigError`."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ConfigError(f"{name}={values!r} must be a list of at least 2 weight decays")
    for i, w in enumerate(values):
        check_number(f"{name}[{i}]", w, 0.0, 1.0)
    grid = tuple(sorted(set(float(w) for w in values)))
    if len(grid) < 2 or float(weight_decay) not in grid:
        raise ConfigError(
            f"{name}={list(values)!r} is not a weight-decay grid for weight_decay={weight_decay!r};"
            f" allowed: [] (no weight-decay search) or at least 2 distinct weight decays in "
            f"[0, 1], weight_decay among them (its models are the learning-rate search's)"
        )
    return grid


@dataclass(frozen=True)
class WdChoice:
    """The weight decay chosen for one norm at its chosen learning rate (claims.yaml's
    `settings.wd_selection`): `grid` ascending, per grid point `mean_val_acc` (NaN where a seed
    diverged), `failed`, `fitted` (every seed reached the fit rule) and `epochs` (mean epochs
    the search models used; NaN where one diverged)."""

    norm: str
    weight_decay: float
    lr: float
    grid: tuple[float, ...]
    mean_val_acc: tuple[float, ...]
    failed: tuple[bool, ...]
    fitted: tuple[bool, ...]
    epochs: tuple[float, ...]
    seeds: int
    fallback: bool = False  # no grid point fitted: chosen among all that did not fail

    def as_dict(self) -> dict:
        """The choice as results.json stores it (NaN as None)."""
        return {
            "norm": self.norm,
            "weight_decay": self.weight_decay,
            "lr": self.lr,
            "grid": list(self.grid),
            "mean_val_acc": [None if math.isnan(a) else a for a in self.mean_val_acc],
            "failed": list(self.failed),
            "fitted": list(self.fitted),
            "epochs": [None if math.isnan(e) else e for e in self.epochs],
            "fallback": self.fallback,
            "seeds": self.seeds,
        }


def choose_wd(
    grid: Sequence[float],
    val_acc: Any,
    fitted: Any,
    norm: str,
    lr: float,
    epochs: Sequence[float] = (),
) -> WdChoice:
    """Apply claims.yaml's `settings.wd_selection` rule (the learning-rate rule on a grid of
    weight decays at the norm's chosen learning rate `lr`): `val_acc`, `fitted`: (seeds, grid
    points) in the order of `grid` (ascending, `check_wd_grid`), as `choose_lr` takes them;
    ties go to the smallest weight decay. Raises `ConfigError` when every point diverged."""
    values = tuple(float(w) for w in grid)
    if list(values) != sorted(set(values)):
        raise ValueError(f"grid={list(grid)!r} must be ascending and distinct (check_wd_grid)")
    if epochs and len(epochs) != len(values):
        raise ValueError(f"epochs={list(epochs)!r} must give one value per grid point")
    remedy = "a weight-decay grid with at least one value that trains at this learning rate"
    pick, mean, failed, fit, fallback, seeds = _select(
        values, val_acc, fitted, "weight decay", "wd_grid", f"norm={norm!r} at lr {lr:g}", remedy
    )
    return WdChoice(
        norm=norm,
        weight_decay=values[pick],
        lr=float(lr),
        grid=values,
        mean_val_acc=tuple(float(m) for m in mean),
        failed=tuple(bool(f) for f in failed),
        fitted=tuple(bool(f) for f in fit),
        epochs=tuple(float(e) for e in epochs) or (math.nan,) * len(values),
        seeds=seeds,
        fallback=fallback,
    )


@dataclass(frozen=True)
class Recipes:
    """The chosen learning rate of every (architecture, norm), one `LrChoice` each."""

    choices: tuple[LrChoice, ...]

    def lr(self, arch: str, norm: str) -> float:
        """The chosen learning rate of (arch, norm)."""
        for c in self.choices:
            if (c.arch, c.norm) == (arch, norm):
                return c.lr
        known = [(c.arch, c.norm) for c in self.choices]
        raise KeyError(f"no learning rate chosen for ({arch!r}, {norm!r}); chosen: {known}")

    def as_dict(self) -> dict:
        """{arch: {norm: choice as a dict}}, as results.json stores it."""
        out: dict[str, dict] = {}
        for c in self.choices:
            out.setdefault(c.arch, {})[c.norm] = c.as_dict()
        return out


def choose_recipes(scores: Mapping[tuple[str, str], tuple[Sequence[float], Any]]) -> Recipes:
    """`choose_lr` for every (arch, norm) of `scores` {(arch, norm): (grid, val_acc)}."""
    return Recipes(
        tuple(choose_lr(grid, acc, arch, norm) for (arch, norm), (grid, acc) in scores.items())
    )
