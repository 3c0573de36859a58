"""Notebook 03 under the fair protocol: the norms' recipes reach the shadow configs, a shadow
stops at its fit level and records the epochs it used (or its censoring), and the verdict rows are
read at matched fit."""

import dataclasses

import numpy as np
import pytest

from bnpaper import claims, data, exposure, params, pool_units, shadow, text
from bnpaper.config import ConfigError
from bnpaper.lr_choice import LrChoice, Recipes
from bnpaper.recipes import NormRecipes, paper
from bnpaper.store import Store
from bnpaper.train import TrainConfig

from test_exposure import P03, _dataset, _Fake, _synthetic_scores

GRID = (0.005, 0.0158, 0.05, 0.158, 0.5)
FAIR = {
    **P03,
    "protocol": "fair",
    "norms": ["bn", "none"],
    "lr_grid": list(GRID),
    "n_val": 8,
    "lr_seeds": [0],
    "fit_level": 0.9,
    "epochs": 7,
}


def _recipes(lrs=None, fit_level=0.9, epochs=7) -> NormRecipes:
    """A fair protocol's recipes with each norm's learning rate given (as if searched)."""
    lrs = lrs or {"bn": 0.5, "none": 0.05}
    choices = tuple(
        LrChoice("lenet", n, lr, GRID, (0.1, 0.2, 0.3, 0.2, 0.1), (False,) * 5, 1)
        for n, lr in lrs.items()
    )
    base = TrainConfig.from_params({**FAIR, "fit_level": fit_level, "epochs": epochs})
    return NormRecipes("fair", base, Recipes(choices))


# ---------------------------------------------------------------- the recipe reaches the shadows
def test_the_fair_recipe_gives_each_norms_shadows_its_own_lr_and_the_fit_level(monkeypatch):
    recipe = pool_units.LiraRecipe.from_params({**FAIR, "fit_levels": [0.5, 0.8]}, _recipes())
    bn, none = recipe.train_config("bn"), recipe.train_config("none")
    assert (bn.lr, none.lr) == (0.5, 0.05)
    assert bn.fit_level == none.fit_level == 0.9 and bn.epochs == none.epochs == 7
    calls = []
    monkeypatch.setattr(pool_units, "shadow_pool", lambda *a: calls.append(a) or "pool")
    for norm in ("bn", "none"):
        pool_units.lira_pool(_dataset(), recipe, 0.1, 1, norm)
    assert [(c[1].norm, c[1].lr, c[1].fit_level, c[-1]) for c in calls] == [
        ("bn", 0.5, 0.9, (0.5, 0.8)),  # and the lower levels each shadow is also kept at
        ("none", 0.05, 0.9, (0.5, 0.8)),
    ]
    # a size-sweep variation keeps every norm's learning rate and the fit rule
    small = dataclasses.replace(recipe, n_train=16).train_config("bn")
    assert (small.lr, small.fit_level) == (0.5, 0.9)
    assert recipe.as_dict() == {
        "protocol": "fair",
        "lr": {"bn": 0.5, "none": 0.05},
        "fit_level": 0.9,
        "fit_levels": [0.5, 0.8],
        "epoch_cap": 7,
    }


def test_a_norm_without_a_chosen_lr_and_a_fair_run_without_recipes_are_refused():
    recipe = pool_units.LiraRecipe.from_params(FAIR, _recipes())
    with pytest.raises(ConfigError, match=r"norm='gn' has no learning rate chosen"):
        recipe.train_config("gn")
    with pytest.raises(ConfigError, match=r"protocol='fair' needs the norms' recipes"):
        pool_units.LiraRecipe.from_params(FAIR)


