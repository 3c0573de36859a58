"""Notebook 04's verdict rows: the theory's claims judged on the derivation, toy and networks."""

from __future__ import annotations

import dataclasses
import math

import sympy as sp

from . import theory_text
from .claims import Verdict, claim, holds, judge
from .derivation import derived_factor
from .gamma_sigma import MEASURES, DecayStudy, TrainedStudy, exp_estimate
from .stats import Estimate
from .toy_studies import FeedbackStudy, ProbeStudy


def loop_verdict(row: Verdict, gamma_row: Verdict, fb: FeedbackStudy) -> Verdict:
    """The paper's loop runs *through gamma*: a rise of (gamma/sigma)^2 with outliers counts as
    "reproduced" only when the claim it requires (claims.yaml `requires`: gamma grows with
    outliers) is reproduced too; a rise carried by the batch sigma is "inconclusive". The row
    says which of gamma and sigma drove the factor."""
    need = claim(row.id).get("requires")
    if need is not None and need != gamma_row.id:
        raise ValueError(f"{row.id} requires {need}, got the row of {gamma_row.id}")
    g, s = math.exp(fb.factor_gamma.value), math.exp(fb.factor_sigma.value)
    note = f"driven by {fb.driver}: x{g:.2f} from gamma times x{s:.2f} from sigma"
    verdict = row.verdict
    if row.verdict == "reproduced" and gamma_row.verdict != "reproduced":
        verdict = "inconclusive"
        note += "; gamma did not grow with outliers, so the rise is not the paper's loop"
    fields = {**row.fields, "driver": fb.driver, "requires_verdict": gamma_row.verdict}
    return dataclasses.replace(row, fields=fields).with_verdict(verdict, note)


def dropped_term(simplified: Verdict, exact: Verdict) -> Verdict:
    """The tiny-step row of the paper's (gamma/sigma)^2, with the plain reading when it is not
    reproduced while the exact first order (d sigma/dw kept) is: the simplification drops a
    term. The verdict itself stays as its test gave it."""
    if holds(simplified.verdict) or not holds(exact.verdict):
        return simplified
    why = (
        "the exact first order agrees (measured / exact "
        f"{exact.measured:.2f} [{exact.lo:.2f}, {exact.hi:.2f}]): the paper's simplification, "
        "batch statistics held fixed, drops the d sigma/dw term"
    )
    return simplified.with_verdict(simplified.verdict, why)


def toy_rows(ratio: sp.Expr, probes: ProbeStudy, fb: FeedbackStudy, **common) -> list[Verdict]:
    """The derivation's row (derived ratio / (gamma/sigma)^2, exactly 1 when they agree) and the
    toy's: the first order at a tiny step against (gamma/sigma)^2 (the verdict) and against the
    exact first order, the finite step's agreement, the outliers' share of the gradient on gamma,
    gamma with outliers, and the factor's rise (`loop_verdict`)."""
    one = derived_factor(ratio)
    derived = judge(
        "04.derivation",
        Estimate(one, one, one, 1),
        **common,
        unit="derived ratio / (gamma/sigma)^2 (exact, sympy)",
        clean_test_acc=None,
    )
    toy = {**common, "clean_test_acc": fb.test_acc}  # the toy's clean test accuracies
    tiny = {"unit": theory_text.tiny_unit(probes), **probes.tiny_fields()}
    agreement = judge("04.simulation", probes.tiny_agreement, **toy, **tiny)
    exact = judge("04.simulation.exact", probes.tiny_exact, **toy, **tiny)
    agreement = dropped_term(agreement, exact)
    finite = judge(
        "04.simulation.finite_step",
        probes.agreement,
        **toy,
        unit=theory_text.probe_unit(probes),
        **probes.row_fields(),
    )
    share = judge(
        "04.gamma_share",
        fb.share_excess,
        **toy,
        unit=theory_text.share_unit(fb),
        **fb.share_fields(),
    )
    gamma = judge(
        "04.gamma_feedback.toy",
        fb.gap_gamma,
        **toy,
        unit=theory_text.feedback_gamma_unit(fb),
        **fb.gamma_fields(),
    )
    rise = judge(
        "04.amplification.toy",
        exp_estimate(fb.factor_gap),
        **toy,
        unit=theory_text.feedback_factor_unit(fb),
        **fb.factor_fields(),
    )
    return [derived, agreement, exact, finite, share, gamma, loop_verdict(rise, gamma, fb)]


