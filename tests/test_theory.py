"""Notebook 04's verdict rows: the loop verdict, the claims' bands, every row from the studies."""

import pytest
import torch

from bnpaper import (
    bn_scale,
    claims,
    derivation,
    gamma_sigma,
    plot_theory,
    stats,
    theory,
    theory_text,
    toy,
)
from bnpaper import toy_studies
from bnpaper.models import build_model

SMALL = toy.ToyConfig(d=60, n_typical=30, n_outliers=3, steps=30)


@pytest.fixture(scope="module")
def probes():
    return toy_studies.probe_study(
        SMALL, [8, 16], [0.1], [1.0, 3.0], [0, 1], 16, 0.1, 5, progress=False
    )


@pytest.fixture(scope="module")
def feedback():
    return toy_studies.feedback_study(SMALL, [0, 1, 2], 16, 0.1, n_last=5, progress=False)


@pytest.fixture(scope="module")
def networks():
    """Two seeds of an untrained LeNet read on random images, one with a clean-label twin."""
    nets = {}
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = build_model("lenet", "bn", 1, 10, 28)
        layers = gamma_sigma.gamma_sigma(model, torch.randn(64, 1, 28, 28), 32, 2)
        for labels in ("flip", "none"):
            nets["lenet", labels, seed] = {
                "layers": layers,
                "init_layers": layers,
                "scale_free": bn_scale.scale_free(model, layers, 0.05),
                "test_acc": 0.5,
                "epochs": 2,
                "censored": False,
            }
    return gamma_sigma.TrainedStudy(nets, ["lenet"], [0, 1])


def test_loop_verdict_needs_the_gamma_claim(feedback):
    rise = claims.judge("04.amplification.toy", stats.Estimate(8.0, 2.0, 30.0, 3))
    assert rise.verdict == "reproduced"
    no_gamma = claims.judge("04.gamma_feedback.toy", stats.Estimate(-0.05, -0.4, 0.3, 3))
    yes_gamma = claims.judge("04.gamma_feedback.toy", stats.Estimate(0.2, 0.1, 0.3, 3))
    out = theory.loop_verdict(rise, no_gamma, feedback)
    assert out.verdict == "inconclusive" and "not the paper's loop" in out.magnitude
    assert f"driven by {feedback.driver}" in out.magnitude
    assert out.fields["requires_verdict"] == "inconclusive"
    assert theory.loop_verdict(rise, yes_gamma, feedback).verdict == "reproduced"
    flat = claims.judge("04.amplification.toy", stats.Estimate(0.9, 0.7, 1.1, 3))
    assert theory.loop_verdict(flat, yes_gamma, feedback).verdict == "inconclusive"
    with pytest.raises(ValueError, match="requires"):
        other = claims.judge("04.most_channels", stats.Estimate(0.9, 0.8, 1.0, 9), arch="lenet")
        theory.loop_verdict(rise, other, feedback)


@pytest.mark.parametrize(
    "cid, est, verdict",
    [
        ("04.simulation", (1.0, 0.85, 1.2), "reproduced"),  # inside [0.8, 1.25]
        ("04.simulation", (0.82, 0.62, 0.96), "inconclusive"),  # straddles 0.8
        ("04.simulation", (0.5, 0.4, 0.7), "not reproduced"),  # wholly below the band
        ("04.simulation.exact", (1.01, 0.98, 1.03), "supported"),
        ("04.simulation.finite_step", (0.88, 0.63, 1.06), "inconclusive"),
        ("04.gamma_share", (1.3, 0.9, 1.7), "reproduced"),  # 2.3x the population share
        ("04.gamma_share", (0.3, 0.2, 0.4), "not reproduced"),  # significant, < 1.5x
        ("04.most_channels", (0.96, 0.93, 0.98), "reproduced"),
        ("04.most_channels", (0.36, 0.32, 0.39), "not reproduced"),
        ("04.most_channels", (0.55, 0.45, 0.65), "inconclusive"),
        ("04.gamma_noisy_vs_clean", (0.98, 0.976, 0.987), "not reproduced"),
        ("04.gamma_noisy_vs_clean", (1.12, 1.07, 1.2), "reproduced"),
        ("04.gamma_noisy_vs_clean", (1.03, 1.01, 1.04), "not reproduced"),  # significant, < 5%
        ("04.gamma_noisy_vs_clean", (1.04, 1.01, 1.07), "inconclusive"),
        ("04.amplification.toy", (1.05, 1.02, 1.08), "not reproduced"),  # significant, < 10%
        ("04.amplification.toy", (16.9, 14.1, 20.1), "reproduced"),
    ],
)
def test_04_claims_keep_their_bands_most_and_minimum_effects(cid, est, verdict):
    assert claims.judge(cid, stats.Estimate(*est, 100), arch="lenet").verdict == verdict


