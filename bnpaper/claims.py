"""The paper's claims (`claims.yaml`: words, number, test) and the verdict rules.

`judge(claim_id, estimate, ...)` returns one `Verdict`, a row of the "paper says / we measured /
verdict" table: the verdict follows the claim's test (one entry of `claim_tests.TESTS` per
kind), says how the magnitude compares with the paper's where the paper gives one, and turns a
"reproduced" into "inconclusive" when clean accuracy confounds it (`confound:`; at matched
fit, `matched_fit`, any verdict), and gives no interval and no verdict to a row from fewer than
2 independent draws (`n_units`). An exploratory row reads "supported" / "not supported", never
"reproduced". `correct` applies each row's verdict family (`families:` in claims.yaml, fixed
before any run): Bonferroni at the family's declared size, so a row's verdict depends on its
own evidence only. `Verdict.line` prints a row, the one way every notebook prints it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml

from .config import ConfigError
from .claim_tests import TESTS, magnitude, p_value, test_verdict
from .stats import Estimate

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")
# the verdict words of each kind of family: holds, fails, neither
VERDICTS = {
    "paper": ("reproduced", "not reproduced", "inconclusive"),
    "exploratory": ("supported", "not supported", "inconclusive"),
}
HOLDS = tuple(w[0] for w in VERDICTS.values())
FAILS = tuple(w[1] for w in VERDICTS.values())
CONFOUNDS = ("bn_vs_other", "cost", "reach", "matched_fit")  # `confound:` of a claim, if any
MIN_UNITS = 2  # independent draws (seeds, pools) an interval needs: one draw gives none


def holds(verdict: str) -> bool:
    """Whether a verdict says the claim holds ("reproduced", or "supported" for a question)."""
    return verdict in HOLDS


def fails(verdict: str) -> bool:
    """Whether a verdict says the claim fails ("not reproduced" / "not supported")."""
    return verdict in FAILS


def worded(verdict: str, kind: str) -> str:
    """`verdict` in the words of a family kind ('paper', 'exploratory'): a stored paper word
    "reproduced" of an exploratory row reads "supported", and back."""
    words = VERDICTS[kind]
    return words[0] if holds(verdict) else words[1] if fails(verdict) else verdict


def kind_of(row: Mapping) -> str:
    """A stored row's family kind: its `kind`, else (rows stored before verdict families) its
    `family` when that names a kind, else the kind of its claim's family; 'paper' by default."""
    if row.get("kind") in VERDICTS:
        return row["kind"]
    if row.get("family") in VERDICTS:
        return row["family"]
    name = _family_index().get(str(row.get("id", "")))
    return family(name)["kind"] if name else "paper"


# ---------------------------------------------------------------- the claims file
@functools.lru_cache(maxsize=None)
def _load(path: str = str(CLAIMS_FILE)) -> dict:
    doc = yaml.safe_load(Path(path).read_text())
    for cid, c in doc["claims"].items():
        kind = TESTS.get(c.get("test"))
        if kind is None:
            raise ConfigError(
                f"{path}: claim {cid} has test={c.get('test')!r}; allowed: {list(TESTS)}"
            )
        if kind.needs and kind.needs not in c:
            raise ConfigError(f"{path}: claim {cid} (test {c['test']}) needs {kind.needs!r}")
        if c.get("confound") not in (None, *CONFOUNDS):
            raise ConfigError(
                f"{path}: claim {cid} has confound={c['confound']!r}; allowed: {list(CONFOUNDS)}"
            )
        if "family" in c:
            raise ConfigError(
                f"{path}: claim {cid} has family={c['family']!r}; a claim's family is declared "
                "under `families:` (add the claim to one family's `rows`)"
            )
    _check_families(path, doc)
    return doc


