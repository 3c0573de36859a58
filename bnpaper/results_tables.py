"""The tables of the report, built from the committed results: the claims table "paper says /
we measured / verdict", the matrix at a glance, what each configuration used, the run time."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from .claims import kind_of, recorrected, refitted, stored_before_families, worded
from .config import NOTEBOOKS, repo_root


HEADER = (
    "| section | claim (paper's words) | paper says | we measured [95% CI] "
    "| clean test acc. | data / budget | verdict |\n|---|---|---|---|---|---|---|"
)


def is_reference(label: str) -> bool:
    """A folder of the quick budget's own configuration (`make reproduce`): the bare dataset."""
    return "." not in label


def collect(
    root: Path | None = None, dataset: str | None = None, every_configuration: bool = False
) -> list[tuple[str, str, dict]]:
    """(notebook, folder label, results) for the results.json below `root`/results (default: the
    repository's committed results): the reference configurations, or with
    `every_configuration` every committed configuration (results/<nb>/<label>/). Each claim
    row comes corrected at its family's size declared today (`claims.recorrected`) and, if it
    was stored before the fit rule of 2026-12-07, read with it (`claims.refitted`)."""
    root = root or repo_root()
    found = []
    for nb in NOTEBOOKS:
        for path in sorted((root / "results" / nb).glob("*/results.json")):
            label = path.parent.name
            if not every_configuration and not is_reference(label):
                continue
            if dataset and label.split(".")[0] != dataset:
                continue
            res = json.loads(path.read_text())
            if "claims" in res:
                res["claims"] = [refitted(recorrected(c), res) for c in res["claims"]]
            found.append((nb, label, res))
    return found


def fmt_number(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}" if abs(x) >= 100 else f"{x:.{digits}f}"


def fmt_accuracies(accs: dict | None) -> str:
    if not accs:
        return "-"
    return ", ".join(f"{k}: {fmt_number(v, 3)}" for k, v in accs.items())


def table_cell(text) -> str:
    """A table cell: gamma/sigma as the Greek letters, pipes escaped the way GitHub reads them."""
    text = re.sub(r"\bgamma\b", "γ", re.sub(r"\bsigma\b", "σ", str(text)))
    return text.replace("|", "\\|").replace("\n", " ")


def verdict_word(claim: dict) -> str:
    """A stored row's verdict in its family kind's words (an exploratory row stored before
    verdict families with "reproduced" reads "supported")."""
    return worded(claim.get("verdict", "inconclusive"), kind_of(claim))


BEFORE_FAMILIES = (
    "judged before the verdict families: Holm's correction over its own run's rows and the "
    "tests of that day (a direction test passed at a lower bound above 0); not counted in the "
    "rows across the configurations until re-run"
)


def verdict_cell(claim: dict) -> str:
    """The verdict in bold, with its note (and, for a row stored before the verdict families,
    that it was judged by the earlier rules)."""
    notes = [claim.get("magnitude") or ""]
    if stored_before_families(claim):
        notes.append(BEFORE_FAMILIES)
    note = "; ".join(x for x in notes if x)
    return f"**{verdict_word(claim)}**" + (f" ({note})" if note else "")


def claim_row(nb: str, claim: dict) -> str:
    measured = fmt_number(claim.get("measured"))
    lo, hi = claim.get("lo"), claim.get("hi")
    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        measured += f" [{fmt_number(lo)}, {fmt_number(hi)}]"
    elif "lo" in claim:
        measured += " (no interval: n/a)"
    if claim.get("unit"):
        measured += f" {claim['unit']}"
    cells = [
        nb.split("_")[0],
        claim.get("claim", ""),
        claim.get("paper", ""),
        measured,
        fmt_accuracies(claim.get("clean_test_acc")),
        f"{claim.get('dataset', '')} / {claim.get('budget', '')}",
        verdict_cell(claim),
    ]
    return "| " + " | ".join(table_cell(c) for c in cells) + " |"


def table(root: Path | None = None, dataset: str | None = None) -> str:
    """The claims table of the reference configurations: rows by notebook (01..05), then
    dataset, in each notebook's order."""
    rows = [
        claim_row(nb, c) for nb, _, res in collect(root, dataset) for c in res.get("claims", [])
    ]
    return HEADER + "\n" + "\n".join(rows)


MATRIX_HEADER = (
    "| claim | configuration (folder) | architecture | we measured [95% CI] "
    "| clean test acc. | verdict |\n|---|---|---|---|---|---|"
)