def test_the_papers_protocol_keeps_the_shared_recipe_and_its_cache_keys():
    old = TrainConfig(
        arch="lenet", norm="bn", epochs=1, batch_size=8, lr=0.05, weight_decay=5e-4, augment=False
    )
    base = TrainConfig.from_params(P03)
    for recipe in (
        pool_units.LiraRecipe.from_params(P03),
        pool_units.LiraRecipe.from_params({**P03, "protocol": "paper"}, paper(base)),
    ):
        cfg = recipe.train_config("bn")
        assert cfg == old and "fit_level" not in cfg.as_dict()  # the key it always had
        assert recipe.as_dict()["protocol"] == "paper" and recipe.as_dict()["epochs"] == 1


def test_lira_norm_recipes_search_on_half_the_pool_and_05_reuses_03s_units(tmp_path, monkeypatch):
    ds, store = _dataset(n=200), Store(tmp_path / "c")
    got = exposure.lira_norm_recipes(ds, {**FAIR, "epochs": 1}, store=store)
    assert got.protocol == "fair" and got.search.n_train == FAIR["n_train"] // 2
    assert {c.norm for c in got.choices.choices} == {"bn", "none"}
    assert all(got.lr(n) in GRID for n in ("bn", "none"))
    assert got.base.augment is False  # 'auto' on digits: the shadows' own (off), not "auto"
    from bnpaper import packed_fit

    monkeypatch.setattr(packed_fit, "fit_pack", None)  # a second search trains nothing
    again = exposure.lira_norm_recipes(ds, {**FAIR, "epochs": 1}, store=store)
    assert again.as_dict() == got.as_dict()
    assert exposure.lira_norm_recipes(ds, P03).protocol == "paper"  # no protocol: the paper's


# ---------------------------------------------------------------- training to fit
def _split(n=64):
    ds = _dataset(n=n, n_test=16)
    return data.make_split(ds, n, "none", 0.0, 0, "digits", 16)


@pytest.mark.parametrize("trainer", ["plain", "packed"])
def test_a_shadow_stops_at_its_fit_level_and_records_the_epochs_it_used(tmp_path, trainer):
    split, keep = _split(), shadow.keep_matrix(2, 64, 0)
    fit = TrainConfig(arch="lenet", norm="bn", epochs=30, batch_size=8, lr=0.05, fit_level=0.5)
    pool = shadow.run_shadows(
        split, fit, keep, trainer=trainer, pack_size=2, store=Store(tmp_path), progress=False
    )
    assert pool.epochs.shape == (2,) and (pool.epochs < 30).all() and (pool.epochs >= 1).all()
    assert not pool.censored.any() and (pool.train_clean_acc >= 0.5).all()
    capped = dataclasses.replace(fit, epochs=1, lr=1e-5, fit_level=1.0)
    pool = shadow.run_shadows(
        split, capped, keep, trainer=trainer, pack_size=2, store=Store(tmp_path), progress=False
    )
    assert pool.epochs.tolist() == [1, 1] and pool.censored.all()  # the cap, below the level


def test_without_a_fit_rule_a_shadow_trains_every_epoch_and_is_never_censored(tmp_path):
    split, keep = _split(), shadow.keep_matrix(2, 64, 0)
    cfg = TrainConfig(arch="lenet", norm="none", epochs=2, batch_size=8, lr=0.05)
    pool = shadow.run_shadows(split, cfg, keep, trainer="plain", store=Store(tmp_path))
    assert pool.epochs.tolist() == [2, 2] and not pool.censored.any()


# ---------------------------------------------------------------- verdicts at matched fit
def _pools(train_acc_none=0.99, censored=0, acc_none=0.8):
    scores, shadows = {}, {}
    for sd in (0, 1, 2):
        keep, s = _synthetic_scores(sd, shift_bn=2.0, shift_none=0.0)
        scores[0.0, sd, "bn"], scores[0.0, sd, "none"] = {"online": s["bn"]}, {"online": s["none"]}
        shadows[0.0, sd, "bn"] = _Fake(keep, 0.8, 0.995)
        shadows[0.0, sd, "none"] = _Fake(keep, acc_none, train_acc_none, censored)
    pools = exposure.Pools.of(shadows, {(0.0, sd): np.zeros(60, bool) for sd in (0, 1, 2)})
    return pools, scores


