"""Prose builders of notebook 05 (mitigation): tables, titles, labels and readings."""

from __future__ import annotations

from .text import interval, markdown_table


CORRUPTION_WORDS = {"flip": "label flips", "ood": "OOD samples", "rare": "a rare class"}
MEMORIZATION_WORDS = {
    "flip": "memorization (accuracy on the corrupted labels)",
    "ood": "memorization (accuracy on the corrupted labels)",
    "rare": "memorization (trained minus held-out accuracy of the rare class)",
}
LIRA_NAMES = {
    "online": "online",
    "online_fixed": "online, global variance",
    "offline": "offline",
    "offline_fixed": "offline, global variance",
}


def chosen_on_words(kinds: list[str]) -> str:
    """The kinds the setting is chosen on, in words: 'label flips and OOD samples'."""
    return " and ".join(CORRUPTION_WORDS[c] for c in kinds)


def selection_table(selection) -> str:
    """The selection (`selection.Selection`): per candidate its validation cost, the memorization
    share removed, whether it qualifies (cost <= the rule's maximum) and which one was chosen."""
    from .selection import qualifies

    scores, max_cost = selection.scores, selection.max_cost
    rows = [
        [
            v.label,
            scores[v.name]["val_cost"],
            scores[v.name]["reduction"],
            "yes" if qualifies(scores[v.name], max_cost) else "no",
            "**chosen**" if v == selection.chosen else "",
        ]
        for v in selection.candidates
    ]
    header = [
        "candidate",
        "validation accuracy cost vs BN",
        "share of BN's memorization removed",
        f"cost <= {max_cost:g}",
        "",
    ]
    return markdown_table(header, rows)


def selection_summary(selection, n_val: int) -> str:
    """The rule in words, the selection table and the chosen setting, in Markdown."""
    return (
        f"**Rule.** {selection.rule['rule']}\n\n{selection_table(selection)}\n\n"
        f"**Chosen: {selection.chosen.label}** (selection seeds {list(selection.seeds)}, "
        f"{n_val} validation images)"
    )


def frontier_table(
    fronts: dict, alts: dict, comparisons: dict, measure: str = "memorization"
) -> str:
    """Per corruption: every frontier point and every alternative with clean test accuracy and
    memorization (or `measure`: LiRA's frontier, over its targets) (mean [95% t interval] over
    seeds); for an alternative also the regularizer's memorization at its accuracy, the
    difference (alternative minus regularizer) and the accuracy the regularizer lacks there."""
    import numpy as np

    from .stats import t_mean

    rows = []
    for corr, f in fronts.items():
        for j, lab in enumerate(f["rows"]):
            acc, mem = interval(t_mean(f["acc"][:, j])), interval(t_mean(f["mem"][:, j]))
            rows.append([corr, lab, acc, mem, "", "", ""])
        for name, a in alts[corr].items():
            c = comparisons[corr][name]
            stop = f" (epochs {', '.join(map(str, a['epoch']))})" if "epoch" in a else ""
            rows.append(
                [
                    corr,
                    a["label"] + stop,
                    interval(t_mean(a["acc"])),
                    interval(t_mean(a["mem"])),
                    f"{np.mean(c['reg_mem']):.3f}",
                    interval(t_mean(c["diff"])),
                    f"{np.mean(c['gap']):+.3f}",
                ]
            )
    header = [
        "corruption",
        "model",
        "clean test acc.",
        measure,
        f"regularizer's {measure} at this acc.",
        "alternative minus regularizer",
        "acc. the regularizer lacks",
    ]
    return markdown_table(header, rows)


def frontier_tables(frontiers, lira_frontier: dict | None) -> str:
    """The frontier table (`frontier.Frontiers`), and LiRA's below it if there is one."""
    text = frontier_table(frontiers.fronts, frontiers.alts, frontiers.cmp)
    if not lira_frontier:
        return text
    lira = ({"LiRA": lira_frontier[k]} for k in ("front", "alts", "cmp"))
    return text + "\n\n" + frontier_table(*lira, "LiRA AUC")


def judged_table(finals: dict) -> str:
    """The judged models per corruption kind (`reduction.judged_finals`): final memorization and
    clean test accuracy (mean [95% t interval]), and what the memorization is made of: the
    atypical subset's accuracy on its training labels and, for rare, the rare class's held-out
    accuracy (memorization = the first minus the second)."""
    from .stats import t_mean

    rows = [
        [
            corr,
            label,
            interval(t_mean(f["memorization"])),
            float(f["subset_acc"].mean()),
            None if f["held_out"] is None else float(f["held_out"].mean()),
            interval(t_mean(f["accuracy"])),
        ]
        for (corr, label), f in finals.items()
    ]
    header = [
        "corruption",
        "model",
        "final memorization",
        "atypical samples' accuracy (training labels)",
        "rare: held-out accuracy of the class",
        "clean test acc.",
    ]
    return markdown_table(header, rows)


