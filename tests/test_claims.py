"""Verdict rules of the claims file, on their edge cases."""

import math

import pytest

from bnpaper import claim_tests, claims
from bnpaper.stats import Estimate

INF = math.inf


def E(v, lo, hi, n=3):
    return Estimate(v, lo, hi, n)


FIT = {"train_acc_gap": 0.0, "test_acc_gap": 0.0}  # 03's rows: read at matched fit


@pytest.mark.parametrize(
    "est,verdict",
    [
        (E(4.1, 0.2, 8.0), "inconclusive"),  # straddles the paper's "at least 4"
        (E(6.0, 4.5, 7.5), "reproduced"),  # the whole interval reaches 4
        (E(2.0, 1.0, 3.0), "not reproduced"),  # the whole interval below 4, though above 0
        (E(5.0, -INF, INF, 1), "inconclusive"),  # one seed: no interval, nothing to sign
    ],
)
def test_at_least_needs_the_lower_end_to_reach_the_paper_number(est, verdict):
    assert claims.judge("03.auc.mix5.all", est, **FIT)["verdict"] == verdict


def test_a_mix_the_paper_gives_no_number_for_is_tested_for_direction_only_and_says_so():
    cid = claims.lira_claim_id(0.02, "all")
    row = claims.judge(cid, E(2.5, 1.2, 3.8), mix="2%", **FIT)
    assert cid == "03.auc.other.all" and row["test"] == "direction"
    assert row["verdict"] == "reproduced" and "no number for a 2% mix" in row["paper"]
    assert claims.lira_claim_id(0.05, "all") == "03.auc.mix5.all"
    assert claims.lira_claim_id(0.05, "outliers") == "03.auc.outliers"


def test_direction_needs_the_minimum_effect_not_significance_alone():
    assert (
        claims.judge("03.auc.outliers", E(0.5, 0.1, 0.9), mix="1%", **FIT)["verdict"]
        == "not reproduced"
    )
    assert (
        claims.judge("03.auc.outliers", E(1.5, 0.1, 2.9), mix="1%", **FIT)["verdict"]
        == "reproduced"
    )
    assert (
        claims.judge("03.auc.outliers", E(1.5, -0.1, 2.9), mix="1%", **FIT)["verdict"]
        == "inconclusive"
    )


@pytest.mark.parametrize(
    "est,words",
    [
        (E(11.1, 9.9, 12.2), "larger than the paper's 3-5"),
        (E(4.0, 3.5, 4.5), "within the paper's 3-5"),
        (E(2.0, 1.5, 2.5), "smaller than the paper's 3-5"),
    ],
)
def test_a_number_far_from_the_papers_magnitude_says_so_even_when_the_sign_agrees(est, words):
    row = claims.judge("03.auc.mix0.all", est, **FIT)
    assert row["magnitude"] == words and row["verdict"] == "reproduced"


def test_accuracy_confound_turns_reproduced_into_inconclusive_and_says_why():
    ok = claims.judge("01.final.flip", E(0.3, 0.2, 0.4), acc_gap=0.01)
    bad = claims.judge("01.final.flip", E(0.3, 0.2, 0.4), acc_gap=0.2)
    assert ok["verdict"] == "reproduced" and bad["verdict"] == "inconclusive"
    assert "higher than the compared model's by 0.200 > 0.05" in bad["magnitude"]


@pytest.mark.parametrize("est", [E(-0.2, -0.3, -0.1), E(0.3, 0.2, 0.4)])
def test_a_compared_model_that_did_not_learn_makes_a_bn_vs_other_row_inconclusive_either_way(est):
    # the matrix's no-BN ResNet-20: 0.15 on 10 classes against BN's 0.72 (floor 0.1 + 0.25 * 0.62)
    accs = {"bn": 0.72, "none": 0.15, "gn": 0.70}
    row = claims.judge(
        "01.final.flip", est, acc_gap=0.57, clean_test_acc=accs, dataset="fashion_mnist"
    )
    assert row["verdict"] == "inconclusive"
    assert (
        "did not learn (none 0.150: less than 0.25 of the best compared model's accuracy "
        "above chance, "
        "floor 0.255)" in row["magnitude"]
    )
    # no dataset known: no floor (nothing is guessed)
    assert (
        claims.judge("01.final.flip", est, acc_gap=0.0, clean_test_acc=accs)["verdict"]
        != "inconclusive"
    )


