"""Notebook 01's and 03's measurements: crossings, memorization of rare samples, verdict signs."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from bnpaper import exposure, memorization as M, shadow


def test_crossing_interpolates_between_evaluated_epochs_and_never_is_inf():
    assert M.crossing([0.1, 0.5, 0.9], [0, 1, 2], 0.7) == pytest.approx(1.5)
    assert M.crossing([0.9, 0.95], [0, 1], 0.5) == 0.0  # already there at the start
    assert M.crossing([0.1, 0.2], [0, 1], 0.5) == math.inf
    assert M.at_epoch([0.0, 0.2, 0.6], [0, 1, 2], 1.5) == pytest.approx(0.4)
    assert math.isnan(M.at_epoch([0.0, 1.0], [0, 1], math.inf))


def test_memorization_of_rare_samples_is_trained_minus_held_out_accuracy():
    h = {"noisy_acc": [0.2, 0.9], "rare_test_acc": [0.2, 0.6]}
    assert np.allclose(M.memorization_curve(h, "rare"), [0.0, 0.3])
    assert np.allclose(
        M.memorization_curve(h, "flip"), [0.2, 0.9]
    )  # flips: accuracy on their labels


def _history(speed, mem_end, e=4):
    t = np.arange(e + 1)
    clean = 1 - 0.9 * np.exp(-speed * t)
    return {
        "epoch": list(t),
        "clean_acc": list(clean),
        "test_acc": list(clean - 0.05),
        "noisy_acc": list(mem_end * t / e),
        "rare_test_acc": [math.nan] * (e + 1),
        "noisy_loss": list(2 - mem_end * t / e),
        "noisy_true_acc": [0.0] * (e + 1),
    }


def test_typical_rows_are_positive_when_bn_learns_faster_and_the_cost_is_read_at_equal_accuracy():
    seeds = (0, 1, 2)
    runs = {
        ("flip", n, s): _history(sp + 0.01 * s, m)
        for s in seeds
        for n, sp, m in (("bn", 2.0, 0.6), ("none", 0.5, 0.2))
    }
    R = M.Runs(runs, seeds)
    rows = {
        r["id"]: r
        for r in M.verdict_rows(R, ["flip"], ["bn", "none"], 0.8, dataset="toy", budget="ci")
    }
    e_bn, e_none = R.level_epochs("flip", "bn", 0.8), R.level_epochs("flip", "none", 0.8)
    assert rows["01.typical.epochs"]["measured"] == pytest.approx(float(np.mean(e_none - e_bn)))
    assert rows["01.typical.epochs"]["measured"] > 0 and rows["01.typical.auc"]["measured"] > 0
    cost = np.mean(0.6 * e_bn / 4 - 0.2 * e_none / 4)  # memorization grows linearly with the epoch
    assert rows["01.typical.cost"]["measured"] == pytest.approx(cost)
    assert rows["01.final.flip"]["measured"] == pytest.approx(0.4)


def test_a_no_bn_run_that_never_reaches_the_level_counts_at_the_last_epoch_but_bn_never_does():
    seeds = (0, 1, 2)
    runs = {
        ("flip", n, s): _history(sp, 0.3)
        for s in seeds
        for n, sp in (("bn", 2.0), ("none", 0.5 if s else 0.1))
    }
    R = M.Runs(runs, seeds)
    assert np.isinf(R.level_epochs("flip", "none", 0.8)[0])  # seed 0 of no-BN never gets there
    row = M.verdict_rows(R, ["flip"], ["bn", "none"], 0.8)[0]
    e_bn, e_none = R.level_epochs("flip", "bn", 0.8), R.level_epochs("flip", "none", 0.8)
    e_none[0] = 4.0  # the last evaluated epoch
    assert row["measured"] == pytest.approx(float(np.mean(e_none - e_bn))) and np.isfinite(
        row["lo"]
    )
    assert "1 no-BN run(s) never reached it" in row["unit"]
    swapped = {
        ("flip", n, s): h
        for (c, m, s), h in runs.items()
        for n in [{"bn": "none", "none": "bn"}[m]]
    }
    back = M.verdict_rows(M.Runs(swapped, seeds), ["flip"], ["bn", "none"], 0.8)[0]
    assert (
        np.isnan(back["measured"]) and back["verdict"] == "inconclusive"
    )  # BN censored: no estimate


def test_rare_exposure_measures_the_rare_members_apart_from_the_rest():
    m, n = 8, 40
    keep = shadow.keep_matrix(m, n, seed=0)
    rare = np.zeros(n, bool)
    rare[:10] = True
    rng = np.random.default_rng(0)

    def pool(sep):  # phi: members of the rare class stand out by `sep` when IN, the rest do not
        phi = rng.normal(0, 1, (m, n, 1)) + sep * (keep & rare)[..., None]
        return SimpleNamespace(
            phi=phi, keep=keep, correct=keep | ~rare, test_acc=np.full(m, 0.8), gap=np.full(m, 0.1)
        )

    pools = {(0, "bn"): pool(6.0), (0, "none"): pool(0.0)}
    rx = exposure.rare_exposure(pools, {0: rare}, ["bn", "none"], [0], sigma_floor=1e-3, n_boot=50)
    assert rx["auc"]["bn"]["rare"].value > 0.85 and abs(rx["auc"]["none"]["rare"].value - 0.5) < 0.2
    assert rx["delta"]["rare"].value > 30 and abs(rx["delta"]["common"].value) < 15  # AUC points
    assert rx["mem"]["bn"]["rare"] == pytest.approx(1.0) and rx["mem"]["bn"]["common"] == 0.0
    assert rx["n"] == {"all": 40, "rare": 10, "common": 30}