def _row(pools, scores):
    deltas = exposure.online_deltas(pools, scores)
    rows = exposure.verdict_rows(
        pools, scores, deltas, None, None, None, 0.02, dataset="t", budget="ci"
    )
    assert [r.id for r in rows] == ["03.auc.mix0.all"]
    return rows[0]


def test_a_matched_fit_row_is_reproduced_when_both_models_fit_alike():
    row = _row(*_pools())
    assert claims.claim("03.auc.mix0.all")["confound"] == "matched_fit"
    assert row.verdict == "reproduced" and row.measured > 1.0
    assert row.fields["clean_train_acc"] == pytest.approx({"bn": 0.995, "none": 0.99})
    assert row.fields["censored"] == {"bn": 0, "none": 0} and "censored" not in row.magnitude


def test_a_train_acc_gap_beyond_the_tolerance_makes_the_row_inconclusive_and_says_so():
    row = _row(*_pools(train_acc_none=0.95))  # BN fits 4.5 points better than no-BN
    assert row.verdict == "inconclusive"
    assert "clean training accuracy at the reading differs (bn minus none +0.045)" in row.magnitude
    row = _row(*_pools(acc_none=0.75))  # a test-accuracy gap of 5 points
    assert row.verdict == "inconclusive" and "clean test accuracy at the reading" in row.magnitude


def test_a_row_that_rests_on_censored_models_says_so():
    pools, scores = _pools(censored=2)
    assert pools.fit[0.0]["none"]["censored"] == 6 and pools.fit[0.0]["none"]["models"] == 18
    row = _row(pools, scores)
    assert row.fields["censored"] == {"bn": 0, "none": 6}
    assert "depends on censored models" in row.magnitude and "6 no-BN model(s)" in row.magnitude


def test_the_fit_table_gives_each_norms_fit_epochs_and_censored_models():
    pools, _ = _pools(censored=1)
    table = text.fit_table([pools, None], pool_units.LiraRecipe.from_params(FAIR, _recipes()))
    assert "| 0% mix | no-BN | 0.990 | 0.800 | 10.0 / 10 | 3 of 18 |" in table
    assert "reaches 0.9, at most 7 epochs" in table
    got = exposure.fit_results(pools)
    assert got["0.0/bn"]["epochs_mean"] == 10.0 and got["0.0/none"]["censored"] == 3


def test_fit_of_reads_old_pools_without_epochs_as_not_recorded():
    keep = shadow.keep_matrix(2, 8, 0)
    pool = shadow.ShadowPool(
        keep, *(np.zeros((2, 8, 1)),) * 3, keep, *(np.ones(2),) * 3, configs=()
    )
    f = exposure.fit_of([pool])
    assert np.isnan(f["epochs_mean"]) and f["censored"] == 0 and f["models"] == 2


def test_03s_fit_levels_are_sorted_kept_below_fit_level_and_left_out_where_not_read():
    recipe = pool_units.LiraRecipe.from_params({**FAIR, "fit_levels": [0.8, 0.5]}, _recipes())
    assert recipe.fit_levels == (0.5, 0.8)  # one unit key whatever the order given
    rare = recipe.at_end_only(n_train=16)  # the rare-class pools and the sweep's smaller pools
    assert rare.fit_levels == () and rare.n_train == 16 and rare.norm_lr == recipe.norm_lr
    for levels in ([0.95, 0.99], [0.999]):
        with pytest.raises(ConfigError, match=r"fit_levels=.*not below fit_level=0.99"):
            params.resolve("03_lira", {"fit_levels": levels})
    assert params.resolve("03_lira", {"protocol": "paper", "fit_levels": [0.999]})  # unread there