MULTIPLE_TESTING = (
    "Multiple testing: every row belongs to a verdict family fixed before any run "
    "(`families:` in bnpaper/claims.yaml): one per claim of the paper, across the quick "
    "reference and every cell of the matrix it is tested in, and one per exploratory question "
    "(controls, effective learning rate, pool-size trend, mitigation frontiers). Each family "
    "declares its size m, the tests it holds over all those configurations; a row is corrected "
    "by Bonferroni at that m (one-sided family-wise alpha 0.025; a family of one keeps the 95% "
    "interval's rule), so the same evidence gets the same verdict whatever else a run holds. "
    "A row that passes its own test but not the corrected one is inconclusive and says so. "
    "Exploratory rows read supported / not supported / inconclusive; a row from fewer than two "
    "independent draws (seeds, pools) has no interval and reads inconclusive."
)


def matrix_table(root: Path | None = None) -> str:
    """Every committed configuration's verdict rows in one long table, grouped by claim, so that
    one claim's effect reads across architectures, datasets and norms. "" when only the
    reference configurations are committed."""
    found = collect(root, every_configuration=True)
    if all(is_reference(label) for _, label, _ in found):
        return ""
    rows = sorted(
        (
            (c.get("id", ""), nb, label, res, c)
            for nb, label, res in found
            for c in res.get("claims", [])
        ),
        key=lambda t: (t[0], t[2]),
    )
    lines = []
    for cid, nb, label, res, c in rows:
        p = res.get("params", {})
        arch = p.get("arch") or ", ".join(p.get("archs", []))
        measured = fmt_number(c.get("measured")) + (
            f" [{fmt_number(c['lo'])}, {fmt_number(c['hi'])}]"
            if c.get("lo") is not None
            and c.get("hi") is not None
            and math.isfinite(c["lo"])
            and math.isfinite(c["hi"])
            else ""
        )
        cells = [
            f"{cid}: {c.get('claim', '')}",
            label + (" (reference)" if is_reference(label) else ""),
            arch,
            measured,
            fmt_accuracies(c.get("clean_test_acc")),
            verdict_cell(c),
        ]
        lines.append("| " + " | ".join(table_cell(x) for x in cells) + " |")
    return MATRIX_HEADER + "\n" + "\n".join(lines)


MATRIX_FIGURES = (
    "memorization_curves",
    "controls",
    "delta_auc",
    "delta_auc_vs_size",
    "gamma_sigma_drivers",
)


MARK = {
    "reproduced": "✓",
    "not reproduced": "✗",
    "supported": "✓",
    "not supported": "✗",
    "inconclusive": "?",
}


GLANCE_NOTE = (
    "Each cell: the measured effect (the claim's estimate: a difference BN minus no-BN, a "
    "ratio or a share, as in the long table), the verdict (✓ reproduced or supported, ✗ not "
    "reproduced or not supported, ? inconclusive) and the clean test accuracy of the compared "
    "models, in the order the long table names them. A column is one configuration: dataset, "
    "architecture, budget (quick: the reference run; full: the matrix)."
)


# fields that tell readings of one claim and case apart (a fit level, 02's reading, a learning
# rate of 01's curve, 04's measure, 05's arm)
READINGS = ("level", "at", "lr", "measure", "arm")
# claims whose rows pool the corruptions of a run (typical learning: the clean samples)
POOLED = ("01.typical.epochs", "01.typical.auc")


def _case(c: dict, cases_only: bool = False) -> str:
    """What tells one row of a claim from another inside a configuration (corruption, mix,
    subgroup, case, alternative; the architecture for notebook 04's per-network rows; the
    reading: a fit level, a learning rate, a measure or an arm). With `cases_only`, the kinds a
    row pools over (a list, corruptions joined by "+", any corruption of a typical-learning row:
    `POOLED`) and the readings (one claim read several ways: a cell holds when every reading
    does) are no case."""
    keys = ("corruption", "mix", "subgroup", "alternative") + (
        ("arch",) if str(c.get("id", "")).startswith("04.") else ()
    )
    keys += () if cases_only else READINGS
    vals = []
    for k in keys:
        v = c.get(k)
        pooled = isinstance(v, list) or (
            k == "corruption" and ("+" in str(v) or c.get("id") in POOLED)
        )
        if v not in (None, "", []) and not (cases_only and pooled):
            vals.append("+".join(map(str, v)) if isinstance(v, list) else str(v))
    return ", ".join(vals)


def _column(label: str, res: dict) -> str:
    p = res.get("params", {})
    arch = p.get("arch") or "+".join(p.get("archs", [])) or "?"
    budget = p.get("budget") or ("quick" if is_reference(label) else "?")
    return f"{label.split('.')[0]}<br>{arch}<br>{budget}"


