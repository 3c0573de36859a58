"""The report's table of each norm's fit (bnpaper.fit_tables), on results the test writes."""

import json

from bnpaper import fit_tables, report


def _write(root, nb, label, res):
    path = root / "results" / nb / label / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(res))


def _forced(protocol="fair"):
    return {
        "params": {"arch": "resnet20"},
        "recipes": {"protocol": protocol, "lr": {"bn": 0.158, "none": 0.0158}},
        "epochs_used": {
            "flip": {
                "bn": {
                    "fitted": 3,
                    "runs": 3,
                    "mean": 12.0,
                    "max": 14.0,
                    "train_acc": 0.995,
                    "test_acc": 0.80,
                },
                "none": {
                    "fitted": 2,
                    "runs": 3,
                    "mean": 31.5,
                    "max": 40.0,
                    "train_acc": 0.981,
                    "test_acc": 0.774,
                },
                "none x2": {
                    "fitted": 1,
                    "runs": 3,
                    "mean": 38.0,
                    "max": 40.0,
                    "train_acc": 0.95,
                    "test_acc": 0.75,
                },
            }
        },
    }


def _lira():
    per = {
        "0.05/0/bn": {"test_acc": [0.80, 0.82]},
        "0.05/1/bn": {"test_acc": [0.84]},
        "0.05/0/none": {"test_acc": [0.79, 0.81]},
        "0.05/1/none": {"test_acc": [0.77]},
    }
    fit = {
        "0.05/bn": {
            "models": 3,
            "censored": 0,
            "epochs_mean": 10.0,
            "epochs_max": 11.0,
            "train_clean_acc": 0.993,
        },
        "0.05/none": {
            "models": 3,
            "censored": 1,
            "epochs_mean": 20.0,
            "epochs_max": 40.0,
            "train_clean_acc": 0.99,
        },
    }
    return {
        "params": {"arch": "lenet"},
        "recipes": {"protocol": "fair", "lr": {"bn": 0.05, "none": 0.05}, "fit": fit},
        "per_model": per,
    }


def test_the_effective_lr_arms_rate_is_that_multiple_of_its_norms():
    lrs = {"bn": 0.158, "none": 0.0158}
    assert fit_tables.norm_lr(lrs, "none") == 0.0158
    assert fit_tables.norm_lr(lrs, "none x2") == 2 * 0.0158
    assert fit_tables.norm_lr(lrs, "gn") is None


def test_each_fair_configuration_gives_one_row_per_kind_and_norm_with_its_gap_to_bn(tmp_path):
    _write(tmp_path, "01_forced_memorization", "fashion_mnist.full.arch=resnet20", _forced())
    _write(tmp_path, "01_forced_memorization", "fashion_mnist.full", _forced("paper"))
    _write(tmp_path, "03_lira", "fashion_mnist", _lira())
    rows = fit_tables.fit_table(tmp_path).splitlines()[2:]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert [c[1] for c in cells] == ["fashion_mnist.full.arch=resnet20"] * 3 + ["fashion_mnist"] * 2
    bn, none, arm, lbn, lnone = cells
    assert bn[2:] == [
        "resnet20",
        "flip",
        "bn",
        "0.158",
        "3 of 3",
        "12.0 (14)",
        "0.995",
        "0.800",
        "-",
    ]
    assert none[4:] == ["none", "0.0158", "2 of 3", "31.5 (40)", "0.981", "0.774", "-2.6"]
    assert arm[4:6] == ["none x2", "0.0316"] and arm[-1] == "-5.0"
    # 03: over every shadow of every pool (BN 0.82, no-BN 0.79), censored shadows not fitted
    assert lbn[3:] == ["5% mix", "bn", "0.05", "3 of 3", "10.0 (11)", "0.993", "0.820", "-"]
    assert lnone[6:] == ["2 of 3", "20.0 (40)", "0.990", "0.790", "-3.0"]


def test_a_searched_weight_decay_stands_beside_each_norms_lr(tmp_path):
    res = _forced()
    res["recipes"]["weight_decay"] = {"bn": 0.0005, "none": 0.0015}
    _write(tmp_path, "01_forced_memorization", "fashion_mnist.full.arch=resnet20", res)
    rows = fit_tables.fit_table(tmp_path).splitlines()[2:]
    lr_cells = [[c.strip() for c in r.strip("|").split("|")][5] for r in rows]
    assert lr_cells == ["0.158, wd 0.0005", "0.0158, wd 0.0015", "0.0316, wd 0.0015"]


def test_the_report_shows_the_table_only_when_a_fair_configuration_is_committed(tmp_path):
    _write(tmp_path, "01_forced_memorization", "fashion_mnist", _forced("paper"))
    assert fit_tables.fit_table(tmp_path) == ""
    assert "Each norm's fit" not in report.render(tmp_path)
    _write(tmp_path, "01_forced_memorization", "mnist_subset", _forced())
    assert "## Each norm's fit (the fair protocol)" in report.render(tmp_path)


