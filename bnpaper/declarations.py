"""Each notebook's parameters: what every value may be, and the rules between values.

`DECLARATIONS[notebook]` maps each parameter of a notebook's parameters cell to its rule (a
check that names the key, the bad value and what is allowed); `CROSS[notebook]` checks the values
together; `check_values` applies both. Resolving values (defaults, params files) and the rules
between notebooks are `params`' job.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from .config import (
    BUDGETS,
    ConfigError,
    check_choice,
    check_choices,
    check_device,
    check_int_list,
    check_number,
    require,
)
from .data import DATASETS, OOD_SOURCES, check_rare, rare_count
from .models import ARCHS, NORMS


# ---------------------------------------------------------------- rules
Rule = Callable[[str, Any], Any]


def choice(*allowed: Any) -> Rule:
    """One of `allowed`."""
    return lambda name, v: check_choice(name, v, allowed)


def flag() -> Rule:
    """True or False."""
    return choice(True, False)


def number(lo=None, hi=None, integer=False, lo_open=False, hi_open=False) -> Rule:
    """A number (an int if `integer`) in the interval from `lo` to `hi`."""
    return lambda name, v: check_number(name, v, lo, hi, integer, lo_open, hi_open)


def int_list(lo: int = 0, min_len: int = 1) -> Rule:
    """A list of at least `min_len` distinct integers >= `lo`."""
    return lambda name, v: check_int_list(name, v, lo, min_len)


def choice_list(allowed: Sequence, min_len: int = 1) -> Rule:
    """A list of at least `min_len` distinct members of `allowed`."""
    return lambda name, v: check_choices(name, v, allowed, min_len)


def one_or_list(allowed: Sequence) -> Rule:
    """A member of `allowed` or a list of distinct members (e.g. 'flip' or ['flip', 'ood'])."""
    return lambda name, v: check_choices(name, [v] if isinstance(v, str) else v, allowed)


def number_list(lo=None, hi=None, min_len: int = 1, lo_open=False, hi_open=False) -> Rule:
    """A list of at least `min_len` distinct numbers in the interval from `lo` to `hi`."""

    def rule(name, v):
        if isinstance(v, (str, bytes, dict)) or not isinstance(v, Sequence) or len(v) < min_len:
            raise ConfigError(f"{name}={v!r} must be a list of at least {min_len} numbers")
        for x in v:
            check_number(name, x, lo, hi, lo_open=lo_open, hi_open=hi_open)
        if len(set(v)) != len(v):
            raise ConfigError(f"{name}={list(v)!r} must not repeat values")
        return list(v)

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
DATASET_SIZES = {name: spec.n_train for name, spec in DATASETS.items()}  # checked before loading
_DATA = {
    "dataset": choice(*DATASETS),
    "budget": choice(*BUDGETS),
    "download": flag(),
    "device": check_device,  # cuda needs a GPU here
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
_TRAINER = {"trainer": choice("auto", "plain", "packed")}  # packed: LeNets only (_cross_trainer)
_RARE = {"rare_share": number(), "rare_class": number(integer=True)}  # ranges: _cross_rare
# each norm's recipe (bnpaper.recipes): the protocol, the learning-rate search, training to fit
_FAIR = {
    "protocol": choice("fair", "paper"),
    "lr_grid": number_list(0.0, 10.0, min_len=5, lo_open=True),  # rule: lr_choice.check_grid
    "n_val": number(1, None, integer=True),
    "lr_seeds": int_list(0),
    "fit_level": number(0.0, 1.0, lo_open=True),
}

DECLARATIONS: dict[str, dict[str, Rule]] = {
    "01_forced_memorization": {
        **_DATA,
        **_TRAIN,
        **_NORMS,
        "corruption": one_or_list(("flip", "ood", "rare")),
        **_RARE,
        "clean_level": number(0.0, 1.0, lo_open=True, hi_open=True),
        **_TRAINER,
        **_FAIR,
        "fit_levels": number_list(0.0, 1.0, lo_open=True),  # each at most fit_level: _cross_01
        "effective_lr": number_list(0.0, 100.0, min_len=0, lo_open=True),
        "lr_curve": choice_list(("flip", "ood", "rare"), min_len=0),  # within corruption: _cross_01
        "wd_grid": number_list(0.0, 1.0, min_len=0),  # rule: lr_choice.check_wd_grid (_cross_fair)
    },
    "02_gradient_dynamics": {
        **_DATA,
        **_TRAIN,
        **_NORMS,
        "corruption": choice("flip", "ood"),
        "probe_epochs": int_list(0, min_len=2),
        "n_probe": number(10, None, integer=True),
        "probe_batches": number(1, None, integer=True),
        **_FAIR,
        "fit_levels": number_list(0.0, 1.0, lo_open=True),  # each at most fit_level: _cross_02
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
        **_TRAINER,
        "pack_size": number(1, 64, integer=True),
        "bn_query_mode": choice("eval", "train-batch"),
        "sigma_floor": number(0.0, 10.0, lo_open=True),
        "rare_pool": flag(),
        **_RARE,
        "size_sweep": int_list(2, min_len=0),
        "protocol": choice("fair", "paper"),  # fair: each norm its lr, to fit (recipes.py)
        "lr_grid": number_list(0.0, 10.0, lo_open=True),
        "n_val": number(1, None, integer=True),
        "lr_seeds": int_list(0),
        "fit_level": number(0.0, 1.0, lo_open=True),
        "fit_levels": number_list(0.0, 1.0, lo_open=True, min_len=0),  # at most fit_level
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
        **_TRAINER,
        **_FAIR,  # BN's own lr per architecture, trained to fit (_cross_04: per arch)
        "tracking_decays": number_list(0.0, 1.0, min_len=0),  # [] or >= 3 values: _cross_04
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
        "lira_shadows": number(4, None, integer=True),
        "lira_seeds": int_list(0),
        "lira_lams": number_list(0.0, None, min_len=0, lo_open=True),
        "lower_lrs": number_list(0.0, 1.0, min_len=0, lo_open=True, hi_open=True),
        **_FAIR,
        **_TRAINER,
    },
}


def _cross_common(p: dict) -> None:
    if "norms" in p:
        require(
            "bn" in p["norms"] and "none" in p["norms"],
            f"norms={p['norms']!r} must include 'bn' and 'none' (the paper's comparison)",
        )
    if "batch_size" in p and "n_train" in p and isinstance(p["n_train"], int):
        shadows = "n_shadows" in p  # a shadow trains on half of n_train
        limit = p["n_train"] // 2 if shadows else p["n_train"]
        require(
            p["batch_size"] <= limit,
            f"batch_size={p['batch_size']} is out of range; allowed: an integer in [2, {limit}] "
            f"({'n_train/2, the size of a shadow training set' if shadows else 'n_train'})",
        )
    if isinstance(p.get("n_train"), int) and "dataset" in p:  # drawn from the training set
        size = DATASET_SIZES[p["dataset"]]
        require(
            p["n_train"] <= size,
            f"n_train={p['n_train']} is out of range; allowed: an integer "
            f"in [10, {size}] (the {p['dataset']} training set)",
        )


def _cross_trainer(p: dict) -> None:
    archs = p.get("archs", [p.get("arch")])
    require(
        not (p["trainer"] == "packed" and set(archs) != {"lenet"}),
        f"trainer='packed' needs arch='lenet', got {'archs' if 'archs' in p else 'arch'}="
        f"{p.get('archs', p.get('arch'))!r}",
    )


def _cross_02(p: dict) -> None:
    _cross_fair(p)
    pe = p["probe_epochs"]
    require(
        sorted(pe) == list(pe) and max(pe) <= p["epochs"],
        f"probe_epochs={pe!r} must be increasing and within 0..epochs={p['epochs']}",
    )
    require(
        p["n_probe"] <= p["n_train"],
        f"n_probe={p['n_probe']} is out of range; allowed: an "
        f"integer in [10, n_train={p['n_train']}]",
    )
    most = p["n_train"] // p["batch_size"]
    require(
        p["probe_batches"] <= most,
        f"probe_batches={p['probe_batches']} is out of range; "
        f"allowed: an integer in [1, n_train // batch_size = {most}]",
    )


def _cross_rare(p: dict, used: bool) -> None:
    """The rare class's share lies in (0, its natural share 1/classes] and the class exists;
    where a rare subset is drawn (`used`), the share leaves at least one rare sample in it."""
    check_rare(p["rare_share"], p["rare_class"], DATASETS[p["dataset"]].n_classes)
    require(
        not used or rare_count(p["rare_share"], p["n_train"]) >= 1,
        f"rare_share={p['rare_share']!r} of n_train={p['n_train']} rounds to no rare sample; "
        f"allowed: rare_share >= {0.5 / p['n_train']:g} at this n_train",
    )


def _val_fits(p: dict, used: int, used_name: str, what: str) -> None:
    """`n_val` held-out validation images leave `used` training images (`used_name` in words)
    room in the dataset's training set; `what` draws its subsets from the rest."""
    size = DATASET_SIZES[p["dataset"]]
    require(
        used + p["n_val"] <= size,
        f"n_val={p['n_val']} is out of range; allowed: an integer in [1, {size} - {used_name} = "
        f"{size - used}] (validation images are held out of the {p['dataset']} training set, "
        f"{what} drawn from the rest)",
    )


