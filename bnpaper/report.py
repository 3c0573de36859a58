"""The reproduction report: every notebook's claims (results/<notebook>/<dataset>/results.json)
collected into one table "paper says / we measured / verdict", written to figures/REPORT.md
and mirrored into the README between markers (a test checks the README is up to date)."""

from __future__ import annotations

import json
import math
import os
import re
import textwrap
from pathlib import Path

from .config import NOTEBOOKS, repo_root
from .store import atomic_write_bytes

START, END = "<!-- report:start -->", "<!-- report:end -->"
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
    `every_configuration` every committed configuration (results/<nb>/<label>/)."""
    root = root or repo_root()
    found = []
    for nb in NOTEBOOKS:
        for path in sorted((root / "results" / nb).glob("*/results.json")):
            label = path.parent.name
            if not every_configuration and not is_reference(label):
                continue
            if dataset and label.split(".")[0] != dataset:
                continue
            found.append((nb, label, json.loads(path.read_text())))
    return found


def _num(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}" if abs(x) >= 100 else f"{x:.{digits}f}"


def _acc(accs: dict | None) -> str:
    if not accs:
        return "-"
    return ", ".join(f"{k}: {_num(v, 3)}" for k, v in accs.items())


def _cell(text) -> str:
    """A table cell: gamma/sigma as the Greek letters, pipes escaped the way GitHub reads them."""
    text = re.sub(r"\bgamma\b", "γ", re.sub(r"\bsigma\b", "σ", str(text)))
    return text.replace("|", "\\|").replace("\n", " ")


def claim_row(nb: str, claim: dict) -> str:
    measured = _num(claim.get("measured"))
    lo, hi = claim.get("lo"), claim.get("hi")
    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        measured += f" [{_num(lo)}, {_num(hi)}]"
    elif "lo" in claim:
        measured += " (no interval: n/a)"
    if claim.get("unit"):
        measured += f" {claim['unit']}"
    cells = [
        nb.split("_")[0],
        claim.get("claim", ""),
        claim.get("paper", ""),
        measured,
        _acc(claim.get("clean_test_acc")),
        f"{claim.get('dataset', '')} / {claim.get('budget', '')}",
        f"**{claim.get('verdict', 'inconclusive')}**"
        + (f" ({claim['magnitude']})" if claim.get("magnitude") else ""),
    ]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


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
    "Multiple testing: within one notebook run the paper's claims are one family and the "
    "exploratory questions (controls, mitigation frontier, pool-size trend) another, each "
    "corrected with Holm's step-down procedure (one-sided alpha 0.025, the 95% interval's rule "
    "for a family of one); a row that passes its test but not the corrected one is inconclusive "
    "and says so. "
    "Across the matrix no further correction is made: the paper's claim is that an effect holds "
    "in every setting, and a conjunction of tests each at level alpha is itself a level-alpha "
    "test (intersection-union), so each cell is read on its own."
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
        measured = _num(c.get("measured")) + (
            f" [{_num(c['lo'])}, {_num(c['hi'])}]"
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
            _acc(c.get("clean_test_acc")),
            f"**{c.get('verdict', 'inconclusive')}**"
            + (f" ({c['magnitude']})" if c.get("magnitude") else ""),
        ]
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    return MATRIX_HEADER + "\n" + "\n".join(lines)


MATRIX_FIGURES = (
    "memorization_curves",
    "controls",
    "delta_auc",
    "delta_auc_vs_size",
    "gamma_sigma_drivers",
)
MARK = {"reproduced": "✓", "not reproduced": "✗", "inconclusive": "?"}
GLANCE_NOTE = (
    "Each cell: the measured effect (the claim's estimate: a difference BN minus no-BN, a "
    "ratio or a share, as in the long table), the verdict (✓ reproduced, ✗ not reproduced, "
    "? inconclusive) and the clean test accuracy of the compared models, in the order the "
    "long table names them. A column is one configuration: dataset, architecture, budget "
    "(quick: the reference run; full: the matrix)."
)


def _case(c: dict) -> str:
    """What tells one row of a claim from another inside a configuration (corruption, mix,
    subgroup, case, alternative; the architecture for notebook 04's per-network rows)."""
    keys = ("corruption", "mix", "subgroup", "alternative") + (
        ("arch",) if str(c.get("id", "")).startswith("04.") else ()
    )
    vals = []
    for k in keys:
        v = c.get(k)
        if v not in (None, "", []):
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
        words: dict[tuple[str, str], str] = {}
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
                    f"{_num(c.get('measured'))} {MARK.get(c.get('verdict'), '?')}"
                    + (f"<br>acc {acc}" if acc else "")
                )
        head = (
            "| claim | "
            + " | ".join(_column(label, res) for label, res in confs)
            + " |\n|---|"
            + "---|" * len(cols)
        )
        lines = [
            f"| {_cell(words[k] + (f' [{k[1]}]' if k[1] else ''))} | "
            + " | ".join(_cell(cells[k].get(col, "-")) for col in cols)
            + " |"
            for k in sorted(cells)
        ]
        parts += [f"### {nb}", "", head, *lines, ""]
    return "\n".join(parts)


