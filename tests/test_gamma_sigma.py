"""|gamma|/sigma read from networks, and the study of networks trained over seeds."""

import numpy as np
import pytest
import torch

from bnpaper import claims, gamma_sigma, plot_theory, stats, theory_text
from bnpaper.models import build_model


def test_gamma_sigma_reads_every_bn_layer_and_keeps_running_stats():
    torch.manual_seed(0)
    model = build_model("lenet", "bn", 1, 10, 28)
    before = {k: v.clone() for k, v in model.state_dict().items() if "running" in k}
    x = torch.randn(64, 1, 28, 28)
    out = gamma_sigma.gamma_sigma(model, x, batch_size=32, n_batches=2)
    assert [o["layer"] for o in out] == ["norm1", "norm2", "norm3", "norm4"]
    assert out[0]["ratio_running"].shape == (6,) and out[3]["ratio_batch"].shape == (84,)
    # fresh BN: gamma = 1, running_var = 1 -> ratio 1/sqrt(1 + eps)
    assert torch.allclose(out[0]["ratio_running"], torch.full((6,), (1 + 1e-5) ** -0.5))
    after = {k: v for k, v in model.state_dict().items() if "running" in k}
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert model.training


def test_exp_estimate_exponentiates_value_and_bounds():
    e = gamma_sigma.exp_estimate(stats.Estimate(0.0, -1.0, 2.0, 5, 0.9))
    assert (e.value, e.lo, e.hi, e.n, e.level) == (
        1.0,
        pytest.approx(np.exp(-1)),
        pytest.approx(np.exp(2)),
        5,
        0.9,
    )


def test_channel_fractions_pool_channels_per_layer_and_over_the_network():
    layers = [
        {
            "ratio_running": torch.tensor([0.5, 2.0]),
            "ratio_batch": torch.tensor([2.0, 3.0]),
            "gamma": torch.tensor([1.0, 2.0]),
        },
        {
            "ratio_running": torch.tensor([1.5, 1.5, 0.1, 3.0]),
            "ratio_batch": torch.tensor([0.1] * 4),
            "gamma": torch.tensor([1.0, 1.0, 4.0, 1.0]),
        },
    ]
    f = gamma_sigma.channel_fractions(layers)
    assert f["running"] == [0.5, 0.75] and f["batch"] == [1.0, 0.0]
    assert f["all_running"].tolist() == [False, True, True, True, False, True]
    assert f["all_batch"].mean() == pytest.approx(2 / 6)


def test_trained_gamma_sigma_reads_a_train_result(tiny_split):
    from bnpaper.train import TrainResult

    torch.manual_seed(0)
    model = build_model("lenet", "bn", 1, 4, 28)
    res = TrainResult(
        {"arch": "lenet", "norm": "bn", "lr": 0.1, "fit_level": 0.9},
        model.state_dict(),
        {"test_acc": [0.25, 0.5], "noisy_acc": [0.0, 0.1], "epoch": [0, 1], "clean_acc": [0, 0.4]},
    )
    out = gamma_sigma.trained_gamma_sigma(res, tiny_split, batch_size=32, n_batches=2)
    assert (out["test_acc"], out["noisy_acc"]) == (0.5, 0.1)
    assert out["epochs"] == 1 and out["censored"]  # clean accuracy 0.4 < fit level 0.9
    fed = out["scale_free"][0]
    w = model.conv1.weight.detach().reshape(model.conv1.weight.shape[0], -1).norm(dim=1)
    assert fed["layer"] == "norm1"
    assert torch.allclose(fed["effective_step"], 0.1 / w**2)
    lay = out["layers"][0]
    assert torch.allclose(fed["ratio_unit_w"], lay["gamma"] * w / lay["sigma_batch"])
    assert [layer["layer"] for layer in out["layers"]] == ["norm1", "norm2", "norm3", "norm4"]
    assert torch.all(out["layers"][0]["ratio_batch"] > 0)


def _layers(gammas, sigmas, sigmas_running=None):
    """Layer dicts as `gamma_sigma.gamma_sigma` returns them, from per-layer channel values."""
    out = []
    for i, (g, s) in enumerate(zip(gammas, sigmas)):
        g, s = torch.tensor(g, dtype=torch.float64), torch.tensor(s, dtype=torch.float64)
        sr = s if sigmas_running is None else torch.tensor(sigmas_running[i], dtype=torch.float64)
        out.append(
            {
                "layer": f"norm{i + 1}",
                "gamma": g,
                "sigma_batch": s,
                "sigma_running": sr,
                "ratio_batch": g / s,
                "ratio_running": g / sr,
            }
        )
    return out


