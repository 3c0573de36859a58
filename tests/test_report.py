import json
import re
import subprocess
import sys

from bnpaper import claims, config, report, results_tables


def _write(root, nb, ds, claims):
    p = root / "results" / nb / ds / "results.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"claims": claims}))


def test_report_table_has_one_row_per_claim_with_interval_accuracy_and_verdict(tmp_path):
    _write(
        tmp_path,
        "01_forced_memorization",
        "toy",
        [
            {
                "claim": "BN memorizes more",
                "paper": "higher",
                "measured": 0.1234,
                "lo": 0.05,
                "hi": 0.2,
                "unit": "acc.",
                "verdict": "reproduced",
                "dataset": "toy",
                "budget": "ci",
                "clean_test_acc": {"bn": 0.9, "none": 0.88},
            }
        ],
    )
    _write(
        tmp_path,
        "03_lira",
        "toy",
        [
            {
                "claim": "AUC up",
                "paper": ">= 3 points",
                "measured": -0.01,
                "lo": -0.02,
                "hi": 0.01,
                "verdict": "inconclusive",
                "dataset": "toy",
                "budget": "ci",
            }
        ],
    )
    rows = results_tables.table(tmp_path).splitlines()[2:]
    assert rows == [
        "| 01 | BN memorizes more | higher | 0.123 [0.050, 0.200] acc. | bn: 0.900, none: 0.880 "
        "| toy / ci | **reproduced** |",
        "| 03 | AUC up | >= 3 points | -0.010 [-0.020, 0.010] | - | toy / ci | **inconclusive** |",
    ]
    assert "AUC up" in report.render(tmp_path)


