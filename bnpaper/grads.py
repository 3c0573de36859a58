"""Per-sample gradient l2 norms, over all parameters and per parameter group, with both
BatchNorm semantics.

Definitions (the loss of sample i is its *unreduced* cross-entropy l_i; with
`reduction="mean"` every norm is divided by the batch size B, i.e. it is sample i's
contribution to the gradient of the mean-reduced batch loss that SGD uses):

  "eval"   g_i = d l_i / d theta with BN using its running statistics: every sample is
           independent of the others (what a single query of the trained model sees).
  "batch"  g_i = d l_i / d theta inside its training batch, train-mode BN: the batch mean and
           variance depend on every sample, so l_i depends on the other samples' inputs and
           g_i carries the batch-coupled terms (the gradients that actually move the
           parameters sum to sum_i g_i).

  "batch_fixed"  the "batch" gradient with the batch mean and variance held constant (the
           simplification of the paper's theory: batch statistics fixed during a step): BN
           normalizes with its batch's statistics, but no gradient flows through them, so
           samples are independent given the statistics. Not a third semantics of the model:
           a fast approximation of "batch" whose error can be measured against it.

For models without BatchNorm (norm "none", "gn") all definitions coincide. Running statistics
are never changed by computing gradients.

Groups: "weight" (conv/linear weights), "gamma" and "beta" (norm-layer scale and shift), "bias"
(conv/linear biases), "other" (e.g. the ResNets' SkipInit residual scale).

Methods:
  "hooks"  one forward + one backward with module hooks, per-sample norms from activations and
           output gradients (ghost norms / per-sample outer products, whichever is cheaper);
           exact for "eval", "batch_fixed" and for models without BN.
  "func"   torch.func vmap(grad(functional_call)) (the reference vectorized method).
  "loop"   the naive loop of single backward passes (the test oracle).
  "exact"  any model: the cotangents of `chunk` loss terms at a time are pushed back to every
           layer's output in one backward with batched cotangents (K, B, ...) (every loss term
           reaches every sample through the batch statistics), then each loss term's weight
           gradient sum_j g[k, j] (x) a_j is contracted from the recorded layer inputs (GEMMs).
  "mixed"  LeNet-5 with BN: reverse mode with the max-pool sparsity down to conv2, forward
           mode for conv1 and BN1 (`bnpaper.lenet_grads`); the same numbers, several times
           faster than "exact".
  "auto"   "hooks" wherever samples are independent given the statistics ("eval",
           "batch_fixed", models without BN); for "batch" with BN the fastest exact method of
           the architecture, from the measured table `AUTO_BATCH` (`auto_method` says which).

Cost (bench/bench_grads.py): "hooks" about 1.0-2.5x a plain training step; "batch" with BN
about 20x for LeNet-5 (mixed, batch 128) and ResNet-20 (loop, batch 32), 6x for the DenseNet:
every one of the B loss terms reaches every sample through the batch statistics of every BN
layer after the first (2 x BN channels of them, 452 for LeNet-5, more than B), so its
cotangent is dense over the batch and there is no low-rank shortcut; `select` limits the work
to the samples that are needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from . import lenet_grads
from .config import check_choice, check_number

MODES = ("batch", "eval", "batch_fixed")
GROUPS = ("weight", "gamma", "beta", "bias", "other")
REDUCTIONS = ("sum", "mean")
METHODS = ("auto", "hooks", "func", "loop", "exact", "mixed")
_NORM_TYPES = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)

# The fastest exact method for mode "batch" with BN, per architecture (model class name).
# Measured with bench/bench_grads.py on this project's 2-core CPU (2 threads, 1x28x28 inputs,
# random inputs and initial weights), seconds per batch, the range over 3-4 runs of the bench
# (2026-12; runs spoiled by other processes' load left out), each the best of 2-3 rounds:
#   LeNet5    batch 128: mixed 0.13-0.15, loop 0.45-0.47, exact 0.55-0.60 (training step 0.008)
#   ResNet    ResNet-20, batch 32: loop 0.77-0.88, exact 1.04-1.44 (training step 0.04);
#             on 3x32x32 (one run): loop 1.22, exact 2.12
#   DenseNet  batch 32: loop 1.05-1.09, exact 1.77-2.81 (training step 0.06)
# "exact" batches K cotangents through every layer with vmap, which on CPU costs more than K
# plain backward passes (its contractions are the same GEMMs as the loop's weight gradients, so
# it cannot win by arithmetic); only LeNet's mixed mode beats the loop. A model class not in
# the table gets "loop", the measured winner wherever "mixed" does not apply.
AUTO_BATCH = {"LeNet5": "mixed", "ResNet": "loop", "DenseNet": "loop"}


@dataclass(frozen=True)
class GradNorms:
    """Per-sample gradient l2 norms: `total` (N,) and per group (N,) (absent groups omitted)."""

    total: torch.Tensor
    groups: dict[str, torch.Tensor]
    mode: str
    reduction: str

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {"total": self.total, **self.groups}


def param_groups(model: nn.Module) -> dict[str, str]:
    """parameter name -> group, for every trainable parameter of `model`."""
    out = {}
    for mname, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            full = f"{mname}.{pname}" if mname else pname
            if isinstance(mod, _NORM_TYPES):
                out[full] = "gamma" if pname == "weight" else "beta"
            elif isinstance(mod, (nn.Conv2d, nn.Linear)):
                out[full] = "weight" if pname == "weight" else "bias"
            else:
                out[full] = "other"
    return out


def has_batchnorm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def _loss_terms(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, y, reduction="none")


def _finish(
    sq: dict[str, torch.Tensor], mode: str, reduction: str, scale: torch.Tensor
) -> GradNorms:
    total = torch.zeros_like(next(iter(sq.values())))
    for v in sq.values():
        total = total + v
    groups = {g: v.clamp_min(0).sqrt() * scale for g, v in sq.items()}
    return GradNorms(total.clamp_min(0).sqrt() * scale, groups, mode, reduction)


def _accumulate(sq: dict[str, torch.Tensor], group: str, v: torch.Tensor) -> None:
    sq[group] = sq[group] + v if group in sq else v


# ----------------------------------------------------------------- hooks (no batch coupling)
def _conv_sq(mod: nn.Conv2d, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Per-sample squared norm of a conv weight gradient from input a and output grad g."""
    b = a.shape[0]
    cols = F.unfold(a, mod.kernel_size, mod.dilation, mod.padding, mod.stride)  # (B, K, L)
    gl = g.reshape(b, g.shape[1], -1)  # (B, O, L)
    k, length, o = cols.shape[1], cols.shape[2], gl.shape[1]
    if mod.groups != 1:
        raise NotImplementedError("grouped convolutions are not supported")
    if length * length * (k + o) < length * k * o:  # ghost norm: Gram matrices over positions
        ga = torch.bmm(cols.transpose(1, 2), cols)
        gg = torch.bmm(gl.transpose(1, 2), gl)
        return (ga * gg).sum((1, 2))
    return torch.bmm(gl, cols.transpose(1, 2)).pow(2).sum((1, 2))


