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
LIRA_SHOWN_ATTACKS = ("online", "offline", "loss", "rmia")  # the attacks 03's table shows


def _tpr(tpr: float, n_nonmembers: int, fpr: float) -> str:
    """A TPR at `fpr`, or "n/r" (not resolvable) when fpr < 1 / non-members."""
    return f"{tpr:.3f}" if fpr * n_nonmembers >= 1 else "n/r"


def attack_table(table: dict) -> str:
    """Notebook 03's attack table in markdown from its results entry {"mix/norm/group/attack":
    ...} (`exposure.attack_table`): the four attacks of `LIRA_SHOWN_ATTACKS`, AUC with its
    interval over targets, balanced accuracy, TPR at 1% and 0.1% FPR, utility beside them."""
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
            f"{auc['value']:.3f} [{auc['lo']:.3f}, {auc['hi']:.3f}] | "
            f"{e['balanced_acc']['value']:.3f} | {tprs[0]} | {tprs[1]} | "
            f"{e['clean_test_acc']:.3f} | {e['train_test_gap']:+.3f} |"
        )
    return (
        "| outliers | model | examples | attack | AUC [95% CI, targets] | bal. acc. "
        "| TPR@1% FPR | TPR@0.1% FPR | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def rare_table(rare) -> str:
    """The pools with a rare class in markdown (`exposure.RareExposure`): per norm and group,
    online LiRA's AUC with its interval over targets, TPR at 1% FPR, memorization, utility."""
    from .plots import label

    rows = [
        f"| {label(n)} | {g} ({rare.n[g]}) | {rare.auc[n][g].value:.3f} "
        f"[{rare.auc[n][g].lo:.3f}, {rare.auc[n][g].hi:.3f}] | "
        f"{_tpr(rare.tpr[n][g], rare.n_nonmembers[g], 0.01)} | "
        f"{rare.mem[n][g]:+.3f} | {rare.acc[n]:.3f} | {rare.gap[n]:+.3f} |"
        for n in rare.auc
        for g in rare.auc[n]
    ]
    return (
        "| model | examples (count over pools) | online LiRA AUC [95% CI, targets] | TPR@1% FPR "
        "| memorization score (mean) | clean test acc. | train-test gap |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def size_table(sweep) -> str:
    """The size sweep in markdown (`size_trend.SizeSweep`): per pool size N the BN - no-BN
    delta-AUC with its interval, online LiRA's AUC, clean test accuracy and train-test gap."""
    rows = [
        f"| {n:,}{' (main pools)' if n in sweep.reused else ''} | {sweep.delta[n].fmt(1)} | "
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


def _where(pr, paper_range: tuple[float, float]) -> str:
    """Where an interval `pr` sits against the paper's range."""
    lo, hi = paper_range
    if pr.lo > hi:
        return f"still above the paper's {lo:g}-{hi:g}"
    if pr.hi < lo:
        return f"below the paper's {lo:g}-{hi:g}"
    if lo <= pr.lo and pr.hi <= hi:
        return f"within the paper's {lo:g}-{hi:g}"
    return f"an interval that overlaps the paper's {lo:g}-{hi:g}"


def size_reading(sweep, paper_range: tuple[float, float] = (3.0, 5.0)) -> str:
    """The size sweep in sentences: the delta-AUC at the smallest and largest pool, the trend per
    doubling, utility beside it, and the line's value at the paper's scale, labelled as the
    extrapolation it is (or not, when the sweep reaches that scale)."""
    a, b, s, pr = sweep.sizes[0], sweep.sizes[-1], sweep.trend.slope, sweep.predicted
    if s.hi < 0:
        trend = "falls"
    elif s.lo > 0:
        trend = "rises"
    else:
        trend = "shows no trend that the interval can tell from 0"

    def change(values: dict, norm: str, sign: str = "") -> str:
        return f"{values[a][norm]:{sign}.2f} to {values[b][norm]:{sign}.2f}"

    acc, gap = sweep.acc, sweep.gap
    text = (
        f"From N = {a:,} to {b:,} clean examples the BN - no-BN delta-AUC goes from "
        f"{sweep.delta[a].fmt(1)} to {sweep.delta[b].fmt(1)} points: it {trend}, "
        f"{s.value:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}] points per doubling of N. Over the same "
        f"range clean test accuracy goes from {change(acc, 'bn')} (BN) and from "
        f"{change(acc, 'none')} (no-BN), the train-test gap from {change(gap, 'bn', '+')} (BN) "
        f"and from {change(gap, 'none', '+')} (no-BN). "
    )
    n, where = sweep.n_paper, _where(pr, paper_range)
    if not sweep.extrapolated:
        return text + (
            f"At N = {n:,} (the paper's scale, inside the sweep) the line gives "
            f"{pr.fmt(1)} points, {where}."
        )
    from math import log2

    doublings = log2(n / b)
    return text + (
        f"*Extrapolated* {doublings:.1f} doublings beyond the largest pool, to N = {n:,} "
        f"(the whole {sweep.dataset} training set: LiRA's usual pool and, presumably, the "
        f"paper's), the line predicts {pr.fmt(1)} points, {where}: this assumes the trend stays "
        "linear in log N where it was never measured, a plausibility check, not a measurement."
    )


# ---------------------------------------------------------------- 04 theory
VERSUS = {"init": ("trained", "initialization"), "clean": ("flipped labels", "clean labels")}
# the two comparisons of `gamma_sigma.TrainedStudy`, in words: (state a, state b)


def latex(expr) -> str:
    """sympy's LaTeX of `expr`, with the symbols ell', ell'_i written as \\ell', \\ell'_i."""
    import re

    import sympy as sp

    return re.sub(r"(?<![\\A-Za-z])ell'", r"\\ell'", sp.latex(expr))


def show_math(lhs, expr=None) -> None:
    """Display `lhs = expr` in LaTeX (a notebook renders it; a console prints the source);
    `lhs` may instead be a mapping {lhs: expr}, shown one equation per line."""
    from IPython.display import Math, display

    pairs = lhs.items() if isinstance(lhs, dict) else [(lhs, expr)]
    for left, e in pairs:
        display(Math(f"{left} = {latex(e)}"))


def term_labels(terms: dict, model: str) -> dict:
    """{LaTeX label: term} for `derivation.full_update_terms`, e.g. Delta m_BN[gamma]."""
    import sympy as sp

    return {
        rf"\Delta m_{{\text{{{model}}}}}[{sp.latex(sp.Symbol(g))}]": e for g, e in terms.items()
    }


def toy_probe_counts(study) -> str:
    """How many probes a `toy_studies.ProbeStudy` holds, and each run's ratio estimator."""
    ratios = {k: round(r, 3) for k, r in study.run_ratio_table().items()}
    return (
        f"{len(study.probes['measured'])} probes over {study.n_runs_grid} runs, "
        f"{len(study.tiny['measured'])} tiny-step probes; {study.n_bad} of the "
        f"{study.n_probes} at the default setting with a falling margin\n"
        f"run ratios (w_scale, seed): {ratios}"
    )


def probe_unit(study) -> str:
    """The unit of the simulation claim's verdict row."""
    return (
        f"measured / predicted, ratio estimator per run, mean over {study.agreement.n} runs "
        f"(bootstrap over runs); {study.n_bad} of {study.n_probes} probes with a falling margin "
        "kept"
    )


def feedback_shares(fb) -> str:
    """The outliers' share of the toy's samples and of the gradient on gamma."""
    return (
        f"outliers: {fb.population_share:.1%} of the samples, {fb.gamma_share:.1%} of "
        "sum_i |dL/dgamma_i|"
    )


def feedback_notes(fb) -> dict[str, str]:
    """Plain sentences for the feedback figure, from a `toy_studies.FeedbackStudy`: 'gamma' (is
    gamma higher with outliers, as the paper says?), 'factor' (the ratio with / without outliers
    split into a gamma and a sigma part) and 'start' (the initial factor left out of the log
    panel)."""
    import math

    import numpy as np

    gap, share = fb.gamma_over_steps()
    if gap.hi < 0:
        word = " lower with outliers: against the paper's 'outliers drive $\\gamma$ up'"
    elif gap.lo > 0:
        word = " higher with outliers, as the paper says"
    else:
        word = ": no clear difference with and without outliers"
    g, s = math.exp(fb.factor_gamma.value), math.exp(fb.factor_sigma.value)
    start = np.median(fb.arr("bn", "factor")[:, 0])
    return {
        "gamma": f"$\\gamma${word}\nno-outlier $\\gamma$ higher at {share:.0%} of steps; with "
        f"$-$ without (95% t interval, {fb.gap_gamma.n} seeds):\nmean over steps {gap.fmt(3)}, "
        f"final {fb.gap_gamma.fmt(3)}",
        "factor": f"with / without outliers (last {fb.n_last} steps): "
        f"\u00d7{math.exp(fb.factor_gap.value):.1f}\n= \u00d7{g:.2f} from $\\gamma^2$ and "
        f"\u00d7{s:.1f} from $1/\\sigma^2$ (driven by {fb.driver})",
        "start": f"step 0 not shown (initial $w$: $(\\gamma/\\sigma)^2$ = {start:.0f}, median "
        "over seeds)",
    }


def feedback_gamma_unit(fb) -> str:
    """The unit of the verdict row 'gamma grows with outliers' (toy)."""
    return (
        "final gamma with outliers minus without (toy, paired by seed, t over "
        f"{fb.gap_gamma.n} seeds)"
    )


def feedback_factor_unit(fb) -> str:
    """The unit of the verdict row '(gamma/sigma)^2 with / without outliers' (toy)."""
    return (
        f"(gamma/sigma)^2 with outliers / without (toy, geometric mean of the last {fb.n_last} "
        f"steps, paired by seed, t over {fb.factor_gap.n} seeds)"
    )


def feedback_story(fb, gamma_verdict: str) -> str:
    """One plain sentence on the paper's positive-feedback loop, from what the toy measured."""
    import math

    g, s = math.exp(fb.factor_gamma.value), math.exp(fb.factor_sigma.value)
    head = (
        f"Feedback: gamma with minus without outliers {fb.gap_gamma.fmt(3)} ({gamma_verdict}); "
        f"(gamma/sigma)^2 x{math.exp(fb.factor_gap.value):.2f} = x{g:.2f} from gamma times "
        f"x{s:.2f} from sigma."
    )
    faults, lower = [], fb.gap_gamma.hi < 0
    if gamma_verdict != "reproduced":
        faults.append(
            "gamma is lower with the outliers"
            if lower
            else "gamma does not grow measurably with the outliers"
        )
    if fb.driver == "sigma":
        faults.append(
            "the rise of (gamma/sigma)^2 is driven by the batch sigma falling, not by gamma"
        )
    if not faults:
        loop = "outliers raise gamma, which raises the factor"
        return f"{head} Consistent with the paper's loop: {loop}."
    said = "; ".join(faults)
    end = "does not hold" if lower or fb.driver == "sigma" else "is not supported"
    story = f"the paper's positive-feedback story {end} in this toy"
    return f"{head} {said[0].upper()}{said[1:]}: {story}."


def simulation_reading(ratio, ratio_centered_example, probes, fb) -> str:
    """The derived ratios and the simulation's side numbers, in one sentence."""
    import math

    return (
        f"Derived ratio: {ratio}; with the batch mean following w: {ratio_centered_example} at "
        f"x = (2, 0, 0), xbar = (1, 0, 0). Simulation: log-log slope {probes.loglog_slope:.2f}; "
        f"infinitesimal step {math.exp(probes.tiny_fixed.value):.2f} (full first order within "
        f"{100 * (probes.tiny_full_error - 1):.0f}%); outlier memorization BN - no-BN "
        f"{fb.mem_gap.fmt(2)}."
    )


def most_channels_unit(study, est) -> str:
    """The unit of the verdict row 'gamma/sigma > 1 in most channels'."""
    return (
        "share of a network's channels with |gamma|/sigma > 1 (running variance), mean over "
        f"{est.n} networks (seeds {study.seeds}), 95% t interval over the networks"
    )


def gamma_ratio_unit(noise_frac: float, est) -> str:
    """The unit of the verdict row '|gamma| flipped / clean labels'."""
    return (
        f"|gamma| {noise_frac:.0%} flipped / clean labels, geometric mean over channels per "
        f"network, over {est.n} pairs of networks (seeds, a pair shares init and images), "
        "95% t interval"
    )


def driver_table(study, versus: str):
    """The drivers of a `gamma_sigma.TrainedStudy` for every architecture, as a table of
    factors on (gamma/sigma)^2 (geometric mean over the layer's channels; mean and 95% t
    interval over seeds); `versus`: 'init' or 'clean'."""
    import math

    import pandas as pd

    def factor(e) -> str:
        return f"x{math.exp(e.value):.2f} [{math.exp(e.lo):.2f}, {math.exp(e.hi):.2f}]"

    a, b = VERSUS[versus]
    archs = study.archs if versus == "init" else study.clean_archs()
    return pd.DataFrame(
        [
            {
                "arch": arch,
                "BN layer": r["layer"],
                f"(gamma/sigma)^2 {a} / {b}": factor(r["total"]),
                "from gamma^2": factor(r["gamma"]),
                "from 1/sigma^2": factor(r["sigma"]),
                "driven by": r["driver"],
                "seeds agreeing": f"{r['agree']}/{r['n']}",
            }
            for arch in archs
            for r in study.drivers(arch, versus)
        ]
    )


def driver_tables(study) -> list:
    """`driver_table(study, "init")`, and the "clean" one when an architecture has clean-label
    twins."""
    return [driver_table(study, "init")] + (
        [driver_table(study, "clean")] if study.clean_archs() else []
    )


def trained_story(study) -> str:
    """Plain sentences: what drives the rise of (gamma/sigma)^2 in training, layer by layer,
    and whether flipped labels raise gamma (the paper's feedback loop) in each network."""
    import math

    out = []
    for arch in study.archs:
        rows = study.drivers(arch, "init")
        layers, pooled = rows[:-1], rows[-1]
        n_sig = sum(r["driver"] == "sigma" for r in layers)
        up = sum(r["total"].lo > 0 for r in layers)
        down = sum(r["total"].hi < 0 for r in layers)
        out.append(
            f"{arch}: over training (gamma/sigma)^2 changes "
            f"x{math.exp(pooled['total'].value):.2f} (all channels) = "
            f"x{math.exp(pooled['gamma'].value):.2f} from gamma times "
            f"x{math.exp(pooled['sigma'].value):.2f} from sigma; it rises in {up} and falls in "
            f"{down} of {len(layers)} BN layers (95% t intervals over {pooled['n']} seeds), and "
            f"sigma drives the change in {n_sig} of them, gamma in {len(layers) - n_sig}."
        )
        if arch not in study.clean_archs():
            continue
        g, c = study.gamma_ratio(arch), study.drivers(arch, "clean")[-1]
        if g.lo > 1:
            word, end = "higher with flipped labels", ""
        elif g.hi < 1:
            word = "lower with flipped labels"
            end = ": gamma is lower with the outliers, against the paper's positive-feedback loop"
        else:
            word = "no clear difference"
            end = (
                ": no evidence that the outliers drive gamma up (the interval includes no "
                "change), so the loop is not supported here"
            )
        out.append(
            f"  |gamma| with flipped / clean labels: x{g.value:.3f} [{g.lo:.3f}, {g.hi:.3f}] "
            f"over {g.n} seeds ({word}); (gamma/sigma)^2 x{math.exp(c['total'].value):.2f}, "
            f"driven by {c['driver']}{end}."
        )
    return "\n".join(out)


def theory_story(rows, ratio, ratio_centered_example, probes, fb, study) -> str:
    """Notebook 04's reading lines under its verdict rows: the derivation and simulation, the
    toy's feedback loop (read beside the 'gamma grows with outliers' row) and the networks."""
    gamma_verdict = next(r.verdict for r in rows if r.id == "04.gamma_feedback.toy")
    return "\n".join(
        [
            simulation_reading(ratio, ratio_centered_example, probes, fb),
            feedback_story(fb, gamma_verdict),
            trained_story(study),
        ]
    )


# ---------------------------------------------------------------- 05 mitigation
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


def lira_pool_words(mix: float, p03: dict) -> str:
    """Notebook 03's pool in words: '10% ood outliers in 200 examples'."""
    return f"{mix:.0%} {p03['outlier_kind']} outliers in {p03['n_train']} examples"


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
            f"the difference includes 0); clean test accuracy {acc}."
        )
    if cost > tol:
        return (
            f"With the regularizer the AUC is lower ({auc}) but so is clean test accuracy "
            f"({acc}: {cost:.2f} lower, tolerance {tol:.2f}). A lower AUC at lower clean "
            "accuracy is that of a weaker model, not a privacy win."
        )
    return (
        f"With the regularizer the AUC is lower ({auc}) without losing clean test accuracy "
        f"({acc}, tolerance {tol:.2f}): a privacy gain at equal utility."
    )


def lira_title(comparison, base: str, mitigated: str, tol: float, width: int = 64) -> str:
    """Title of the LiRA ROC figure: the attack, the pool, then `lira_reading`."""
    import textwrap

    n, variant = comparison.n_shadows, comparison.variant
    head = (
        f"LiRA ({LIRA_NAMES.get(variant, variant)}) on notebook 03's pool ({comparison.pool}): "
        f"{n} shadow models per family, each the target of the other {n - 1}"
    )
    reading = lira_reading(comparison, base, mitigated, tol)
    return "\n".join(textwrap.wrap(head, width) + textwrap.wrap(reading, width))


def lira_frontier_title(variant: str, pool: str, n_shadows: int) -> str:
    """Title of LiRA's frontier panel: the attack, 03's pool and its shadows per family."""
    return f"LiRA ({variant}) on 03's pool: {pool},\n{n_shadows} shadows per family"


def mitigation_header(
    dataset: str,
    budget: str,
    arch: str,
    noise_frac: float,
    n_train: int,
    epochs: int,
    selection,
    seeds: list[int],
) -> str:
    """The header line of notebook 05's verdicts: the run, where the setting was chosen and
    which one (`selection.Selection`), where it was judged and the accuracy tolerance."""
    from .claims import acc_tolerance

    return (
        f"Mitigation on {dataset} ({arch}, {noise_frac:.0%} corrupted, {n_train} training images, "
        f"{epochs} epochs, budget {budget}); chosen on seeds {list(selection.seeds)} with "
        f"{chosen_on_words(selection.kinds)}: {selection.chosen.name}; judged on seeds {seeds}; "
        f"tolerance {acc_tolerance('05'):.3f}"
    )


MITIGATION_PAPER = (
    "Paper: the regularizer reduces memorization substantially while keeping clean-data "
    "performance."
)
