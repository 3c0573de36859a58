"""Per-layer rules of per-sample gradient norms: one rule per layer type, registered in `RULES`.

A rule reads the squared l2 norm of each sample's gradient on its layer's own parameters from
what the forward pass recorded (`Record`: the layer's input and output) and the gradient at the
layer's output, in two settings, each returning {own parameter name: squared norms}:
  `per_sample`  samples independent (given the normalization statistics): g (B, ...) is the
                gradient of the summed loss at the output, row i is sample i's alone;
  `coupled`     K loss terms that each reach every sample (train-mode BN): g (K, B, ...) holds
                each term's cotangent at the output, and term k's weight gradient is the sum
                over samples j of g[k, j] (x) input_j, contracted from `prepare`'s tensors.
`Recorder` hooks a model's forward pass and applies each layer's rule (`rule_for`) for the
methods of `bnpaper.grads`; `tests/test_grads.py` checks every registered rule against a naive
loop of single backward passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .models import ScaledStdConv2d


@dataclass(frozen=True)
class Record:
    """What the forward pass kept of one layer: its input `a` and output `out` (detached), and
    `tap`, the output of the submodule `Rule.tap` names (None if the rule needs none)."""

    layer: nn.Module
    a: torch.Tensor
    out: torch.Tensor
    tap: torch.Tensor | None = None


class Rule:
    """How one layer type's per-sample gradient norms are read (see the module docstring)."""

    groups: dict[str, str] = {}  # own parameter name -> group (`grads.GROUPS`); else "other"

    def check(self, layer: nn.Module) -> None:
        """Raise NotImplementedError for a configuration of the layer the rule cannot read."""

    def tap(self, layer: nn.Module) -> nn.Module | None:
        """A submodule whose output the rule needs besides the layer's input and output."""
        return None

    def per_sample(self, rec: Record, g: torch.Tensor, batch_stats: bool) -> dict:
        """(B,) squared norms per own parameter, g: (B, ...) at the layer's output."""
        raise NotImplementedError

    def prepare(self, rec: Record, batch_stats: bool) -> tuple[torch.Tensor, ...]:
        """The recorded input as `coupled` contracts it (computed once per batch)."""
        return (rec.a,)

    def coupled(self, rec: Record, inputs: tuple, g: torch.Tensor) -> dict:
        """(K,) squared norms per own parameter of K loss terms, g: (K, B, ...) at the output."""
        raise NotImplementedError


RULES: dict[type, Rule] = {}


def register(*layer_types: type):
    """Class decorator: the rule (one instance) of `layer_types` and their subclasses."""

    def add(cls: type[Rule]) -> type[Rule]:
        for t in layer_types:
            RULES[t] = cls()
        return cls

    return add


def rule_for(layer: nn.Module) -> Rule | None:
    """The rule of the layer's type or of its nearest registered base class; None if none."""
    return next((RULES[t] for t in type(layer).__mro__ if t in RULES), None)


def trains(layer: nn.Module, name: str) -> bool:
    """True when the layer has a parameter `name` that requires a gradient."""
    p = getattr(layer, name, None)
    return p is not None and p.requires_grad


@register(nn.Linear)
class LinearRule(Rule):
    """y = x W^T + b, on (B, in) or (B, ..., in) inputs."""

    groups = {"weight": "weight", "bias": "bias"}

    def per_sample(self, rec: Record, g: torch.Tensor, batch_stats: bool) -> dict:
        b = g.shape[0]
        a2, g2 = rec.a.reshape(b, -1, rec.a.shape[-1]), g.reshape(b, -1, g.shape[-1])
        out = {}
        if trains(rec.layer, "weight"):
            if a2.shape[1] == 1:  # one position: the outer product's norm factorizes
                out["weight"] = a2[:, 0].pow(2).sum(1) * g2[:, 0].pow(2).sum(1)
            else:
                out["weight"] = torch.bmm(g2.transpose(1, 2), a2).pow(2).sum((1, 2))
        if trains(rec.layer, "bias"):
            out["bias"] = g2.sum(1).pow(2).sum(1)
        return out

    def prepare(self, rec: Record, batch_stats: bool) -> tuple[torch.Tensor, ...]:
        act = rec.a.reshape(-1, rec.a.shape[-1])  # (B*S, in)
        return (act, act @ act.T) if act.shape[0] < act.shape[1] else (act,)

    def coupled(self, rec: Record, inputs: tuple, g: torch.Tensor) -> dict:
        gk = g.reshape(g.shape[0], -1, g.shape[-1])  # (K, B*S, out)
        out = {}
        if trains(rec.layer, "weight"):
            if len(inputs) == 2:  # ghost norm: Gram matrices over the batch
                out["weight"] = (torch.bmm(gk, gk.transpose(1, 2)) * inputs[1]).sum((1, 2))
            else:
                out["weight"] = torch.matmul(gk.transpose(1, 2), inputs[0]).pow(2).sum((1, 2))
        if trains(rec.layer, "bias"):
            out["bias"] = gk.sum(1).pow(2).sum(1)
        return out


