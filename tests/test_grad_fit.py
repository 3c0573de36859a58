"""bnpaper.grad_fit: notebook 02's noisy/clean gradient-norm ratio read at matched fit."""

import dataclasses
import math

import numpy as np
import pytest

from bnpaper import grad_fit, lr_choice, params, recipes, text, train, units
from bnpaper.config import ConfigError
from tests.test_probes import PROBE, _history, _toy_split

EPOCHS = (0, 1, 2, 3)  # every epoch probed, as under the fair protocol


def _run(scale, clean_acc, test_acc=(0.1, 0.4, 0.6, 0.7)):
    """A history probed at every epoch whose noisy/clean median ratio is scale * (epoch + 1)."""
    h = _history(scale, EPOCHS)
    return {**h, "clean_acc": list(clean_acc), "test_acc": list(test_acc)}


BN_FIT = (0.1, 0.5, 0.9, 1.0)  # reaches 0.7 halfway between epochs 1 and 2
NONE_FIT = (0.1, 0.3, 0.7, 0.8)  # reaches 0.7 at epoch 2, never 0.95
HS = {
    "bn": [_run(2.0, BN_FIT), _run(4.0, BN_FIT)],
    "none": [_run(1.0, NONE_FIT), _run(1.5, NONE_FIT)],
}


def test_trajectory_is_the_ratio_at_each_probed_epoch_against_clean_training_accuracy():
    (t,) = grad_fit.trajectories([HS["bn"][0]])
    np.testing.assert_allclose(t.epochs, EPOCHS)
    np.testing.assert_allclose(t.fit, BN_FIT)
    np.testing.assert_allclose(t.value, [2.0, 4.0, 6.0, 8.0])
    # probed at epochs 0, 1, 3 only (the paper's protocol): the trajectory keeps those epochs
    sparse = {**_history(2.0), "clean_acc": list(BN_FIT), "test_acc": [0.1, 0.2, 0.3, 0.4]}
    (t,) = grad_fit.trajectories([sparse])
    np.testing.assert_allclose(t.epochs, [0, 1, 3])
    np.testing.assert_allclose(t.fit, [0.1, 0.5, 1.0])
    np.testing.assert_allclose(t.test_acc, [0.1, 0.2, 0.4])


def test_reading_at_a_level_equals_the_hand_interpolation_paired_over_seeds():
    (c,) = grad_fit.comparisons(HS, [0.7], fit_level=0.99, cap=3)[:1]
    # BN crosses 0.7 at epoch 1.5: ratio s * 2.5 (5, 10); no-BN at epoch 2: s * 3 (3, 4.5)
    np.testing.assert_allclose(c.a.value, [5.0, 10.0])
    np.testing.assert_allclose(c.b.value, [3.0, 4.5])
    np.testing.assert_allclose(c.a.epoch, [1.5, 1.5])
    assert c.estimate.value == pytest.approx(np.mean([5.0 - 3.0, 10.0 - 4.5]))
    assert c.train_acc_gap == pytest.approx(0.0)
    assert c.test_acc_gap == pytest.approx(0.5 - 0.6)  # BN's test acc at epoch 1.5 vs 2
    assert grad_fit.bn_ratio(c).value == pytest.approx(7.5)
    fit_row, gap_row = grad_fit.verdict_rows([c], 0.99, dataset="toy", budget="ci")
    assert (fit_row.id, gap_row.id) == ("02.noisy_vs_clean.fit", "02.bn_vs_none.fit")
    assert gap_row.measured == pytest.approx(c.estimate.value)
    assert fit_row.measured == pytest.approx(7.5)
    assert gap_row.fields["clean_train_acc"] == pytest.approx({"bn": 0.7, "none": 0.7})
    # the clean test accuracies differ by 0.1 > the 0.02 tolerance: never "reproduced"
    assert gap_row.verdict != "reproduced" and "clean test accuracy" in gap_row.magnitude
    assert "clean training accuracy 0.7" in gap_row.claim


def test_a_run_that_never_reaches_a_level_gives_no_estimate_and_is_censored_at_convergence():
    level, conv = grad_fit.comparisons(HS, [0.95], fit_level=0.95, cap=3)
    assert np.isnan(level.b.value).all() and level.reached_both == 0
    assert math.isnan(level.estimate.value) and math.isnan(level.estimate.lo)
    rows = grad_fit.verdict_rows([level, conv], 0.95, dataset="toy")
    assert rows[1].verdict == "inconclusive"
    # BN's own row stands beside BN's accuracies where it was read (epoch 2.5)
    assert rows[0].fields["clean_test_acc"] == pytest.approx({"bn": 0.65})
    assert rows[0].fields["clean_train_acc"] == pytest.approx({"bn": 0.95})
    lines = text.matched_fit_lines(grad_fit.comparison_dicts([level, conv]))
    assert lines[0].startswith("- at clean training accuracy 0.95: no seed read in both")
    assert "censored 0 / 2" in lines[1]
    assert conv.at == "convergence" and conv.censored == (0, 2)  # no-BN hit the cap unfitted
    np.testing.assert_allclose(conv.a.value, [8.0, 16.0])  # each run's last epoch
    assert rows[3].fields["censored"] == {"bn": 0, "none": 2}
    assert "convergence: each model trained to 0.95" in rows[3].claim
    # BN alone: one seed read gives no estimate either
    one = {"bn": [HS["bn"][0], _run(2.0, NONE_FIT)], "none": HS["none"]}
    (c,) = grad_fit.comparisons(one, [0.95], 0.99, 3)[:1]
    assert math.isnan(grad_fit.bn_ratio(c).value) and grad_fit.bn_ratio(c).n == 1


