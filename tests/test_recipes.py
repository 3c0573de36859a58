"""Each norm's recipe: the learning-rate search on held-out data, its rule, the paper's protocol."""

import math

import pytest
import torch

from bnpaper import data, lr_choice, recipes, text, units
from bnpaper.config import ConfigError
from bnpaper.train import TrainConfig

GRID = [0.001, 0.003, 0.01, 0.1, 10.0]  # 10: a learning rate a no-BN LeNet cannot train at


def _dataset(n=400, n_test=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n + n_test,), generator=g)
    x = (torch.rand(n + n_test, 1, 28, 28, generator=g) * 60).to(torch.uint8)
    x[torch.arange(n + n_test), 0, 4 + 5 * y, 4:24] = 255
    return data.Dataset("fashion_mnist", x[:n], y[:n], x[n:], y[n:], 4, (0.2,), (0.3,))


def _params(**changes):
    p = dict(
        protocol="fair",
        lr_grid=GRID,
        n_val=100,
        lr_seeds=[0],
        n_train=64,
        epochs=2,
        batch_size=16,
        lr=0.05,
        weight_decay=5e-4,
        arch="lenet",
        fit_level=0.99,
    )
    return {**p, **changes}


def test_the_search_chooses_by_the_rule_from_the_validation_accuracies_of_its_own_units():
    ds = _dataset()
    chosen = recipes.norm_recipes(ds, _params(), ["bn", "none"])
    search = recipes.Search.from_params(_params())
    splits = recipes.search_splits(ds, search)
    for norm in ("bn", "none"):
        jobs = [
            units.Job(
                splits[0], TrainConfig(norm=norm, lr=lr, epochs=2, batch_size=16, fit_level=0.99)
            )
            for lr in search.grid
        ]
        again = units.trained_or_diverged(jobs)  # the same units: loaded, not trained
        acc = [math.nan if r is None else r.history["test_acc"][-1] for r in again]
        fitted = [r is not None and r.history["clean_acc"][-1] >= 0.99 for r in again]
        want = lr_choice.choose_lr(search.grid, acc, "lenet", norm, fitted=fitted)
        assert chosen.choice(norm).as_dict() == want.as_dict()
        assert chosen.lr(norm) == want.lr
        cfg = chosen.config(norm, seed=3)
        assert (cfg.norm, cfg.lr, cfg.seed, cfg.fit_level) == (norm, want.lr, 3, 0.99)
    # the validation images are held out of the search's training images and come from the
    # training set: the search never sees a test image
    split = splits[0]
    assert len(split.x_test) == 100 and len(split.x) == 64
    assert not torch.equal(split.x_test[:1], ds.x_test[:1])


def test_a_diverged_grid_point_fails_is_stored_and_is_never_chosen(tmp_path, monkeypatch):
    ds = _dataset()
    chosen = recipes.norm_recipes(ds, _params(), ["none"])
    choice = chosen.choice("none")
    assert choice.failed[-1] and math.isnan(choice.mean_val_acc[-1]) and choice.lr != 10.0
    from bnpaper import packed_fit

    with monkeypatch.context() as m:
        m.setattr(packed_fit, "fit_pack", None)  # the divergence is stored: nothing trains
        again = recipes.norm_recipes(ds, _params(), ["none"])
    assert again.choice("none").as_dict() == choice.as_dict()
    split = recipes.search_splits(ds, recipes.Search.from_params(_params()))[0]
    cfg = TrainConfig(norm="none", lr=10.0, epochs=2, batch_size=16, fit_level=0.99)
    assert units.trained_or_diverged([units.Job(split, cfg)]) == [None]  # alone, it diverges too


def test_the_papers_protocol_trains_every_norm_with_one_lr_for_fixed_epochs():
    chosen = recipes.norm_recipes(_dataset(), _params(protocol="paper", lr=0.02), ["bn", "none"])
    assert chosen.choices is None and chosen.base.fit_level is None
    for norm in ("bn", "none"):
        cfg = chosen.config(norm, seed=1)
        assert (cfg.lr, cfg.epochs, cfg.fit_level) == (0.02, 2, None)
    assert chosen.as_dict()["protocol"] == "paper"
    assert "lr 0.02 for 2 epochs" in text.recipe_table(chosen)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"protocol": "fast"}, "protocol='fast'"),
        ({"fit_level": None}, "fit_level=None with protocol='fair'"),
        ({"lr_grid": [0.01, 0.02, 0.03, 0.04, 0.05]}, "spans"),
        ({"lr_seeds": []}, "lr_seeds=\\[\\] is empty"),
    ],
)
def test_a_bad_recipe_parameter_is_one_clear_error_before_any_training(changes, match):
    with pytest.raises(ConfigError, match=match):
        recipes.check_protocol(_params(**changes))