def configurations_table(root: Path | None = None) -> str:
    """What each committed configuration of notebooks 01, 03 and 04 used (architecture, data,
    epochs, seeds, norms, shadow models) and how long it ran (its run_time.json)."""
    root = root or repo_root()
    rows = []
    for nb, label, res in collect(root, every_configuration=True):
        p = res.get("params", {})
        t = root / "results" / nb / label / "run_time.json"
        secs = json.loads(t.read_text())["seconds"] if t.exists() else None
        n_train = p.get("n_train")
        rows.append(
            "| "
            + " | ".join(
                _cell(x)
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
    return head + "\n" + "\n".join(rows)


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


def _figures(root: Path, nb: str, dataset: str, res: dict) -> list[str]:
    if res.get("key_figures"):
        return list(res["key_figures"])
    return [
        str(p.relative_to(root)) for p in sorted((root / "figures" / nb / dataset).glob("*.png"))
    ]


def render(root: Path | None = None) -> str:
    """The whole REPORT.md text (paths of figures relative to figures/)."""
    root = root or repo_root()
    parts = [
        "# bnpaper reproduction report",
        "",
        "Generated by `python -m bnpaper report` from `results/*/*/results.json`; "
        "every number comes from the notebooks' runs.",
        "",
        table(root),
        "",
        MULTIPLE_TESTING,
        "",
    ]
    timing = run_time_line(root)
    if timing:
        parts += [timing, ""]
    matrix = matrix_table(root)
    if matrix:
        parts += [
            "## The matrix at a glance",
            "",
            GLANCE_NOTE,
            "",
            glance_tables(root),
            "## What each configuration used",
            "",
            configurations_table(root),
            "",
            "## Every committed configuration (the matrix)",
            "",
            "One row per claim and configuration; the folder names the dataset, the budget "
            "and every value that differs from the budget's own configuration.",
            "",
            matrix,
            "",
        ]
    shown = [
        (nb, label, f)
        for nb, label, res in collect(root, every_configuration=True)
        if not is_reference(label)
        for f in _figures(root, nb, label, res)
        if Path(f).stem in MATRIX_FIGURES
    ]
    if shown:
        parts += ["## Figures of the matrix", ""]
        for nb, label, f in shown:
            parts += [
                f"**{nb} · {label}**",
                "",
                f"![{Path(f).stem}]({os.path.relpath(root / f, root / 'figures')})",
                "",
            ]
    for nb, ds, res in collect(root):
        figs = _figures(root, nb, ds, res)
        if figs:
            parts += [f"## {nb} ({ds})", ""]
            parts += [
                f"![{Path(f).stem}]({os.path.relpath(root / f, root / 'figures')})" for f in figs
            ]
            parts.append("")
    return "\n".join(parts)


def write_report(root: Path | None = None) -> str:
    """Write figures/REPORT.md and return the claims table (also printed by the runner)."""
    root = root or repo_root()
    atomic_write_bytes(root / "figures" / "REPORT.md", render(root).encode())
    return table(root)


# The README's summary: a row per headline claim of the paper, picked by its id (and by the fields
# that tell apart rows sharing that id), with the claim in a few words; the estimate, its interval
# and the verdict come from the committed results. Every row is in figures/REPORT.md.
SUMMARY = (
    ("01.typical.auc", {}, "BN learns typical samples faster (mean clean training accuracy)"),
    ("01.final.flip", {}, "BN memorizes label-flipped samples more (final accuracy on the flips)"),
    ("01.final.ood", {}, "BN memorizes out-of-distribution samples more (final accuracy on them)"),
    ("01.final.rare", {}, "BN memorizes a rare class more (train minus held-out accuracy)"),
    ("02.noisy_vs_clean", {}, "BN: noisy samples' gradient norms far above clean (median ratio)"),
    ("03.auc.mix0.all", {}, "BN raises LiRA AUC on clean data (AUC points)"),
    ("03.auc.rare", {}, "BN raises LiRA exposure of rare samples (AUC points)"),
    (
        "04.simulation",
        {},
        "(γ/σ)² predicts an outlier's margin growth (simulation, measured / predicted)",
    ),
    ("04.most_channels", {"arch": "lenet"}, "γ/σ > 1 in most channels (LeNet-5, share)"),
    ("04.gamma_noisy_vs_clean", {}, "Outliers make γ grow (LeNet-5, |γ| flipped / clean labels)"),
    ("05.reduction.flip", {}, "The γ/σ regularizer cuts flip memorization (share of BN's removed)"),
    ("05.lira", {}, "The γ/σ regularizer lowers LiRA AUC at equal accuracy (BN minus it)"),
)
SUMMARY_HEADER = (
    "| § | the paper's claim, in short | quick reference [95% CI] | verdict |\n|---|---|---|---|"
)


def _estimate(claim: dict) -> str:
    """The measured value with its 95% interval, or "n/a" for a bound that is not finite."""
    lo, hi = claim.get("lo"), claim.get("hi")
    interval = f" [{_num(lo)}, {_num(hi)}]" if lo is not None and hi is not None else ""
    return _num(claim.get("measured")) + interval


def _pick(claims: list[dict], cid: str, fields: dict) -> dict | None:
    """The first row with id `cid` whose `fields` match, or None."""
    return next(
        (c for c in claims if c.get("id") == cid and all(c.get(k) == v for k, v in fields.items())),
        None,
    )


def _counts(claims: list[dict], family: str) -> str:
    """The verdict counts of one family's rows: "a reproduced, b not reproduced, c inconclusive"."""
    verdicts = [c.get("verdict", "inconclusive") for c in claims if c.get("family") == family]
    return ", ".join(f"{verdicts.count(v)} {v}" for v in MARK)


def _summary_row(words: str, claim: dict) -> str:
    """One row of the README's summary: section, the claim in short, estimate, verdict."""
    verdict = f"**{claim.get('verdict', 'inconclusive')}**"
    if claim.get("magnitude"):
        verdict += f" ({claim['magnitude']})"
    cells = (claim["id"].split(".")[0], words, _estimate(claim), verdict)
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def readme_block(root: Path | None = None, dataset: str = "fashion_mnist") -> str:
    """The README's report block: the headline claims of the committed reference run of
    `dataset` (at most 12 rows: estimate, interval, verdict), the verdict counts, the paper's
    claims not reproduced, the run time and a link to figures/REPORT.md, which holds every row."""
    root = root or repo_root()
    claims = [c for _, _, res in collect(root, dataset) for c in res.get("claims", [])]
    picked = [(words, _pick(claims, cid, fields)) for cid, fields, words in SUMMARY]
    picked = [(words, c) for words, c in picked if c is not None]
    rows = [_summary_row(words, c) for words, c in picked]
    missed = [
        f"{c.get('claim', '')}: {_estimate(c)}"
        for c in claims
        if c.get("family") == "paper"
        and c.get("verdict") == "not reproduced"
        and all(c is not shown for _, shown in picked)
    ]
    summary = (
        f"All {len(claims)} verdict rows of this run, each with the paper's words, the clean test "
        "accuracy of the compared models and Holm's correction, and the matrix of architectures "
        "and datasets: [figures/REPORT.md](figures/REPORT.md). "
        f"The paper's claims: {_counts(claims, 'paper')}; "
        f"exploratory questions: {_counts(claims, 'exploratory')}."
    )
    if missed:
        summary += f" Not reproduced besides the rows above: {_cell('; '.join(missed))}."
    timing = run_time_line(root, dataset)
    notes = [
        textwrap.fill(t, 100, break_long_words=False, break_on_hyphens=False)
        for t in (summary, timing)
        if t
    ]
    lines = [SUMMARY_HEADER, *rows, *(line for note in notes for line in ("", note))]
    return START + "\n" + "\n".join(lines) + "\n" + END


def update_readme(readme: Path | None = None) -> None:
    """Replace the README's report block with the table of the committed results."""
    readme = readme or repo_root() / "README.md"
    text = readme.read_text()
    i, j = text.index(START), text.index(END) + len(END)
    readme.write_text(text[:i] + readme_block(repo_root()) + text[j:])
