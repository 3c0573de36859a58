"""Parameter validation, project paths and seeding.

Every bad parameter raises one `ConfigError` whose message names the key, the bad value and
what is allowed, before any expensive work starts. A leaf: imports no other bnpaper module.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch

NOTEBOOKS = (
    "01_forced_memorization",
    "02_gradient_dynamics",
    "03_lira",
    "04_theory",
    "05_mitigation",
)
BUDGETS = ("ci", "quick", "full", "paper")


class ConfigError(ValueError):
    """A parameter (or a missing input) that the user has to fix; the message says how.

    In a notebook (JupyterLab, papermill) IPython shows it as its one message line, without
    a traceback: the user has nothing to debug, only a value to change."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def repo_root() -> Path:
    """The repository root: $BNPAPER_ROOT, else the folder holding `bnpaper/` and `notebooks/`."""
    env = os.environ.get("BNPAPER_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parent.parent
    if (here / "notebooks").is_dir():
        return here
    cwd = Path.cwd().resolve()
    for p in (cwd, *cwd.parents):
        if (p / "notebooks").is_dir() and (p / "bnpaper").is_dir():
            return p
    return here


def output_root() -> Path:
    """Where notebooks write `figures/` and `results/`: $BNPAPER_OUTPUT, else `<repo>/runs/manual`
    (gitignored). Only the reference run (`make reproduce`) points it at the repository itself."""
    env = os.environ.get("BNPAPER_OUTPUT")
    return Path(env).resolve() if env else repo_root() / "runs" / "manual"


def cache_root() -> Path:
    """The content-addressed run cache: $BNPAPER_CACHE, else `<repo>/.cache/runs`."""
    env = os.environ.get("BNPAPER_CACHE")
    return Path(env).resolve() if env else repo_root() / ".cache" / "runs"


def data_root() -> Path:
    """The user's data folder: $BNPAPER_DATA, else `<repo>/data`."""
    env = os.environ.get("BNPAPER_DATA")
    return Path(env).resolve() if env else repo_root() / "data"


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a torch generator seeded with `seed`."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- checks
def require(cond: bool, message: str) -> None:
    """Raise one `ConfigError` with `message` unless `cond` holds."""
    if not cond:
        raise ConfigError(message)


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """`value` must be one of `allowed`."""
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not allowed; choose one of {allowed}")
    return value


def check_choices(name: str, values: Any, allowed: Iterable[Any], min_len: int = 1) -> list:
    """`values` must be a list of distinct members of `allowed`, at least `min_len` long."""
    allowed = list(allowed)
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ConfigError(f"{name}={values!r} must be a list drawn from {allowed}")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ConfigError(f"{name}={list(values)!r} contains {bad}; allowed values are {allowed}")
    if len(set(values)) != len(values) or len(values) < min_len:
        raise ConfigError(
            f"{name}={list(values)!r} must hold at least {min_len} distinct values from {allowed}"
        )
    return list(values)


def check_number(
    name: str,
    value: Any,
    lo: float | None = None,
    hi: float | None = None,
    integer: bool = False,
    lo_open: bool = False,
    hi_open: bool = False,
) -> Any:
    """`value` must be a number (an int if `integer`) in the given interval."""
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise ConfigError(f"{name}={value!r} must be {kind}")
    if not np.isfinite(value):
        raise ConfigError(f"{name}={value!r} must be finite")
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    rng = f"{left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"
    if lo is not None and (value < lo or (lo_open and value == lo)):
        raise ConfigError(f"{name}={value!r} is out of range; allowed: {kind} in {rng}")
    if hi is not None and (value > hi or (hi_open and value == hi)):
        raise ConfigError(f"{name}={value!r} is out of range; allowed: {kind} in {rng}")
    return value


def check_int_list(name: str, values: Any, lo: int = 0, min_len: int = 1) -> list[int]:
    """`values` must be a list of at least `min_len` distinct integers >= lo."""
    if (
        isinstance(values, (str, bytes))
        or not isinstance(values, Sequence)
        or len(values) < min_len
    ):
        raise ConfigError(
            f"{name}={values!r} must be a list of at least {min_len} integers >= {lo}"
        )
    for v in values:
        check_number(name, v, lo=lo, integer=True)
    if len(set(values)) != len(values):
        raise ConfigError(f"{name}={list(values)!r} must not repeat values")
    return list(values)


# ---------------------------------------------------------------- device
DEVICES = ("auto", "cpu", "cuda")


def check_device(name: str, value: Any) -> str:
    """`value` must be one of DEVICES; 'cuda' only where torch sees a GPU."""
    check_choice(name, value, DEVICES)
    require(
        value != "cuda" or torch.cuda.is_available(),
        f"{name}='cuda' but torch sees no GPU on this machine (torch.cuda.is_available() is "
        f"False); allowed here: 'auto' (the CPU when there is no GPU) or 'cpu'",
    )
    return value


def resolve_device(name: str) -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'; 'cuda' without a GPU is an error."""
    check_device("device", name)
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def set_device(name: str) -> str:
    """Train every unit of this process (and of the worker processes it starts) on `name`."""
    os.environ["BNPAPER_DEVICE"] = resolve_device(name)
    return os.environ["BNPAPER_DEVICE"]


def device() -> str:
    """The device units train on: the one `set_device` chose ($BNPAPER_DEVICE), else 'auto'."""
    return resolve_device(os.environ.get("BNPAPER_DEVICE") or "auto")
