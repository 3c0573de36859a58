"""The packed trainer of LeNet jobs: each member equals its `train.fit` twin (weights and
history), stops at fit, keeps logits at checkpoints; units train packed and cache each member."""

import math
from dataclasses import asdict

import pytest
import torch

from bnpaper import data, packed_fit, units
from bnpaper.mitigation import MitigationConfig, fit_mitigated
from bnpaper.store import Store
from bnpaper.train import TrainConfig, fit

OLD_FIELDS = {
    "arch",
    "norm",
    "epochs",
    "batch_size",
    "lr",
    "momentum",
    "weight_decay",
    "schedule",
    "augment",
    "seed",
}


def _split(n=64, seed=0, n_test=32):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = (torch.rand(n, 1, 28, 28, generator=g) * 60).to(torch.uint8)
    x[torch.arange(n), 0, 4 + 5 * y, 4:24] = 255
    y_new, mask = data.flip_labels(y, 0.1, 4, seed)
    yt = torch.randint(0, 4, (n_test,), generator=g)
    xt = (torch.rand(n_test, 1, 28, 28, generator=g) * 60).to(torch.uint8)
    xt[torch.arange(n_test), 0, 4 + 5 * yt, 4:24] = 255
    return data.Split(x, y_new, y, mask, xt, yt, 4, (0.2,), (0.3,))


def _same_history(got: dict, want: dict, n: int) -> float:
    """Assert every key and epoch agree (losses to float rounding, accuracies to one sample of
    `n`); return the largest absolute difference."""
    assert got.keys() == want.keys()
    worst = 0.0
    for key in want:
        assert len(got[key]) == len(want[key]), key
        for a, b in zip(got[key], want[key]):
            if math.isnan(b):
                assert math.isnan(a), key
                continue
            tol = 1.5 / n if key.endswith("acc") else 2e-3
            assert a == pytest.approx(b, abs=tol), key
            worst = max(worst, abs(a - b))
    return worst


def _same_state(got: dict, want: dict) -> float:
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert torch.allclose(got[k].float(), v.float(), atol=2e-3, rtol=1e-3), k
    return max(float((got[k].float() - v.float()).abs().max()) for k, v in want.items())


MIXED = [  # two data subsets, four seeds, two lrs, weight decays, schedules and epoch counts
    (0, TrainConfig(epochs=2, batch_size=16, lr=0.02, seed=1)),
    (1, TrainConfig(epochs=3, batch_size=16, lr=0.05, seed=2, weight_decay=1e-3)),
    (0, TrainConfig(epochs=3, batch_size=16, lr=0.05, seed=3, schedule="step", momentum=0.8)),
    (1, TrainConfig(epochs=2, batch_size=16, lr=0.02, seed=4, schedule="constant")),
]


@pytest.mark.parametrize("norm", ["bn", "none", "gn", "bn_noaffine"])
def test_a_mixed_pack_equals_its_train_fit_twins_weights_and_history(norm):
    splits = [_split(seed=0), _split(seed=1)]
    jobs = [packed_fit.Job(splits[s], TrainConfig(**{**asdict(c), "norm": norm})) for s, c in MIXED]
    assert len(packed_fit.packs(jobs)) == 1
    got = packed_fit.fit_pack(jobs)
    for job, res in zip(jobs, got):
        twin = fit(job.split, job.cfg, progress=False)
        _same_state(res.state, twin.state)
        _same_history(res.history, twin.history, 32)
        assert res.epochs == job.cfg.epochs and not res.censored and res.config == twin.config


def test_shadow_members_on_rows_of_one_pool_equal_their_twins_on_the_rows():
    sp = _split()
    rows = [torch.arange(0, 32), torch.arange(32, 64)]
    cfgs = [TrainConfig(epochs=2, batch_size=16, lr=lr, seed=s) for s, lr in ((1, 0.02), (2, 0.05))]
    jobs = [packed_fit.Job(sp, c, r) for c, r in zip(cfgs, rows)]
    for job, res in zip(jobs, packed_fit.fit_pack(jobs)):
        twin = fit(job.member_split(), job.cfg, progress=False)
        _same_state(res.state, twin.state)
        _same_history(res.history, twin.history, 32)


