"""Prose builders of notebook 04 (theory): LaTeX, verdict-row units, figure notes and stories."""

from __future__ import annotations

from .claims import holds

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
        f"finite step (lr {study.default_lr:g}): measured / predicted, ratio estimator per run, "
        f"mean over {study.agreement.n} runs "
        f"(bootstrap over runs); {study.n_bad} of {study.n_probes} probes with a falling margin "
        "kept"
    )


def tiny_unit(study) -> str:
    """The unit of the tiny-step rows (04.simulation, 04.simulation.exact)."""
    return (
        f"measured / predicted at step {study.tiny_lr:g}, geometric mean per run, geometric mean "
        f"over {study.tiny_agreement.n} runs (seeds x initial |w|, t interval over runs); "
        f"{len(study.tiny['measured'])} probes"
    )


def share_unit(fb) -> str:
    """The unit of the row 04.gamma_share."""
    return (
        f"outliers' share of sum_i |dL/dgamma_i| / their share of the samples "
        f"({fb.population_share:.3f}) minus 1, mean over steps per seed, t over "
        f"{fb.share_excess.n} seeds"
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

    return (
        f"Derived ratio: {ratio}; with the batch mean following w: {ratio_centered_example} at "
        f"x = (2, 0, 0), xbar = (1, 0, 0). Simulation: log-log slope {probes.loglog_slope:.2f}; "
        f"tiny step, measured / (gamma/sigma)^2 {probes.tiny_agreement.fmt(2)} and measured / "
        f"exact first order {probes.tiny_exact.fmt(2)} over {probes.tiny_agreement.n} runs; "
        f"finite step (lr {probes.default_lr:g}) {probes.agreement.fmt(2)}; outliers "
        f"{fb.gamma_share:.3f} of the gradient on gamma against {fb.population_share:.3f} of "
        f"the samples; outlier memorization BN - no-BN "
        f"{fb.mem_gap.fmt(2)}."
    )


def most_channels_unit(study, est, arch: str | None = None) -> str:
    """The unit of the verdict row 'gamma/sigma > 1 in most channels' (with `arch`: the epochs
    its networks trained and how many hit the epoch cap unfitted, marked censored)."""
    out = (
        "share of a network's channels with |gamma|/sigma > 1 (running variance), mean over "
        f"{est.n} networks (seeds {study.seeds}), 95% t interval over the networks"
    )
    if arch is None:
        return out
    cens = sum(study.censored(arch))
    mark = f"; CENSORED: {cens} of {est.n} hit the epoch cap unfitted" if cens else ""
    return f"{out}; epochs used {study.epochs_used(arch)}{mark}"


def tracking_unit(decays, key: str) -> str:
    """The unit of a row 04.tracks."""
    from .gamma_sigma import MEASURES

    cens = sum(r["censored"] for r in decays.table())
    mark = f"; {cens} censored networks (epoch cap hit unfitted)" if cens else ""
    return (
        f"Spearman rank correlation of flip memorization and {MEASURES[key]} over weight "
        f"decays {decays.decays} per seed, mean with a t interval over {len(decays.seeds)} "
        f"seeds{mark}"
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


def recipe_lines(chosen: dict) -> str:
    """Per architecture: BN's recipe (`gamma_sigma.bn_recipes`): the protocol, the learning rate
    and the fit rule with its epoch cap."""
    out = []
    for arch, r in chosen.items():
        fit = r.base.fit_level
        rule = f"to clean training accuracy {fit:g}, cap {r.base.epochs} epochs"
        rule = rule if fit is not None else f"{r.base.epochs} epochs"
        out.append(f"{arch}: BN lr {r.lr('bn'):.3g}, {rule} ({r.name})")
    return "\n".join(out)


def epochs_lines(study) -> str:
    """Per architecture and label kind: the epochs each seed's network trained, censored ones
    marked."""
    out = []
    for arch in study.archs:
        for labels in ("flip", "none"):
            if labels == "none" and arch not in study.clean_archs():
                continue
            used, cens = study.epochs_used(arch, labels), study.censored(arch, labels)
            seeds = ", ".join(
                f"seed {s}: {e}" + (" (censored)" if c else "")
                for s, e, c in zip(study.seeds, used, cens)
            )
            kind = "flipped labels" if labels == "flip" else "clean labels"
            out.append(f"{arch}, {kind}: epochs {seeds}")
    return "\n".join(out)


def scale_free_table(study):
    """`TrainedStudy.scale_free_table` of every architecture as one table."""
    import pandas as pd

    rows = [{"arch": a, **r} for a in study.archs for r in study.scale_free_table(a)]
    return pd.DataFrame(rows).round(4)


def decay_table(decays):
    """`DecayStudy.table` as a table."""
    import pandas as pd

    df = pd.DataFrame(decays.table())
    rest = [c for c in df.columns if c != "weight_decay"]  # 5e-05 must not round to 0.0001
    df[rest] = df[rest].round(4)
    return df


def tracking_story(rows) -> str:
    """Which reading memorization of the flips follows across weight decays, from the rows
    04.tracks: each one's rank correlation and verdict, then the reading(s) that track it, or
    neither."""
    tracks = [r for r in rows if r.id == "04.tracks"]
    if not tracks:
        return "No weight-decay study (tracking_decays=[])."
    parts = [
        f"{r.fields['measure']}: Spearman {r.measured:+.2f} [{r.lo:+.2f}, {r.hi:+.2f}] "
        f"({r.verdict})"
        for r in tracks
    ]
    held = [r.fields["measure"] for r in tracks if holds(r.verdict)]
    end = "it follows " + " and ".join(held) if held else "it follows none of them by this rule"
    return f"Across weight decays, memorization of the flips against {'; '.join(parts)}: {end}."