def lira_comparison_table(comparison, labels: dict[str, str]) -> str:
    """Per family and example group of a `mitigation_lira.LiraComparison` the mean AUC and TPR at
    1% FPR over targets, beside the shadows' clean test accuracy; `labels` {pool name: label}."""
    s = comparison.summary
    rows = [
        [labels[n], g, m["auc"], m["tpr@0.01"], s[n]["shadow_test_acc"]]
        for n in labels
        for g, m in s[n].items()
        if g != "shadow_test_acc"
    ]
    return markdown_table(["model", "examples", "AUC", "TPR@1%FPR", "clean test acc."], rows)


def own_pool_words(mix: float, recipe, n_pools: int) -> str:
    """05's own LiRA pools in words: '3 pools of 4000 examples with 10% ood outliers, 05's recipe
    (8 epochs)'."""
    return (
        f"{n_pools} pool(s) of {recipe.n_train} examples with {mix:.0%} {recipe.outlier_kind} "
        f"outliers, 05's recipe ({recipe.epochs} epochs, {recipe.n_shadows} shadows per family)"
    )


def kind_title(corr: str, n_atypical: int, n_train: int, n_classes: int) -> str:
    """What the atypical samples of a corruption kind are, and how many of the training subset."""
    if corr == "rare":
        return (
            f"a rare class: {n_atypical} of {n_train} training samples "
            f"(natural share {1 / n_classes:.0%})"
        )
    return f"{CORRUPTION_WORDS.get(corr, corr)}: {n_atypical} of {n_train} training samples"


def curve_label(label: str, s: dict) -> str:
    """Legend entry of a memorization curve from its `reduction.summarize` row: seeds and final
    values."""
    return (
        f"{label}, {s['n_seeds']} seeds\nfinal: memorization {s['final_memorization']:.2f},"
        f" clean test acc. {s['clean_test_acc']:.2f}"
    )


def scale_label(label: str, ratios, n_models: int, clean_acc: float) -> str:
    """Legend entry of a gamma/sigma histogram: models, channels, median, share > 1, clean acc."""
    import numpy as np

    r = np.asarray(ratios)
    return (
        f"{label}: {len(r)} channels of {n_models} models\nmedian {np.median(r):.2f}, "
        f"{(r > 1).mean():.0%} above 1; clean test acc. {clean_acc:.2f}"
    )


def scale_lines(tau: float | None) -> dict[str, float]:
    """Reference lines of the gamma/sigma histograms {label: x}: a bound tau (None: no bound)
    and the paper's reference 1 (gamma/sigma > 1 in most channels), one line if equal."""
    import numpy as np

    paper = "paper: $|\\gamma|/\\sigma$ > 1 in most channels"
    if tau is None:
        return {f"1 ({paper})": 1.0}
    if np.isclose(tau, 1.0):
        return {f"1 = $\\tau$, the regularizer's bound ({paper})": 1.0}
    return {f"$\\tau$ = {tau:g}, the regularizer's bound": tau, f"1 ({paper})": 1.0}


def lira_labels(comparison, labels: dict[str, str]) -> dict[str, str]:
    """Legend entries of the LiRA ROC figure by pool name: AUC beside clean test accuracy."""
    s = comparison.summary
    return {
        n: f"{lab}\nmean AUC per target {s[n]['all']['auc']:.2f}, clean test acc. "
        f"{s[n]['shadow_test_acc']:.2f}"
        for n, lab in labels.items()
    }


