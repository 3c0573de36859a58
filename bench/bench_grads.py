"""Benchmark: per-sample gradient norms against a plain training step, measured in one run.

    .venv/bin/python bench/bench_grads.py [--batch 128] [--deep-batch 32] [--repeats 3] \
        [--threads 2]

Prints seconds per batch and the ratio to a plain training step (forward + backward + SGD
step) of the same model and batch, on 1x28x28 inputs (Fashion-MNIST's shape), and the ratio of
the matmul/convolution FLOPs (torch.utils.flop_counter) that each method performs to those of the
training step — a count that does not depend on the machine:
  LeNet-5 (batch --batch)
    no-BN model: bnpaper hooks, torch.func vmap(grad) (anchor), Opacus GradSampleModule
                 (anchor, if `pip install opacus`; pip install -e .[bench]), naive loop (anchor)
    BN model, "eval":  bnpaper hooks, naive loop (anchor)
    BN model, "batch": bnpaper auto, mixed (LeNet-5: reverse + forward mode), exact (batched
                 cotangents, any model), loop, naive loop (anchor)
    BN model, "batch_fixed": bnpaper hooks — the batch statistics held constant, a fast
                 approximation of "batch", with its relative error on this batch
  ResNet-20 and the small DenseNet with BN (batch --deep-batch): "eval" hooks, and for "batch"
    auto, exact and loop, naive loop (anchor); the method auto picks is marked.
"auto" must be the fastest exact method of each architecture (`grads.AUTO_BATCH`, whose comment
records the measurement it came from). Targets: no-BN and "eval" within 2x of a training step.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from bnpaper import grads
from bnpaper.bench import load_note
from bnpaper.models import build_model


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
        sum(
            p.grad_sample.reshape(len(x), -1).pow(2).sum(1)
            for p in gsm.parameters()
            if p.requires_grad
        ).sqrt()

    return run


def _cases_lenet(model, x, y, norm, arch):
    cases = [("eval", "bnpaper hooks", lambda: grads.per_sample_grad_norms(model, x, y, "eval"))]
    if norm == "none":
        cases += [
            (
                "eval",
                "torch.func vmap(grad) [anchor]",
                lambda: grads.per_sample_grad_norms(model, x, y, "eval", method="func"),
            )
        ]
        opacus = _opacus(build_model(arch, norm, 1, 10, 28), x, y)
        if opacus is not None:
            cases += [("eval", "Opacus GradSampleModule [anchor]", opacus)]
        else:
            print("Opacus is not installed: its anchor is skipped (pip install opacus)")
        return cases + [("eval", "naive loop [anchor]", _naive(model, x, y, "eval"))]
    return (
        cases
        + [("eval", "naive loop [anchor]", _naive(model, x, y, "eval"))]
        + _batch_cases(model, x, y, ("mixed", "exact", "loop"))
        + [
            (
                "batch_fixed",
                "bnpaper hooks (approximates batch)",
                lambda: grads.per_sample_grad_norms(model, x, y, "batch_fixed"),
            )
        ]
    )


def _batch_cases(model, x, y, methods):
    """The "batch" rows: bnpaper auto, each of `methods` (the one auto picks is marked), the
    naive loop."""
    picked = grads.auto_method(model, "batch")
    rows = [
        (
            "batch",
            f"bnpaper auto (= {picked})",
            lambda: grads.per_sample_grad_norms(model, x, y, "batch"),
        )
    ]
    for m in methods:
        rows.append(
            (
                "batch",
                f"bnpaper {m}" + (" <- auto" if m == picked else ""),
                lambda m=m: grads.per_sample_grad_norms(model, x, y, "batch", method=m),
            )
        )
    return rows + [("batch", "naive loop [anchor]", _naive(model, x, y, "batch"))]


def _table(arch, norms, batch, repeats, cases_of):
    """Time every case of every norm in `repeats` interleaved rounds (each keeps its best round:
    load from other processes only slows a round down) and print the table."""
    torch.manual_seed(0)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    cases, rel = [], None
    for norm in norms:
        model = build_model(arch, norm, 1, 10, 28)
        cases.append((norm, "plain training step", _step(model, x, y), _flops(_step(model, x, y))))
        for mode, name, f in cases_of(model, x, y, norm):
            cases.append((norm, f"{mode}: {name}", f, _flops(f)))
        if arch == "lenet" and norm == "bn":
            exact = grads.per_sample_grad_norms(model, x, y, "batch").total
            fixed = grads.per_sample_grad_norms(model, x, y, "batch_fixed").total
            rel = ((fixed - exact).abs() / exact).double()
    best = [float("inf")] * len(cases)  # (counting the FLOPs was each case's warm-up)
    for _ in range(repeats):
        for i, (_, _, f, _) in enumerate(cases):
            t = time.perf_counter()
            f()
            best[i] = min(best[i], time.perf_counter() - t)
    print(
        f"\n{arch}, batch {batch}, {torch.get_num_threads()} threads, "
        f"best of {repeats} interleaved rounds"
    )
    print(f"{'model':6s} {'method':48s} {'s/batch':>9s} {'x step':>8s} {'FLOPs x step':>13s}")
    step = fl_step = None
    for (norm, name, _, fl), t in zip(cases, best):
        if name == "plain training step":
            step, fl_step = t, fl
        print(f"{norm:6s} {name:48s} {t:9.4f} {t / step:8.1f} {fl / fl_step:13.1f}")
    if rel is not None:
        print(
            f"batch_fixed vs exact batch norms, this batch (random inputs, initial weights): "
            f"relative error median {rel.median():.2e}, max {rel.max():.2e}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--deep-batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--archs", nargs="*", default=["lenet", "resnet20", "densenet"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()[0]
    for arch in a.archs:
        if arch == "lenet":
            _table(
                arch,
                ("none", "bn"),
                a.batch,
                a.repeats,
                lambda m, x, y, norm: _cases_lenet(m, x, y, norm, arch),
            )
        else:
            _table(
                arch,
                ("bn",),
                a.deep_batch,
                a.repeats,
                lambda m, x, y, norm: (
                    [
                        (
                            "eval",
                            "bnpaper hooks",
                            lambda: grads.per_sample_grad_norms(m, x, y, "eval"),
                        )
                    ]
                    + _batch_cases(m, x, y, ("exact", "loop"))
                ),
            )
    print(load_note(load0, a.threads))


if __name__ == "__main__":
    main()
