"""Tests of the gamma/sigma regularizer and projection (bnpaper.mitigation)."""
import numpy as np
import pytest
import torch
import torch.nn as nn

from bnpaper import mitigation
from bnpaper.config import ConfigError
from bnpaper.data import make_split, Dataset
from bnpaper.models import build_model
from bnpaper.train import TrainConfig, fit


def _global_hooks():
    return dict(nn.modules.module._global_forward_hooks)


def _bn1d(gamma):
    bn = nn.BatchNorm1d(len(gamma)).double()
    with torch.no_grad():
        bn.weight.copy_(torch.tensor(gamma, dtype=torch.float64))
    return bn


def test_penalty_is_zero_when_every_ratio_is_below_tau():
    torch.manual_seed(0)
    x = torch.randn(32, 3, dtype=torch.float64) * torch.tensor([2.0, 3.0, 4.0])
    bn = _bn1d([0.5, -1.0, 1.5])          # ratios about 0.25, 0.33, 0.375
    with mitigation.GammaSigmaRegularizer(lam=10.0, tau=0.5, model=bn) as reg:
        bn.train()
        bn(x)
        p = reg(bn)
        p.backward()
    assert p.item() == 0.0
    assert torch.all(bn.weight.grad == 0)


def test_penalty_value_and_gradient_match_a_hand_computation():
    x = torch.tensor([[1.0, 0.0], [2.0, 0.5], [4.0, -0.5], [-1.0, 1.0]], dtype=torch.float64,
                     requires_grad=True)
    gamma = np.array([3.0, -0.2])
    lam, tau = 0.7, 1.0
    bn = _bn1d(gamma)
    reg = mitigation.GammaSigmaRegularizer(lam, tau, model=bn)
    bn.train()
    bn(x)
    p = reg(bn)
    p.backward()
    reg.remove()
    # by hand, numpy float64: sigma = sqrt(biased var + eps)
    xn = x.detach().numpy()
    n = len(xn)
    mu = xn.mean(0)
    sigma = np.sqrt(((xn - mu) ** 2).mean(0) + bn.eps)
    r = np.abs(gamma) / sigma
    excess = np.maximum(r - tau, 0.0)
    assert excess[0] > 0 and excess[1] == 0      # the case has one active, one inactive channel
    assert p.item() == pytest.approx(lam * np.sum(excess ** 2), rel=1e-12)
    d_gamma = 2 * lam * excess * np.sign(gamma) / sigma
    np.testing.assert_allclose(bn.weight.grad.numpy(), d_gamma, rtol=1e-10, atol=1e-14)
    # through sigma: d pen / d x_ic = 2 lam excess_c * (-|gamma_c| / sigma_c^2) * (x_ic - mu_c) / (n sigma_c)
    d_x = 2 * lam * excess * (-np.abs(gamma) / sigma ** 2) * (xn - mu) / (n * sigma)
    np.testing.assert_allclose(x.grad.numpy(), d_x, rtol=1e-10, atol=1e-14)


def test_penalty_sums_channels_of_conv_bn_layers_and_matches_batch_statistics():
    torch.manual_seed(1)
    model = build_model("lenet", "bn", 1, 10, 28)
    x = torch.randn(16, 1, 28, 28)
    with mitigation.GammaSigmaRegularizer(lam=1.0, tau=0.0 + 1e-3) as reg:   # global hook
        model.train()
        model(x)
        p = reg(model)
    # recompute from scratch: each layer's batch sigma from its input
    inputs = {}
    hs = [m.register_forward_hook(lambda m, i, o, k=k: inputs.__setitem__(k, i[0]))
          for k, m in mitigation.affine_bn_layers(model)]
    model(x)
    for h in hs:
        h.remove()
    want = sum(float(torch.relu(m.weight.abs() / mitigation.batch_sigma(inputs[k], m.eps)
                                - 1e-3).pow(2).sum())
               for k, m in mitigation.affine_bn_layers(model))
    assert float(p) == pytest.approx(want, rel=1e-5)
    assert len(mitigation.affine_bn_layers(model)) == 4


