"""Notebook 03's machinery: the shared LiRA pool builder (03 and 05 get the same units), the
example groups, the paired delta-AUC over every pool in one bootstrap, the verdict rows, the
pools with a rare class, and the size sweep (its pools, the weighted trend on log2 N, the
reading, the figure, the parameter rules)."""

import dataclasses

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from scipy import stats as sps  # noqa: E402

from bnpaper import data, exposure, mia, params, plot_lira, plots, shadow, size_trend, text  # noqa: E402
from bnpaper import pool_effects, pool_units, units  # noqa: E402
from bnpaper.config import ConfigError  # noqa: E402
from bnpaper.mitigation import MitigationConfig  # noqa: E402
from bnpaper.shadow import ShadowPool  # noqa: E402
from bnpaper.stats import Estimate  # noqa: E402
from bnpaper.store import Store  # noqa: E402
from bnpaper.train import TrainConfig  # noqa: E402


def _dataset(n=200, n_test=40, seed=0):
    """Stripes by class (4 classes): learnable in one epoch."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n + n_test,), generator=g)
    x = (torch.rand(n + n_test, 1, 28, 28, generator=g) * 60).to(torch.uint8)
    x[torch.arange(n + n_test), 0, 4 + 5 * y, 4:24] = 255
    return data.Dataset("fashion_mnist", x[:n], y[:n], x[n:], y[n:], 4, (0.2,), (0.3,))


P03 = {
    "dataset": "fashion_mnist",
    "augment": "auto",
    "arch": "lenet",
    "epochs": 1,
    "batch_size": 8,
    "lr": 0.05,
    "weight_decay": 5e-4,
    "n_train": 32,
    "n_test": 16,
    "outlier_kind": "flip",
    "ood_source": "digits",
    "n_shadows": 2,
    "executor": "inprocess",
    "trainer": "auto",
    "pack_size": 8,
    "bn_query_mode": "eval",
    "rare_share": 0.1,
    "rare_class": -1,
}
RECIPE = pool_units.LiraRecipe.from_params(P03)


def _recipe(**changes):
    return dataclasses.replace(RECIPE, **changes)


# ---------------------------------------------------------------- the shared pool builder
def test_lira_pool_trains_the_units_a_hand_built_pool_of_03s_recipe_finds(tmp_path):
    ds, store = _dataset(), Store(tmp_path / "cache")
    pool = pool_units.lira_pool(ds, RECIPE, 0.1, 3, "bn", store=store)
    split = data.make_split(ds, 32, "flip", 0.1, 3, "digits", 16)
    base = TrainConfig(
        arch="lenet", norm="bn", epochs=1, batch_size=8, lr=0.05, weight_decay=5e-4, augment=False
    )
    keep = shadow.keep_matrix(2, 32, 3)
    assert shadow.n_cached(split, base, keep, 3, "auto", 8, store) == 2  # the very units
    assert np.array_equal(pool.keep, keep) and pool.phi.shape[:2] == (2, 32)
    assert shadow.n_cached(split, base, keep, 3, "plain", 8, store) == 0  # another trainer: others


def test_lira_pool_hands_shadow_pool_the_recipe_and_its_variations(monkeypatch):
    calls = []
    monkeypatch.setattr(pool_units, "shadow_pool", lambda *a: calls.append(a) or "pool")
    ds, mit = _dataset(), MitigationConfig("penalty", 0.1, 1.0)
    cifar = pool_units.LiraRecipe.from_params({**P03, "dataset": "cifar10"})
    assert pool_units.lira_pool(ds, cifar, 0.0, 1, "none") == "pool"
    pool_units.lira_pool(ds, _recipe(trainer="plain", n_train=64), 0.1, 1, "bn", mitigation=mit)
    (split0, cfg0, m0, seed0, mit0, ex0, tr0, k0, q0, _, lv0), (split1, cfg1, *rest) = calls
    assert cfg0 == TrainConfig(
        arch="lenet", norm="none", epochs=1, batch_size=8, lr=0.05, weight_decay=5e-4, augment=True
    )  # augment 'auto': on for CIFAR
    assert (m0, seed0, mit0, ex0, tr0, k0, q0, lv0) == (
        2,
        1,
        units.NO_MITIGATION,
        "inprocess",
        "auto",
        8,
        "eval",
        (),  # the paper's protocol: no fit levels to keep
    )
    assert not split0.mask.any() and len(split0.x) == 32  # mix 0: clean data
    assert cfg1.norm == "bn" and not cfg1.augment and rest[2:5] == [mit, "inprocess", "plain"]
    assert len(split1.x) == 64 and int(split1.mask.sum()) == round(0.1 * 64)


def test_clean_pools_of_one_seed_are_nested_and_the_seed_alone_decides_the_data():
    ds = _dataset()
    small, big = (
        pool_units.lira_split(ds, _recipe(n_train=40), 0.0, 5),
        pool_units.lira_split(ds, _recipe(n_train=160), 0.0, 5),
    )
    assert torch.equal(small.x, big.x[:40]) and torch.equal(small.y, big.y[:40])
    assert not torch.equal(pool_units.lira_split(ds, _recipe(n_train=40), 0.0, 6).x, small.x)


def test_the_rare_mix_keeps_one_class_at_rare_share_of_the_pool():
    ds = _dataset()
    s = pool_units.lira_split(ds, _recipe(rare_share=0.1, rare_class=2, n_train=100), "rare", 0)
    assert torch.equal(s.mask, s.y == 2) and int(s.mask.sum()) == data.rare_count(0.1, 100)


# ---------------------------------------------------------------- the example groups
def test_example_groups_split_all_examples_into_outliers_and_inliers_when_there_are_any():
    mask = np.array([True, False, False, True])
    groups = mia.example_groups(mask)
    assert list(groups) == ["all", "outliers", "inliers"] and groups["all"].all()
    assert (groups["outliers"] == mask).all() and (groups["inliers"] == ~mask).all()
    assert list(mia.example_groups(np.zeros(4, bool))) == ["all"]  # clean data: one group


# ---------------------------------------------------------------- the paired delta-AUC
class _Fake:
    """A shadow pool with only what the delta-AUC and the rows read: keep and utility."""

    def __init__(self, keep, acc=0.8, train_acc=0.99, censored=0):
        m = len(keep)
        self.keep, self.test_acc, self.gap = keep, np.full(m, acc), np.full(m, 0.1)
        self.train_clean_acc, self.epochs = np.full(m, train_acc), np.full(m, 10)
        self.censored = np.arange(m) < censored


def _synthetic_scores(seed, n=60, m=6, shift_bn=1.0, shift_none=0.3):
    rng = np.random.default_rng(seed)
    keep = shadow.keep_matrix(m, n, seed)
    s = {
        "bn": rng.normal(size=(m, n)) + shift_bn * keep,
        "none": rng.normal(size=(m, n)) + shift_none * keep,
    }
    return keep, s


def _naive_pool_delta(a, b, y, metric=mia.auc):
    """One pool's paired effect by hand: mean over targets of metric(a) - metric(b)."""
    return np.mean([metric(x, t) - metric(z, t) for x, z, t in zip(a, b, y)])


