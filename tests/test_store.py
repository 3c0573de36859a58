"""The run cache: keys that follow the code a unit runs, sidecars, locks, no orphans,
package-only code."""

import functools
import json
import multiprocessing
import os
import shutil
import time

import pytest
import torch

from bnpaper import closure, store, units
from bnpaper.config import ConfigError

MODULE = "bnpaper.store"  # the module the test functions below pass for (its code keys them)
UNIT_MODULES = ("units", "shadow")  # every module that defines a cached unit's computation
PROSE_AND_PLOTS = (
    "plots",
    "plot_memorization",
    "plot_gradients",
    "plot_lira",
    "plot_theory",
    "plot_mitigation",
    "text",
    "report",
    "notebook",
    "claims",
    "reproduce",
    "follow",
)


def _value(x=1):
    return {"w": torch.tensor([float(x)])}


def _in_package(fn):
    """A test function that passes for package code (Store.cached refuses notebook code)."""
    fn.__module__ = MODULE
    return fn


def test_cached_computes_once_and_reloads(tmp_path):
    s = store.Store(tmp_path)
    calls = []

    @_in_package
    def compute():
        calls.append(1)
        return _value()

    a = s.cached("unit", {"a": 1}, compute, data="d0")
    b = s.cached("unit", {"a": 1}, compute, data="d0")
    assert len(calls) == 1 and torch.equal(a["w"], b["w"])
    s.cached("unit", {"a": 2}, compute, data="d0")
    s.cached("unit", {"a": 1}, compute, data="d1")
    assert len(calls) == 3


def test_key_is_independent_of_dict_order_and_depends_on_source_and_torch():
    k1 = store.cache_key("k", {"a": 1, "b": [1, 2]}, "x", source="s")
    k2 = store.cache_key("k", {"b": [1, 2], "a": 1}, "x", source="s")
    assert k1 == k2 and k1 != store.cache_key("k", {"a": 1, "b": [1, 2]}, "x", source="t")
    assert k1 != store.cache_key("k", {"a": 1, "b": [1, 2]}, "x", source="s", torch_version="0.0")


def _edited(module: str) -> dict[str, bytes]:
    """The package's sources with one line added to `module`."""
    sources = dict(closure.SOURCES)
    sources[module] += b"\n# lr = lr * 0\n"
    return sources


@pytest.mark.parametrize("unit", UNIT_MODULES)
@pytest.mark.parametrize("module", [m for m in PROSE_AND_PLOTS if m in closure.SOURCES])
def test_editing_plots_or_text_keeps_every_units_key(unit, module):
    """A legend label or a sentence changes nothing a unit runs: no unit is retrained."""
    assert closure.code(unit, _edited(module)).hash == closure.code(unit).hash


@pytest.mark.parametrize("unit", UNIT_MODULES)
def test_editing_any_module_a_unit_runs_changes_its_key(unit):
    """The repro: `lr * 0` in fit_packed on a warm cache must not serve the old shadow models;
    the same for every module in the unit's closure."""
    names = closure.closure(unit)
    assert {"packed", "train", "models", "store", "progress"} <= set(names)
    for module in names:
        assert closure.code(unit, _edited(module)).hash != closure.code(unit).hash, module


def test_the_closure_of_a_trained_model_holds_train_and_models_and_no_plot_or_prose():
    """`units._fit` runs train and models; nothing it imports imports a plot or prose module."""
    names = set(closure.closure(units._fit.__module__))
    assert {"train", "models", "mitigation", "data"} <= names
    assert not names & set(PROSE_AND_PLOTS) and "__init__" not in names


