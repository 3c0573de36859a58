"""scripts/probe_search_seeds.py: the search read seed by seed (synthetic accuracies)."""

import importlib.util
from pathlib import Path

import pytest

from bnpaper.config import ConfigError

_path = Path(__file__).resolve().parents[1] / "scripts" / "probe_search_seeds.py"
_spec = importlib.util.spec_from_file_location("probe_search_seeds", _path)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)

GRID = [0.005, 0.0158, 0.05, 0.158, 0.5]


def test_seed_groups_parse_and_a_repeated_or_bad_seed_is_one_clear_error():
    assert probe.parse_groups(["0,1,2", "3"]) == [(0, 1, 2), (3,)]
    with pytest.raises(ConfigError, match=r"--groups\[1\]='2,3' repeats a seed"):
        probe.parse_groups(["0,1,2", "2,3"])
    with pytest.raises(ConfigError, match=r"--groups\[0\]='a' is not a comma-separated"):
        probe.parse_groups(["a"])


def test_each_group_chooses_by_the_rule_and_the_gaps_are_paired_over_every_seed():
    # group (0, 1) prefers 0.0158, group (2, 3) prefers 0.05; over all four seeds 0.05 wins
    acc = {
        0: [0.80, 0.83, 0.82, 0.81, 0.78],
        1: [0.80, 0.83, 0.82, 0.81, 0.78],
        2: [0.80, 0.80, 0.86, 0.81, 0.78],
        3: [0.80, 0.80, 0.86, 0.81, 0.78],
    }
    fit = {s: [True] * 5 for s in acc}
    fit[0][4] = False  # 0.5 did not fit on seed 0
    out = probe.norm_report(GRID, [(0, 1), (2, 3)], acc, fit)
    assert out["chosen_per_group"] == {"0,1": 0.0158, "2,3": 0.05}
    assert out["chosen_every_seed"] == 0.05
    rates = {r["lr"]: r for r in out["rates"]}
    assert rates[0.05]["mean"] == 0.84 and "vs_chosen_points" not in rates[0.05]
    assert rates[0.5]["fitted"] == "3 of 4"
    # 0.0158 minus 0.05 per seed: +1, +1, -6, -6 points; mean -2.5, sd 4.04, t(0.975, 3) = 3.182
    # gives half-width 3.182 * 4.04 / 2 = 6.43
    assert rates[0.0158]["vs_chosen_points"] == "-2.50 [-8.93, +3.93]"
    # 0.005: -2, -2, -6, -6: mean -4, sd 2.309, half 3.182 * 2.309 / 2 = 3.674
    assert rates[0.005]["vs_chosen_points"] == "-4.00 [-7.67, -0.33]"


def test_a_diverged_seed_fails_its_rate_and_a_group_where_every_rate_failed_picks_none():
    nan = float("nan")
    acc = {
        0: [0.80, 0.83, nan, 0.81, nan],
        1: [nan, nan, 0.82, nan, nan],  # every rate failed on seed 1 (with seed 0's NaNs)
        2: [0.80, 0.84, 0.82, 0.81, 0.78],
    }
    fit = {s: [True] * 5 for s in acc}
    out = probe.norm_report(GRID, [(0, 1), (2,)], acc, fit, "bn")
    assert out["chosen_per_group"] == {"0,1": None, "2": 0.0158}
    assert out["chosen_every_seed"] is None  # no rate trained on every seed
    assert out["per_seed"][1] == [None, None, 0.82, None, None]
    assert all(r["mean"] is None and "vs_chosen_points" not in r for r in out["rates"])