def test_regularizer_leaves_no_hooks_behind_when_removed():
    model = build_model("lenet", "bn", 1, 10, 28)
    before = _global_hooks()
    with mitigation.GammaSigmaRegularizer(1.0, 1.0):
        assert len(_global_hooks()) == len(before) + 1
    assert _global_hooks() == before
    reg = mitigation.GammaSigmaRegularizer(1.0, 1.0, model=model)
    assert any(m._forward_hooks for _, m in mitigation.affine_bn_layers(model))
    reg.remove()
    assert all(not m._forward_hooks for m in model.modules())
    assert _global_hooks() == before
    with pytest.raises(RuntimeError, match="removed"):
        reg(model)


def test_regularizer_refuses_stale_or_missing_statistics():
    model = build_model("lenet", "bn", 1, 10, 28)
    with mitigation.GammaSigmaRegularizer(1.0, 0.5, model=model) as reg:
        with pytest.raises(RuntimeError, match="no batch statistics"):
            reg(model)                       # no forward pass yet
        model.eval()
        model(torch.randn(4, 1, 28, 28))     # eval mode: running statistics, nothing captured
        with pytest.raises(RuntimeError, match="no batch statistics"):
            reg(model)
        model.train()
        model(torch.randn(4, 1, 28, 28))
        reg(model)
        with pytest.raises(RuntimeError, match="no batch statistics"):
            reg(model)                       # consumed: the same batch is never used twice
    with pytest.raises(ConfigError, match="no BatchNorm"):
        mitigation.GammaSigmaRegularizer(1.0, 1.0, model=build_model("lenet", "none", 1, 10, 28))


def test_projection_enforces_the_bound_with_running_statistics():
    torch.manual_seed(2)
    model = build_model("lenet", "bn", 1, 10, 28)
    model.train()
    for _ in range(3):
        model(torch.randn(32, 1, 28, 28) * 3)
    with torch.no_grad():
        for _, m in mitigation.affine_bn_layers(model):
            m.weight.copy_(torch.randn_like(m.weight) * 5)
    tau = 0.8
    before = {k: m.weight.clone() for k, m in mitigation.affine_bn_layers(model)}
    mitigation.GammaSigmaProjection(tau)(model)
    for k, m in mitigation.affine_bn_layers(model):
        bound = tau * mitigation.running_sigma(m)
        assert torch.all(m.weight.abs() <= bound * (1 + 1e-6))
        inside = before[k].abs() <= bound
        assert torch.equal(m.weight[inside], before[k][inside])          # untouched inside
        assert torch.all(torch.sign(m.weight[~inside]) == torch.sign(before[k][~inside]))
        assert torch.allclose(m.weight[~inside].abs(), bound[~inside])    # clipped onto the bound
    ratios = mitigation.gamma_sigma(model)
    assert max(float(v.max()) for v in ratios.values()) <= tau * (1 + 1e-6)


def _tiny_split():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(148, 1, 28, 28, generator=g) * 255).to(torch.uint8)
    y = torch.randint(0, 10, (148,), generator=g)
    ds = Dataset("tiny", x[:128], y[:128], x[128:], y[128:], 10, (0.5,), (0.25,))
    return make_split(ds, 128, "flip", 0.1, 0)


def test_regularizer_and_projection_work_inside_the_trainer():
    sp = _tiny_split()
    cfg = TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=32, lr=0.05, seed=0)
    before = _global_hooks()
    base = fit(sp, cfg, progress=False)
    with mitigation.GammaSigmaRegularizer(lam=50.0, tau=0.3) as reg:
        pen = fit(sp, cfg, progress=False, regularizer=reg)
    assert _global_hooks() == before
    proj = fit(sp, cfg, progress=False, after_step=mitigation.GammaSigmaProjection(0.3))
    gs = lambda r: torch.cat(list(mitigation.gamma_sigma(r.model(1, 10, 28)).values()))
    assert float(gs(pen).mean()) < float(gs(base).mean())
    assert float(gs(proj).max()) <= 0.3 * (1 + 1e-5)


def test_penalty_works_on_packed_bn_over_k_times_c_channels():
    # a packed model keeps K members' channels side by side in one BN layer: the penalty over
    # K*C channels must equal the sum of the K members' own penalties
    torch.manual_seed(3)
    k, c = 3, 4
    x = torch.randn(20, k * c, 5, 5)
    packed = nn.BatchNorm2d(k * c)
    with torch.no_grad():
        packed.weight.copy_(torch.rand(k * c) * 3)
    with mitigation.GammaSigmaRegularizer(1.0, 0.5, model=packed) as reg:
        packed(x)
        p = reg(packed)
    parts = 0.0
    for j in range(k):
        bn = nn.BatchNorm2d(c)
        with torch.no_grad():
            bn.weight.copy_(packed.weight[j * c:(j + 1) * c])
        with mitigation.GammaSigmaRegularizer(1.0, 0.5, model=bn) as reg:
            bn(x[:, j * c:(j + 1) * c])
            parts += float(reg(bn))
    assert float(p) == pytest.approx(parts, rel=1e-6)


