"""Persistence: a content-addressed cache of expensive units, atomic writes, result JSON.

A unit's key is the sha256 of (kind, configuration, data fingerprint, the source of the whole
`bnpaper` package, the torch version): a code change anywhere in the package, or another torch,
computes anew; a finished unit loads in milliseconds. A unit is `<kind>/<key>.pt` plus its sidecar
`<key>.json` (configuration, source hash, torch version, date, seconds), written sidecar first, so
a `.pt` never exists without its sidecar. One lock per unit (`<key>.lock`, flock) makes two runs
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

from .config import ConfigError, cache_root, output_root
from .config import device as _device

T = TypeVar("T")
_UMASK = os.umask(0o022)
os.umask(_UMASK)
PACKAGE = Path(__file__).resolve().parent


def source_hash(package: Path = PACKAGE) -> str:
    """sha256 over every `.py` file of the package (names and contents)."""
    h = hashlib.sha256()
    for p in sorted(Path(package).glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# The code this process runs: the package imports all of its modules at import time, so the hash
# taken now describes the code in memory (an edit after import does not pass for new code).
SOURCE_HASH = source_hash()


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def cache_key(
    kind: str,
    config: dict,
    data: str = "",
    source: str | None = None,
    torch_version: str | None = None,
    device: str | None = None,
) -> str:
    """The hex key of one unit: kind, configuration, data fingerprint, package source, torch,
    and the device it trains on (a GPU's numbers are not the CPU's)."""
    payload = json.dumps(
        {
            "kind": kind,
            "config": _canonical(config),
            "data": data,
            "source": SOURCE_HASH if source is None else source,
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


def _defined_in_package(fn: Callable) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None) or ""
    return module == "bnpaper" or module.startswith("bnpaper.")


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
    """A folder of cached units: `<root>/<kind>/<key>.pt`, its sidecar `<key>.json`, its lock."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else cache_root()

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / f"{key}.pt"

    def has(self, kind: str, config: dict, data: str = "") -> bool:
        return self.path(kind, cache_key(kind, config, data)).exists()

    def load(self, kind: str, config: dict, data: str = "") -> Any:
        return torch.load(self.path(kind, cache_key(kind, config, data)), weights_only=False)

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
        `compute` must be defined in the bnpaper package: code in a notebook is not part of the
        key, so its result could outlive it."""
        if not _defined_in_package(compute):
            raise ConfigError(
                f"Store.cached({kind!r}): compute={getattr(compute, '__qualname__', compute)!r} is "
                f"defined in {getattr(compute, '__module__', '?')!r}, not in the bnpaper package; "
                "a cached unit's code must live in bnpaper/ (its source is part of the key)"
            )
        key = cache_key(kind, config, data)
        path = self.path(kind, key)
        if path.exists():
            return torch.load(path, weights_only=False)
        with _locked(path.with_suffix(".lock")):
            if path.exists():  # another run finished it while we waited
                return torch.load(path, weights_only=False)
            for orphan in path.parent.glob(f"{key}.*tmp*"):  # left by a killed writer
                orphan.unlink(missing_ok=True)
            partial = path.with_suffix(".partial")
            t0 = time.perf_counter()
            result = compute(checkpoint=partial) if resumable else compute()
            atomic_write_bytes(
                path.with_suffix(".json"),
                json.dumps(
                    {
                        "kind": kind,
                        "config": _canonical(config),
                        "data": data,
                        "source_hash": SOURCE_HASH,
                        "torch": torch.__version__,
                        "device": _device(),
                        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                            timespec="seconds"
                        ),
                        "seconds": round(time.perf_counter() - t0, 2),
                    },
                    indent=1,
                    default=str,
                ).encode(),
            )
            atomic_torch_save(result, path)
            partial.unlink(missing_ok=True)
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


def save_results(notebook: str, dataset: str, results: dict, name: str = "results") -> None:
    """Write a notebook's results as stable, sorted JSON (NaN/inf become null)."""
    text = json.dumps(_jsonable(results), indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(results_path(notebook, dataset, name), text.encode())


def load_results(notebook: str, dataset: str, name: str = "results") -> dict:
    return json.loads(results_path(notebook, dataset, name).read_text())