def test_online_deltas_give_one_paired_estimate_per_pool_and_a_t_interval_over_pools():
    scores, shadows, seeds = {}, {}, [0, 1, 2]
    for sd in seeds:
        keep, s = _synthetic_scores(sd, shift_bn=1.0 + sd)  # pools differ: their spread counts
        for norm in ("bn", "none"):
            scores[0.0, sd, norm], shadows[0.0, sd, norm] = {"online": s[norm]}, _Fake(keep)
    pools = exposure.Pools.of(shadows, {(0.0, sd): np.zeros(60, bool) for sd in seeds})
    got = exposure.online_deltas(pools, scores)
    assert list(got) == [(0.0, "all")]  # clean pools: all examples only
    got = got[0.0, "all"]
    per_pool = [
        100
        * _naive_pool_delta(
            scores[0.0, sd, "bn"]["online"],
            scores[0.0, sd, "none"]["online"],
            shadows[0.0, sd, "bn"].keep,
        )
        for sd in seeds
    ]
    half = sps.t.ppf(0.975, 2) * np.std(per_pool, ddof=1) / np.sqrt(3)
    assert got.value == pytest.approx(np.mean(per_pool)) and got.n == 3 and got.df == 2
    assert (got.lo, got.hi) == pytest.approx((np.mean(per_pool) - half, np.mean(per_pool) + half))
    # the point agrees with mia's hierarchical bootstrap (the same per-pool means)
    runs = [
        (
            scores[0.0, sd, "bn"]["online"],
            scores[0.0, sd, "none"]["online"],
            shadows[0.0, sd, "bn"].keep,
        )
        for sd in seeds
    ]
    assert got.value == pytest.approx(100 * mia.paired_delta_auc(runs, n_boot=20).value)


def test_one_pool_gives_no_interval_and_an_inconclusive_verdict():
    keep, s = _synthetic_scores(0, shift_bn=3.0)  # a huge effect: one data draw still says n/a
    scores = {(0.0, 0, n): {"online": s[n]} for n in ("bn", "none")}
    pools = exposure.Pools.of(
        {(0.0, 0, n): _Fake(keep) for n in ("bn", "none")}, {(0.0, 0): np.zeros(60, bool)}
    )
    e = exposure.online_deltas(pools, scores)[0.0, "all"]
    assert e.value > 10 and np.isnan(e.lo) and np.isnan(e.hi) and e.n == 1
    rows = exposure.verdict_rows(
        pools, scores, {(0.0, "all"): e}, None, None, None, 0.02, dataset="t", budget="ci"
    )
    assert rows[0].verdict == "inconclusive" and rows[0].fields["n_pools"] == 1
    assert rows[0].p is None  # one draw: no p-value either


def test_over_pools_is_the_student_t_interval_and_leaves_out_missing_pools():
    e = pool_effects.over_pools([1.0, 2.0, np.nan, 3.0])
    assert (e.value, e.n, e.df) == (2.0, 3, 2)
    assert e.hi - e.value == pytest.approx(sps.t.ppf(0.975, 2) * 1 / np.sqrt(3))
    one = pool_effects.over_pools([5.0])
    assert one.value == 5.0 and np.isnan(one.lo) and np.isnan(one.hi) and one.n == 1


