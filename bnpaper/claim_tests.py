"""The kinds of claim test (direction, at least, within, more than half, exact): each kind's
verdict on an estimate, its one-sided p-value, and how a magnitude compares with the paper's.
The verdicts here use the paper's words ("reproduced", "not reproduced", "inconclusive");
`claims.judge` gives an exploratory row its own ("supported", "not supported")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .stats import Estimate


def _interval_test(x: float, lo: float, hi: float) -> str:
    """Above `x` (strictly: an interval that only touches x proves nothing), below, or neither."""
    if lo > x:
        return "reproduced"
    return "not reproduced" if hi < x else "inconclusive"


def _direction(c: dict, est: Estimate) -> str:
    """The whole interval at or above `min_effect` (lo == min_effect passes: the smallest effect
    worth the word is reached), wholly below it, or neither."""
    m = float(c["min_effect"])
    if est.lo >= m:
        return "reproduced"
    return "not reproduced" if est.hi < m else "inconclusive"


def _within(c: dict, est: Estimate) -> str:
    a, b = map(float, c["band"])
    if a <= est.lo and est.hi <= b:
        return "reproduced"
    return "not reproduced" if est.hi < a or est.lo > b else "inconclusive"


def _exact(c: dict, est: Estimate) -> str:
    same = math.isclose(est.value, c["threshold"], abs_tol=1e-12)
    return "reproduced" if same else "not reproduced"


def _within_p(c: dict, est: Estimate) -> float:
    a, b = map(float, c["band"])
    return max(est.p_above(a), est.p_below(b))  # TOST: the larger of the two one-sided tests


@dataclass(frozen=True)
class TestKind:
    """One kind of claim test: the claim field it needs, its verdict and its one-sided p-value
    (H0 "the claim fails"; None for an exact identity)."""

    needs: str | None
    verdict: Callable[[dict, Estimate], str]
    p_value: Callable[[dict, Estimate], float | None]
    needs_interval: bool = True


TESTS: dict[str, TestKind] = {
    "direction": TestKind(
        "min_effect", _direction, lambda c, est: est.p_above(float(c["min_effect"]))
    ),
    "at_least": TestKind(
        "threshold",
        lambda c, est: _interval_test(float(c["threshold"]), est.lo, est.hi),
        lambda c, est: est.p_above(float(c["threshold"])),
    ),
    "more_than_half": TestKind(
        None,
        lambda c, est: _interval_test(0.5, est.lo, est.hi),
        lambda c, est: est.p_above(0.5),
    ),
    "within": TestKind("band", _within, _within_p),
    "exact": TestKind("threshold", _exact, lambda c, est: None, needs_interval=False),
}


def test_verdict(c: dict, est: Estimate) -> str:
    """The verdict of the claim's test alone (no confound)."""
    kind = TESTS[c["test"]]
    if kind.needs_interval and not (math.isfinite(est.lo) and math.isfinite(est.hi)):
        return "inconclusive"  # no interval (a single seed): nothing to sign
    return kind.verdict(c, est)


def p_value(c: dict, est: Estimate) -> float | None:
    """The one-sided p-value of the claim's test, H0 "the claim fails": the effect is at most
    `min_effect` (direction: the hypothesis its interval rule tests), at most the threshold
    (at_least), at most 0.5 (more_than_half), outside the band (within: the larger of the two
    one-sided tests, TOST). None for an exact identity."""
    return TESTS[c["test"]].p_value(c, est)


def magnitude(c: dict, est: Estimate) -> str:
    """How the measured effect compares with the magnitude the paper reports, if it reports one."""
    rng = c.get("paper_range")
    if rng is None or not (math.isfinite(est.lo) and math.isfinite(est.hi)):
        return ""  # no magnitude to compare without an interval
    a, b = map(float, rng)
    paper = f"{a:g}-{b:g}"
    if est.lo > b:
        return f"larger than the paper's {paper}"
    if est.hi < a:
        return f"smaller than the paper's {paper}"
    return f"within the paper's {paper}"
