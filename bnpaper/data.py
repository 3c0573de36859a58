"""Datasets as in-memory uint8 tensors, label flipping, OOD injection and subsets.

Files are looked for locally first (the data folder, then system dataset folders such as
Debian's `/usr/share/datasets/fashion-mnist`), in torchvision's on-disk formats (idx files for
MNIST-like sets, pickled batches for CIFAR); they are downloaded through torchvision only when
`download=True`. Checksums are verified against torchvision's archive md5s (or, for files that
were re-compressed by a distribution, the sha256 of their decompressed content).
"""
from __future__ import annotations

import gzip
import hashlib
import pickle
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .config import ConfigError, check_choice, check_number, data_root


class DatasetNotFoundError(ConfigError):
    """A dataset is not on this machine and may not be downloaded."""


class ChecksumError(ConfigError):
    """A dataset file does not match its known checksum."""


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    kind: str                      # "idx" or "cifar"
    shape: tuple[int, int, int]    # (C, H, W)
    n_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    folder: str                    # torchvision's folder below the data root
    files: dict[str, str]          # role -> file name
    md5: dict[str, str]            # file name -> md5 of the file as torchvision publishes it
    raw_sha256: dict[str, str] = field(default_factory=dict)  # file -> sha256 of decompressed bytes
    system_dirs: tuple[str, ...] = ()
    hint: str = ""


_IDX_FILES = {"train_images": "train-images-idx3-ubyte", "train_labels": "train-labels-idx1-ubyte",
              "test_images": "t10k-images-idx3-ubyte", "test_labels": "t10k-labels-idx1-ubyte"}

DATASETS: dict[str, DatasetSpec] = {
    "mnist": DatasetSpec(
        "mnist", "idx", (1, 28, 28), 10, (0.1307,), (0.3081,), "MNIST/raw", _IDX_FILES,
        {"train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
         "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
         "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
         "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c"},
        system_dirs=("/usr/share/datasets/mnist",),
        hint="run with download=True on a machine with internet, or copy the four idx .gz files"),
    "fashion_mnist": DatasetSpec(
        "fashion_mnist", "idx", (1, 28, 28), 10, (0.2860,), (0.3530,), "FashionMNIST/raw",
        _IDX_FILES,
        {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
         "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
         "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
         "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"},
        raw_sha256={  # Debian's dataset-fashion-mnist re-compresses the upstream files
            "train-images-idx3-ubyte.gz":
                "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
            "train-labels-idx1-ubyte.gz":
                "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
            "t10k-images-idx3-ubyte.gz":
                "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
            "t10k-labels-idx1-ubyte.gz":
                "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"},
        system_dirs=("/usr/share/datasets/fashion-mnist",),
        hint="`apt-get install dataset-fashion-mnist` (Debian/Ubuntu), or download=True"),
    "cifar10": DatasetSpec(
        "cifar10", "cifar", (3, 32, 32), 10, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616),
        "cifar-10-batches-py",
        {"train": "data_batch_1,data_batch_2,data_batch_3,data_batch_4,data_batch_5",
         "test": "test_batch"},
        {"data_batch_1": "c99cafc152244af753f735de768cd75f",
         "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
         "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
         "data_batch_4": "634d18415352ddfa80567beed471001a",
         "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
         "test_batch": "40351d587109b95175f43aff81a1287e"},
        hint="run with download=True where the internet is reachable, or extract "
             "cifar-10-python.tar.gz there"),
    "cifar100": DatasetSpec(
        "cifar100", "cifar", (3, 32, 32), 100, (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762),
        "cifar-100-python", {"train": "train", "test": "test"},
        {"train": "16019d7e3df5f24257cddd939b257f8d", "test": "f0ef6b0ae62326f3e7ffdfab6717acfc"},
        hint="run with download=True where the internet is reachable, or extract "
             "cifar-100-python.tar.gz there"),
}

