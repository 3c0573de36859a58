"""Tests keep the repository clean: outputs and the cache go to temporary folders."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("BNPAPER_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("BNPAPER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BNPAPER_DATA", str(tmp_path / "data"))
    yield


@pytest.fixture
def tiny_split():
    """128 images of 4 learnable classes, 10% flipped labels."""
    import torch

    from bnpaper import data

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (128,), generator=g)
    x = (torch.rand(128, 1, 28, 28, generator=g) * 60).to(torch.uint8)
    x[torch.arange(128), 0, 4 + 5 * y, 4:24] = 255
    y_new, mask = data.flip_labels(y, 0.1, 4, 0)
    return data.Split(x, y_new, y, mask, x[:32], y[:32], 4, (0.2,), (0.3,))
