"""Run the notebooks headless with papermill for one dataset and budget.

Every selected notebook's parameters are resolved and checked (`bnpaper.params.resolve`) before
the first one starts. Papermill injects only the explicit values (dataset, budget, `-p`), and the
notebook resolves the rest itself in the same way, so a run by hand with the same values is the
same configuration. Only `reference=True` (`make reproduce`: the quick budget, no overrides)
writes the repository's figures/ and results/, each notebook's into a staging folder first, swapped
in when that notebook has finished (an interrupted run leaves the previous ones in place); every
other run writes beside its executed notebooks under runs/.

While a notebook runs, its units report to a progress file (`bnpaper.progress`) and the runner
prints each line with a count and the time left; the kernel's connection is encrypted (CurveZMQ,
where pyzmq supports it).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from . import params
from .follow import following
from .config import NOTEBOOKS, ConfigError, cache_root, output_root, repo_root
from .store import atomic_write_bytes


def resolve_notebooks(only: Sequence[str] | None) -> list[str]:
    """Notebook names for `--only` values such as '01' or '03_lira'; all of them if None."""
    names = list(NOTEBOOKS) if not only else [params.notebook_name(o) for o in only]
    for n in names:
        if not (repo_root() / "notebooks" / f"{n}.ipynb").exists():
            raise ConfigError(f"notebooks/{n}.ipynb does not exist")
    return names


def split_overrides(notebooks: list[str], overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per notebook, the `-p` values that apply to it: `key=v` goes to every selected notebook
    that declares `key` (at least one must), `03.key=v` to notebook 03 only (it must be selected
    and declare it)."""
    per = {nb: {} for nb in notebooks}
    for key, value in overrides.items():
        if key in ("dataset", "budget"):
            raise ConfigError(f"parameter {key!r} is set by --{key}, not by -p {key}={value!r}")
        if "." in key:
            prefix, name = key.split(".", 1)
            nb = params.notebook_name(prefix)
            if nb not in per:
                raise ConfigError(
                    f"-p {key}: notebook {nb} is not selected (selected: {notebooks})"
                )
            if name not in params.DECLARATIONS[nb]:
                raise ConfigError(
                    f"-p {key}: unknown parameter {name!r} for notebook {nb}; "
                    f"known: {sorted(params.DECLARATIONS[nb])}"
                )
            per[nb][name] = value
            continue
        targets = [nb for nb in notebooks if key in params.DECLARATIONS[nb]]
        if not targets:
            raise ConfigError(
                f"-p {key}: unknown parameter {key!r}: no selected notebook "
                f"({', '.join(notebooks)}) declares it"
            )
        for nb in targets:
            per[nb][key] = value
    return per


