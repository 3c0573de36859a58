"""Shadow pool: keep-matrix balance, cached and resumable units, executors, query modes,
and the packed LeNet trainer."""

import numpy as np
import pytest
import torch

from bnpaper import data, models, packed, packed_fit, shadow
from bnpaper.mitigation import MitigationConfig, fit_mitigated
from bnpaper.config import ConfigError
from bnpaper.store import Store
from bnpaper.train import TrainConfig, fit

TINY = TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=16, lr=0.05)


def _toy_split(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = (torch.rand(n, 1, 28, 28, generator=g) * 60).to(torch.uint8)
    x[torch.arange(n), 0, 4 + 5 * y, 4:24] = 255
    y_new, mask = data.flip_labels(y, 0.1, 4, seed)
    return data.Split(x, y_new, y, mask, x[:32], y[:32], 4, (0.2,), (0.3,))


def test_keep_matrix_is_balanced_and_seeded():
    k = shadow.keep_matrix(16, 101, seed=3)
    assert k.shape == (16, 101) and (k.sum(0) == 8).all()
    assert k.sum(1).max() - k.sum(1).min() <= 1
    assert np.array_equal(k, shadow.keep_matrix(16, 101, seed=3))
    assert not np.array_equal(k, shadow.keep_matrix(16, 101, seed=4))
    with pytest.raises(ConfigError, match="even"):
        shadow.keep_matrix(5, 10, 0)


def test_query_augmentations_know_the_image_shape():
    assert shadow.query_shifts((1, 28, 28), augment=False) == [(False, 0, 0)]
    q = shadow.query_shifts((3, 32, 32), augment=True)
    assert len(q) == 10 and (True, 0, 0) in q and (False, 0, 0) in q
    x = torch.arange(16.0).view(1, 1, 4, 4)
    assert torch.equal(shadow.augment_query(x, True, 0, 0), x.flip(-1))
    assert torch.equal(shadow.augment_query(x, False, 1, 0, pad=1)[0, 0, :3], x[0, 0, 1:])


def test_kill_at_shadow_9_of_16_then_rerun_trains_exactly_the_7_missing(tmp_path, monkeypatch):
    sp, keep, store = _toy_split(), shadow.keep_matrix(16, 64, 0), Store(tmp_path / "c")
    real, calls = shadow._train_states, []

    def dying(task):
        calls.append(len(task.cfgs))
        if len(calls) == 10:
            raise KeyboardInterrupt("killed while training shadow 10")
        return real(task)

    monkeypatch.setattr(shadow, "_train_states", dying)
    with pytest.raises(KeyboardInterrupt):
        shadow.run_shadows(sp, TINY, keep, trainer="plain", store=store, progress=False)
    assert shadow.n_cached(sp, TINY, keep, trainer="plain", store=store) == 9
    assert not list((tmp_path / "c").rglob("*.tmp"))  # nothing half-written
    calls.clear()
    monkeypatch.setattr(shadow, "_train_states", lambda t: (calls.append(len(t.cfgs)), real(t))[1])
    pool = shadow.run_shadows(sp, TINY, keep, trainer="plain", store=store, progress=False)
    assert sum(calls) == 7
    assert pool.phi.shape == (16, 64, 1) and np.isfinite(pool.phi).all()
    assert pool.test_logp.shape == (16, 32, 1) and pool.correct.shape == (16, 64)
    calls.clear()
    again = shadow.run_shadows(sp, TINY, keep, trainer="plain", store=store, progress=False)
    assert calls == [] and np.array_equal(again.phi, pool.phi)


def test_packed_forward_equals_the_members_separate_forwards():
    for norm in models.NORMS:
        torch.manual_seed(0)
        members = [models.build_model("lenet", norm, 1, 10, 28) for _ in range(3)]
        for m in members:  # non-trivial running statistics and affine parameters
            m.train()
            m(torch.randn(32, 1, 28, 28) * 2 + 0.5)
            for p in m.parameters():
                p.data.add_(0.1 * torch.randn_like(p))
        pk = packed.PackedLeNet(3, norm, 1, 10, 28).load_members([m.state_dict() for m in members])
        for i, m in enumerate(members):  # member weights round-trip through the packed model
            st = pk.member_state(i)
            assert st.keys() == m.state_dict().keys()
            assert all(torch.equal(st[k], v) for k, v in m.state_dict().items())
        x = torch.randn(3, 8, 1, 28, 28)
        for mode in ("eval", "train"):
            for m in members:
                m.train(mode == "train")
            pk.train(mode == "train")
            with torch.no_grad():
                got = pk(packed.pack_input(x))
                want = torch.stack([m(x[i]) for i, m in enumerate(members)])
            assert torch.allclose(got, want, atol=1e-4), (norm, mode)


def test_packed_training_equals_separate_fit_runs():
    sp = _toy_split()
    cfgs = [TrainConfig(norm="bn", epochs=2, batch_size=16, lr=0.02, seed=s) for s in (1, 2)]
    rows = [torch.arange(0, 32), torch.arange(32, 64)]
    states = packed_fit.fit_packed(sp, rows, cfgs)
    for cfg, r, st in zip(cfgs, rows, states):
        sub = data.Split(
            sp.x[r], sp.y[r], sp.y_true[r], sp.mask[r], sp.x_test, sp.y_test, 4, sp.mean, sp.std
        )
        ref = fit(sub, cfg, progress=False).state
        for k, v in ref.items():
            assert torch.allclose(st[k].float(), v.float(), atol=2e-3, rtol=1e-3), k


@pytest.mark.parametrize(
    "mit",
    [
        MitigationConfig("penalty", 0.05, 0.5),
        MitigationConfig("projection", tau=0.5),
        MitigationConfig("gamma_decay", lam=0.5),
    ],
)
def test_packed_training_with_a_mitigation_equals_separate_mitigated_fit_runs(mit):
    sp = _toy_split()
    cfgs = [TrainConfig(norm="bn", epochs=2, batch_size=16, lr=0.02, seed=s) for s in (1, 2)]
    rows = [torch.arange(0, 32), torch.arange(32, 64)]
    states = packed_fit.fit_packed(sp, rows, cfgs, mitigation=mit)
    plain_states = packed_fit.fit_packed(sp, rows, cfgs)
    for cfg, r, st, st0 in zip(cfgs, rows, states, plain_states):
        sub = data.Split(
            sp.x[r], sp.y[r], sp.y_true[r], sp.mask[r], sp.x_test, sp.y_test, 4, sp.mean, sp.std
        )
        ref = fit_mitigated(sub, cfg, mit, progress=False).state
        for k, v in ref.items():
            assert torch.allclose(st[k].float(), v.float(), atol=2e-3, rtol=1e-3), k
        # the mitigation acted: the gammas differ from unmitigated packed training
        assert not torch.allclose(st["norm1.weight"], st0["norm1.weight"], atol=1e-3)


def test_train_batch_queries_never_mutate_saved_statistics():
    sp = _toy_split()
    res = fit(sp, TINY, progress=False)
    m = res.model(1, 4, 28)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    xs = data.normalize(sp.x, sp.mean, sp.std)
    q = shadow.query_shifts((1, 28, 28), False)
    ev = shadow.query_logits(m, xs, q, "eval")
    tb = shadow.query_logits(m, xs, q, "train-batch", batch=16)
    assert not torch.allclose(ev, tb)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert torch.equal(shadow.query_logits(m, xs, q, "eval"), ev)


def test_packed_pool_with_a_kill_keeps_finished_packs(tmp_path, monkeypatch):
    sp, keep, store = _toy_split(), shadow.keep_matrix(8, 64, 1), Store(tmp_path / "c")
    real, calls = shadow._train_states, []

    def dying(task):
        calls.append(len(task.cfgs))
        if len(calls) == 2:
            raise RuntimeError("killed in the second pack")
        return real(task)

    monkeypatch.setattr(shadow, "_train_states", dying)
    with pytest.raises(RuntimeError):
        shadow.run_shadows(sp, TINY, keep, pack_size=4, store=store, progress=False)
    assert calls == [4, 4]
    assert shadow.n_cached(sp, TINY, keep, pack_size=4, store=store) == 4
    monkeypatch.setattr(shadow, "_train_states", real)
    pool = shadow.run_shadows(sp, TINY, keep, pack_size=4, store=store, progress=False)
    assert pool.phi.shape == (8, 64, 1) and (pool.test_acc >= 0).all()


def test_a_packed_shadow_is_served_only_to_a_pool_of_its_pack_size(tmp_path, monkeypatch):
    """A packed shadow's numbers depend on its pack, so a pool asked with another pack size
    trains its own shadows; the same pack size is served from the cache, and a resumed pool
    (test above) forms the packs an uninterrupted one does."""
    sp, keep, store = _toy_split(), shadow.keep_matrix(4, 64, 1), Store(tmp_path / "c")
    real, calls = shadow._train_states, []

    def counted(task):
        calls.append(len(task.cfgs))
        return real(task)

    monkeypatch.setattr(shadow, "_train_states", counted)
    kw = dict(store=store, progress=False)
    shadow.run_shadows(sp, TINY, keep, pack_size=2, **kw)
    assert calls == [2, 2] and shadow.n_cached(sp, TINY, keep, pack_size=4, store=store) == 0
    shadow.run_shadows(sp, TINY, keep, pack_size=4, **kw)
    shadow.run_shadows(sp, TINY, keep, pack_size=2, **kw)
    assert calls == [2, 2, 4]  # the second pack size trained once, the first from the cache


def test_executor_spec_is_validated():
    for bad in ("threads", "process:0", "dask://nohost", 3):
        with pytest.raises(ConfigError, match="executor"):
            shadow.check_executor(bad)


def test_two_tiny_shadows_through_a_real_dask_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    sp, keep = _toy_split(), shadow.keep_matrix(2, 64, 0)
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        addr = cluster.scheduler_address.replace("tcp://", "dask://")
        pool = shadow.run_shadows(
            sp,
            TINY,
            keep,
            trainer="plain",
            executor=addr,
            store=Store(tmp_path / "c"),
            progress=False,
        )
    ref = shadow.run_shadows(
        sp, TINY, keep, trainer="plain", store=Store(tmp_path / "d"), progress=False
    )
    assert np.allclose(pool.phi, ref.phi)  # same units, same results as in-process


def test_packed_shadows_record_their_share_of_the_packs_measured_time(tmp_path):
    """Sidecars say what a unit really took: a pack of 4 gives each member a quarter of its time."""
    import json

    sp, keep = _toy_split(), shadow.keep_matrix(8, 64, 2)
    shadow.run_shadows(sp, TINY, keep, pack_size=4, store=Store(tmp_path), progress=False)
    metas = [json.loads(p.read_text()) for p in (tmp_path / "shadow").glob("*.json")]
    assert len(metas) == 8 and all(m["pack_size"] == 4 for m in metas)
    for m in metas:
        assert m["pack_seconds"] > 0 and m["seconds"] == pytest.approx(
            m["pack_seconds"] / 4, abs=0.01
        )
    assert metas[0]["code"]["module"] == "shadow" and "packed" in metas[0]["code"]["closure"]


def test_a_pool_reports_each_finished_pack_to_the_progress_file(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("BNPAPER_PROGRESS", str(tmp_path / "progress"))
    sp, keep = _toy_split(), shadow.keep_matrix(8, 64, 2)
    shadow.run_shadows(sp, TINY, keep, pack_size=4, store=Store(tmp_path / "c"), progress=False)
    recs = [json.loads(line) for line in (tmp_path / "progress").read_text().splitlines()]
    assert [(r["what"], r["done"], r["total"]) for r in recs] == [
        ("shadows lenet/bn", 0, 8),
        ("shadows lenet/bn", 4, 8),
        ("shadows lenet/bn", 8, 8),
    ]


@pytest.mark.parametrize("trainer", ["packed", "plain"])
def test_a_pool_read_at_a_level_holds_each_shadows_scores_at_its_first_epoch_there(
    tmp_path, trainer
):
    """Each shadow's level reading equals the same shadow trained with that level as its fit rule
    (stopped at its first epoch there); the levels are part of each unit's key."""
    sp, keep = _toy_split(), shadow.keep_matrix(4, 64, 0)
    base = TrainConfig(arch="lenet", norm="bn", epochs=3, batch_size=16, lr=0.05, fit_level=0.9999)
    store = Store(tmp_path / "c")
    kw = dict(trainer=trainer, pack_size=4, store=store, progress=False)
    pool = shadow.run_shadows(sp, base, keep, levels=(0.5,), **kw)
    low = pool.at_levels[0.5]
    at_half = TrainConfig(**{**base.as_dict(), "fit_level": 0.5})
    stopped = shadow.run_shadows(sp, at_half, keep, **kw)
    assert not low.censored.any() and np.array_equal(low.epochs, stopped.epochs)
    assert (low.epochs < pool.epochs).any()  # some shadow reached 0.5 before its end
    assert np.allclose(low.phi, stopped.phi, atol=1e-3)
    assert np.allclose(low.test_acc, stopped.test_acc)
    assert np.allclose(low.train_clean_acc, stopped.train_clean_acc)
    assert shadow.n_cached(sp, base, keep, trainer=trainer, pack_size=4, store=store) == 0
    n = shadow.n_cached(sp, base, keep, trainer=trainer, pack_size=4, store=store, levels=(0.5,))
    assert n == 4


def test_a_level_a_shadow_never_reaches_reads_it_at_its_end_marked_censored(tmp_path):
    g = torch.Generator().manual_seed(5)
    x = (torch.rand(64, 1, 28, 28, generator=g) * 255).to(torch.uint8)  # no signal to learn
    y = torch.randint(0, 4, (64,), generator=g)
    sp = data.Split(x, y, y, torch.zeros(64, dtype=torch.bool), x[:32], y[:32], 4, (0.5,), (0.3,))
    keep = shadow.keep_matrix(4, 64, 0)
    base = TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=16, lr=0.01)
    kw = dict(pack_size=4, store=Store(tmp_path / "c"), progress=False)
    pool = shadow.run_shadows(sp, base, keep, levels=(0.9999,), **kw)
    never = pool.at_levels[0.9999]
    assert (pool.train_clean_acc < 0.9999).all() and not pool.censored.any()
    assert never.censored.all() and np.array_equal(never.phi, pool.phi)
    assert np.array_equal(never.epochs, pool.epochs)


def test_a_level_pool_in_train_batch_query_mode_queries_each_shadows_snapshot(tmp_path):
    """bn_query_mode='train-batch' recomputes the queries from stored weights: at a level, from
    the snapshot's, so it equals the run stopped at that level queried the same way."""
    sp, keep = _toy_split(), shadow.keep_matrix(4, 64, 0)
    base = TrainConfig(arch="lenet", norm="bn", epochs=3, batch_size=16, lr=0.05, fit_level=0.9999)
    kw = dict(pack_size=4, store=Store(tmp_path / "c"), progress=False)
    kw["bn_query_mode"] = "train-batch"
    low = shadow.run_shadows(sp, base, keep, levels=(0.5,), **kw).at_levels[0.5]
    at_half = TrainConfig(**{**base.as_dict(), "fit_level": 0.5})
    stopped = shadow.run_shadows(sp, at_half, keep, **kw)
    assert np.array_equal(low.epochs, stopped.epochs) and (low.epochs < 3).any()
    assert np.allclose(low.phi, stopped.phi, atol=1e-3)
    eval_mode = shadow.run_shadows(sp, base, keep, levels=(0.5,), **{**kw, "bn_query_mode": "eval"})
    assert not np.allclose(eval_mode.at_levels[0.5].phi, low.phi, atol=1e-3)  # the mode matters
