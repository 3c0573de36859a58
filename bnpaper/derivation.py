"""The toy theory derived with sympy: BN's margin growth (gamma/sigma)^2 and the gamma gradient.

Toy model (one convolutional channel = one linear filter w on an input patch x in R^d):
  no-BN:  h = w.x + b                                  margin m = y * a * h
  BN:     h = gamma * (w.x - mu) / sigma + beta        margin m = y * a * h
with label y in {-1, +1}, classifier weight a, loss l(m) (decreasing in m), SGD step eta.
Batch statistics mu, sigma are constants during the step ("fixed statistics"), except in the
`centered=True` variant where mu = w.xbar follows w (xbar: batch mean input).
"""

from __future__ import annotations

import sympy as sp

# ---------------------------------------------------------------- symbols
D = 3  # explicit vector dimension for the symbolic derivation (the result holds for any d)
x = sp.Matrix(sp.symbols(f"x_1:{D + 1}", real=True))
xbar = sp.Matrix(sp.symbols(f"xbar_1:{D + 1}", real=True))
w = sp.Matrix(sp.symbols(f"w_1:{D + 1}", real=True))
mu, b, beta, a, y, lp = sp.symbols("mu b beta a y ell'", real=True)
sigma, gamma, eta = sp.symbols("sigma gamma eta", positive=True)
ell = sp.Function("ell")
PARAMS_NO_BN = {"w": list(w), "b": [b], "a": [a]}
PARAMS_BN = {"w": list(w), "gamma": [gamma], "beta": [beta], "a": [a]}


def sq_norm(v: sp.Matrix) -> sp.Expr:
    """||v||^2 as an explicit sum of squares."""
    return sum(c**2 for c in v)


def zhat(centered: bool = False) -> sp.Expr:
    """BN's normalized activation of the sample: (w.x - mu)/sigma, or w.(x - xbar)/sigma."""
    return ((w.T * (x - xbar))[0] if centered else (w.T * x)[0] - mu) / sigma


def margin(norm: str, centered: bool = False) -> sp.Expr:
    """The sample's margin m = y*a*h for norm 'bn' or 'none'."""
    h = gamma * zhat(centered) + beta if norm == "bn" else (w.T * x)[0] + b
    return y * a * h


def _labels(expr: sp.Expr) -> sp.Expr:
    """Use y in {-1, +1}: y^2 = 1."""
    return sp.expand(expr).subs(y**2, 1)


def margin_change(norm: str, update: tuple[str, ...] = ("w",), centered: bool = False) -> sp.Expr:
    """First-order (in eta) change of the sample's margin after one SGD step on its own loss
    l(m), updating only the parameter groups in `update`; l'(m) appears as the symbol ell'."""
    params = PARAMS_BN if norm == "bn" else PARAMS_NO_BN
    m = margin(norm, centered)
    theta = [p for g in update for p in params[g]]
    grads = [sp.diff(ell(m), p) for p in theta]  # chain rule through l
    grads = [g.replace(lambda e: isinstance(e, sp.Subs), lambda e: lp) for g in grads]
    stepped = m.subs({p: p - eta * g for p, g in zip(theta, grads)}, simultaneous=True)
    first = sp.diff(stepped - m, eta).subs(eta, 0) * eta  # Taylor term of order eta
    return sp.factor(_labels(first))


def growth_ratio(centered: bool = False) -> sp.Expr:
    """Margin change with BN over without BN, both updating only w, at equal l'(m)."""
    return sp.simplify(margin_change("bn", ("w",), centered) / margin_change("none", ("w",)))


def full_update_terms(norm: str) -> dict[str, sp.Expr]:
    """Each parameter group's contribution to the first-order margin change when all of them
    take the SGD step (they add up: dm = sum over groups)."""
    params = PARAMS_BN if norm == "bn" else PARAMS_NO_BN
    return {g: margin_change(norm, (g,)) for g in params}


def gamma_gradient(n: int = 3) -> tuple[sp.Expr, list[sp.Expr]]:
    """d/dgamma of the batch loss (1/n) sum_i l(m_i), and the per-sample terms, in terms of
    each sample's label y_i, normalized activation zhat_i and loss derivative ell'_i."""
    ys = sp.symbols(f"y_1:{n + 1}", real=True)
    zs = sp.symbols(f"zhat_1:{n + 1}", real=True)
    lps = sp.symbols(f"ell'_1:{n + 1}", real=True)
    loss = sum(ell(yi * a * (gamma * zi + beta)) for yi, zi in zip(ys, zs)) / n
    g = sp.diff(loss, gamma)
    sub = {}
    for term in g.atoms(sp.Subs):  # each l'(m_i) -> ell'_i
        i = next(
            k
            for k, (yi, zi) in enumerate(zip(ys, zs))
            if term.point[0] == yi * a * (gamma * zi + beta)
        )
        sub[term] = lps[i]
    g = sp.expand(g.subs(sub))
    return g, [sp.expand(lps[i] * ys[i] * a * zs[i] / n) for i in range(n)]


def logistic_loss_derivative() -> sp.Expr:
    """l'(m) for the logistic loss l(m) = log(1 + exp(-m))."""
    m = sp.Symbol("m", real=True)
    return sp.simplify(sp.diff(sp.log(1 + sp.exp(-m)), m))


def equal(expr: sp.Expr, expected: sp.Expr) -> bool:
    """The symbolic check used by tests and notebook: simplify(expr - expected) == 0."""
    return sp.simplify(sp.expand(expr - expected)) == 0


def derived_factor(ratio: sp.Expr) -> float:
    """The derived growth ratio in units of the paper's (gamma/sigma)^2: 1.0 when they agree
    (the measured value of the derivation claim); raises if the quotient is not a number."""
    q = sp.simplify(ratio / (gamma / sigma) ** 2)
    if not q.is_number:
        raise ValueError(f"the derived ratio is not a multiple of (gamma/sigma)^2: {q}")
    return float(q)


def centered_example(ratio_centered: sp.Expr) -> sp.Expr:
    """The centered growth ratio at x = (2, 0, 0), xbar = (1, 0, 0): the batch mean following w
    shrinks the factor by |x - xbar|^2 / |x|^2 = 1/4."""
    point = {x[0]: 2, x[1]: 0, x[2]: 0, xbar[0]: 1, xbar[1]: 0, xbar[2]: 0}
    return ratio_centered.subs(point)


def summary(ratio: sp.Expr, ratio_centered: sp.Expr, gamma_grad: sp.Expr) -> dict[str, str]:
    """The derived expressions for results.json (sympy's plain text)."""
    return {
        "ratio": str(ratio),
        "ratio_centered": str(ratio_centered),
        "gamma_gradient": str(gamma_grad),
    }