def test_the_closure_is_read_from_a_copy_of_the_package_on_disk(tmp_path):
    """From files: editing plots.py in a copy keeps the key, editing packed.py changes it."""
    copy = tmp_path / "bnpaper"
    shutil.copytree(closure.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    unit = {"train": {"arch": "lenet"}, "trainer": "packed", "keep": "abc"}

    def key() -> str:
        return store.cache_key(
            "shadow", unit, "fp", closure.code("shadow", closure.read_sources(copy)).hash
        )

    before = key()
    assert before == store.cache_key("shadow", unit, "fp", closure.code("shadow").hash)
    with open(copy / "plots.py", "a") as fh:
        fh.write("\nLEGEND = 'renamed'\n")
    assert key() == before
    with open(copy / "packed.py", "a") as fh:
        fh.write("\n# lr = lr * 0\n")
    assert key() != before


def test_imports_are_found_anywhere_in_the_code_and_only_package_modules_count():
    src = b"""
import os
import bnpaper.train
from . import shadow, ConfigError
from .models import build_model
from bnpaper.data import Split
from torch import nn


def later():
    from .packed import fit_packed
    import bnpaper
"""
    modules = {"train", "shadow", "models", "data", "packed", "plots"}
    assert closure.direct_imports(src, modules) == {"train", "shadow", "models", "data", "packed"}


def test_caching_a_function_defined_in_a_notebook_is_refused(tmp_path):
    def compute():  # this test module is not bnpaper: like a function in a notebook
        return 1

    with pytest.raises(ConfigError, match=r"defined in 'test_store', not in the bnpaper package"):
        store.Store(tmp_path).cached("unit", {}, compute)
    with pytest.raises(ConfigError, match=r"not in the bnpaper package"):
        store.Store(tmp_path).cached("unit", {}, functools.partial(compute))
    assert not list(tmp_path.rglob("*.pt"))


def test_sidecar_records_the_code_torch_version_date_and_seconds(tmp_path):
    s = store.Store(tmp_path)

    @_in_package
    def compute():
        time.sleep(0.2)
        return _value()

    s.cached("unit", {"a": 1}, compute)
    (side,) = tmp_path.glob("unit/*.json")
    meta = json.loads(side.read_text())
    code = closure.code(MODULE)
    assert meta["code"] == {
        "module": "store",
        "closure": ["closure", "config", "store"],
        "hash": code.hash,
    }
    assert meta["torch"] == torch.__version__ and meta["seconds"] >= 0.2
    assert meta["date"][:2] == "20" and meta["config"] == {"a": 1}
    assert side.name == store.cache_key("unit", {"a": 1}, "", code.hash) + ".json"
    assert side.with_suffix(".pt").exists()


def test_a_unit_of_a_pack_records_its_share_of_the_packs_time(tmp_path):
    s = store.Store(tmp_path)
    for i in range(4):
        s.put("unit", {"member": i}, _value(i), module=MODULE, seconds=8.0, pack=4)
    metas = [json.loads(p.read_text()) for p in tmp_path.glob("unit/*.json")]
    assert len(metas) == 4
    assert all((m["seconds"], m["pack_seconds"], m["pack_size"]) == (2.0, 8.0, 4) for m in metas)
    s.put("unit", {"member": 9}, _value(), module=MODULE, seconds=3.0)
    alone = json.loads(
        s.path("unit", {"member": 9}, "", closure.code(MODULE)).with_suffix(".json").read_text()
    )
    assert alone["seconds"] == 3.0 and "pack_seconds" not in alone
    assert float(s.load("unit", {"member": 2}, module=MODULE)["w"]) == 2.0


def test_a_killed_write_leaves_no_unit_and_its_temp_files_go_on_the_next_run(tmp_path, monkeypatch):
    s = store.Store(tmp_path)
    key = store.cache_key("unit", {"a": 1}, "", closure.code(MODULE).hash)

    def killed(obj, path):  # SIGKILL between the sidecar and the result
        (path.parent / f"{path.name}.x1y2.tmp").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "atomic_torch_save", killed)
    with pytest.raises(KeyboardInterrupt):
        s.cached("unit", {"a": 1}, _in_package(lambda: _value()))
    assert not s.has("unit", {"a": 1}, module=MODULE) and list(tmp_path.rglob("*.tmp"))
    (tmp_path / "unit" / f"{key}.partial.tmp4242").write_bytes(b"old checkpoint write")
    monkeypatch.undo()
    s.cached("unit", {"a": 1}, _in_package(lambda: _value()))
    assert s.has("unit", {"a": 1}, module=MODULE) and not list(tmp_path.rglob("*tmp*"))
    assert (tmp_path / "unit" / f"{key}.json").exists()