def _check_families(path: str, doc: dict) -> None:
    """Every family has a kind, a question, rows [quick, per matrix cell] of known claims and an
    integer size; every claim is in exactly one family."""
    seen: dict[str, str] = {}
    for name, f in doc.get("families", {}).items():
        if f.get("kind") not in VERDICTS:
            raise ConfigError(
                f"{path}: family {name} has kind={f.get('kind')!r}; allowed: {list(VERDICTS)}"
            )
        for key in ("question", "rows", "size"):
            if key not in f:
                raise ConfigError(f"{path}: family {name} needs {key!r}")
        if not isinstance(f["size"], int) or f["size"] < 0:
            raise ConfigError(f"{path}: family {name} has size={f['size']!r}; allowed: int >= 0")
        for cid, rows in f["rows"].items():
            if cid not in doc["claims"]:
                raise ConfigError(f"{path}: family {name} names {cid!r}, which is no claim")
            if cid in seen:
                raise ConfigError(f"{path}: claim {cid} is in families {seen[cid]} and {name}")
            ok = isinstance(rows, list) and len(rows) == 2
            if not ok or not all(isinstance(k, int) and k >= 0 for k in rows):
                raise ConfigError(
                    f"{path}: family {name}, claim {cid} has rows={rows!r}; allowed: "
                    "[rows in the quick reference, rows per matrix cell], integers >= 0"
                )
            seen[cid] = name
    missing = sorted(set(doc["claims"]) - set(seen))
    if missing:
        raise ConfigError(f"{path}: claims in no family of `families:`: {missing}")


@functools.lru_cache(maxsize=None)
def _family_index() -> dict[str, str]:
    return {cid: name for name, f in _load()["families"].items() for cid in f["rows"]}


def family(name: str) -> dict:
    """One verdict family of the claims file (kind, question, rows, size), by name."""
    families = _load()["families"]
    if name not in families:
        raise KeyError(f"no family {name!r} in {CLAIMS_FILE.name}; known: {sorted(families)}")
    return families[name]


def family_of(claim_id: str) -> str:
    """The name of the verdict family a claim belongs to."""
    claim(claim_id)
    return _family_index()[claim_id]


def claim(claim_id: str) -> dict:
    """One claim of the claims file, by id."""
    claims = _load()["claims"]
    if claim_id not in claims:
        raise KeyError(f"no claim {claim_id!r} in {CLAIMS_FILE.name}; known: {sorted(claims)}")
    return claims[claim_id]


def setting(name: str, section: str | None = None) -> Any:
    """An entry of the claims file's `settings`: a notebook's (e.g. `selection`, "05"), or the
    whole entry without `section` (e.g. `lr_selection`)."""
    settings = _load()["settings"]
    if name not in settings or (section is not None and section not in settings[name]):
        raise KeyError(f"no setting {name!r} for {section!r} in {CLAIMS_FILE.name}")
    return settings[name] if section is None else settings[name][section]


def acc_tolerance(section: str) -> float:
    """The clean-accuracy tolerance of a notebook's verdicts ('01'..'05')."""
    return float(_load()["settings"]["acc_tolerance"][section])


def matched_fit_tolerances() -> dict[str, float]:
    """The largest gaps a matched-fit row allows between the compared models at the reading:
    {'train_acc': clean training accuracy, 'test_acc': clean test accuracy} (claims.yaml)."""
    s = _load()["settings"]
    return {k: float(s[f"{k}_tolerance"]) for k in ("train_acc", "test_acc")}


def _min_learned() -> float:
    return float(_load()["settings"]["min_learned"])


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
        (cid for m, cid in known.items() if math.isclose(mix, m, abs_tol=1e-9)),
        "03.auc.other.all",
    )


# ---------------------------------------------------------------- the verdict of one claim
def _joined(*notes: str) -> str:
    return "; ".join(x for x in notes if x)


