"""One parameter declaration per notebook, and the one way parameters are resolved.

A notebook's parameters are: its parameters cell's literal defaults, then `params/<dataset>.yaml`,
then `params/<budget>.yaml`, then the values set explicitly (papermill's `-p`, the runner's
`-p`, or a value edited in the parameters cell in JupyterLab). Every route (the runner, papermill
by hand, JupyterLab) goes through `resolve`, so they run the same configuration. Each file may
hold a section `all` (keys applied to every notebook that declares them; a key no notebook
declares is an error) and one section per notebook (keys that notebook must declare).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from .config import (
    BUDGETS,
    DEVICES,
    NOTEBOOKS,
    ConfigError,
    check_choice,
    check_choices,
    check_int_list,
    check_number,
    repo_root,
)
from .data import DATASETS, OOD_SOURCES, check_rare, rare_count
from .models import ARCHS, NORMS


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


# ---------------------------------------------------------------- rules
Rule = Callable[[str, Any], Any]


def choice(*allowed) -> Rule:
    return lambda name, v: check_choice(name, v, allowed)


def flag() -> Rule:
    return choice(True, False)


def number(lo=None, hi=None, integer=False, lo_open=False, hi_open=False) -> Rule:
    return lambda name, v: check_number(name, v, lo, hi, integer, lo_open, hi_open)


def int_list(lo: int = 0, min_len: int = 1) -> Rule:
    return lambda name, v: check_int_list(name, v, lo, min_len)


def choice_list(allowed: Sequence, min_len: int = 1) -> Rule:
    return lambda name, v: check_choices(name, v, allowed, min_len)


def one_or_list(allowed: Sequence) -> Rule:
    """A member of `allowed` or a list of distinct members (e.g. corruption 'flip' or ['flip', 'ood'])."""
    return lambda name, v: check_choices(name, [v] if isinstance(v, str) else v, allowed)


def number_list(lo=None, hi=None, min_len: int = 1, lo_open=False, hi_open=False) -> Rule:
    def rule(name, v):
        if isinstance(v, (str, bytes, dict)) or not isinstance(v, Sequence) or len(v) < min_len:
            raise ConfigError(f"{name}={v!r} must be a list of at least {min_len} numbers")
        for x in v:
            check_number(name, x, lo, hi, lo_open=lo_open, hi_open=hi_open)
        if len(set(v)) != len(v):
            raise ConfigError(f"{name}={list(v)!r} must not repeat values")
        return list(v)

    return rule


def pairs(lo=0.0) -> Rule:
    """A list of [lambda, tau] pairs, both > lo (05's sweep)."""

    def rule(name, v):
        if not isinstance(v, (list, tuple)) or any(
            not isinstance(p, (list, tuple)) or len(p) != 2 for p in v
        ):
            raise ConfigError(f"{name}={v!r} must be a list of [lambda, tau] pairs")
        for lam, tau in v:
            check_number(f"{name} lambda", lam, lo, None, lo_open=True)
            check_number(f"{name} tau", tau, lo, None, lo_open=True)
        return [list(p) for p in v]

    return rule


def per_arch(lo: int = 1) -> Rule:
    """A mapping arch -> positive integer (04's n_train and epochs)."""

    def rule(name, v):
        if not isinstance(v, dict) or not v:
            raise ConfigError(
                f"{name}={v!r} must be a mapping arch -> integer, e.g. {{lenet: 1000}}"
            )
        for a, x in v.items():
            check_choice(f"{name} key", a, ARCHS)
            check_number(f"{name}[{a}]", x, lo, None, integer=True)
        return dict(v)

    return rule


def executor() -> Rule:
    """An executor spec, checked by the code that opens it (`shadow.check_executor`)."""
    from .shadow import check_executor

    return lambda name, v: check_executor(v)


# ---------------------------------------------------------------- declarations
_DATA = {
    "dataset": choice(*DATASETS),
    "budget": choice(*BUDGETS),
    "download": flag(),
    "device": choice(*DEVICES),
}
_TRAIN = {
    "arch": choice(*ARCHS),
    "n_test": number(1, None, integer=True),
    "epochs": number(1, 10_000, integer=True),
    "batch_size": number(2, None, integer=True),
    "lr": number(0.0, 10.0, lo_open=True),
    "weight_decay": number(0.0, 1.0),
    "augment": flag(),
    "seeds": int_list(0),
    "n_train": number(10, None, integer=True),
    "noise_frac": number(0.0, 1.0, lo_open=True, hi_open=True),
    "ood_source": choice(*OOD_SOURCES),
}
_NORMS = {"norms": choice_list(NORMS, min_len=2)}
_RARE = {"rare_share": number(), "rare_class": number(integer=True)}  # ranges: _cross_rare

DECLARATIONS: dict[str, dict[str, Rule]] = {
    "01_forced_memorization": {
        **_DATA,
        **_TRAIN,
        **_NORMS,
        "corruption": one_or_list(("flip", "ood", "rare")),
        **_RARE,
        "clean_level": number(0.0, 1.0, lo_open=True, hi_open=True),
    },
    "02_gradient_dynamics": {
        **_DATA,
        **_TRAIN,
        **_NORMS,
        "corruption": choice("flip", "ood"),
        "probe_epochs": int_list(0, min_len=2),
        "n_probe": number(10, None, integer=True),
        "probe_batches": number(1, None, integer=True),
    },
    "03_lira": {
        **_DATA,
        **{k: v for k, v in _TRAIN.items() if k not in ("noise_frac",)},
        **_NORMS,
        "n_train": number(20, None, integer=True),
        "n_test": number(10, None, integer=True),
        "augment": choice("auto", True, False),
        "outlier_frac": number_list(0.0, 0.5, hi_open=True),
        "outlier_kind": choice("flip", "ood"),
        "n_shadows": number(4, None, integer=True),
        "executor": executor(),
        "trainer": choice("auto", "plain", "packed"),
        "pack_size": number(1, 64, integer=True),
        "bn_query_mode": choice("eval", "train-batch"),
        "sigma_floor": number(0.0, 10.0, lo_open=True),
        "n_boot": number(10, None, integer=True),
        "rare_pool": flag(),
        **_RARE,
        "size_sweep": int_list(2, min_len=0),
    },  # ranges: _cross_03
    "04_theory": {
        **_DATA,
        "toy_d": number(2, None, integer=True),
        "toy_n_typical": number(4, None, integer=True),
        "toy_n_outliers": number(1, None, integer=True),
        "toy_steps": number(1, None, integer=True),
        "toy_batch_sizes": int_list(2),
        "toy_lrs": number_list(0.0, 100.0, lo_open=True),
        "toy_w_scales": number_list(0.0, None, lo_open=True),
        "toy_seeds": int_list(0, min_len=2),
        "default_batch_size": number(2, None, integer=True),
        "default_lr": number(0.0, 100.0, lo_open=True),
        "probe_every": number(1, None, integer=True),
        "archs": choice_list(ARCHS),
        "n_train": per_arch(10),
        "epochs": per_arch(1),
        "n_test": number(1, None, integer=True),
        "noise_frac": number(0.0, 1.0, hi_open=True),
        "batch_size": number(2, None, integer=True),
        "lr": number(0.0, 10.0, lo_open=True),
        "weight_decay": number(0.0, 1.0),
        "augment": flag(),
        "seeds": int_list(0, min_len=2),  # networks: intervals over seeds
        "clean_reference": choice_list(ARCHS, min_len=0),
    },
    "05_mitigation": {
        **_DATA,
        **_TRAIN,
        "corruption": one_or_list(("flip", "ood", "rare")),
        **_RARE,
        "selection_seeds": int_list(0),
        "n_val": number(1, None, integer=True),
        "lams": number_list(0.0, None, lo_open=True),
        "taus": number_list(0.0, None, lo_open=True),
        "frontier_tau": number(0.0, None, lo_open=True),
        "projection_taus": number_list(0.0, None, min_len=0, lo_open=True),
        "gamma_decays": number_list(0.0, 1.0, min_len=0, lo_open=True),
        "strong_weight_decays": number_list(0.0, 1.0, min_len=0, lo_open=True),
        "lira": flag(),
        "lira_variant": choice("online", "online_fixed", "offline", "offline_fixed"),
        "frontier_corruption": one_or_list(("flip", "ood")),
        "lira_frontier_shadows": number(0, None, integer=True),
    },
}


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def _cross_common(p: dict) -> None:
    if "norms" in p:
        _need(
            "bn" in p["norms"] and "none" in p["norms"],
            f"norms={p['norms']!r} must include 'bn' and 'none' (the paper's comparison)",
        )
    if "batch_size" in p and "n_train" in p and isinstance(p["n_train"], int):
        limit = p["n_train"] // 2 if "n_shadows" in p else p["n_train"]
        _need(
            p["batch_size"] <= limit,
            f"batch_size={p['batch_size']} is out of range; allowed: "
            f"an integer in [2, {limit}] ({'n_train/2, the size of a shadow training set' if 'n_shadows' in p else 'n_train'})",
        )
    for key in ("n_train", "lira_n"):  # samples drawn from the training set
        if isinstance(p.get(key), int) and "dataset" in p:
            size = DATASET_SIZES[p["dataset"]]
            _need(
                p[key] <= size,
                f"{key}={p[key]} is out of range; allowed: an integer "
                f"in [10, {size}] (the {p['dataset']} training set)",
            )


def _cross_02(p: dict) -> None:
    pe = p["probe_epochs"]
    _need(
        sorted(pe) == list(pe) and max(pe) <= p["epochs"],
        f"probe_epochs={pe!r} must be increasing and within 0..epochs={p['epochs']}",
    )
    _need(
        p["n_probe"] <= p["n_train"],
        f"n_probe={p['n_probe']} is out of range; allowed: an "
        f"integer in [10, n_train={p['n_train']}]",
    )
    most = p["n_train"] // p["batch_size"]
    _need(
        p["probe_batches"] <= most,
        f"probe_batches={p['probe_batches']} is out of range; "
        f"allowed: an integer in [1, n_train // batch_size = {most}]",
    )


def _cross_rare(p: dict, used: bool) -> None:
    """The rare class's share lies in (0, its natural share 1/classes] and the class exists;
    where a rare subset is drawn (`used`), the share leaves at least one rare sample in it."""
    check_rare(p["rare_share"], p["rare_class"], DATASETS[p["dataset"]].n_classes)
    _need(
        not used or rare_count(p["rare_share"], p["n_train"]) >= 1,
        f"rare_share={p['rare_share']!r} of n_train={p['n_train']} rounds to no rare sample; "
        f"allowed: rare_share >= {0.5 / p['n_train']:g} at this n_train",
    )


def _cross_01(p: dict) -> None:
    _cross_rare(p, "rare" in p["corruption"])


def _cross_03(p: dict) -> None:
    _cross_rare(p, p["rare_pool"])
    _need(
        p["n_shadows"] % 2 == 0, f"n_shadows={p['n_shadows']} must be even (balanced keep matrix)"
    )
    _need(
        not (p["trainer"] == "packed" and p["arch"] != "lenet"),
        f"trainer='packed' needs arch='lenet', got arch={p['arch']!r}",
    )
    _cross_size_sweep(p)


SIZE_SWEEP_MIN = (4, 8)  # at least 4 pool sizes, the largest at least 8x the smallest


def _cross_size_sweep(p: dict) -> None:
    """03's size sweep: [] (skipped) or at least 4 increasing pool sizes spanning at least 8x,
    each at most the training set and at least 2 batches (a shadow trains on half the pool)."""
    sizes, (k, span) = p["size_sweep"], SIZE_SWEEP_MIN
    if not sizes:
        return
    lo, hi = 2 * p["batch_size"], DATASET_SIZES[p["dataset"]]
    wrong = [
        why
        for why, bad in (
            ("not increasing", sorted(sizes) != list(sizes)),
            (f"only {len(sizes)} sizes", len(sizes) < k),
            (f"spans only {max(sizes) / min(sizes):.3g}x", max(sizes) < span * min(sizes)),
            (f"{min(sizes)} < {lo}", min(sizes) < lo),
            (f"{max(sizes)} > {hi}", max(sizes) > hi),
        )
        if bad
    ]
    _need(
        not wrong,
        f"size_sweep={list(sizes)!r} is not allowed ({'; '.join(wrong)}); allowed: [] "
        f"(no sweep) or at least {k} increasing pool sizes spanning at least {span}x (largest >= "
        f"{span} x smallest), each an integer in [2 x batch_size = {lo}, {hi}] (the "
        f"{p['dataset']} training set)",
    )


def _cross_04(p: dict) -> None:
    n = p["toy_n_typical"] + p["toy_n_outliers"]
    _need(
        max(p["toy_batch_sizes"]) <= n,
        f"toy_batch_sizes={p['toy_batch_sizes']!r}: a batch cannot exceed the {n} toy samples",
    )
    _need(
        p["default_batch_size"] in p["toy_batch_sizes"] and p["default_lr"] in p["toy_lrs"],
        f"default_batch_size={p['default_batch_size']!r} / default_lr={p['default_lr']!r} must "
        f"be among toy_batch_sizes={p['toy_batch_sizes']} / toy_lrs={p['toy_lrs']}",
    )
    _need(
        set(p["clean_reference"]) <= set(p["archs"]),
        f"clean_reference={p['clean_reference']!r} must be drawn from archs={p['archs']!r}",
    )
    for key in ("n_train", "epochs"):
        _need(
            set(p["archs"]) <= set(p[key]),
            f"{key}={p[key]!r} must give a value for each of archs={p['archs']!r}",
        )
    size = DATASET_SIZES[p["dataset"]]
    for a in p["archs"]:
        _need(
            p["n_train"][a] <= size,
            f"n_train[{a}]={p['n_train'][a]} is out of range; allowed: "
            f"an integer in [10, {size}] (the {p['dataset']} training set)",
        )
        _need(
            p["batch_size"] <= p["n_train"][a],
            f"batch_size={p['batch_size']} exceeds n_train[{a}]={p['n_train'][a]}",
        )


def _cross_05(p: dict) -> None:
    _cross_rare(p, "rare" in p["corruption"])
    _need(
        bool({"flip", "ood"} & set(p["corruption"])),
        f"corruption={p['corruption']!r} must include 'flip' or 'ood': the setting is chosen on "
        "them (a rare kind is judged only, never chosen on)",
    )
    shared = sorted(set(p["selection_seeds"]) & set(p["seeds"]))
    _need(
        not shared,
        f"selection_seeds={p['selection_seeds']!r} must be disjoint from seeds="
        f"{p['seeds']!r} (nothing is chosen on the seeds it is reported on); shared: {shared}",
    )
    m = p["lira_frontier_shadows"]
    _need(
        m == 0 or (m >= 4 and m % 2 == 0),
        f"lira_frontier_shadows={m!r} is not allowed; allowed: 0 "
        "(no LiRA frontier) or an even number >= 4 (a balanced keep matrix, each shadow the target "
        "of the others)",
    )
    _need(
        p["frontier_tau"] in p["taus"],
        f"frontier_tau={p['frontier_tau']!r} must be one of taus={p['taus']!r}",
    )
    weak = [w for w in p["strong_weight_decays"] if w <= p["weight_decay"]]
    _need(
        not weak,
        f"strong_weight_decays={p['strong_weight_decays']!r} must all exceed "
        f"weight_decay={p['weight_decay']!r}; not stronger: {weak}",
    )
    if p["lira"] and m:  # LiRA's frontier trains with notebook 03's recipe: stronger than 03's too
        wd03 = resolve("03_lira", {"dataset": p["dataset"], "budget": p["budget"]}).values[
            "weight_decay"
        ]
        weak = [w for w in p["strong_weight_decays"] if w <= wd03]
        _need(
            not weak,
            f"strong_weight_decays={p['strong_weight_decays']!r} must all exceed notebook 03's "
            f"weight_decay={wd03!r} (LiRA's frontier trains with 03's recipe); not stronger: {weak}",
        )
    size = DATASET_SIZES.get(p["dataset"])
    _need(
        size is None or p["n_train"] + p["n_val"] <= size,
        f"n_val={p['n_val']} is out of range; allowed: an integer in [1, {size} - n_train = "
        f"{(size or 0) - p['n_train']}] (validation images are held out of the {p['dataset']} "
        "training set, the selection subsets drawn from the rest)",
    )


CROSS: dict[str, Callable[[dict], None]] = {
    "01_forced_memorization": _cross_01,
    "02_gradient_dynamics": _cross_02,
    "03_lira": _cross_03,
    "04_theory": _cross_04,
    "05_mitigation": _cross_05,
}

# training-set sizes, to check n_train before any data is loaded
DATASET_SIZES = {
    "mnist": 60_000,
    "fashion_mnist": 60_000,
    "cifar10": 50_000,
    "cifar100": 50_000,
    "mnist_subset": 4_000,
}


def validate(notebook: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Check every value of `notebook` against its declaration and the cross-field rules; return
    the values normalized (a single corruption becomes a one-element list, and so on)."""
    decl = DECLARATIONS[notebook]
    _need(
        set(values) == set(decl),
        f"notebook {notebook}: parameters {sorted(set(values) ^ set(decl))} "
        "do not match the declaration in bnpaper.params",
    )
    out = {k: decl[k](k, v) for k, v in values.items()}
    for k in ("norms", "archs"):
        if k in out:
            out[k] = list(out[k])
    _cross_common(out)
    CROSS[notebook](out)
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
    """The literal defaults of a notebook's `parameters` cell, read from its py:percent source."""
    path = repo_root() / "notebooks" / f"{notebook}.py"
    if not path.exists():
        raise ConfigError(f"notebook={notebook!r} has no source at {path}")
    text = path.read_text()
    start = text.find('tags=["parameters"]')
    if start < 0:
        raise ConfigError(f"{path} has no cell tagged parameters")
    body = text[text.index("\n", start) + 1 :]
    end = body.find("\n# %%")
    return assignments(body if end < 0 else body[:end])


def assignments(source: str) -> dict[str, Any]:
    """The `name = literal` assignments of a code cell (papermill's injected cell, a parameters cell)."""
    out: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def params_file(name: str) -> Path:
    return repo_root() / "params" / f"{name}.yaml"


def read_params_file(path: Path) -> dict[str, dict]:
    """A params file's sections, with every key checked: an unknown section, or a key that no
    notebook (for `all`) or not that notebook declares, is one error naming the file and the key."""
    if not path.exists():
        raise ConfigError(f"parameter file {path} does not exist")
    doc = load_yaml(path.read_text()) or {}
    _need(
        isinstance(doc, dict), f"{path} must hold a mapping of sections, got {type(doc).__name__}"
    )
    everything = set().union(*DECLARATIONS.values())
    for section, body in doc.items():
        _need(
            section == "all" or section in NOTEBOOKS,
            f"{path}: unknown section {section!r}; "
            f"allowed: ['all', {', '.join(repr(n) for n in NOTEBOOKS)}]",
        )
        _need(isinstance(body, dict), f"{path}: section {section!r} must be a mapping")
        known = everything if section == "all" else set(DECLARATIONS[section])
        unknown = sorted(set(body) - known)
        _need(
            not unknown,
            f"{path}: unknown parameter(s) {unknown} in section {section!r}; "
            f"known: {sorted(known)}",
        )
        _need(
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


def resolve(notebook: str, explicit: Mapping[str, Any] | None = None) -> Resolved:
    """Defaults, then params/<dataset>.yaml, then params/<budget>.yaml, then `explicit` (whose
    dataset and budget choose the files); unknown keys and bad values are one error."""
    notebook = notebook_name(notebook)
    decl = DECLARATIONS[notebook]
    explicit = dict(explicit or {})
    unknown = sorted(set(explicit) - set(decl))
    _need(
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
    base = resolve(notebook, {"dataset": values["dataset"], "budget": values["budget"]}).values
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
