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
    # significant (lo > 0) and the mean above the minimum effect, but lo below it: not enough
    assert (
        claims.judge("03.auc.outliers", E(1.5, 0.1, 2.9), mix="1%", **FIT)["verdict"]
        == "inconclusive"
    )
    assert (
        claims.judge("03.auc.outliers", E(1.5, -0.1, 2.9), mix="1%", **FIT)["verdict"]
        == "inconclusive"
    )


@pytest.mark.parametrize(
    "cid,fields",
    [
        ("03.auc.outliers", {"mix": "1%", **FIT}),  # min_effect 1.0 AUC points
        ("02.bn_vs_none", {"reading": "epoch 4"}),  # min_effect 0.5 (passed at lo = 0.27 before)
        ("01.final.flip", {}),  # min_effect 0.01
    ],
)
def test_direction_passes_at_lo_equal_to_min_effect_and_fails_just_below(cid, fields):
    m = float(claims.claim(cid)["min_effect"])
    at = claims.judge(cid, E(m + 1.0, m, m + 2.0), **fields)
    below = claims.judge(cid, E(m + 1.0, m - 1e-9, m + 2.0), **fields)
    assert claim_tests.test_verdict(claims.claim(cid), E(m + 1.0, m, m + 2.0)) == "reproduced"
    assert at["verdict"] == "reproduced" and below["verdict"] == "inconclusive"
    # wholly below the minimum effect, though above 0: not reproduced
    assert claims.judge(cid, E(m / 2, m / 4, m - 1e-9), **fields)["verdict"] == "not reproduced"


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
    # a gap equal to the tolerance ("at most"), though a hair past it in floats, passes
    edge = claims.judge("01.final.flip", E(0.3, 0.2, 0.4), acc_gap=0.809 - 0.759)
    assert edge["verdict"] == "reproduced"


def test_a_failing_bn_vs_other_row_where_bn_learned_less_reads_inconclusive():
    # BN 0.671 against no-BN 0.759 on the clean test set: fewer flips memorized proves nothing
    low = E(-0.443, -0.762, -0.125)
    ok = claims.judge("01.final.flip", low, acc_gap=0.709 - 0.759)  # -0.05 in floats, a hair past
    bad = claims.judge("01.final.flip", low, acc_gap=-0.088)
    assert ok["verdict"] == "not reproduced" and bad["verdict"] == "inconclusive"
    assert "lower than the compared model's by 0.088 > 0.05" in bad["magnitude"]
    # a passing test is left to the rule above (BN less accurate and memorizing more is evidence)
    assert (
        claims.judge("01.final.flip", E(0.3, 0.2, 0.4), acc_gap=-0.088)["verdict"] == "reproduced"
    )

    # an exploratory question: "not supported" is guarded the same way
    def ctrl(gap):
        return claims.judge(
            "01.control.gn", low, acc_gap=gap, compared=("gn", "none"), subset="the flips"
        )["verdict"]

    assert ctrl(-0.01) == "not supported" and ctrl(-0.2) == "inconclusive"


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


def _row(p, verdict="reproduced", cid="01.final.flip"):
    return claims.Verdict(
        id=cid,
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
        family=claims.family_of(cid),
        kind=claims.family(claims.family_of(cid))["kind"],
    )


def test_correct_is_bonferroni_at_the_declared_family_size_and_downgrades_only_what_fails():
    m = claims.family("memorization_strength")["size"]
    assert m == 57
    rows = [_row(0.0004), _row(0.001), _row(None), _row(0.3, "not reproduced")]
    rows = claims.correct(rows)
    assert [r.p_adjusted for r in rows] == pytest.approx([0.0228, 0.057, None, 1.0])
    assert [r.family_size for r in rows] == [57, 57, None, 57]
    assert [r.verdict for r in rows] == [
        "reproduced",  # 57 * 0.0004 = 0.0228 <= 0.025
        "inconclusive",  # 57 * 0.001 = 0.057 > 0.025
        "reproduced",  # no p-value (an exact identity, no interval): not corrected
        "not reproduced",
    ]
    assert "Bonferroni" in rows[1].magnitude and "57 tests of its family" in rows[1].magnitude
    assert claims.correct(rows) == rows  # idempotent: a second correction adds no second note
    assert claims.holm is claims.correct  # the notebooks' old name


