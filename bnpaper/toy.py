"""The toy model with real batch statistics: its data, one BN channel, training and probes."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

RECORDED = (
    "gamma",
    "sigma",
    "factor",
    "gamma_share",
    "outlier_margin",
    "outlier_acc",
    "typical_acc",
)  # the per-step records of `toy_train` (the first four: BN runs only)


@dataclass(frozen=True)
class ToyConfig:
    """The simulated toy: Gaussian two-class data in R^d, a few mislabeled outliers."""

    d: int = 500  # input dimension (> n, so outliers can be memorized linearly)
    n_typical: int = 200  # correctly labeled samples
    n_outliers: int = 10  # mislabeled samples (label flipped)
    signal: float = 1.0  # norm of the class mean (along the first axis)
    noise: float = 1.0  # expected norm of the per-sample Gaussian noise
    batch_size: int = 32
    lr: float = 0.1  # plain SGD, all parameters
    steps: int = 400
    w_scale: float = 1.0  # norm of w at initialization
    seed: int = 0


def toy_data(
    cfg: ToyConfig, outliers: bool = True, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x: (N, d), y: (N,) in {-1, +1} (flipped for outliers), mask: (N,) bool outliers.
    The typical samples are identical with and without outliers (same seed)."""
    g = torch.Generator().manual_seed(cfg.seed)
    n = cfg.n_typical + cfg.n_outliers
    y_true = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    x = cfg.noise * torch.randn(n, cfg.d, generator=g) / cfg.d**0.5
    x[:, 0] += cfg.signal * y_true
    mask = torch.zeros(n, dtype=torch.bool)
    mask[cfg.n_typical :] = True
    y = torch.where(mask, -y_true, y_true)
    if not outliers:
        x, y, mask = x[~mask], y[~mask], mask[~mask]
    return x.to(device), y.to(device), mask.to(device)


class Toy(nn.Module):
    """One channel w, BN with real batch statistics (or a bias), a scalar classifier a."""

    def __init__(
        self, d: int, norm: str = "bn", w_scale: float = 1.0, seed: int = 0, eps: float = 1e-5
    ):
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
        """The batch mean mu and standard deviation sigma of the channel w.x over `x`: (N, d)."""
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
        """Margins m = y * a * h: (N,)."""
        return y * self.a * self(x)


def toy_loss(m: torch.Tensor) -> torch.Tensor:
    """Logistic loss l(m) = log(1 + exp(-m)), per sample."""
    return F.softplus(-m)


@dataclass(frozen=True)
class Probe:
    """One margin-growth probe: the margin changes of the BN toy and its no-BN twin after one SGD
    step on the sample's own loss, their ratio and three first-order predictions of it."""

    dm_bn: float  # margin change with BN (real batch statistics)
    dm_twin: float  # margin change of the function-matched no-BN twin
    measured: float  # dm_bn / dm_twin
    predicted: float  # fixed statistics: (gamma/sigma)^2
    predicted_centered: float  # the batch mean follows w
    predicted_full: float  # mean and sigma follow w: the exact first order
    margin: float  # the sample's margin before the step
    step: int = -1  # the training step at which it was probed


def probe_margin_growth(
    model: Toy, xb: torch.Tensor, yb: torch.Tensor, i: int, lr: float, step: int = -1
) -> Probe:
    """One SGD step on sample i's own loss, updating only w, in the BN model with real batch
    statistics (gradient through mu and sigma, statistics recomputed after the step), and in
    its function-matched no-BN twin (w' = gamma*w/sigma, b' = beta - gamma*mu/sigma: same
    margins, hence the same l'). Returns the two margin changes, their ratio ("measured") and
    three first-order predictions of it: fixed statistics (gamma/sigma)^2, mean following w
    (x -> x - xbar), and mean and sigma following w (x - xbar minus zhat_i * dsigma/dw).
    Computed in float64: a tiny step's margin change would drown in float32 rounding."""
    xb, yb = xb.detach().double(), yb.detach().double()
    gam, bet = model.gamma.detach().double(), model.beta.detach().double()
    a = model.a.detach().double()
    w = model.w.detach().double().clone().requires_grad_(True)
    with torch.no_grad():
        z0 = xb @ w
        sig = (z0.var(unbiased=False) + model.eps).sqrt()

    def m_bn(wv):
        z = xb @ wv
        zc = z - z.mean()
        s = (zc.pow(2).mean() + model.eps).sqrt()
        return yb[i] * a * (gam * zc[i] / s + bet)

    m0 = m_bn(w)
    (gw,) = torch.autograd.grad(toy_loss(m0), w)
    with torch.no_grad():
        dm_bn = float(m_bn(w - lr * gw) - m0)
        lprime = float(-torch.sigmoid(-m0))  # l'(m) of the logistic loss
        dm_twin = -lr * lprime * float(a**2 * xb[i].pow(2).sum())  # exact: the twin is linear
        fixed = float((gam / sig) ** 2)
        xc = xb - xb.mean(0)
        nx = float(xb[i].pow(2).sum())
        centered = fixed * float(xc[i].pow(2).sum()) / nx
        zh = xc @ w / sig  # normalized activations (B,)
        u = (zh[:, None] * xc).mean(0)  # d sigma / d w = C w / sigma
        full = float(gam**2 * (xc[i] - zh[i] * u).pow(2).sum() / sig**2) / nx
    return Probe(dm_bn, dm_twin, dm_bn / dm_twin, fixed, centered, full, float(m0.detach()), step)


