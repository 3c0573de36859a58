"""Repository invariants: notebook pairs in sync and clean, conda and pip agree, README table."""

import ast
import json
import re

import jupytext
import pytest
import tomllib
import yaml

from bnpaper import config, report

ROOT = config.repo_root()
SOURCES = sorted((ROOT / "notebooks").glob("*.py"))


def _cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_notebook_pair_is_in_sync(py):
    ipynb = py.with_suffix(".ipynb")
    assert ipynb.exists(), f"{ipynb.name} missing: run jupytext --sync {py.name}"
    assert _cells(jupytext.read(py)) == _cells(jupytext.read(ipynb)), (
        f"{py.name} and {ipynb.name} differ: run jupytext --sync {py.relative_to(ROOT)}"
    )


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_committed_notebook_has_no_outputs_and_python3_kernel(py):
    nb = json.loads(py.with_suffix(".ipynb").read_text())
    outputs = sum(len(c.get("outputs", [])) for c in nb["cells"] if c["cell_type"] == "code")
    assert outputs == 0 and nb["metadata"]["kernelspec"]["name"] == "python3"
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged parameters"


def _names(reqs):
    return {
        re.split(r"[<>=\[ ;]", r.strip(), maxsplit=1)[0].lower()
        for r in reqs
        if not r.strip().startswith("-")
    }


def test_environment_yml_and_pyproject_name_the_same_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip_deps = _names(project["dependencies"] + project["optional-dependencies"]["test"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert _names(conda_pip) == pip_deps


def test_readme_table_equals_committed_results():
    text = (ROOT / "README.md").read_text()
    assert report.START in text, "README lacks the report block"
    i, j = text.index(report.START), text.index(report.END) + len(report.END)
    assert text[i:j] == report.readme_block(ROOT), (
        "README table is stale: run `python -m bnpaper report --readme`"
    )


def _source_cells(py):
    """The notebook source's cells as (header, lines): header is the `# %%` line."""
    cells, header, lines = [], None, []
    for line in py.read_text().splitlines():
        if line.startswith("# %%"):
            if header is not None:
                cells.append((header, lines))
            header, lines = line, []
        elif header is not None:
            lines.append(line)
    cells.append((header, lines))
    return cells


MAX_CELL_LINES = 12


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_notebook_reads_one_choice_per_short_cell(py):
    """Reading rules: every code cell (but the parameters and the start line) sits under its own
    markdown sentence and holds at most 12 lines; no one- or two-letter capital names for
    results; lines of at most 100 characters (ruff checks `;` and lambdas bound to names)."""
    cells = _source_cells(py)
    problems = []
    for i, (header, lines) in enumerate(cells):
        if "[markdown]" in header or 'tags=["parameters"]' in header:
            continue
        code = [x for x in lines if x.strip() and not x.lstrip().startswith("#")]
        if "notebook.start(globals()" in "\n".join(code):
            continue
        where = f"{py.name}, cell {i} ({(code or ['empty'])[0].strip()[:40]!r})"
        if len(code) > MAX_CELL_LINES:
            problems.append(f"{where}: {len(code)} code lines > {MAX_CELL_LINES}")
        if i == 0 or "[markdown]" not in cells[i - 1][0]:
            problems.append(f"{where}: no markdown sentence above it")
        tree = ast.parse("\n".join(lines))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if len(node.id) <= 2 and node.id.isupper():
                    problems.append(f"{where}: capital short name {node.id!r}")
    for n, line in enumerate(py.read_text().splitlines(), 1):
        if len(line) > 100:
            problems.append(f"{py.name}:{n}: {len(line)} characters > 100")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("py", SOURCES, ids=lambda p: p.stem)
def test_notebook_leaves_machinery_to_the_package(py):
    """No validation, cache keys or cached units built in the notebook."""
    text = py.read_text()
    for banned in ("check_", ".cached(", "Store(", "cache_key", "save_figure(", "import platform"):
        assert banned not in text, f"{py.name} uses {banned!r}: that belongs in bnpaper/"
    assert f'notebook.start(globals(), "{py.stem}")' in text


def test_package_has_no_import_cycle():
    import ast

    graph = {}
    for path in sorted((ROOT / "bnpaper").glob("*.py")):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
        graph[path.stem] = deps & {p.stem for p in (ROOT / "bnpaper").glob("*.py")}
    graph.pop("__init__", None)
    state = {}

    def visit(n, trail):
        if state.get(n) == "done":
            return
        assert state.get(n) != "open", f"import cycle: {' -> '.join(trail + [n])}"
        state[n] = "open"
        for d in sorted(graph.get(n, ())):
            visit(d, trail + [n])
        state[n] = "done"

    for n in graph:
        visit(n, [])
    assert not graph["config"], "config must stay a leaf"


def test_a_notebook_run_by_hand_leaves_the_repository_untouched(tmp_path, monkeypatch):
    """papermill by hand (no BNPAPER_OUTPUT): outputs go to runs/manual, never to figures/ or
    results/."""
    import subprocess
    import sys

    monkeypatch.delenv("BNPAPER_OUTPUT", raising=False)
    before = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    out = tmp_path / "out.ipynb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(ROOT / "notebooks" / "03_lira.ipynb"),
            str(out),
            "-p",
            "budget",
            "ci",
            "--cwd",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    after = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert after == before
    assert (
        ROOT / "runs" / "manual" / "results" / "03_lira" / "fashion_mnist.ci" / "results.json"
    ).exists()


def test_committed_reference_figures_pass_the_figure_checks():
    """Every figure of the reference run: axes labelled, no legend over data, integer epoch
    ticks."""
    records = sorted((ROOT / "figures").glob("*/*/figure_checks.json"))
    assert records, "the reference run records figure_checks.json next to its figures"
    bad = {
        f"{p.parent.parent.name}/{name}": probs
        for p in records
        for name, probs in json.loads(p.read_text()).items()
        if probs
    }
    assert not bad, bad