def test_a_stored_row_is_corrected_again_at_its_familys_size_declared_today():
    """A family grown before a new configuration's run re-corrects the rows stored under its old
    size exactly as `correct` corrects a fresh row today; other rows come back unchanged."""
    m = claims.family("memorization_strength")["size"]
    assert m == 57

    def stored(p, verdict, m_old, note=""):
        row = _row(p, verdict).as_dict()
        return {**row, "magnitude": note, "p_adjusted": min(1.0, m_old * p), "family_size": m_old}

    # held at m = 40 (40 x 0.0006 = 0.024), fails at 57 (0.0342): inconclusive, says both sizes
    again = claims.recorrected(stored(0.0006, "reproduced", 40))
    fresh = claims.correct([_row(0.0006)])[0].as_dict()
    assert again["verdict"] == fresh["verdict"] == "inconclusive"
    assert again["magnitude"].startswith(fresh["magnitude"])  # the same note, then the sizes
    assert again["p_adjusted"] == pytest.approx(fresh["p_adjusted"]) and again["family_size"] == 57
    assert "57 tests of its family memorization_strength" in again["magnitude"]
    assert "stored under 40" in again["magnitude"]
    # inconclusive at m = 80 by the correction alone (0.04), holds at 57 (0.0228): the old note goes
    note = "not significant after Bonferroni's correction over the 80 tests of its family x"
    again = claims.recorrected(stored(0.0004, "inconclusive", 80, f"a; {note}"))
    assert again["verdict"] == "reproduced" and again["magnitude"].startswith("a; corrected again")
    # inconclusive for another reason (no correction note): stays inconclusive
    assert claims.recorrected(stored(0.0004, "inconclusive", 80, "a"))["verdict"] == "inconclusive"
    assert claims.recorrected(stored(0.9, "not reproduced", 40))["verdict"] == "not reproduced"
    # today's size, no p-value, or stored before the families: unchanged
    same = stored(0.0006, "reproduced", 57)
    assert claims.recorrected(same) == same
    nop = {**_row(None).as_dict()}
    assert claims.recorrected(nop) == nop
    old = {k: v for k, v in stored(0.0006, "reproduced", 13).items() if k != "kind"}
    assert claims.stored_before_families(old) and claims.recorrected(old) == old
    unknown = {**stored(0.0006, "reproduced", 40), "id": "01.no.such.claim"}
    assert claims.recorrected(unknown) == unknown
    # held and still holds; corrected twice is corrected once
    held = claims.recorrected(stored(0.0001, "reproduced", 40))
    assert held["verdict"] == "reproduced" and claims.recorrected(held) == held
    # stored uncorrected (a p-value, no size): corrected now
    bare = {k: v for k, v in stored(0.0006, "reproduced", 40).items() if k != "family_size"}
    assert claims.recorrected(bare)["verdict"] == "inconclusive"
    assert "stored uncorrected" in claims.recorrected(bare)["magnitude"]
    # an exploratory row holds again in its own word
    gn = {**_row(0.0001, "inconclusive", cid="01.control.gn").as_dict(), "family_size": 1000}
    gn["magnitude"] = f"{claims.CORRECTION_NOTE} 1000 tests of its family control_gamma"
    assert claims.recorrected(gn)["verdict"] == "supported"


def test_the_same_evidence_gets_the_same_verdict_whatever_the_run_holds():
    """A row's corrected verdict and p-value depend on its own evidence alone: alone (a run of
    one notebook, `--only`), among the rows of every notebook, or among any other rows of its
    own family, it reads the same."""
    import random

    import dataclasses

    est = E(0.3, 0.2, 0.4)  # normal approximation: p = 1.3e-9 above min_effect 0.01
    target = claims.judge("01.final.flip", est, acc_gap=0.0)
    # 50 * 0.0004 = 0.02: passes at m = 50 whatever else the run holds (a step-down over the
    # run's own rows would make it depend on how many rows and smaller p-values the run held)
    border = dataclasses.replace(_row(0.0004), claim="border")
    others = [
        claims.judge("01.speed.flip", E(0.02, 0.015, 0.03), acc_gap=0.0),
        claims.judge("02.bn_vs_none", E(0.9, 0.6, 1.2), reading="epoch 4"),
        claims.judge("03.auc.mix0.all", E(2.2, 1.4, 3.0), **FIT),
        claims.judge("04.most_channels", E(0.92, 0.88, 0.96), arch="lenet"),
        claims.judge("01.control.gn", E(0.05, 0.02, 0.08), subset="flips", acc_gap=0.0),
        *(_row(p) for p in (0.0001, 0.0002, 0.0003, 0.00035, 0.2, 0.5, 0.9)),
    ]
    alone = claims.correct([target, border])
    rng = random.Random(0)
    for _ in range(20):
        context = rng.sample(others, rng.randint(0, len(others)))
        mixed = claims.correct([*context, target, *context, border])
        got = [r for r in mixed if r.claim in (target.claim, "border")]
        assert len(got) == 2 and [(r.verdict, r.p_adjusted) for r in got] == [
            (r.verdict, r.p_adjusted) for r in alone
        ]
    assert [r.verdict for r in alone] == ["reproduced", "reproduced"]