def _scale_free(layers, norms, lr=0.1):
    """`bn_scale.scale_free`'s readings of `layers` with channel weight norms `norms`."""
    out = []
    for layer, n in zip(layers, norms):
        n = torch.tensor(n, dtype=torch.float64)
        unit = layer["gamma"] * n / layer["sigma_batch"]
        out.append(
            {
                "layer": layer["layer"],
                "w_norm": n,
                "effective_step": lr / n**2,
                "ratio_unit_w": unit,
            }
        )
    return out


def _factor(layers):
    """(gamma/sigma)^2 of every channel, pooled."""
    return np.concatenate([(x["gamma"] / x["sigma_batch"]).numpy() ** 2 for x in layers])


def test_factor_parts_split_the_log_factor_into_gamma_and_sigma_exactly():
    a = _layers([[2.0, 1.0], [1.0, 1.0, 4.0]], [[0.5, 1.0], [2.0, 1.0, 1.0]])
    b = _layers([[1.0, 1.0], [1.0, 1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0, 1.0]])
    p = gamma_sigma.factor_parts(a, b)
    assert np.allclose(p["gamma"], [np.log(2), 2 * np.log(4) / 3])  # 2 mean log(ga/gb)
    assert np.allclose(p["sigma"], [np.log(2), -2 * np.log(2) / 3])  # -2 mean log(sa/sb)
    assert p["all_total"] == pytest.approx(np.mean(np.log(_factor(a) / _factor(b))))
    assert p["all_gamma"] == pytest.approx(2 * (np.log(2) + np.log(4)) / 5)
    assert np.allclose(p["total"], p["gamma"] + p["sigma"])


def test_driver_is_the_part_that_carries_the_change_in_its_direction():
    driver_of = gamma_sigma.driver_of
    assert driver_of(1.0, 0.2) == "gamma" and driver_of(0.2, 1.0) == "sigma"
    assert driver_of(-0.5, 2.0) == "sigma"  # the factor rises through sigma, gamma fell
    assert driver_of(-2.0, 0.5) == "gamma"  # the factor falls, gamma carries the fall
    assert list(driver_of(np.array([1.0, -1.0]), np.array([0.0, 3.0]))) == ["gamma", "sigma"]


def test_initial_model_is_the_model_train_fit_starts_from(tiny_split):
    from bnpaper import train

    seen = {}

    def keep_first(epoch, model):
        seen.setdefault(epoch, {k: v.clone() for k, v in model.state_dict().items()})

    cfg = train.TrainConfig(arch="lenet", norm="bn", epochs=1, batch_size=32, seed=3)
    res = train.fit(tiny_split, cfg, on_epoch_end=keep_first, progress=False)
    init = gamma_sigma.initial_model(res.config, tiny_split).state_dict()
    assert all(torch.equal(init[k], seen[0][k]) for k in init)
    assert not torch.equal(init["conv1.weight"], res.state["conv1.weight"])


def _study(gamma_clean=0.9):
    """Three seeds of a 2-layer net: trained gamma 2 (sigma halved in layer 2), init gamma 1;
    clean-label nets with gamma scaled by `gamma_clean`^-1 (so flipped / clean = gamma_clean)."""
    nets = {}
    for s in range(3):
        eps = 0.01 * s
        init = _layers([[1.0, 1.0], [1.0, 1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0, 1.0]])
        flip = _layers(
            [[2.0 + eps, 2.0], [1.0, 1.0, 1.0 + eps]],
            [[1.0, 1.0], [0.5, 0.5, 0.5]],
            sigmas_running=[[4.0, 1.0], [0.5, 0.5, 0.5]],
        )
        clean = _layers(
            [
                [(2.0 + eps) / gamma_clean, 2.0 / gamma_clean],
                [1 / gamma_clean] * 2 + [(1.0 + eps) / gamma_clean],
            ],
            [[1.0, 1.0], [0.5, 0.5, 0.5]],
        )
        run = {"epochs": 5 + s, "censored": s == 2}  # seed 2 hit its cap unfitted
        nets["lenet", "flip", s] = {
            "layers": flip,
            "init_layers": init,
            "test_acc": 0.8 + eps,
            "scale_free": _scale_free(flip, [[2.0, 2.0], [1.0, 1.0, 1.0]]),
            **run,
        }
        nets["lenet", "none", s] = {
            "layers": clean,
            "init_layers": init,
            "test_acc": 0.85,
            "scale_free": _scale_free(clean, [[2.0, 2.0], [1.0, 1.0, 1.0]]),
            **run,
        }
    return gamma_sigma.TrainedStudy(nets, ["lenet"], [0, 1, 2])


