"""Prose builders: the sentences and markdown tables the notebooks print, kept apart from the
compute that produces the numbers (each takes numbers or frozen results, returns a string)."""

from __future__ import annotations

# ---------------------------------------------------------------- shared: tables and intervals

# ---------------------------------------------------------------- 01 forced memorization, 02 gradients


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
    controls = [r for r in rows if r.id.startswith(prefix)]
    out = []
    for case in dict.fromkeys(r.fields[key] for r in controls):
        v = {r.id.split(".")[-1]: r.verdict for r in controls if r.fields[key] == case}
        gn, na = v.get("gn"), v.get("bn_noaffine")
        if gn == "reproduced" and na == "not reproduced":
            says = (
                f"the learned gamma carries {effect} (GroupNorm raises {effect} without batch "
                "coupling; fixed-gamma BN does not)"
            )
        elif na == "reproduced" and gn == "not reproduced":
            says = (
                f"batch coupling carries {effect} (BN with gamma fixed raises {effect}; "
                "GroupNorm's learned gamma does not)"
            )
        elif gn == na == "reproduced":
            says = (
                f"either part alone raises {effect} (GroupNorm's learned gamma and BN's batch "
                "coupling)"
            )
        elif gn == na == "not reproduced":
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
    """Notebook 02's reading lines from `probes.summary` and the final clean test accuracy and
    memorization per norm: each model's noisy/clean ratio, its ratio per parameter group, and
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


# ---------------------------------------------------------------- 03 LiRA

# ---------------------------------------------------------------- 04 theory

# ---------------------------------------------------------------- 05 mitigation