def _control_pools(norms=("bn", "none", "gn", "bn_noaffine")):
    rng, scores, shadows, seeds = np.random.default_rng(3), {}, {}, [0, 1, 2]
    mask = np.zeros(60, bool)
    mask[:6] = True
    shift = {"bn": 1.6, "none": 0.6, "gn": 2.2, "bn_noaffine": 0.0}  # gn leaks more
    for sd in seeds:
        keep = shadow.keep_matrix(6, 60, sd)
        for norm in norms:
            one = rng.normal(size=(6, 60)) + shift[norm] * keep
            scores[0.05, sd, norm] = {a: one for a in mia.ATTACKS}
            shadows[0.05, sd, norm] = _Fake(keep)
    return exposure.Pools.of(shadows, {(0.05, sd): mask for sd in seeds}), scores


def test_control_rows_compare_each_control_with_no_bn_on_the_same_targets():
    pools, scores = _control_pools()
    rows = exposure.control_rows(pools, scores, dataset="toy")
    assert [(r.id, r.fields["subgroup"]) for r in rows] == [
        ("03.control.gn", "all"),
        ("03.control.gn", "outliers"),
        ("03.control.bn_noaffine", "all"),
        ("03.control.bn_noaffine", "outliers"),
    ]
    want = exposure.online_deltas(pools, scores, norm="gn")[0.05, "all"]
    assert rows[0].measured == pytest.approx(want.value) and rows[0].measured > 10
    assert rows[0].verdict == "supported" and rows[2].verdict == "not supported"
    assert rows[0].kind == "exploratory" and "5% outlier mix (all)" in rows[0].claim
    reading = text.controls_reading(rows, "03.control.", "case", "the attack's AUC")
    assert reading[0].startswith("5% mix, all examples: GroupNorm supported")
    assert "the learned gamma carries the attack's AUC" in reading[0]
    pools, scores = _control_pools(("bn", "none"))
    assert exposure.control_rows(pools, scores) == []


def test_verdict_rows_judge_every_mix_and_group_but_the_inliers_then_the_controls():
    pools, scores = _control_pools()
    deltas = exposure.online_deltas(pools, scores)
    effects = exposure.attack_effects(pools, exposure.target_metrics(pools, scores))
    rows = exposure.verdict_rows(
        pools, scores, deltas, None, None, effects, 0.02, dataset="toy", budget="ci"
    )
    assert [r.id for r in rows] == [
        "03.auc.mix5.all",
        "03.auc.outliers",
        "03.fixed.auc",  # 6 models per norm, below 64: fixed variance judged too
        "03.control.gn",
        "03.control.gn",
        "03.control.bn_noaffine",
        "03.control.bn_noaffine",
    ]  # no 03.tpr.low: 30 non-members per target cannot resolve 0.1% FPR
    assert all(r.fields["dataset"] == "toy" and r.fields["budget"] == "ci" for r in rows)
    assert all(r.fields["n_pools"] == 3 and r.n == 3 for r in rows)
    first = rows[0]
    assert first.measured == pytest.approx(deltas[0.05, "all"].value)
    assert first.fields["clean_test_acc"] == pytest.approx({n: 0.8 for n in pools.norms})
    assert first.fields["mix"] == "5%" and first.fields["outlier_frac"] == 0.05
    assert rows[2].measured == pytest.approx(effects[0.05, "all", "online_fixed", "auc"].value)


def test_tpr_at_low_fpr_is_judged_only_with_1000_non_members_per_target():
    rng, scores, shadows = np.random.default_rng(1), {}, {}
    for sd in (0, 1):
        keep = shadow.keep_matrix(4, 2000, sd)  # 1,000 non-members per target
        for norm, shift in (("bn", 3.0), ("none", 1.0)):
            one = rng.normal(size=(4, 2000)) + shift * keep
            scores[0.0, sd, norm] = {a: one for a in mia.ATTACKS}
            shadows[0.0, sd, norm] = _Fake(keep)
    pools = exposure.Pools.of(shadows, {(0.0, sd): np.zeros(2000, bool) for sd in (0, 1)})
    metrics = exposure.target_metrics(pools, scores)
    effects = exposure.attack_effects(pools, metrics)
    rows = exposure.verdict_rows(
        pools,
        scores,
        exposure.online_deltas(pools, scores),
        None,
        None,
        effects,
        0.02,
        dataset="t",
        budget="ci",
    )
    assert [r.id for r in rows] == ["03.auc.mix0.all", "03.fixed.auc", "03.tpr.low"]
    assert rows[2].measured == pytest.approx(effects[0.0, "all", "online", "tpr@0.001"].value)
    assert rows[2].fields["n_nonmembers"] == 1000 and rows[2].kind == "exploratory"
    res = exposure.effect_results(pools, effects)
    assert res["0.0/all/online/tpr@0.001"]["resolvable"] and res["0.0/all/rmia/auc"]["n"] == 2


