"""The learning rate of each norm's recipe: the grid's checks and the selection rule."""

import math

import numpy as np
import pytest

from bnpaper import claims, lr_choice as L
from bnpaper.config import ConfigError

GRID = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def test_the_grid_is_log_spaced_deterministic_and_centred_on_its_middle():
    grid = L.lr_grid(0.05, n=5, decades=2.0)
    assert grid == pytest.approx((0.005, 0.05 / 10**0.5, 0.05, 0.05 * 10**0.5, 0.5))
    assert L.lr_grid(0.05, n=5, decades=2.0) == grid
    assert np.diff(np.log10(grid)) == pytest.approx([0.5] * 4)
    # the smallest grid the rule allows passes its own check (no rounding at the ends)
    assert len(L.lr_grid(0.05, n=5, decades=1.5)) == 5


def test_the_rule_picks_the_largest_mean_validation_accuracy_over_seeds():
    acc = [[0.80, 0.85, 0.90, 0.88, 0.70, 0.50], [0.82, 0.86, 0.86, 0.91, 0.72, 0.52]]
    # means 0.81, 0.855, 0.88, 0.895, 0.71, 0.51: the fourth point, not either seed's own best
    choice = L.choose_lr(GRID, acc, "lenet", "bn")
    assert choice.lr == 0.05 and choice.seeds == 2
    assert choice.mean_val_acc == pytest.approx((0.81, 0.855, 0.88, 0.895, 0.71, 0.51))


def test_a_tie_goes_to_the_smaller_learning_rate_in_any_grid_order():
    acc = [0.7, 0.9, 0.8, 0.9, 0.6, 0.5]
    assert L.choose_lr(GRID, acc).lr == 0.01
    # the same grid listed largest first: the accuracies travel with their learning rates
    choice = L.choose_lr(GRID[::-1], acc[::-1])
    assert choice.lr == 0.01 and choice.grid == GRID
    # a difference within the rule's tie tolerance is a tie; a larger one is not
    tol = float(claims.setting("lr_selection")["tie_tolerance"])
    assert L.choose_lr(GRID, [0.7, 0.9, 0.8, 0.9 + tol / 2, 0.6, 0.5]).lr == 0.01
    assert L.choose_lr(GRID, [0.7, 0.9, 0.8, 0.9 + 1e-6, 0.6, 0.5]).lr == 0.05


def test_a_grid_point_with_a_diverged_seed_is_never_chosen():
    # the largest rate has the best accuracy on one seed and diverged (NaN) on the other
    acc = [[0.5, 0.6, 0.7, 0.8, 0.85, 0.99], [0.5, 0.6, 0.7, 0.8, 0.85, math.nan]]
    choice = L.choose_lr(GRID, acc, "lenet", "none")
    assert choice.lr == 0.1 and choice.failed == (False,) * 5 + (True,)
    assert math.isnan(choice.mean_val_acc[-1])
    assert choice.as_dict()["mean_val_acc"][-1] is None
    assert L.choose_lr(GRID, [0.5, math.inf, 0.1, 0.1, 0.1, 0.1]).lr == 0.005
    with pytest.raises(ConfigError, match="every learning rate of grid=.* diverged for arch='a'"):
        L.choose_lr(GRID, [math.nan] * 6, "a", "bn")


@pytest.mark.parametrize(
    "grid,why",
    [
        ([0.01, 0.02, 0.05, 0.5], "has 4 distinct values"),
        ([0.01, 0.01, 0.02, 0.1, 0.5], "has 4 distinct values"),  # 5 listed, one repeated
        ([0.01, 0.02, 0.03, 0.1, 0.3], "spans 1.48 decades"),
        ([0.01, 0.02, 0.1], "has 3 distinct values and spans 1 decades"),
    ],
)
def test_a_grid_too_small_or_too_narrow_is_refused_with_one_error_naming_it(grid, why):
    with pytest.raises(ConfigError) as err:
        L.check_grid("lrs", grid)
    assert str(err.value) == (
        f"lrs={grid!r} {why}; allowed: at least 5 distinct learning rates in (0, 10], the "
        "largest at least 1.5 decades (31.6 times) above the smallest (claims.yaml "
        "settings.lr_selection)"
    )


def test_the_grid_helper_refuses_arguments_below_the_rule():
    with pytest.raises(ConfigError, match=r"n=4 is out of range; allowed: an integer in \[5,"):
        L.lr_grid(0.05, n=4)
    with pytest.raises(ConfigError, match=r"decades=1.0 is out of range.*\[1.5, 10.0\]"):
        L.lr_grid(0.05, decades=1.0)
    with pytest.raises(ConfigError, match=r"lrs\[2\]=-0.1 is out of range"):
        L.check_grid("lrs", [0.01, 0.1, -0.1, 1.0, 2.0])