class _Recorder:
    """Forward hooks that keep each supported layer's input/output and register a hook on
    the output to keep its gradient."""

    def __init__(self, model: nn.Module, batch_stats: bool = False, fixed_stats: bool = False):
        """batch_stats: BN layers normalize with their batch's statistics (train mode, or
        `fixed_stats`: eval-mode BN outputs replaced by batch-normalized ones whose mean and
        variance are constants for autograd)."""
        self.model = model
        self.batch_stats = batch_stats or fixed_stats
        self.records: list[tuple[nn.Module, torch.Tensor, torch.Tensor, list]] = []
        self.outputs: list[torch.Tensor] = []
        self.handles = []
        self.groups = param_groups(model)
        self.names = {id(p): n for n, p in model.named_parameters()}
        if fixed_stats:
            self.handles += _fix_batch_statistics(model)
        for mod in model.modules():
            own = [p for p in mod.parameters(recurse=False) if p.requires_grad]
            if isinstance(mod, (nn.Conv2d, nn.Linear, *_NORM_TYPES)) and own:
                self.handles.append(mod.register_forward_hook(self._hook))
            elif getattr(mod, "skip_scale", None) is not None and mod.skip_scale.requires_grad:
                self.handles.append(mod.norm2.register_forward_hook(self._branch_hook(mod)))
                self.handles.append(mod.register_forward_hook(self._hook))
            elif own:
                raise NotImplementedError(
                    f"per-sample gradients of {type(mod).__name__} parameters are not supported"
                )
        self.branch: dict[int, torch.Tensor] = {}
        self.inputs: dict[int, list[torch.Tensor]] = {}  # coupled contractions' layer inputs

    def _branch_hook(self, block):
        def hook(mod, inp, out):
            self.branch[id(block)] = out.detach()

        return hook

    def _hook(self, mod, inp, out):
        box: list = []
        self.outputs.append(out)  # its gradient is taken directly (no weight gradients needed)
        self.records.append((mod, inp[0].detach(), out.detach(), box))

    def remove(self):
        for h in self.handles:
            h.remove()

    def squared_norms(self) -> dict[str, torch.Tensor]:
        sq: dict[str, torch.Tensor] = {}
        for mod, a, out, box in self.records:
            g = box[0]
            b = g.shape[0]
            gname = lambda p: self.groups[self.names[id(p)]]
            if isinstance(mod, nn.Linear):
                a2, g2 = a.reshape(b, -1, a.shape[-1]), g.reshape(b, -1, g.shape[-1])
                if a2.shape[1] == 1:
                    w = a2[:, 0].pow(2).sum(1) * g2[:, 0].pow(2).sum(1)
                else:
                    w = torch.bmm(g2.transpose(1, 2), a2).pow(2).sum((1, 2))
                _accumulate(sq, gname(mod.weight), w)
                if mod.bias is not None:
                    _accumulate(sq, gname(mod.bias), g2.sum(1).pow(2).sum(1))
            elif isinstance(mod, nn.Conv2d):
                _accumulate(sq, gname(mod.weight), _conv_sq(mod, a, g))
                if mod.bias is not None:
                    _accumulate(sq, gname(mod.bias), g.sum((2, 3)).pow(2).sum(1))
            elif isinstance(mod, _NORM_TYPES):
                xhat = _normalized(mod, a, self.batch_stats)
                dims = tuple(i for i in range(g.dim()) if i != 1)[1:]
                if mod.weight is not None and mod.weight.requires_grad:
                    gg = (g * xhat).sum(dims) if dims else g * xhat
                    _accumulate(sq, gname(mod.weight), gg.pow(2).sum(1))
                if mod.bias is not None and mod.bias.requires_grad:
                    gb = g.sum(dims) if dims else g
                    _accumulate(sq, gname(mod.bias), gb.pow(2).sum(1))
            else:  # a block with a SkipInit scale: y = relu(branch * s + shortcut)
                d = g * (out > 0)
                v = (d * self.branch[id(mod)]).reshape(b, -1).sum(1)
                _accumulate(sq, gname(mod.skip_scale), v.pow(2))
        return sq

    def coupled_squared_norms(self, gs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Squared norms of K batch-coupled per-sample gradients from the cotangents
        gs[layer]: (K, B, ...) of K loss terms at every recorded layer output: loss term k's
        weight gradient is sum_j gs[k, j] (x) input_j (it reaches every sample j)."""
        sq: dict[str, torch.Tensor] = {}
        gname = lambda p: self.groups[self.names[id(p)]]
        for i, ((mod, a, out, _), g) in enumerate(zip(self.records, gs)):
            k, b = g.shape[:2]
            if i not in self.inputs:  # the layer inputs as the contractions use them, once
                act = _contraction_input(mod, a, self.batch_stats)
                ghost = isinstance(mod, nn.Linear) and act.shape[0] < act.shape[1]
                self.inputs[i] = [act, act @ act.T] if ghost else [act]
            act = self.inputs[i][0]
            if isinstance(mod, nn.Linear):
                gk = g.reshape(k, -1, g.shape[-1])  # (K, B*S, out)
                if len(self.inputs[i]) == 2:  # ghost norm: Gram matrices over the batch
                    w = (torch.bmm(gk, gk.transpose(1, 2)) * self.inputs[i][1]).sum((1, 2))
                else:
                    w = torch.matmul(gk.transpose(1, 2), act).pow(2).sum((1, 2))
                _accumulate(sq, gname(mod.weight), w)
                if mod.bias is not None:
                    _accumulate(sq, gname(mod.bias), gk.sum(1).pow(2).sum(1))
            elif isinstance(mod, nn.Conv2d):
                o = g.shape[2]
                gk = g.reshape(k, b, o, -1).transpose(1, 2).reshape(k, o, -1)  # (K, O, B*L)
                _accumulate(sq, gname(mod.weight), torch.matmul(gk, act).pow(2).sum((1, 2)))
                if mod.bias is not None:
                    _accumulate(sq, gname(mod.bias), gk.sum(2).pow(2).sum(1))
            elif isinstance(mod, _NORM_TYPES):  # act is x_hat
                dims = (1,) + tuple(range(3, g.dim()))
                if mod.weight is not None and mod.weight.requires_grad:
                    _accumulate(sq, gname(mod.weight), (g * act).sum(dims).pow(2).sum(1))
                if mod.bias is not None and mod.bias.requires_grad:
                    _accumulate(sq, gname(mod.bias), g.sum(dims).pow(2).sum(1))
            else:  # a block with a SkipInit scale: y = relu(branch * s + shortcut)
                v = (g * (out > 0) * self.branch[id(mod)]).reshape(k, -1).sum(1)
                _accumulate(sq, gname(mod.skip_scale), v.pow(2))
        return sq


def _contraction_input(mod: nn.Module, a: torch.Tensor, batch_stats: bool) -> torch.Tensor:
    """A recorded layer input as the coupled contractions use it: (B*S, in) for Linear,
    (B*L, C*kh*kw) unfolded patches for Conv2d, x_hat for norm layers, else the input."""
    if isinstance(mod, nn.Linear):
        return a.reshape(-1, a.shape[-1])
    if isinstance(mod, nn.Conv2d):
        if mod.groups != 1:
            raise NotImplementedError("grouped convolutions are not supported")
        cols = F.unfold(a, mod.kernel_size, mod.dilation, mod.padding, mod.stride)
        return cols.transpose(1, 2).reshape(-1, cols.shape[1])
    if isinstance(mod, _NORM_TYPES):
        return _normalized(mod, a, batch_stats)
    return a


def _batch_stats(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and biased variance of a BN input a: (B, C, ...), as train-mode BN."""
    dims = [0] + list(range(2, a.dim()))
    return a.mean(dims, keepdim=True), a.var(dims, unbiased=False, keepdim=True)


def _fixed_stats_bn(mod: nn.Module, inp: tuple, out: torch.Tensor) -> torch.Tensor:
    """Forward hook: the BN output with its batch's statistics, held constant for autograd."""
    x = inp[0]
    mean, var = (t.detach().flatten() for t in _batch_stats(x))
    return F.batch_norm(x, mean, var, mod.weight, mod.bias, False, 0.0, mod.eps)


def _fix_batch_statistics(model: nn.Module) -> list:
    """Hooks (first in line) that make every BN layer of an eval-mode model normalize with its
    batch's statistics held constant ("batch_fixed"); returns the handles to remove."""
    return [
        m.register_forward_hook(_fixed_stats_bn, prepend=True)
        for m in model.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]


def _normalized(mod: nn.Module, a: torch.Tensor, batch_stats: bool) -> torch.Tensor:
    """x_hat of a norm layer for input a: BN with its batch's statistics or its running ones."""
    if isinstance(mod, nn.GroupNorm):
        return F.group_norm(a, mod.num_groups, None, None, mod.eps)
    if batch_stats or mod.running_mean is None:
        mean, var = _batch_stats(a)
        return (a - mean) * torch.rsqrt(var + mod.eps)
    shape = (1, -1) + (1,) * (a.dim() - 2)
    return (a - mod.running_mean.view(shape)) * torch.rsqrt(mod.running_var.view(shape) + mod.eps)


def _hooks_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, fixed_stats: bool = False
) -> dict[str, torch.Tensor]:
    rec = _Recorder(model, fixed_stats=fixed_stats)
    try:
        with torch.enable_grad():
            loss = _loss_terms(model(x), y).sum()
            # gradients w.r.t. the recorded layer outputs only: the backward pass skips the
            # weight-gradient products that a training step computes
            outs = torch.autograd.grad(loss, rec.outputs, allow_unused=True)
            for (_, _, out, box), g in zip(rec.records, outs):
                box.append(torch.zeros_like(out) if g is None else g.detach())
        return rec.squared_norms()
    finally:
        rec.remove()