def test_only_the_compared_models_are_checked_for_having_learned():
    # a control near chance leaves the learned BN-vs-no-BN row alone, and judges its own row
    accs = {"bn": 0.80, "none": 0.78, "gn": 0.12}
    main = claims.judge(
        "01.final.flip",
        E(0.3, 0.2, 0.4),
        acc_gap=0.02,
        clean_test_acc=accs,
        dataset="fashion_mnist",
    )
    assert main["verdict"] == "reproduced" and "did not learn" not in main["magnitude"]
    ctrl = claims.judge(
        "01.control.gn",
        E(0.3, 0.2, 0.4),
        acc_gap=-0.66,
        clean_test_acc=accs,
        dataset="fashion_mnist",
        compared=("gn", "none"),
        subset="the label-flipped subset",
    )
    assert ctrl["verdict"] == "inconclusive" and "did not learn (gn 0.120" in ctrl["magnitude"]
    # the floor is relative: CIFAR-100 at 0.30 against 0.25 has learned (floor 0.01 + 0.25 * 0.29)
    low, floor = claims.near_chance({"bn": 0.30, "none": 0.25}, "cifar100")
    assert low == {} and floor == pytest.approx(0.01 + 0.25 * 0.29)


def test_mitigation_cost_above_tolerance_is_inconclusive():
    assert (
        claims.judge("05.reduction.flip", E(0.9, 0.8, 0.95), acc_gap=0.005)["verdict"]
        == "reproduced"
    )
    row = claims.judge("05.reduction.flip", E(0.9, 0.8, 0.95), acc_gap=0.065)
    assert row["verdict"] == "inconclusive" and "mitigation costs 0.065" in row["magnitude"]


@pytest.mark.parametrize(
    "est,verdict",
    [
        (E(0.9, 0.85, 1.1), "reproduced"),
        (E(0.877, 0.63, 1.055), "inconclusive"),
        (E(0.5, 0.4, 0.6), "not reproduced"),
    ],
)
def test_within_is_an_equivalence_test_on_the_whole_interval(est, verdict):
    assert claims.judge("04.simulation", est)["verdict"] == verdict


@pytest.mark.parametrize(
    "est,verdict",
    [
        (E(0.956, 0.929, 0.982), "reproduced"),
        (E(0.357, 0.324, 0.392), "not reproduced"),
        (E(0.55, 0.45, 0.65), "inconclusive"),
    ],
)
def test_most_means_the_whole_interval_above_one_half(est, verdict):
    assert claims.judge("04.most_channels", est, arch="lenet")["verdict"] == verdict


def test_every_claim_in_the_file_has_what_its_test_needs():
    doc = claims._load()
    for cid in doc["claims"]:
        assert claims.claim(cid)["test"] in claim_tests.TESTS
    assert set(doc["settings"]["acc_tolerance"]) == {"01", "02", "03", "04", "05"}


def _row(p, verdict="reproduced", family="paper"):
    return claims.Verdict(
        id="x",
        claim="a claim",
        paper="p",
        test="direction",
        measured=1.0,
        lo=0.5,
        hi=1.5,
        n=3,
        verdict=verdict,
        magnitude="",
        p=p,
        family=family,
    )


def test_holm_adjusts_like_the_textbook_step_down_and_downgrades_only_what_fails():
    rows = [_row(0.01), _row(0.004), _row(0.02), _row(None), _row(0.3, "not reproduced")]
    rows = claims.holm(rows)
    # sorted p: 0.004, 0.01, 0.02, 0.3 (m = 4): 4*0.004, max(., 3*0.01), max(., 2*0.02), max(., 0.3)
    assert [r.p_holm for r in rows] == pytest.approx([0.03, 0.016, 0.04, None, 0.3])
    assert [r.verdict for r in rows] == [
        "inconclusive",
        "reproduced",
        "inconclusive",
        "reproduced",
        "not reproduced",
    ]
    assert "Holm" in rows[0].magnitude and "4 claims" in rows[0].magnitude
    assert rows[3].family_size is None  # an exact identity is not in the family
    again = claims.holm(rows)  # idempotent: a second correction adds no second note
    assert again == rows


def test_a_verdict_prints_as_one_line_with_its_interval_and_accuracies():
    row = claims.judge(
        "01.final.flip",
        claims.Estimate(0.4912, 0.31, 0.672, 3),
        unit="memorization, BN minus no-BN",
        clean_test_acc={"bn": 0.8312, "none": 0.8204},
        dataset="fashion_mnist",
        corruption="flip",
    )
    line = row.line()
    assert line.startswith(f"- {row.claim}: paper {row.paper}; measured +0.491 [+0.31, +0.672] ")
    assert "memorization, BN minus no-BN -> reproduced" in line
    assert line.endswith("; clean test accuracy BN 0.83, no-BN 0.82")
    assert row.as_dict()["corruption"] == "flip" and row.as_dict()["verdict"] == "reproduced"