def test_a_member_with_a_penalty_equals_its_mitigated_twin_train_loss_included():
    mit = MitigationConfig("penalty", 0.05, 0.5)
    splits = [_split(seed=0), _split(seed=1)]
    jobs = [packed_fit.Job(splits[s], c, mitigation=mit) for s, c in MIXED[:2]]
    for job, res in zip(jobs, packed_fit.fit_pack(jobs)):
        twin = fit_mitigated(job.split, job.cfg, mit, progress=False)
        _same_state(res.state, twin.state)
        _same_history(res.history, twin.history, 32)


def _level_reached_at_epoch_2(sp: data.Split, cfg: TrainConfig) -> float:
    """A fit level the model of `cfg` first reaches at epoch 2 (read from a plain run)."""
    acc = fit(sp, cfg, progress=False).history["clean_acc"]
    assert acc[1] < acc[2], "the toy model must improve from epoch 1 to 2"
    return acc[2]


def test_a_member_stops_at_fit_with_the_state_and_history_of_train_fit_with_that_rule():
    sp = _split(seed=0)
    base = TrainConfig(epochs=4, batch_size=16, lr=0.02, seed=1)
    level = _level_reached_at_epoch_2(sp, base)
    stopping = TrainConfig(**{**asdict(base), "fit_level": level})
    censored = TrainConfig(**{**asdict(base), "seed": 2, "epochs": 1, "fit_level": 0.9999})
    longer = TrainConfig(**{**asdict(base), "seed": 3})
    jobs = [packed_fit.Job(sp, c) for c in (stopping, censored, longer)]
    got = packed_fit.fit_pack(jobs)
    twins = [fit(sp, c, progress=False) for c in (stopping, censored, longer)]
    assert twins[0].epochs == 2 and len(twins[0].history["epoch"]) == 3
    assert not twins[0].censored and twins[1].censored and not twins[2].censored
    assert [r.epochs for r in got] == [2, 1, 4]
    assert [r.censored for r in got] == [False, True, False]
    for res, twin in zip(got, twins):
        _same_state(res.state, twin.state)
        _same_history(res.history, twin.history, 32)


def test_snapshots_keep_the_weights_at_the_first_epoch_reaching_each_level_as_train_fit_does():
    sp = _split(seed=0)
    base = TrainConfig(epochs=4, batch_size=16, lr=0.02, seed=1)
    at2 = _level_reached_at_epoch_2(sp, base)
    short = TrainConfig(**{**asdict(base), "epochs": 1})  # stops before it reaches the level
    jobs = [packed_fit.Job(sp, base), packed_fit.Job(sp, short)]
    got = packed_fit.fit_pack(jobs, snapshots=(at2,))
    twins = [fit(sp, c, progress=False, snapshots=(at2,)) for c in (base, short)]
    assert got[1].snapshots is None and twins[1].snapshots is None  # never reached: absent
    assert got[0].snapshots[at2][0] == twins[0].snapshots[at2][0] == 2  # the first epoch there
    _same_state(got[0].snapshots[at2][1], twins[0].snapshots[at2][1])
    # the snapshot is the weights after epoch 2: those of the same run stopped at that level
    stopped = fit(sp, TrainConfig(**{**asdict(base), "fit_level": at2}), progress=False)
    _same_state(got[0].snapshots[at2][1], stopped.state)
    assert not torch.equal(got[0].snapshots[at2][1]["fc3.weight"], got[0].state["fc3.weight"])
    _same_state(got[0].state, twins[0].state)  # and training went on to its end


