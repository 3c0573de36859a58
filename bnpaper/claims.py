"""The paper's claims (`claims.yaml`: words, number, test) and the verdict rules.

`judge(claim_id, estimate, ...)` returns one row of the "paper says / we measured / verdict"
table: the verdict follows the claim's test, says how the magnitude compares with the paper's
where the paper gives one, and turns a "reproduced" into "inconclusive" when clean accuracy
confounds it.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import yaml

from .config import ConfigError
from .stats import Estimate

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")
TESTS = ("direction", "at_least", "within", "more_than_half", "exact")
VERDICTS = ("reproduced", "not reproduced", "inconclusive")


@functools.lru_cache(maxsize=None)
def _load(path: str = str(CLAIMS_FILE)) -> dict:
    doc = yaml.safe_load(Path(path).read_text())
    for cid, c in doc["claims"].items():
        if c.get("test") not in TESTS:
            raise ConfigError(
                f"{path}: claim {cid} has test={c.get('test')!r}; allowed: {list(TESTS)}"
            )
        need = {
            "at_least": "threshold",
            "exact": "threshold",
            "within": "band",
            "direction": "min_effect",
        }.get(c["test"])
        if need and need not in c:
            raise ConfigError(f"{path}: claim {cid} (test {c['test']}) needs {need!r}")
    return doc


def claim(claim_id: str) -> dict:
    """One claim of the claims file, by id."""
    claims = _load()["claims"]
    if claim_id not in claims:
        raise KeyError(f"no claim {claim_id!r} in {CLAIMS_FILE.name}; known: {sorted(claims)}")
    return claims[claim_id]


def setting(name: str, section: str) -> Any:
    """A notebook's entry of the claims file's `settings` (e.g. `selection`, "05")."""
    settings = _load()["settings"]
    if name not in settings or section not in settings[name]:
        raise KeyError(f"no setting {name!r} for {section!r} in {CLAIMS_FILE.name}")
    return settings[name][section]


def acc_tolerance(section: str) -> float:
    """The clean-accuracy tolerance of a notebook's verdicts ('01'..'05')."""
    return float(_load()["settings"]["acc_tolerance"][section])


def chance_level(dataset: Any) -> float | None:
    """1/classes of `dataset` (a name in `bnpaper.data.DATASETS`); None if it is not known."""
    from .data import DATASETS

    spec = DATASETS.get(dataset) if isinstance(dataset, str) else None
    return None if spec is None else 1.0 / spec.n_classes


def near_chance(
    accuracies: Any, dataset: Any, compared: Any = ("bn", "none")
) -> tuple[dict[str, float], float]:
    """The compared models (the keys `compared` of `accuracies` {name: clean test accuracy}) that
    did not learn: whose accuracy above chance (1/classes) is less than `settings.min_learned` of
    the most accurate compared model's. Returns ({name: accuracy}, that floor); ({}, nan) if the
    dataset is not known or fewer than two compared models are given."""
    chance = chance_level(dataset)
    acc = {
        n: float(accuracies[n])
        for n in compared
        if isinstance(accuracies, dict) and isinstance(accuracies.get(n), (int, float))
    }
    if chance is None or len(acc) < 2:
        return {}, math.nan
    floor = chance + _min_learned() * (max(acc.values()) - chance)
    return {n: a for n, a in acc.items() if a < floor}, floor


def lira_claim_id(mix: float, group: str) -> str:
    """The claim about LiRA's delta-AUC at an outlier mix: the paper numbers 0, 1% and 5% (all
    examples); any other mix, and the outliers-only group, are tested for direction only."""
    if group != "all":
        return "03.auc.outliers"
    known = {0.0: "03.auc.mix0.all", 0.01: "03.auc.mix1.all", 0.05: "03.auc.mix5.all"}
    return next(
        (cid for m, cid in known.items() if math.isclose(mix, m, abs_tol=1e-9)), "03.auc.other.all"
    )


def test_verdict(c: dict, est: Estimate) -> str:
    """The verdict of the claim's test alone (no confound)."""
    lo, hi, v = est.lo, est.hi, est.value
    if not (math.isfinite(lo) and math.isfinite(hi)) and c["test"] != "exact":
        return "inconclusive"  # no interval (a single seed): nothing to sign
    t = c["test"]
    if t == "exact":
        return "reproduced" if math.isclose(v, c["threshold"], abs_tol=1e-12) else "not reproduced"
    if t == "direction":
        m = float(c["min_effect"])
        if lo > 0 and v >= m:
            return "reproduced"
        return "not reproduced" if hi < m else "inconclusive"
    x = 0.5 if t == "more_than_half" else None
    if t == "at_least" or x is not None:
        x = float(c["threshold"]) if x is None else x
        if lo > x:  # strict: an interval that only touches X (a ratio of exactly 1) proves nothing
            return "reproduced"
        return "not reproduced" if hi < x else "inconclusive"
    a, b = map(float, c["band"])  # within
    if a <= lo and hi <= b:
        return "reproduced"
    return "not reproduced" if hi < a or lo > b else "inconclusive"


def magnitude(c: dict, est: Estimate) -> str:
    """How the measured effect compares with the magnitude the paper reports, if it reports one."""
    rng = c.get("paper_range")
    if rng is None:
        return ""
    a, b = map(float, rng)
    paper = f"{a:g}-{b:g}"
    if est.lo > b:
        return f"larger than the paper's {paper}"
    if est.hi < a:
        return f"smaller than the paper's {paper}"
    return f"within the paper's {paper}"


