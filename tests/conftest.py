"""Tests keep the repository clean: outputs and the cache go to temporary folders."""
import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("BNPAPER_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("BNPAPER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BNPAPER_DATA", str(tmp_path / "data"))
    yield