def test_without_the_test_pass_training_stopping_and_snapshots_are_unchanged():
    sp = _split(seed=0)
    base = TrainConfig(epochs=4, batch_size=16, lr=0.02, seed=1)
    level = _level_reached_at_epoch_2(sp, base)
    cfgs = [TrainConfig(**{**asdict(base), "fit_level": 0.9999}), base]
    jobs = [packed_fit.Job(sp, c) for c in cfgs]
    full = packed_fit.fit_pack(jobs, snapshots=(level,))
    lean = packed_fit.fit_pack(jobs, snapshots=(level,), eval_test=False)
    for a, b in zip(full, lean):
        assert torch.equal(a.snapshots[level][1]["fc3.weight"], b.snapshots[level][1]["fc3.weight"])
        assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
        assert a.history["clean_acc"] == b.history["clean_acc"] and a.epochs == b.epochs
        assert all(math.isnan(v) for v in b.history["test_acc"])


def test_fit_only_passes_stop_early_yet_stopping_snapshots_and_weights_are_the_whole_passes():
    sp = _split(seed=0)
    base = TrainConfig(epochs=5, batch_size=16, lr=0.02, seed=1)
    level = _level_reached_at_epoch_2(sp, base)
    cfgs = [
        TrainConfig(**{**asdict(base), "epochs": 1, "fit_level": 0.9999}),  # capped unfitted
        TrainConfig(**{**asdict(base), "fit_level": level}),
        TrainConfig(**{**asdict(base), "seed": 3}),  # no fit rule: its snapshot only
    ]
    jobs = [packed_fit.Job(sp, c) for c in cfgs]
    full = packed_fit.fit_pack(jobs, snapshots=(level,), eval_chunk=4)
    lean = packed_fit.fit_pack(jobs, snapshots=(level,), eval_chunk=4, fit_only=True)
    for a, b in zip(full, lean):
        assert a.epochs == b.epochs and a.censored == b.censored
        assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
        assert (a.snapshots or {}).keys() == (b.snapshots or {}).keys()
        for lv, (epoch, state) in (a.snapshots or {}).items():
            assert b.snapshots[lv][0] == epoch
            assert torch.equal(b.snapshots[lv][1]["fc3.weight"], state["fc3.weight"])
        for key in ("clean_acc", "noisy_acc", "test_acc"):  # the last entry: a whole pass
            assert b.history[key][-1] == a.history[key][-1]
    assert full[0].censored and [r.epochs for r in full] == [1, 2, 5]
    # passes did stop early: at initialization every member is far below its levels
    assert all(math.isnan(r.history["clean_acc"][0]) for r in lean)
    assert not any(math.isnan(v) for r in full for v in r.history["clean_acc"])


def test_a_level_is_ruled_out_only_by_one_error_more_than_it_allows():
    cfg = TrainConfig(fit_level=0.99)
    allowed = packed_fit._allowed(cfg, (0.95,), {}, 100)  # the lowest level left: 0.95
    assert allowed == pytest.approx(6.0)  # 5 errors in 100 is still 0.95: reached
    assert packed_fit._allowed(cfg, (0.95,), {0.95: (1, {})}, 100) == pytest.approx(2.0)
    assert packed_fit._allowed(TrainConfig(), (0.95,), {0.95: (1, {})}, 100) == 0.0  # none left


def test_fit_only_refuses_checkpoint_logits():
    with pytest.raises(ValueError, match="fit_only"):
        packed_fit.fit_pack(
            [packed_fit.Job(_split(), TrainConfig(epochs=1))], logits_at=(1,), fit_only=True
        )