def test_fixed_epochs_are_the_probe_epochs_every_run_reached():
    stopped = {**HS["bn"][0], "grads": HS["bn"][0]["grads"][:2]}  # stopped at fit, epoch 1
    hs = {"bn": [stopped, HS["bn"][1]], "none": HS["none"]}
    assert grad_fit.common_epochs(hs, [0, 1, 2, 3]) == [0, 1]
    kept = grad_fit.restrict(hs, [0, 1])
    assert [[r["epoch"] for r in h["grads"]] for h in kept["none"]] == [[0, 1], [0, 1]]
    assert kept["none"][0]["clean_acc"] == list(NONE_FIT)  # the rest of the history unchanged
    assert grad_fit.probe_schedule("fair", [0, 2], 4) == (0, 1, 2, 3, 4)
    assert grad_fit.probe_schedule("paper", [0, 2], 4) == (0, 2, 4)
    assert text.fixed_reading([0, 1, 2], "paper") == "fixed epochs 1, 2 (the paper's protocol)"


def test_ratio_vs_fit_reads_each_run_at_the_levels():
    runs = {n: grad_fit.trajectories(hs) for n, hs in HS.items()}
    curves = grad_fit.ratio_vs_fit(runs, [0.5, 0.7, 0.95])
    np.testing.assert_allclose(curves["bn"].mean, [6.0, 7.5, 10.5])
    assert curves["none"].reached.tolist() == [2, 2, 0]


def test_each_norm_trains_with_its_chosen_recipe_and_stops_at_fit():
    base = train.TrainConfig(norm="bn", epochs=4, batch_size=32, lr=0.05, seed=0, fit_level=0.3)
    grid = (0.005, 0.0158, 0.05, 0.158, 0.5)
    choices = lr_choice.Recipes(
        (
            lr_choice.choose_lr(grid, [0.1, 0.2, 0.3, 0.9, 0.4], "lenet", "bn"),
            lr_choice.choose_lr(grid, [0.1, 0.2, 0.9, 0.3, 0.4], "lenet", "none"),
        )
    )
    chosen = recipes.NormRecipes("fair", base, choices)
    sp = _toy_split()
    probe = dataclasses.replace(PROBE, epochs=grad_fit.probe_schedule("fair", [], 4))
    trained = {
        n: [units.trained(sp, chosen.config(n, seed=0), probe=probe)] for n in ("bn", "none")
    }
    record = grad_fit.training_record(trained, {n: chosen.lr(n) for n in trained})
    for n, lr in (("bn", 0.158), ("none", 0.05)):
        (r,) = trained[n]
        assert r.config["lr"] == lr and r.config["fit_level"] == 0.3
        assert record[n]["lr"] == lr and record[n]["epochs"] == [r.epochs]
        assert record[n]["censored"] == [r.censored]
        # probed at every epoch it trained, no further
        assert [g["epoch"] for g in r.history["grads"]] == list(range(r.epochs + 1))
    assert any(r.epochs < 4 for rs in trained.values() for r in rs)  # a model stopped at fit


def test_02_parameters_check_the_fit_levels_and_the_protocol():
    ok = params.resolve("02", {"budget": "ci"}).values
    assert ok["protocol"] == "fair" and max(ok["fit_levels"]) <= ok["fit_level"]
    with pytest.raises(ConfigError, match="fit_levels"):
        params.resolve("02", {"budget": "ci", "fit_levels": [0.5, 0.7]})
    with pytest.raises(ConfigError, match="protocol"):
        params.resolve("02", {"budget": "ci", "protocol": "fast"})
    with pytest.raises(ConfigError, match="lr_grid"):
        params.resolve("02", {"budget": "ci", "lr_grid": [0.01, 0.02, 0.03, 0.04, 0.05]})
    paper = params.resolve("02", {"budget": "ci", "protocol": "paper", "fit_levels": [0.7]})
    assert paper.values["protocol"] == "paper"


def test_ratio_vs_fit_figure_passes_the_figure_checks():
    import matplotlib.pyplot as plt

    from bnpaper import plot_gradients, plots

    runs = {n: grad_fit.trajectories(hs) for n, hs in HS.items()}
    curves = grad_fit.ratio_vs_fit(runs, [0.5, 0.7, 0.95])
    names = {"bn": "BN (0.7)", "none": "no-BN (0.7)"}
    fig = plot_gradients.ratio_fit_figure(runs, curves, names, [0.5, 0.7, 0.95], "batch")
    assert plots.audit(fig) == []
    plt.close(fig)


def test_noisy_norm_rows_give_bn_over_no_bn_noisy_median_as_a_geometric_mean_over_seeds():
    (t,) = grad_fit.trajectories([HS["bn"][0]], quantity="log_noisy")
    np.testing.assert_allclose(t.value, np.log([4.0, 8.0, 12.0, 16.0]))  # 2 * (e + 1) * 2
    (c,) = grad_fit.comparisons(HS, [0.7], fit_level=0.99, cap=3, quantity="log_noisy")[:1]
    # BN read halfway between epochs 1 and 2 (log interpolated), no-BN at epoch 2
    bn = np.exp((np.log([4 * 2.0, 4 * 4.0]) + np.log([6 * 2.0, 6 * 4.0])) / 2)
    none = np.array([6 * 1.0, 6 * 1.5])
    (row,) = grad_fit.noisy_norm_rows([c], 0.99, dataset="toy", budget="ci")
    assert row.id == "02.noisy_norm.fit"
    assert row.measured == pytest.approx(math.exp(np.mean(np.log(bn / none))))
    with pytest.raises(ConfigError, match="quantity"):
        grad_fit.trajectories([HS["bn"][0]], quantity="noisy")