def glance_tables(root: Path | None = None) -> str:
    """The matrix at a glance: per notebook one table, a row per claim and case, a column per
    committed configuration, each cell the estimate, its verdict mark and clean accuracy. ""
    when only the reference configurations are committed."""
    found = collect(root, every_configuration=True)
    if all(is_reference(label) for _, label, _ in found):
        return ""
    parts = []
    for nb in NOTEBOOKS:
        confs = [(label, res) for n, label, res in found if n == nb]
        if len(confs) < 2:
            continue
        confs.sort(key=lambda t: (not is_reference(t[0]), t[0]))
        cols = [
            label for label, _ in confs
        ]  # a column per folder; the header names dataset, arch, budget
        cells: dict[tuple[str, str], dict[str, str]] = {}
        words: dict[tuple[str, str], dict[str, None]] = {}
        for label, res in confs:
            for c in res.get("claims", []):
                key = (c.get("id", ""), _case(c))
                words.setdefault(key, c.get("claim", ""))
                acc = "/".join(
                    f"{v:.2f}"
                    for v in (c.get("clean_test_acc") or {}).values()
                    if isinstance(v, (int, float))
                )
                cells.setdefault(key, {})[label] = (
                    f"{fmt_number(c.get('measured'))} {MARK.get(verdict_word(c), '?')}"
                    + (f"<br>acc {acc}" if acc else "")
                )
        head = (
            "| claim | "
            + " | ".join(_column(label, res) for label, res in confs)
            + " |\n|---|"
            + "---|" * len(cols)
        )
        lines = [
            f"| {table_cell(words[k] + (f' [{k[1]}]' if k[1] else ''))} | "
            + " | ".join(table_cell(cells[k].get(col, "-")) for col in cols)
            + " |"
            for k in sorted(cells)
        ]
        parts += [f"### {nb}", "", head, *lines, ""]
    return "\n".join(parts)


def configurations_table(root: Path | None = None) -> str:
    """What each committed configuration of notebooks 01, 03 and 04 used (architecture, data,
    epochs, seeds, norms, shadow models) and how long it ran (its run_time.json), then the
    matrix's total: the run times of every configuration but the quick reference, summed."""
    root = root or repo_root()
    rows, matrix_secs, untimed = [], 0.0, 0
    for nb, label, res in collect(root, every_configuration=True):
        p = res.get("params", {})
        t = root / "results" / nb / label / "run_time.json"
        secs = json.loads(t.read_text())["seconds"] if t.exists() else None
        if not is_reference(label):
            matrix_secs += secs or 0.0
            untimed += secs is None
        n_train = p.get("n_train")
        rows.append(
            "| "
            + " | ".join(
                table_cell(x)
                for x in (
                    nb.split("_")[0],
                    label,
                    p.get("budget", ""),
                    p.get("arch") or "+".join(p.get("archs", [])),
                    ", ".join(f"{k} {v}" for k, v in n_train.items())
                    if isinstance(n_train, dict)
                    else n_train,
                    ", ".join(f"{k} {v}" for k, v in p["epochs"].items())
                    if isinstance(p.get("epochs"), dict)
                    else p.get("epochs"),
                    p.get("seeds"),
                    "+".join(p.get("norms", [])) or "-",
                    p.get("n_shadows", "-"),
                    f"{secs / 60:.1f} min" if secs is not None else "n/a",
                )
            )
            + " |"
        )
    head = (
        "| nb | configuration (folder) | budget | architecture | training images | epochs | seeds "
        "| norms | shadow models per norm and pool | run time |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    total = (
        f"The matrix's configurations (every row but the quick reference's) ran "
        f"{matrix_secs / 60:.1f} min together ({matrix_secs / 3600:.1f} h), each timed from an "
        "empty cache for its own units"
        + (f"; {untimed} recorded no run time" if untimed else "")
        + "."
    )
    return head + "\n" + "\n".join(rows) + "\n\n" + total


def run_time_line(root: Path | None = None, dataset: str = "fashion_mnist") -> str:
    """One line with every notebook's recorded wall time (results/<nb>/<dataset>/run_time.json,
    written by the runner), or "" when none is recorded."""
    root = root or repo_root()
    recs = [
        json.loads(p.read_text())
        for nb in NOTEBOOKS
        for p in [root / "results" / nb / dataset / "run_time.json"]
        if p.exists()
    ]
    if not recs:
        return ""
    total = sum(r["seconds"] for r in recs)
    budgets = sorted({r["budget"] for r in recs})
    cores = sorted({r.get("cpu_count") for r in recs}, key=str)
    first = recs[0].get("cache_entries_at_start", 0)
    start = (
        "the run started from an empty run cache (a later notebook reuses the units an "
        "earlier one trained with the same configuration)"
        if not first
        else f"the run started with {first} cached units (faster than a cold run)"
    )
    times = " · ".join(f"{r['notebook'].split('_')[0]} {r['seconds']:.0f} s" for r in recs)
    return (
        f"Run time ({'/'.join(budgets)} budget, {dataset}, {'/'.join(map(str, cores))} cores): "
        f"{times} · total {total / 60:.1f} min; {start}."
    )