def _coupled_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int, rows: torch.Tensor, mode: str
) -> dict[str, torch.Tensor]:
    """Exact batch-coupled per-sample gradients of the loss terms `rows` of one train-mode
    batch: their cotangents (K, B, ...) at every layer output, `chunk` loss terms per backward,
    then the per-term weight gradients contracted from the layer inputs. The forward runs on
    copies of the buffers, so the running statistics stay untouched."""
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    rec = _Recorder(model, batch_stats=mode == "batch", fixed_stats=mode == "batch_fixed")
    out: list[dict[str, torch.Tensor]] = []
    try:
        with torch.enable_grad():
            terms = _loss_terms(functional_call(model, buffers, (x,)), y)
            eye = torch.eye(len(terms), dtype=terms.dtype, device=terms.device)
            eye = eye[rows.to(terms.device)]
            for s in range(0, len(rows), chunk):
                e = eye[s : s + chunk]
                gs = torch.autograd.grad(
                    terms,
                    rec.outputs,
                    grad_outputs=e,
                    retain_graph=True,
                    is_grads_batched=True,
                    allow_unused=True,
                )
                gs = [
                    o.new_zeros((len(e),) + o.shape) if g is None else g.detach()
                    for o, g in zip(rec.outputs, gs)
                ]
                out.append(rec.coupled_squared_norms(gs))
    finally:
        rec.remove()
    return {k: torch.cat([o[k] for o in out]) for k in out[0]}