@register(nn.Conv2d)
class Conv2dRule(Rule):
    """A 2-d convolution (ungrouped), read through its unfolded input patches."""

    groups = {"weight": "weight", "bias": "bias"}

    def check(self, layer: nn.Module) -> None:
        if layer.groups != 1:
            raise NotImplementedError("grouped convolutions are not supported")

    def per_sample(self, rec: Record, g: torch.Tensor, batch_stats: bool) -> dict:
        out = {}
        if trains(rec.layer, "weight"):
            out["weight"] = _conv_weight_sq(rec.layer, rec.a, g)
        if trains(rec.layer, "bias"):
            out["bias"] = g.sum((2, 3)).pow(2).sum(1)
        return out

    def prepare(self, rec: Record, batch_stats: bool) -> tuple[torch.Tensor, ...]:
        conv = rec.layer
        cols = F.unfold(rec.a, conv.kernel_size, conv.dilation, conv.padding, conv.stride)
        return (cols.transpose(1, 2).reshape(-1, cols.shape[1]),)  # (B*L, C*kh*kw)

    def coupled(self, rec: Record, inputs: tuple, g: torch.Tensor) -> dict:
        k, b, o = g.shape[:3]
        gk = g.reshape(k, b, o, -1).transpose(1, 2).reshape(k, o, -1)  # (K, O, B*L)
        out = {}
        if trains(rec.layer, "weight"):
            out["weight"] = torch.matmul(gk, inputs[0]).pow(2).sum((1, 2))
        if trains(rec.layer, "bias"):
            out["bias"] = gk.sum(2).pow(2).sum(1)
        return out


