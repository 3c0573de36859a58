"""Parameter validation, project paths and seeding.

Every bad parameter raises one `ConfigError` whose message names the key, the bad value and
what is allowed, before any expensive work starts.
"""
from __future__ import annotations

import ast
import os
import random
import types
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
BUDGETS = ("ci", "quick", "paper")


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
    """Where notebooks write `figures/` and `results/`: $BNPAPER_OUTPUT, else the repository root."""
    env = os.environ.get("BNPAPER_OUTPUT")
    return Path(env).resolve() if env else repo_root()


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
            f"{name}={list(values)!r} must hold at least {min_len} distinct values from {allowed}")
    return list(values)


def check_number(name: str, value: Any, lo: float | None = None, hi: float | None = None,
                 integer: bool = False, lo_open: bool = False, hi_open: bool = False) -> Any:
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
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) < min_len:
        raise ConfigError(f"{name}={values!r} must be a list of at least {min_len} integers >= {lo}")
    for v in values:
        check_number(name, v, lo=lo, integer=True)
    if len(set(values)) != len(values):
        raise ConfigError(f"{name}={list(values)!r} must not repeat values")
    return list(values)


# ---------------------------------------------------------------- notebook parameters
def notebook_source(notebook: str) -> Path:
    return repo_root() / "notebooks" / f"{notebook}.py"


def notebook_defaults(notebook: str) -> dict[str, Any]:
    """The literal defaults of a notebook's `parameters` cell, read from its py:percent source."""
    check_choice("notebook", notebook, NOTEBOOKS)
    path = notebook_source(notebook)
    if not path.exists():
        raise ConfigError(f"notebook={notebook!r} has no source at {path}")
    text = path.read_text()
    marker = 'tags=["parameters"]'
    start = text.find(marker)
    if start < 0:
        raise ConfigError(f"{path} has no cell tagged parameters")
    body = text[text.index("\n", start) + 1:]
    end = body.find("\n# %%")
    body = body if end < 0 else body[:end]
    out: dict[str, Any] = {}
    for node in ast.parse(body).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def check_params(namespace: dict[str, Any], notebook: str) -> dict[str, Any]:
    """Reject names injected into a notebook that its parameters cell does not define.

    Call it right after the parameters cell (papermill only warns about unknown keys).
    Returns the parameters as a dict.
    """
    known = notebook_defaults(notebook)
    unknown = sorted(
        k for k, v in namespace.items()
        if not k.startswith("_") and k not in known and k not in _IPYTHON_NAMES
        and not isinstance(v, (types.ModuleType, types.FunctionType, type)))
    if unknown:
        raise ConfigError(
            f"unknown parameter(s) {unknown} for notebook {notebook}; known: {sorted(known)}")
    return {k: namespace[k] for k in known if k in namespace}


def check_keys(notebook: str, params: dict[str, Any]) -> None:
    """Fail when `params` names keys the notebook does not have."""
    known = notebook_defaults(notebook)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown parameter(s) {unknown} for notebook {notebook}; known: {sorted(known)}")


def check_common(params: dict[str, Any]) -> dict[str, Any]:
    """Check the parameters the section notebooks share, those of them present in `params`
    (the dict `check_params` returns): dataset, budget, arch, norms (must hold "bn" and
    "none", the paper's comparison), ood_source, noise_frac in (0, 1), n_train, n_test,
    epochs, seeds, batch_size (<= n_train), lr and weight_decay. A notebook adds its own
    checks after this one."""
    from . import data, models  # here: both import this module

    p = params
    rules = {
        "dataset": lambda v: check_choice("dataset", v, data.DATASETS),
        "budget": lambda v: check_choice("budget", v, BUDGETS),
        "arch": lambda v: check_choice("arch", v, models.ARCHS),
        "norms": lambda v: check_choices("norms", v, models.NORMS, min_len=2),
        "ood_source": lambda v: check_choice("ood_source", v, data.OOD_SOURCES),
        "noise_frac": lambda v: check_number("noise_frac", v, 0.0, 1.0, lo_open=True, hi_open=True),
        "n_train": lambda v: check_number("n_train", v, 10, None, integer=True),
        "n_test": lambda v: check_number("n_test", v, 1, None, integer=True),
        "epochs": lambda v: check_number("epochs", v, 1, 10_000, integer=True),
        "seeds": lambda v: check_int_list("seeds", v, lo=0),
        "batch_size": lambda v: check_number("batch_size", v, 2, p.get("n_train"), integer=True),
        "lr": lambda v: check_number("lr", v, 0.0, 10.0, lo_open=True),
        "weight_decay": lambda v: check_number("weight_decay", v, 0.0, 1.0),
    }
    for key, rule in rules.items():
        if key in p:
            rule(p[key])
    if "norms" in p and ("bn" not in p["norms"] or "none" not in p["norms"]):
        raise ConfigError(f"norms={p['norms']!r} must include 'bn' and 'none' (the paper's comparison)")
    return p
