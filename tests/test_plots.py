"""The mechanical figure checks (plots.audit) and the figure style helpers."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bnpaper import plots  # noqa: E402


def _fig():
    fig, ax = plt.subplots(figsize=(4, 3))
    return fig, ax


def test_a_clean_figure_passes():
    fig, ax = _fig()
    x = np.arange(6)
    plots.band(ax, x, np.vstack([x / 6, x / 5]), "bn")
    ax.set(xlabel="epoch", ylabel="memorization", ylim=(0, 2))
    ax.legend(loc="upper left")
    assert plots.audit(fig) == []


def test_an_unlabelled_axis_is_reported():
    fig, ax = _fig()
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="false positive rate")
    assert plots.audit(fig) == ["axes 0 (untitled): the y axis has no label"]


def test_hidden_tick_labels_in_a_shared_grid_need_no_label():
    fig, axes = plt.subplots(2, 1, sharex=True)
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_ylabel("y")
    axes[1].set_xlabel("x")
    assert plots.audit(fig) == []


def test_a_legend_over_plotted_points_is_reported():
    fig, ax = _fig()
    ax.scatter(np.linspace(0, 1, 50), np.full(50, 0.95), label="points along the top")
    ax.set(xlabel="x", ylabel="y", xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper center")
    (problem,) = plots.audit(fig)
    assert "the legend covers" in problem


def test_fractional_epoch_ticks_are_reported_and_band_prevents_them():
    fig, ax = _fig()
    ax.plot([0, 1, 2], [0, 1, 0])
    ax.set(xlabel="epoch", ylabel="loss")
    assert any("fractional ticks" in p for p in plots.audit(fig))
    fig, ax = _fig()
    plots.band(ax, [0, 1, 2], np.array([[0, 1, 0]]), "bn")
    ax.set(xlabel="epoch", ylabel="loss")
    assert plots.audit(fig) == []


def test_strict_mode_refuses_to_save_a_bad_figure(monkeypatch, tmp_path):
    monkeypatch.setenv("BNPAPER_OUTPUT", str(tmp_path))
    monkeypatch.setenv("BNPAPER_STRICT_FIGURES", "1")
    fig, ax = _fig()
    ax.plot([0, 1], [0, 1])
    with pytest.raises(plots.FigureProblem, match=r"figure 01_forced_memorization/bad: .*no label"):
        plots.save_figure(fig, "01_forced_memorization", "toy", "bad")
    assert not list(tmp_path.rglob("*.png"))


def test_saving_records_each_figures_audit(monkeypatch, tmp_path):
    import json

    monkeypatch.setenv("BNPAPER_OUTPUT", str(tmp_path))
    fig, ax = _fig()
    ax.plot([0, 1], [0, 1])
    with pytest.warns(UserWarning, match="no label"):
        plots.save_figure(fig, "03_lira", "toy", "bad")
    ax.set(xlabel="x", ylabel="y")
    plots.save_figure(fig, "03_lira", "toy", "good")
    rec = json.loads((tmp_path / "figures" / "03_lira" / "toy" / "figure_checks.json").read_text())
    assert rec["good"] == [] and rec["bad"] == [
        "axes 0 (untitled): the x axis has no label",
        "axes 0 (untitled): the y axis has no label",
    ]


def _medians(scale: float):
    from bnpaper.grad_analysis import Medians

    noisy = scale * np.array([[1.0, 2.0, 4.0], [1.5, 2.5, 5.0]])
    return Medians(noisy, np.ones((2, 3)), noisy / (noisy + 9))


def test_notebook_02_figures_pass_the_figure_checks():
    from bnpaper import plot_gradients as pg

    epochs, names = [0, 1, 2], {"bn": "BN (0.9)", "none": "no-BN (0.8)"}
    medians = {mode: {"bn": _medians(2.0), "none": _medians(1.0)} for mode in ("batch", "eval")}
    medians["batch_fixed"] = medians["batch"]
    titles = {"batch": "batch statistics", "eval": "running statistics"}
    rng = np.random.default_rng(0)
    pooled = {(n, e): (rng.normal(0, 1, 40), np.arange(40) < 10) for n in names for e in epochs}
    words = {**titles, "batch_fixed": "held fixed"}
    fixed = {"bn": (np.ones((2, 3)), np.full((2, 3), 1.2))}
    groups = {names[n]: {"weight": np.ones((2, 3)), "gamma": np.full((2, 3), 2.0)} for n in names}
    figures = [
        pg.histogram_figure(pooled, names, "batch statistics, 2 seeds pooled"),
        pg.median_figure(epochs, medians, names, titles, "bars: range"),
        pg.ratio_figure(epochs, medians, names, titles, (0.1, 200), "bars: range"),
        pg.fixed_statistics_figure(epochs, fixed, medians, names, words, "per sample", "bars"),
        pg.group_ratio_figure(epochs, groups, "median noisy / median clean norm", "bars"),
    ]
    for fig in figures:
        assert plots.audit(fig) == []
        plt.close(fig)


def test_notebook_01_loss_and_accuracy_figures_pass_the_figure_checks():
    from bnpaper import plot_memorization as pm

    epochs = np.arange(4)
    curve = np.vstack([np.linspace(2, 0.5, 4), np.linspace(2.2, 0.6, 4)])
    by_norm = {"flip": {"bn": curve, "none": curve * 1.1}}
    titles = {"flip": "label flips: 10 of 100"}
    fig = pm.loss_figure(epochs, by_norm, by_norm, {"flip": "flipped"}, titles, "band: range")
    assert plots.audit(fig) == []
    fig = pm.clean_accuracy_figure(epochs, {"flip": {"bn": curve / 3}}, titles, "band: range")
    assert plots.audit(fig) == []
    plt.close("all")