def lira_reading(comparison, base: str, mitigated: str, tol: float) -> str:
    """What the LiRA comparison says, in words computed from its numbers: a lower AUC is a
    privacy gain only if the mitigated models keep the clean test accuracy (within `tol`)."""
    s, d = comparison.summary, comparison.delta["all"]
    auc = f"{s[mitigated]['all']['auc']:.2f}, without it {s[base]['all']['auc']:.2f}"
    cost = s[base]["shadow_test_acc"] - s[mitigated]["shadow_test_acc"]
    acc = f"{s[mitigated]['shadow_test_acc']:.2f}, without it {s[base]['shadow_test_acc']:.2f}"
    if d.hi < 0:
        return f"With the regularizer the AUC is higher ({auc}); clean test accuracy {acc}."
    if not d.lo > 0:
        return (
            f"With the regularizer the AUC does not clearly change ({auc}; the 95% interval of "
            f"the difference over pools includes 0, or one pool gives none); clean test "
            f"accuracy {acc}."
        )
    if cost > tol:
        return (
            f"With the regularizer the AUC is lower ({auc}) but so is clean test accuracy "
            f"({acc}: {cost:.2f} lower, tolerance {tol:.2f}). A lower AUC at lower clean "
            "accuracy is that of a weaker model, not a privacy win."
        )
    return (
        f"With the regularizer the AUC is lower ({auc}) at a clean test accuracy cost within "
        f"{tol:.2f} ({acc})."
    )


def lira_title(comparison, base: str, mitigated: str, tol: float, width: int = 64) -> str:
    """Title of the LiRA ROC figure: the attack, the pool, then `lira_reading`."""
    import textwrap

    n, variant = comparison.n_shadows, comparison.variant
    head = (
        f"LiRA ({LIRA_NAMES.get(variant, variant)}) on {comparison.pool}: "
        f"{n} shadow models per family and pool, each the target of the other {n - 1}"
    )
    reading = lira_reading(comparison, base, mitigated, tol)
    return "\n".join(textwrap.wrap(head, width) + textwrap.wrap(reading, width))


def lira_frontier_title(variant: str, pool: str, n_shadows: int) -> str:
    """Title of LiRA's frontier panel: the attack, the pools and the shadows per family."""
    return f"LiRA ({variant}) on {pool}"


def parts_table(readings: dict, labels: dict[str, str]) -> str:
    """The regularizer taken apart (`parts.readings_table`): per model its final memorization,
    clean test accuracy and the medians over BN channels of gamma/sigma, sigma, |gamma| and the
    effective step lr/|w|^2; `labels` {model name: label}."""
    rows = [
        [
            labels[n],
            r["memorization"],
            r["clean_test_acc"],
            r["ratio"],
            r["sigma"],
            r["gamma"],
            f"{r['effective_step']:.3g}",
        ]
        for n, r in readings.items()
    ]
    header = [
        "model",
        "final memorization",
        "clean test acc.",
        "median gamma/sigma",
        "median sigma",
        "median gamma",
        "median effective step",
    ]
    return markdown_table(header, rows)


def which_part_words(supported: list[str], kind: str) -> str:
    """What the `05.part` rows say: the arms that remove memorization of `kind` at the run's
    scale, or that none does by the rule."""
    if not supported:
        return (
            f"By the rule of `05.part`, no arm removes a quarter of BN's memorization ({kind}) "
            "within the accuracy tolerance at this scale."
        )
    return (
        f"By the rule of `05.part`, these remove at least a quarter of BN's memorization ({kind}) "
        f"within the accuracy tolerance: {', '.join(supported)}."
    )


def protocol_words(recipes) -> str:
    """05's protocol in words (`recipes` a `recipes.NormRecipes`): under the fair protocol each
    norm's learning rate is chosen on validation data but the judged models train a fixed number
    of epochs (no fit rule); the paper's protocol is named as such."""
    if recipes.protocol == "paper":
        return recipes.name
    return "each norm its own learning rate, chosen on validation data, fixed epochs"


def mitigation_header(
    dataset: str,
    budget: str,
    arch: str,
    noise_frac: float,
    n_train: int,
    epochs: int,
    selection,
    seeds: list[int],
    protocol: str = "",
) -> str:
    """The header line of notebook 05's verdicts: the run, its protocol in words (`protocol`,
    `recipes.NormRecipes.name`), where the setting was chosen and which one
    (`selection.Selection`), where it was judged and the accuracy tolerance."""
    from .claims import acc_tolerance

    how = f"; {protocol}" if protocol else ""
    return (
        f"Mitigation on {dataset} ({arch}, {noise_frac:.0%} corrupted, {n_train} training images, "
        f"{epochs} epochs, budget {budget}{how}); chosen on seeds {list(selection.seeds)} with "
        f"{chosen_on_words(selection.kinds)}: {selection.chosen.name}; judged on seeds {seeds}; "
        f"tolerance {acc_tolerance('05'):.3f}"
    )


MITIGATION_PAPER = (
    "Paper: the regularizer reduces memorization substantially while keeping clean-data "
    "performance."
)