def test_mitigation_config_validates_and_keys():
    assert mitigation.MitigationConfig().as_dict() == {"method": "none"}
    assert mitigation.MitigationConfig("projection", lam=3.0, tau=1.0).as_dict() == \
        {"method": "projection", "tau": 1.0}
    with pytest.raises(ConfigError, match="method='l2'"):
        mitigation.MitigationConfig("l2")
    with pytest.raises(ConfigError, match="tau"):
        mitigation.MitigationConfig("penalty", 1.0, 0.0)
    with pytest.raises(ConfigError, match="lam"):
        mitigation.GammaSigmaRegularizer(-1.0, 1.0)


def test_penalty_and_projection_on_a_packed_model_equal_the_members_own():
    packed_mod = pytest.importorskip("bnpaper.packed")
    torch.manual_seed(4)
    k = 3
    members = [build_model("lenet", "bn", 1, 10, 28) for _ in range(k)]
    xs = torch.randn(k, 8, 1, 28, 28)
    for m in members:                                   # give gamma some spread above tau
        with torch.no_grad():
            for _, bn in mitigation.affine_bn_layers(m):
                bn.weight.copy_(torch.rand_like(bn.weight) * 4)
    packed = packed_mod.PackedLeNet(k, "bn").load_members([m.state_dict() for m in members])
    with mitigation.GammaSigmaRegularizer(0.3, 1.0) as reg:
        packed.train()
        packed(packed_mod.pack_input(xs))
        p = reg(packed)
        own = 0.0
        for m, x in zip(members, xs):
            m.train()
            m(x)
            own += float(reg(m))
    assert float(p) == pytest.approx(own, rel=1e-5)
    mitigation.GammaSigmaProjection(0.5)(packed)
    for i, m in enumerate(members):
        mitigation.GammaSigmaProjection(0.5)(m)
        st = packed.member_state(i)
        for name, bn in mitigation.affine_bn_layers(m):
            assert torch.allclose(st[f"{name}.weight"], bn.weight, atol=1e-6)


def test_fit_mitigated_matches_fit_and_removes_hooks():
    sp = _tiny_split()
    cfg = TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=32, lr=0.05, seed=0)
    before = _global_hooks()
    plain = fit(sp, cfg, progress=False)
    same = mitigation.fit_mitigated(sp, cfg, mitigation.MitigationConfig(), progress=False)
    for k, v in plain.state.items():
        assert torch.equal(v, same.state[k])
    pen = mitigation.fit_mitigated(sp, cfg, mitigation.MitigationConfig("penalty", 50.0, 0.3),
                                   progress=False)
    assert _global_hooks() == before
    assert any(not torch.equal(v, pen.state[k]) for k, v in plain.state.items())


def test_relative_reductions():
    np.testing.assert_allclose(mitigation.relative_reductions([0.8, 0.5], [0.2, 0.5]), [0.75, 0.0])
    assert mitigation.relative_reductions([0.4], [0.6])[0] == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="> 0"):
        mitigation.relative_reductions([0.0, 0.5], [0.0, 0.1])
    with pytest.raises(ValueError, match="equal shapes"):
        mitigation.relative_reductions([0.5], [0.1, 0.2])


# ---------------------------------------------------------------- notebook 05's machinery
MC = mitigation.MitigationConfig


def test_variant_names_labels_and_colors():
    bn, none = mitigation.Variant("bn"), mitigation.Variant("none")
    pen = mitigation.Variant("bn", MC("penalty", 0.01, 1.0))
    proj = mitigation.Variant("bn", MC("projection", lam=5.0, tau=0.5))
    assert [v.name for v in (bn, none, pen, proj)] == \
        ["bn", "none", "bn+pen(l=0.01,t=1)", "bn+proj(t=0.5)"]   # results.json keys, as before
    assert [v.family for v in (bn, none, pen, proj)] == \
        ["BN", "no-BN", "BN + regularizer", "BN + projection"]
    assert pen.label == "BN + regularizer ($\\lambda$=0.01, $\\tau$=1)" and bn.label == "BN"
    assert [v.color for v in (bn, none, pen, proj)] == ["bn", "none", "bn_reg", "bn_reg"]
    # equal configurations are one variant (a sweep point equal to the headline trains once)
    assert len(dict.fromkeys([pen, mitigation.Variant("bn", MC("penalty", 0.01, 1.0))])) == 1


