"""Per-sample gradient l2 norms, total and per parameter group, under both BatchNorm semantics.

The loss of sample i is its *unreduced* cross-entropy l_i (`reduction="mean"` divides every
norm by the batch size B: sample i's share of the mean-reduced batch gradient SGD uses):
  "eval"   g_i = d l_i / d theta, BN with its running statistics: samples are independent
           (what a single query of the trained model sees).
  "batch"  g_i = d l_i / d theta inside its training batch, train-mode BN: the batch mean and
           variance depend on every sample, so g_i carries the batch-coupled terms (the
           gradients that actually move the parameters sum to sum_i g_i).
  "batch_fixed"  "batch" with the batch mean and variance held constant (the paper's theory's
           simplification): not a third semantics, an approximation of "batch" whose error can
           be measured against it.
Without BatchNorm (norm "none", "gn") they coincide. Running statistics never change.
Groups: "weight", "bias" (conv/linear), "gamma", "beta" (norm layers), "other" (e.g. the
gains of the weight-standardized convolutions of the no-BN ResNets and DenseNet), named by each
layer's rule (`bnpaper.grad_rules`).

Methods:
  "hooks"  one forward and one backward; each layer's rule reads the per-sample norms from its
           input and output gradient; exact where samples are independent given the statistics.
  "func"   torch.func vmap(grad(functional_call)) (the reference vectorized method).
  "loop"   the naive loop of single backward passes (the test oracle).
  "exact"  any model: the cotangents of `chunk` loss terms at a time (K, B, ...) at every
           layer's output in one batched backward, then each rule contracts them with the
           recorded layer inputs.
  "mixed"  LeNet-5 with BN (`bnpaper.lenet_grads`): the same numbers, faster than "exact".
  "auto"   "hooks" where samples are independent; for "batch" with BN the measured fastest exact
           method of the architecture (`AUTO_BATCH`, `auto_method`).

Cost (bench/bench_grads.py): "hooks" 1.0-2.5x a training step; "batch" with BN about 20x for
LeNet-5 (mixed, batch 128) and ResNet-20 (loop, batch 32), 6x for the DenseNet: every loss term
reaches every sample through the statistics of every BN layer after the first, so its cotangent
is dense over the batch; `select` limits the work to the samples that are needed. The no-BN
ResNets and DenseNet ("hooks"): their weight-standardized convolutions form each sample's
weight gradient (no ghost norm): 3.8x a training step for ResNet-20, 2.5x for the DenseNet
(1x28x28, batch 32, one measurement on the shared 2-core CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from . import lenet_grads
from .config import check_choice, check_number
from .grad_rules import Recorder, accumulate, fix_batch_statistics, param_groups

MODES = ("batch", "eval", "batch_fixed")
GROUPS = ("weight", "gamma", "beta", "bias", "other")
REDUCTIONS = ("sum", "mean")
METHODS = ("auto", "hooks", "func", "loop", "exact", "mixed")

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


def has_batchnorm(model: nn.Module) -> bool:
    """True when `model` has a BatchNorm layer (its samples are coupled in train mode)."""
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


# ----------------------------------------------------------------- the methods, by layer rules
# Every method: (model, x, y, rows, mode, chunk) -> {group: (len(rows),) squared norms} of the
# loss terms `rows` of one batch x (the model already in train mode for "batch" with BN).
def _hooks_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, mode: str, chunk: int
) -> dict[str, torch.Tensor]:
    """One forward and one backward; per-sample norms from each layer's rule (samples
    independent given the statistics)."""
    rec = Recorder(model, fixed_stats=mode == "batch_fixed")
    try:
        with torch.enable_grad():
            loss = _loss_terms(model(x), y).sum()
            # gradients w.r.t. the recorded layer outputs only: the backward pass skips the
            # weight-gradient products that a training step computes
            outs = torch.autograd.grad(loss, rec.outputs, allow_unused=True)
        gs = [torch.zeros_like(o) if g is None else g.detach() for o, g in zip(rec.outputs, outs)]
        return _rows(rec.squared_norms(gs), rows)
    finally:
        rec.remove()


def _coupled_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, mode: str, chunk: int
) -> dict[str, torch.Tensor]:
    """Exact batch-coupled per-sample gradients of the loss terms `rows` of one train-mode
    batch: their cotangents (K, B, ...) at every layer output, `chunk` loss terms per backward,
    then the per-term weight gradients contracted from the layer inputs. The forward runs on
    copies of the buffers, so the running statistics stay untouched."""
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    rec = Recorder(model, batch_stats=mode == "batch", fixed_stats=mode == "batch_fixed")
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


# ----------------------------------------------------------------- the reference methods
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
        accumulate(sq, groups[n], gr.reshape(gr.shape[0], -1).pow(2).sum(1))
    return sq


def _rows(sq: dict[str, torch.Tensor], rows: torch.Tensor) -> dict[str, torch.Tensor]:
    return {k: v[rows.to(v.device)] for k, v in sq.items()}


def _func_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, mode: str, chunk: int
) -> dict[str, torch.Tensor]:
    """torch.func's vmap(grad(functional_call)) over single samples."""
    params, rest = _state(model)

    def loss(p, xi, yi):
        z = functional_call(model, {**p, **rest}, (xi[None],))
        return F.cross_entropy(z, yi[None])

    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    return _rows(_sq_from_grads(grads, param_groups(model)), rows)