def test_the_per_attack_table_agrees_with_the_single_attack_path_on_a_synthetic_pool():
    """Every attack and metric of `attack_effects` (through `target_metrics`) equals
    `online_deltas` for that attack and metric (through `pool_effects.delta_over_pools`), and a
    by-hand per-pool mean with a t interval over the pools."""
    rng, scores, shadows, seeds = np.random.default_rng(2), {}, {}, [0, 1, 2]
    mask = np.arange(200) < 20
    for sd in seeds:
        keep = shadow.keep_matrix(6, 200, sd)
        for norm, shift in (("bn", 1.5 + 0.3 * sd), ("none", 0.5)):
            scores[0.05, sd, norm] = {
                a: rng.normal(size=(6, 200)) + (shift + 0.1 * k) * keep
                for k, a in enumerate(mia.ATTACKS)
            }
            shadows[0.05, sd, norm] = _Fake(keep)
    pools = exposure.Pools.of(shadows, {(0.05, sd): mask for sd in seeds})
    effects = exposure.attack_effects(pools, exposure.target_metrics(pools, scores))
    assert len(effects) == 3 * len(mia.ATTACKS) * 3  # groups x attacks x metrics
    for attack in mia.ATTACKS:
        for metric in pool_effects.METRICS:
            single = exposure.online_deltas(pools, scores, attack=attack, metric=metric)
            for g in ("all", "outliers", "inliers"):
                e, want = effects[0.05, g, attack, metric], single[0.05, g]
                assert (e.value, e.lo, e.hi, e.n) == pytest.approx(
                    (want.value, want.lo, want.hi, 3)
                )
    fpr = 0.01
    by_hand = [
        100
        * _naive_pool_delta(
            scores[0.05, sd, "bn"]["rmia"][:, mask],
            scores[0.05, sd, "none"]["rmia"][:, mask],
            shadows[0.05, sd, "bn"].keep[:, mask],
            lambda x, y: mia.tpr_at_fpr(x, y, fpr),
        )
        for sd in seeds
    ]
    e = effects[0.05, "outliers", "rmia", "tpr@0.01"]
    assert e.value == pytest.approx(np.mean(by_hand))
    assert e.hi - e.value == pytest.approx(
        sps.t.ppf(0.975, 2) * np.std(by_hand, ddof=1) / np.sqrt(3)
    )
    md = text.effect_table(exposure.effect_results(pools, effects)).splitlines()
    assert len(md) == 2 + 3 * len(mia.ATTACKS) and md[2].startswith("| 5% | all | online | ")
    assert md[3].count("n/r") == 1  # all: 100 non-members per target resolve 1% FPR, not 0.1%


def test_attack_table_gives_every_attack_per_mix_norm_and_group_and_shows_four():
    rng = np.random.default_rng(0)
    keep = shadow.keep_matrix(4, 40, 0)
    mask = np.arange(40) < 10
    shadows = {(0.1, 0, n): _Fake(keep, acc) for n, acc in (("bn", 0.8), ("none", 0.7))}
    pools = exposure.Pools.of(shadows, {(0.1, 0): mask})
    scores = {k: {a: rng.normal(size=(4, 40)) + 2.0 * keep for a in mia.ATTACKS} for k in shadows}
    table = exposure.attack_table(pools, exposure.target_metrics(pools, scores))
    assert len(table) == 2 * 3 * len(mia.ATTACKS)  # norms x groups x attacks
    row = table["0.1/none/outliers/online"]
    assert row["n_nonmembers"] == int((~keep[0][mask]).sum())
    assert row["clean_test_acc"] == pytest.approx(0.7)
    assert row["auc"]["value"] > 0.5 and np.isnan(row["auc"]["lo"])  # one pool: no interval
    md = text.attack_table(table).splitlines()
    assert len(md) == 2 + 2 * 3 * len(text.LIRA_SHOWN_ATTACKS)
    assert md[2].startswith("| 10% | BN | all | online | ") and "| n/r |" in md[-1]


def test_rare_exposure_measures_the_rare_members_apart_from_the_rest():
    m, n = 8, 40
    keep = shadow.keep_matrix(m, n, seed=0)
    rare = np.zeros(n, bool)
    rare[:10] = True
    rng = np.random.default_rng(0)

    def pool(sep):  # phi: members of the rare class stand out by `sep` when IN, the rest do not
        fake = _Fake(keep)
        fake.phi = rng.normal(0, 1, (m, n, 1)) + sep * (keep & rare)[..., None]
        fake.correct = keep | ~rare
        return fake

    shadows = {("rare", 0, "bn"): pool(6.0), ("rare", 0, "none"): pool(0.0)}
    pools = exposure.Pools.of(shadows, {("rare", 0): rare})
    rx = exposure.rare_exposure(pools, sigma_floor=1e-3)
    assert rx.auc["bn"]["rare"].value > 0.85 and abs(rx.auc["none"]["rare"].value - 0.5) < 0.2
    assert rx.delta["rare"].value > 30 and abs(rx.delta["common"].value) < 15  # AUC points
    assert rx.mem["bn"]["rare"] == pytest.approx(1.0) and rx.mem["bn"]["common"] == 0.0
    assert rx.n == {"all": 40, "rare": 10, "common": 30}
    assert rx.results()["delta_auc_points"]["rare"]["value"] == rx.delta["rare"].value
    assert len(text.rare_table(rx).splitlines()) == 2 + 2 * 3
    fig = plot_lira.rare_roc_figure(rx, m)
    assert plots.audit(fig) == []