def _history(noisy, test, clean=None, true=None):
    n = len(noisy)
    return {"epoch": list(range(n)), "noisy_acc": noisy, "test_acc": test,
            "clean_acc": clean or test, "noisy_true_acc": true or [0.5] * n}


def test_summarize_means_over_seeds_and_hides_true_labels_of_ood_samples():
    h = [_history([0.0, 0.5, 1.0], [0.1, 0.5, 0.8], true=[0.2, 0.3, 0.4]),
         _history([0.0, 0.0, 0.5], [0.1, 0.6, 0.6], true=[0.2, 0.3, 0.6])]
    s = mitigation.summarize(h, "flip")
    assert s["final_memorization"] == pytest.approx(0.75)
    # trapezoid area / epochs: (0.25 + 0.75) / 2 = 0.5 and (0 + 0.25) / 2 = 0.125
    assert s["memorization_auc"] == pytest.approx((0.5 + 0.125) / 2)
    assert s["clean_test_acc"] == pytest.approx(0.7) and s["noisy_true_acc"] == pytest.approx(0.5)
    assert s["n_seeds"] == 2
    assert mitigation.summarize(h, "ood")["noisy_true_acc"] is None


class R:
    """A TrainResult stand-in: only the history is read."""
    def __init__(self, h):
        self.history = h


def test_sweep_table_uses_only_the_given_seeds_and_each_variant_once():
    bn, pen = mitigation.Variant("bn"), mitigation.Variant("bn", MC("penalty", 0.1, 1.0))
    runs = {("flip", "bn", 0): R(_history([0.0, 0.8], [0.1, 0.9])),
            ("flip", "bn", 1): R(_history([0.0, 0.2], [0.1, 0.1])),
            ("flip", pen.name, 0): R(_history([0.0, 0.4], [0.1, 0.85]))}
    t = mitigation.sweep_table(runs, ["flip"], [bn, pen, bn], seeds=[0])
    assert list(t) == ["flip/bn", f"flip/{pen.name}"]
    assert t["flip/bn"] == {"memorization": pytest.approx(0.8), "clean_test_acc": pytest.approx(0.9)}
    assert t[f"flip/{pen.name}"]["memorization"] == pytest.approx(0.4)


def test_reduction_is_the_mean_share_removed_with_a_t_interval():
    from bnpaper import stats
    est = mitigation.reduction([0.8, 0.5, 0.4], [0.2, 0.25, 0.3])
    shares = [0.75, 0.5, 0.25]
    assert est.value == pytest.approx(np.mean(shares))
    want = stats.t_mean(shares)
    assert (est.lo, est.hi) == (pytest.approx(want.lo), pytest.approx(want.hi))
    empty = mitigation.reduction([0.0, 0.5], [0.0, 0.1])      # nothing to reduce in seed 0
    assert np.isnan(empty.value) and np.isnan(empty.lo) and empty.n == 2
    from bnpaper import claims
    assert claims.judge("05.reduction.flip", empty, acc_gap=0.0)["verdict"] == "inconclusive"


def test_paired_changes_are_signed_as_named():
    d = mitigation.paired_changes([0.8, 0.6], [0.2, 0.2], [0.9, 0.8], [0.85, 0.8])
    assert d["absolute_reduction"]["value"] == pytest.approx(0.5)     # base minus mitigated
    assert d["clean_acc_change"]["value"] == pytest.approx(-0.025)     # mitigated minus base