def _loop_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, mode: str, chunk: int
) -> dict[str, torch.Tensor]:
    """The naive loop: one forward of the batch (on copies of the buffers), then one backward
    per loss term in `rows`."""
    params, rest = _state(model)
    names = list(params)
    leaves = [params[n].clone().requires_grad_(True) for n in names]
    groups = param_groups(model)
    out: list[dict[str, torch.Tensor]] = []
    handles = fix_batch_statistics(model) if mode == "batch_fixed" else []
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
                        n: (torch.zeros_like(leaf) if gr is None else gr)[None]
                        for n, leaf, gr in zip(names, leaves, gs)
                    },
                    groups,
                )
            )
    return {k: torch.cat([o[k] for o in out]) for k in out[0]}


def _mixed_sq(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, mode: str, chunk: int
) -> dict[str, torch.Tensor]:
    """LeNet-5 with BN in mixed mode (`bnpaper.lenet_grads`)."""
    return lenet_grads.batch_squared_norms(model, x, y, rows.to(x.device))


_COMPUTE = {
    "hooks": _hooks_sq,
    "func": _func_sq,
    "loop": _loop_sq,
    "exact": _coupled_sq,
    "mixed": _mixed_sq,
}


def auto_method(model: nn.Module, mode: str) -> str:
    """The method "auto" runs for `model` in `mode`: "hooks" where samples are independent given
    the BN statistics, else the architecture's entry of `AUTO_BATCH` ("mixed" only where
    `lenet_grads` covers the model, e.g. not a LeNet with frozen parameters: then "loop")."""
    check_choice("mode", mode, MODES)
    if mode != "batch" or not has_batchnorm(model):
        return "hooks"
    method = AUTO_BATCH.get(type(model).__name__, "loop")
    return "loop" if method == "mixed" and not lenet_grads.applies(model) else method


def _method(model: nn.Module, mode: str, method: str, n: int, bsz: int) -> str:
    """The method that runs (resolving "auto"), or a ValueError saying why it cannot."""
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
    if mode != "eval" and bn and (bsz < 2 or n % bsz == 1):
        raise ValueError(
            f"mode={mode!r} with BatchNorm needs batches of at least 2 samples; "
            f"N={n} with batch_size={bsz} leaves a batch of one (every method refuses it)"
        )
    return auto_method(model, mode) if method == "auto" else method


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
    compute = _COMPUTE[_method(model, mode, method, n, bsz)]
    sel = torch.ones(n, dtype=torch.bool) if select is None else select.bool().cpu()
    if sel.shape != (n,):
        raise ValueError(f"select must be a bool tensor of shape ({n},), got {tuple(sel.shape)}")
    was = model.training
    sq: dict[str, torch.Tensor] = {}
    try:
        model.train(mode == "batch" and has_batchnorm(model))  # train-mode BN only if coupled
        for s in range(0, n, bsz):
            rows = torch.nonzero(sel[s : s + bsz]).flatten()
            if len(rows) == 0:
                continue
            part = compute(model, x[s : s + bsz], y[s : s + bsz], rows, mode, chunk)
            for k, v in part.items():
                if k not in sq:
                    sq[k] = torch.full((n,), float("nan"), dtype=v.dtype, device=v.device)
                sq[k][s + rows.to(v.device)] = v
    finally:
        model.train(was)
    if not sq:
        raise ValueError("select chose no sample")
    sizes = torch.tensor([min(bsz, n - s) for s in range(0, n, bsz)], dtype=x.dtype)
    scale = (1.0 / sizes).repeat_interleave(sizes.long()) if reduction == "mean" else torch.ones(n)
    return _finish(sq, mode, reduction, scale.to(x.device, x.dtype))