def test_one_draw_gives_no_interval_and_an_inconclusive_verdict():
    strong = E(0.5, 0.4, 0.6, n=16)  # e.g. 16 targets of one pool: n counts targets, not pools
    one = claims.judge("03.auc.mix0.all", E(5.0, 4.0, 6.0, n=16), n_units=1, **FIT)
    assert one.verdict == "inconclusive" and one.n_units == 1 and one.p is None
    assert math.isnan(one.lo) and math.isnan(one.hi) and "no interval (n/a)" in one.magnitude
    assert "within the paper's" not in one.magnitude  # no magnitude without an interval
    assert "(no interval: n/a)" in one.line()
    assert claims.correct([one])[0].family_size is None  # no p-value: nothing to correct
    two = claims.judge("03.auc.mix0.all", E(5.0, 4.0, 6.0, n=16), n_units=2, **FIT)
    assert two.verdict == "reproduced" and two.n_units == 2
    # the default is the estimate's own n (seeds for a t interval): one seed, no verdict
    assert claims.judge("01.final.flip", E(0.5, 0.4, 0.6, n=1)).verdict == "inconclusive"
    assert claims.judge("01.final.flip", strong).verdict == "reproduced"
    assert claims.judge("01.final.flip", strong).as_dict()["n_units"] == 16
    # an exact identity needs no interval: one evaluation is its whole evidence
    assert claims.judge("04.derivation", E(1.0, 1.0, 1.0, n=1)).verdict == "reproduced"


def test_exploratory_rows_read_supported_or_not_supported_never_reproduced():
    exploratory = [
        cid
        for cid in claims._load()["claims"]
        if claims.family(claims.family_of(cid))["kind"] == "exploratory"
    ]
    assert "01.control.gn" in exploratory and "05.frontier" in exploratory
    fields = {
        "subset": "s",
        "mix": "5%",
        "subgroup": "all",
        "factor": 2,
        "alternative": "a",
        "sizes": "s",
        "size": "1,000",
        "arm": "the sigma path",
        "corruption": "flip",
        "n_nonmembers": 1000,
        "fit_level": "99%",
        "lr": "0.05",
        "acc_tolerance": 0.01,
        **FIT,
    }
    seen = set()
    for cid in [c for c in exploratory if claims.claim(c)["test"] == "direction"]:
        m = float(claims.claim(cid)["min_effect"])
        for est in (E(m + 2, m + 1, m + 3), E(m / 4, -m, m / 2), E(m, -m, 3 * m)):
            row = claims.correct([claims.judge(cid, est, acc_gap=0.0, **fields)])[0]
            assert row.kind == "exploratory" and "reproduced" not in row.verdict
            seen.add(row.verdict)
    assert seen == {"supported", "not supported", "inconclusive"}
    assert claims.worded("reproduced", "exploratory") == "supported"
    assert claims.worded("not supported", "paper") == "not reproduced"


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


def test_a_direction_tests_p_value_agrees_with_its_interval_rule_and_a_family_of_one_keeps_it():
    """A t interval's lower end reaches min_effect iff the one-sided p at min_effect is at most
    0.025; a family of one (05.lira) corrects nothing."""
    from bnpaper import stats

    assert claims.family(claims.family_of("05.lira"))["size"] == 1
    for values in ([0.2, 0.25, 0.3], [0.01, 0.3, -0.1], [0.05, 0.06, 0.2], [0.02, 0.03, 0.05]):
        e = stats.t_mean(values)
        row = claims.judge("05.lira", e, acc_gap=0.0, acc_tolerance=0.01, pool="3 pools")
        (corrected,) = claims.correct([row])
        assert corrected.verdict == row.verdict and corrected.p_adjusted == row.p
        assert (row.p <= 0.025) == (e.lo >= 0.01) == (row.verdict == "reproduced")


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


