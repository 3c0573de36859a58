"""Opening a notebook in JupyterLab and saving it changes nothing: both files of each jupytext
pair (notebooks/<name>.ipynb and notebooks/<name>.py) stay byte for byte as committed.

Saves go through jupytext's contents manager, as in JupyterLab, which writes both files of the
pair. Three ways, on a copy of notebooks/ (and jupytext.toml) in a temporary folder:
- the REST round trip the frontend's save makes (GET the model, PUT it back), no browser;
- a person's save in Chromium: open the .ipynb, wait for the kernel, Ctrl+S (the frontend then
  also writes what the kernel tells it: kernelspec, language_info);
- the same from the .py, which JupyterLab opens as a notebook (scripts/setup.sh sets jupytext's
  "Jupytext Notebook" as the default viewer of python files).
"""

import difflib
import shutil

import pytest

import browser_run as br
from bnpaper import config

ROOT = config.repo_root()
NAMES = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
browser = pytest.mark.skipif(
    br.playwright_missing() is not None, reason=str(br.playwright_missing())
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab over a copy of the notebooks (timestamps kept: jupytext compares them)."""
    tmp = tmp_path_factory.mktemp("lab-save")
    root = tmp / "repo"
    root.mkdir()
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    shutil.copy2(ROOT / "jupytext.toml", root / "jupytext.toml")
    env = {"BNPAPER_CACHE": str(tmp / "cache"), "BNPAPER_OUTPUT": str(tmp / "output")}
    with br.jupyterlab(root, tmp / "state", env) as server:
        yield server


@pytest.fixture(scope="module")
def chromium(lab):
    with br.chromium() as b:
        yield b


def _restore(lab, name):
    for ext in (".ipynb", ".py"):
        shutil.copy2(ROOT / "notebooks" / f"{name}{ext}", lab.root / "notebooks" / f"{name}{ext}")


def _changes(lab, name):
    """A unified diff per file of the pair that differs from the committed file."""
    out = []
    for ext in (".ipynb", ".py"):
        committed = (ROOT / "notebooks" / f"{name}{ext}").read_bytes()
        saved = (lab.root / "notebooks" / f"{name}{ext}").read_bytes()
        if saved != committed:
            diff = difflib.unified_diff(
                committed.decode().splitlines(),
                saved.decode().splitlines(),
                f"committed {name}{ext}",
                f"saved {name}{ext}",
                lineterm="",
                n=1,
            )
            out.append("\n".join(list(diff)[:60]))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_rest_save_round_trip_changes_nothing(lab, name):
    _restore(lab, name)
    path = f"notebooks/{name}.ipynb"
    model = lab.api("GET", f"/api/contents/{path}?type=notebook&content=1")
    lab.api(
        "PUT",
        f"/api/contents/{path}",
        {"type": "notebook", "format": "json", "content": model["content"]},
    )
    changes = _changes(lab, name)
    assert not changes, "saving through the contents API changed:\n" + "\n\n".join(changes)


@browser
@pytest.mark.browser
@pytest.mark.parametrize("ext", [".ipynb", ".py"])
@pytest.mark.parametrize("name", NAMES)
def test_open_and_save_in_jupyterlab_changes_nothing(lab, chromium, name, ext):
    _restore(lab, name)
    path = f"notebooks/{name}{ext}"
    if ext == ".py":
        viewers = lab.api("GET", "/lab/api/settings/@jupyterlab/docmanager-extension:plugin")
        default = viewers["schema"]["properties"]["defaultViewers"].get("default", {})
        if default.get("python") != "Jupytext Notebook":
            pytest.skip("python files do not open as notebooks here (scripts/setup.sh sets that)")
    try:
        with br.new_page(chromium) as page:
            br.open_notebook(page, lab, path)
            br.save(page, lab, path)
    finally:
        lab.shutdown_kernels(path)
    changes = _changes(lab, name)
    assert not changes, f"opening {path} and saving it (Ctrl+S) changed:\n" + "\n\n".join(changes)