def test_trained_study_judges_most_channels_over_networks_not_channels():
    st = _study()
    per_layer, pooled = st.shares("lenet")
    assert per_layer.tolist() == [[0.5, 1.0]] * 3  # |gamma|/sigma_running per layer
    assert np.allclose(pooled, 4 / 5)
    e = st.most_channels("lenet")
    assert e.n == 3 and e.value == pytest.approx(0.8)  # n counts networks, not 5 x 3 channels
    assert "over 3 networks" in theory_text.most_channels_unit(st, e)
    assert st.most_fields("lenet")["n_channels"] == 5
    assert claims.judge("04.most_channels", e, arch="lenet").verdict == "reproduced"
    one = gamma_sigma.TrainedStudy(st.nets, ["lenet"], [0])  # one network: no interval
    row = claims.judge("04.most_channels", one.most_channels("lenet"), arch="lenet")
    assert row.verdict == "inconclusive"
    assert st.test_acc("lenet") == pytest.approx(0.81)


def test_trained_study_says_which_part_drives_each_layer_with_seed_counts():
    st = _study()
    init = st.drivers("lenet", "init")
    assert [r["layer"] for r in init] == ["norm1", "norm2", "all channels"]
    assert [r["driver"] for r in init] == ["gamma", "sigma", "sigma"]
    assert init[1]["sigma"].value == pytest.approx(2 * np.log(2)) and init[1]["agree"] == 3
    gamma = init[0]["gamma"]
    assert gamma.n == 3 and gamma.lo < gamma.value < gamma.hi
    table = theory_text.driver_table(st, "init")
    assert list(table["driven by"]) == ["gamma", "sigma", "sigma"]
    assert list(table["seeds agreeing"]) == ["3/3"] * 3
    assert len(theory_text.driver_tables(st)) == 2


def test_trained_study_gamma_ratio_and_story_say_when_outliers_do_not_raise_gamma():
    st = _study(gamma_clean=0.9)
    g = st.gamma_ratio("lenet")
    assert g.value == pytest.approx(0.9) and g.n == 3
    est = stats.Estimate(g.value, 0.88, 0.92, 3)
    assert claims.judge("04.gamma_noisy_vs_clean", est, arch="lenet").verdict == "not reproduced"
    f = st.gamma_fields("lenet")
    assert f["factor_ratio_from_gamma"] == pytest.approx(0.81) and f["driver"] == "gamma"
    story = theory_text.trained_story(st)
    assert "(lower with flipped labels)" in story
    assert "against the paper's positive-feedback loop" in story
    assert "sigma drives the change in 1 of them" in story
    assert "rises in 2 and falls in 0 of 2 BN layers" in story
    higher = theory_text.trained_story(_study(gamma_clean=1.2)).split("\n")[1]
    assert "(higher with flipped labels)" in higher and "against" not in higher
    assert set(st.summary()["lenet"]) >= {
        "layers",
        "share_above_one",
        "log_factor_init",
        "log_factor_clean",
    }


def test_trained_study_figures_draw_both_comparisons():
    import matplotlib

    matplotlib.use("Agg")
    from bnpaper import plots

    st = _study()
    fig = plot_theory.factor_drivers(st)
    assert len(fig.axes) == 2 and plots.audit(fig) == []
    fig = plot_theory.share_over_seeds(st)
    assert len(fig.axes) == 1 and plots.audit(fig) == []
    nets, fracs = st.first_network()
    fig = plot_theory.gamma_sigma_layers(nets, fracs, 0, 0.1)
    assert len(fig.axes) == 1


def test_trained_study_marks_censored_networks_and_reads_scale_free_medians():
    st = _study()
    assert st.epochs_used("lenet") == [5, 6, 7] and st.censored("lenet") == [False, False, True]
    e = st.most_channels("lenet")
    assert "CENSORED: 1 of 3" in theory_text.most_channels_unit(st, e, "lenet")
    assert "seed 2: 7 (censored)" in theory_text.epochs_lines(st)
    med = st.medians("lenet")  # channels pooled: ratio_batch 2, 2, 2, 2, 2 (+eps)
    assert med["effective_step"] == pytest.approx([0.1, 0.1, 0.1])  # median of .025 x2, .1 x3
    assert med["unit_norm"][0] == pytest.approx(2.0)  # median of 4, 4, 2, 2, 2
    table = st.scale_free_table("lenet")
    assert [r["layer"] for r in table] == ["norm1", "norm2"]
    assert table[0]["lr/|w_c|^2"] == pytest.approx(0.025)
    assert table[0]["gamma/sigma at |w_c|=1"] == pytest.approx(np.mean([4.0, 4.01, 4.02]), rel=1e-2)
    assert st.summary()["lenet"]["censored"] == [False, False, True]


