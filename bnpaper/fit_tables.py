"""How well each compared norm fitted, per committed configuration of the fair protocol: the
learning rate it trained with, how many runs reached the fit level, the epochs they used and
their clean training and test accuracy, beside BN's (the report's table "Each norm's fit").
Read from results.json: 01's `epochs_used` and `recipes`, 03's `recipes.fit` and `per_model`."""

from __future__ import annotations

import math
import re
from pathlib import Path

from .results_tables import collect, fmt_number, table_cell
from .stats import t_paired_diff

FIT_NOTE = (
    "Every configuration run under the fair protocol (each norm its own learning rate, every "
    "model trained until its clean training accuracy reaches the fit level or the epoch cap). "
    "01: one row per corruption kind and norm, over its seeds; 03: one row per outlier mix and "
    "norm, over its shadow models of every pool. *fitted*: runs that reached the fit level "
    "(the rest hit the cap: censored). *test vs BN*: clean test accuracy minus BN's, in "
    "points, with its 95% t interval over the paired replicates in brackets (01: the seeds, "
    "each norm's final model; 03: the pools, each pool's mean over its shadow models) where "
    "both norms hold the same two or more replicates, every value finite (03: every pool as "
    "many shadows); else the difference of the means alone (03's rare row always). Each "
    "configuration's run time: the report's table of what it used. *lr*: with the weight "
    "decay each norm chose beside it where the configuration searched one (`wd_grid`)."
)