# ---------------------------------------------------------------- the trend
SIZES = [500, 1000, 2000, 4000]


def test_an_exact_line_gives_its_slope_and_the_weighted_closed_form_interval():
    est = [Estimate(10 - 2 * k, 9 - 2 * k, 11 - 2 * k, 16, se=1.0) for k in range(4)]
    t = size_trend.fit_trend(SIZES, est)
    # x = log2 N = 8.97 + (0, 1, 2, 3): sum (x - mean)^2 = 5, so se(slope) = 1/sqrt(5); no scatter
    assert t.slope.value == pytest.approx(-2) and t.chi2_red == pytest.approx(0, abs=1e-18)
    assert t.df is None and t.slope.se == pytest.approx(1 / np.sqrt(5))
    assert t.slope.hi - t.slope.value == pytest.approx(sps.norm.ppf(0.975) / np.sqrt(5))
    assert t.predict(4000).value == pytest.approx(4.0) and t.predict(1000).value == pytest.approx(
        8.0
    )
    assert t.predict(4000).se > t.predict(2000).se  # wider toward the ends of the data


@pytest.mark.parametrize("n", [250, 4001, 8000, 60_000])
def test_the_trend_refuses_to_report_outside_the_sizes_measured(n):
    est = [Estimate(10 - 2 * k, 9 - 2 * k, 11 - 2 * k, 16, se=1.0) for k in range(4)]
    t = size_trend.fit_trend(SIZES, est)
    with pytest.raises(size_trend.OutsideMeasured, match=rf"n={n}.*\[500, 4000\].*no extrapol"):
        t.predict(n)


def test_sizes_with_one_pool_each_give_a_slope_without_interval():
    est = [Estimate(10 - 2 * k, np.nan, np.nan, 1) for k in range(4)]
    t = size_trend.fit_trend(SIZES, est)
    assert t.slope.value == pytest.approx(-2) and np.isnan(t.slope.lo) and np.isnan(t.slope.hi)


def test_scatter_beyond_the_standard_errors_gives_ordinary_least_squares_with_a_t_interval():
    y = [7.0, 6.1, 3.2, 2.9]
    t = size_trend.fit_trend(SIZES, [Estimate(v, v - 0.02, v + 0.02, 16, se=0.01) for v in y])
    ols = sps.linregress(np.log2(SIZES), y)
    assert t.slope.value == pytest.approx(ols.slope) and t.slope.se == pytest.approx(ols.stderr)
    assert t.df == 2 and t.slope.lo == pytest.approx(ols.slope - sps.t.ppf(0.975, 2) * ols.stderr)


def test_weights_are_one_over_the_variance_like_numpy_polyfit():
    y, se = [7.0, 6.1, 3.2, 2.9], [0.5, 1.0, 2.0, 4.0]
    t = size_trend.fit_trend(SIZES, [Estimate(v, v - 1, v + 1, 16, se=s) for v, s in zip(y, se)])
    slope, intercept = np.polyfit(np.log2(SIZES), y, 1, w=1 / np.asarray(se))
    assert (t.slope.value, t.intercept) == pytest.approx((slope, intercept))
    with pytest.raises(ValueError, match="at least 3 sizes"):
        size_trend.fit_trend(SIZES[:2], [Estimate(1, 0, 2, 1, se=1)] * 2)


# ---------------------------------------------------------------- the size sweep
def test_size_pools_reuse_the_main_clean_pools_at_n_train_and_build_the_rest(monkeypatch):
    calls = []
    monkeypatch.setattr(
        size_trend.pool_units,
        "lira_pool",
        lambda ds, recipe, mix, s, norm: calls.append((mix, s, norm, recipe.n_train)) or "new",
    )
    main = {(0.0, s, n): object() for s in (0, 1) for n in ("bn", "none", "gn")}
    p = {**P03, "size_sweep": [64, 128, 256, 512], "seeds": [0, 1], "n_train": 512}
    got = size_trend.size_pools("ds", p, main)
    assert set(got) == {
        (n, s, norm) for n in p["size_sweep"] for s in (0, 1) for norm in ("bn", "none")
    }
    assert all(got[512, s, n] is main[0.0, s, n] for s in (0, 1) for n in ("bn", "none"))
    assert sorted(calls) == sorted(
        (0.0, s, norm, n) for n in (64, 128, 256) for s in (0, 1) for norm in ("bn", "none")
    )


def _pool(n, shift, seed, m=8, acc=0.8):
    rng = np.random.default_rng(seed)
    keep = shadow.keep_matrix(m, n, seed)
    mu = rng.normal(0, 1, n)
    phi = (mu + shift * keep + 0.5 * rng.normal(size=(m, n)))[..., None]
    z = np.zeros((m, n))
    return ShadowPool(
        keep=keep,
        phi=phi,
        logp=phi,
        test_logp=phi[:, :4],
        correct=z > 0,
        train_acc=np.full(m, acc + 0.1),
        train_clean_acc=np.full(m, acc + 0.1),
        test_acc=np.full(m, acc),
        configs=(),
    )