# ---------------------------------------------------------------- each paper claim across the cells
@dataclass(frozen=True)
class Aggregate:
    """One claim of the paper (and case: corruption, mix, group, architecture...) across the
    committed configurations: per cell (a configuration that tested it) its verdict there, one
    of "reproduced" (every row of the claim and case in the cell reproduced), "not reproduced"
    (one of them not reproduced) or "inconclusive". `earlier`: the cells whose rows were
    judged before the verdict families (`claims.stored_before_families`), named, not counted."""

    id: str
    case: str
    claim: str
    family: str
    cells: tuple[tuple[str, str], ...]
    earlier: tuple[str, ...] = ()

    def named(self, verdict: str) -> list[str]:
        """The cells where the claim read `verdict`."""
        return [cell for cell, v in self.cells if v == verdict]

    def summary(self) -> str:
        """ "holds in every cell (n: ...)" or "holds in k of n (...); not reproduced in ...;
        inconclusive in ...", every cell named."""
        held, n = self.named("reproduced"), len(self.cells)
        earlier = (
            [f"judged before the verdict families, not counted, in {', '.join(self.earlier)}"]
            if self.earlier
            else []
        )
        if n and len(held) == n:
            return "; ".join([f"holds in every cell ({n}: {', '.join(held)})", *earlier])
        parts = [f"holds in {len(held)} of {n}" + (f" ({', '.join(held)})" if held else "")]
        for v in ("not reproduced", "inconclusive"):
            if self.named(v):
                parts.append(f"{v} in {', '.join(self.named(v))}")
        return "; ".join(parts + earlier)


def cell_name(label: str, res: dict) -> str:
    """A configuration in a few words: dataset, architecture, budget ("fashion_mnist lenet
    quick")."""
    p = res.get("params", {})
    arch = p.get("arch") or "+".join(p.get("archs", [])) or "?"
    budget = p.get("budget") or ("quick" if is_reference(label) else "?")
    return f"{label.split('.')[0]} {arch} {budget}"


def _cell_verdict(verdicts: list[str]) -> str:
    if all(v == "reproduced" for v in verdicts):
        return "reproduced"
    return "not reproduced" if "not reproduced" in verdicts else "inconclusive"


def aggregates(root: Path | None = None) -> list[Aggregate]:
    """Every claim of the paper (by id and case, `_case`) across the committed configurations,
    in the order of notebooks, then claim, then case; cells in the order of `collect` (the
    reference first within a notebook). A cell whose name repeats gets its folder appended."""
    from .claims import family_of

    found = collect(root, every_configuration=True)
    names = [(nb, cell_name(label, res)) for nb, label, res in found]
    cells: dict[tuple[str, str], dict[str, list[str]]] = {}
    earlier: dict[tuple[str, str], dict[str, None]] = {}
    words: dict[tuple[str, str], dict[str, None]] = {}
    for (nb, label, res), name in zip(found, names):
        name = name[1] if names.count(name) == 1 else f"{name[1]} ({label})"
        for c in res.get("claims", []):
            if kind_of(c) != "paper":
                continue
            key = (str(c.get("id", "")), _case(c, cases_only=True))
            words.setdefault(key, {})[str(c.get("claim", ""))] = None
            if stored_before_families(c):
                earlier.setdefault(key, {})[name] = None
                continue
            cells.setdefault(key, {}).setdefault(name, []).append(verdict_word(c))
    out = []
    for key in sorted(words, key=lambda k: (k[0].split(".")[0], k)):
        try:
            fam = family_of(key[0])
        except KeyError:
            fam = "?"
        per = tuple((cell, _cell_verdict(v)) for cell, v in cells.get(key, {}).items())
        first, *more = words[key]
        if more:  # readings of one claim (levels, epochs): a cell holds when every one does
            first += f" (and {len(more)} other reading(s) of the claim)"
        out.append(Aggregate(key[0], key[1], first, fam, per, tuple(earlier.get(key, {}))))
    return out


AGGREGATE_NOTE = (
    "One row per claim of the paper (and case) over every committed configuration that tested "
    "it (the quick reference and the matrix's cells): a cell holds when every row of the claim "
    "and case there reads reproduced (its verdict after its family's correction at the size "
    "declared today); the cells that read not reproduced or inconclusive are named, and so are "
    "the cells judged before the verdict families (not counted: they need a re-run)."
)


def aggregate_table(root: Path | None = None) -> str:
    """The aggregate rows as a table: claim (id, words, case), family, across the cells."""
    rows = [
        "| "
        + " | ".join(
            table_cell(x)
            for x in (
                f"{a.id}: {a.claim}" + (f" [{a.case}]" if a.case else ""),
                a.family,
                a.summary(),
            )
        )
        + " |"
        for a in aggregates(root)
    ]
    head = "| claim [case] | family | across the committed configurations |\n|---|---|---|"
    return head + "\n" + "\n".join(rows)
