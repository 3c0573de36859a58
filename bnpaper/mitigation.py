"""Mitigation: bound gamma/sigma of every BatchNorm channel during training (the drop-in API).

The paper's theory says BN multiplies an outlier's per-step margin growth by (gamma/sigma)^2,
gamma being BN's learned scale and sigma the batch standard deviation of the channel's input.
Two ways to bound the ratio, both generic (any torch model whose BN layers are
`torch.nn.modules.batchnorm._BatchNorm`: torchvision's ResNets, packed shadow models with K*C
channels, ...):

- `GammaSigmaRegularizer(lam, tau, model=model)`: a penalty
      lam * sum over BN channels c of relu(|gamma_c| / sigma_c - tau)^2
  with sigma_c = sqrt(Var_batch[x_c] + eps) of the *current* training batch (BN's own
  normalizer), captured by forward hooks during the forward pass, so the penalty is
  differentiable in gamma and in everything that produced x. In your own loop, one call per
  step: `loss = criterion(model(x), y) + reg()` (README). In `bnpaper.train.fit` it is
  `fit(..., regularizer=reg)`; `reg.remove()` (or leaving a `with` block) removes the hooks.
- `GammaSigmaProjection(tau)`: after each optimizer step, clip gamma_c to
  [-tau * sigma_c, tau * sigma_c] with sigma_c from the running statistics
  (`fit(..., after_step=proj)`).

The regularizer taken apart (`METHODS` "penalty_gamma", "penalty_sigma", "gamma_bound"): the
same penalty with sigma detached (its gradient moves gamma only), with gamma detached (it moves
only the weights feeding BN, through sigma), and `GammaBound`, a bound on |gamma| itself.

And one alternative a practitioner would try instead: `GammaDecay(lam)`, an extra L2 penalty
lam/2 * sum gamma_c^2 on the BN scales only (weight decay on gamma, on top of the optimizer's).

`gamma_sigma(model)` returns the per-channel ratios (running statistics) for histograms;
`MitigationConfig` names a mitigation in a cache key and `fit_mitigated(split, cfg, mit)` is
`train.fit` with its hooks (removed afterwards); `relative_reductions(base, mitigated)` is the
per-seed share of the baseline's memorization that a mitigation removes. Notebook 05's
experiment lives in `variants`, `selection`, `frontier`, `reduction` and `mitigation_lira`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from .config import ConfigError, check_number

_BatchNorm = nn.modules.batchnorm._BatchNorm


def _has_gamma(m: nn.Module) -> bool:
    return isinstance(m, _BatchNorm) and m.weight is not None


def affine_bn_layers(model: nn.Module) -> list[tuple[str, _BatchNorm]]:
    """(name, layer) of every BatchNorm layer of `model` that has a learned gamma."""
    return [(n, m) for n, m in model.named_modules() if _has_gamma(m)]


def batch_sigma(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Per-channel batch standard deviation sqrt(Var[x] + eps) as BN computes it in training
    (biased variance over every dimension but the channel dimension 1): shape (C,)."""
    dims = [0] + list(range(2, x.dim()))
    return torch.sqrt(x.var(dim=dims, unbiased=False) + eps)


def running_sigma(bn: _BatchNorm) -> torch.Tensor:
    """sqrt(running_var + eps) of a BN layer: shape (C,)."""
    if bn.running_var is None:
        raise ConfigError(
            f"{type(bn).__name__} has track_running_stats=False: no running "
            "statistics to project with; use the penalty (batch statistics)"
        )
    return torch.sqrt(bn.running_var + bn.eps)


PARTS = ("both", "gamma", "sigma")  # which factor of |gamma|/sigma the penalty's gradient moves


def ratio_terms(
    gamma: torch.Tensor, sigma: torch.Tensor, tau: float, part: str = "both"
) -> torch.Tensor:
    """relu(|gamma_c| / sigma_c - tau)^2 per channel, its gradient through `part`:

    - "both": through gamma and sigma (the regularizer);
    - "gamma": sigma detached, relu(|gamma_c| / sg(sigma_c) - tau)^2: the same value, a gradient on
      gamma only (the weights feeding BN get none from it);
    - "sigma": gamma detached, relu(sg(|gamma_c|) / sigma_c - tau)^2: the same value, a gradient
      through sigma only, i.e. on the weights feeding BN (and the layers before), none on gamma.
    sg is stop-gradient (`detach`)."""
    if part not in PARTS:
        raise ConfigError(f"part={part!r} is not allowed; choose one of {list(PARTS)}")
    g = gamma.abs().detach() if part == "sigma" else gamma.abs()
    s = sigma.detach() if part == "gamma" else sigma
    return torch.relu(g / s - tau).pow(2)