def _cross_fair(p: dict, search_n: int | None = None, search_name: str = "n_train") -> None:
    """The fair protocol's search: a grid by claims.yaml's rule (`lr_choice.check_grid`), the
    matched-fit `fit_levels` (where declared) at most `fit_level`, and validation images that
    leave the search's subsets (`search_n` images, default n_train) room; a `wd_grid` (where
    declared) only with it, by `lr_choice.check_wd_grid`."""
    require(
        not p.get("wd_grid") or p.get("protocol") == "fair",
        f"wd_grid={p.get('wd_grid')!r} with protocol={p.get('protocol')!r}; allowed: [] (the "
        "paper's protocol searches nothing: every norm trains with weight_decay) or "
        "protocol='fair'",
    )
    if "protocol" not in p or p["protocol"] != "fair":
        return
    from .lr_choice import check_grid, check_wd_grid

    check_grid("lr_grid", p["lr_grid"])
    if p.get("wd_grid"):
        check_wd_grid("wd_grid", p["wd_grid"], p["weight_decay"])
    levels = p.get("fit_levels", [])  # none where a notebook declares none (05)
    high = [x for x in levels if x > p["fit_level"]]
    require(
        not high,
        f"fit_levels={levels!r} has {high} above fit_level={p['fit_level']!r}; "
        "allowed: levels at most fit_level (a model stops there: no reading beyond it)",
    )
    used = p["n_train"] if search_n is None else search_n
    _val_fits(p, used, search_name, "the learning-rate search's subsets")


