"""The paper's toy theory: symbolic derivation (sympy), a torch simulation with real batch
statistics, and gamma/sigma read from trained networks.

Toy model (one convolutional channel = one linear filter w on an input patch x in R^d):
  no-BN:  h = w.x + b                                  margin m = y * a * h
  BN:     h = gamma * (w.x - mu) / sigma + beta        margin m = y * a * h
with label y in {-1, +1}, classifier weight a, loss l(m) (decreasing in m), SGD step eta.
Batch statistics mu, sigma are constants during the step ("fixed statistics"), except in the
`centered=True` variant where mu = w.xbar follows w (xbar: batch mean input).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp
import torch
import torch.nn as nn
import torch.nn.functional as F

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
    grads = [sp.diff(ell(m), p) for p in theta]                 # chain rule through l
    grads = [g.replace(lambda e: isinstance(e, sp.Subs), lambda e: lp) for g in grads]
    stepped = m.subs({p: p - eta * g for p, g in zip(theta, grads)}, simultaneous=True)
    first = sp.diff(stepped - m, eta).subs(eta, 0) * eta        # Taylor term of order eta
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
        i = next(k for k, (yi, zi) in enumerate(zip(ys, zs)) if term.point[0] == yi * a * (gamma * zi + beta))
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


# ---------------------------------------------------------------- torch simulation
@dataclass(frozen=True)
class ToyConfig:
    """The simulated toy: Gaussian two-class data in R^d, a few mislabeled outliers."""
    d: int = 500              # input dimension (> n, so outliers can be memorized linearly)
    n_typical: int = 200      # correctly labeled samples
    n_outliers: int = 10      # mislabeled samples (label flipped)
    signal: float = 1.0       # norm of the class mean (along the first axis)
    noise: float = 1.0        # expected norm of the per-sample Gaussian noise
    batch_size: int = 32
    lr: float = 0.1           # plain SGD, all parameters
    steps: int = 400
    w_scale: float = 1.0      # norm of w at initialization
    seed: int = 0


def toy_data(cfg: ToyConfig, outliers: bool = True, device: str = "cpu"):
    """x: (N, d), y: (N,) in {-1, +1} (flipped for outliers), mask: (N,) bool outliers.
    The typical samples are identical with and without outliers (same seed)."""
    g = torch.Generator().manual_seed(cfg.seed)
    n = cfg.n_typical + cfg.n_outliers
    y_true = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    x = cfg.noise * torch.randn(n, cfg.d, generator=g) / cfg.d**0.5
    x[:, 0] += cfg.signal * y_true
    mask = torch.zeros(n, dtype=torch.bool)
    mask[cfg.n_typical:] = True
    y = torch.where(mask, -y_true, y_true)
    if not outliers:
        x, y, mask = x[~mask], y[~mask], mask[~mask]
    return x.to(device), y.to(device), mask.to(device)


class Toy(nn.Module):
    """One channel w, BN with real batch statistics (or a bias), a scalar classifier a."""

    def __init__(self, d: int, norm: str = "bn", w_scale: float = 1.0, seed: int = 0, eps: float = 1e-5):
        super().__init__()
        g = torch.Generator().manual_seed(seed + 7)
        w0 = torch.randn(d, generator=g)
        self.w = nn.Parameter(w_scale * w0 / w0.norm())
        self.norm, self.eps = norm, eps
        self.gamma = nn.Parameter(torch.ones(())) if norm == "bn" else None
        self.beta = nn.Parameter(torch.zeros(())) if norm == "bn" else None
        self.b = nn.Parameter(torch.zeros(())) if norm == "none" else None
        self.a = nn.Parameter(torch.ones(()))

    def stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = x @ self.w
        return z.mean(), (z.var(unbiased=False) + self.eps).sqrt()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pre-classifier activation h: (N,)."""
        z = x @ self.w
        if self.norm == "none":
            return z + self.b
        mu, sig = self.stats(x)
        return self.gamma * (z - mu) / sig + self.beta

    def margins(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y * self.a * self(x)


def toy_loss(m: torch.Tensor) -> torch.Tensor:
    """Logistic loss l(m) = log(1 + exp(-m)), per sample."""
    return F.softplus(-m)


def probe_margin_growth(model: Toy, xb: torch.Tensor, yb: torch.Tensor, i: int, lr: float) -> dict:
    """One SGD step on sample i's own loss, updating only w, in the BN model with real batch
    statistics (gradient through mu and sigma, statistics recomputed after the step), and in
    its function-matched no-BN twin (w' = gamma*w/sigma, b' = beta - gamma*mu/sigma: same
    margins, hence the same l'). Returns the two margin changes, their ratio ("measured") and
    three first-order predictions of it: fixed statistics (gamma/sigma)^2, mean following w
    (x -> x - xbar), and mean and sigma following w (x - xbar minus zhat_i * dsigma/dw)."""
    with torch.no_grad():
        mu, sig = model.stats(xb)
        gam, bet, a = model.gamma.detach(), model.beta.detach(), model.a.detach()
    w = model.w.detach().clone().requires_grad_(True)

    def m_bn(wv):
        z = xb @ wv
        zc = z - z.mean()
        s = (zc.pow(2).mean() + model.eps).sqrt()
        return yb[i] * a * (gam * zc[i] / s + bet)

    m0 = m_bn(w)
    (gw,) = torch.autograd.grad(toy_loss(m0), w)
    with torch.no_grad():
        dm_bn = float(m_bn(w - lr * gw) - m0)
        lprime = float(-torch.sigmoid(-m0))             # l'(m) of the logistic loss
        dm_twin = -lr * lprime * float(a**2 * xb[i].pow(2).sum())  # exact: the twin is linear
        fixed = float((gam / sig) ** 2)
        xc = xb - xb.mean(0)
        nx = float(xb[i].pow(2).sum())
        centered = fixed * float(xc[i].pow(2).sum()) / nx
        zh = xc @ w / sig                                   # normalized activations (B,)
        u = (zh[:, None] * xc).mean(0)                      # d sigma / d w = C w / sigma
        full = float(gam**2 * (xc[i] - zh[i] * u).pow(2).sum() / sig**2) / nx
    return {"dm_bn": dm_bn, "dm_twin": dm_twin, "measured": dm_bn / dm_twin,
            "predicted": fixed, "predicted_centered": centered, "predicted_full": full,
            "margin": float(m0.detach())}


def toy_train(cfg: ToyConfig, norm: str = "bn", outliers: bool = True, probe_every: int = 0,
              probe_lr: float | None = None, max_probes: int = 3, device: str = "cpu") -> dict:
    """Train the toy with minibatch SGD (all parameters) and record, per step: gamma, the batch
    sigma, (gamma/sigma)^2, outliers' share of sum_i |dL/dgamma_i|, mean outlier margin,
    accuracy on outliers (memorization) and on typical samples; with `probe_every`, also
    margin-growth probes for (up to `max_probes`) outliers in the batch every that many steps, with step
    `probe_lr` (default: the training lr; a tiny one isolates the first-order term)."""
    torch.manual_seed(cfg.seed)
    x, y, mask = toy_data(cfg, outliers, device)
    model = Toy(cfg.d, norm, cfg.w_scale, cfg.seed).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    rec: dict[str, list] = {k: [] for k in ("gamma", "sigma", "factor", "gamma_share",
                                            "outlier_margin", "outlier_acc", "typical_acc")}
    probes: list[dict] = []
    n = len(x)
    for t in range(cfg.steps):
        idx = torch.randperm(n, generator=g)[:cfg.batch_size].to(device)
        xb, yb, mb = x[idx], y[idx], mask[idx]
        if probe_every and norm == "bn" and t % probe_every == 0:
            for i in torch.nonzero(mb).flatten().tolist()[:max_probes]:
                probes.append({"step": t, **probe_margin_growth(model, xb, yb, i, probe_lr or cfg.lr)})
        m = model.margins(xb, yb)
        loss = toy_loss(m).mean()
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            if norm == "bn":
                mu, sig = model.stats(xb)
                zh = (xb @ model.w - mu) / sig
                contrib = (torch.sigmoid(-m) * zh).abs()    # |l'(m_i) y_i a zhat_i| / |a|
                share = float(contrib[mb].sum() / contrib.sum()) if mb.any() else 0.0
                rec["gamma"].append(float(model.gamma))
                rec["sigma"].append(float(sig))
                rec["factor"].append(float((model.gamma / sig) ** 2))
                rec["gamma_share"].append(share)
            mf = model.margins(x, y)                         # full-batch statistics
            rec["outlier_margin"].append(float(mf[mask].mean()) if mask.any() else float("nan"))
            rec["outlier_acc"].append(float((mf[mask] > 0).float().mean()) if mask.any() else float("nan"))
            rec["typical_acc"].append(float((mf[~mask] > 0).float().mean()))
        opt.step()
    return {"record": rec, "probes": probes, "outlier_share": float(mask.float().mean()),
            "model": model.eval()}


@torch.no_grad()
def toy_test_accuracy(model: Toy, cfg: ToyConfig, n: int = 1000) -> float:
    """Accuracy on fresh correctly labeled samples (one batch: BN uses its statistics)."""
    from dataclasses import replace

    x, y, _ = toy_data(replace(cfg, seed=cfg.seed + 10_000, n_typical=n, n_outliers=0), False)
    return float((model.margins(x, y) > 0).float().mean())


# ---------------------------------------------------------------- trained networks
@torch.no_grad()
def gamma_sigma(model: nn.Module, x: torch.Tensor, batch_size: int = 128, n_batches: int = 4
                ) -> list[dict]:
    """Per BN layer: |gamma|/sigma per channel (the factor is its square), sigma from the running variance and from batch
    statistics (median over `n_batches` batches of `x`: (N, C, H, W), normalized images)."""
    from .models import bn_layers

    layers = bn_layers(model)
    seen: dict[str, list[torch.Tensor]] = {name: [] for name, _ in layers}
    hooks = []
    for name, layer in layers:
        def hook(mod, inp, out, name=name):
            v = inp[0].transpose(0, 1).reshape(inp[0].shape[1], -1)
            seen[name].append((v.var(1, unbiased=False) + mod.eps).sqrt())
        hooks.append(layer.register_forward_hook(hook))
    was, moms = model.training, [layer.momentum for _, layer in layers]
    model.train()  # training-mode forward: each BN layer normalizes by these batch statistics
    for _, layer in layers:
        layer.momentum = 0.0  # ... while its running statistics stay unchanged
    for k in range(n_batches):
        model(x[k * batch_size:(k + 1) * batch_size])
    for h, (_, layer), mom in zip(hooks, layers, moms):
        h.remove()
        layer.momentum = mom
    model.train(was)
    out = []
    for name, layer in layers:
        gam = layer.weight.abs() if layer.weight is not None else torch.ones(layer.num_features)
        s_run = (layer.running_var + layer.eps).sqrt()
        s_batch = torch.stack(seen[name]).median(0).values
        out.append({"layer": name, "ratio_running": (gam / s_run).cpu(),
                    "ratio_batch": (gam / s_batch).cpu(), "gamma": gam.cpu()})
    return out


# ---------------------------------------------------------------- summaries
def ratio_by_run(run_ids, dm_bn, dm_predicted) -> tuple[list, list[float]]:
    """The ratio estimator of measured / predicted margin growth, one value per run:
    sum(dm_bn) / sum(dm_predicted) over the run's probes (dm_predicted = (gamma/sigma)^2 times
    the twin's margin change). No probe is dropped: one whose margin fell (dm_bn <= 0) lowers
    its run's ratio instead of vanishing from a log. Returns (run ids in sorted order, ratios)."""
    ids = [tuple(r) if np.ndim(r) else r for r in run_ids]
    num, den = np.asarray(dm_bn, float), np.asarray(dm_predicted, float)
    if not (len(ids) == len(num) == len(den)):
        raise ValueError("run_ids, dm_bn and dm_predicted need one entry per probe")
    if np.any(den <= 0):
        raise ValueError("predicted margin changes must be positive (a decreasing loss)")
    keys = sorted(set(ids))
    out = []
    for k in keys:
        sel = np.array([i == k for i in ids])
        out.append(float(num[sel].sum() / den[sel].sum()))
    return keys, out
