"""The sympy derivation: symbolic results against hand-derived expectations, and their display."""

import sympy as sp
import pytest

from bnpaper import claims, stats, theory_text
from bnpaper.derivation import (
    a,
    derived_factor,
    equal,
    eta,
    full_update_terms,
    gamma,
    gamma_gradient,
    growth_ratio,
    logistic_loss_derivative,
    lp,
    margin_change,
    centered_example,
    sigma,
    sq_norm,
    x,
    xbar,
    zhat,
)

X2 = sq_norm(x)


def test_margin_change_without_bn_is_minus_eta_lprime_a2_x2():
    assert equal(margin_change("none"), -eta * lp * a**2 * X2)


def test_margin_change_with_bn_fixed_stats_has_gamma2_over_sigma2():
    assert equal(margin_change("bn"), -eta * lp * a**2 * gamma**2 / sigma**2 * X2)


def test_growth_ratio_simplifies_to_gamma_over_sigma_squared():
    assert equal(growth_ratio(), gamma**2 / sigma**2)


def test_checker_rejects_a_wrong_expected_ratio():
    assert not equal(growth_ratio(), gamma / sigma)
    assert not equal(growth_ratio(), gamma**2 / sigma)
    assert not equal(margin_change("bn"), -eta * lp * a**2 * X2)


def test_centered_variant_replaces_x_by_x_minus_mean():
    xc2 = sq_norm(x - xbar)
    assert equal(growth_ratio(centered=True), gamma**2 / sigma**2 * xc2 / X2)
    assert equal(growth_ratio(centered=True).subs({c: 0 for c in xbar}), gamma**2 / sigma**2)
    assert equal(centered_example(growth_ratio(centered=True)), gamma**2 / sigma**2 / 4)


def test_full_update_adds_gamma_beta_and_classifier_terms():
    from bnpaper.derivation import beta

    terms = full_update_terms("bn")
    z = zhat()
    k = -eta * lp
    assert equal(terms["w"], k * a**2 * gamma**2 / sigma**2 * X2)
    assert equal(terms["gamma"], k * a**2 * z**2)
    assert equal(terms["beta"], k * a**2)
    assert equal(terms["a"], k * (gamma * z + beta) ** 2)
    assert equal(margin_change("bn", ("w", "gamma", "beta", "a")), sum(terms.values()))


def test_margin_grows_when_loss_decreases_in_margin():
    # l' < 0 for a decreasing loss, so every first-order term is >= 0
    val = margin_change("bn").subs(
        {lp: -1, eta: sp.Rational(1, 10), a: 2, gamma: 3, sigma: 1, **{c: 1 for c in x}}
    )
    assert val == sp.Rational(1, 10) * 4 * 9 * 3


def test_gamma_gradient_is_sum_of_lprime_y_a_zhat():
    g, terms = gamma_gradient(3)
    ys, zs = sp.symbols("y_1:4", real=True), sp.symbols("zhat_1:4", real=True)
    lps = sp.symbols("ell'_1:4", real=True)
    expected = sum(ell * yy * a * z for ell, yy, z in zip(lps, ys, zs)) / 3
    assert equal(g, expected)
    assert equal(sum(terms), g)
    assert not equal(g, expected * gamma)


def test_logistic_loss_derivative_vanishes_for_fitted_samples_only():
    lprime = logistic_loss_derivative()
    m = sp.Symbol("m", real=True)
    assert equal(lprime, -1 / (1 + sp.exp(m)))
    assert sp.limit(lprime, m, sp.oo) == 0
    assert sp.limit(lprime, m, -sp.oo) == -1


def test_derived_factor_is_one_for_the_derivation_and_rejects_a_non_constant_quotient():
    assert derived_factor(growth_ratio()) == 1.0
    assert derived_factor(2 * gamma**2 / sigma**2) == 2.0
    with pytest.raises(ValueError, match="not a multiple"):
        derived_factor(gamma / sigma)
    row = claims.judge("04.derivation", stats.Estimate(1.0, 1.0, 1.0, 1))
    assert row.verdict == "reproduced"
    wrong = claims.judge("04.derivation", stats.Estimate(2.0, 2.0, 2.0, 1))
    assert wrong.verdict == "not reproduced"


def test_latex_writes_ell_prime_as_the_ell_symbol_and_show_displays_each_equation(monkeypatch):
    tex = theory_text.latex(margin_change("bn"))
    assert r"\ell'" in tex and "ell'" not in tex.replace(r"\ell'", "")
    assert r"\ell'_{1}" in theory_text.latex(gamma_gradient(3)[0])
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    theory_text.show_math({"a": gamma**2, "b": lp})
    theory_text.show_math("c", sigma)
    assert shown == ["a = \\gamma^{2}", "b = \\ell'", "c = \\sigma"]


def test_term_labels_name_each_parameter_group_in_latex():
    labels = theory_text.term_labels(full_update_terms("bn"), "BN")
    assert list(labels) == [
        r"\Delta m_{\text{BN}}[w]",
        r"\Delta m_{\text{BN}}[\gamma]",
        r"\Delta m_{\text{BN}}[\beta]",
        r"\Delta m_{\text{BN}}[a]",
    ]