def test_each_norms_weight_decay_is_chosen_by_the_rule_at_its_chosen_lr_on_the_same_seeds(
    monkeypatch,
):
    ds = _dataset()
    p = _params(wd_grid=[0.05, 5e-4], lr_seeds=[0, 1])  # 5e-4: the recipe's own
    asked = []
    train = units.trained_or_diverged

    def counted(jobs, *args, **kwargs):
        asked.append(len(jobs))
        return train(jobs, *args, **kwargs)

    monkeypatch.setattr(units, "trained_or_diverged", counted)
    chosen = recipes.norm_recipes(ds, p, ["bn", "none"])
    # the lr search's 5 x 2 x 2 models, then only the other weight decay's: 1 x 2 seeds x 2 norms
    assert asked == [20, 4]
    search = recipes.Search.from_params(p)
    assert search.wd_grid == (5e-4, 0.05)
    splits = recipes.search_splits(ds, search)
    for norm in ("bn", "none"):
        lr = chosen.lr(norm)
        runs = []
        for s in (0, 1):
            cfgs = [
                TrainConfig(
                    norm=norm,
                    lr=lr,
                    epochs=2,
                    batch_size=16,
                    fit_level=0.99,
                    weight_decay=w,
                    seed=s,
                )
                for w in search.wd_grid
            ]
            runs.append(train([units.Job(splits[s], c) for c in cfgs]))  # loaded
        acc = [[math.nan if r is None else r.history["test_acc"][-1] for r in row] for row in runs]
        fitted = [[r is not None and not r.censored for r in row] for row in runs]
        epochs = [sum(r.epochs for r in col) / 2 for col in zip(*runs)]
        want = lr_choice.choose_wd(search.wd_grid, acc, fitted, norm, lr, epochs)
        got = next(c for c in chosen.wd_choices if c.norm == norm)
        assert got.as_dict() == want.as_dict()
        # the recipe's own weight decay is the learning-rate search's model at the chosen rate
        at_lr = chosen.choice(norm).grid.index(lr)
        assert got.mean_val_acc[0] == chosen.choice(norm).mean_val_acc[at_lr]
        cfg = chosen.config(norm, seed=2)
        assert (cfg.lr, cfg.weight_decay, cfg.seed) == (lr, want.weight_decay, 2)
        assert chosen.weight_decay(norm) == want.weight_decay
    record = chosen.as_dict()
    assert record["weight_decay"] == {n: chosen.weight_decay(n) for n in ("bn", "none")}
    assert set(record["search"]["wd_choices"]) == {"bn", "none"}
    assert "chosen weight decay" in text.recipe_table(chosen)
    # without a wd_grid every norm keeps the recipe's weight decay, and nothing more is recorded
    plain = recipes.norm_recipes(ds, _params(), ["bn", "none"])
    assert plain.wd_choices == () and plain.config("none").weight_decay == 5e-4
    assert "weight_decay" not in plain.as_dict()
    assert "chosen weight decay" not in text.recipe_table(plain)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"protocol": "paper", "wd_grid": [5e-4, 5e-3]}, "wd_grid=.* with protocol='paper'"),
        ({"wd_grid": [1e-3, 5e-3]}, "is not a weight-decay grid for weight_decay=0.0005"),
    ],
)
def test_a_bad_weight_decay_grid_is_one_clear_error_before_any_training(changes, match):
    with pytest.raises(ConfigError, match=match):
        recipes.check_protocol(_params(**changes))
    from bnpaper import params
    from bnpaper.declarations import check_values

    values = {**params.defaults("01_forced_memorization"), **changes}
    with pytest.raises(ConfigError, match=match):
        check_values("01_forced_memorization", values)