@dataclass(frozen=True)
class Verdict:
    """One row of the "paper says / we measured / verdict" table. `family`: the claim's verdict
    family (claims.yaml `families:`), `kind` its kind ('paper', 'exploratory'); `n_units`: the
    independent draws (seeds, pools) the interval is over; `fields`: what the notebook adds
    (unit, clean_test_acc, dataset, budget, the case...); `p_adjusted`, `family_size`: set by
    `correct`. `as_dict()` is the row as results.json stores it."""

    id: str
    claim: str
    paper: str
    test: str
    measured: float
    lo: float
    hi: float
    n: int
    verdict: str
    magnitude: str
    p: float | None
    family: str
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    p_adjusted: float | None = None
    family_size: int | None = None
    kind: str = "paper"
    n_units: int | None = None

    def __getitem__(self, key: str) -> Any:
        """A row field by name, as in results.json (`row["verdict"]`, `row["clean_test_acc"]`)."""
        row = self.as_dict()
        if key not in row:
            raise KeyError(key)
        return row[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)

    def as_dict(self) -> dict:
        """The row as results.json stores it: the claim's fields, then the notebook's."""
        row = {
            "id": self.id,
            "claim": self.claim,
            "paper": self.paper,
            "test": self.test,
            "measured": self.measured,
            "lo": self.lo,
            "hi": self.hi,
            "n": self.n,
            "verdict": self.verdict,
            "magnitude": self.magnitude,
            "p": self.p,
            "family": self.family,
            "kind": self.kind,
            "n_units": self.n_units,
        }
        row.update(self.fields)
        if self.family_size is not None:
            row["p_adjusted"], row["family_size"] = self.p_adjusted, self.family_size
        return row

    def with_verdict(self, verdict: str, why: str = "") -> Verdict:
        """The same row with another verdict, `why` added to its note."""
        return dataclasses.replace(self, verdict=verdict, magnitude=_joined(self.magnitude, why))

    def line(self) -> str:
        """The row as one line of text: claim, paper, estimate with its interval and unit,
        verdict with its note, and the clean training and test accuracies it was read beside
        (where the row has them: a reading at matched fit, or under the fair protocol a row
        over the epoch cap, at the end of training)."""
        unit = str(self.fields.get("unit", "")).split(";")[0]
        if math.isfinite(self.measured) and math.isfinite(self.lo) and math.isfinite(self.hi):
            est = f"{_num(self.measured)} [{_num(self.lo)}, {_num(self.hi)}]"
        elif math.isfinite(self.measured):
            est = f"{_num(self.measured)} (no interval: n/a)"
        else:
            est = "no estimate"
        verdict = f"{self.verdict} ({self.magnitude})" if self.magnitude else self.verdict
        text = f"- {self.claim}: paper {self.paper}; measured {est} {unit} -> {verdict}"
        from .plots import label

        for key, words in (("clean_train_acc", "clean training"), ("clean_test_acc", "clean test")):
            acc = self.fields.get(key)
            if isinstance(acc, Mapping) and acc:
                accs = ", ".join(f"{label(k)} {_acc(v)}" for k, v in acc.items())
                text += f"; {words} accuracy {accs}"
        return text


def _num(x: float) -> str:
    return f"{x:+.3g}" if math.isfinite(x) else "n/a"