def _sweep_pools(shift_bn):
    sizes = [64, 128, 256, 512]
    pools = {
        (n, s, "bn"): _pool(n, shift_bn[i], 10 * i + s)
        for i, n in enumerate(sizes)
        for s in (0, 1, 2)
    }
    pools |= {
        (n, s, "none"): _pool(n, 0.3, 10 * i + s + 100, acc=0.75)
        for i, n in enumerate(sizes)
        for s in (0, 1, 2)
    }
    return pools


def _sweep(shift_bn):
    pools = _sweep_pools(shift_bn)
    sizes = sorted({n for n, _, _ in pools})
    p = {"size_sweep": sizes, "seeds": [0, 1, 2], "n_train": 512, "dataset": "fashion_mnist"}
    return size_trend.sweep(pools, p, sigma_floor=1e-3)


def test_a_bn_advantage_that_shrinks_with_n_reads_as_a_fall_within_the_sizes_measured():
    sw = _sweep([2.0, 1.4, 0.9, 0.5])
    d = [sw.delta[n].value for n in sw.sizes]
    assert all(a > b for a, b in zip(d, d[1:])) and d[-1] > 0
    assert all(sw.delta[n].n == 3 and sw.delta[n].df == 2 for n in sw.sizes)  # over 3 pools
    assert sw.fall.value == pytest.approx(-sw.trend.slope.value) and sw.fall.lo > 0
    assert sw.fall.lo == pytest.approx(-sw.trend.slope.hi)
    assert sw.largest == 512 and sw.reused == (512,) and sw.at(512) is sw.delta[512]
    with pytest.raises(size_trend.OutsideMeasured, match="n=60000"):
        sw.at(60_000)
    reading = text.size_reading(sw)
    assert "it falls" in reading and "says nothing beyond N = 512" in reading
    assert "xtrapol" not in reading and "60,000" not in reading
    assert sw.acc[64] == pytest.approx({"bn": 0.8, "none": 0.75})
    assert sw.gap[512]["bn"] == pytest.approx(0.1)
    assert sw.row_fields()["clean_test_acc"] == pytest.approx(
        {"BN, N=64": 0.8, "no-BN, N=64": 0.75, "BN, N=512": 0.8, "no-BN, N=512": 0.75}
    )
    res = sw.results()
    assert res["reused_main_pools"] == [512] and "predicted" not in res
    assert res["fit"]["64"]["bn"]["train_clean_acc"] == pytest.approx(0.9)
    rows = sw.rows(dataset="t", budget="ci")
    assert [r.id for r in rows] == ["03.size.delta"] * 4 + ["03.size.trend"]
    assert rows[0].measured == pytest.approx(d[0]) and "64 images" in rows[0].claim
    # each size's own fit check: BN fits 0.90, no-BN 0.85, beyond the 1-point tolerance
    assert rows[0].fields["clean_train_acc"] == pytest.approx({"bn": 0.9, "none": 0.85})
    assert rows[0].verdict == "inconclusive"
    assert "(main pools)" in text.size_table(sw).splitlines()[-1]
    fig = plot_lira.size_sweep_figure(sw, (3.0, 5.0), "title")
    assert plots.audit(fig) == []
    assert max(fig.axes[0].get_xlim()) < 1000  # nothing drawn toward the paper's 60,000


def test_every_attack_at_every_size_is_the_paired_effect_over_that_sizes_pools():
    """The sweep's effect per attack at each N equals `pool_effects.delta_over_pools` on that
    attack's scores (`mia.pool_scores`) of that size's pools, computed here by hand from the
    per-target metric; its online AUC is the size's `delta`."""
    sw = _sweep([2.0, 1.4, 0.9, 0.5])
    pools = _sweep_pools([2.0, 1.4, 0.9, 0.5])
    n = 128
    assert set(sw.per_attack) == set(sw.sizes)
    assert set(sw.per_attack[n]) == set(mia.ATTACKS)
    assert sw.per_attack[n]["online"]["auc"] is sw.delta[n]
    for attack in ("offline_fixed", "loss", "rmia"):
        per_pool = []
        for s in (0, 1, 2):
            a = mia.pool_scores(pools[n, s, "bn"], 1e-3)[attack]
            b = mia.pool_scores(pools[n, s, "none"], 1e-3)[attack]
            keep = pools[n, s, "bn"].keep
            per_pool.append(np.mean([mia.auc(x, y) - mia.auc(z, y) for x, z, y in zip(a, b, keep)]))
        want = 100 * np.mean(per_pool)
        half = 100 * sps.t.ppf(0.975, 2) * np.std(per_pool, ddof=1) / np.sqrt(3)
        got = sw.per_attack[n][attack]["auc"]
        assert (got.value, got.lo, got.hi) == pytest.approx((want, want - half, want + half))
    low = sw.per_attack[n]["online"]["tpr@0.001"]
    assert low.n == 3 and np.isfinite(low.value)
    stored = sw.results()["per_attack"]
    assert stored["128"]["loss"]["auc"]["value"] == pytest.approx(
        sw.per_attack[128]["loss"]["auc"].value
    )
    lines = text.size_attack_table(stored).splitlines()
    assert lines[0] == "| pool size N | " + " | ".join(mia.ATTACKS) + " |"
    loss = sw.per_attack[128]["loss"]["auc"]
    assert lines[3].startswith("| 128 | ") and f"{loss.value:+.1f} [{loss.lo:+.1f}, " in lines[3]
    assert len(lines) == 2 + len(sw.sizes)


