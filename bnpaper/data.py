"""Datasets as in-memory uint8 tensors, label flipping, OOD injection and subsets.

Finding, reading and checking the files is `bnpaper.sources`' job; `bnpaper.datasets.DATASETS`
names every dataset.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .config import ConfigError, check_choice, check_number
from .datasets import DATASETS
from .sources import DatasetNotFoundError as DatasetNotFoundError, read_arrays


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


def load_dataset(
    name: str, root: str | Path | None = None, download: bool = False, verify: bool = True
) -> Dataset:
    """Load a whole dataset into memory from local files (downloading only if allowed); a
    missing, unreadable or altered file is one error saying which and how to fix it."""
    xtr, ytr, xte, yte = read_arrays(name, root, download, verify)
    spec = DATASETS[name]
    return Dataset(
        name,
        torch.from_numpy(xtr),
        torch.from_numpy(ytr),
        torch.from_numpy(xte),
        torch.from_numpy(yte),
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


# ---------------------------------------------------------------- validation held out of training
def hold_out(ds: Dataset, n_val: int, seed: int = 0) -> tuple[Dataset, torch.Tensor, torch.Tensor]:
    """Set `n_val` images of `ds`'s training set aside (seeded) as a validation set: returns the
    dataset without them (draw training subsets from it, e.g. with `make_split`) and the
    validation images (uint8) and labels. Validation and test sets never meet: the validation
    images come from the training set, and no training subset of the returned dataset holds one."""
    check_number("n_val", n_val, 1, len(ds.x_train) - 2, integer=True)
    order = torch.randperm(len(ds.x_train), generator=torch.Generator().manual_seed(seed))
    val, rest = order[:n_val], order[n_val:].sort().values
    kept = replace(ds, x_train=ds.x_train[rest], y_train=ds.y_train[rest])
    return kept, ds.x_train[val], ds.y_train[val]


def with_validation(split: Split, x_val: torch.Tensor, y_val: torch.Tensor) -> Split:
    """`split` with the validation set in place of its test set, so that a model trained on it
    records validation accuracy as `test_acc` (for choosing a setting without the test set)."""
    return replace(split, x_test=x_val, y_test=y_val, test_mask=None)