def test_a_failed_compute_leaves_no_result(tmp_path):
    s = store.Store(tmp_path)

    @_in_package
    def boom():
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        s.cached("unit", {"a": 1}, boom)
    assert not s.has("unit", {"a": 1}, module=MODULE) and not list(tmp_path.rglob("*.tmp"))


def test_resumable_compute_gets_a_partial_path_removed_on_success(tmp_path):
    s = store.Store(tmp_path)
    seen = {}

    @_in_package
    def compute(checkpoint):
        seen["p"] = checkpoint
        checkpoint.write_text("partial")
        return 5

    assert s.cached("unit", {}, compute, resumable=True) == 5
    assert seen["p"].suffix == ".partial" and not seen["p"].exists()


def _slow_unit(root, log):
    @_in_package
    def compute():
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        return _value(7)

    return float(store.Store(root).cached("unit", {"shared": 1}, compute)["w"])


def test_two_runs_sharing_a_cache_never_train_the_same_unit_at_once(tmp_path):
    log = tmp_path / "trained.log"
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        got = pool.starmap(_slow_unit, [(tmp_path / "c", log), (tmp_path / "c", log)])
    assert got == [7.0, 7.0] and len(log.read_text().split()) == 1


def test_units_build_their_keys_in_the_package(tmp_path, tiny_split):
    """units.trained: the same (split, cfg) is one unit; a mitigation is another."""
    from bnpaper.mitigation import MitigationConfig
    from bnpaper.train import TrainConfig

    cfg = TrainConfig(epochs=1, batch_size=16)
    s = store.Store(tmp_path)
    a = units.trained(tiny_split, cfg, store=s)
    b = units.trained(tiny_split, cfg, store=s)
    assert (
        len(list(tmp_path.glob("train/*.pt"))) == 1
        and a.history["test_acc"] == b.history["test_acc"]
    )
    units.trained(tiny_split, cfg, MitigationConfig("penalty", 0.01, 1.0), store=s)
    assert len(list(tmp_path.glob("train/*.pt"))) == 2


def test_save_results_writes_stable_json_with_nan_as_null(tmp_path, monkeypatch):
    monkeypatch.setenv("BNPAPER_OUTPUT", str(tmp_path))
    store.save_results("01_forced_memorization", "toy", {"b": float("nan"), "a": torch.tensor(2.5)})
    p = store.results_path("01_forced_memorization", "toy")
    assert json.loads(p.read_text()) == {"a": 2.5, "b": None}
    assert p.read_text().index('"a"') < p.read_text().index('"b"')


def test_a_unit_trained_on_another_device_has_another_key(monkeypatch):
    """A GPU's result is never served to a CPU run (nor the reverse)."""
    cpu = store.cache_key("train", {"a": 1}, "d", "s", device="cpu")
    assert cpu != store.cache_key("train", {"a": 1}, "d", "s", device="cuda")
    monkeypatch.setenv("BNPAPER_DEVICE", "cpu")
    assert store.cache_key("train", {"a": 1}, "d", "s") == cpu


def test_device_auto_is_the_cpu_here_and_cuda_without_a_gpu_is_one_clear_error(monkeypatch):
    from bnpaper import config

    monkeypatch.setattr(config.torch.cuda, "is_available", lambda: False)
    assert config.resolve_device("auto") == "cpu"
    with pytest.raises(config.ConfigError, match="device='cuda'.*no GPU"):
        config.resolve_device("cuda")
    with pytest.raises(config.ConfigError, match="device"):
        config.resolve_device("tpu")
    monkeypatch.setattr(config.torch.cuda, "is_available", lambda: True)
    assert config.resolve_device("auto") == "cuda"
