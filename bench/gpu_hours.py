"""Estimate the GPU hours of a budget from measured FLOPs (docs/scaling.md, "GPU hours").

    .venv/bin/python bench/gpu_hours.py [--dataset cifar10] [--budget paper] [--tflops 10 30]

For every notebook the budget's resolved parameters give the trained models and the samples each
one sees (training steps x batch, plus one forward pass over its training and test images per
epoch); torch's FLOP counter gives the FLOPs of one training sample (forward + backward) and of one
evaluated sample (forward) of the architecture at the dataset's image shape. Their product, at an
assumed sustained rate, is the estimate: arithmetic only (no data loading, no Python overhead), so
a lower bound at that rate. The model counts follow the notebooks' loops; keep them in step.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from bnpaper import params
from bnpaper.data import DATASETS
from bnpaper.models import build_model


def flops_per_sample(arch: str, shape: tuple[int, int, int], n_classes: int) -> tuple[float, float]:
    """(training FLOPs, evaluation FLOPs) of one sample: forward + backward, and forward only."""
    model = build_model(arch, "bn", shape[0], n_classes, shape[1])
    x, y = torch.randn(4, *shape), torch.randint(0, n_classes, (4,))
    with FlopCounterMode(display=False) as train:
        F.cross_entropy(model(x), y).backward()
    model.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as evaluate:
        model(x)
    return train.get_total_flops() / 4, evaluate.get_total_flops() / 4


def units(nb: str, p: dict) -> list[tuple[str, int, int, int, int]]:
    """(arch, models, training images per model, epochs, evaluated images per epoch) per group of
    identical models of notebook `nb` with parameters `p`."""
    kinds = lambda k: k if isinstance(k, list) else [k]  # noqa: E731
    if nb == "01_forced_memorization":
        n = len(p["norms"]) * len(kinds(p["corruption"])) * len(p["seeds"])
        return [(p["arch"], n, p["n_train"], p["epochs"], p["n_train"] + p["n_test"])]
    if nb == "02_gradient_dynamics":
        return [
            (
                p["arch"],
                len(p["norms"]) * len(p["seeds"]),
                p["n_train"],
                p["epochs"],
                p["n_train"] + p["n_test"],
            )
        ]
    if nb == "03_lira":
        half, pools = p["n_train"] // 2, len(p["outlier_frac"]) + bool(p.get("rare_pool"))
        out = [
            (
                p["arch"],
                pools * len(p["seeds"]) * len(p["norms"]) * p["n_shadows"],
                half,
                p["epochs"],
                p["n_train"] + p["n_test"],
            )
        ]
        out += [
            (
                p["arch"],
                len(p["seeds"]) * 2 * p["n_shadows"],
                size // 2,
                p["epochs"],
                size + p["n_test"],
            )
            for size in p.get("size_sweep", [])
            if size != p["n_train"]
        ]
        return out
    if nb == "04_theory":
        refs = set(p.get("clean_reference", []))
        return [
            (
                a,
                len(p["seeds"]) * (1 + (a in refs)),
                p["n_train"][a],
                p["epochs"][a],
                p["n_train"][a] + p["n_test"],
            )
            for a in p["archs"]
        ]
    if nb == "05_mitigation":
        cand = len(p["lams"]) * len(p["taus"]) + len(p["projection_taus"]) + 1
        judged = [k for k in kinds(p["corruption"]) if k != "rare"]
        frontier = 2 + len(p["lams"]) + 3 + len(p["gamma_decays"]) + len(p["strong_weight_decays"])
        rare = 3 * len(p["seeds"]) * ("rare" in kinds(p["corruption"]))
        ev = p["n_train"] + p["n_test"]
        p03 = params.resolve("03_lira", {"dataset": p["dataset"], "budget": p["budget"]}).values
        return [
            (
                p["arch"],
                cand * len(judged) * len(p["selection_seeds"]),
                p["n_train"],
                p["epochs"],
                ev,
            ),
            (
                p["arch"],
                frontier * len(judged) * len(p["seeds"]) + rare,
                p["n_train"],
                p["epochs"],
                ev,
            ),
            (
                p03["arch"],
                p03["n_shadows"] if p.get("lira") else 0,
                p03["n_train"] // 2,
                p03["epochs"],
                p03["n_train"] + p03["n_test"],
            ),
        ]
    raise ValueError(nb)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dataset", default="cifar10")
    ap.add_argument("--budget", default="paper")
    ap.add_argument(
        "--tflops",
        type=float,
        nargs="+",
        default=[10.0, 30.0],
        help="sustained TFLOP/s to divide by (a GPU's fp32 rate times its efficiency)",
    )
    a = ap.parse_args()
    spec = DATASETS[a.dataset]
    cost, total, models = {}, 0.0, 0
    print(f"{a.dataset}, budget {a.budget}: trained models and training FLOPs per notebook")
    for nb in params.NOTEBOOKS:
        p = params.resolve(nb, {"dataset": a.dataset, "budget": a.budget}).values
        flops = 0.0
        for arch, n, n_img, epochs, n_eval in units(nb, p):
            if arch not in cost:
                cost[arch] = flops_per_sample(arch, spec.shape, spec.n_classes)
            tr, ev = cost[arch]
            flops += n * epochs * (n_img * tr + n_eval * ev)
            models += n
        total += flops
        print(f"  {nb:24s} {sum(u[1] for u in units(nb, p)):6d} models  {flops:9.2e} FLOP")
    for arch, (tr, ev) in cost.items():
        print(
            f"  {arch}: {tr / 1e9:.2f} GFLOP per training sample, "
            f"{ev / 1e9:.2f} per evaluated sample"
        )
    print(
        f"  total: {models} models, {total:.2e} FLOP = "
        + ", ".join(
            f"{total / (t * 1e12) / 3600:,.0f} GPU-hours at {t:g} TFLOP/s sustained"
            for t in a.tflops
        )
    )


if __name__ == "__main__":
    main()