def _cross_01(p: dict) -> None:
    _cross_rare(p, "rare" in p["corruption"])
    _cross_trainer(p)
    _cross_fair(p)
    if p["protocol"] == "fair":
        fast = [f for f in p["effective_lr"] if f * max(p["lr_grid"]) > 10.0]
        require(
            not fast,
            f"effective_lr={p['effective_lr']!r}: {fast} times the largest lr of lr_grid exceeds "
            "10; allowed: factors whose raised learning rate stays at most 10",
        )
        kinds = [p["corruption"]] if isinstance(p["corruption"], str) else p["corruption"]
        extra = [k for k in p["lr_curve"] if k not in kinds]
        require(
            not extra,
            f"lr_curve={p['lr_curve']!r} has {extra}, not in corruption={p['corruption']!r}; "
            "allowed: kinds that corruption trains (the curve reuses their subsets), or []",
        )


def _cross_03(p: dict) -> None:
    _cross_rare(p, p["rare_pool"])
    same = [x for x in p["fit_levels"] if x >= p["fit_level"]]
    require(
        p["protocol"] != "fair" or not same,
        f"fit_levels={p['fit_levels']!r} has {same}, not below fit_level={p['fit_level']!r}; "
        "allowed: levels below fit_level (the end of training is read at fit_level already)",
    )
    require(
        p["n_shadows"] % 2 == 0, f"n_shadows={p['n_shadows']} must be even (balanced keep matrix)"
    )
    _cross_trainer(p)
    _cross_size_sweep(p)
    _cross_fair(p, p["n_train"] // 2, "n_train // 2")  # the search trains on a shadow's half


SIZE_SWEEP_MIN = (4, 8)  # at least 4 pool sizes, the largest at least 8x the smallest


def _cross_size_sweep(p: dict) -> None:
    """03's size sweep: [] (skipped) or at least 4 increasing pool sizes spanning at least 8x,
    each at most the training set and at least 2 batches (a shadow trains on half the pool), the
    largest the main pools' n_train (the headline comes from the largest pool measured)."""
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
            (f"largest {max(sizes)} != n_train={p['n_train']}", max(sizes) != p["n_train"]),
        )
        if bad
    ]
    require(
        not wrong,
        f"size_sweep={list(sizes)!r} is not allowed ({'; '.join(wrong)}); allowed: [] "
        f"(no sweep) or at least {k} increasing pool sizes spanning at least {span}x (largest >= "
        f"{span} x smallest), each an integer in [2 x batch_size = {lo}, {hi}] (the "
        f"{p['dataset']} training set), the largest n_train (the main pools: the headline is the "
        "largest pool measured, the smaller ones its trend)",
    )