@pytest.mark.parametrize("failed", ["not reproduced", "not supported"])
def test_matched_fit_makes_a_failing_test_inconclusive_too_and_names_both_tolerances(failed):
    """Off matched fit a model that learned less proves nothing either way: a failing test reads
    inconclusive as a holding one does, and its note says the test alone failed."""
    verdict, note = claims.matched_fit(failed, "smaller than the paper's 3-5", 0.05, -0.1)
    assert verdict == "inconclusive"
    assert note.startswith("smaller than the paper's 3-5; not at matched fit: clean training")
    assert (
        "(bn minus none +0.050) by 0.04 more" in note and "(bn minus none -0.100) by 0.08" in note
    )
    assert note.endswith(claims.OFF_FIT_FAILED)
    # within both tolerances a failing test stands, with its note untouched
    assert claims.matched_fit(failed, "x", 0.01, -0.02) == (failed, "x")
    # a holding test off matched fit does not claim to have failed
    assert claims.OFF_FIT_FAILED not in claims.matched_fit("reproduced", "x", 0.05, 0.0)[1]


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
    ok = claims.judge("01.final.flip", est, train_acc_gap=-0.01, test_acc_gap=0.02)
    bad = claims.judge(
        "01.final.flip", est, compared=("gn", "none"), train_acc_gap=0.0, test_acc_gap=0.03
    )
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


# ---------------------------------------------------------------- the verdict families
def _configurations() -> dict[str, int]:
    """Matrix cells per notebook ('01'..'05'): each run of params/matrix.yaml, per dataset."""
    import yaml

    doc = yaml.safe_load((claims.CLAIMS_FILE.parents[1] / "params" / "matrix.yaml").read_text())
    cells = dict.fromkeys(("01", "02", "03", "04", "05"), 0)
    for run in doc["runs"]:
        for nb in run["notebooks"]:
            cells[nb] += len(run["datasets"])
    return cells


def test_every_familys_declared_size_recounts_from_the_quick_reference_and_the_matrix():
    """m = sum over members (claims with a p-value) of quick rows + matrix cells x cell rows."""
    cells = _configurations()
    assert cells == {"01": 6, "02": 0, "03": 4, "04": 1, "05": 0}  # the matrix as committed
    doc = claims._load()
    for name, fam in doc["families"].items():
        count = sum(
            quick + cells[cid.split(".")[0]] * cell
            for cid, (quick, cell) in fam["rows"].items()
            if claim_tests.TESTS[doc["claims"][cid]["test"]].needs_interval
        )
        assert fam["size"] == count, f"family {name}: declared {fam['size']}, counted {count}"
    member = [cid for fam in doc["families"].values() for cid in fam["rows"]]
    assert sorted(member) == sorted(doc["claims"])  # every claim in exactly one family


def test_no_committed_configuration_gives_more_rows_of_a_claim_than_its_family_declares():
    import json
    from collections import Counter

    from bnpaper import results_tables

    root = claims.CLAIMS_FILE.parents[1]
    found = results_tables.collect(root, every_configuration=True)
    assert found, "no committed results"
    for nb, label, res in found:
        counts = Counter(c["id"] for c in res.get("claims", []))
        for cid, k in counts.items():
            quick, cell = claims.family(claims.family_of(cid))["rows"][cid]
            declared = quick if results_tables.is_reference(label) else cell
            assert k <= declared, f"{nb}/{label}: {k} rows of {cid}, declared {declared}"
    assert json  # the results are read as stored


def test_a_run_with_more_rows_of_a_claim_than_declared_says_so_and_keeps_its_verdicts():
    rows = claims.correct([_row(0.0001, cid="05.lira"), _row(0.0001, cid="05.lira")])
    assert [r.verdict for r in rows] == ["reproduced", "reproduced"]
    assert all("2 rows of 05.lira in this run, more than the 1" in r.magnitude for r in rows)


@pytest.mark.parametrize(
    "families,claim_extra,error",
    [
        ("{}", "", "claims in no family"),
        (
            "{f: {kind: paper, question: q, rows: {a: [1, 0]}, size: 1}}",
            "    family: paper\n",
            "a claim's family is declared under `families:`",
        ),
        (
            "{f: {kind: paper, question: q, rows: {a: [1, 0]}, size: 1}, "
            "g: {kind: exploratory, question: q, rows: {a: [1, 0]}, size: 1}}",
            "",
            "claim a is in families f and g",
        ),
        (
            "{f: {kind: guess, question: q, rows: {a: [1, 0]}, size: 1}}",
            "",
            "kind='guess'; allowed: \\['paper', 'exploratory'\\]",
        ),
        ("{f: {kind: paper, question: q, rows: {a: 1}, size: 1}}", "", "rows=1; allowed"),
    ],
)
def test_the_claims_file_refuses_a_claim_outside_exactly_one_well_formed_family(
    tmp_path, families, claim_extra, error
):
    path = tmp_path / "claims.yaml"
    path.write_text(
        f"settings: {{}}\nfamilies: {families}\nclaims:\n  a:\n    test: direction\n"
        f"    min_effect: 0.1\n{claim_extra}"
    )
    with pytest.raises(claims.ConfigError, match=error):
        claims._load(str(path))