# ----------------------------------------------------------------- torch.func / loop / exact
def _state(model: nn.Module):
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    frozen = {n: p.detach() for n, p in model.named_parameters() if not p.requires_grad}
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    return params, {**frozen, **buffers}


def _sq_from_grads(
    grads: dict[str, torch.Tensor], groups: dict[str, str]
) -> dict[str, torch.Tensor]:
    sq: dict[str, torch.Tensor] = {}
    for n, gr in grads.items():
        _accumulate(sq, groups[n], gr.reshape(gr.shape[0], -1).pow(2).sum(1))
    return sq


def _func_sq(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    params, rest = _state(model)

    def loss(p, xi, yi):
        z = functional_call(model, {**p, **rest}, (xi[None],))
        return F.cross_entropy(z, yi[None])

    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    return _sq_from_grads(grads, param_groups(model))


def _loop_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, mode: str
) -> dict[str, torch.Tensor]:
    """The naive loop: one forward of the batch (on copies of the buffers), then one backward
    per loss term in `rows`."""
    params, rest = _state(model)
    names = list(params)
    leaves = [params[n].clone().requires_grad_(True) for n in names]
    groups = param_groups(model)
    out: list[dict[str, torch.Tensor]] = []
    handles = _fix_batch_statistics(model) if mode == "batch_fixed" else []
    try:
        with torch.enable_grad():
            z = functional_call(model, {**dict(zip(names, leaves)), **rest}, (x,))
    finally:
        for h in handles:
            h.remove()
    with torch.enable_grad():
        terms = _loss_terms(z, y)
        for i in rows.tolist():
            gs = torch.autograd.grad(terms[i], leaves, retain_graph=True, allow_unused=True)
            out.append(
                _sq_from_grads(
                    {
                        n: (torch.zeros_like(l) if gr is None else gr)[None]
                        for n, l, gr in zip(names, leaves, gs)
                    },
                    groups,
                )
            )
    return {k: torch.cat([o[k] for o in out]) for k in out[0]}