def test_verdict_rows_judge_every_claim_once_with_dataset_and_budget(probes, feedback, networks):
    rows = theory.verdict_rows(
        derivation.growth_ratio(), probes, feedback, networks, 0.1, "mnist", "ci"
    )
    assert [r.id for r in rows] == [
        "04.derivation",
        "04.simulation",
        "04.simulation.exact",
        "04.simulation.finite_step",
        "04.gamma_share",
        "04.gamma_feedback.toy",
        "04.amplification.toy",
        "04.most_channels",
        "04.gamma_noisy_vs_clean",
    ]
    assert all((r.fields["dataset"], r.fields["budget"]) == ("mnist", "ci") for r in rows)
    assert rows[0].verdict == "reproduced" and rows[0].fields["clean_test_acc"] is None
    assert rows[1].measured == probes.tiny_agreement.value and rows[1].fields["n_runs"] == 4
    assert rows[2].measured == probes.tiny_exact.value and rows[2].kind == "exploratory"
    assert rows[3].measured == probes.agreement.value and rows[3].fields["n_runs"] == 4
    assert rows[4].measured == feedback.share_excess.value
    assert rows[6].fields["requires_verdict"] == rows[5].verdict
    assert rows[8].fields["clean_test_acc"] == {"bn": 0.5, "bn_clean_labels": 0.5}
    ratio = derivation.growth_ratio(centered=True)
    story = theory_text.theory_story(
        rows, "gamma**2/sigma**2", derivation.centered_example(ratio), probes, feedback, networks
    )
    assert "Derived ratio" in story and f"({rows[5].verdict})" in story and "lenet:" in story


def test_theory_figures_draw_from_the_studies(probes, feedback, networks):
    import matplotlib

    matplotlib.use("Agg")

    nets, fracs = networks.first_network()
    figs = [
        plot_theory.margin_growth(probes, [8, 16], [0.1]),
        plot_theory.gamma_feedback(feedback),
        plot_theory.gamma_sigma_layers(nets, fracs),
    ]
    assert [len(f.axes) for f in figs] == [2, 3, 1]


def test_first_order_figure_shows_both_predictions_per_run_and_passes_the_audit(probes):
    import matplotlib

    matplotlib.use("Agg")
    from bnpaper import plots

    fig = plot_theory.first_order(probes, claims.claim("04.simulation")["band"])
    assert plots.audit(fig) == []
    markers = [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "o"]
    assert len(markers) == 2 and all(len(ln.get_xdata()) == 4 for ln in markers)  # 4 runs


def test_verdict_rows_end_with_one_tracking_row_per_reading(probes, feedback, networks):
    base = networks.nets
    nets = {
        (d, s): {**base["lenet", "flip", s], "noisy_acc": m}
        for d, m in ((1e-4, 0.9), (1e-3, 0.5), (1e-2, 0.2))
        for s in (0, 1)
    }
    decays = gamma_sigma.DecayStudy(nets, [1e-4, 1e-3, 1e-2], [0, 1])
    rows = theory.verdict_rows(
        derivation.growth_ratio(), probes, feedback, networks, 0.1, "mnist", "ci", decays
    )
    tracks = rows[-3:]
    assert [r.id for r in tracks] == ["04.tracks"] * 3
    assert [r.fields["measure"] for r in tracks] == list(gamma_sigma.MEASURES.values())
    assert all(r.kind == "exploratory" and r.verdict != "reproduced" for r in tracks)
    # the readings do not vary over the decays here (one network per seed): no rank, 0
    assert all(r.fields["rank_correlation_per_seed"] == [0.0, 0.0] for r in tracks)
    assert all(
        r.verdict == "inconclusive" and "2 of 2 seeds without a rank" in r.magnitude for r in tracks
    )
    assert "it follows none of them" in theory_text.tracking_story(rows)


