"""Persistence: a content-addressed cache of expensive results, atomic writes, result JSON.

A cache key is the sha256 of (kind, configuration, data fingerprint, package source hash):
changing any of them computes anew; a finished unit loads in milliseconds; a unit that was
killed mid-way leaves at most a `.partial` checkpoint, from which it resumes.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

import torch

from .config import cache_root, output_root

T = TypeVar("T")
CORE_MODULES = ("config", "data", "models", "train")


def source_hash(modules: tuple[str, ...] = CORE_MODULES) -> str:
    """sha256 over the source of the package modules a unit depends on (by default the core
    that trains a model; pass more, e.g. ("mia",), for units that also run their code)."""
    h = hashlib.sha256()
    for name in sorted(set(CORE_MODULES) | set(modules)):
        p = Path(__file__).parent / f"{name}.py"
        h.update(name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def cache_key(kind: str, config: dict, data: str = "", source: str | None = None,
              modules: tuple[str, ...] = ()) -> str:
    """The hex key of one unit of work (`modules`: extra package modules its result depends on)."""
    payload = json.dumps({"kind": kind, "config": _canonical(config), "data": data,
                          "source": source if source is not None else source_hash(modules)},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_torch_save(obj: Any, path: Path) -> None:
    import io
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


class Store:
    """A folder of cached units: `<root>/<kind>/<key>.pt` (+ `<key>.json` with the config)."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else cache_root()

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / f"{key}.pt"

    def has(self, kind: str, config: dict, data: str = "", modules: tuple[str, ...] = ()) -> bool:
        return self.path(kind, cache_key(kind, config, data, modules=modules)).exists()

    def cached(self, kind: str, config: dict, compute: Callable[..., T], data: str = "",
               resumable: bool = False, modules: tuple[str, ...] = ()) -> T:
        """Return the stored result of `compute()` for this key, computing and storing it first
        if needed. With `resumable`, `compute(checkpoint=path)` gets a path to keep partial state.
        `modules`: package modules beyond the training core whose code the result depends on."""
        key = cache_key(kind, config, data, modules=modules)
        path = self.path(kind, key)
        if path.exists():
            return torch.load(path, weights_only=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        result = compute(checkpoint=partial) if resumable else compute()
        atomic_torch_save(result, path)
        atomic_write_bytes(path.with_suffix(".json"), json.dumps(
            {"kind": kind, "config": _canonical(config), "data": data}, indent=1,
            default=str).encode())
        if partial.exists():
            partial.unlink()
        return result


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return _jsonable(obj.tolist())
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def results_path(notebook: str, dataset: str, name: str = "results") -> Path:
    return output_root() / "results" / notebook / dataset / f"{name}.json"


def save_results(notebook: str, dataset: str, results: dict, name: str = "results") -> Path:
    """Write a notebook's results as stable, sorted JSON (NaN/inf become null)."""
    path = results_path(notebook, dataset, name)
    text = json.dumps(_jsonable(results), indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(path, text.encode())
    return path


def load_results(notebook: str, dataset: str, name: str = "results") -> dict:
    return json.loads(results_path(notebook, dataset, name).read_text())