def auto_method(model: nn.Module, mode: str) -> str:
    """The method "auto" runs for `model` in `mode`: "hooks" where samples are independent given
    the BN statistics, else the architecture's entry of `AUTO_BATCH` ("mixed" only where
    `lenet_grads` covers the model, e.g. not a LeNet with frozen parameters: then "loop")."""
    check_choice("mode", mode, MODES)
    if mode != "batch" or not has_batchnorm(model):
        return "hooks"
    method = AUTO_BATCH.get(type(model).__name__, "loop")
    return "loop" if method == "mixed" and not lenet_grads.applies(model) else method


def per_sample_grad_norms(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mode: str = "eval",
    reduction: str = "sum",
    batch_size: int | None = None,
    method: str = "auto",
    chunk: int = 8,
    select: torch.Tensor | None = None,
) -> GradNorms:
    """Per-sample gradient l2 norms of the cross-entropy of `model` on x: (N, C, H, W)
    (normalized floats) with labels y: (N,).

    mode "batch": x is split into consecutive training batches of `batch_size` (default: the
    whole of x is one batch) and each sample's gradient is taken inside its batch with
    train-mode BN; "batch_fixed": the same batches, their statistics held constant; mode
    "eval": running statistics (batch-independent). `reduction="mean"`
    divides by the batch size (the sample's share of the mean-reduced batch gradient).
    `select` (N,) bool: compute only these samples' norms (the others are NaN); in "batch"
    mode the unselected samples still shape their batch's statistics, and the cost scales with
    the number selected. The model's mode, parameters and buffers are left as they were.
    """
    check_choice("mode", mode, MODES)
    check_choice("reduction", reduction, REDUCTIONS)
    check_choice("method", method, METHODS)
    check_number("chunk", chunk, 1, None, integer=True)
    n = len(x)
    bsz = n if batch_size is None else check_number("batch_size", batch_size, 1, None, integer=True)
    bn = has_batchnorm(model)
    coupled = mode == "batch" and bn
    if coupled and method in ("hooks", "func"):
        raise ValueError(
            f"method={method!r} ignores the batch coupling of BN; use 'exact' or 'loop'"
        )
    if mode == "batch_fixed" and bn and method == "func":
        raise ValueError(
            "method='func' differentiates single samples, without batch statistics; "
            "use 'hooks', 'exact' or 'loop' for mode='batch_fixed'"
        )
    if method == "mixed" and not (coupled and lenet_grads.applies(model)):
        raise ValueError(
            "method='mixed' needs mode='batch' and a LeNet-5 with BatchNorm whose "
            f"parameters all train; got mode={mode!r}, {type(model).__name__}"
        )
    if method == "auto":
        method = auto_method(model, mode)
    if mode != "eval" and bn and (bsz < 2 or n % bsz == 1):
        raise ValueError(
            f"mode={mode!r} with BatchNorm needs batches of at least 2 samples; "
            f"N={n} with batch_size={bsz} leaves a batch of one (every method refuses it)"
        )
    sel = torch.ones(n, dtype=torch.bool) if select is None else select.bool().cpu()
    if sel.shape != (n,):
        raise ValueError(f"select must be a bool tensor of shape ({n},), got {tuple(sel.shape)}")
    was = model.training
    parts: list[tuple[int, dict[str, torch.Tensor]]] = []
    try:
        model.train(coupled)  # train-mode BN only for the batch-coupled definition
        for s in range(0, n, bsz):
            xb, yb = x[s : s + bsz], y[s : s + bsz]
            rows = torch.nonzero(sel[s : s + bsz]).flatten()
            if len(rows) == 0:
                continue
            if method == "hooks":
                part = _hooks_sq(model, xb, yb, fixed_stats=mode == "batch_fixed")
            elif method == "func":
                part = _func_sq(model, xb, yb)
            else:
                part = (
                    _loop_sq(model, xb, yb, rows, mode)
                    if method == "loop"
                    else lenet_grads.batch_squared_norms(model, xb, yb, rows.to(xb.device))
                    if method == "mixed"
                    else _coupled_sq(model, xb, yb, chunk, rows, mode)
                )
                part = {
                    k: torch.zeros(len(xb), dtype=v.dtype, device=v.device).index_copy(
                        0, rows.to(v.device), v
                    )
                    for k, v in part.items()
                }
            parts.append((s, part))
    finally:
        model.train(was)
    if not parts:
        raise ValueError("select chose no sample")
    sq = {}
    for k, v in parts[0][1].items():
        sq[k] = torch.zeros(n, dtype=v.dtype, device=v.device)
        for s, part in parts:
            sq[k][s : s + len(part[k])] = part[k]
    mask = sel.to(x.device)
    sq = {k: torch.where(mask, v, torch.full_like(v, float("nan"))) for k, v in sq.items()}
    sizes = torch.tensor([min(bsz, n - s) for s in range(0, n, bsz)], dtype=x.dtype)
    scale = (1.0 / sizes).repeat_interleave(sizes.long()) if reduction == "mean" else torch.ones(n)
    return _finish(sq, mode, reduction, scale.to(x.device, x.dtype))
