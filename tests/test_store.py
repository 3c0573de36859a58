import json

import torch

from bnpaper import store


def test_cached_computes_once_and_reloads(tmp_path):
    s = store.Store(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"w": torch.tensor([1.0, 2.0])}
    a = s.cached("unit", {"a": 1}, compute, data="d0")
    b = s.cached("unit", {"a": 1}, compute, data="d0")
    assert len(calls) == 1 and torch.equal(a["w"], b["w"])
    s.cached("unit", {"a": 2}, compute, data="d0")
    s.cached("unit", {"a": 1}, compute, data="d1")
    assert len(calls) == 3


def test_key_is_independent_of_dict_order_and_depends_on_source():
    k1 = store.cache_key("k", {"a": 1, "b": [1, 2]}, "x", source="s")
    k2 = store.cache_key("k", {"b": [1, 2], "a": 1}, "x", source="s")
    assert k1 == k2 and k1 != store.cache_key("k", {"a": 1, "b": [1, 2]}, "x", source="t")


def test_a_failed_compute_leaves_no_result(tmp_path):
    s = store.Store(tmp_path)

    def boom():
        raise RuntimeError("killed")
    try:
        s.cached("unit", {"a": 1}, boom)
    except RuntimeError:
        pass
    assert not s.has("unit", {"a": 1}) and not list(tmp_path.rglob("*.tmp"))


def test_resumable_compute_gets_a_partial_path_removed_on_success(tmp_path):
    s = store.Store(tmp_path)
    seen = {}

    def compute(checkpoint):
        seen["p"] = checkpoint
        checkpoint.write_text("partial")
        return 5
    assert s.cached("unit", {}, compute, resumable=True) == 5
    assert seen["p"].suffix == ".partial" and not seen["p"].exists()


def test_save_results_writes_stable_json_with_nan_as_null(tmp_path, monkeypatch):
    monkeypatch.setenv("BNPAPER_OUTPUT", str(tmp_path))
    p = store.save_results("01_forced_memorization", "toy", {"b": float("nan"), "a": torch.tensor(2.5)})
    assert json.loads(p.read_text()) == {"a": 2.5, "b": None}
    assert p.read_text().index('"a"') < p.read_text().index('"b"')