def test_channel_scales_pool_every_bn_channel_of_every_model():
    from types import SimpleNamespace
    from bnpaper.train import TrainResult
    torch.manual_seed(5)
    results = []
    for _ in range(2):
        m = build_model("lenet", "bn", 1, 10, 28)
        with torch.no_grad():
            for _, bn in mitigation.affine_bn_layers(m):
                bn.weight.copy_(torch.randn_like(bn.weight))
                bn.running_var.copy_(torch.rand_like(bn.running_var) + 0.1)
        results.append(TrainResult({"arch": "lenet", "norm": "bn"}, m.state_dict()))
    ds = SimpleNamespace(x_train=torch.zeros(1, 1, 28, 28), n_classes=10)
    g, sg, r = mitigation.channel_scales(results, ds)
    per_model = torch.cat(list(mitigation.gamma_sigma(results[0].model(1, 10, 28)).values()))
    assert len(r) == 2 * len(per_model) == 2 * (6 + 16 + 120 + 84)
    np.testing.assert_allclose(r[:len(per_model)], per_model.numpy(), rtol=1e-6)
    np.testing.assert_allclose(r, g / sg)
    s = mitigation.scale_summary(np.array([2.0, 0.5, 3.0, 1.0]), np.ones(4), tau=1.5)
    assert s["median"] == pytest.approx(1.5) and s["frac_above_1"] == 0.5
    assert s["frac_above_tau"] == 0.5 and s["median_sigma"] == 1.0


def test_markdown_tables_put_labels_and_clean_accuracy_in_the_rows():
    assert mitigation.markdown_table(["a", "b", "c"], [["x", 0.12345, None]]) == \
        "| a | b | c |\n|---|---|---|\n| x | 0.123 | n/a |"
    pen = mitigation.Variant("bn", MC("penalty", 0.01, 1.0))
    s = {"ood/" + pen.name: {"n_seeds": 3, "final_memorization": 0.2, "memorization_auc": 0.1,
                             "noisy_true_acc": None, "clean_train_acc": 0.9, "clean_test_acc": 0.8}}
    row = mitigation.summary_table(s, [pen]).splitlines()[-1]
    assert row == f"| ood | {pen.label} | 3 | 0.200 | 0.100 | n/a | 0.900 | 0.800 |"


def test_example_groups():
    g = mitigation.example_groups(np.array([True, False, False]))
    assert list(g) == ["all", "corrupted", "clean"] and g["all"].all() and g["clean"].sum() == 2
    assert list(mitigation.example_groups(np.zeros(3, bool))) == ["all"]


def _pool(keep, phi, test_acc):
    from bnpaper.shadow import ShadowPool
    m, n = keep.shape
    z = np.zeros((m, n, 1))
    return ShadowPool(keep=keep, phi=phi, logp=z, test_logp=z, correct=np.zeros((m, n), bool),
                      train_acc=np.ones(m), train_clean_acc=np.ones(m),
                      test_acc=np.asarray(test_acc, float), configs=())


def test_compare_lira_detects_a_leaky_pool_and_refuses_unpaired_pools():
    from bnpaper import shadow
    rng = np.random.default_rng(0)
    keep = shadow.keep_matrix(8, 200, seed=0)
    noise = rng.normal(size=(8, 200, 1))
    leaky = _pool(keep, noise + 3.0 * keep[..., None], [0.8] * 8)    # members score higher
    tight = _pool(keep, noise, [0.7] * 8)                           # no membership signal
    mask = np.zeros(200, bool)
    mask[:20] = True
    out = mitigation.compare_lira({"bn": leaky, "reg": tight}, "online_fixed",
                                  mitigation.example_groups(mask), "bn", "reg", n_boot=200)
    assert out.summary["bn"]["all"]["auc"] > 0.9 and abs(out.summary["reg"]["all"]["auc"] - 0.5) < 0.1
    assert out.summary["bn"]["shadow_test_acc"] == pytest.approx(0.8)
    d = out.delta["all"]
    assert d.lo > 0.3 and d.value == pytest.approx(
        out.summary["bn"]["all"]["auc"] - out.summary["reg"]["all"]["auc"])
    assert set(out.summary["delta_auc_bn_minus_reg"]) == {"all", "corrupted", "clean"}
    fpr, tpr = out.roc("bn")
    assert fpr[0] == 0 and tpr[-1] == 1 and np.all(np.diff(fpr) >= 0)
    other = _pool(shadow.keep_matrix(8, 200, seed=1), noise, [0.7] * 8)
    with pytest.raises(ValueError, match="not paired"):
        mitigation.compare_lira({"bn": leaky, "reg": other}, "online_fixed", {"all": ~mask | mask},
                                "bn", "reg")