def test_recipes_hold_one_choice_per_architecture_and_norm():
    recipes = L.choose_recipes(
        {("lenet", "bn"): (GRID, [0.1, 0.2, 0.3, 0.9, 0.4, 0.2]), ("lenet", "none"): (GRID, GRID)}
    )
    assert recipes.lr("lenet", "bn") == 0.05 and recipes.lr("lenet", "none") == 0.2
    assert recipes.as_dict()["lenet"]["none"]["grid"] == list(GRID)
    with pytest.raises(KeyError, match="no learning rate chosen for"):
        recipes.lr("resnet20", "bn")


def test_a_learning_rate_whose_search_models_did_not_fit_is_not_chosen():
    acc = [[0.85, 0.84, 0.82, 0.80, 0.30, 0.2]]  # the slowest learning rate validates best ...
    fitted = [[False, True, True, True, True, True]]  # ... but never fitted within the cap
    choice = L.choose_lr(GRID, acc, "lenet", "none", fitted=fitted)
    assert choice.lr == GRID[1] and not choice.fallback
    assert choice.fitted == (False, True, True, True, True, True)
    # one unfitted seed makes the grid point ineligible
    other = [True, False, True, True, True, True]
    two = L.choose_lr(GRID, [acc[0], acc[0]], fitted=[fitted[0], other])
    assert two.lr == GRID[2]


def test_when_no_learning_rate_fitted_the_choice_falls_back_to_validation_and_says_so():
    acc = [[0.85, 0.84, 0.82, 0.80, 0.5, float("nan")]]
    choice = L.choose_lr(GRID, acc, fitted=[[False] * 6])
    assert choice.lr == GRID[0] and choice.fallback
    assert choice.as_dict()["fallback"] is True


WD = (0.0005, 0.0015, 0.005)


def test_the_weight_decay_rule_takes_the_best_fitted_mean_and_ties_go_to_the_smallest():
    acc = [[0.80, 0.82, 0.84], [0.80, 0.84, 0.86]]  # means 0.80, 0.83, 0.85
    fit = [[True, True, False], [True, True, True]]  # 0.005 unfitted on seed 0: not eligible
    c = L.choose_wd(WD, acc, fit, "none", 0.158, epochs=(20.0, 24.0, 39.0))
    assert (c.weight_decay, c.lr, c.seeds, c.fallback) == (0.0015, 0.158, 2, False)
    assert c.mean_val_acc == pytest.approx((0.80, 0.83, 0.85))
    assert c.fitted == (True, True, False) and c.epochs == (20.0, 24.0, 39.0)
    tied = L.choose_wd(WD, [[0.8, 0.8, 0.7]], [[True] * 3], "bn", 0.05)
    assert tied.weight_decay == 0.0005 and all(math.isnan(e) for e in tied.epochs)
    # a diverged seed fails its point; no fitted point: the best that did not fail, marked
    c = L.choose_wd(WD, [[0.7, math.nan, 0.6]], [[False] * 3], "none", 0.5)
    assert (c.weight_decay, c.failed, c.fallback) == (0.0005, (False, True, False), True)
    assert c.as_dict()["mean_val_acc"] == [0.7, None, 0.6]


def test_a_weight_decay_grid_that_diverged_everywhere_or_is_not_a_grid_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"every weight decay of wd_grid=\[0.0005, 0.0015\] "):
        L.choose_wd(WD[:2], [[math.nan, math.inf]], [[True, True]], "none", 0.5)
    assert L.check_wd_grid("wd_grid", [0.005, 0.0005], 0.0005) == (0.0005, 0.005)
    for grid in ([0.0005], [0.0015, 0.005], [0.0005, 0.0005]):
        with pytest.raises(ConfigError, match=r"is not a weight-decay grid for weight_decay"):
            L.check_wd_grid("wd_grid", grid, 0.0005)
    with pytest.raises(ConfigError, match=r"wd_grid\[1\]=2.0 is out of range"):
        L.check_wd_grid("wd_grid", [0.0005, 2.0], 0.0005)
    with pytest.raises(ValueError, match="must be ascending and distinct"):
        L.choose_wd((0.005, 0.0005), [[0.8, 0.8]], [[True, True]], "bn", 0.05)
    with pytest.raises(ValueError, match="one value per grid point"):
        L.choose_wd(WD[:2], [[0.8, 0.8]], [[True, True]], "bn", 0.05, epochs=(3.0,))


def test_an_unsorted_grid_reorders_its_accuracies_and_fit_flags_together():
    acc = [[0.80, 0.82, 0.84, 0.83, 0.81, 0.79]]
    fit = [[True, True, False, True, True, True]]  # 0.02 unfitted: 0.05 wins, not 0.02
    ordered = L.choose_lr(GRID, acc, fitted=fit)
    shuffled = L.choose_lr(GRID[::-1], [a[::-1] for a in acc], fitted=[f[::-1] for f in fit])
    assert ordered.lr == 0.05 and shuffled.as_dict() == ordered.as_dict()
