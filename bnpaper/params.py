"""The one way a notebook's parameters are resolved: defaults, params files, explicit values.

A notebook's parameters are: its parameters cell's literal defaults (the one copy of each
default: they are the quick budget on the embedded dataset), then `params/<dataset>.yaml`,
then `params/<budget>.yaml`, then the values set explicitly (papermill's `-p`, the runner's
`-p`, or a value edited in the parameters cell in JupyterLab). Every route (the runner, papermill
by hand, JupyterLab) goes through `resolve`, so they run the same configuration. Each file may
hold a section `all` (keys applied to every notebook that declares them; a key no notebook
declares is an error) and one section per notebook (keys that notebook must declare).
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from .config import NOTEBOOKS, ConfigError, repo_root, require
from .declarations import DECLARATIONS, check_values


# ---------------------------------------------------------------- YAML with YAML 1.2 floats
class _Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where `1e-3` is a string; this loader reads every YAML 1.2 float."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml(text: str) -> Any:
    """Parse YAML text with YAML 1.2 floats (`1e-3` is a number; integers stay integers: the
    int resolver comes first)."""
    return yaml.load(text, Loader=_Loader)


# ---------------------------------------------------------------- checks
# rules that read another notebook's values (05's LiRA no longer trains with 03's recipe, so its
# weight decays need not beat 03's)
LINKS: dict = {}


def validate(notebook: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Check every value of `notebook` against its declaration, the cross-field rules and the
    rules that read another notebook's values; return the values normalized."""
    out = check_values(notebook, values)
    if notebook in LINKS:
        LINKS[notebook](out)
    return out


# ---------------------------------------------------------------- defaults and files
def notebook_name(name: str) -> str:
    """The full notebook name for '03', '03_lira' or a path to it."""
    stem = Path(str(name)).stem
    match = [n for n in NOTEBOOKS if n == stem or n.split("_")[0] == stem]
    if not match:
        raise ConfigError(
            f"notebook {name!r} is not a notebook of this project; allowed: "
            f"{[n.split('_')[0] for n in NOTEBOOKS]} or full names {list(NOTEBOOKS)}"
        )
    return match[0]


