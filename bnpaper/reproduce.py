"""Run the notebooks headless with papermill for one dataset and budget.

Parameters come from the notebook's defaults, then `params/<dataset>.yaml`, then
`params/<budget>.yaml`, then the command line; each file may hold a section `all` (keys applied
to every notebook that has them) and one section per notebook (keys the notebook must have).
Unknown keys are an error here, before anything runs (papermill itself would only warn).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from .config import (BUDGETS, NOTEBOOKS, ConfigError, cache_root, check_choice, notebook_defaults,
                     output_root, repo_root)
from .data import DATASETS


def params_file(name: str) -> Path:
    return repo_root() / "params" / f"{name}.yaml"


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"parameter file {path} does not exist")
    doc = yaml.safe_load(path.read_text()) or {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} must hold a mapping of sections, got {type(doc).__name__}")
    for section, body in doc.items():
        if section != "all" and section not in NOTEBOOKS:
            raise ConfigError(f"{path}: unknown section {section!r}; allowed: "
                              f"['all', {', '.join(repr(n) for n in NOTEBOOKS)}]")
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: section {section!r} must be a mapping")
    return doc


def resolve_notebooks(only: Sequence[str] | None) -> list[str]:
    """Notebook names for `--only` values such as '01' or '03_lira'; all that exist if None."""
    existing = [n for n in NOTEBOOKS if (repo_root() / "notebooks" / f"{n}.ipynb").exists()]
    if not only:
        return existing
    out = []
    for o in only:
        match = [n for n in NOTEBOOKS if n == o or n.split("_")[0] == o]
        if not match:
            raise ConfigError(f"--only {o!r} names no notebook; allowed: "
                              f"{[n.split('_')[0] for n in NOTEBOOKS]} or full names")
        if match[0] not in existing:
            raise ConfigError(f"--only {o!r}: notebooks/{match[0]}.ipynb does not exist yet")
        out.append(match[0])
    return out


def notebook_params(notebook: str, dataset: str, budget: str,
                    overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parameters papermill injects into `notebook` for this dataset and budget."""
    check_choice("dataset", dataset, DATASETS)
    check_choice("budget", budget, BUDGETS)
    known = notebook_defaults(notebook)
    merged: dict[str, Any] = {}
    for name in (dataset, budget):
        path = params_file(name)
        doc = _read_yaml(path)
        shared = doc.get("all", {})
        merged.update({k: v for k, v in shared.items() if k in known})
        section = doc.get(notebook, {})
        unknown = sorted(set(section) - set(known))
        if unknown:
            raise ConfigError(f"{path}: unknown parameter(s) {unknown} for notebook {notebook}; "
                              f"known: {sorted(known)}")
        merged.update(section)
    for k, v in (overrides or {}).items():
        if k in ("dataset", "budget"):
            raise ConfigError(f"parameter {k!r} is set by --{k}, not by -p {k}={v}")
        if k not in known:
            raise ConfigError(f"unknown parameter {k!r} for notebook {notebook}; "
                              f"known: {sorted(known)}")
        merged[k] = v
    merged["dataset"], merged["budget"] = dataset, budget
    return merged


@dataclass(frozen=True)
class RunRecord:
    notebook: str
    output: Path
    seconds: float


def run(dataset: str, budget: str, only: Sequence[str] | None = None,
        overrides: dict[str, Any] | None = None, out_dir: str | Path | None = None,
        log=print) -> list[RunRecord]:
    """Execute the notebooks with papermill into `out_dir` (default `runs/<budget>/<dataset>`)."""
    import papermill as pm

    notebooks = resolve_notebooks(only)
    plan = {nb: notebook_params(nb, dataset, budget, overrides) for nb in notebooks}  # fail early
    out = Path(out_dir) if out_dir else repo_root() / "runs" / budget / dataset
    out.mkdir(parents=True, exist_ok=True)
    if budget != "quick" and "BNPAPER_OUTPUT" not in os.environ:
        # only the quick budget (the reference run) writes the repository's figures/ and results/
        os.environ["BNPAPER_OUTPUT"] = str(out.resolve())
        log(f"[bnpaper] budget {budget}: figures and results go to {out}")
    records = []
    cached = cache_entries()
    for nb, params in plan.items():
        src = repo_root() / "notebooks" / f"{nb}.ipynb"
        dst = out / f"{nb}.ipynb"
        log(f"[bnpaper] {nb}: dataset={dataset} budget={budget} -> {dst}")
        t0 = time.perf_counter()
        pm.execute_notebook(str(src), str(dst), parameters=params, kernel_name="python3",
                            cwd=str(out), progress_bar=False)
        dt = time.perf_counter() - t0
        log(f"[bnpaper] {nb}: done in {dt:.0f} s")
        write_run_time(nb, dataset, budget, dt, cached)
        records.append(RunRecord(nb, dst, dt))
    return records


def cache_entries() -> int:
    """How many finished units the run cache holds (0: the run starts from nothing)."""
    root = cache_root()
    return sum(1 for _ in root.glob("*/*.json")) if root.exists() else 0


def write_run_time(notebook: str, dataset: str, budget: str, seconds: float,
                   cache_entries_at_start: int) -> Path:
    """Record a notebook's wall time next to its results (the report shows it)."""
    import json

    from .store import atomic_write_bytes
    path = output_root() / "results" / notebook / dataset / "run_time.json"
    rec = {"notebook": notebook, "dataset": dataset, "budget": budget, "seconds": round(seconds, 1),
           "cpu_count": os.cpu_count(), "cache_entries_at_start": cache_entries_at_start}
    atomic_write_bytes(path, (json.dumps(rec, indent=1) + "\n").encode())
    return path