def test_spearman_matches_scipy_and_has_no_value_without_spread():
    from scipy.stats import spearmanr

    a, b = [0.3, 0.1, 0.2, 0.9], [1.0, 3.0, 2.0, 4.0]
    assert gamma_sigma.spearman(a, b) == pytest.approx(spearmanr(a, b)[0])
    assert gamma_sigma.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(gamma_sigma.spearman([0.5, 0.5, 0.5], [1, 2, 3]))


def _decay_net(mem, ratio, norm):
    """A one-layer, two-channel network reading: memorization `mem`, |gamma|/sigma `ratio`,
    weight norm `norm` (effective step 0.1 / norm^2, unit-norm ratio ratio * norm)."""
    layer = _layers([[ratio, ratio]], [[1.0, 1.0]])
    return {
        "layers": layer,
        "scale_free": _scale_free(layer, [[norm, norm]]),
        "noisy_acc": mem,
        "test_acc": 0.8,
        "epochs": 3,
        "censored": False,
    }


def test_decay_study_ranks_memorization_against_each_reading_per_seed():
    # memorization falls with the decay; gamma/sigma rises with it in seed 0, falls in seed 1;
    # the weight norm falls with the decay, so the effective step rises (opposite to memorization)
    mem = {1e-4: 0.9, 1e-3: 0.5, 1e-2: 0.1}
    ratio = {
        (1e-4, 0): 1.0,
        (1e-3, 0): 2.0,
        (1e-2, 0): 3.0,
        (1e-4, 1): 3.0,
        (1e-3, 1): 2.0,
        (1e-2, 1): 1.0,
    }
    norm = {1e-4: 4.0, 1e-3: 2.0, 1e-2: 1.0}
    nets = {(d, s): _decay_net(mem[d], ratio[d, s], norm[d]) for d in mem for s in (0, 1)}
    st = gamma_sigma.DecayStudy(nets, list(mem), [0, 1])
    assert st.memorization()[:, 0].tolist() == [0.9, 0.5, 0.1]
    assert st.rank_correlations("gamma_sigma") == pytest.approx([-1.0, 1.0])
    assert st.rank_correlations("effective_step") == pytest.approx([-1.0, -1.0])
    e = st.tracking("effective_step")
    assert e.value == pytest.approx(-1.0) and e.n == 2
    assert claims.judge("04.tracks", e, measure="x").verdict == "not supported"
    rows = st.table()
    assert rows[0]["memorization"] == pytest.approx(0.9) and rows[0]["censored"] == 0
    assert rows[0]["gamma_sigma_lo"] < rows[0]["median |gamma|/sigma"] == pytest.approx(2.0)
    assert rows[0]["mem_lo"] == rows[0]["mem_hi"] == pytest.approx(0.9)  # both seeds 0.9
    flat = {k: {**v, "noisy_acc": 1.0} for k, v in nets.items()}  # nothing to rank: 0
    flat_st = gamma_sigma.DecayStudy(flat, list(mem), [0, 1])
    assert flat_st.rank_correlations("unit_norm") == [0.0, 0.0]
    assert flat_st.unranked("unit_norm") == 2 and st.unranked("unit_norm") == 0


def test_arch_params_take_each_architecture_its_n_train_and_epoch_cap():
    p = {
        "archs": ["lenet", "resnet20"],
        "n_train": {"lenet": 10, "resnet20": 20},
        "epochs": {"lenet": 3, "resnet20": 4},
        "lr": 0.05,
    }
    q = gamma_sigma.arch_params(p, "resnet20")
    assert (q["arch"], q["norm"], q["n_train"], q["epochs"], q["lr"]) == (
        "resnet20",
        "bn",
        20,
        4,
        0.05,
    )


def test_bn_recipes_under_the_paper_protocol_keep_the_shared_lr_and_fixed_epochs():
    from bnpaper import params

    p = params.resolve("04_theory", {"budget": "ci", "protocol": "paper"}).values
    chosen = gamma_sigma.bn_recipes(None, p)  # no search: the dataset is never read
    assert set(chosen) == set(p["archs"])
    for arch, r in chosen.items():
        cfg = r.config("bn", seed=1)
        assert (cfg.arch, cfg.lr, cfg.epochs, cfg.fit_level) == (
            arch,
            p["lr"],
            p["epochs"][arch],
            None,
        )
        assert r.as_dict()["protocol"] == "paper"