def test_a_flat_advantage_shows_no_trend():
    sw = _sweep([1.0, 1.0, 1.0, 1.0])
    s = sw.trend.slope
    assert s.lo < 0 < s.hi and "shows no trend" in text.size_reading(sw)


# ---------------------------------------------------------------- the parameter
@pytest.mark.parametrize(
    "sizes,why",
    [
        ([500, 1000, 2000], r"only 3 sizes; spans only 4x"),
        ([1000, 500, 2000, 4000], r"not increasing"),
        ([100, 1000, 2000, 4000], r"100 < 128"),
        ([500, 600, 700, 800], r"spans only 1.6x"),
        ([500, 1000, 2000, 70000], r"70000 > 60000; largest 70000 != n_train=2000"),
    ],
)
def test_size_sweep_needs_four_increasing_sizes_spanning_8x_inside_the_data(sizes, why):
    with pytest.raises(
        ConfigError,
        match=rf"size_sweep=.* is not allowed \({why}\); allowed: \[\] "
        r"\(no sweep\) or at least 4 increasing pool sizes spanning",
    ):
        n_train = max(sizes) if max(sizes) <= 60_000 else 2000  # beyond the data: no such pool
        params.resolve("03_lira", {"size_sweep": sizes, "n_train": n_train})


def test_the_size_sweep_ends_at_the_main_pools_whose_rows_are_the_headline():
    with pytest.raises(ConfigError, match=r"largest 4000 != n_train=2000.*the headline"):
        params.resolve("03_lira", {"size_sweep": [500, 1000, 2000, 4000], "n_train": 2000})


def test_05s_own_pools_draw_03s_examples_and_train_each_family_with_its_recipe(monkeypatch):
    """05's LiRA pools: 03's way of drawing the pool (mix, seed), each family trained with its
    norm's learning rate (times its lr scale) and its own weight decay, one call per family."""
    from bnpaper import mitigation_lira as ms
    from bnpaper.variants import Variant

    calls = []
    monkeypatch.setattr(
        pool_units,
        "lira_pool",
        lambda ds, r, mix, s, norm, **kw: calls.append((mix, s, norm, r.lr, kw)) or norm,
    )
    ds, mit = _dataset(), MitigationConfig("penalty", 0.1, 1.0)
    families = {"bn": Variant("bn"), "reg": Variant("bn", mit), "none": Variant("none")}
    pools, mask = ms.own_pools(ds, RECIPE, {"bn": 0.005, "none": 0.05}, 0.1, 4, families)
    assert calls == [
        (0.1, 4, "bn", 0.005, {"mitigation": MitigationConfig()}),
        (0.1, 4, "bn", 0.005, {"mitigation": mit}),
        (0.1, 4, "none", 0.05, {"mitigation": MitigationConfig()}),
    ]
    assert pools == {"bn": "bn", "reg": "bn", "none": "none"}
    assert np.array_equal(mask, pool_units.lira_split(ds, RECIPE, 0.1, 4).mask.numpy())


def test_the_budgets_run_pools_as_the_unit_and_full_runs_the_papers_data_size():
    """Quick: at least 3 pools (the unit of every interval); full: a pool of the whole
    Fashion-MNIST training set (each shadow on 30,000), BN vs no-BN at the fair protocol, at
    least 16 shadows, clean data and a 5% mix, at least 2 pools; the matrix runs them (one cell
    per mix), the clean cell with a size sweep of at least 5 sizes spanning at least 16x whose
    largest is that cell's own 60,000-image pools (one recipe for the whole curve: the sizes
    share the cell's searched learning rates); validated without running anything."""
    from bnpaper import reproduce

    quick = params.resolve("03_lira", {}).values
    assert len(quick["seeds"]) >= 3 and quick["n_shadows"] >= 16
    full = params.resolve("03_lira", {"budget": "full", "dataset": "fashion_mnist"}).values
    assert full["n_train"] == 60_000 and full["n_train"] // 2 == 30_000
    assert full["protocol"] == "fair" and full["norms"] == ["bn", "none"]
    assert full["n_shadows"] >= 16 and len(full["seeds"]) >= 2
    assert {0.0, 0.05} <= set(full["outlier_frac"])
    budget, entries = reproduce.read_matrix()
    cells = [
        params.resolve("03_lira", {"budget": budget, "dataset": e.dataset, **dict(e.values)}).values
        for e in entries
        if "03_lira" in e.notebooks and e.dataset == "fashion_mnist"
    ]
    at_60k = [c for c in cells if c["n_train"] == 60_000 and c["arch"] == "lenet"]
    assert sorted(f for c in at_60k for f in c["outlier_frac"]) == [0.0, 0.05]
    (sweep,) = [c for c in cells if c["size_sweep"]]
    sizes = sweep["size_sweep"]
    assert sweep in at_60k and sweep["outlier_frac"] == [0.0]
    assert len(sizes) >= 5 and max(sizes) == sweep["n_train"] == 60_000
    assert max(sizes) >= 16 * min(sizes) and len(sweep["seeds"]) >= 2
    for key in ("protocol", "norms", "n_shadows", "seeds", "arch", "lr_seeds"):
        assert sweep[key] == full[key], key