def test_a_family_of_one_keeps_the_interval_rule():
    """One claim: p < 0.025 one-sided iff the 95% t interval's lower end is above 0."""
    from bnpaper import stats

    for values in ([0.2, 0.25, 0.3], [0.01, 0.3, -0.1], [0.05, 0.06, 0.2]):
        e = stats.t_mean(values)
        row = claims.judge("01.final.flip", e)
        (corrected,) = claims.holm([row])
        assert corrected.verdict == row.verdict
        assert (row.p < 0.025) == (e.lo > 0)


def test_exploratory_rows_are_a_family_of_their_own():
    rows = claims.holm([_row(0.01), _row(0.012), _row(0.02, family="exploratory")])
    assert [r.family_size for r in rows] == [2, 2, 1]
    assert rows[2].p_holm == pytest.approx(0.02) and rows[2].verdict == "reproduced"
    assert rows[1].verdict == "reproduced"  # 2 * 0.01, then max(0.02, 0.012) < 0.025


# ---------------------------------------------------------------- the matched-fit confound
def _matched(verdict="reproduced", train=0.0, test=0.0):
    return claims.matched_fit(verdict, "", train, test)


@pytest.mark.parametrize("sign", [1, -1])
def test_matched_fit_passes_gaps_of_exactly_one_training_and_two_test_points_either_sign(sign):
    assert claims.matched_fit_tolerances() == {"train_acc": 0.01, "test_acc": 0.02}
    assert _matched(train=sign * 0.01, test=sign * 0.02) == ("reproduced", "")
    # a gap computed from accuracies exceeds its decimal value by a rounding error: still equal
    assert 0.96 - 0.95 > 0.01 and 0.93 - 0.91 > 0.02
    assert _matched(train=sign * (0.96 - 0.95), test=sign * (0.93 - 0.91)) == ("reproduced", "")


@pytest.mark.parametrize("sign", [1, -1])
def test_matched_fit_fails_a_training_gap_of_one_point_and_epsilon_and_says_by_how_much(sign):
    verdict, note = _matched(train=sign * (0.01 + 1e-6), test=0.0)
    assert verdict == "inconclusive"
    assert note == (
        f"not at matched fit: clean training accuracy at the reading differs (bn minus none "
        f"{sign * 0.010:+.3f}) by 1e-06 more than the 0.01 tolerance"
    )
    assert "clean test accuracy" not in note


@pytest.mark.parametrize("sign", [1, -1])
def test_matched_fit_fails_a_test_gap_alone_and_names_only_the_test_tolerance(sign):
    verdict, note = _matched(train=0.0, test=sign * 0.035)
    assert verdict == "inconclusive"
    assert (
        "clean test accuracy at the reading differs" in note
        and "by 0.015 more than the 0.02" in note
    )
    assert "clean training accuracy" not in note


def test_matched_fit_names_both_tolerances_when_both_fail_and_keeps_other_verdicts():
    verdict, note = claims.matched_fit("not reproduced", "smaller than the paper's 3-5", 0.05, -0.1)
    assert verdict == "not reproduced"  # only a "reproduced" needs matched fit to stand
    assert note.startswith("smaller than the paper's 3-5; not at matched fit: clean training")
    assert (
        "(bn minus none +0.050) by 0.04 more" in note and "(bn minus none -0.100) by 0.08" in note
    )


@pytest.mark.parametrize("train,test", [(None, 0.0), (0.0, math.nan)])
def test_matched_fit_without_the_accuracies_to_check_is_inconclusive(train, test):
    verdict, note = _matched(train=train, test=test)
    assert verdict == "inconclusive" and "no clean " in note and "to check the" in note


def test_judge_applies_the_matched_fit_rule_only_to_matched_fit_claims(monkeypatch):
    est = E(0.3, 0.2, 0.4)
    # an existing claim ignores the new gaps: its behaviour is unchanged
    row = claims.judge("01.final.flip", est, acc_gap=0.0, train_acc_gap=0.5, test_acc_gap=0.5)
    assert row["verdict"] == "reproduced"
    fake = dict(claims.claim("01.final.flip"), confound="matched_fit")
    monkeypatch.setattr(claims, "claim", lambda cid: fake)
    ok = claims.judge("01.x", est, train_acc_gap=-0.01, test_acc_gap=0.02)
    bad = claims.judge("01.x", est, compared=("gn", "none"), train_acc_gap=0.0, test_acc_gap=0.03)
    assert ok["verdict"] == "reproduced" and bad["verdict"] == "inconclusive"
    assert "clean test accuracy at the reading differs (gn minus none +0.030)" in bad["magnitude"]


def test_an_unknown_confound_kind_in_the_claims_file_is_refused(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(
        "settings: {}\nclaims:\n  a:\n    test: direction\n    min_effect: 0.1\n"
        "    confound: matched_fits\n"
    )
    with pytest.raises(
        claims.ConfigError, match="confound='matched_fits'; allowed: .*'matched_fit'"
    ):
        claims._load(str(path))
