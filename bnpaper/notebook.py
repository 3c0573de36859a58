"""What a notebook does before and after its science: `start` resolves and checks its parameters
(the one line after the parameters cell), `Run` saves its figures, results and verdict.

`start` is safe to re-run in the same kernel (JupyterLab's second Run All): it reads the values
of the declared parameters only and never scans the namespace for strangers. Unknown names are
caught where they enter: papermill's injected-parameters cell, params files, the runner's `-p`.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import params as _params
from .config import ConfigError, cache_root, device, output_root, repo_root, set_device

_INJECTED_MARK = "# Parameters"  # papermill's injected-parameters cell starts with this comment


def _injected_names(namespace: dict) -> dict[str, Any]:
    """The assignments of papermill's injected-parameters cell, if it ran just before this cell."""
    history = namespace.get("In")
    if not isinstance(history, list) or len(history) < 2:
        return {}
    previous = history[-2]
    if not isinstance(previous, str) or not previous.lstrip().startswith(_INJECTED_MARK):
        return {}
    try:
        return _params.assignments(previous)
    except (SyntaxError, ValueError):
        return {}


@dataclass
class Run:
    """One execution of a notebook: its resolved parameters and where its outputs go."""

    notebook: str
    params: dict[str, Any]
    changed: dict[str, str] = field(default_factory=dict)

    @property
    def dataset(self) -> str:
        return self.params["dataset"]

    @property
    def label(self) -> str:
        """The configuration's folder below figures/<notebook>/ and results/<notebook>/: the
        dataset for the budget's own configuration, e.g. `fashion_mnist`, else with the budget
        and every changed value, e.g. `fashion_mnist.full.arch=resnet20`."""
        return _params.config_label(self.notebook, self.params)

    def figure(self, fig, name: str) -> None:
        """Save `fig` as figures/<notebook>/<label>/<name>.png and .pdf (returns nothing, so a
        notebook cell echoes no path)."""
        from .plots import save_figure

        save_figure(fig, self.notebook, self.label, name)

    def save(self, results: dict) -> None:
        """Write results/<notebook>/<label>/results.json with the parameters. Its verdict rows
        ("claims") are stored as `claims.correct` corrected them (by their verdict families;
        correcting them again here changes nothing)."""
        from .claims import correct
        from .store import save_results

        if results.get("claims"):
            results = {**results, "claims": [r.as_dict() for r in correct(results["claims"])]}
        save_results(
            self.notebook,
            self.label,
            {"notebook": self.notebook, "label": self.label, "params": self.params, **results},
        )


def start(namespace: dict, notebook: str, quiet: bool = False) -> Run:
    """Resolve the notebook's parameters exactly as the runner does (defaults,
    params/<dataset>.yaml, params/<budget>.yaml, then every value set explicitly: papermill's
    injected ones and any value edited in the parameters cell), check them, write the resolved
    values back into `namespace`, print where outputs go and the environment, and return the
    `Run`."""
    notebook = _params.notebook_name(notebook)
    defaults = _params.defaults(notebook)
    injected = _injected_names(namespace)
    unknown = sorted(set(injected) - set(defaults))
    if unknown:
        raise ConfigError(
            f"unknown parameter(s) {unknown} for notebook {notebook}; known: {sorted(defaults)}"
        )
    for k, v in injected.items():
        if isinstance(v, str) and isinstance(defaults[k], (list, dict)):
            raise ConfigError(
                f"{k}={v!r} must be a {type(defaults[k]).__name__}, got a string; with "
                f'papermill pass it as YAML: -y "{k}: {v}"'
            )
    missing = sorted(k for k in defaults if k not in namespace)
    if missing:
        raise ConfigError(
            f"notebook {notebook}: parameter(s) {missing} are not defined; run the "
            "parameters cell first"
        )
    explicit = {k: namespace[k] for k in defaults if k in injected or namespace[k] != defaults[k]}
    resolved = _params.resolve(notebook, explicit)
    check_data(resolved.values)
    if "device" in resolved.values:  # every unit of this kernel trains there (auto: a GPU if any)
        set_device(resolved.values["device"])
    namespace.update(resolved.values)
    run = Run(notebook, resolved.values, resolved.changed())
    if not quiet:
        print(describe(run))
    return run


def check_data(p: dict[str, Any]) -> None:
    """Fail before any training when the dataset, or the OOD source the run injects, is missing
    (one clear error saying where it looked and how to get it)."""
    from .sources import locate

    if not p.get("download"):
        locate(p["dataset"])
    kinds = [
        p.get("outlier_kind"),
        *(p["corruption"] if isinstance(p.get("corruption"), list) else [p.get("corruption")]),
    ]
    if "ood" in kinds and p.get("ood_source") not in (None, "noise", "digits"):
        locate(p["ood_source"])


def _shown(path: Path) -> str:
    """A path as the notebook prints it: relative to the repository when inside it (so that no
    machine's folder ends up in a committed page)."""
    try:
        rel = path.resolve().relative_to(repo_root())
    except ValueError:
        return str(path)
    return "./" if str(rel) == "." else f"{rel}/"


def describe(run: Run) -> str:
    """Two lines: the configuration (what differs from the defaults, and why) and the machine."""
    import torch

    changed = ", ".join(
        f"{k}={run.params[k]!r} ({src})"
        for k, src in run.changed.items()
        if k not in ("dataset", "budget")
    )
    # a reference run writes into a staging folder and publishes it when the notebook finished
    published = os.environ.get("BNPAPER_PUBLISH")
    where = _shown(Path(published) if published else output_root())
    cache = _shown(cache_root())
    where = "the repository (reference run)" if where == "./" else where
    return (
        f"{run.notebook}: dataset {run.dataset}, budget {run.params['budget']}"
        f"{'; ' + changed if changed else '; notebook defaults'}\n"
        f"outputs -> {where} (figures/results folder {run.label}); cache -> {cache}\n"
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, device {device()}"
    )


def figure_paths(run: Run, names: list[str]) -> list[str]:
    """Repository-relative paths of the key figures (for the report)."""
    return [str(Path("figures") / run.notebook / run.label / f"{n}.png") for n in names]