def _leveled_pools(train_acc_none=0.96):
    """Clean pools of 3 seeds whose models were also kept at 0.95: there BN leaks more (shift
    1.5 against 0.2), at the end less (0.3 against 0.3); no-BN's clean training accuracy at 0.95
    is `train_acc_none` (BN's: 0.96)."""
    shadows = {}
    for sd in (0, 1, 2):
        for norm, end, low in (("bn", 0.3, 1.5), ("none", 0.3, 0.2)):
            at = _pool(60, low, 10 * sd + (norm == "bn"), m=6)
            acc = 0.96 if norm == "bn" else train_acc_none
            at = dataclasses.replace(at, train_clean_acc=np.full(6, acc), epochs=np.full(6, 3))
            at = dataclasses.replace(at, censored=np.zeros(6, bool))
            main = _pool(60, end, 10 * sd + (norm == "bn"), m=6)
            main = dataclasses.replace(main, at_levels={0.95: at})
            shadows[0.0, sd, norm] = main
    return exposure.Pools.of(shadows, {(0.0, sd): np.zeros(60, bool) for sd in (0, 1, 2)})


def test_lira_at_a_level_reads_the_shadows_kept_there_and_judges_that_fit():
    pools = _leveled_pools()
    assert pools.levels == [0.95]
    reading = exposure.level_reading(pools, sigma_floor=1e-3)
    at = pools.at_level(0.95)
    by_hand = {k: mia.lira(p.phi, p.keep, sigma_floor=1e-3) for k, p in at.shadow.items()}
    want = exposure.online_deltas(at, by_hand)[0.0, "all"]
    got = reading.deltas[0.95][0.0, "all"]
    assert (got.value, got.lo, got.hi) == pytest.approx((want.value, want.lo, want.hi))
    assert got.lo > 1.0  # BN's excess at 0.95, where the end pools show none
    end = exposure.online_deltas(pools, exposure.attack_scores(pools, 1e-3))[0.0, "all"]
    assert abs(end.value) < got.value
    rows = exposure.verdict_rows(
        pools, {}, {}, None, None, None, 0.02, dataset="t", budget="ci", levels=reading
    )
    (row,) = [r for r in rows if r.id == "03.auc.fit"]
    assert row.fields["level"] == "95%" and row.measured == pytest.approx(got.value)
    assert row.fields["clean_train_acc"] == pytest.approx({"bn": 0.96, "none": 0.96})
    assert row.verdict == "reproduced" and "At 95% clean training accuracy" in row.claim
    assert reading.results()["0.95"]["0.0"]["delta_auc"]["value"] == pytest.approx(got.value)
    assert "| 95% | 0% |" in text.level_table(reading)


def test_lira_at_a_level_with_a_training_gap_over_one_point_is_inconclusive():
    pools = _leveled_pools(train_acc_none=0.94)  # 2 points below BN's 0.96 at the reading
    reading = exposure.level_reading(pools, sigma_floor=1e-3)
    rows = exposure.verdict_rows(
        pools, {}, {}, None, None, None, 0.02, dataset="t", budget="ci", levels=reading
    )
    (row,) = [r for r in rows if r.id == "03.auc.fit"]
    assert row.verdict == "inconclusive" and "training" in row.magnitude


def test_the_delta_auc_at_fit_figure_draws_each_level_then_the_end_and_passes_the_checks():
    pools = _leveled_pools()
    reading = exposure.level_reading(pools, sigma_floor=1e-3)
    end = exposure.online_deltas(pools, exposure.attack_scores(pools, 1e-3))
    fig = plot_lira.delta_auc_at_fit_figure(reading, end, 0.99, (3.0, 5.0), "toy")
    assert plots.audit(fig) == []
    ax = fig.axes[0]
    (bars,) = [c for c in ax.containers if c.get_label() == "0% outlier mix"]
    line = bars.lines[0]
    got = end[0.0, "all"].value
    assert list(line.get_xdata()) == pytest.approx([0.95, 0.99])
    assert list(line.get_ydata()) == pytest.approx([reading.deltas[0.95][0.0, "all"].value, got])


def test_the_effect_table_reads_one_pools_ends_from_results_json_as_n_a():
    """One pool has no interval; results.json stores its non-finite ends as null."""
    one = {"value": 2.5, "lo": None, "hi": None, "n": 1, "level": 0.95}
    effects = {
        f"0.05/all/online/{m}": {**one, "n_nonmembers": 1000, "resolvable": True}
        for m in ("auc", "tpr@0.01", "tpr@0.001")
    }
    md = text.effect_table(effects).splitlines()
    assert md[2].startswith("| 5% | all | online | +2.5 [n/a, n/a]")