def _cross_04(p: dict) -> None:
    _cross_trainer(p)
    n = p["toy_n_typical"] + p["toy_n_outliers"]
    require(
        max(p["toy_batch_sizes"]) <= n,
        f"toy_batch_sizes={p['toy_batch_sizes']!r}: a batch cannot exceed the {n} toy samples",
    )
    require(
        p["default_batch_size"] in p["toy_batch_sizes"] and p["default_lr"] in p["toy_lrs"],
        f"default_batch_size={p['default_batch_size']!r} / default_lr={p['default_lr']!r} must "
        f"be among toy_batch_sizes={p['toy_batch_sizes']} / toy_lrs={p['toy_lrs']}",
    )
    require(
        set(p["clean_reference"]) <= set(p["archs"]),
        f"clean_reference={p['clean_reference']!r} must be drawn from archs={p['archs']!r}",
    )
    for key in ("n_train", "epochs"):
        require(
            set(p["archs"]) <= set(p[key]),
            f"{key}={p[key]!r} must give a value for each of archs={p['archs']!r}",
        )
    size = DATASET_SIZES[p["dataset"]]
    for a in p["archs"]:
        require(
            p["n_train"][a] <= size,
            f"n_train[{a}]={p['n_train'][a]} is out of range; allowed: "
            f"an integer in [10, {size}] (the {p['dataset']} training set)",
        )
        require(
            p["batch_size"] <= p["n_train"][a],
            f"batch_size={p['batch_size']} exceeds n_train[{a}]={p['n_train'][a]}",
        )
        _cross_fair({**p, "n_train": p["n_train"][a]}, search_name=f"n_train[{a}]")
    decays = p["tracking_decays"]
    require(
        not decays or len(set(decays)) >= 3,
        f"tracking_decays={decays!r} has fewer than 3 distinct values; allowed: [] (no study) "
        "or at least 3 distinct weight decays (a rank correlation over the decays)",
    )
    require(
        not decays or "lenet" in p["archs"],
        f"tracking_decays={decays!r} needs 'lenet' in archs={p['archs']!r} (the weight-decay "
        "study trains BN LeNets with LeNet's recipe); allowed: add 'lenet' or tracking_decays=[]",
    )


def _cross_05(p: dict) -> None:
    _cross_rare(p, "rare" in p["corruption"])
    _cross_trainer(p)
    require(
        bool({"flip", "ood"} & set(p["corruption"])),
        f"corruption={p['corruption']!r} must include 'flip' or 'ood': the setting is chosen on "
        "them (a rare kind is judged only, never chosen on)",
    )
    shared = sorted(set(p["selection_seeds"]) & set(p["seeds"]))
    require(
        not shared,
        f"selection_seeds={p['selection_seeds']!r} must be disjoint from seeds="
        f"{p['seeds']!r} (nothing is chosen on the seeds it is reported on); shared: {shared}",
    )
    m = p["lira_shadows"]
    require(
        m >= 4 and m % 2 == 0,
        f"lira_shadows={m!r} is not allowed; allowed: an even number >= 4 (a balanced keep "
        "matrix, each shadow the target of the others)",
    )
    stray = [x for x in p["lira_lams"] if x not in p["lams"]]
    require(
        not stray,
        f"lira_lams={p['lira_lams']!r} must be taken from lams={p['lams']!r}; not in lams: {stray}",
    )
    require(
        p["frontier_tau"] in p["taus"],
        f"frontier_tau={p['frontier_tau']!r} must be one of taus={p['taus']!r}",
    )
    weak = [w for w in p["strong_weight_decays"] if w <= p["weight_decay"]]
    require(
        not weak,
        f"strong_weight_decays={p['strong_weight_decays']!r} must all exceed "
        f"weight_decay={p['weight_decay']!r}; not stronger: {weak}",
    )
    _val_fits(p, p["n_train"], "n_train", "the selection subsets")


CROSS: dict[str, Callable[[dict], None]] = {
    "01_forced_memorization": _cross_01,
    "02_gradient_dynamics": _cross_02,
    "03_lira": _cross_03,
    "04_theory": _cross_04,
    "05_mitigation": _cross_05,
}


def check_values(notebook: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Check every value of `notebook` against its declaration and the cross-field rules; return
    the values normalized (a single corruption becomes a one-element list, and so on)."""
    decl = DECLARATIONS[notebook]
    require(
        set(values) == set(decl),
        f"notebook {notebook}: parameters {sorted(set(values) ^ set(decl))} "
        "do not match the declaration in bnpaper.declarations",
    )
    out = {k: decl[k](k, v) for k, v in values.items()}
    for k in ("norms", "archs"):
        if k in out:
            out[k] = list(out[k])
    _cross_common(out)
    CROSS[notebook](out)
    return out