def test_regularized_shadow_pool_pairs_with_the_plain_one(tiny_split):
    from bnpaper import units
    base = TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=16, lr=0.05)
    plain = units.shadow_pool(tiny_split, base, 4, 0, trainer="plain")
    reg = units.shadow_pool(tiny_split, base, 4, 0, mitigation=MC("penalty", 50.0, 0.3),
                            trainer="plain")
    assert np.array_equal(plain.keep, reg.keep) and plain.configs == reg.configs
    assert not np.allclose(plain.phi, reg.phi)                  # the regularizer changed the models
    out = mitigation.compare_lira({"bn": plain, "reg": reg}, "online_fixed",
                                  mitigation.example_groups(tiny_split.mask.numpy()), "bn", "reg",
                                  n_boot=50)
    assert out.scores["bn"].shape == (4, len(tiny_split.x))
    assert np.isfinite(out.delta["all"].value)


def test_05_parameters_are_the_declaration_and_cross_checks_hold():
    from bnpaper import params
    nb = "05_mitigation"
    defaults = params.defaults(nb)
    assert set(defaults) == set(params.DECLARATIONS[nb])
    assert not {"acc_tolerance", "min_relative_reduction"} & set(defaults)   # in claims.yaml now
    ok = params.validate(nb, defaults)
    assert ok["corruption"] == ["flip", "ood"]
    with pytest.raises(ConfigError, match="subset of seeds"):
        params.validate(nb, {**defaults, "sweep_seeds": [7]})
    with pytest.raises(ConfigError, match="even"):
        params.validate(nb, {**defaults, "lira_shadows": 5})
    with pytest.raises(ConfigError, match="lira_n // 2"):
        params.validate(nb, {**defaults, "lira_n": 100, "batch_size": 64})
    params.validate(nb, {**defaults, "lira": False, "lira_n": 100, "batch_size": 64})


def test_log_histograms_cover_every_value_and_count_zeros():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from bnpaper import plots
    fig, ax = plt.subplots()
    v = np.array([0.0, 0.0, 2e-4, 0.5, 30.0])
    plots.log_histograms(ax, {"a": (v, "red")}, "t", "x", zero_note="{n} zeros dropped")
    counts = sum(p.get_height() for p in ax.patches)
    assert counts == 3 and ax.get_title() == "t\n(2 zeros dropped)"
    plt.close(fig)


def test_tradeoff_points_use_every_seed_of_a_variant_with_its_range():
    bn, pen = mitigation.Variant("bn"), mitigation.Variant("bn", MC("penalty", 0.1, 1.0))
    runs = {("flip", "bn", 0): R(_history([0.0, 0.8], [0.1, 0.9])),
            ("flip", "bn", 1): R(_history([0.0, 0.2], [0.1, 0.7])),
            ("ood", "bn", 0): R(_history([0.0, 0.5], [0.1, 0.5])),
            ("flip", pen.name, 0): R(_history([0.0, 0.4], [0.1, 0.85]))}
    pts = mitigation.tradeoff_points(runs, "flip", [bn, pen])
    assert pts["bn"]["n"] == 2 and pts["bn"]["x"] == pytest.approx(0.5)
    assert pts["bn"]["x_range"] == pytest.approx((0.2, 0.8)) and pts["bn"]["y_range"] == pytest.approx((0.7, 0.9))
    assert pts[pen.name]["n"] == 1 and pts[pen.name]["y"] == pytest.approx(0.85)


def test_lira_reading_calls_a_lower_auc_at_lower_accuracy_no_privacy_win():
    from bnpaper.stats import Estimate

    def reading(acc_reg, delta):
        s = {"bn": {"all": {"auc": 0.77}, "shadow_test_acc": 0.75},
             "reg": {"all": {"auc": 0.50}, "shadow_test_acc": acc_reg}}
        return mitigation.lira_reading(mitigation.LiraComparison({}, np.zeros((1, 1)), s, {"all": delta}),
                                       "bn", "reg", tol=0.01)
    lower = Estimate(0.27, 0.25, 0.29, 8)
    assert "not a privacy win" in reading(0.55, lower) and "0.20 lower" in reading(0.55, lower)
    assert "privacy gain at equal utility" in reading(0.745, lower)
    assert "does not clearly change" in reading(0.745, Estimate(0.01, -0.02, 0.04, 8))
    assert "higher" in reading(0.745, Estimate(-0.1, -0.2, -0.05, 8))
