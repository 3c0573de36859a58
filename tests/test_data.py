import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from bnpaper import data
from bnpaper.config import ConfigError


def _write_mnist_like(folder: Path, n_train=30, n_test=10, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {"train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
              "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8)}
    for stem, arr in arrays.items():
        data.write_idx(folder / f"{stem}.gz", arr)
    return arrays


def _trust_files(monkeypatch, name, folder):
    spec = data.DATASETS[name]
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    monkeypatch.setitem(data.DATASETS, name, data.DatasetSpec(
        **{**spec.__dict__, "md5": md5, "raw_sha256": {}, "system_dirs": ()}))


def test_idx_round_trip_gzipped_and_plain(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    data.write_idx(tmp_path / "a.gz", arr)
    data.write_idx(tmp_path / "b", arr, compress=False)
    assert np.array_equal(data.read_idx(tmp_path / "a.gz"), arr)
    assert np.array_equal(data.read_idx(tmp_path / "b"), arr)


def test_truncated_idx_is_a_clear_error(tmp_path):
    data.write_idx(tmp_path / "a", np.zeros((4, 5), np.uint8), compress=False)
    (tmp_path / "a").write_bytes((tmp_path / "a").read_bytes()[:-3])
    with pytest.raises(data.ChecksumError, match="truncated"):
        data.read_idx(tmp_path / "a")


def test_mnist_files_in_torchvision_layout_load_with_checksums(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "MNIST" / "raw"
    arrays = _write_mnist_like(folder)
    _trust_files(monkeypatch, "mnist", folder)
    ds = data.load_dataset("mnist", root=tmp_path / "data")
    assert ds.x_train.shape == (30, 1, 28, 28) and ds.x_train.dtype == torch.uint8
    assert np.array_equal(ds.x_train[:, 0].numpy(), arrays["train-images-idx3-ubyte"])
    assert np.array_equal(ds.y_test.numpy(), arrays["t10k-labels-idx1-ubyte"])


def test_corrupted_file_fails_checksum(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "FashionMNIST" / "raw"
    _write_mnist_like(folder)
    _trust_files(monkeypatch, "fashion_mnist", folder)
    data.write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.ones(10, np.uint8))  # changed content
    with pytest.raises(data.ChecksumError, match="checksum"):
        data.load_dataset("fashion_mnist", root=tmp_path / "data")


def test_cifar_pickled_batches_load(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "cifar-10-batches-py"
    rng = np.random.default_rng(1)
    parts = []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        x = rng.integers(0, 256, (4, 3, 32, 32), dtype=np.uint8)
        y = rng.integers(0, 10, 4)
        data.write_cifar_batch(folder / name, x, y)
        parts.append((x, y))
    _trust_files(monkeypatch, "cifar10", folder)
    ds = data.load_dataset("cifar10", root=tmp_path / "data")
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    assert np.array_equal(ds.x_train[:4].numpy(), parts[0][0])
    assert np.array_equal(ds.y_test.numpy(), parts[-1][1])


def test_cifar100_fine_labels_load(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "cifar-100-python"
    x = np.zeros((3, 3, 32, 32), np.uint8)
    data.write_cifar_batch(folder / "train", x, [5, 99, 0], fine=True)
    data.write_cifar_batch(folder / "test", x[:1], [42], fine=True)
    _trust_files(monkeypatch, "cifar100", folder)
    ds = data.load_dataset("cifar100", root=tmp_path / "data")
    assert ds.y_train.tolist() == [5, 99, 0] and ds.n_classes == 100


def test_missing_dataset_offline_is_one_clear_error(tmp_path):
    with pytest.raises(data.DatasetNotFoundError) as err:
        data.load_dataset("cifar10", root=tmp_path / "nothing")
    msg = str(err.value)
    assert "cifar10" in msg and str(tmp_path / "nothing") in msg and "download=True" in msg


def test_unknown_dataset_names_allowed_values():
    with pytest.raises(ConfigError, match=r"dataset='cifar11' is not allowed.*cifar10"):
        data.load_dataset("cifar11")


def test_flip_labels_never_keeps_true_class():
    y = torch.arange(1000) % 10
    y_new, mask = data.flip_labels(y, 0.3, 10, seed=4)
    assert int(mask.sum()) == 300
    assert torch.all(y_new[mask] != y[mask]) and torch.equal(y_new[~mask], y[~mask])


def test_flip_labels_target_classes_are_uniform():
    y = torch.zeros(90_000, dtype=torch.long)
    y_new, mask = data.flip_labels(y, 0.5, 10, seed=0)
    counts = torch.bincount(y_new[mask], minlength=10)[1:].float()
    assert counts.min() / counts.max() > 0.93  # 9 classes, 5000 each


def test_corruption_is_seeded():
    y = torch.arange(500) % 10
    a, ma = data.flip_labels(y, 0.1, 10, seed=3)
    b, mb = data.flip_labels(y, 0.1, 10, seed=3)
    c, mc = data.flip_labels(y, 0.1, 10, seed=4)
    assert torch.equal(a, b) and torch.equal(ma, mb) and not torch.equal(ma, mc)


def test_inject_ood_replaces_only_masked_images():
    x = torch.full((200, 1, 28, 28), 7, dtype=torch.uint8)
    y = torch.zeros(200, dtype=torch.long)
    x_new, y_new, mask = data.inject_ood(x, y, 0.1, 10, "noise", seed=0)
    assert int(mask.sum()) == 20
    assert torch.equal(x_new[~mask], x[~mask]) and torch.equal(y_new[~mask], y[~mask])
    assert all(not torch.equal(x_new[i], x[i]) for i in torch.nonzero(mask).flatten())
    assert x_new.dtype == torch.uint8 and x_new.shape == x.shape


def test_ood_digits_match_target_shape():
    imgs = data.ood_images("digits", 5, (3, 32, 32), seed=0)
    assert imgs.shape == (5, 3, 32, 32) and imgs.dtype == torch.uint8 and imgs.max() > 100


def test_make_split_keeps_true_labels_and_mask():
    ds = data.Dataset("toy", torch.zeros(100, 1, 28, 28, dtype=torch.uint8), torch.arange(100) % 10,
                      torch.zeros(10, 1, 28, 28, dtype=torch.uint8), torch.arange(10), 10,
                      (0.5,), (0.5,))
    sp = data.make_split(ds, 50, "flip", 0.2, seed=1)
    assert len(sp.x) == 50 and int(sp.mask.sum()) == 10
    assert torch.all(sp.y[sp.mask] != sp.y_true[sp.mask])
    assert sp.fingerprint() == data.make_split(ds, 50, "flip", 0.2, seed=1).fingerprint()


def test_bad_noise_frac_is_rejected():
    with pytest.raises(ConfigError, match=r"noise_frac=1.5"):
        data.flip_labels(torch.zeros(10, dtype=torch.long), 1.5, 10, seed=0)


def test_failed_download_becomes_a_clear_error(tmp_path, monkeypatch):
    import urllib.error

    import torchvision.datasets as tvd

    class Offline:
        def __init__(self, root, train=True, download=False):
            raise urllib.error.URLError("no route to host")
    monkeypatch.setattr(tvd, "CIFAR10", Offline)
    with pytest.raises(data.DatasetNotFoundError, match=r"dataset='cifar10': download into .* failed"):
        data.load_dataset("cifar10", root=tmp_path / "d", download=True)


def test_download_then_load_uses_the_torchvision_layout(tmp_path, monkeypatch):
    import torchvision.datasets as tvd

    class FakeMNIST:  # stands in for torchvision's downloader: writes the files it would fetch
        def __init__(self, root, train=True, download=False):
            _write_mnist_like(Path(root) / "MNIST" / "raw")
    monkeypatch.setattr(tvd, "MNIST", FakeMNIST)
    monkeypatch.setitem(data.DATASETS, "mnist", data.DatasetSpec(
        **{**data.DATASETS["mnist"].__dict__, "system_dirs": ()}))
    with pytest.raises(data.ChecksumError):  # the fake files do not match MNIST's md5s
        data.load_dataset("mnist", root=tmp_path / "d", download=True)
    assert (tmp_path / "d" / "MNIST" / "raw" / "train-images-idx3-ubyte.gz").exists()