@dataclass(frozen=True)
class ToyRun:
    """One training run of the toy: per-step records (`RECORDED`), its probes, the outliers'
    share of the samples and the trained model (in eval mode)."""

    record: dict[str, list[float]]
    probes: list[Probe]
    outlier_share: float
    model: Toy
    tiny_probes: list[Probe] = field(default_factory=list)  # the same probes at step `tiny_lr`


def toy_train(
    cfg: ToyConfig,
    norm: str = "bn",
    outliers: bool = True,
    probe_every: int = 0,
    probe_lr: float | None = None,
    max_probes: int = 3,
    device: str = "cpu",
    tiny_lr: float | None = None,
) -> ToyRun:
    """Train the toy with minibatch SGD (all parameters) and record, per step: gamma, the batch
    sigma, (gamma/sigma)^2, outliers' share of sum_i |dL/dgamma_i|, mean outlier margin,
    accuracy on outliers (memorization) and on typical samples; with `probe_every`, also
    margin-growth probes of (up to `max_probes`) outliers in the batch every that many steps,
    with step `probe_lr` (default: the training lr; a tiny one isolates the first-order term),
    and with `tiny_lr` the same probes again at that step (`tiny_probes`, same batches)."""
    torch.manual_seed(cfg.seed)
    x, y, mask = toy_data(cfg, outliers, device)
    model = Toy(cfg.d, norm, cfg.w_scale, cfg.seed).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    rec: dict[str, list[float]] = {k: [] for k in RECORDED}
    probes: list[Probe] = []
    tiny: list[Probe] = []
    n = len(x)
    for t in range(cfg.steps):
        idx = torch.randperm(n, generator=g)[: cfg.batch_size].to(device)
        xb, yb, mb = x[idx], y[idx], mask[idx]
        if probe_every and norm == "bn" and t % probe_every == 0:
            for i in torch.nonzero(mb).flatten().tolist()[:max_probes]:
                probes.append(probe_margin_growth(model, xb, yb, i, probe_lr or cfg.lr, t))
                if tiny_lr is not None:
                    tiny.append(probe_margin_growth(model, xb, yb, i, tiny_lr, t))
        m = model.margins(xb, yb)
        loss = toy_loss(m).mean()
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            if norm == "bn":
                mu, sig = model.stats(xb)
                zh = (xb @ model.w - mu) / sig
                contrib = (torch.sigmoid(-m) * zh).abs()  # |l'(m_i) y_i a zhat_i| / |a|
                share = float(contrib[mb].sum() / contrib.sum()) if mb.any() else 0.0
                rec["gamma"].append(float(model.gamma))
                rec["sigma"].append(float(sig))
                rec["factor"].append(float((model.gamma / sig) ** 2))
                rec["gamma_share"].append(share)
            mf = model.margins(x, y)  # full-batch statistics
            rec["outlier_margin"].append(float(mf[mask].mean()) if mask.any() else float("nan"))
            rec["outlier_acc"].append(
                float((mf[mask] > 0).float().mean()) if mask.any() else float("nan")
            )
            rec["typical_acc"].append(float((mf[~mask] > 0).float().mean()))
        opt.step()
    return ToyRun(rec, probes, float(mask.float().mean()), model.eval(), tiny)


@torch.no_grad()
def toy_test_accuracy(model: Toy, cfg: ToyConfig, n: int = 1000) -> float:
    """Accuracy on fresh correctly labeled samples (one batch: BN uses its statistics)."""
    x, y, _ = toy_data(replace(cfg, seed=cfg.seed + 10_000, n_typical=n, n_outliers=0), False)
    return float((model.margins(x, y) > 0).float().mean())


@contextmanager
def one_thread():
    """Tiny tensors: threads only add overhead (and one thread keeps the runs bitwise stable)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