def plan(
    dataset: str,
    budget: str,
    only: Sequence[str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """{notebook: the explicit values papermill injects}, every notebook's full parameters
    resolved and checked first (a bad value anywhere fails here, before anything runs)."""
    params.check_params_files()
    notebooks = resolve_notebooks(only)
    per = split_overrides(notebooks, dict(overrides or {}))
    out = {}
    for nb in notebooks:
        explicit = {"dataset": dataset, "budget": budget, **per[nb]}
        defaults = params.defaults(nb)
        for key, value in per[nb].items():
            if isinstance(value, str) and isinstance(defaults.get(key), (list, dict)):
                shape = f"[{value}]" if isinstance(defaults[key], list) else "{key: value, ...}"
                raise ConfigError(
                    f"{nb}: {key}={value!r} must be a {type(defaults[key]).__name__}, got a "
                    f"string; on the command line write it as YAML: -p '{nb[:2]}.{key}={shape}'"
                )
        params.resolve(nb, explicit)
        out[nb] = explicit
    return out


@dataclass(frozen=True)
class RunRecord:
    notebook: str
    output: Path
    seconds: float


class NotebookFailed(RuntimeError):
    """A notebook stopped: one line naming it, the error and the executed copy."""


def _engine(log: Callable[[str], None], notebook: str):
    """A papermill engine that logs a line per finished code cell (the runner is never silent)."""
    from papermill.engines import NBClientEngine

    class Engine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
            code = [i for i, c in enumerate(nb_man.nb.cells) if c.cell_type == "code"]
            t0, done = time.perf_counter(), nb_man.cell_complete

            def cell_complete(cell, cell_index=None, **kw):
                done(cell, cell_index=cell_index, **kw)
                if cell.cell_type == "code" and cell_index in code:
                    log(
                        f"[bnpaper] {notebook}: cell {code.index(cell_index) + 1}/{len(code)} "
                        f"done ({time.perf_counter() - t0:.0f} s)"
                    )

            nb_man.cell_complete = cell_complete
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    return Engine


def execute(notebook: str, injected: dict[str, Any], dst: Path, log=print) -> None:
    """Execute one notebook with papermill into `dst`; failures are one `NotebookFailed` line."""
    import papermill as pm
    from nbclient.exceptions import DeadKernelError
    from papermill.engines import papermill_engines

    papermill_engines.register("bnpaper", _engine(log, notebook))
    src = repo_root() / "notebooks" / f"{notebook}.ipynb"
    try:
        pm.execute_notebook(
            str(src),
            str(dst),
            parameters=injected,
            kernel_name="python3",
            cwd=str(dst.parent),
            progress_bar=False,
            engine_name="bnpaper",
            **kernel_options(),
        )
    except pm.PapermillExecutionError as exc:
        raise NotebookFailed(
            f"notebook {notebook} failed: {exc.ename}: "
            f"{exc.evalue.splitlines()[0] if exc.evalue else ''} "
            f"(executed copy: {dst})"
        ) from None
    except DeadKernelError:
        raise NotebookFailed(
            f"notebook {notebook}: the kernel died (out of memory, or killed); executed copy: {dst}"
        ) from None


def kernel_options() -> dict[str, Any]:
    """The kernel manager's options: CurveZMQ transport encryption where jupyter_client and pyzmq
    support it (ipykernel otherwise warns, on every run, that the kernel talks over TCP without
    encryption)."""
    import zmq
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    if "transport_encryption" not in KernelManager.class_traits() or not zmq.has("curve"):
        return {}
    return {"config": Config({"KernelManager": {"transport_encryption": "auto"}})}


def publish(new: Path, old: Path) -> None:
    """Put folder `new` in the place of folder `old` (two renames, each atomic; `old` goes if
    there is no `new`)."""
    old.parent.mkdir(parents=True, exist_ok=True)
    replaced = old.with_name(f".{old.name}.replaced")
    shutil.rmtree(replaced, ignore_errors=True)
    if old.exists():
        os.replace(old, replaced)
    if new.exists():
        os.replace(new, old)
    shutil.rmtree(replaced, ignore_errors=True)


@contextmanager
def staged(notebook: str, label: str, reference: bool):
    """A reference run's notebook writes its figures and results (and page, run time) into a
    staging folder under runs/; only when the block finished are they swapped in for the
    committed ones, so an interrupted run leaves the previous outputs in place. Other runs write
    in place. $BNPAPER_PUBLISH names where the outputs will be (the notebook shows it)."""
    if not reference:
        yield
        return
    final = output_root()
    staging = repo_root() / "runs" / ".reference" / notebook
    shutil.rmtree(staging, ignore_errors=True)
    os.environ["BNPAPER_OUTPUT"], os.environ["BNPAPER_PUBLISH"] = str(staging), str(final)
    try:
        yield
    finally:
        os.environ["BNPAPER_OUTPUT"] = str(final)
        os.environ.pop("BNPAPER_PUBLISH", None)
    for kind in ("figures", "results"):
        publish(staging / kind / notebook / label, final / kind / notebook / label)
    shutil.rmtree(staging, ignore_errors=True)


def run(
    dataset: str,
    budget: str,
    only: Sequence[str] | None = None,
    overrides: dict[str, Any] | None = None,
    out_dir: str | Path | None = None,
    reference: bool = False,
    log=print,
    _matrix: bool = False,
) -> list[RunRecord]:
    """Execute the notebooks into `out_dir` (default runs/<budget>/<dataset>)."""
    if reference and not _matrix and (budget != "quick" or overrides):
        raise ConfigError(
            f"--reference is the quick budget without -p overrides (got budget "
            f"{budget!r}, overrides {dict(overrides or {})}); drop --reference, or "
            "run the shipped matrix (`python -m bnpaper matrix --reference`)"
        )
    todo = plan(dataset, budget, only, overrides)
    out = Path(out_dir) if out_dir else repo_root() / "runs" / budget / dataset
    out.mkdir(parents=True, exist_ok=True)
    if reference:
        os.environ["BNPAPER_OUTPUT"] = str(repo_root())
    elif "BNPAPER_OUTPUT" not in os.environ:
        os.environ["BNPAPER_OUTPUT"] = str(out.resolve())
    log(f"[bnpaper] figures and results -> {output_root()}")
    records = []
    for nb, injected in todo.items():
        cached = cache_entries()
        label = params.config_label(nb, params.resolve(nb, injected).values)
        dst = out / f"{nb}.ipynb"
        log(f"[bnpaper] {nb}: {', '.join(f'{k}={v!r}' for k, v in injected.items())} -> {dst}")
        with staged(nb, label, reference):  # no figure or result of older code survives
            t0 = time.perf_counter()
            with following(nb, out / f".{nb}.progress", log) as log_in_order:
                execute(nb, injected, dst, log_in_order)
            dt = time.perf_counter() - t0
            log(f"[bnpaper] {nb}: done in {dt:.0f} s")
            write_run_time(nb, label, budget, dt, cached)
            if reference:
                render_page(dst, nb, label)
        if reference:
            log(f"[bnpaper] {nb}: page -> {output_root() / 'figures' / nb / label / nb}.html")
        records.append(RunRecord(nb, dst, dt))
    return records


def render_page(executed: Path, notebook: str, label: str) -> Path:
    """The executed notebook as one static HTML page (figures inline as PNG, readable without
    JavaScript), next to its figures: figures/<notebook>/<label>/<notebook>.html."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(executed), as_version=4)
    for cell in nb.cells:  # the widget views of progress bars need JavaScript: keep their text
        for out in cell.get("outputs", []):
            out.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
    nb.metadata.pop("widgets", None)
    html, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    path = output_root() / "figures" / notebook / label / f"{notebook}.html"
    atomic_write_bytes(path, html.encode())
    return path


def cache_entries() -> int:
    """How many finished units the run cache holds (0: the run starts from nothing)."""
    root = cache_root()
    return sum(1 for _ in root.glob("*/*.pt")) if root.exists() else 0


def write_run_time(
    notebook: str, label: str, budget: str, seconds: float, cache_entries_at_start: int
) -> None:
    """Record a notebook's wall time next to its results, in its configuration's folder (the
    report shows it)."""
    path = output_root() / "results" / notebook / label / "run_time.json"
    rec = {
        "notebook": notebook,
        "label": label,
        "budget": budget,
        "seconds": round(seconds, 1),
        "cpu_count": os.cpu_count(),
        "cache_entries_at_start": cache_entries_at_start,
    }
    atomic_write_bytes(path, (json.dumps(rec, indent=1) + "\n").encode())


@dataclass(frozen=True)
class MatrixEntry:
    """One configuration of the matrix: notebooks, dataset and the values that differ from the
    matrix's budget (its results folder is `params.config_label` of them)."""

    notebooks: tuple[str, ...]
    dataset: str
    values: tuple[tuple[str, Any], ...]


def read_matrix(path: Path | None = None) -> tuple[str, list[MatrixEntry]]:
    """The budget and the configurations of a matrix file (default params/matrix.yaml): each run
    lists `notebooks`, `datasets` and optionally `set` (values for every notebook of the run that
    declares them). Every configuration is resolved and checked here, before anything runs."""
    path = path or repo_root() / "params" / params.MATRIX_FILE
    if not path.exists():
        raise ConfigError(f"matrix file {path} does not exist")
    doc = params.load_yaml(path.read_text()) or {}
    if not isinstance(doc, dict) or set(doc) - {"budget", "runs"} or "runs" not in doc:
        raise ConfigError(
            f"{path}: a matrix file holds `budget` and `runs`, "
            f"got {sorted(doc) if isinstance(doc, dict) else doc!r}"
        )
    budget = doc.get("budget", "full")
    entries = []
    for i, r in enumerate(doc["runs"]):
        if (
            not isinstance(r, dict)
            or set(r) - {"notebooks", "datasets", "set"}
            or not {"notebooks", "datasets"} <= set(r)
        ):
            raise ConfigError(
                f"{path}: run {i + 1} must have `notebooks`, `datasets` and optionally "
                f"`set`, got {r!r}"
            )
        nbs = tuple(resolve_notebooks([str(n) for n in r["notebooks"]]))
        for ds in r["datasets"]:
            over = dict(r.get("set") or {})
            plan(ds, budget, list(nbs), over)  # a bad value anywhere fails before the first run
            entries.append(MatrixEntry(nbs, ds, tuple(sorted(over.items()))))
    return budget, entries


def run_matrix(
    path: Path | None = None, reference: bool = False, out_dir: str | Path | None = None, log=print
) -> list[RunRecord]:
    """Run every configuration of the matrix file, one after the other; each configuration's
    figures and results go to its own folder (`params.config_label`), so none overwrites another
    or the quick reference. `reference=True` writes them into the repository."""
    budget, entries = read_matrix(path)
    records = []
    for k, e in enumerate(entries):
        log(
            f"[bnpaper] matrix {k + 1}/{len(entries)}: {e.dataset}, {', '.join(e.notebooks)}, "
            f"{dict(e.values) or 'the budget as is'}"
        )
        out = Path(out_dir or repo_root() / "runs" / budget) / f"{e.dataset}-{k + 1:02d}"
        records += run(
            e.dataset,
            budget,
            list(e.notebooks),
            dict(e.values),
            out,
            reference=reference,
            log=log,
            _matrix=True,
        )
    return records