def _conv_weight_sq(conv: nn.Conv2d, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Per-sample squared norm of a conv weight gradient from input a and output gradient g:
    ghost norm (Gram matrices over positions) or per-sample outer products, the cheaper."""
    b = a.shape[0]
    cols = F.unfold(a, conv.kernel_size, conv.dilation, conv.padding, conv.stride)  # (B, K, L)
    gl = g.reshape(b, g.shape[1], -1)  # (B, O, L)
    k, length, o = cols.shape[1], cols.shape[2], gl.shape[1]
    if length * length * (k + o) < length * k * o:
        ga = torch.bmm(cols.transpose(1, 2), cols)
        gg = torch.bmm(gl.transpose(1, 2), gl)
        return (ga * gg).sum((1, 2))
    return torch.bmm(gl, cols.transpose(1, 2)).pow(2).sum((1, 2))


class NormRule(Rule):
    """A normalization layer y = gamma x_hat + beta: gamma's gradient is g x_hat, beta's is g,
    each summed over the positions of a channel."""

    groups = {"weight": "gamma", "bias": "beta"}

    def normalized(self, layer: nn.Module, a: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        """x_hat of the layer for its recorded input a."""
        raise NotImplementedError

    def per_sample(self, rec: Record, g: torch.Tensor, batch_stats: bool) -> dict:
        xhat = self.normalized(rec.layer, rec.a, batch_stats)
        dims = tuple(i for i in range(g.dim()) if i != 1)[1:]  # positions (none for vectors)
        out = {}
        if trains(rec.layer, "weight"):
            out["weight"] = ((g * xhat).sum(dims) if dims else g * xhat).pow(2).sum(1)
        if trains(rec.layer, "bias"):
            out["bias"] = (g.sum(dims) if dims else g).pow(2).sum(1)
        return out

    def prepare(self, rec: Record, batch_stats: bool) -> tuple[torch.Tensor, ...]:
        return (self.normalized(rec.layer, rec.a, batch_stats),)

    def coupled(self, rec: Record, inputs: tuple, g: torch.Tensor) -> dict:
        dims = (1,) + tuple(range(3, g.dim()))  # samples and positions
        out = {}
        if trains(rec.layer, "weight"):
            out["weight"] = (g * inputs[0]).sum(dims).pow(2).sum(1)
        if trains(rec.layer, "bias"):
            out["bias"] = g.sum(dims).pow(2).sum(1)
        return out


def batch_stats_of(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and biased variance of a BN input a: (B, C, ...), as train-mode BN."""
    dims = [0] + list(range(2, a.dim()))
    return a.mean(dims, keepdim=True), a.var(dims, unbiased=False, keepdim=True)


@register(nn.modules.batchnorm._BatchNorm)
class BatchNormRule(NormRule):
    """BatchNorm: x_hat with its batch's statistics (train mode, or held fixed) or running ones."""

    def normalized(self, layer: nn.Module, a: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        if batch_stats or layer.running_mean is None:
            mean, var = batch_stats_of(a)
            return (a - mean) * torch.rsqrt(var + layer.eps)
        shape = (1, -1) + (1,) * (a.dim() - 2)
        mean, var = layer.running_mean.view(shape), layer.running_var.view(shape)
        return (a - mean) * torch.rsqrt(var + layer.eps)


@register(nn.GroupNorm)
class GroupNormRule(NormRule):
    """GroupNorm: x_hat over each sample's channel groups (no batch statistics)."""

    def normalized(self, layer: nn.Module, a: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        return F.group_norm(a, layer.num_groups, None, None, layer.eps)


@register(ScaledStdConv2d)
class ScaledStdConvRule(Rule):
    """A convolution with scaled weight standardization (`models.ScaledStdConv2d`):
    W_hat[o] = c[o] u[o], u[o] = (W[o] - mean W[o]) / sigma[o], c = gain * scale. The gradient
    on W_hat of one sample (or loss term) is the conv rule's outer product V (O, fan_in); it
    reaches the raw parameters through the standardization's Jacobian (exact, eps included):
        dW[o]    = c[o] / sigma[o] * (V[o] - mean(V[o]) - u[o] * mean(V[o] * u[o]))
        dgain[o] = scale * sum(V[o] * u[o])
    V is formed per sample (the Jacobian's per-channel factors forbid the ghost norm)."""

    groups = {"weight": "weight", "bias": "bias", "gain": "other"}

    def check(self, layer: nn.Module) -> None:
        if layer.groups != 1:
            raise NotImplementedError("grouped convolutions are not supported")

    def per_sample(self, rec: Record, g: torch.Tensor, batch_stats: bool) -> dict:
        conv = rec.layer
        cols = F.unfold(rec.a, conv.kernel_size, conv.dilation, conv.padding, conv.stride)
        v = torch.bmm(g.reshape(g.shape[0], g.shape[1], -1), cols.transpose(1, 2))  # (B, O, K)
        out = _standardized_sq(conv, v)
        if trains(conv, "bias"):
            out["bias"] = g.sum((2, 3)).pow(2).sum(1)
        return out

    def prepare(self, rec: Record, batch_stats: bool) -> tuple[torch.Tensor, ...]:
        return RULES[nn.Conv2d].prepare(rec, batch_stats)

    def coupled(self, rec: Record, inputs: tuple, g: torch.Tensor) -> dict:
        k, b, o = g.shape[:3]
        gk = g.reshape(k, b, o, -1).transpose(1, 2).reshape(k, o, -1)  # (K, O, B*L)
        out = _standardized_sq(rec.layer, torch.matmul(gk, inputs[0]))
        if trains(rec.layer, "bias"):
            out["bias"] = gk.sum(2).pow(2).sum(1)
        return out


def _standardized_sq(conv: ScaledStdConv2d, v: torch.Tensor) -> dict:
    """Squared norms of the raw weight's and the gain's gradients from gradients v (N, O, K)
    on the standardized weight (see `ScaledStdConvRule`)."""
    with torch.no_grad():
        u, sigma = conv.standardization(conv.weight.detach())
        vu = v * u
        out = {}
        if trains(conv, "weight"):
            c = conv.gain.detach().reshape(-1, 1) * conv.scale / sigma  # (O, 1)
            dw = v - v.mean(2, keepdim=True) - u * vu.mean(2, keepdim=True)
            out["weight"] = (dw * c).pow(2).sum((1, 2))
        if trains(conv, "gain"):
            out["gain"] = (vu.sum(2) * conv.scale).pow(2).sum(1)
    return out


# ---------------------------------------------------------------- recording a forward pass
def param_groups(model: nn.Module) -> dict[str, str]:
    """parameter name -> group, for every trainable parameter of `model` (its layer's rule
    names the group; parameters of layers without a rule are "other")."""
    out = {}
    for mname, mod in model.named_modules():
        rule = rule_for(mod)
        for pname, p in mod.named_parameters(recurse=False):
            if p.requires_grad:
                full = f"{mname}.{pname}" if mname else pname
                out[full] = rule.groups.get(pname, "other") if rule else "other"
    return out


def accumulate(sq: dict[str, torch.Tensor], group: str, v: torch.Tensor) -> None:
    """Add v to the squared norms of `group` in sq."""
    sq[group] = sq[group] + v if group in sq else v


class Recorder:
    """Forward hooks that keep, for every layer with trainable parameters of its own, what its
    rule (`grad_rules`) needs (`Record`) and its output, whose gradient the caller takes."""

    def __init__(self, model: nn.Module, batch_stats: bool = False, fixed_stats: bool = False):
        """batch_stats: BN layers normalize with their batch's statistics (train mode, or
        `fixed_stats`: eval-mode BN outputs replaced by batch-normalized ones whose mean and
        variance are constants for autograd)."""
        self.batch_stats = batch_stats or fixed_stats
        self.records: list[tuple[str, Rule, Record]] = []
        self.outputs: list[torch.Tensor] = []
        self.taps: dict[int, torch.Tensor] = {}
        self.prepared: dict[int, tuple[torch.Tensor, ...]] = {}  # coupled contractions' inputs
        self.groups = param_groups(model)
        trained = [
            (name, layer, rule_for(layer))
            for name, layer in model.named_modules()
            if any(p.requires_grad for p in layer.parameters(recurse=False))
        ]
        for _, layer, rule in trained:  # every layer checked before any hook is attached
            if rule is None:
                raise NotImplementedError(
                    f"per-sample gradients of {type(layer).__name__} parameters are not supported"
                )
            rule.check(layer)
        self.handles = fix_batch_statistics(model) if fixed_stats else []
        for name, layer, rule in trained:
            tap = rule.tap(layer)
            if tap is not None:
                self.handles.append(tap.register_forward_hook(self._tap_hook(layer)))
            self.handles.append(layer.register_forward_hook(self._hook(name, rule)))

    def _tap_hook(self, layer: nn.Module):
        def hook(mod, inp, out):
            self.taps[id(layer)] = out.detach()

        return hook

    def _hook(self, name: str, rule: Rule):
        def hook(layer, inp, out):
            self.outputs.append(out)  # its gradient is taken directly (no weight gradients needed)
            tap = self.taps.pop(id(layer), None)
            self.records.append((name, rule, Record(layer, inp[0].detach(), out.detach(), tap)))

        return hook

    def remove(self):
        for h in self.handles:
            h.remove()

    def _group(self, layer_name: str, param: str) -> str:
        return self.groups[f"{layer_name}.{param}" if layer_name else param]

    def squared_norms(self, gs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-sample squared norms per group from the gradients gs[layer]: (B, ...) of the
        summed loss at every recorded layer output (samples independent)."""
        sq: dict[str, torch.Tensor] = {}
        for (name, rule, rec), g in zip(self.records, gs):
            for param, v in rule.per_sample(rec, g, self.batch_stats).items():
                accumulate(sq, self._group(name, param), v)
        return sq

    def coupled_squared_norms(self, gs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Squared norms of K batch-coupled per-sample gradients from the cotangents
        gs[layer]: (K, B, ...) of K loss terms at every recorded layer output: loss term k's
        weight gradient is sum_j gs[k, j] (x) input_j (it reaches every sample j)."""
        sq: dict[str, torch.Tensor] = {}
        for i, ((name, rule, rec), g) in enumerate(zip(self.records, gs)):
            if i not in self.prepared:  # the layer inputs as the contractions use them, once
                self.prepared[i] = rule.prepare(rec, self.batch_stats)
            for param, v in rule.coupled(rec, self.prepared[i], g).items():
                accumulate(sq, self._group(name, param), v)
        return sq


def _fixed_stats_bn(mod: nn.Module, inp: tuple, out: torch.Tensor) -> torch.Tensor:
    """Forward hook: the BN output with its batch's statistics, held constant for autograd."""
    x = inp[0]
    mean, var = (t.detach().flatten() for t in batch_stats_of(x))
    return F.batch_norm(x, mean, var, mod.weight, mod.bias, False, 0.0, mod.eps)


def fix_batch_statistics(model: nn.Module) -> list:
    """Hooks (first in line) that make every BN layer of an eval-mode model normalize with its
    batch's statistics held constant ("batch_fixed"); returns the handles to remove."""
    return [
        m.register_forward_hook(_fixed_stats_bn, prepend=True)
        for m in model.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]
