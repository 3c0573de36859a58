"""Benchmark: per-sample gradient norms against a plain training step, measured in one run.

    .venv/bin/python bench/bench_grads.py [--batch 128] [--repeats 3] [--threads 2]

Prints seconds per batch and the ratio to a plain training step (forward + backward + SGD
step) of the same model and batch, for LeNet-5 on 28x28 inputs, and the ratio of the
matmul/convolution FLOPs (torch.utils.flop_counter) that each method performs to those of the
training step — a count that does not depend on the machine:
  no-BN model: bnpaper hooks, torch.func vmap(grad) (anchor), Opacus GradSampleModule
               (anchor, if `pip install opacus`; pip install -e .[bench]), naive loop (anchor)
  BN model, "eval":  bnpaper hooks, naive loop (anchor)
  BN model, "batch": bnpaper mixed (LeNet-5: reverse + forward mode, the default), bnpaper
               exact (batched cotangents, any model), naive loop (anchor)
  BN model, "batch_fixed": bnpaper hooks — the batch statistics held constant, a fast
               approximation of "batch", with its relative error on this batch
Targets: no-BN and "eval" within 2x of a training step, "batch" within 10x.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from bnpaper import grads
from bnpaper.models import build_model


def _time(f, repeats: int) -> float:
    f()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def _flops(f) -> int:
    with FlopCounterMode(display=False) as counter:
        f()
    return counter.get_total_flops()


def _step(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def run():
        model.train()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return run


def _naive(model, x, y, mode):
    def run():
        model.train(mode == "batch")
        terms = F.cross_entropy(model(x), y, reduction="none")
        for i in range(len(x)):
            model.zero_grad(set_to_none=True)
            terms[i].backward(retain_graph=True)
            sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None)
    return run


def _opacus(model, x, y):
    """Opacus' per-sample gradients (GradSampleModule hooks) and their l2 norms, or None."""
    try:
        from opacus import GradSampleModule
    except ImportError:
        return None
    gsm = GradSampleModule(model, loss_reduction="sum")

    def run():
        gsm.zero_grad(set_to_none=True)
        for p in gsm.parameters():
            p.grad_sample = None
        F.cross_entropy(gsm(x), y, reduction="sum").backward()
        sum(p.grad_sample.reshape(len(x), -1).pow(2).sum(1) for p in gsm.parameters()
            if p.requires_grad).sqrt()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--arch", default="lenet")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))
    rows = []
    for norm in ("none", "bn"):
        model = build_model(a.arch, norm, 1, 10, 28)
        step = _time(_step(model, x, y), a.repeats)
        step_flops = _flops(_step(model, x, y))
        rows.append((norm, "plain training step", step, 1.0, 1.0))
        cases = [("eval", "bnpaper hooks", lambda: grads.per_sample_grad_norms(model, x, y, "eval"))]
        if norm == "none":
            cases += [("eval", "torch.func vmap(grad) [anchor]", lambda: grads.per_sample_grad_norms(
                model, x, y, "eval", method="func"))]
            opacus = _opacus(build_model(a.arch, norm, 1, 10, 28), x, y)
            if opacus is not None:
                cases += [("eval", "Opacus GradSampleModule [anchor]", opacus)]
            else:
                print("Opacus is not installed: its anchor is skipped (pip install opacus)")
            cases += [("eval", "naive loop [anchor]", _naive(model, x, y, "eval"))]
        else:
            cases += [("eval", "naive loop [anchor]", _naive(model, x, y, "eval")),
                      ("batch", "bnpaper mixed (LeNet-5, default)",
                       lambda: grads.per_sample_grad_norms(model, x, y, "batch", method="mixed")),
                      ("batch", "bnpaper exact (batched cotangents)",
                       lambda: grads.per_sample_grad_norms(model, x, y, "batch", method="exact")),
                      ("batch", "naive loop [anchor]", _naive(model, x, y, "batch")),
                      ("batch_fixed", "bnpaper hooks (approximates batch)",
                       lambda: grads.per_sample_grad_norms(model, x, y, "batch_fixed"))]
        for mode, name, f in cases:
            t = _time(f, a.repeats)
            rows.append((norm, f"{mode}: {name}", t, t / step, _flops(f) / step_flops))
        if norm == "bn":
            exact = grads.per_sample_grad_norms(model, x, y, "batch").total
            fixed = grads.per_sample_grad_norms(model, x, y, "batch_fixed").total
            rel = ((fixed - exact).abs() / exact).double()
    print(f"{a.arch}, batch {a.batch}, {a.threads} threads, best of {a.repeats}")
    print(f"{'model':6s} {'method':45s} {'s/batch':>9s} {'x step':>8s} {'FLOPs x step':>13s}")
    for norm, name, t, r, fl in rows:
        print(f"{norm:6s} {name:45s} {t:9.4f} {r:8.1f} {fl:13.1f}")
    print(f"batch_fixed vs exact batch norms, this batch (random inputs, initial weights): "
          f"relative error median {rel.median():.2e}, max {rel.max():.2e}")


if __name__ == "__main__":
    main()