_TORCHVISION = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST", "cifar10": "CIFAR10",
                "cifar100": "CIFAR100"}


@dataclass(frozen=True)
class Dataset:
    """A whole dataset in memory. Images uint8 (N, C, H, W); labels int64 (N,)."""
    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]


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
        raise ChecksumError(f"{path} is not an idx file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ChecksumError(f"{path} is truncated: header says {dims}, found {data.size} bytes")
    return data.reshape(dims)


def write_idx(path: Path, array: np.ndarray, compress: bool = True) -> None:
    """Write a uint8 array as an idx file (used by tests and by users converting data)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape)
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


def write_cifar_batch(path: Path, images: np.ndarray, labels: np.ndarray, fine: bool = False) -> None:
    """Write a pickled batch in CIFAR's format (images uint8 (N, 3, 32, 32))."""
    key = "fine_labels" if fine else "labels"
    entry = {"data": np.asarray(images, dtype=np.uint8).reshape(len(images), -1),
             key: [int(v) for v in labels]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(entry, fh)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def verify_file(spec: DatasetSpec, path: Path, published: str) -> None:
    """Check `path` against the md5 torchvision publishes for `published`, or a known raw sha256."""
    if spec.md5.get(published) and _md5(path) == spec.md5[published]:
        return
    raw_digest = spec.raw_sha256.get(published)
    if raw_digest and hashlib.sha256(_read_bytes(path)).hexdigest() == raw_digest:
        return
    if path.suffix != ".gz" and spec.kind == "idx" and not raw_digest:
        warnings.warn(f"{path}: no checksum known for the decompressed file; not verified")
        return
    raise ChecksumError(
        f"{path} does not match its checksum for {spec.name}; delete it and fetch it again")


# ---------------------------------------------------------------- lookup and loading
def search_dirs(spec: DatasetSpec, root: Path | None = None) -> list[Path]:
    """The folders looked in for `spec`'s files, in order."""
    root = Path(root) if root is not None else data_root()
    dirs = [root / spec.folder, root / spec.name]
    return dirs + [Path(d) for d in spec.system_dirs]


def _find_idx(spec: DatasetSpec, d: Path) -> dict[str, tuple[Path, str]] | None:
    found = {}
    for role, stem in spec.files.items():
        for cand in (d / f"{stem}.gz", d / stem):
            if cand.is_file():
                found[role] = (cand, f"{stem}.gz")
                break
        else:
            return None
    return found


def _find_cifar(spec: DatasetSpec, d: Path) -> dict[str, list[Path]] | None:
    found = {}
    for role, names in spec.files.items():
        paths = [d / n for n in names.split(",")]
        if not all(p.is_file() for p in paths):
            return None
        found[role] = paths
    return found


def _download(spec: DatasetSpec, root: Path) -> None:
    import torchvision.datasets as tvd
    cls = getattr(tvd, _TORCHVISION[spec.name])
    try:
        cls(str(root), train=True, download=True)
        cls(str(root), train=False, download=True)
    except Exception as exc:  # urllib errors, HTTP errors, checksum failures
        raise DatasetNotFoundError(
            f"dataset={spec.name!r}: download into {root} failed ({type(exc).__name__}: {exc}); "
            f"{spec.hint}") from None


def locate(name: str, root: str | Path | None = None) -> Path:
    """The folder that holds dataset `name`'s files, or a DatasetNotFoundError saying where it
    looked and how to get them (cheap: reads no data)."""
    check_choice("dataset", name, DATASETS)
    spec = DATASETS[name]
    root = Path(root) if root is not None else data_root()
    finder = _find_idx if spec.kind == "idx" else _find_cifar
    for d in search_dirs(spec, root):
        if finder(spec, d):
            return d
    looked = ", ".join(str(d) for d in search_dirs(spec, root))
    raise DatasetNotFoundError(
        f"dataset={name!r} was not found (looked in {looked}); {spec.hint}; "
        f"or set BNPAPER_DATA to a folder that holds it")


def load_dataset(name: str, root: str | Path | None = None, download: bool = False,
                 verify: bool = True) -> Dataset:
    """Load a whole dataset into memory from local files (downloading only if allowed)."""
    check_choice("dataset", name, DATASETS)
    spec = DATASETS[name]
    root = Path(root) if root is not None else data_root()
    finder = _find_idx if spec.kind == "idx" else _find_cifar
    files = None
    try:
        files = finder(spec, locate(name, root))
    except DatasetNotFoundError:
        if not download:
            raise
        _download(spec, root)
        files = finder(spec, root / spec.folder)
        if not files:
            raise DatasetNotFoundError(f"dataset={name!r}: download finished but files are missing")
    if spec.kind == "idx":
        if verify:
            for path, published in files.values():
                verify_file(spec, path, published)
        arr = {role: read_idx(path) for role, (path, _) in files.items()}
        xtr, ytr = arr["train_images"][:, None], arr["train_labels"].astype(np.int64)
        xte, yte = arr["test_images"][:, None], arr["test_labels"].astype(np.int64)
    else:
        if verify:
            for paths in files.values():
                for p in paths:
                    verify_file(spec, p, p.name)
        parts = {role: [read_cifar_batch(p) for p in paths] for role, paths in files.items()}
        xtr = np.concatenate([a for a, _ in parts["train"]])
        ytr = np.concatenate([b for _, b in parts["train"]])
        xte = np.concatenate([a for a, _ in parts["test"]])
        yte = np.concatenate([b for _, b in parts["test"]])
    if len(xtr) != len(ytr) or len(xte) != len(yte):
        raise ChecksumError(f"dataset={name!r}: image and label counts differ in {root}")
    return Dataset(name, torch.from_numpy(np.array(xtr)), torch.from_numpy(ytr),
                   torch.from_numpy(np.array(xte)), torch.from_numpy(yte),
                   spec.n_classes, spec.mean, spec.std)


def normalize(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...],
              device: str | torch.device = "cpu") -> torch.Tensor:
    """uint8 (N, C, H, W) -> float32 standardized per channel."""
    m = torch.tensor(mean, device=device).view(1, -1, 1, 1)
    s = torch.tensor(std, device=device).view(1, -1, 1, 1)
    return (x.to(device=device, dtype=torch.float32) / 255.0 - m) / s


def fingerprint(*tensors: torch.Tensor) -> str:
    """sha256 over the bytes, dtypes and shapes of tensors (the data part of a cache key)."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------- corruption
def _pick(n: int, frac: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    k = int(round(frac * n))
    mask = torch.zeros(n, dtype=torch.bool)
    mask[torch.randperm(n, generator=g)[:k]] = True
    return mask


def flip_labels(y: torch.Tensor, frac: float, n_classes: int, seed: int
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Flip a `frac` share of labels, each to a different class chosen uniformly.

    Returns (new labels, boolean mask of flipped indices).
    """
    check_number("noise_frac", frac, 0.0, 1.0, hi_open=True)
    mask = _pick(len(y), frac, seed)
    g = torch.Generator().manual_seed(seed + 1)
    shift = torch.randint(1, n_classes, (int(mask.sum()),), generator=g)
    y_new = y.clone()
    y_new[mask] = (y[mask] + shift) % n_classes
    return y_new, mask


def structured_noise(n: int, shape: tuple[int, int, int], seed: int) -> torch.Tensor:
    """Smooth random blobs (low-frequency noise upsampled), uint8 (n, C, H, W)."""
    g = torch.Generator().manual_seed(seed)
    c, h, w = shape
    coarse = torch.rand(n, c, max(2, h // 7), max(2, w // 7), generator=g)
    img = F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=False)
    img = (img - img.amin((1, 2, 3), keepdim=True)) / (
        img.amax((1, 2, 3), keepdim=True) - img.amin((1, 2, 3), keepdim=True) + 1e-8)
    return (img * 255).round().clamp(0, 255).to(torch.uint8)


def sklearn_digits() -> torch.Tensor:
    """scikit-learn's offline 8x8 digits (1,797 images) as uint8 (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits
    x = load_digits().images  # values 0..16
    return torch.from_numpy((x * (255.0 / 16.0)).round().astype(np.uint8))[:, None]


OOD_SOURCES = ("noise", "digits", *DATASETS)


def ood_images(source: str, n: int, shape: tuple[int, int, int], seed: int) -> torch.Tensor:
    """`n` out-of-distribution uint8 images of `shape` from `source` (see OOD_SOURCES)."""
    check_choice("ood_source", source, OOD_SOURCES)
    if source == "noise":
        return structured_noise(n, shape, seed)
    pool = sklearn_digits() if source == "digits" else load_dataset(source).x_train
    g = torch.Generator().manual_seed(seed)
    pick = pool[torch.randint(len(pool), (n,), generator=g)].float()
    c, h, w = shape
    if pick.shape[1] != c:
        pick = pick.mean(1, keepdim=True) if c == 1 else pick.expand(-1, c, -1, -1)
    if pick.shape[-2:] != (h, w):
        pick = F.interpolate(pick, size=(h, w), mode="bilinear", align_corners=False)
    return pick.round().clamp(0, 255).to(torch.uint8)


def inject_ood(x: torch.Tensor, y: torch.Tensor, frac: float, n_classes: int, source: str,
               seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Replace a `frac` share of samples by OOD images with uniformly random labels.

    Returns (new images, new labels, boolean mask of injected indices).
    """
    check_number("noise_frac", frac, 0.0, 1.0, hi_open=True)
    mask = _pick(len(y), frac, seed)
    k = int(mask.sum())
    x_new, y_new = x.clone(), y.clone()
    x_new[mask] = ood_images(source, k, tuple(x.shape[1:]), seed + 2)
    y_new[mask] = torch.randint(n_classes, (k,), generator=torch.Generator().manual_seed(seed + 3))
    return x_new, y_new, mask


@dataclass(frozen=True)
class Split:
    """A training subset with its corruption. `y` are the labels trained on, `y_true` the
    original ones (OOD samples keep the label of the image they replaced), `mask` marks
    corrupted samples."""
    x: torch.Tensor
    y: torch.Tensor
    y_true: torch.Tensor
    mask: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    def fingerprint(self) -> str:
        return fingerprint(self.x, self.y, self.mask, self.x_test, self.y_test)


CORRUPTIONS = ("flip", "ood", "none")


def make_split(ds: Dataset, n_train: int, corruption: str, noise_frac: float, seed: int,
               ood_source: str = "noise", n_test: int | None = None) -> Split:
    """Draw `n_train` training samples (seeded) and corrupt a `noise_frac` share of them."""
    check_choice("corruption", corruption, CORRUPTIONS)
    check_number("n_train", n_train, 2, len(ds.x_train), integer=True)
    check_number("noise_frac", noise_frac, 0.0, 1.0, hi_open=True)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(ds.x_train), generator=g)[:n_train]
    x, y = ds.x_train[idx], ds.y_train[idx]
    if corruption == "flip":
        y_new, mask = flip_labels(y, noise_frac, ds.n_classes, seed)
        x_new = x
    elif corruption == "ood":
        x_new, y_new, mask = inject_ood(x, y, noise_frac, ds.n_classes, ood_source, seed)
    else:
        x_new, y_new, mask = x, y, torch.zeros(len(y), dtype=torch.bool)
    n_test = len(ds.x_test) if n_test is None else min(n_test, len(ds.x_test))
    return Split(x_new, y_new, y, mask, ds.x_test[:n_test], ds.y_test[:n_test], ds.n_classes,
                 ds.mean, ds.std)