def ratio_penalty(
    gamma: torch.Tensor, sigma: torch.Tensor, tau: float, part: str = "both"
) -> torch.Tensor:
    """sum_c relu(|gamma_c| / sigma_c - tau)^2, differentiable through `part` (`ratio_terms`)."""
    return ratio_terms(gamma, sigma, tau, part).sum()


class GammaSigmaRegularizer:
    """The penalty lam * sum_c relu(|gamma_c|/sigma_c - tau)^2 over every BN channel.

    Hooks: with `model` given, one forward hook on each of its BN layers; without, one global
    module forward hook (`torch.nn.modules.module.register_module_forward_hook`) that sees the
    BN layers of any model built later, e.g. inside `bnpaper.train.fit`. Either way a hook only
    records the batch sigma of BN layers in training mode, and `remove()` (or leaving the `with`
    block) removes every hook. Calling `reg(model)` consumes the sigmas captured in the last
    forward pass of `model`; it raises if that model ran no training-mode forward pass since the
    last call (a penalty computed from stale or absent statistics would be silently wrong).
    Built with `model`, `reg()` is that model's penalty (the drop-in form: one call per step).

    `part` takes the regularizer apart (`ratio_terms`): "both" (the regularizer), "gamma" (sigma
    detached: a penalty that moves gamma only), "sigma" (gamma detached: one that moves only what
    produced sigma, the weights feeding BN). `detach_sigma=True` is `part="gamma"`.
    """

    def __init__(
        self,
        lam: float,
        tau: float,
        model: nn.Module | None = None,
        detach_sigma: bool = False,
        part: str = "both",
    ):
        check_number("lam", lam, 0.0, None)
        check_number("tau", tau, 0.0, None, lo_open=True)
        part = "gamma" if detach_sigma else part
        if part not in PARTS:
            raise ConfigError(f"part={part!r} is not allowed; choose one of {list(PARTS)}")
        self.lam, self.tau, self.part = float(lam), float(tau), part
        self.detach_sigma = part == "gamma"
        self._sigma: "weakref.WeakKeyDictionary[nn.Module, torch.Tensor]" = (
            weakref.WeakKeyDictionary()
        )
        self._handles: list[RemovableHandle] = []
        self._model = weakref.ref(model) if model is not None else None
        if model is not None:
            layers = affine_bn_layers(model)
            if not layers:
                raise ConfigError(
                    "GammaSigmaRegularizer: the model has no BatchNorm layer with "
                    "a learned gamma (norm='bn' is needed)"
                )
            self._handles = [m.register_forward_hook(self._hook) for _, m in layers]
        else:
            self._handles = [nn.modules.module.register_module_forward_hook(self._hook)]

    def _hook(self, module: nn.Module, inputs: tuple, output) -> None:
        if module.training and _has_gamma(module):
            s = batch_sigma(inputs[0], module.eps)
            self._sigma[module] = s.detach() if self.detach_sigma else s

    @property
    def active(self) -> bool:
        return bool(self._handles)

    def remove(self) -> None:
        """Remove every hook and drop the captured statistics."""
        self._model = None
        for h in self._handles:
            h.remove()
        self._handles = []
        self._sigma = weakref.WeakKeyDictionary()

    def __enter__(self) -> "GammaSigmaRegularizer":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __call__(self, model: nn.Module | None = None) -> torch.Tensor:
        """The penalty for the batch `model` (default: the model given at construction) has just
        seen: a scalar tensor to add to the loss before `backward()`."""
        layers = self._layers(model)
        total = layers[0][1].weight.new_zeros(())
        for _, m in layers:
            total = total + ratio_penalty(m.weight, self._sigma.pop(m), self.tau, self.part)
        return self.lam * total

    def _layers(self, model: nn.Module | None) -> list[tuple[str, _BatchNorm]]:
        """The affine BN layers of `model` (default: the model given at construction), each with
        its batch sigma captured."""
        if not self._handles:
            raise RuntimeError("GammaSigmaRegularizer was removed; create a new one")
        if model is None:
            model = self._model() if self._model is not None else None
            if model is None:
                raise TypeError(
                    "GammaSigmaRegularizer(): built without a model, it needs the "
                    "model as argument, reg(model)"
                )
        layers = affine_bn_layers(model)
        if not layers:
            raise ConfigError(
                "GammaSigmaRegularizer: the model has no BatchNorm layer with a "
                "learned gamma (norm='bn' is needed)"
            )
        missing = [n for n, m in layers if m not in self._sigma]
        if missing:
            raise RuntimeError(
                f"no batch statistics captured for BN layer(s) {missing}: call "
                "the regularizer right after a training-mode forward pass"
            )
        return layers

    def per_member(self, model: nn.Module, k: int) -> torch.Tensor:
        """The penalty of each of the `k` members of a packed `model` (each BN layer's channels in
        k equal blocks, member by member): shape (k,); its sum is `reg(model)`."""
        total = 0
        for _, m in self._layers(model):
            terms = ratio_terms(m.weight, self._sigma.pop(m), self.tau, self.part)
            total = total + terms.view(k, -1).sum(1)
        return self.lam * total

    def __repr__(self) -> str:
        return f"GammaSigmaRegularizer(lam={self.lam}, tau={self.tau}, part={self.part!r})"


