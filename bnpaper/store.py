"""Persistence: a content-addressed cache of expensive units, atomic writes, result JSON.

A unit's key is the sha256 of (kind, configuration, data fingerprint, the code the unit runs, the
torch version, the device). The code is the source of the modules its computation imports: the
import closure, within the package, of the module that defines the unit's compute function
(`bnpaper.closure`, read from the code). An edit to any of them, or another torch, computes anew;
an edit elsewhere (plots, text, the runner) keeps every unit; a finished unit loads in
milliseconds. A unit is `<kind>/<key>.pt` plus its sidecar `<key>.json` (configuration, code
module, closure and hash, torch, device, date, the seconds it took), written sidecar first, so a
`.pt` never exists without its sidecar. One lock per unit (`<key>.lock`, flock) makes two runs
sharing a cache wait for each other instead of training the same unit twice; under that lock the
temp files a killed writer left behind are removed. A killed unit leaves at most a `.partial`
checkpoint, from which it resumes.
"""

from __future__ import annotations

import datetime
import fcntl
import functools
import hashlib
import json
import math
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, TypeVar

import torch

from . import closure
from .config import ConfigError, cache_root, output_root
from .config import device as _device

T = TypeVar("T")
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def cache_key(
    kind: str,
    config: dict,
    data: str,
    source: str,
    torch_version: str | None = None,
    device: str | None = None,
) -> str:
    """The hex key of one unit: kind, configuration, data fingerprint, the hash of the code it runs
    (`closure.code(...).hash`), torch, and the device it trains on (a GPU's numbers are not the
    CPU's)."""
    payload = json.dumps(
        {
            "kind": kind,
            "config": _canonical(config),
            "data": data,
            "source": source,
            "torch": torch.__version__ if torch_version is None else torch_version,
            "device": _device() if device is None else device,
        },
        sort_keys=True,
        default=str,
    )
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
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual mode
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


def code_of(compute: Callable) -> closure.Code:
    """The code a compute function runs: the closure of the package module that defines it.
    A function defined elsewhere (a notebook) is refused: its code is not part of the key, so its
    result could outlive it."""
    fn = compute
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None) or "?"
    if closure.module_name(module) not in closure.SOURCES:
        raise ConfigError(
            f"Store.cached: compute={getattr(fn, '__qualname__', fn)!r} is defined in "
            f"{module!r}, not in the bnpaper package; a cached unit's code must live in bnpaper/ "
            "(its source is part of the key)"
        )
    return closure.code(module)


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Store:
    """A folder of cached units: `<root>/<kind>/<key>.pt`, its sidecar `<key>.json`, its lock.
    `module` names the package module whose code (import closure) a unit runs."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else cache_root()

    def path(self, kind: str, config: dict, data: str, code: closure.Code) -> Path:
        return self.root / kind / f"{cache_key(kind, config, data, code.hash)}.pt"

    def has(self, kind: str, config: dict, data: str = "", *, module: str) -> bool:
        return self.path(kind, config, data, closure.code(module)).exists()

    def load(self, kind: str, config: dict, data: str = "", *, module: str) -> Any:
        return torch.load(self.path(kind, config, data, closure.code(module)), weights_only=False)

    def cached(
        self,
        kind: str,
        config: dict,
        compute: Callable[..., T],
        data: str = "",
        resumable: bool = False,
    ) -> T:
        """Return the stored result of `compute()` for this key, computing and storing it first
        if needed. With `resumable`, `compute(checkpoint=path)` gets a path to keep partial state.
        `compute` must be defined in the bnpaper package (`code_of`)."""
        code = code_of(compute)
        path = self.path(kind, config, data, code)
        if path.exists():
            return torch.load(path, weights_only=False)
        with _locked(path.with_suffix(".lock")):
            if path.exists():  # another run finished it while we waited
                return torch.load(path, weights_only=False)
            partial = path.with_suffix(".partial")
            t0 = time.perf_counter()
            result = compute(checkpoint=partial) if resumable else compute()
            self._write(path, result, kind, config, data, code, time.perf_counter() - t0)
            partial.unlink(missing_ok=True)
        return result

    def put(
        self,
        kind: str,
        config: dict,
        result: Any,
        data: str = "",
        *,
        module: str,
        seconds: float,
        pack: int = 1,
    ) -> None:
        """Store a `result` that `module`'s code computed elsewhere (a shadow pool's worker), one
        of `pack` units trained together in `seconds`: its sidecar records its share,
        `seconds / pack`, and for a pack the whole (`pack_seconds`, `pack_size`). A unit already
        stored stays as it is."""
        code = closure.code(module)
        path = self.path(kind, config, data, code)
        timing = {"pack_seconds": round(seconds, 2), "pack_size": pack} if pack > 1 else None
        with _locked(path.with_suffix(".lock")):
            if not path.exists():
                self._write(path, result, kind, config, data, code, seconds / pack, timing)

    def _write(
        self,
        path: Path,
        result: Any,
        kind: str,
        config: dict,
        data: str,
        code: closure.Code,
        seconds: float,
        timing: dict | None = None,
    ) -> None:
        """Sidecar first, then the result (under the unit's lock); a killed writer's temp files
        go first."""
        for orphan in path.parent.glob(f"{path.stem}.*tmp*"):
            orphan.unlink(missing_ok=True)
        side = {
            "kind": kind,
            "config": _canonical(config),
            "data": data,
            "code": code.as_dict(),
            "torch": torch.__version__,
            "device": _device(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(seconds, 2),
            **(timing or {}),
        }
        atomic_write_bytes(
            path.with_suffix(".json"), json.dumps(side, indent=1, default=str).encode()
        )
        atomic_torch_save(result, path)


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


def save_results(notebook: str, dataset: str, results: dict, name: str = "results") -> None:
    """Write a notebook's results as stable, sorted JSON (NaN/inf become null)."""
    text = json.dumps(_jsonable(results), indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(results_path(notebook, dataset, name), text.encode())