HEAD = (
    "| nb | configuration (folder) | architecture | data | norm | lr | fitted | epochs: mean (max) "
    "| clean train | clean test | test vs BN |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def norm_lr(lrs: dict, norm: str) -> float | None:
    """The learning rate `norm` trained with: its recipe's, or for the effective-lr arm
    ("none x2") that multiple of no-BN's."""
    if norm in lrs:
        return float(lrs[norm])
    arm = re.fullmatch(r"(\S+) x([0-9.]+)", norm)
    if arm and arm.group(1) in lrs:
        return float(arm.group(2)) * float(lrs[arm.group(1)])
    return None


def _lr(lr: float | None) -> str:
    return "-" if lr is None else f"{lr:.3g}"


def _wd(recipes: dict, norm: str) -> str:
    """The weight decay `norm` chose, as ", wd 0.0015" (the effective-lr arm "none x2": no-BN's),
    where the configuration searched one (`recipes.weight_decay`, a dict per norm); else ""."""
    wd = recipes.get("weight_decay")
    own = norm.split(" x")[0]
    if not isinstance(wd, dict) or own not in wd:
        return ""
    return f", wd {float(wd[own]):g}"


def _points(x: float | None, ref: float | None) -> str:
    if x is None or ref is None:
        return "-"
    return f"{100 * (x - ref):+.1f}"


def _paired_points(runs: dict, ref: dict) -> str | None:
    """`runs` minus `ref` in points with its 95% t interval over the replicates both hold (keys:
    a seed or a pool; values: a clean test accuracy); None unless both hold the same two or more
    replicates, every value finite."""
    if set(runs) != set(ref) or len(runs) < 2:
        return None
    keys = sorted(runs)
    a, b = [runs[k] for k in keys], [ref[k] for k in keys]
    if not all(x is not None and math.isfinite(x) for x in a + b):
        return None
    return t_paired_diff(a, b).fmt(digits=1, scale=100.0)


def _final_test(res: dict, kind: str, norm: str) -> dict:
    """{seed: final clean test accuracy} of one corruption kind and norm, from 01's histories."""
    out = {}
    for key, h in (res.get("histories") or {}).items():
        k, n, seed = key.rsplit("/", 2)
        if k == kind and n == norm and h.get("test_acc"):
            out[seed] = h["test_acc"][-1]
    return out


def _pool_gap(pools: dict, mix: str, norm: str) -> str | None:
    """03's *test vs BN* over the paired pools (each pool's mean over its shadow models), when
    every pool of both norms holds the same number of shadows, each accuracy finite (then the
    mean of the pools' differences is the difference of the means over every shadow); else
    None."""
    a, b = pools.get(f"{mix}/{norm}", {}), pools.get(f"{mix}/bn", {})
    every = [*a.values(), *b.values()]
    if len({len(v) for v in every}) != 1 or not all(
        x is not None and math.isfinite(x) for v in every for x in v
    ):
        return None
    return _paired_points({k: _mean(v) for k, v in a.items()}, {k: _mean(v) for k, v in b.items()})


def _mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else None


def _row(cells: tuple) -> str:
    return "| " + " | ".join(table_cell(c) for c in cells) + " |"


def forced_rows(label: str, res: dict) -> list[str]:
    """01's rows: per corruption kind and norm, from `epochs_used` (means over seeds)."""
    lrs = res["recipes"]["lr"]
    arch = res.get("params", {}).get("arch", "")
    rows = []
    for kind, norms in res["epochs_used"].items():
        bn = norms.get("bn", {}).get("test_acc")
        for norm, e in norms.items():
            rows.append(
                _row(
                    (
                        "01",
                        label,
                        arch,
                        kind,
                        norm,
                        _lr(norm_lr(lrs, norm)) + _wd(res["recipes"], norm),
                        f"{e['fitted']} of {e['runs']}",
                        f"{fmt_number(e['mean'], 1)} ({fmt_number(e['max'], 0)})",
                        fmt_number(e.get("train_acc")),
                        fmt_number(e.get("test_acc")),
                        "-" if norm == "bn" else _gap(res, kind, norm, e.get("test_acc"), bn),
                    )
                )
            )
    return rows


def _gap(res: dict, kind: str, norm: str, acc: float | None, bn: float | None) -> str:
    """01's *test vs BN*: over the paired seeds with an interval, else the difference of means."""
    paired = _paired_points(_final_test(res, kind, norm), _final_test(res, kind, "bn"))
    return paired or _points(acc, bn)


def lira_rows(label: str, res: dict) -> list[str]:
    """03's rows: per outlier mix and norm, over the shadow models of every pool."""
    rec = res["recipes"]
    lrs, arch = rec["lr"], res.get("params", {}).get("arch", "")
    per_model = res.get("per_model", {})
    test: dict[str, list[float]] = {}
    pools: dict[str, dict[str, list[float]]] = {}  # {mix/norm: {pool: its shadows' accuracies}}
    for key, m in per_model.items():
        mix, pool, norm = key.split("/")
        test.setdefault(f"{mix}/{norm}", []).extend(m.get("test_acc", []))
        pools.setdefault(f"{mix}/{norm}", {})[pool] = list(m.get("test_acc", []))
    rare = res.get("rare") or {}
    for norm, acc in (rare.get("acc") or {}).items():  # the rare pools' mean clean test accuracy
        test[f"rare/{norm}"] = [acc]
    rows = []
    for key, f in rec["fit"].items():
        mix, norm = key.split("/")
        bn = _mean(test.get(f"{mix}/bn", []))
        acc = _mean(test.get(key, []))
        rows.append(
            _row(
                (
                    "03",
                    label,
                    arch,
                    mix if mix == "rare" else f"{100 * float(mix):g}% mix",
                    norm,
                    _lr(norm_lr(lrs, norm)),
                    f"{f['models'] - f['censored']} of {f['models']}",
                    f"{fmt_number(f['epochs_mean'], 1)} ({fmt_number(f['epochs_max'], 0)})",
                    fmt_number(f.get("train_clean_acc")),
                    fmt_number(acc),
                    "-" if norm == "bn" else _pool_gap(pools, mix, norm) or _points(acc, bn),
                )
            )
        )
    return rows


def fit_table(root: Path | None = None) -> str:
    """The table of every fair-protocol configuration of notebooks 01 and 03 ("" if none)."""
    rows = []
    for nb, label, res in collect(root, every_configuration=True):
        rec = res.get("recipes")
        if not isinstance(rec, dict) or rec.get("protocol") != "fair":
            continue
        if nb.startswith("01") and res.get("epochs_used"):
            rows += forced_rows(label, res)
        elif nb.startswith("03") and rec.get("fit"):
            rows += lira_rows(label, res)
    return HEAD + "\n" + "\n".join(rows) if rows else ""