def test_tiny_step_row_says_plainly_when_only_the_exact_first_order_agrees():
    simple = claims.judge("04.simulation", stats.Estimate(0.72, 0.44, 1.15, 4))
    exact = claims.judge("04.simulation.exact", stats.Estimate(1.0, 0.999, 1.001, 4))
    out = theory.dropped_term(simple, exact)
    assert out.verdict == "inconclusive" and "drops the d sigma/dw term" in out.magnitude
    good = claims.judge("04.simulation", stats.Estimate(1.0, 0.9, 1.1, 4))
    assert theory.dropped_term(good, exact) == good
    bad_exact = claims.judge("04.simulation.exact", stats.Estimate(0.5, 0.4, 0.6, 4))
    assert theory.dropped_term(simple, bad_exact) == simple


def test_tracking_figure_marks_seeds_without_a_rank(networks):
    import matplotlib

    matplotlib.use("Agg")
    from bnpaper import plots

    base = networks.nets
    nets = {
        (d, s): {**base["lenet", "flip", s], "noisy_acc": 0.1} for d in (1, 2, 3) for s in (0, 1)
    }
    fig = plot_theory.tracking(gamma_sigma.DecayStudy(nets, [1, 2, 3], [0, 1]))
    assert len(fig.axes) == 3 and plots.audit(fig) == []
    assert all(ax.get_title() == "Spearman per seed: n/a, n/a" for ax in fig.axes)


def test_04_parameters_check_the_fair_search_per_arch_and_the_decay_study():
    from bnpaper import params
    from bnpaper.config import ConfigError

    ok = params.resolve("04_theory", {"budget": "ci"}).values
    assert ok["protocol"] == "fair" and len(ok["tracking_decays"]) == 3
    with pytest.raises(ConfigError, match=r"tracking_decays=\[0.001, 0.01\] has fewer than 3"):
        params.resolve("04_theory", {"budget": "ci", "tracking_decays": [1e-3, 1e-2]})
    with pytest.raises(ConfigError, match=r"needs 'lenet' in archs"):
        params.resolve(
            "04_theory",
            {"budget": "ci", "archs": ["resnet20"], "clean_reference": [], "trainer": "plain"},
        )
    assert params.resolve("04_theory", {"budget": "ci", "tracking_decays": []}).values
    with pytest.raises(ConfigError, match="lr_grid"):
        params.resolve("04_theory", {"budget": "ci", "lr_grid": [0.01, 0.02, 0.03, 0.04, 0.05]})
    with pytest.raises(ConfigError, match=r"n_train\[lenet\]"):
        params.resolve("04_theory", {"budget": "ci", "n_val": 59600})


def test_a_network_row_with_a_censored_network_reads_inconclusive_and_says_why(networks):
    """04's trained-network claims are about networks that fitted their data: one network that hit
    the epoch cap unfitted turns the row inconclusive, whatever the interval says, and the note
    counts the censored networks; with none censored the row keeps its verdict."""
    fitted = theory.network_rows(networks, 0.1, dataset="mnist", budget="ci")
    nets = {k: dict(v) for k, v in networks.nets.items()}
    nets["lenet", "none", 1]["censored"] = True  # a clean-label twin: only the gamma row uses it
    twin = gamma_sigma.TrainedStudy(nets, ["lenet"], [0, 1])
    most, gamma = theory.network_rows(twin, 0.1, dataset="mnist", budget="ci")
    assert (most.verdict, most.magnitude) == (fitted[0].verdict, fitted[0].magnitude)
    assert gamma.verdict == "inconclusive" and "1 of 2 networks" in gamma.magnitude
    nets["lenet", "flip", 0]["censored"] = True
    both = gamma_sigma.TrainedStudy(nets, ["lenet"], [0, 1])
    most, gamma = theory.network_rows(both, 0.1, dataset="mnist", budget="ci")
    assert most.verdict == "inconclusive" and "1 of 2 networks hit the epoch cap" in most.magnitude
    assert gamma.verdict == "inconclusive" and "2 of 2 networks" in gamma.magnitude
    assert most.measured == fitted[0].measured