def unfitted(row: Verdict, censored: list[bool]) -> Verdict:
    """`row` read as inconclusive when any of its networks hit the epoch cap below the fit level
    (censored): the claims are about trained networks, and a network that has not fitted its
    data tests them neither way."""
    n = sum(censored)
    if not n:
        return row
    why = f"{n} of {len(censored)} networks hit the epoch cap unfitted (censored), not read at fit"
    return row.with_verdict("inconclusive", why)


def network_rows(study: TrainedStudy, noise_frac: float, **common) -> list[Verdict]:
    """Per architecture the share of a network's channels with |gamma|/sigma > 1, then per
    architecture with clean-label twins |gamma| flipped / clean labels (intervals over seeds).
    A row with a censored network reads inconclusive (`unfitted`)."""
    rows = []
    for arch in study.archs:  # the unit is a network: its share of channels, an interval over seeds
        e = study.most_channels(arch)
        rows.append(
            unfitted(
                judge(
                    "04.most_channels",
                    e,
                    arch=arch,
                    **common,
                    clean_test_acc={"bn": study.test_acc(arch)},
                    unit=theory_text.most_channels_unit(study, e, arch),
                    **study.most_fields(arch),
                ),
                study.censored(arch),
            )
        )
    for arch in study.clean_archs():  # pairs of networks from one seed: same init, images, order
        e = study.gamma_ratio(arch)
        acc = {"bn": study.test_acc(arch), "bn_clean_labels": study.test_acc(arch, "none")}
        row = judge(
            "04.gamma_noisy_vs_clean",
            e,
            arch=arch,
            **common,
            unit=theory_text.gamma_ratio_unit(noise_frac, e),
            **study.gamma_fields(arch),
            clean_test_acc=acc,
        )
        both = [a or b for a, b in zip(study.censored(arch), study.censored(arch, "none"))]
        rows.append(unfitted(row, both))
    return rows


def tracking_rows(decays: DecayStudy, **common) -> list[Verdict]:
    """Per reading of `gamma_sigma.MEASURES`: does memorization of the flips follow it across
    the weight decays (Spearman per seed, t over seeds)? A seed whose memorization or reading
    does not vary over the decays has no rank: the row is then inconclusive, whatever its
    test says. The nets' clean test accuracy: the mean over seeds at each decay."""
    acc = {f"wd {r['weight_decay']:g}": r["test_acc"] for r in decays.table()}
    rows = []
    for key, name in MEASURES.items():
        row = judge(
            "04.tracks",
            decays.tracking(key),
            measure=name,
            **common,
            clean_test_acc=acc,
            unit=theory_text.tracking_unit(decays, key),
            **decays.fields(key),
        )
        flat = decays.unranked(key)
        if flat:  # a seed with nothing to rank carries no evidence either way
            why = f"{flat} of {len(decays.seeds)} seeds without a rank (no spread over the decays)"
            row = row.with_verdict("inconclusive", why)
        rows.append(row)
    return rows


def verdict_rows(
    ratio: sp.Expr,
    probes: ProbeStudy,
    fb: FeedbackStudy,
    study: TrainedStudy,
    noise_frac: float,
    dataset: str,
    budget: str,
    decays: DecayStudy | None = None,
) -> list[Verdict]:
    """Every verdict row of notebook 04, in order: derivation, the first order at a tiny step
    (the paper's factor, the exact formula), the finite step, the outliers' share of the
    gradient on gamma, the toy's gamma and (gamma/sigma)^2 with / without outliers, the trained
    networks' rows, then (with `decays`) which reading memorization tracks."""
    common = {"dataset": dataset, "budget": budget}
    rows = toy_rows(ratio, probes, fb, **common) + network_rows(study, noise_frac, **common)
    return rows + (tracking_rows(decays, **common) if decays is not None else [])
