"""Prose builders: the sentences and markdown tables the notebooks print, kept apart from the
compute that produces the numbers (each takes numbers or frozen results, returns a string)."""

from __future__ import annotations

# ---------------------------------------------------------------- shared: tables and intervals


def markdown_table(header: list[str], rows: list[list]) -> str:
    """A Markdown table; floats with 3 decimals, None as 'n/a'."""

    def cell(x) -> str:
        if x is None:
            return "n/a"
        return f"{x:.3f}" if isinstance(x, float) else str(x)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows])


def interval(e, digits: int = 3) -> str:
    """An estimate (`stats.Estimate`) as 'value [lo, hi]' (only the value where the interval is
    not finite)."""
    import math

    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return f"{e.value:.{digits}f}"
    return f"{e.value:.{digits}f} [{e.lo:.{digits}f}, {e.hi:.{digits}f}]"


# ------------------------------------------------------------- 01 forced memorization, 02 gradients


def _never(v: float, digits: int = 3) -> str:
    """A number, or "never" for a level that was not reached (inf or NaN)."""
    return f"{v:.{digits}f}" if v == v and abs(v) != float("inf") else "never"


def memorization_table(summary: dict, level: float) -> str:
    """Notebook 01's markdown table of `summary` {"corruption/norm": Runs.summary(...)}."""
    from .plots import label

    rows = []
    for key, s in summary.items():
        corr, norm = key.split("/")
        ref = {"flip": s["noisy_true_acc"], "rare": s["rare_heldout_acc"]}
        cells = [
            corr,
            label(norm),
            f"{_never(s['epochs_to_50'], 1)} / {_never(s['epochs_to_90'], 1)}",
            _never(s["final_memorization"]),
            _never(s["subset_acc"]),
            _never(ref[corr]) if corr in ref else "n/a",
            _never(s["epochs_to_clean_level"], 1),
            _never(s["memorization_at_clean_level"]),
            _never(s["clean_train_acc"]),
            _never(s["clean_test_acc"]),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    head = [
        "corruption",
        "model",
        "epochs to 50% / 90% memorization",
        "final memorization",
        "subset acc. (training labels)",
        "flip: true-label acc.; rare: held-out acc.",
        f"epochs to {level:.0%} clean train acc.",
        "memorization there",
        "clean train acc.",
        "clean test acc.",
    ]
    return "\n".join(["| " + " | ".join(head) + " |", "|---" * len(head) + "|", *rows])


def corruption_titles(
    atypical: dict, n_train: int, ood_source: str, rare_share: float, n_classes: int
) -> dict[str, str]:
    """Notebook 01's panel title per corruption, with its number of atypical samples
    ({corruption: count})."""
    return {
        "flip": f"label flips: {atypical.get('flip')} of {n_train} training labels",
        "ood": f"OOD images ({ood_source}), random labels: {atypical.get('ood')} of {n_train}",
        "rare": (
            f"rare class: {atypical.get('rare')} of {n_train} ({rare_share:.0%}; "
            f"natural {1 / n_classes:.0%})"
        ),
    }


def accuracy_legends(acc: dict) -> dict[str, str]:
    """{norm: legend label with the model's clean test accuracy} from {norm: accuracy}."""
    from .plots import label

    return {n: f"{label(n)} (clean test acc. {a:.2f})" for n, a in acc.items()}


def accuracy_line(acc: dict, norms: tuple[str, ...] | list[str]) -> str:
    """'clean test acc.: BN 0.91, no-BN 0.88' for the models `norms` of {norm: accuracy}."""
    from .plots import label

    return "clean test acc.: " + ", ".join(f"{label(n)} {acc[n]:.2f}" for n in norms)


def controls_reading(
    rows: list, prefix: str = "01.control.", key: str = "corruption", effect: str = "it"
) -> list[str]:
    """Per case (a row's field `key`: the corruption in 01, the mix and subgroup in 03), what the
    two controls say about which part of BN carries its effect, from their verdict rows
    `prefix`* (`claims.Verdict`, after any multiple-testing correction)."""
    from .claims import fails, holds

    controls = [r for r in rows if r.id.startswith(prefix)]
    out = []
    for case in dict.fromkeys(r.fields[key] for r in controls):
        v = {r.id.split(".")[-1]: r.verdict for r in controls if r.fields[key] == case}
        gn, na = v.get("gn"), v.get("bn_noaffine")
        yes = {k: holds(x) for k, x in (("gn", gn), ("na", na)) if x is not None}
        no = {k: fails(x) for k, x in (("gn", gn), ("na", na)) if x is not None}
        if yes.get("gn") and no.get("na"):
            says = (
                f"the learned gamma carries {effect} (GroupNorm raises {effect} without batch "
                "coupling; fixed-gamma BN does not)"
            )
        elif yes.get("na") and no.get("gn"):
            says = (
                f"batch coupling carries {effect} (BN with gamma fixed raises {effect}; "
                "GroupNorm's learned gamma does not)"
            )
        elif yes.get("gn") and yes.get("na"):
            says = (
                f"either part alone raises {effect} (GroupNorm's learned gamma and BN's batch "
                "coupling)"
            )
        elif no.get("gn") and no.get("na"):
            says = f"neither part alone raises {effect} by the minimum effect"
        else:
            says = "not separated at this budget"
        out.append(
            f"{case}: GroupNorm {gn or 'not run'}, BN with gamma fixed {na or 'not run'} -> {says}"
        )
    return out


PROBE_MODES = {
    "batch": "batch statistics (exact, as in training)",
    "eval": "running statistics (eval mode)",
    "batch_fixed": "batch statistics held fixed (theory)",
}  # notebook 02's probe definitions in words


def probe_counts(noisy: list[int], clean: list[int]) -> str:
    """How many noisy and clean probe samples each run's medians are taken over, for a figure:
    '26 noisy, 26 clean' or, when the runs differ, '22-30 noisy, 22-30 clean' (per run)."""

    def span(counts: list[int]) -> str:
        low, high = min(counts), max(counts)
        return f"{low}" if low == high else f"{low}-{high}"

    return f"{span(noisy)} noisy, {span(clean)} clean"


def gradient_reading(summary: dict, acc: dict, mem: dict) -> list[str]:
    """Notebook 02's reading lines from `grad_analysis.summary` and the final clean test accuracy
    and memorization per norm: each model's noisy/clean ratio, its ratio per parameter group, and
    how far holding the batch statistics fixed moves the norms (BN-like models)."""
    from .plots import label

    out = []
    for n, r in summary["ratio"].items():
        out.append(
            f"- {label(n)}: median noisy/clean norm ratio {r['value']:.1f} "
            f"[{r['lo']:.1f}, {r['hi']:.1f}] (clean test acc {acc[n]:.2f}, final memorization "
            f"{mem[n]:.2f})"
        )
    for n, by in summary["ratio_by_group"].items():
        groups = ", ".join(f"{g} {v['value']:.1f}" for g, v in by.items())
        out.append(f"- {label(n)}, noisy/clean ratio by parameter group: {groups}")
    for n, d in summary["fixed_over_batch_median"].items():
        rf = summary["ratio_batch_fixed"][n]
        out.append(
            f"- {label(n)} with the batch statistics held fixed (the theory's simplification): "
            f"per-sample norms are a median {d['noisy']:.1f}x (noisy) / {d['clean']:.1f}x "
            f"(clean) their 'batch' norms; noisy/clean ratio {rf['value']:.1f} "
            f"[{rf['lo']:.1f}, {rf['hi']:.1f}]"
        )
    return out


def fixed_reading(epochs: list[int], protocol: str) -> str:
    """The label of 02's fixed-epoch rows: the epochs read and that it is the secondary reading
    (the paper's; under the paper's protocol, its protocol)."""
    shown = ", ".join(str(e) for e in epochs if e > 0) or "none"
    who = "the paper's protocol" if protocol == "paper" else "secondary, the paper's reading"
    return f"fixed epochs {shown} ({who})"


def training_lines(record: dict, cap: int) -> list[str]:
    """Notebook 02's lines on how each model trained (`grad_fit.training_record`): its learning
    rate, the epochs each seed used (of the cap) and how many runs hit the cap unfitted."""
    from .plots import label

    out = []
    for n, r in record.items():
        used = "/".join(str(e) for e in r["epochs"])
        level = f"clean training accuracy {r['fit_level']:g}" if r["fit_level"] else "no fit rule"
        out.append(
            f"- {label(n)}: lr {r['lr']:.3g}, epochs used {used} (cap {cap}; {level}), "
            f"censored {sum(r['censored'])} of {len(r['censored'])}"
        )
    return out


def matched_fit_lines(comps: list[dict], other: str = "none") -> list[str]:
    """Notebook 02's matched-fit lines (`grad_fit.comparison_dicts`): per reading, both models'
    clean training and test accuracy and epoch there, the seeds read in both, censored runs."""
    from .plots import label

    out = []
    for c in comps:
        at = c["at"] if isinstance(c["at"], str) else f"clean training accuracy {c['at']:g}"
        a, b = c["accuracies"]["a"], c["accuracies"]["b"]
        if not c["reached_both"]:
            out.append(
                f"- at {at}: no seed read in both ({label('bn')} {c['reached'][0]}, "
                f"{label(other)} {c['reached'][1]} of {c['seeds']}); censored "
                f"{c['censored'][0]} / {c['censored'][1]}"
            )
            continue
        out.append(
            f"- at {at}: {label('bn')} train {a['train_acc']:.3f} / test {a['test_acc']:.3f} "
            f"(epoch {a['epoch']:.1f}), {label(other)} train {b['train_acc']:.3f} / test "
            f"{b['test_acc']:.3f} (epoch {b['epoch']:.1f}); seeds read in both "
            f"{c['reached_both']} of {c['seeds']}, censored {c['censored'][0]} / "
            f"{c['censored'][1]}"
        )
    return out


# ---------------------------------------------------------------- 03 LiRA
LIRA_SHOWN_ATTACKS = ("online", "offline", "loss", "rmia")  # the attacks 03's table shows


def _tpr(tpr: float, n_nonmembers: int, fpr: float) -> str:
    """A TPR at `fpr`, or "n/r" (not resolvable) when fpr < 1 / non-members."""
    return f"{tpr:.3f}" if fpr * n_nonmembers >= 1 else "n/r"


def _ends(e: dict, digits: int = 3) -> str:
    """An interval's ends "[lo, hi]", "n/a" for an end that is not finite (one pool)."""
    import math

    lo, hi = (f"{x:.{digits}f}" if math.isfinite(x) else "n/a" for x in (e["lo"], e["hi"]))
    return f"[{lo}, {hi}]"


def attack_table(table: dict) -> str:
    """Notebook 03's attack table in markdown from its results entry {"mix/norm/group/attack":
    ...} (`exposure.attack_table`): the four attacks of `LIRA_SHOWN_ATTACKS`, AUC with its
    interval over pools (n/a with one), balanced accuracy, TPR at 1% and 0.1% FPR, utility
    beside them."""
    from .plots import label

    rows = []
    for key, e in table.items():
        mix, norm, group, attack = key.split("/")
        if attack not in LIRA_SHOWN_ATTACKS:
            continue
        auc, n_out = e["auc"], e["n_nonmembers"]
        tprs = [_tpr(e[f"tpr@{f:g}"]["value"], n_out, f) for f in (0.01, 0.001)]
        rows.append(
            f"| {float(mix):.0%} | {label(norm)} | {group} | {attack} | "
            f"{auc['value']:.3f} {_ends(auc)} | "
            f"{e['balanced_acc']['value']:.3f} | {tprs[0]} | {tprs[1]} | "
            f"{e['clean_test_acc']:.3f} | {e['train_test_gap']:+.3f} |"
        )
    return (
        "| outliers | model | examples | attack | AUC [95% CI, pools] | bal. acc. "
        "| TPR@1% FPR | TPR@0.1% FPR | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def rare_table(rare) -> str:
    """The pools with a rare class in markdown (`exposure.RareExposure`): per norm and group,
    online LiRA's AUC with its interval over pools, TPR at 1% FPR, memorization, utility."""
    from .plots import label

    rows = [
        f"| {label(n)} | {g} ({rare.n[g]}) | {rare.auc[n][g].value:.3f} "
        f"{_ends(rare.auc[n][g].as_dict())} | "
        f"{_tpr(rare.tpr[n][g], rare.n_nonmembers[g], 0.01)} | "
        f"{rare.mem[n][g]:+.3f} | {rare.acc[n]:.3f} | {rare.gap[n]:+.3f} |"
        for n in rare.auc
        for g in rare.auc[n]
    ]
    return (
        "| model | examples (count over pools) | online LiRA AUC [95% CI, pools] | TPR@1% FPR "
        "| memorization score (mean) | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def size_table(sweep) -> str:
    """The size sweep in markdown (`size_trend.SizeSweep`): per pool size N the BN - no-BN
    delta-AUC with its interval, online LiRA's AUC, clean test accuracy and train-test gap."""
    rows = [
        f"| {n:,}{' (main pools)' if n in sweep.reused else ''} | {_fmt(sweep.delta[n])} | "
        f"{sweep.auc[n]['bn']:.3f} / {sweep.auc[n]['none']:.3f} | "
        f"{sweep.acc[n]['bn']:.3f} / {sweep.acc[n]['none']:.3f} | "
        f"{sweep.gap[n]['bn']:+.3f} / {sweep.gap[n]['none']:+.3f} |"
        for n in sweep.sizes
    ]
    return (
        "| pool size N (each shadow trains on N/2) | BN - no-BN AUC points [95% CI] "
        "| online LiRA AUC BN / no-BN | clean test acc. BN / no-BN "
        "| train-test gap BN / no-BN |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows)
    )


def level_table(reading) -> str:
    """LiRA at matched fit in markdown (`exposure.LevelReading`): per fit level and outlier mix
    the BN - no-BN delta-AUC (online LiRA, all examples) with its interval over pools, both
    norms' mean clean training accuracy at the reading (on their IN examples), the epochs it
    took (mean, max), clean test accuracy, and models that never reached the level."""
    rows = []
    for level, lp in reading.pools.items():
        for mix in lp.mixes:
            f, acc = lp.fit[mix], lp.acc[mix]
            never = f["bn"]["censored"] + f["none"]["censored"]
            rows.append(
                f"| {level:.0%} | {mix:.0%} | {_fmt(reading.deltas[level][mix, 'all'])} | "
                f"{f['bn']['train_clean_acc']:.3f} / {f['none']['train_clean_acc']:.3f} | "
                f"{f['bn']['epochs_mean']:.1f} ({f['bn']['epochs_max']:.0f}) / "
                f"{f['none']['epochs_mean']:.1f} ({f['none']['epochs_max']:.0f}) | "
                f"{acc['bn']:.3f} / {acc['none']:.3f} | {never} |"
            )
    return (
        "| level | mix | BN - no-BN AUC points [95% CI] | clean train acc. BN / no-BN "
        "| epoch read, mean (max) BN / no-BN | clean test acc. BN / no-BN "
        "| models that never reached it |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def size_reading(sweep) -> str:
    """The size sweep in sentences: the delta-AUC at the smallest and largest pool (the largest
    is the headline's), the trend per doubling within the sizes measured, utility beside it.
    Nothing is said beyond the largest pool measured."""
    a, b, s = sweep.sizes[0], sweep.sizes[-1], sweep.trend.slope
    if s.hi < 0:
        trend = "falls"
    elif s.lo > 0:
        trend = "rises"
    else:
        trend = "shows no trend that the interval can tell from 0 (or has no interval)"

    def change(values: dict, norm: str, sign: str = "") -> str:
        return f"{values[a][norm]:{sign}.2f} to {values[b][norm]:{sign}.2f}"

    acc, gap = sweep.acc, sweep.gap
    return (
        f"From N = {a:,} to {b:,} clean examples ({len(sweep.seeds)} pool(s) per size) the BN - "
        f"no-BN delta-AUC goes from {_fmt(sweep.delta[a])} to {_fmt(sweep.delta[b])} points: "
        f"it {trend}, {s.value:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}] points per doubling of N within "
        f"the sizes measured. Over the same range clean test accuracy goes from "
        f"{change(acc, 'bn')} (BN) and from {change(acc, 'none')} (no-BN), the train-test gap "
        f"from {change(gap, 'bn', '+')} (BN) and from {change(gap, 'none', '+')} (no-BN). "
        f"The sweep says nothing beyond N = {b:,}, its largest pool."
    )


EFFECT_METRICS = (("auc", "AUC"), ("tpr@0.01", "TPR@1% FPR"), ("tpr@0.001", "TPR@0.1% FPR"))


def effect_table(effects: dict) -> str:
    """The effect per attack in markdown from results.json's "effect_per_attack" entry
    (`exposure.effect_results`): per mix, example group and attack, BN minus no-BN in AUC and
    TPR points with the interval over pools (n/a with one pool); a TPR whose FPR needs more
    non-members than a target has reads n/r."""
    cells: dict[tuple, dict] = {}
    for key, e in effects.items():
        mix, group, attack, metric = key.split("/")
        cells.setdefault((mix, group, attack), {})[metric] = e
    rows = []
    for (mix, group, attack), by in cells.items():
        shown = [
            _interval(by[m]) if by[m]["resolvable"] else "n/r" for m, _ in EFFECT_METRICS if m in by
        ]
        n = next(iter(by.values()))
        rows.append(
            f"| {float(mix):.0%} | {group} | {attack} | " + " | ".join(shown) + f" | {n['n']} |"
        )
    head = " | ".join(f"d{name} [95% CI, pools]" for _, name in EFFECT_METRICS)
    return (
        f"| outliers | examples | attack | {head} | pools |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def size_attack_table(per_attack: dict, metric: str = "auc") -> str:
    """The size sweep's effect per attack in markdown, from its results entry's "per_attack"
    ({N: {attack: {metric: estimate}}}, `size_trend.SizeSweep.results`): per pool size N and
    attack, BN minus no-BN in `metric` points ("auc", "tpr@0.01", "tpr@0.001") with the interval
    over that size's pools."""
    sizes = sorted(per_attack, key=int)
    attacks = list(per_attack[sizes[0]]) if sizes else []
    rows = [
        f"| {int(n):,} | " + " | ".join(_interval(per_attack[n][a][metric]) for a in attacks) + " |"
        for n in sizes
    ]
    return (
        "| pool size N | "
        + " | ".join(attacks)
        + " |\n"
        + "|---|"
        + "---|" * len(attacks)
        + "\n"
        + "\n".join(rows)
    )


def _fmt(e) -> str:
    """An `Estimate` in points with its interval ("n/a" ends with one pool)."""
    return _interval(e.as_dict())


def _interval(e: dict) -> str:
    """A value in points with its interval, "n/a" for an end that is not finite (or None: a
    non-finite end as results.json stores it)."""
    import math

    ends = [
        f"{x:+.1f}" if x is not None and math.isfinite(x) else "n/a" for x in (e["lo"], e["hi"])
    ]
    return f"{e['value']:+.1f} [{ends[0]}, {ends[1]}]"


def fit_table(pools, recipe) -> str:
    """How the shadows fit, per pool kind and norm (`pools`: `exposure.Pools`, one or a list;
    `recipe`: the `pool_units.LiraRecipe`): clean training accuracy on their own IN examples, clean
    test accuracy, the epochs they trained (mean, max), how many hit the cap below the fit level."""
    from .plots import label

    pools = [p for p in (pools if isinstance(pools, (list, tuple)) else [pools]) if p is not None]
    fit = {m: by for p in pools for m, by in p.fit.items()}
    acc = {m: by for p in pools for m, by in p.acc.items()}
    head = ["pool", "norm", "clean train acc", "clean test acc", "epochs (mean / max)", "censored"]
    rows = []
    for mix, by in fit.items():
        pool = mix if isinstance(mix, str) else f"{mix:.0%} mix"
        for n, f in by.items():
            used = f"{f['epochs_mean']:.1f} / {f['epochs_max']:.0f}"
            rows.append(
                [
                    pool,
                    label(n),
                    f"{f['train_clean_acc']:.3f}",
                    f"{acc[mix][n]:.3f}",
                    used,
                    f"{f['censored']} of {f['models']}",
                ]
            )
    if recipe.protocol == "paper":
        rule = f"*The paper's protocol:* every shadow trains {recipe.epochs} epochs."
    else:
        rule = (
            f"Every shadow trains until its clean training accuracy on its IN examples reaches "
            f"{recipe.fit_level:g}, at most {recipe.epochs} epochs; censored: hit the cap below it."
        )
    return markdown_table(head, rows) + "\n\n" + rule


# ------------------------------------------------ every notebook that compares norms: the recipes


def recipe_table(recipes) -> str:
    """The recipe each norm trains with (`recipes.NormRecipes`): for the fair protocol, per norm
    the chosen learning rate, the validation accuracy at every grid point (the chosen one in
    bold, 'diverged' where a seed's training diverged) and the epochs the search models used;
    with a weight-decay search, a second table of the same for the weight decay
    (`wd_table`)."""
    from .plots import label

    if recipes.choices is None:
        return (
            f"*{recipes.name}:* every norm trains with lr {recipes.base.lr:g} for "
            f"{recipes.base.epochs} epochs."
        )
    grid = recipes.search.grid
    epochs = dict(recipes.grid_epochs)
    head = ["norm", "chosen lr"] + [f"lr {x:.3g}" for x in grid] + ["epochs used (per lr)"]
    rows = []
    for c in recipes.choices.choices:
        fitted = c.fitted or (True,) * len(c.grid)
        cells = [label(c.norm), f"{c.lr:.3g}"]
        cells += _search_cells(c.grid, c.lr, c.mean_val_acc, c.failed, fitted)
        cells.append(_epochs_cell(epochs.get(c.norm, ())))
        rows.append(cells)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    s = recipes.search
    fallback = [label(c.norm) for c in recipes.choices.choices if c.fallback]
    return "\n".join(lines) + (
        f"\n\n*{recipes.name}:* validation accuracy on {s.n_val} held-out training images after "
        f"training on {s.n_train} clean images (mean of {len(s.seeds)} seed(s)); every model then "
        f"trains until its clean training accuracy reaches {recipes.base.fit_level:g}, at most "
        f"{recipes.base.epochs} epochs. *(unfitted)*: a search model that hit the cap below that "
        "level; such a learning rate is not chosen unless no grid point fitted"
        + (f" (here for {', '.join(fallback)})." if fallback else ".")
        + (
            f" This search ran at weight decay {recipes.base.weight_decay:g}.\n\n"
            f"{wd_table(recipes.wd_choices)}"
            if recipes.wd_choices
            else ""
        )
    )


def _search_cells(grid, chosen, mean_val_acc, failed, fitted) -> list[str]:
    """One search table's cell per grid point: its validation accuracy ('diverged' where a seed
    diverged, '(unfitted)' where one hit the cap below the fit level), the chosen one in bold."""
    cells = []
    for x, acc, fail, fit in zip(grid, mean_val_acc, failed, fitted):
        cell = "diverged" if fail else f"{acc:.3f}" + ("" if fit else " (unfitted)")
        cells.append(f"**{cell}**" if x == chosen else cell)
    return cells


def _epochs_cell(epochs) -> str:
    """The epochs the search models used per grid point, "-" where one diverged (NaN)."""
    return " / ".join("-" if e != e else f"{e:.0f}" for e in epochs)


def wd_table(choices) -> str:
    """Each norm's weight-decay search at its chosen learning rate (`lr_choice.WdChoice`s): the
    chosen weight decay, the validation accuracy at every grid point (the chosen one in bold,
    'diverged', '(unfitted)' as in `recipe_table`) and the epochs its search models used."""
    from .plots import label

    grid = choices[0].grid
    head = ["norm", "at lr", "chosen weight decay"] + [f"wd {w:g}" for w in grid]
    head.append("epochs used (per wd)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in choices:
        cells = [label(c.norm), f"{c.lr:.3g}", f"{c.weight_decay:g}"]
        cells += _search_cells(c.grid, c.weight_decay, c.mean_val_acc, c.failed, c.fitted)
        cells.append(_epochs_cell(c.epochs))
        lines.append("| " + " | ".join(cells) + " |")
    fallback = [label(c.norm) for c in choices if c.fallback]
    return "\n".join(lines) + (
        "\n\nThen each norm's weight decay, chosen by the same rule on the same validation images "
        "and seeds at its chosen learning rate (claims.yaml `settings.wd_selection`)"
        + (f"; no grid point fitted for {', '.join(fallback)}." if fallback else ".")
    )


def epochs_table(used: dict, fit_level: float | None, cap: int) -> str:
    """Notebook 01's table of `fit_rows.epochs_used`: per corruption and model, the epochs it
    trained (mean and max over seeds), how many of its runs reached the fit level, and its final
    clean training and test accuracy (means over seeds)."""
    from .plots import label

    rows = [
        [
            corr,
            label(norm),
            f"{u['mean']:.1f}",
            f"{u['max']:.0f}",
            "n/a" if fit_level is None else f"{u['fitted']}/{u['runs']}",
            f"{u['train_acc']:.3f}",
            f"{u['test_acc']:.3f}",
        ]
        for corr, by_norm in used.items()
        for norm, u in by_norm.items()
    ]
    head = ["kind", "model", "epochs used (mean)", "max", "fitted", "clean train", "clean test"]
    if fit_level is None:
        rule = f"every model trains {cap} epochs"
    else:
        rule = (
            f"each model stops once its clean training accuracy reaches {fit_level:g}, at most "
            f"{cap} epochs; a run that hit the cap below it is censored"
        )
    return markdown_table(head, rows) + f"\n\n*Means over seeds; {rule}.*"


def effective_lr_reading(rows: list) -> list[str]:
    """Per corruption, what notebook 01's effective-learning-rate arm says (its rows
    `01.converged.efflr` beside `01.converged.<kind>`, `claims.Verdict` after any correction):
    whether some raised no-BN learning rate memorizes like BN at matched fit. A row read off
    matched fit (`claims.OFF_FIT` in its note) is shown and named, but counts for neither side."""
    from .claims import OFF_FIT

    out = []
    base = {
        r.fields["corruption"]: r
        for r in rows
        if r.id == f"01.converged.{r.fields.get('corruption')}"
    }
    arm = [r for r in rows if r.id == "01.converged.efflr"]
    for corr in dict.fromkeys(r.fields["corruption"] for r in arm):
        mine = [r for r in arm if r.fields["corruption"] == corr]
        b = base.get(corr)
        head = f"{corr}: BN minus no-BN {b.measured:+.3f} ({b.verdict})" if b else f"{corr}:"
        off = [OFF_FIT in r.magnitude for r in mine]
        parts = [
            f"x{r.fields['factor']} lr {r.measured:+.3f} [{r.lo:+.3f}, {r.hi:+.3f}]"
            + (" (not at matched fit)" if o else "")
            for r, o in zip(mine, off)
        ]
        fitted = [r for r, o in zip(mine, off) if not o]
        closes = [r for r in fitted if r.hi == r.hi and r.hi >= 0 >= r.lo or r.hi < 0]
        if b is not None and b.verdict == "reproduced" and closes:
            says = (
                "a raised no-BN learning rate memorizes like BN at matched fit: BN's excess "
                "reads as an effective-learning-rate effect"
            )
        elif fitted and all(r.lo > 0 for r in fitted):
            says = "no tested no-BN learning rate closes BN's excess at matched fit"
        else:
            says = "not separated at this budget"
        out.append(f"{head}; against no-BN at {', '.join(parts)} -> {says}")
    return out


def _finite_mean(values) -> float:
    """The mean of the finite entries of `values` (NaN when none is)."""
    ok = [v for v in values if v == v]
    return sum(ok) / len(ok) if ok else float("nan")


def lr_points_table(points: dict, fit_level: float) -> str:
    """Notebook 01's learning-rate curve ({kind: `lr_dependence.points`}) as a table: per kind,
    norm and rate, memorization at the end of training (mean and 95% t interval over seeds), the
    runs that fitted, the epochs used and clean training and test accuracy (means over the runs
    that trained)."""
    from .plots import label

    rows = []
    for kind, pts in points.items():
        for p in pts:
            e = p.estimate
            interval = f"[{e.lo:.3f}, {e.hi:.3f}]" if e.lo == e.lo else "n/a"
            fitted = f"{p.fitted}/{p.runs}" + (f", {p.diverged} diverged" if p.diverged else "")
            rows.append(
                [
                    kind,
                    label(p.norm),
                    f"{p.lr:g}" + (" (chosen)" if p.chosen else ""),
                    f"{e.value:.3f} {interval}",
                    fitted,
                    f"{_finite_mean(p.epochs):.1f}",
                    f"{_finite_mean(p.train_acc):.3f}",
                    f"{_finite_mean(p.test_acc):.3f}",
                ]
            )
    head = ["kind", "model", "lr", "memorization at the end", "fitted", "epochs"]
    head += ["clean train", "clean test"]
    return markdown_table(head, rows) + (
        f"\n\n*Each model trained until its clean training accuracy reached {fit_level:g} or the "
        "epoch cap (then it is not fitted); means and 95% t intervals over seeds.*"
    )


def lr_dependence_reading(rows: list, points: dict) -> list[str]:
    """Per corruption kind of `points` ({kind: `lr_dependence.points`}), what notebook 01's
    learning-rate curve says (its rows `01.lr.bn` and `01.lr.none`, `claims.Verdict` after the
    family's correction): of the other grid rates of each norm, how many read supported, not
    supported, inconclusive, or have no row (a run diverged), beside the judged comparison at
    the two chosen rates (`01.converged.<kind>`)."""
    out = []
    for kind, pts in points.items():
        chosen = {p.norm: p.lr for p in pts if p.chosen}
        judged = [r for r in rows if r.id == f"01.converged.{kind}"]
        parts = []
        if judged:
            r = judged[0]
            parts.append(
                f"the chosen pair (BN {chosen['bn']:g}, no-BN {chosen['none']:g}) is "
                f"01.converged.{kind}: {r.measured:+.3f} ({r.verdict})"
            )
        for cid, norm, other in (("01.lr.bn", "bn", "none"), ("01.lr.none", "none", "bn")):
            mine = {
                r.fields["lr"]: r
                for r in rows
                if r.id == cid and r.fields.get("corruption") == kind
            }
            rates = [f"{p.lr:g}" for p in pts if p.norm == norm and not p.chosen]
            counts = {v: sum(r.verdict == v for r in mine.values()) for v in VERDICT_ORDER}
            missing = [x for x in rates if x not in mine]
            each = [
                f"{x} {mine[x].measured:+.3f} ({mine[x].verdict})" if x in mine else f"{x} no row"
                for x in rates
            ]
            who = "BN" if norm == "bn" else "no-BN"
            parts.append(
                f"{who} at its {len(rates)} other rates against {NAME_OF[other]} at its chosen "
                f"{chosen[other]:g}: "
                + ", ".join(f"{counts[v]} {v}" for v in VERDICT_ORDER)
                + f", {len(missing)} without a row (a run diverged) ({'; '.join(each)})"
            )
        out.append(f"{kind}: " + "; ".join(parts))
    return out


VERDICT_ORDER = ("supported", "not supported", "inconclusive")
NAME_OF = {"bn": "BN", "none": "no-BN"}