def _min_learned() -> float:
    return float(_load()["settings"]["min_learned"])


def judge(
    claim_id: str,
    est: Estimate,
    section: str | None = None,
    acc_gap: float | None = None,
    compared: tuple[str, ...] = ("bn", "none"),
    **fields: Any,
) -> dict:
    """One verdict row. `acc_gap`: for a 'bn_vs_other' claim, BN's clean test accuracy minus the
    other model's; for a 'cost' claim, the accuracy the mitigation costs (baseline minus
    mitigated); for a 'reach' claim (a comparison at equal accuracy), the compared model's
    accuracy minus the regularizer's at the point read (either sign beyond the tolerance makes
    the row inconclusive: the two were not compared at equal accuracy). `compared`: the models of
    `clean_test_acc` a 'bn_vs_other' row compares (default BN and no-BN; a control row names its
    control): if one of them did not learn (`near_chance`), the row is inconclusive. `fields` (unit, clean_test_acc, dataset, ...) are copied into the row; string
    fields of the claim are formatted with them (e.g. {mix}, {arch})."""
    c = claim(claim_id)
    section = section or claim_id.split(".")[0]
    verdict = test_verdict(c, est)
    note = magnitude(c, est)
    conf = c.get("confound")
    if conf == "reach" and acc_gap is not None and abs(acc_gap) > acc_tolerance(section):
        # a comparison at equal accuracy that the frontier cannot make: it is inconclusive
        # whichever way the test went
        tol = acc_tolerance(section)
        verdict = "inconclusive"
        what = (
            "the regularizer never reaches the compared model's clean accuracy: short by"
            if acc_gap > 0
            else "the compared model is less accurate than every regularizer setting, by"
        )
        note = "; ".join(x for x in (note, f"{what} {abs(acc_gap):.3f} > {tol:g}") if x)
    elif (
        conf == "bn_vs_other"
        and (low := near_chance(fields.get("clean_test_acc"), fields.get("dataset"), compared))[0]
    ):
        # a model that did not learn carries no evidence either way, whichever way the test went
        verdict = "inconclusive"
        names = ", ".join(f"{n} {a:.3f}" for n, a in low[0].items())
        note = "; ".join(
            x
            for x in (
                note,
                f"did not learn ({names}: less than {_min_learned():g} of the best "
                f"compared model's accuracy above chance, floor {low[1]:.3f}); "
                "it carries no evidence either way",
            )
            if x
        )
    elif conf and conf != "reach" and verdict == "reproduced" and acc_gap is not None:
        tol = acc_tolerance(section)
        if acc_gap > tol:
            verdict = "inconclusive"
            what = (
                "its clean test accuracy is higher than the compared model's by"
                if conf == "bn_vs_other"
                else "the mitigation costs"
            )
            note = "; ".join(
                x for x in (note, f"{what} {acc_gap:.3f} > {tol:g} clean accuracy") if x
            )
    fmt = {k: v for k, v in fields.items() if isinstance(v, (str, int, float))}
    row = {
        "id": claim_id,
        "claim": c["words"].format(**fmt),
        "paper": c["paper"].format(**fmt),
        "test": c["test"],
        "measured": est.value,
        "lo": est.lo,
        "hi": est.hi,
        "n": est.n,
        "verdict": verdict,
        "magnitude": note,
        "p": p_value(c, est),
        "family": c.get("family", "paper"),
    }
    row.update(fields)
    return row


def p_value(c: dict, est: Estimate) -> float | None:
    """The one-sided p-value of the claim's test, H0 "the claim fails": the effect is at most 0
    (direction), at most the threshold (at_least), at most 0.5 (more_than_half), outside the
    band (within: the larger of the two one-sided tests, TOST). None for an exact identity."""
    t = c["test"]
    if t == "exact":
        return None
    if t == "within":
        a, b = map(float, c["band"])
        return max(est.p_above(a), est.p_below(b))
    return est.p_above({"direction": 0.0, "more_than_half": 0.5}.get(t, c.get("threshold", 0.0)))


HOLM_ALPHA = 0.025  # one-sided; a family of one keeps the 95% interval's rule


def holm(rows: list[dict], alpha: float = HOLM_ALPHA) -> list[dict]:
    """Holm's step-down correction over each family of verdict rows of one notebook run (the
    paper's claims; the exploratory questions apart), in place: each statistical row gets
    `p_holm` and `family_size`; a "reproduced" whose adjusted p-value is not below `alpha`
    becomes "inconclusive", and says so. Rows without a p-value (exact identities, no interval)
    are not part of a family."""
    tested = [r for r in rows if r.get("p") is not None and math.isfinite(r["p"])]
    for family in dict.fromkeys(r.get("family", "paper") for r in tested):
        members = sorted(
            (r for r in tested if r.get("family", "paper") == family), key=lambda r: r["p"]
        )
        m, running = len(members), 0.0
        for i, r in enumerate(members):
            running = max(running, min(1.0, (m - i) * r["p"]))
            r["p_holm"], r["family_size"] = running, m
            if r["verdict"] == "reproduced" and running >= alpha:
                r["verdict"] = "inconclusive"
                what = "claims" if family == "paper" else f"{family} rows"
                why = (
                    f"not significant after Holm's correction over the {m} {what} of this run "
                    f"(p = {r['p']:.2g}, adjusted {running:.2g})"
                )
                r["magnitude"] = "; ".join(x for x in (r.get("magnitude"), why) if x)
    return rows