def test_the_pack_keeps_logits_at_checkpoints_equal_to_the_members_eval_logits():
    sp = _split(seed=0)
    cfgs = [TrainConfig(epochs=e, batch_size=16, lr=0.02, seed=s) for s, e in ((1, 1), (2, 2))]
    got = packed_fit.fit_pack([packed_fit.Job(sp, c) for c in cfgs], logits_at=(0, 1))
    assert set(got[0].logits) == {0, 1} and set(got[1].logits) == {0, 1}
    xs, xt = data.normalize(sp.x, sp.mean, sp.std), data.normalize(sp.x_test, sp.mean, sp.std)
    with torch.no_grad():
        z, zt = got[0].model(1, 4, 28)(xs), got[0].model(1, 4, 28)(xt)
    assert got[0].logits[1][0].shape == (64, 4) and got[0].logits[1][1].shape == (32, 4)
    assert torch.allclose(got[0].logits[1][0], z, atol=1e-4)
    assert torch.allclose(got[0].logits[1][1], zt, atol=1e-4)


def test_packs_group_by_norm_and_mitigation_and_cut_large_groups():
    sp = _split()
    cfgs = [TrainConfig(norm=n, seed=s) for n in ("bn", "none") for s in range(5)]
    jobs = [packed_fit.Job(sp, c) for c in cfgs]
    jobs.append(packed_fit.Job(sp, cfgs[0], mitigation=MitigationConfig("gamma_decay", 0.1)))
    assert packed_fit.packs(jobs, pack_size=3) == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9], [10]]


def test_a_config_without_the_fit_rule_keeps_its_old_key():
    assert set(TrainConfig().as_dict()) == OLD_FIELDS
    assert set(TrainConfig(fit_level=0.99).as_dict()) == OLD_FIELDS | {"fit_level"}
    assert TrainConfig().as_dict() == {
        k: v for k, v in asdict(TrainConfig()).items() if k in OLD_FIELDS
    }


def test_a_packed_unit_is_served_only_to_a_request_that_forms_its_pack(tmp_path, monkeypatch):
    """A packed member's numbers depend on its pack (float rounding), so a request gives the
    same models whatever ran before: a model cached from another pack is trained again in the
    request's own pack, and each pack's members are cached for the next same request."""
    sp0, sp1 = _split(seed=0), _split(seed=1)
    cfgs = [TrainConfig(epochs=1, batch_size=16, lr=0.02, seed=s) for s in (1, 2)]
    jobs = [units.Job(sp0, cfgs[0]), units.Job(sp1, cfgs[1])]
    packs = []
    real = packed_fit.fit_pack

    def tagged(js, **kw):  # each result records the size of the pack it was trained in
        packs.append(len(js))
        results = real(js, **kw)
        for r in results:
            r.history["pack"] = [len(js)]
        return results

    monkeypatch.setattr(packed_fit, "fit_pack", tagged)
    store = Store(tmp_path / "a")
    first = units.trained_all(jobs[:1], store=store)
    both = units.trained_all(jobs, store=store)
    assert packs == [1, 2]  # the first model, cached alone, trains again in the pack of two
    assert first[0].history["pack"] == [1] and both[0].history["pack"] == [2]
    again = units.trained_all(jobs, store=store)
    alone = units.trained_all(jobs[:1], store=store)
    assert packs == [1, 2]  # both requests served from the cache, each from its own pack
    assert torch.equal(again[1].state["fc3.bias"], both[1].state["fc3.bias"])
    assert alone[0].history["pack"] == [1] and again[0].history["pack"] == [2]
    assert torch.equal(alone[0].state["conv1.weight"], first[0].state["conv1.weight"])
    # the same request on an empty cache gives the same models, bit for bit
    fresh = units.trained_all(jobs, store=Store(tmp_path / "b"))
    assert packs == [1, 2, 2]
    for got, want in zip(fresh, both):
        assert all(torch.equal(got.state[k], want.state[k]) for k in want.state)
        assert repr(got.history) == repr(want.history)  # NaN entries (no rare images) too
    kept = units.trained_all(jobs, store=store, logits_at=(1,))  # another unit: with logits
    assert packs == [1, 2, 2, 2] and set(kept[0].logits) == {1} and both[0].logits is None
    plain = units.trained_all(jobs, trainer="plain", store=store)  # another unit: train.fit's
    assert packs == [1, 2, 2, 2]
    _same_state(plain[1].state, both[1].state)
    assert plain[0].history.keys() == both[0].history.keys() - {"pack"}


