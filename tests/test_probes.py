"""bnpaper.probes: the gradient-norm probe recorded in training, and the analysis of its records."""

import numpy as np
import pytest
import torch

from bnpaper import data, grad_analysis, grads, probes, stats, text, train, units
from bnpaper.models import build_model


def _toy_split(n=256, noise=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = torch.randint(0, 40, (n, 1, 28, 28), generator=g, dtype=torch.uint8)
    x[torch.arange(n), 0, 4 + 5 * y, 4:24] = 255  # a learnable stripe per class
    y_new, mask = data.flip_labels(y, noise, 4, seed)
    return data.Split(x, y_new, y, mask, x[:64], y[:64], 4, (0.2,), (0.3,))


PROBE = probes.GradProbe(epochs=(0, 2), n_probe=40, batches=2, batch_size=32, seed=1)


def test_probe_indices_are_seeded_and_shaped():
    sub, b = PROBE.indices(256)
    sub2, b2 = PROBE.indices(256)
    assert torch.equal(sub, sub2) and torch.equal(b, b2)
    assert sub.shape == (40,) and b.shape == (2, 32)
    assert len(set(sub.tolist())) == 40 and len(set(b.flatten().tolist())) == 64
    other = probes.GradProbe((0, 2), 40, 2, 32, seed=2).indices(256)[0]
    assert not torch.equal(sub, other)


def test_hook_records_only_probe_epochs_all_noisy_and_as_many_clean_and_leaves_the_model():
    sp = _toy_split()
    torch.manual_seed(0)
    model = build_model("lenet", "bn", 1, 4, 28).train()
    hook = PROBE.hook(sp)
    assert hook(1, model) is None
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rec = hook(2, model)["grads"]
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    sub, batches = PROBE.indices(len(sp.x))
    assert rec["epoch"] == 2 and len(rec["eval_norm"]) == 40
    assert rec["eval_noisy"] == sp.mask[sub].tolist()
    n_noisy = sum(int(sp.mask[b].sum()) for b in batches)
    assert sum(rec["batch_noisy"]) == n_noisy and len(rec["batch_noisy"]) == 2 * n_noisy
    assert len(rec["batch_fixed_norm"]) == len(rec["batch_norm"]) == 2 * n_noisy
    assert set(rec["batch_groups"]) == {"weight", "gamma", "beta", "bias"}
    assert all(
        np.isfinite(rec[k]).all() and min(rec[k]) > 0
        for k in ("eval_norm", "batch_norm", "batch_fixed_norm")
    )
    # the first probe batch's norms are those of grads.per_sample_grad_norms on the whole batch
    xs = data.normalize(sp.x, sp.mean, sp.std)
    b = batches[0]
    ref = grads.per_sample_grad_norms(model, xs[b], sp.y[b], mode="batch").total
    sel = sp.mask[b].clone()
    sel[torch.nonzero(~sp.mask[b]).flatten()[: int(sel.sum())]] = True
    np.testing.assert_allclose(rec["batch_norm"][: int(sel.sum())], ref[sel].numpy(), rtol=1e-5)


def test_trained_with_a_probe_records_at_the_probe_epochs_and_is_cached():
    sp = _toy_split()
    cfg = train.TrainConfig(norm="bn", epochs=2, batch_size=32, lr=0.05, seed=0)
    a = units.trained(sp, cfg, probe=PROBE)
    assert [r["epoch"] for r in a.history["grads"]] == [0, 2]
    b = units.trained(sp, cfg, probe=PROBE)
    assert b.history["grads"] == a.history["grads"]
    plain = units.trained(sp, cfg)  # the probe is part of the key, not of the training
    assert "grads" not in plain.history
    for k, v in plain.state.items():
        assert torch.equal(v, a.state[k]), k


# ---------------------------------------------------------------- analysis on known records
def _history(noisy_scale, epochs=(0, 1, 3)):
    """Probe records whose noisy norms are `noisy_scale * (epoch + 1)` times the clean ones."""
    grads_ = []
    for e in epochs:
        clean = np.array([1.0, 2.0, 3.0])
        noisy = noisy_scale * (e + 1) * np.array([1.0, 2.0, 3.0])
        v = np.concatenate([noisy, clean]).tolist()
        k = [True] * 3 + [False] * 3
        grads_.append(
            {
                "epoch": e,
                "eval_norm": v,
                "eval_noisy": k,
                "batch_norm": v,
                "batch_noisy": k,
                "batch_fixed_norm": [2 * x for x in v],
                "batch_fixed_noisy": k,
                "batch_groups": {"weight": v, "gamma": [x**2 for x in v]},
            }
        )
    return {"epoch": list(range(4)), "grads": grads_}


def test_medians_ratio_and_share_of_known_records():
    hs = [_history(2.0), _history(4.0)]
    m = grad_analysis.medians(hs, "batch")
    assert m.noisy.shape == m.clean.shape == m.share.shape == (2, 3)
    np.testing.assert_allclose(m.clean, 2.0)
    np.testing.assert_allclose(m.ratio, [[2, 4, 8], [4, 8, 16]])
    np.testing.assert_allclose(m.share, m.ratio / (m.ratio + 1))  # sums scale like the medians
    np.testing.assert_allclose(grad_analysis.medians(hs, "batch_fixed").ratio, m.ratio)
    with pytest.raises(ValueError, match="mode"):
        grad_analysis.medians(hs, "train")


def test_groups_fixed_over_batch_and_after_init():
    hs = [_history(2.0), _history(4.0)]
    ep = grad_analysis.probed_epochs(hs[0])
    assert ep.tolist() == [0, 1, 3] and grad_analysis.groups(hs[0]) == ["weight", "gamma"]
    np.testing.assert_allclose(
        grad_analysis.group_ratio(hs, "weight"), grad_analysis.medians(hs).ratio
    )
    np.testing.assert_allclose(
        grad_analysis.group_ratio(hs, "gamma"), grad_analysis.medians(hs).ratio ** 2
    )
    noisy, clean = grad_analysis.fixed_over_batch(hs)
    np.testing.assert_allclose(noisy, 2.0)
    np.testing.assert_allclose(clean, 2.0)
    np.testing.assert_allclose(
        grad_analysis.after_init(grad_analysis.medians(hs).ratio, ep), [6.0, 12.0]
    )
    with pytest.raises(ValueError, match="after initialization"):
        grad_analysis.after_init(np.ones((2, 1)), [0])


def test_pooled_log10_pools_runs_at_one_epoch():
    lv, k = grad_analysis.pooled_log10([_history(2.0), _history(4.0)], 1)
    assert lv.shape == k.shape == (12,) and k.sum() == 6
    np.testing.assert_allclose(10 ** lv[:3], [4.0, 8.0, 12.0])
    with pytest.raises(ValueError, match="probe epoch"):
        grad_analysis.pooled_log10([_history(2.0)], 2)


def test_probe_counts_say_how_many_samples_each_median_is_over():
    h = _history(2.0)
    assert text.probe_counts(*grad_analysis.sample_counts([h, _history(4.0)])) == "3 noisy, 3 clean"
    fewer = {
        **h,
        "grads": [
            {**r, "batch_noisy": r["batch_noisy"][1:], "batch_norm": r["batch_norm"][1:]}
            for r in h["grads"]
        ],
    }
    assert grad_analysis.sample_counts([h, fewer], "batch") == ([3, 2], [3, 3])
    assert text.probe_counts([3, 2], [3, 3]) == "2-3 noisy, 3 clean"


def test_verdict_rows_judge_the_after_init_ratio_and_the_paired_gap():
    hs = {"bn": [_history(2.0), _history(4.0)], "none": [_history(1.0), _history(1.5)]}
    for n, runs in hs.items():
        for h, acc in zip(runs, (0.8, 0.9)):
            h["test_acc"] = [0.1, 0.5, 0.7, acc]
    rows = grad_analysis.verdict_rows(hs, dataset="toy", budget="ci", corruption="flip")
    assert [r.id for r in rows] == ["02.noisy_vs_clean", "02.bn_vs_none"]
    ep = grad_analysis.probed_epochs(hs["bn"][0])
    per_seed = {
        n: grad_analysis.after_init(grad_analysis.medians(h).ratio, ep) for n, h in hs.items()
    }
    assert rows[0].measured == pytest.approx(np.mean(per_seed["bn"]))
    assert rows[1].measured == pytest.approx(np.mean(per_seed["bn"] - per_seed["none"]))
    assert rows[0].fields["clean_test_acc"] == pytest.approx({"bn": 0.85, "none": 0.85})
    assert rows[1].fields["dataset"] == "toy" and rows[1].fields["corruption"] == "flip"


def test_summary_agrees_with_the_verdict_statistic():
    hs = {"bn": [_history(2.0), _history(4.0)], "none": [_history(1.0), _history(1.5)]}
    s = grad_analysis.summary(hs)
    ep = grad_analysis.probed_epochs(hs["bn"][0])
    want = stats.t_mean(
        grad_analysis.after_init(grad_analysis.medians(hs["bn"]).ratio, ep)
    ).as_dict()
    assert s["ratio"]["bn"] == want and s["ratio_eval"]["bn"] == want
    assert set(s["fixed_over_batch_median"]) == {"bn"}
    assert s["fixed_over_batch_median"]["bn"] == {"noisy": 2.0, "clean": 2.0}
    assert set(s["ratio_by_group"]["none"]) == {"weight", "gamma"}
    assert s["median_clean_norm_final"] == {"bn": 2.0, "none": 2.0}
    assert s["median_noisy_norm_final"]["bn"] == pytest.approx(2.0 * 4 * 3)  # mean of 16, 32