def defaults(notebook: str) -> dict[str, Any]:
    """The literal defaults of a notebook's `parameters` cell: the one copy of each default, read
    from the notebook's py:percent source (parsed once per process and version of the file)."""
    path = repo_root() / "notebooks" / f"{notebook}.py"
    if not path.exists():
        raise ConfigError(f"notebook={notebook!r} has no source at {path}")
    return copy.deepcopy(_parameters_cell(path, path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=None)
def _parameters_cell(path: Path, version: int) -> dict[str, Any]:
    """The assignments of the cell tagged `parameters` in the py:percent file `path`."""
    text = path.read_text()
    start = text.find('tags=["parameters"]')
    if start < 0:
        raise ConfigError(f"{path} has no cell tagged parameters")
    body = text[text.index("\n", start) + 1 :]
    end = body.find("\n# %%")
    return assignments(body if end < 0 else body[:end])


def assignments(source: str) -> dict[str, Any]:
    """The `name = literal` assignments of a code cell (papermill's injected cell, a parameters
    cell)."""
    out: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def params_file(name: str) -> Path:
    """The path of params/<name>.yaml (a dataset's or a budget's file)."""
    return repo_root() / "params" / f"{name}.yaml"


def read_params_file(path: Path) -> dict[str, dict]:
    """A params file's sections, with every key checked: an unknown section, or a key that no
    notebook (for `all`) or not that notebook declares, is one error naming the file and the key."""
    if not path.exists():
        raise ConfigError(f"parameter file {path} does not exist")
    doc = load_yaml(path.read_text()) or {}
    require(
        isinstance(doc, dict), f"{path} must hold a mapping of sections, got {type(doc).__name__}"
    )
    everything = set().union(*DECLARATIONS.values())
    for section, body in doc.items():
        require(
            section == "all" or section in NOTEBOOKS,
            f"{path}: unknown section {section!r}; "
            f"allowed: ['all', {', '.join(repr(n) for n in NOTEBOOKS)}]",
        )
        require(isinstance(body, dict), f"{path}: section {section!r} must be a mapping")
        known = everything if section == "all" else set(DECLARATIONS[section])
        unknown = sorted(set(body) - known)
        require(
            not unknown,
            f"{path}: unknown parameter(s) {unknown} in section {section!r}; "
            f"known: {sorted(known)}",
        )
        require(
            not {"dataset", "budget"} & set(body),
            f"{path}: section {section!r} sets dataset/budget; they choose the files themselves",
        )
    return doc


@dataclass(frozen=True)
class Resolved:
    """A notebook's parameters and where each came from ('default', a params file, 'explicit')."""

    notebook: str
    values: dict[str, Any]
    source: dict[str, str]

    def changed(self) -> dict[str, str]:
        """The values that are not the notebook's defaults, with their source."""
        return {k: s for k, s in self.source.items() if s != "default"}


def resolve(
    notebook: str, explicit: Mapping[str, Any] | None = None, cross: bool = True
) -> Resolved:
    """Defaults, then params/<dataset>.yaml, then params/<budget>.yaml, then `explicit` (whose
    dataset and budget choose the files); unknown keys and bad values are one error. With
    `cross=False` each value is checked and normalized on its own, without the cross-field
    rules (a reference configuration that is never run itself, e.g. `config_label`'s base)."""
    notebook = notebook_name(notebook)
    decl = DECLARATIONS[notebook]
    explicit = dict(explicit or {})
    unknown = sorted(set(explicit) - set(decl))
    require(
        not unknown,
        f"unknown parameter(s) {unknown} for notebook {notebook}; known: {sorted(decl)}",
    )
    values = defaults(notebook)
    source = {k: "default" for k in values}
    for k in ("dataset", "budget"):
        if k in explicit:
            values[k] = decl[k](k, explicit[k])
    for name in (values["dataset"], values["budget"]):
        path = params_file(name)
        doc = read_params_file(path)
        for section in ("all", notebook):
            for k, v in doc.get(section, {}).items():
                if k in decl:
                    values[k], source[k] = v, f"params/{name}.yaml"
    for k, v in explicit.items():
        values[k], source[k] = v, "explicit"
    if not cross:
        checked = {k: decl[k](k, v) for k, v in values.items()}
        checked.update({k: list(checked[k]) for k in ("norms", "archs") if k in checked})
        return Resolved(notebook, checked, source)
    return Resolved(notebook, validate(notebook, values), source)


MATRIX_FILE = "matrix.yaml"  # not a params file: the configurations of `make reproduce-full`


def check_params_files() -> None:
    """Read every shipped params file (unknown keys fail here)."""
    for path in sorted((repo_root() / "params").glob("*.yaml")):
        if path.name != MATRIX_FILE:
            read_params_file(path)


def flat_file(notebook: str, explicit: Mapping[str, Any] | None = None) -> str:
    """The resolved parameters as a flat YAML mapping, for `papermill -f`."""
    r = resolve(notebook, explicit)
    return yaml.safe_dump(r.values, sort_keys=False, default_flow_style=None)


def _label_value(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(_label_value(x) for x in v)
    if isinstance(v, dict):
        return ",".join(f"{k}:{_label_value(x)}" for k, x in v.items())
    return f"{v:g}" if isinstance(v, float) else str(v)


def config_label(notebook: str, values: Mapping[str, Any]) -> str:
    """The folder a run's figures and results go to: the dataset for the budget's own
    configuration (quick: the reference), then `.<budget>` for any other budget and
    `.<key>=<value>` for every value that differs from what the dataset and budget give, e.g.
    `fashion_mnist.full.arch=resnet20`. A run of another configuration never overwrites one."""
    notebook = notebook_name(notebook)
    # the budget's own configuration of this dataset, which need not be runnable itself (the
    # matrix's mnist_subset cells shrink n_train below what the full budget sets)
    base = resolve(notebook, {k: values[k] for k in ("dataset", "budget")}, cross=False).values
    parts = [str(values["dataset"])] + (
        [str(values["budget"])] if values["budget"] != "quick" else []
    )
    parts += [
        f"{k}={_label_value(values[k])}"
        for k in sorted(values)
        if k not in ("dataset", "budget") and values[k] != base.get(k)
    ]
    label = re.sub(r"[^A-Za-z0-9_.,:=+-]", "", ".".join(parts))
    if len(label) > 96:  # a long list of overrides: keep it readable, keep it unique
        label = label[:80] + "." + hashlib.sha1(label.encode()).hexdigest()[:10]
    return label