def test_a_pack_keys_its_members_by_the_whole_pack_in_order():
    sp0, sp1 = _split(seed=0), _split(seed=1)
    a, b = (units.Job(sp, TrainConfig(epochs=1, seed=s)) for sp, s in ((sp0, 1), (sp1, 2)))
    ab, ba = units._packed_keys([a, b]), units._packed_keys([b, a])
    assert ab[0]["pack"]["members"] == 2 and ab[0]["pack"] == ab[1]["pack"]
    assert ab[0]["pack"] != ba[0]["pack"]  # another order stacks the members otherwise
    assert units._packed_keys([a])[0]["pack"] != ab[0]["pack"]
    assert {k: v for k, v in ab[0].items() if k != "pack"} == units._member_key(a)
    moved = units.Job(_split(seed=3), a.cfg)  # same configuration, other data: another pack
    assert units._packed_keys([moved, b])[1]["pack"] != ab[1]["pack"]


def test_a_divergence_belongs_to_its_pack_and_to_the_member_that_diverged(tmp_path, monkeypatch):
    """Only the member that diverged is dropped (another member with its configuration on other
    data trains), only its pack trains again, a re-run trains nothing, and another request's
    pack tries the model itself rather than reading this pack's divergence."""
    from bnpaper.train import TrainingDiverged

    sp0, sp1 = _split(seed=0), _split(seed=1)
    ok = [TrainConfig(epochs=1, batch_size=16, lr=0.02, seed=s) for s in (1, 2, 3)]
    bad = TrainConfig(epochs=1, batch_size=16, lr=0.05, seed=1)
    sick = (bad, sp0.fingerprint())  # the one model the fake trainer makes diverge
    calls = []
    real = packed_fit.fit_pack

    def diverging(js, **kw):
        calls.append(len(js))
        where = [p for p, j in enumerate(js) if (j.cfg, j.split.fingerprint()) == sick]
        if where:
            raise TrainingDiverged("diverged", [js[p].cfg for p in where], where)
        return real(js, **kw)

    monkeypatch.setattr(packed_fit, "fit_pack", diverging)
    store = Store(tmp_path / "c")
    jobs = [
        units.Job(sp0, ok[0]),
        units.Job(sp1, ok[1]),
        units.Job(sp0, bad),
        units.Job(sp1, bad),  # bad's configuration on other data: it trains
    ]
    got = units.trained_or_diverged(jobs, pack_size=2, store=store)
    assert calls == [2, 2, 1]  # the first pack once; the second broke and trains without it
    assert got[2] is None and all(r is not None for i, r in enumerate(got) if i != 2)
    again = units.trained_or_diverged(jobs, pack_size=2, store=store)
    assert calls == [2, 2, 1] and again[2] is None  # the divergence and the packs are cached
    assert torch.equal(again[3].state["fc3.bias"], got[3].state["fc3.bias"])
    alone = units.trained_or_diverged(jobs[2:3], store=store)  # another pack: tried anew
    assert calls == [2, 2, 1, 1] and alone == [None]


def test_every_notebook_that_trains_lenets_takes_a_trainer_and_packed_needs_lenets():
    from bnpaper import params
    from bnpaper.config import ConfigError

    for nb in ("01_forced_memorization", "04_theory", "05_mitigation"):
        assert params.resolve(nb, {"budget": "ci"}).values["trainer"] == "auto"
    with pytest.raises(ConfigError, match=r"trainer='packed' needs arch='lenet', got archs="):
        params.resolve("04_theory", {"trainer": "packed"})  # its archs hold resnet20
    with pytest.raises(ConfigError, match=r"trainer='packed' needs arch='lenet', got arch="):
        params.resolve("01_forced_memorization", {"trainer": "packed", "arch": "resnet20"})