@pytest.mark.parametrize("est", [E(-0.35, -0.5, -0.2), E(0.3, 0.2, 0.4)])
def test_a_fair_row_whose_models_ended_at_different_fits_reads_inconclusive_either_way(est):
    # the uncommitted six-seed run without seed 5: BN at 0.969 clean training accuracy, no-BN 0.991
    accs = {"bn": 0.969, "none": 0.991, "gn": 0.90}
    row = claims.judge(
        "01.final.flip", est, acc_gap=0.02, clean_train_acc=accs, fit_level="99%", subset="flips"
    )
    assert row["verdict"] == "inconclusive"
    assert (
        "clean training accuracy bn minus none -0.022, by 0.012 more than the 0.01"
        in (row["magnitude"])
    )
    # within the tolerance (a gap of 0.01 exactly, in floats a hair past): the test decides,
    # and a control further off is not compared
    close = {"bn": 0.981, "none": 0.991, "gn": 0.90}
    fitted = claims.judge(
        "01.final.flip", est, acc_gap=0.02, clean_train_acc=close, fit_level="99%"
    )
    assert fitted["verdict"] == claims.judge("01.final.flip", est, acc_gap=0.02)["verdict"]
    assert fitted["verdict"] != "inconclusive"
    # the paper's protocol (no fit level): no model trains to fit, nothing is checked
    paper = claims.judge("01.final.flip", est, acc_gap=0.02, clean_train_acc=accs)
    assert paper["verdict"] == fitted["verdict"]
    # a control row checks the control against no-BN
    ctrl = claims.judge(
        "01.control.gn",
        est,
        acc_gap=0.0,
        compared=("gn", "none"),
        clean_train_acc=accs,
        fit_level="99%",
        subset="flips",
    )
    assert ctrl["verdict"] == "inconclusive" and "gn minus none -0.091" in ctrl["magnitude"]


def _stored(rid="01.speed.flip", verdict="not reproduced", **extra):
    row = {"id": rid, "verdict": verdict, "magnitude": "", "corruption": "flip", "kind": "paper"}
    return {**row, **extra}


def _results(protocol="fair", bn_train=0.9888):
    accs = {"bn": bn_train, "none": 0.9982, "gn": 0.9950}
    used = {"flip": {n: {"train_acc": a, "fitted": 2, "runs": 3} for n, a in accs.items()}}
    return {"params": {"protocol": protocol, "fit_level": 0.99}, "epochs_used": used}


def test_refitted_reads_a_stored_fair_row_with_the_fit_rule_and_leaves_every_other_row():
    # DenseNet's committed 01.speed.flip, BN 0.9888 against no-BN 0.9982: within 1 point, kept
    assert claims.refitted(_stored(), _results()) == _stored()
    row = claims.refitted(_stored(), _results(bn_train=0.97))
    assert row["verdict"] == "inconclusive"
    assert "bn minus none -0.028" in row["magnitude"]
    assert claims.REFITTED_NOTE in row["magnitude"]
    unchanged = [
        (_stored(), _results(protocol="paper", bn_train=0.97)),  # no model trains to fit
        (_stored(fit_level="99%"), _results(bn_train=0.97)),  # judged with the rule already
        (_stored("01.fit.flip"), _results(bn_train=0.97)),  # a matched-fit row has its own rule
        (_stored("01.control.gn", "not supported"), _results(bn_train=0.97)),  # gn is close
        (_stored(corruption="ood"), _results(bn_train=0.97)),  # a case the results lack
    ]
    for stored, res in unchanged:
        assert claims.refitted(stored, res) == stored
    ctrl = _results()
    ctrl["epochs_used"]["flip"]["gn"]["train_acc"] = 0.976
    row = claims.refitted(_stored("01.control.gn", "not supported"), ctrl)
    assert row["verdict"] == "inconclusive" and "gn minus none -0.022" in row["magnitude"]