def test_runner_bad_input_prints_one_error_line_and_exits_2():
    for args in (["--dataset", "cifar11"], ["--budget", "ci", "-p", "bogus=1"]):
        out = subprocess.run(
            [sys.executable, "-m", "bnpaper", "reproduce", "--only", "01", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")


def _summary_rows(block: str) -> list[str]:
    """The table rows of a README block (without the header and its separator)."""
    return [line for line in block.splitlines() if line.startswith("| ")][1:]


def test_readme_block_is_a_summary_of_at_most_12_rows_linking_to_the_report(tmp_path):
    picked = {"id": "01.converged.flip", "family": "paper", "verdict": "reproduced"}
    fit = {
        "clean_train_acc": {"bn": 0.99, "none": 0.991},
        "clean_test_acc": {"bn": 0.8, "none": 0.82},
    }
    _write(
        tmp_path,
        "01_forced_memorization",
        "fashion_mnist",
        [
            {**picked, **fit, "claim": "long words", "measured": 0.49, "lo": 0.34, "hi": 0.64},
            {"id": "01.x", "family": "paper", "verdict": "not reproduced", "claim": "unpicked"},
            {"id": "01.control.gn", "family": "exploratory", "verdict": "inconclusive"},
        ],
    )
    _write(tmp_path, "03_lira", "other_dataset", [{"id": "03.auc.mix0.all", "measured": 2.0}])
    block = report.readme_block(tmp_path)
    assert block.startswith(report.START) and block.endswith(report.END)
    words = dict((cid, w) for cid, _, w in report.SUMMARY)["01.converged.flip"]
    both = "BN 0.990 / 0.800, no-BN 0.991 / 0.820 (clean train / test)"
    want = f"| 01 | {words} | 0.490 [0.340, 0.640]; {both} | **reproduced** |"
    assert _summary_rows(block) == [want]
    assert "[figures/REPORT.md](figures/REPORT.md)" in block
    text = " ".join(block.split())
    assert "The paper's claims: 1 reproduced, 1 not reproduced, 0 inconclusive" in text
    assert "exploratory questions: 0 supported, 0 not supported, 1 inconclusive" in text
    assert "Not reproduced besides the rows above: unpicked: n/a." in text
    assert "All 3 verdict rows" in text  # the other dataset's row is not counted


def test_the_committed_readme_block_has_at_most_12_rows_and_links_to_the_report():
    assert len(report.SUMMARY) <= 12
    block = report.readme_block()
    assert 0 < len(_summary_rows(block)) <= 12
    assert "(figures/REPORT.md)" in block


def _anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_in_the_readme_and_docs_resolves_to_a_file_of_the_repository():
    root = config.repo_root()
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    assert len(pages) > 1
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists() or root.resolve() not in [file, *file.parents]:
                broken.append(f"{page.name}: {target}")
            elif anchor and file.suffix == ".md":
                heads = re.findall(r"^#+ (.+)$", file.read_text(), re.M)
                if anchor not in {_anchor(h) for h in heads}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_runner_records_run_times_and_the_report_prints_them(tmp_path, monkeypatch):
    from bnpaper import reproduce

    monkeypatch.setenv("BNPAPER_OUTPUT", str(tmp_path))
    monkeypatch.setenv("BNPAPER_CACHE", str(tmp_path / "cache"))
    assert reproduce.cache_entries() == 0
    (tmp_path / "cache" / "train").mkdir(parents=True)
    (tmp_path / "cache" / "train" / "k.json").write_text("{}")  # a sidecar alone: unfinished
    assert reproduce.cache_entries() == 0
    (tmp_path / "cache" / "train" / "k.pt").write_bytes(b"")
    assert reproduce.cache_entries() == 1
    reproduce.write_run_time("01_forced_memorization", "fashion_mnist", "quick", 583.2, 0)
    reproduce.write_run_time("03_lira", "fashion_mnist", "quick", 104.0, 3)
    line = results_tables.run_time_line(tmp_path)
    assert line.startswith("Run time (quick budget, fashion_mnist, ")
    assert "01 583 s · 03 104 s · total 11.5 min" in line
    assert "the run started from an empty run cache" in line
    assert line in " ".join(report.readme_block(tmp_path).split()) and line in report.render(
        tmp_path
    )
    assert results_tables.run_time_line(tmp_path, "mnist") == ""
    reproduce.write_run_time("01_forced_memorization", "fashion_mnist", "quick", 583.2, 12)
    assert "the run started with 12 cached units" in results_tables.run_time_line(tmp_path)


def test_verdict_cell_carries_the_magnitude_note(tmp_path):
    _write(
        tmp_path,
        "03_lira",
        "toy",
        [
            {
                "claim": "AUC up",
                "paper": "3-5",
                "measured": 11.0,
                "lo": 9.9,
                "hi": 12.2,
                "verdict": "reproduced",
                "magnitude": "larger than the paper's 3-5",
            }
        ],
    )
    assert (
        results_tables.table(tmp_path)
        .splitlines()[-1]
        .endswith("| **reproduced** (larger than the paper's 3-5) |")
    )


def test_a_dead_kernel_is_one_line_naming_the_notebook_and_the_copy(tmp_path, monkeypatch):
    import papermill as pm
    from nbclient.exceptions import DeadKernelError

    from bnpaper import reproduce

    def die(*a, **k):
        raise DeadKernelError("Kernel died")

    monkeypatch.setattr(pm, "execute_notebook", die)
    try:
        reproduce.execute("03_lira", {}, tmp_path / "03_lira.ipynb")
    except reproduce.NotebookFailed as exc:
        msg = str(exc)
    assert (
        msg == "notebook 03_lira: the kernel died (out of memory, or killed); "
        f"executed copy: {tmp_path / '03_lira.ipynb'}"
    )


def test_report_renders_gamma_sigma_and_no_interval_as_na(tmp_path):
    _write(
        tmp_path,
        "04_theory",
        "toy",
        [
            {
                "claim": "|gamma|/sigma > 1 in most cases",
                "measured": 0.9,
                "lo": float("-inf"),
                "hi": float("inf"),
                "verdict": "inconclusive",
            }
        ],
    )
    row = results_tables.table(tmp_path).splitlines()[-1]
    assert "\\|γ\\|/σ > 1" in row and "0.900 (no interval: n/a)" in row and "inf" not in row


def test_every_committed_configuration_lands_in_one_matrix_table(tmp_path):
    def row(v, verdict):
        return {
            "id": "01.final.flip",
            "claim": "BN memorizes more",
            "measured": v,
            "lo": v - 0.1,
            "hi": v + 0.1,
            "verdict": verdict,
        }

    for label, arch, v, verdict in (
        ("fashion_mnist", "lenet", 0.3, "reproduced"),
        ("fashion_mnist.full.arch=resnet20", "resnet20", 0.05, "inconclusive"),
    ):
        p = tmp_path / "results" / "01_forced_memorization" / label / "results.json"
        p.parent.mkdir(parents=True)
        p.write_text(json.dumps({"params": {"arch": arch}, "claims": [row(v, verdict)]}))
    main = results_tables.table(tmp_path)
    assert "0.300" in main and "0.050" not in main  # the main table is the reference run's
    matrix = results_tables.matrix_table(tmp_path).splitlines()[2:]
    assert matrix == [
        "| 01.final.flip: BN memorizes more | fashion_mnist (reference) | lenet "
        "| 0.300 [0.200, 0.400] | - | **reproduced** |",
        "| 01.final.flip: BN memorizes more | fashion_mnist.full.arch=resnet20 | resnet20 "
        "| 0.050 [-0.050, 0.150] | - | **inconclusive** |",
    ]
    text = report.render(tmp_path)
    assert "## Every committed configuration" in text and "Bonferroni" in text
    # the aggregate row names both cells: the reference holds, the matrix cell is inconclusive
    assert (
        "| 01.final.flip: BN memorizes more | memorization_strength | holds in 1 of 2 "
        "(fashion_mnist lenet quick); inconclusive in fashion_mnist resnet20 ? |" in text
    )


def test_no_matrix_section_when_only_the_reference_is_committed(tmp_path):
    _write(tmp_path, "01_forced_memorization", "fashion_mnist", [{"claim": "c", "measured": 1.0}])
    assert results_tables.matrix_table(
        tmp_path
    ) == "" and "## Every committed configuration" not in report.render(tmp_path)


def test_the_glance_table_puts_each_configuration_in_a_column_with_estimate_mark_and_accuracy(
    tmp_path,
):
    def put(label, arch, budget, claims):
        p = tmp_path / "results" / "01_forced_memorization" / label / "results.json"
        p.parent.mkdir(parents=True)
        p.write_text(
            json.dumps(
                {
                    "params": {
                        "arch": arch,
                        "budget": budget,
                        "n_train": 4000,
                        "epochs": 12,
                        "seeds": [0, 1],
                        "norms": ["bn", "none"],
                    },
                    "claims": claims,
                }
            )
        )

    def row(corr, v, verdict):
        return {
            "id": "01.final." + corr,
            "claim": f"BN memorizes {corr}",
            "measured": v,
            "lo": v - 0.1,
            "hi": v + 0.1,
            "verdict": verdict,
            "corruption": corr,
            "clean_test_acc": {"bn": 0.85, "none": 0.86},
        }

    put(
        "fashion_mnist",
        "lenet",
        "quick",
        [row("flip", 0.3, "reproduced"), row("ood", 0.1, "inconclusive")],
    )
    put(
        "mnist_subset.full.arch=resnet20", "resnet20", "full", [row("flip", -0.2, "not reproduced")]
    )
    lines = results_tables.glance_tables(tmp_path).splitlines()
    assert lines[0] == "### 01_forced_memorization"
    assert (
        lines[2] == "| claim | fashion_mnist<br>lenet<br>quick | mnist_subset<br>resnet20<br>full |"
    )
    assert (
        lines[4]
        == "| BN memorizes flip [flip] | 0.300 ✓<br>acc 0.85/0.86 | -0.200 ✗<br>acc 0.85/0.86 |"
    )
    assert lines[5] == "| BN memorizes ood [ood] | 0.100 ?<br>acc 0.85/0.86 | - |"
    conf = results_tables.configurations_table(tmp_path).splitlines()
    assert (
        "| 01 | mnist_subset.full.arch=resnet20 | full | resnet20 | 4000 | 12 | [0, 1] "
        "| bn+none | - | n/a |" in conf
    )
    assert conf[-1] == (
        "The matrix's configurations (every row but the quick reference's) ran 0.0 min together "
        "(0.0 h), each timed from an empty cache for its own units; 1 recorded no run time."
    )
    # the total sums the matrix's run times and leaves the quick reference's out
    for label, secs in (("fashion_mnist", 600.0), ("mnist_subset.full.arch=resnet20", 5400.0)):
        t = tmp_path / "results" / "01_forced_memorization" / label / "run_time.json"
        record = {"notebook": "01_forced_memorization", "budget": "quick", "seconds": secs}
        t.write_text(json.dumps(record))
    conf = results_tables.configurations_table(tmp_path).splitlines()
    assert "| 10.0 min |" in conf[2] + conf[3]
    assert conf[-1] == (
        "The matrix's configurations (every row but the quick reference's) ran 90.0 min together "
        "(1.5 h), each timed from an empty cache for its own units."
    )
    assert "## The matrix at a glance" in report.render(tmp_path)


def _put(root, nb, label, params, rows):
    p = root / "results" / nb / label / "results.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"params": params, "claims": rows}))


def _verdict_row(cid, verdict, **extra):
    """A stored row as `claims.Verdict.as_dict` writes it (with its family's `kind`), or, given
    the old `family` field, as rows stored before the verdict families were (no `kind`)."""
    kind = {"family_size": 6} if "family" in extra else {"kind": claims.kind_of({"id": cid})}
    return {
        "id": cid,
        "claim": f"claim {cid}",
        "measured": 1.0,
        "lo": 0.5,
        "hi": 1.5,
        "verdict": verdict,
        **kind,
        **extra,
    }


def test_an_aggregate_row_per_paper_claim_says_every_cell_or_k_of_n_and_names_the_cells(tmp_path):
    nb = "01_forced_memorization"
    _put(
        tmp_path,
        nb,
        "fashion_mnist",
        {"arch": "lenet", "budget": "quick"},
        [
            _verdict_row("01.final.flip", "reproduced", corruption="flip"),
            _verdict_row("01.typical.auc", "reproduced", corruption="flip+ood"),
            _verdict_row("01.fit.flip", "reproduced", corruption="flip", level="95%"),
            {**_verdict_row("01.fit.flip", "inconclusive", corruption="flip"), "claim": "at 99%"},
            _verdict_row("01.control.gn", "reproduced", corruption="flip"),  # exploratory: no row
        ],
    )
    _put(
        tmp_path,
        nb,
        "mnist_subset.full.arch=resnet20",
        {"arch": "resnet20", "budget": "full"},
        [
            _verdict_row("01.final.flip", "not reproduced", corruption="flip"),
            _verdict_row("01.typical.auc", "reproduced", corruption="flip"),
        ],
    )
    aggs = {(a.id, a.case): a for a in results_tables.aggregates(tmp_path)}
    assert set(aggs) == {("01.final.flip", "flip"), ("01.typical.auc", ""), ("01.fit.flip", "flip")}
    assert aggs["01.typical.auc", ""].summary() == (
        "holds in every cell (2: fashion_mnist lenet quick, mnist_subset resnet20 full)"
    )
    assert aggs["01.final.flip", "flip"].summary() == (
        "holds in 1 of 2 (fashion_mnist lenet quick); not reproduced in mnist_subset resnet20 full"
    )
    # a cell holds only when every row of the claim and case there holds (here: two levels)
    assert aggs["01.fit.flip", "flip"].summary() == (
        "holds in 0 of 1; inconclusive in fashion_mnist lenet quick"
    )
    assert aggs["01.final.flip", "flip"].family == "memorization_strength"
    assert aggs["01.fit.flip", "flip"].claim == (
        "claim 01.fit.flip (and 1 other reading(s) of the claim)"
    )
    text = report.render(tmp_path)
    assert "## Each claim of the paper across the committed configurations" in text
    assert "| 01.typical.auc: claim 01.typical.auc | typical_speed | holds in every cell" in text
    # the README's sentence follows the aggregate rows, nothing else
    assert report.across(tmp_path) == (
        "Across the committed configurations (2 cells: the quick reference and the matrix), 1 of "
        "the paper's 3 claims and cases hold in every cell that tested them (01.typical.auc), 1 "
        "in some cells only and 1 in none (every cell named in figures/REPORT.md)."
    )


def test_an_exploratory_row_stored_as_reproduced_is_shown_as_supported(tmp_path):
    nb = "01_forced_memorization"
    rows = [
        _verdict_row("01.control.gn", "reproduced", family="exploratory"),  # stored before
        _verdict_row("01.control.bn_noaffine", "not supported", kind="exploratory"),
        _verdict_row("01.final.flip", "reproduced", kind="paper"),
    ]
    _put(tmp_path, nb, "fashion_mnist", {"arch": "lenet"}, rows)
    table = results_tables.table(tmp_path).splitlines()[2:]
    assert [line.rsplit("| **", 1)[1] for line in table] == [
        f"supported** ({results_tables.BEFORE_FAMILIES}) |",
        "not supported** |",
        "reproduced** |",
    ]
    block = " ".join(report.readme_block(tmp_path).split())
    assert "exploratory questions: 1 supported, 1 not supported, 0 inconclusive" in block


def test_the_report_shows_notebook_03s_effect_per_attack_with_intervals_over_pools(tmp_path):
    e = {"value": 2.5, "lo": 1.0, "hi": 4.0, "n": 3, "level": 0.95}
    effects = {
        "0.05/all/online/auc": {**e, "n_nonmembers": 1200, "resolvable": True},
        "0.05/all/online/tpr@0.01": {**e, "value": 0.7, "n_nonmembers": 1200, "resolvable": True},
        "0.05/all/online/tpr@0.001": {**e, "n_nonmembers": 500, "resolvable": False},
    }
    p = tmp_path / "results" / "03_lira" / "fashion_mnist" / "results.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"claims": [], "effect_per_attack": effects}))
    text = report.render(tmp_path)
    assert "## LiRA per attack: 03_lira (fashion_mnist)" in text
    (row,) = [line for line in text.splitlines() if line.startswith("| 5% | all | online |")]
    assert row.startswith("| 5% | all | online | +2.5 [+1.0, +4.0] | +0.7 [+1.0, +4.0] | n/r |")
    assert "n/r" in row and row.rstrip().endswith("| 3 |")


def test_the_glance_table_keeps_readings_of_one_claim_apart_and_the_aggregate_pools_them(
    tmp_path,
):
    def row(lr, v):
        return {
            "id": "01.fit.flip",
            "claim": f"BN memorizes more at level {lr}",
            "measured": v,
            "lo": v - 0.1,
            "hi": v + 0.1,
            "verdict": "reproduced",
            "kind": "paper",
            "corruption": "flip",
            "level": lr,
        }

    for label, budget in (("fashion_mnist", "quick"), ("fashion_mnist.full", "full")):
        p = tmp_path / "results" / "01_forced_memorization" / label / "results.json"
        p.parent.mkdir(parents=True)
        claims_ = [row("95%", 0.111), row("99%", 0.222)]
        p.write_text(json.dumps({"params": {"arch": "lenet", "budget": budget}, "claims": claims_}))
    glance = results_tables.glance_tables(tmp_path)
    # one line per level, each with its own words and its own number
    line95 = next(x for x in glance.splitlines() if "level 95%" in x)
    line99 = next(x for x in glance.splitlines() if "level 99%" in x)
    assert "0.111" in line95 and "0.222" not in line95 and "[flip, 95%]" in line95
    assert "0.222" in line99 and "0.111" not in line99
    # the aggregate reads both levels as one claim and case: a cell holds when every one does
    (agg,) = results_tables.aggregates(tmp_path)
    assert agg.case == "flip" and "1 other reading" in agg.claim


def test_the_readme_names_every_rate_of_the_learning_rate_curve_with_its_verdict():
    def row(cid, lr, v, verdict):
        return {"id": cid, "corruption": "flip", "lr": lr, "measured": v, "verdict": verdict}

    claims_ = [
        row("01.lr.bn", "0.005", -0.024, "inconclusive"),
        row("01.lr.bn", "0.05", 0.32, "supported"),
        row("01.lr.none", "0.158", 0.1, "not supported"),
        {"id": "01.converged.flip", "corruption": "flip", "measured": 0.2},
    ]
    note = report.lr_dependence_note(claims_)
    assert note.startswith("How far the flip verdict at matched fit depends on the two learning")
    assert "supported at 1 of 2 rates (0.005: -0.024 (inconclusive), 0.05: 0.320 (supported))" in (
        note
    )
    assert "no-BN at another one, supported at 0 of 1 rates (0.158: 0.100 (not supported))" in note
    assert report.lr_dependence_note(claims_[-1:]) == ""


def test_the_readme_reads_lira_along_fit_per_mix_each_level_then_the_end():
    def row(cid, mix, level, v, lo, hi, verdict):
        out = {"id": cid, "mix": mix, "measured": v, "lo": lo, "hi": hi, "verdict": verdict}
        return {**out, "level": level} if level else out

    claims_ = [
        row("03.auc.fit", "0%", "95%", 0.02, -1.2, 1.2, "inconclusive"),
        row("03.auc.fit", "0%", "98%", 0.9, -0.4, 2.3, "inconclusive"),
        row("03.auc.mix0.all", "0%", None, 1.7, 0.1, 3.3, "reproduced"),
        row("03.auc.fit", "5%", "95%", 0.2, -1.3, 1.7, "not reproduced"),
    ]
    note = report.lira_fit_note(claims_)
    assert "0% mix: 95% 0.020 [-1.200, 1.200] (inconclusive), 98% 0.900 [-0.400, 2.300]" in note
    assert "(inconclusive), end 1.700 [0.100, 3.300] (reproduced); 5% mix: 95% 0.200" in note
    assert note.endswith("(not reproduced).")  # the 5% mix has no end row in this run
    assert report.lira_fit_note(claims_[2:3]) == ""


def test_cells_judged_before_the_verdict_families_are_named_and_not_counted(tmp_path):
    """A configuration whose rows were judged by the earlier rules (Holm over its own run, no
    `kind`) is named in the aggregate rows and the README sentence, never counted as holding."""
    nb = "01_forced_memorization"
    _put(
        tmp_path,
        nb,
        "fashion_mnist",
        {"arch": "lenet", "budget": "quick"},
        [_verdict_row("01.final.flip", "inconclusive", corruption="flip")],
    )
    _put(
        tmp_path,
        nb,
        "mnist_subset.full",
        {"arch": "lenet", "budget": "full"},
        [
            _verdict_row("01.final.flip", "reproduced", corruption="flip", family="paper"),
            _verdict_row("01.final.ood", "reproduced", corruption="ood", family="paper"),
        ],
    )
    aggs = {(a.id, a.case): a for a in results_tables.aggregates(tmp_path)}
    assert aggs["01.final.flip", "flip"].summary() == (
        "holds in 0 of 1; inconclusive in fashion_mnist lenet quick; judged before the verdict "
        "families, not counted, in mnist_subset lenet full"
    )
    assert aggs["01.final.ood", "ood"].cells == ()  # only an earlier cell: nothing counted
    assert report.across(tmp_path) == (
        "Across the committed configurations (1 cells: the quick reference and the matrix), 0 of "
        "the paper's 1 claims and cases hold in every cell that tested them, 0 in some cells only "
        "and 1 in none (every cell named in figures/REPORT.md). Not counted: the rows of "
        "01 mnist_subset lenet full, judged before the verdict families (they need a re-run)."
    )


def test_against_paper_places_an_interval_inside_below_above_or_across_the_range():
    band = (3.0, 5.0)
    assert report.against_paper(3.0, 5.0, band) == "inside the paper's 3-5"  # ends included
    assert report.against_paper(0.1, 2.9, band) == "below the paper's 3-5"
    assert report.against_paper(5.1, 9.0, band) == "above the paper's 3-5"
    assert report.against_paper(2.0, 4.0, band).startswith("overlapping the paper's 3-5")
    assert report.against_paper(None, 4.0, band) == "no interval"
    assert report.against_paper(float("-inf"), 4.0, band) == "no interval"


def test_lira_headline_comes_from_the_largest_pool_with_the_quick_pools_as_the_trend(tmp_path):
    """The README's LiRA sentence reads the committed 03 configurations of the largest n_train
    (one folder per mix), each mix with its interval, verdict, accuracies and place against the
    paper's 3-5 points; the quick reference's smaller pools come after as the trend."""
    nb = "03_lira"
    acc = {
        "clean_train_acc": {"bn": 0.99, "none": 0.991},
        "clean_test_acc": {"bn": 0.9, "none": 0.89},
    }

    def row(cid, mix, frac, value, lo, hi, verdict):
        return {
            **_verdict_row(cid, verdict, mix=mix, outlier_frac=frac),
            "measured": value,
            "lo": lo,
            "hi": hi,
            **acc,
        }

    quick = {"arch": "lenet", "n_train": 2500, "seeds": [0, 1, 2], "n_shadows": 16}
    _put(
        tmp_path,
        nb,
        "fashion_mnist",
        quick,
        [row("03.auc.mix0.all", "0%", 0.0, 1.7, 0.1, 3.3, "inconclusive")],
    )
    assert report.largest_pool_note(tmp_path) == ""  # nothing larger than the quick pools
    big = {**quick, "n_train": 60000, "seeds": [0, 1], "protocol": "fair"}
    _put(
        tmp_path,
        nb,
        "fashion_mnist.full.outlier_frac=0.05",
        {**big, "outlier_frac": [0.05], "seeds": [0, 1, 2]},
        [row("03.auc.mix5.all", "5%", 0.05, 0.5, 0.2, 0.8, "not reproduced")],
    )
    _put(
        tmp_path,
        nb,
        "fashion_mnist.full.outlier_frac=0.0",
        {**big, "outlier_frac": [0.0]},
        [
            row("03.auc.mix0.all", "0%", 0.0, 1.0, 0.4, 1.6, "not reproduced"),
            row("03.fixed.auc", "0%", 0.0, 1.2, 0.5, 1.9, "inconclusive"),
        ],
    )
    _put(
        tmp_path,
        nb,
        "fashion_mnist.full.arch=resnet20",
        {**big, "arch": "resnet20", "n_train": 90000},
        [row("03.auc.mix0.all", "0%", 0.0, 9.0, 8.0, 10.0, "reproduced")],
    )  # LeNet-5 only
    # a configuration judged before the verdict families never gives the headline
    old = {**quick, "n_train": 80000}
    _put(
        tmp_path,
        nb,
        "fashion_mnist.full",
        old,
        [{**row("03.auc.mix0.all", "0%", 0.0, 9.0, 8.0, 10.0, "reproduced"), "kind": None}],
    )
    stale = tmp_path / "results" / nb / "fashion_mnist.full" / "results.json"
    doc = json.loads(stale.read_text())
    doc["claims"][0].pop("kind")
    doc["claims"][0].update(p=0.001, family_size=5)
    stale.write_text(json.dumps(doc))
    assert report.largest_pool_note(tmp_path) == (
        "LiRA at the largest pool measured (60,000 fashion_mnist images, each shadow on 30,000), "
        "BN minus no-BN, online LiRA AUC points on all examples, 95% t over pools: clean data (2 "
        "pools of 16 shadows per norm, fair protocol): 1.000 [0.400, 1.600] (not reproduced; "
        "below the paper's 3-5; BN 0.990 / 0.900, no-BN 0.991 / 0.890 (clean train / test)), "
        "fixed-variance LiRA 1.200 [0.500, 1.900] (inconclusive); a 5% mix (3 pools of 16 "
        "shadows per norm, fair protocol): 0.500 [0.200, 0.800] (not reproduced; below the "
        "paper's 3-5; BN 0.990 / 0.900, no-BN 0.991 / 0.890 (clean train / test)). The quick "
        "reference's smaller pools (2,500 images), clean data: 1.700 [0.100, 3.300] "
        "(inconclusive)."
    )


def test_collect_gives_every_row_corrected_at_its_familys_size_declared_today(tmp_path):
    m = claims.family("lira_overall")["size"]
    row = {**_verdict_row("03.auc.mix0.all", "reproduced"), "p": 0.02 / m, "family_size": 1}
    _put(tmp_path, "03_lira", "fashion_mnist", {"arch": "lenet"}, [row])
    ((_, _, res),) = results_tables.collect(tmp_path)
    (got,) = res["claims"]
    assert got == claims.recorrected(row) and got["family_size"] == m
    assert got["verdict"] == "reproduced"  # m x p = 0.02 <= 0.025
    assert "stored under 1" in got["magnitude"]


def test_size_trend_joins_the_sweep_with_a_larger_clean_pool_made_the_same_way(tmp_path):
    """The README's size sentence: per size of the committed sweep its row (interval, verdict,
    accuracies), then a larger clean pool only when made the same way (protocol, shadows, pools,
    norms, search seeds, epochs, batch), the sweep's own trend, and nothing beyond the largest."""
    nb = "03_lira"
    acc = {
        "clean_train_acc": {"bn": 0.99, "none": 0.99},
        "clean_test_acc": {"bn": 0.9, "none": 0.89},
    }
    how = {
        "arch": "lenet",
        "protocol": "fair",
        "n_shadows": 16,
        "seeds": [0, 1],
        "norms": ["bn", "none"],
    }

    def row(cid, value, verdict, **extra):
        return {
            **_verdict_row(cid, verdict, **extra),
            "measured": value,
            "lo": value - 1,
            "hi": value + 1,
            **acc,
        }

    assert report.size_trend_note(tmp_path) == ""  # no sweep committed
    sweep_rows = [
        row("03.size.delta", 2.0, "inconclusive", size="1,000"),
        row("03.size.delta", 2.5, "supported", size="2,000"),
        row("03.size.trend", 0.5, "inconclusive"),
    ]
    sweep = tmp_path / "results" / nb / "fashion_mnist.full.sweep" / "results.json"
    sweep.parent.mkdir(parents=True)
    sweep.write_text(
        json.dumps(
            {
                "params": {**how, "n_train": 2000},
                "claims": sweep_rows,
                "size_sweep": {"sizes": [2000, 1000]},  # sorted when read
            }
        )
    )
    _put(
        tmp_path,
        nb,
        "fashion_mnist.full.other",
        {**how, "n_train": 8000, "n_shadows": 8},
        [row("03.auc.mix0.all", 9.0, "reproduced")],
    )  # 8 shadows: not made the same way
    head = (
        "LiRA against the pool size N (fashion_mnist, clean pools, 2 pools of 16 shadows per "
        "norm per size, fair protocol, each size trained to the fit level), BN minus no-BN "
        "online LiRA AUC points, 95% t over pools"
    )
    sizes = (
        "1,000: 2.000 [1.000, 3.000] (inconclusive; BN 0.990 / 0.900, no-BN 0.990 / 0.890 "
        "(clean train / test)); 2,000: 2.500 [1.500, 3.500] (supported; BN 0.990 / 0.900, "
        "no-BN 0.990 / 0.890 (clean train / test))"
    )
    trend = (
        " Fitted on log2 N over the sweep's own sizes (1,000-2,000), BN's excess falls by "
        "0.500 [-0.500, 1.500] points per doubling (the row asks whether it falls: "
        "inconclusive)."
    )
    assert report.size_trend_note(tmp_path) == (
        f"{head}: {sizes}.{trend} Nothing is stated beyond N = 2,000, the largest pool measured."
    )
    _put(
        tmp_path,
        nb,
        "fashion_mnist.full.big",
        {**how, "n_train": 4000},
        [row("03.auc.mix0.all", 1.0, "not reproduced", mix="0%")],
    )
    assert report.size_trend_note(tmp_path) == (
        f"{head} (the last from fashion_mnist.full.big, its clean pools made the same way): "
        f"{sizes}; 4,000: 1.000 [0.000, 2.000] (not reproduced; BN 0.990 / 0.900, no-BN 0.990 / "
        f"0.890 (clean train / test)).{trend} Nothing is stated beyond N = 4,000, the largest "
        "pool measured."
    )
    # a larger pool whose own search chose other learning rates is named, not joined
    big = tmp_path / "results" / nb / "fashion_mnist.full.big" / "results.json"
    stored = json.loads(big.read_text())
    stored["recipes"] = {"lr": {"bn": 0.05, "none": 0.05}}
    big.write_text(json.dumps(stored))
    sweep_stored = json.loads(sweep.read_text())
    sweep_stored["recipes"] = {"lr": {"bn": 0.158, "none": 0.05}}
    sweep.write_text(json.dumps(sweep_stored))
    assert report.size_trend_note(tmp_path) == (
        f"{head}: {sizes}.{trend} The clean 4,000-image pools of fashion_mnist.full.big are not "
        "joined: made the same way but at the learning rates their own search chose (BN 0.05, "
        "no-BN 0.05; the sweep's BN 0.158, no-BN 0.05). Nothing is stated beyond N = 2,000, the "
        "sweep's largest pool."
    )
    # a trend below zero (AUC points gained per doubling) reads as a rise, its interval flipped
    sweep_stored["claims"][-1] = row("03.size.trend", -0.5, "not supported")
    sweep.write_text(json.dumps(sweep_stored))
    assert (
        "BN's excess rises by 0.500 [-0.500, 1.500] points per doubling (the row asks whether it"
        " falls: not supported)" in report.size_trend_note(tmp_path)
    )
    # a sweep without any per-size row says nothing
    sweep_stored["claims"] = [row("03.size.trend", 0.5, "inconclusive")]
    sweep.write_text(json.dumps(sweep_stored))
    assert report.size_trend_note(tmp_path) == ""