class GammaSigmaProjection:
    """After an optimizer step: clip |gamma_c| <= tau * sqrt(running_var_c + eps) in every BN
    layer of the model (in place, no gradient)."""

    def __init__(self, tau: float):
        check_number("tau", tau, 0.0, None, lo_open=True)
        self.tau = float(tau)

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> None:
        for _, m in affine_bn_layers(model):
            bound = self.tau * running_sigma(m)
            m.weight.copy_(torch.maximum(torch.minimum(m.weight, bound), -bound))

    def __repr__(self) -> str:
        return f"GammaSigmaProjection(tau={self.tau})"


class GammaDecay:
    """An extra L2 penalty on the BN scales only: lam/2 * sum_c gamma_c^2 over every affine BN
    layer (weight decay on gamma, added to the loss, on top of the optimizer's weight decay)."""

    def __init__(self, lam: float):
        check_number("lam", lam, 0.0, None)
        self.lam = float(lam)

    def __call__(self, model: nn.Module) -> torch.Tensor:
        layers = affine_bn_layers(model)
        if not layers:
            raise ConfigError("GammaDecay: the model has no BatchNorm layer with a learned gamma")
        return 0.5 * self.lam * sum(m.weight.pow(2).sum() for _, m in layers)

    def per_member(self, model: nn.Module, k: int) -> torch.Tensor:
        """The penalty of each of the `k` members of a packed `model`: shape (k,)."""
        layers = affine_bn_layers(model)
        return 0.5 * self.lam * sum(m.weight.pow(2).view(k, -1).sum(1) for _, m in layers)

    def remove(self) -> None:
        """Nothing to remove (no hooks); for the same use as the regularizer."""

    def __repr__(self) -> str:
        return f"GammaDecay(lam={self.lam})"


class GammaBound:
    """The gamma-only penalty: lam * sum_c relu(|gamma_c| - tau)^2 over every affine BN layer, a
    bound on |gamma| itself that never reads sigma (so it cannot move the weights feeding BN)."""

    def __init__(self, lam: float, tau: float):
        check_number("lam", lam, 0.0, None)
        check_number("tau", tau, 0.0, None, lo_open=True)
        self.lam, self.tau = float(lam), float(tau)

    @staticmethod
    def _layers(model: nn.Module) -> list[tuple[str, _BatchNorm]]:
        layers = affine_bn_layers(model)
        if not layers:
            raise ConfigError("GammaBound: the model has no BatchNorm layer with a learned gamma")
        return layers

    def __call__(self, model: nn.Module) -> torch.Tensor:
        terms = [torch.relu(m.weight.abs() - self.tau).pow(2).sum() for _, m in self._layers(model)]
        return self.lam * sum(terms)

    def per_member(self, model: nn.Module, k: int) -> torch.Tensor:
        """The penalty of each of the `k` members of a packed `model`: shape (k,)."""
        terms = [
            torch.relu(m.weight.abs() - self.tau).pow(2).view(k, -1).sum(1)
            for _, m in self._layers(model)
        ]
        return self.lam * sum(terms)

    def remove(self) -> None:
        """Nothing to remove (no hooks)."""

    def __repr__(self) -> str:
        return f"GammaBound(lam={self.lam}, tau={self.tau})"