def _acc(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else str(x)


def show(rows: Iterable[Verdict]) -> None:
    """Print verdict rows, one line each."""
    for row in rows:
        print(row.line())


_ROUNDING = 1e-9  # a gap of accuracies equal to a tolerance may exceed it by this much in floats
_MATCHED = {"train_acc": "clean training accuracy", "test_acc": "clean test accuracy"}
OFF_FIT = "not at matched fit: "  # how a matched-fit row's note begins to name the missed gaps
OFF_FIT_FAILED = "its test alone fails; off matched fit that proves nothing either way"


def matched_fit(
    verdict: str,
    note: str,
    train_acc_gap: float | None,
    test_acc_gap: float | None,
    compared: tuple[str, ...] = ("bn", "none"),
) -> tuple[str, str]:
    """The 'matched_fit' confound rule: the verdict and note of a row read at matched fit, given
    the compared models' gaps (first minus second) at the reading in clean training and clean
    test accuracy. A gap beyond its tolerance (`matched_fit_tolerances`, either sign), or one
    not given (None, NaN), is named in the note with its size, and the row reads "inconclusive"
    whatever its test said: a model that learned less proves nothing, whichever way the test
    went. A test that failed says so in the note (`OFF_FIT_FAILED`)."""
    gaps = {"train_acc": train_acc_gap, "test_acc": test_acc_gap}
    who = f"{compared[0]} minus {compared[1]}"
    why = []
    for key, tol in matched_fit_tolerances().items():
        gap = gaps[key]
        if gap is None or not math.isfinite(gap):
            why.append(f"no {_MATCHED[key]} at the reading to check the {tol:g} tolerance")
        elif abs(gap) > tol + _ROUNDING:
            why.append(
                f"{_MATCHED[key]} at the reading differs ({who} {gap:+.3f}) by "
                f"{abs(gap) - tol:.2g} more than the {tol:g} tolerance"
            )
    if not why:
        return verdict, note
    why_text = OFF_FIT + "; ".join(why)
    if fails(verdict):
        why_text = _joined(why_text, OFF_FIT_FAILED)
    return "inconclusive", _joined(note, why_text)


def fit_gap_note(train_accs: Any, compared: Sequence[str], fit_level: Any) -> str:
    """Why a 'bn_vs_other' row of the fair protocol (`fit_level` given; None under the paper's
    protocol, where no model trains to fit) reads inconclusive when its compared models ended
    training at different fits: `train_accs` {name: final clean training accuracy, mean over
    seeds} differ by more than `settings.train_acc_tolerance`, the tolerance of a reading at
    matched fit; '' otherwise, or when the row lacks them. Read at the end of training or over
    it, a model short of the other's fit proves nothing either way (2026-12-07, claims.yaml)."""
    if fit_level is None or not isinstance(train_accs, Mapping):
        return ""
    a, b = compared
    if not all(isinstance(train_accs.get(n), (int, float)) for n in (a, b)):
        return ""
    gap = float(train_accs[a]) - float(train_accs[b])
    tol = matched_fit_tolerances()["train_acc"]
    if abs(gap) <= tol + _ROUNDING:
        return ""
    return (
        f"the models ended training at different fits (clean training accuracy {a} minus {b} "
        f"{gap:+.3f}, by {abs(gap) - tol:.2g} more than the {tol:g} tolerance of matched fit; "
        f"fit level {fit_level}); under the fair protocol a model short of the other's fit proves "
        "nothing either way"
    )


def _confounded(
    c: dict, verdict: str, note: str, section: str, acc_gap: float | None, compared, fields, fit
) -> tuple[str, str]:
    """The verdict and note once the claim's confound rule (`confound:` in claims.yaml) has
    been applied to the clean accuracies the row was read beside (`fit`: the matched-fit gaps)."""
    conf = c.get("confound")
    if conf == "matched_fit":
        return matched_fit(verdict, note, *fit, compared)
    tol = acc_tolerance(section)
    if conf == "reach":
        if acc_gap is None or abs(acc_gap) <= tol:
            return verdict, note
        # a comparison at equal accuracy the frontier cannot make, whichever way the test went
        if acc_gap > 0:
            what = "the regularizer never reaches the compared model's clean accuracy: short by"
        else:
            what = "the compared model is less accurate than every regularizer setting, by"
        return "inconclusive", _joined(note, f"{what} {abs(acc_gap):.3f} > {tol:g}")
    if conf == "bn_vs_other":
        low, floor = near_chance(fields.get("clean_test_acc"), fields.get("dataset"), compared)
        if low:
            # a model that did not learn carries no evidence either way
            names = ", ".join(f"{n} {a:.3f}" for n, a in low.items())
            why = (
                f"did not learn ({names}: less than {_min_learned():g} of the best compared "
                f"model's accuracy above chance, floor {floor:.3f}); it carries no evidence "
                "either way"
            )
            return "inconclusive", _joined(note, why)
        why = fit_gap_note(fields.get("clean_train_acc"), compared, fields.get("fit_level"))
        if why:
            return "inconclusive", _joined(note, why)
        if fails(verdict) and acc_gap is not None and acc_gap < -tol - _ROUNDING:
            # the mirror of the rule below: BN leaking less because it learned less proves nothing
            why = (
                f"its clean test accuracy is lower than the compared model's by {-acc_gap:.3f} "
                f"> {tol:g}; a model that learned less proves nothing either way"
            )
            return "inconclusive", _joined(note, why)
    if conf and verdict == "reproduced" and acc_gap is not None and acc_gap > tol + _ROUNDING:
        if conf == "bn_vs_other":
            what = "its clean test accuracy is higher than the compared model's by"
        else:
            what = "the mitigation costs"
        return "inconclusive", _joined(note, f"{what} {acc_gap:.3f} > {tol:g} clean accuracy")
    return verdict, note


def judge(
    claim_id: str,
    est: Estimate,
    section: str | None = None,
    acc_gap: float | None = None,
    compared: tuple[str, ...] = ("bn", "none"),
    *,
    train_acc_gap: float | None = None,
    test_acc_gap: float | None = None,
    n_units: int | None = None,
    **fields: Any,
) -> Verdict:
    """One verdict row. `acc_gap`: for a 'bn_vs_other' claim, BN's clean test accuracy minus the
    other model's; for a 'cost' claim, the accuracy the mitigation costs (baseline minus
    mitigated); for a 'reach' claim (a comparison at equal accuracy), the compared model's
    accuracy minus the regularizer's at the point read (either sign beyond the tolerance makes
    the row inconclusive). `compared`: the models of `clean_test_acc` a 'bn_vs_other' row
    compares (default BN and no-BN; a control row names its control): if one of them did not
    learn (`near_chance`), the row is inconclusive. `train_acc_gap`, `test_acc_gap`: for a
    'matched_fit' claim (a reading at matched fit), the first compared model's clean training
    and clean test accuracy at the reading minus the second's (`matched_fit`); other claims
    ignore them. `n_units`: the independent draws (seeds, pools) `est`'s interval is over
    (default `est.n`, right for an estimate over seeds; an estimate whose `n` counts targets or
    examples of pools must pass its pools): below 2 the row has no interval (n/a), no p-value
    and reads inconclusive, whatever the test would say. `fields` (unit, clean_test_acc,
    dataset, ...) are kept in the row; string fields of the claim are formatted with them
    (e.g. {mix})."""
    c = claim(claim_id)
    section = section or claim_id.split(".")[0]
    fit = (train_acc_gap, test_acc_gap)
    units = est.n if n_units is None else int(n_units)
    one_draw = TESTS[c["test"]].needs_interval and units < MIN_UNITS
    if one_draw:  # one draw: no interval, so nothing to test
        est = Estimate(est.value, math.nan, math.nan, est.n, est.level)
    verdict, note = _confounded(
        c, test_verdict(c, est), magnitude(c, est), section, acc_gap, compared, fields, fit
    )
    if one_draw:
        why = f"{units} independent draw(s): no interval (n/a), so no verdict"
        verdict, note = "inconclusive", _joined(note, why)
    name = family_of(claim_id)
    kind = family(name)["kind"]
    fmt = {k: v for k, v in fields.items() if isinstance(v, (str, int, float))}
    return Verdict(
        id=claim_id,
        claim=c["words"].format(**fmt),
        paper=c["paper"].format(**fmt),
        test=c["test"],
        measured=est.value,
        lo=est.lo,
        hi=est.hi,
        n=est.n,
        verdict=worded(verdict, kind),
        magnitude=note,
        p=None if one_draw else p_value(c, est),
        family=name,
        fields=dict(fields),
        kind=kind,
        n_units=units,
    )


ALPHA = 0.025  # one-sided, family-wise; a family of one keeps the 95% interval's rule
HOLM_ALPHA = ALPHA  # the name before verdict families
CORRECTION_NOTE = "not significant after Bonferroni's correction over the"  # a corrected row's note


def _declared_rows(claim_id: str) -> int:
    """The most rows one configuration gives of a claim (its family's `rows`)."""
    return max(family(family_of(claim_id))["rows"][claim_id])


def correct(rows: Iterable[Verdict], alpha: float = ALPHA) -> list[Verdict]:
    """The rows after the multiple-testing correction of their verdict families (claims.yaml
    `families:`, fixed before any run): each statistical row gets `p_adjusted` = min(1, m p),
    Bonferroni at its family's declared size m, and `family_size` = m; a "reproduced" (or
    "supported") with m > 1 whose adjusted p-value exceeds `alpha` becomes "inconclusive" and
    says so. A row's verdict depends on its own p and its family's m alone, never on the other
    rows of the run. Rows without a p-value (exact identities, no interval) are not corrected.
    A claim with more rows in `rows` than its family declares per configuration is named in
    each of its rows (the declared size undercounts). Correcting corrected rows changes
    nothing."""
    rows = list(rows)
    tested = [r.p is not None and math.isfinite(r.p) for r in rows]
    counts: dict[str, int] = {}
    for r, t in zip(rows, tested):
        counts[r.id] = counts.get(r.id, 0) + t
    out = []
    for r, t in zip(rows, tested):
        if not t:
            out.append(r)
            continue
        m = int(family(r.family)["size"])
        p_adj = min(1.0, max(m, 1) * r.p)
        new = dataclasses.replace(r, p_adjusted=p_adj, family_size=m)
        declared = _declared_rows(r.id)
        over = f"{counts[r.id]} rows of {r.id} in this run, more than the {declared} per "
        over += f"configuration its family {r.family} declares (its size {m} undercounts)"
        if counts[r.id] > declared and over not in r.magnitude:
            new = dataclasses.replace(new, magnitude=_joined(new.magnitude, over))
        if holds(r.verdict) and m > 1 and p_adj > alpha:
            why = (
                f"{CORRECTION_NOTE} {m} tests of its "
                f"family {r.family} (p = {r.p:.2g}, adjusted {p_adj:.2g})"
            )
            new = new.with_verdict("inconclusive", why)
        out.append(new)
    return out


holm = correct  # the name notebooks used before verdict families


def stored_before_families(row: Mapping) -> bool:
    """Whether a stored row was judged before the verdict families: a tested row (it has a
    `family_size` or a p-value) without the `kind` every row has carried since. Its correction
    was Holm's over the rows of its own run, and its test the one of its day (a direction test
    then passed at a lower bound above 0 rather than at `min_effect`). Only a re-run judges it
    by today's rules."""
    return "kind" not in row and ("family_size" in row or row.get("p") is not None)


def recorrected(row: Mapping, alpha: float = ALPHA) -> dict:
    """A stored row (results.json) corrected again at its family's size declared today, where
    it was stored under another size (a family grown by a new configuration before the run
    that fills it) or stored uncorrected: Bonferroni's step is a function of the row's own p
    and m alone, so it is recomputed exactly as `correct` takes it now. A row that passed its
    own test (it holds, or was made inconclusive by the correction alone: `correct` runs after
    every other rule of a notebook, so its note is the only way such a row became
    inconclusive) holds again when m p <= `alpha`, else reads inconclusive and says so; the
    note names the stored size. Rows without a p-value, stored before the families
    (`stored_before_families`), stored at today's size, or whose claim id the claims file no
    longer has come back unchanged."""
    out = dict(row)
    p, m_old = row.get("p"), row.get("family_size")
    if stored_before_families(row) or p is None or not math.isfinite(p):
        return out
    try:
        name = family_of(str(row["id"]))
    except KeyError:  # a claim since renamed or removed: shown as stored
        return out
    m = int(family(name)["size"])
    if m == m_old:
        return out
    notes = [x for x in str(row.get("magnitude") or "").split("; ") if x]
    kept = [x for x in notes if not x.startswith(CORRECTION_NOTE)]
    passed = holds(row["verdict"]) or len(kept) < len(notes)
    p_adj = min(1.0, max(m, 1) * p)
    out.update(p_adjusted=p_adj, family_size=m)
    stored = f"stored under {m_old}" if m_old is not None else "stored uncorrected"
    again = f"corrected again at its family's size declared today, {m} ({stored})"
    if not passed:
        out["magnitude"] = _joined(*kept, again)
        return out
    kind = row.get("kind", "paper")
    if m > 1 and p_adj > alpha:
        why = (
            f"{CORRECTION_NOTE} {m} tests of its family {name} (p = {p:.2g}, adjusted {p_adj:.2g})"
        )
        out.update(verdict="inconclusive", magnitude=_joined(*kept, why, again))
    else:
        out.update(verdict=VERDICTS[kind][0], magnitude=_joined(*kept, again))
    return out


REFITTED_NOTE = "the fit rule of 2026-12-07 read on the row as stored"


def refitted(row: Mapping, results: Mapping) -> dict:
    """A stored row of notebook 01 judged before the fit rule of 2026-12-07 (`fit_gap_note`:
    it has no `fit_level` field) read again with it, from its `results` (the results.json it
    was stored in): under the fair protocol (`params.protocol`), a 'bn_vs_other' row whose
    compared models (a control row: the control and no-BN; else BN and no-BN) ended training
    more than the matched-fit tolerance apart in clean training accuracy (`epochs_used`:
    {corruption: {norm: {'train_acc', ...}}}) reads inconclusive, its note saying so and that
    the rule was applied to the stored row. Every other row, and a row whose case
    `epochs_used` lacks, comes back unchanged."""
    out = dict(row)
    params = results.get("params") or {}
    rid = str(row.get("id", ""))
    if "fit_level" in row or params.get("protocol") != "fair" or not rid.startswith("01."):
        return out
    try:
        if claim(rid).get("confound") != "bn_vs_other":
            return out
    except KeyError:  # a claim since renamed or removed: shown as stored
        return out
    ctrl = rid.removeprefix("01.control.") if rid.startswith("01.control.") else "bn"
    used = (results.get("epochs_used") or {}).get(row.get("corruption")) or {}
    accs = {n: (used.get(n) or {}).get("train_acc") for n in (ctrl, "none")}
    fit_level = params.get("fit_level")
    level = f"{fit_level:.0%}" if isinstance(fit_level, (int, float)) else fit_level
    why = fit_gap_note(accs, (ctrl, "none"), level)
    if not why:
        return out
    note = _joined(str(row.get("magnitude") or ""), why, REFITTED_NOTE)
    out.update(verdict="inconclusive", magnitude=note)
    return out