def test_the_gap_to_bn_carries_a_t_interval_over_the_paired_seeds_and_pools(tmp_path):
    forced = _forced()
    finals = {"bn": [0.80, 0.82, 0.78], "none": [0.77, 0.79, 0.76], "none x2": [0.75, 0.75, 0.75]}
    forced["histories"] = {
        f"flip/{norm}/{seed}": {"test_acc": [0.1, acc]}
        for norm, accs in finals.items()
        for seed, acc in enumerate(accs)
    }
    lira = _lira()  # balanced pools: two shadows each, so the pools' mean gap is the overall one
    lira["per_model"] = {
        "0.05/0/bn": {"test_acc": [0.80, 0.82]},
        "0.05/1/bn": {"test_acc": [0.84, 0.86]},
        "0.05/0/none": {"test_acc": [0.79, 0.81]},
        "0.05/1/none": {"test_acc": [0.79, 0.81]},
    }
    _write(tmp_path, "01_forced_memorization", "fashion_mnist.full.arch=resnet20", forced)
    _write(tmp_path, "03_lira", "fashion_mnist", lira)
    rows = fit_tables.fit_table(tmp_path).splitlines()[2:]
    gaps = [[c.strip() for c in r.strip("|").split("|")][-1] for r in rows]
    # 01: per-seed differences -3, -3, -2 points: mean -2.67, sd 0.577, t(0.975, 2) = 4.303
    # gives half-width 4.303 * 0.577 / sqrt(3) = 1.43; the x2 arm: -5, -7, -3 (sd 2, half 4.97)
    assert gaps[:3] == ["-", "-2.7 [-4.1, -1.2]", "-5.0 [-10.0, -0.0]"]
    # 03: pool differences -1 and -5 points: mean -3, sd 2.83, t(0.975, 1) = 12.71, half 25.4
    assert gaps[3:] == ["-", "-3.0 [-28.4, +22.4]"]


def test_a_norm_is_paired_with_its_own_seeds_only(tmp_path):
    forced = _forced()
    del forced["epochs_used"]["flip"]["none x2"]
    forced["histories"] = {
        "flip/bn/0": {"test_acc": [0.80]},
        "flip/bn/1": {"test_acc": [0.82]},
        "flip/none/0": {"test_acc": [0.78]},
        "flip/none/1": {"test_acc": [0.79]},
        # the lr curve's BN at another rate: a norm of its own, never mixed into "bn"
        "flip/bn lr 0.5/0": {"test_acc": [0.10]},
        "flip/bn lr 0.5/1": {"test_acc": [0.10]},
    }
    _write(tmp_path, "01_forced_memorization", "fashion_mnist.full.arch=resnet20", forced)
    rows = fit_tables.fit_table(tmp_path).splitlines()[2:]
    gaps = [[c.strip() for c in r.strip("|").split("|")][-1] for r in rows]
    # -2 and -3 points: mean -2.5, sd 0.707, t(0.975, 1) = 12.71, half 6.35
    assert gaps == ["-", "-2.5 [-8.9, +3.9]"]


def test_a_non_finite_accuracy_gives_no_interval(tmp_path):
    forced = _forced()
    finals = {"bn": [0.80, 0.80], "none": [0.774, float("nan")], "none x2": [0.75, 0.75]}
    forced["histories"] = {
        f"flip/{norm}/{seed}": {"test_acc": [acc]}
        for norm, accs in finals.items()
        for seed, acc in enumerate(accs)
    }
    lira = _lira()
    lira["per_model"] = {
        "0.05/0/bn": {"test_acc": [0.80, 0.82]},
        "0.05/1/bn": {"test_acc": [0.84, 0.86]},
        "0.05/0/none": {"test_acc": [0.79, float("nan")]},
        "0.05/1/none": {"test_acc": [0.79, 0.81]},
    }
    _write(tmp_path, "01_forced_memorization", "fashion_mnist.full.arch=resnet20", forced)
    _write(tmp_path, "03_lira", "fashion_mnist", lira)
    rows = fit_tables.fit_table(tmp_path).splitlines()[2:]
    gaps = [[c.strip() for c in r.strip("|").split("|")][-1] for r in rows]
    # no interval where a value is NaN: the difference of the means (01's epochs_used; 03's
    # finite shadows, 0.797 against 0.83); the x2 arm's seeds are all finite (no spread)
    assert gaps == ["-", "-2.6", "-5.0 [-5.0, -5.0]", "-", "-3.3"]


def test_without_paired_replicates_the_gap_is_the_difference_of_the_means(tmp_path):
    forced = _forced()
    forced["histories"] = {"flip/bn/0": {"test_acc": [0.8]}, "flip/none/1": {"test_acc": [0.7]}}
    _write(tmp_path, "01_forced_memorization", "fashion_mnist.full.arch=resnet20", forced)
    _write(tmp_path, "03_lira", "fashion_mnist", _lira())  # pools of 2 and 1 shadows: unbalanced
    rows = fit_tables.fit_table(tmp_path).splitlines()[2:]
    gaps = [[c.strip() for c in r.strip("|").split("|")][-1] for r in rows]
    assert gaps == ["-", "-2.6", "-5.0", "-", "-3.0"]