@torch.no_grad()
def gamma_sigma(model: nn.Module) -> dict[str, torch.Tensor]:
    """|gamma_c| / sqrt(running_var_c + eps) per channel, for each affine BN layer: {name: (C,)}."""
    return {
        n: (m.weight.abs() / running_sigma(m)).detach().cpu() for n, m in affine_bn_layers(model)
    }


Hooks = tuple[
    "GammaSigmaRegularizer | GammaDecay | GammaBound | None", "GammaSigmaProjection | None"
]


@dataclass(frozen=True)
class Method:
    """One mitigation method: the `MitigationConfig` fields it uses (in this order in its cache
    key) and its hooks for `train.fit` (regularizer, after_step) given the config and a model."""

    params: tuple[str, ...]
    hooks: Callable[["MitigationConfig", nn.Module | None], Hooks]


METHODS: dict[str, Method] = {
    "none": Method((), lambda m, model: (None, None)),
    "penalty": Method(
        ("lam", "tau"), lambda m, model: (GammaSigmaRegularizer(m.lam, m.tau, model=model), None)
    ),
    # the regularizer taken apart (`ratio_terms`): sigma detached, gamma detached, |gamma| alone
    "penalty_gamma": Method(
        ("lam", "tau"),
        lambda m, model: (GammaSigmaRegularizer(m.lam, m.tau, model=model, part="gamma"), None),
    ),
    "penalty_sigma": Method(
        ("lam", "tau"),
        lambda m, model: (GammaSigmaRegularizer(m.lam, m.tau, model=model, part="sigma"), None),
    ),
    "gamma_bound": Method(("lam", "tau"), lambda m, model: (GammaBound(m.lam, m.tau), None)),
    "projection": Method(("tau",), lambda m, model: (None, GammaSigmaProjection(m.tau))),
    "gamma_decay": Method(("lam",), lambda m, model: (GammaDecay(m.lam), None)),
}


@dataclass(frozen=True)
class MitigationConfig:
    """Which mitigation a training run uses: method (a key of METHODS), lam (penalty weight; for
    "gamma_decay" the L2 coefficient on gamma), tau (bound on gamma/sigma). `as_dict()` is part
    of a cache key."""

    method: str = "none"
    lam: float = 0.0
    tau: float = 1.0

    def __post_init__(self):
        if self.method not in METHODS:
            raise ConfigError(
                f"method={self.method!r} is not allowed; choose one of {list(METHODS)}"
            )
        check_number("lam", self.lam, 0.0, None)
        check_number("tau", self.tau, 0.0, None, lo_open=True)

    def as_dict(self) -> dict:
        """The method and the parameters it uses (part of a cache key)."""
        return {"method": self.method, **{k: getattr(self, k) for k in METHODS[self.method].params}}

    def hooks(self, model: nn.Module | None = None) -> Hooks:
        """(regularizer, after_step) for `bnpaper.train.fit` (the penalty's hooks on `model`'s BN
        layers, or, without a model, on every module built later); remove the regularizer after
        use."""
        return METHODS[self.method].hooks(self, model)


def fit_mitigated(split, cfg, mit: MitigationConfig, **kw):
    """`bnpaper.train.fit(split, cfg, **kw)` with the regularizer / projection / gamma decay of
    `mit`; the regularizer's hooks are removed afterwards, also when training fails. Every
    variant of a comparison (method "none" included) goes through this one trainer."""
    from .train import fit

    reg, proj = mit.hooks()
    try:
        return fit(split, cfg, regularizer=reg, after_step=proj, **kw)
    finally:
        if reg is not None:
            reg.remove()


def relative_reductions(base: Sequence[float], mitigated: Sequence[float]) -> np.ndarray:
    """Per paired run: 1 - mitigated / base, the share of the baseline's memorization that the
    mitigation removes (1: all of it, 0: none, < 0: more memorization). A baseline of 0 leaves
    nothing to reduce and has no defined share: it raises."""
    b, m = np.asarray(base, np.float64), np.asarray(mitigated, np.float64)
    if b.shape != m.shape:
        raise ValueError(f"paired values need equal shapes, got {b.shape} and {m.shape}")
    if np.any(b <= 0):
        raise ValueError(f"the baseline memorization must be > 0 in every run, got {b.tolist()}")
    return 1.0 - m / b
