"""Benchmark: training throughput (samples/s) and achieved GFLOP/s against this machine's sgemm
peak, all measured in one run.

    .venv/bin/python bench/bench_train.py [--threads 2] [--steps 9] [--rounds 5] [--no-compile]
                                          [--no-fit] [--only lenet packed resnet20]

Rows (`PLAN`), each one optimizer step at a time as the trainers take it (a batch indexed from
in-memory tensors, forward, cross-entropy, backward, SGD with momentum), 1x28x28 inputs
(Fashion-MNIST's shape):
  LeNet-5, plain trainer (`train.fit`'s step), batch 128 (01, 02, 04, 05) and 64
  LeNet-5, packed trainer (`packed_fit.fit_pack`'s model), K=8 members of batch 64 each (03)
  ResNet-20, plain trainer, batch 128
in the default (NCHW) layout, in channels_last, and compiled with torch.compile (inductor on
CPU; the compile time is printed, shorter when inductor's on-disk cache already holds the
graph). Then `train.fit` end to end (per-epoch evaluation included) for LeNet-5 and ResNet-20
on a small Fashion-MNIST split, if the data is present.

GFLOP/s counts the matmul and convolution FLOPs of forward and backward
(torch.utils.flop_counter; normalization, activations, pooling and the optimizer are not
counted), so it is a lower bound of the arithmetic done. The peak is the best float32 n x n
matrix product (2 n^3 FLOPs) over a few sizes, on the same threads, in this run. Variants of a
model are timed in interleaved rounds and each keeps its best round: load from other processes
only slows a round down, and it hits the variants alike.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from bnpaper.bench import load_note
from bnpaper.models import build_model
from bnpaper.packed import PackedLeNet, pack_input


def sgemm_peak(
    sizes=(512, 1024, 2048), repeats: int = 5, clock=time.perf_counter
) -> tuple[float, int]:
    """Best achieved float32 GFLOP/s of an n x n matrix product (2 n^3 flops over the time
    `clock` measures around one product), and the n it was reached at."""
    best, at = 0.0, 0
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        for _ in range(repeats):
            t = clock()
            torch.mm(a, b)
            rate = 2 * n**3 / (clock() - t) / 1e9
            if rate > best:
                best, at = rate, n
    return best, at


class Trainer:
    """One model's training step on random data of the trainer's shapes, in one layout."""

    def __init__(self, kind: str, layout: str, batch: int, k: int = 8, seed: int = 0):
        torch.manual_seed(seed)
        self.kind, self.layout, self.batch, self.k = kind, layout, batch, k
        self.members = k if kind == "packed" else 1
        n = 4 * batch
        self.x = torch.randn(self.members, n, 1, 28, 28)
        self.y = torch.randint(0, 10, (self.members, n))
        if kind == "packed":  # K members initialized as train.fit would (as packed_fit does)
            members = [build_model("lenet", "bn", 1, 10, 28).state_dict() for _ in range(k)]
            self.model = PackedLeNet(k, "bn", 1, 10, 28).load_members(members)
        else:
            self.model = build_model(kind, "bn", 1, 10, 28)
        self.channels_last = layout.startswith("channels_last")
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(
            self.model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4
        )
        self.net = torch.compile(self.model) if layout.endswith("compile") else self.model
        self.model.train()
        self.g = torch.Generator().manual_seed(seed)

    def _batch(self):
        idx = torch.randint(0, self.x.shape[1], (self.members, self.batch), generator=self.g)
        xb = torch.stack([self.x[m, idx[m]] for m in range(self.members)])
        yb = torch.stack([self.y[m, idx[m]] for m in range(self.members)])
        xin = pack_input(xb) if self.kind == "packed" else xb[0]
        if self.channels_last:
            xin = xin.contiguous(memory_format=torch.channels_last)
        return xin, (yb if self.kind == "packed" else yb[0])

    def step(self) -> float:
        xin, yb = self._batch()
        z = self.net(xin)
        loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), yb.reshape(-1)) * self.members
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    def flops(self) -> int:
        """Matmul/conv FLOPs of one step, counted on the eager model. A packed step does its K
        members' work, counted on one plain LeNet-5 step times K: torch's flop counter counts a
        grouped convolution's weight gradient `groups` times over (its forward and the batched
        matmuls it counts right)."""
        if self.kind == "packed":
            return self.k * Trainer("lenet", "nchw", self.batch).flops()
        xin, yb = self._batch()
        with FlopCounterMode(display=False) as counter:
            z = self.model(xin)
            loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), yb.reshape(-1))
            loss.backward()
        self.opt.zero_grad(set_to_none=True)
        return counter.get_total_flops()

    @property
    def samples(self) -> int:
        return self.members * self.batch


def time_steps(tr: Trainer, steps: int) -> float:
    t = time.perf_counter()
    for _ in range(steps):
        tr.step()
    return (time.perf_counter() - t) / steps


def fit_rows(threads: int) -> list[tuple[str, float, float]]:
    """`train.fit` end to end on a small real split: (name, samples/s, seconds)."""
    from bnpaper import data, train

    try:
        ds = data.load_dataset("fashion_mnist")
    except data.DatasetNotFoundError as e:  # the data is optional for the benchmark
        print(f"train.fit rows skipped: {e}")
        return []
    rows = []
    for arch, n, epochs in (("lenet", 4000, 2), ("resnet20", 1024, 1)):
        split = data.make_split(ds, n, "flip", 0.1, 0, n_test=1000)
        cfg = train.TrainConfig(arch=arch, norm="bn", epochs=epochs, batch_size=128)
        sec = float("inf")
        for _ in range(2):  # best of two
            t = time.perf_counter()
            train.fit(split, cfg, progress=False)
            sec = min(sec, time.perf_counter() - t)
        seen = (n // 128) * 128 * epochs
        rows.append(
            (
                f"{arch} train.fit, {n} samples x {epochs} epochs, n_test 1000, "
                "per-epoch evaluation "
                "included",
                seen / sec,
                sec,
            )
        )
    return rows


# (label, model kind, batch, steps per round as a multiple of --steps, variants)
PLAN = (
    ("LeNet-5 plain", "lenet", 128, 4, ("nchw", "channels_last", "nchw+compile")),
    ("LeNet-5 plain", "lenet", 64, 4, ("nchw",)),
    ("LeNet-5 packed K=8", "packed", 64, 1, ("nchw", "channels_last", "channels_last+compile")),
    (
        "ResNet-20 plain",
        "resnet20",
        128,
        1 / 3,
        ("nchw", "channels_last", "nchw+compile", "channels_last+compile"),
    ),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--no-fit", dest="fit", action="store_false")
    ap.add_argument(
        "--only",
        nargs="*",
        default=["lenet", "packed", "resnet20"],
        choices=["lenet", "packed", "resnet20"],
    )
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()[0]
    peak, peak_n = sgemm_peak()
    rows, rate = [], {}
    for label, kind, batch, mult, variants in PLAN:
        variants = [v for v in variants if a.compile or not v.endswith("compile")]
        if kind not in a.only:
            continue
        steps = max(2, round(mult * a.steps))
        trainers = {}
        for lay in variants:
            t = time.perf_counter()
            tr = Trainer(kind, lay, batch)
            for _ in range(2):  # warm-up (and, compiled, the compile itself)
                tr.step()
            trainers[lay] = (tr, time.perf_counter() - t)
        fl = trainers[variants[0]][0].flops()
        times = {lay: [] for lay in variants}
        for _ in range(a.rounds):  # interleaved: load from other processes hits all variants
            for lay in variants:
                times[lay].append(time_steps(trainers[lay][0], steps))
        base = min(times[variants[0]])
        for lay in variants:
            tr, setup = trainers[lay]
            sec = min(times[lay])
            gflops = fl / sec / 1e9
            rate[kind, batch, lay] = tr.samples / sec
            rows.append(
                (
                    label,
                    batch,
                    lay,
                    tr.samples,
                    sec,
                    tr.samples / sec,
                    gflops,
                    gflops / peak,
                    base / sec,
                    setup if lay.endswith("compile") else math.nan,
                )
            )
    print(
        f"{a.threads} threads; sgemm peak {peak:.1f} GFLOP/s (float32, n={peak_n}, this run); "
        f"each row the best of {a.rounds} interleaved rounds; GFLOP/s: matmul + conv FLOPs of "
        "forward and backward"
    )
    print(
        f"{'trainer':19s} {'batch':>5s} {'variant':21s} {'samples/step':>12s} {'s/step':>8s} "
        f"{'samples/s':>10s} {'GFLOP/s':>8s} {'of peak':>8s} {'x nchw':>7s} {'compile s':>9s}"
    )
    for label, batch, lay, n, sec, sps, gf, frac, speed, setup in rows:
        print(
            f"{label:19s} {batch:5d} {lay:21s} {n:12d} {sec:8.4f} {sps:10.0f} {gf:8.2f} "
            f"{frac:8.1%} {speed:7.2f} {'' if math.isnan(setup) else f'{setup:9.1f}'}"
        )
    if ("lenet", 64, "nchw") in rate and ("packed", 64, "channels_last") in rate:
        print(
            f"packing (K=8, channels_last, as packed_fit.fit_pack trains) vs one LeNet at a time, "
            f"batch 64: {rate['packed', 64, 'channels_last'] / rate['lenet', 64, 'nchw']:.2f}x "
            "samples/s"
        )
    if a.fit:
        for what, sps, sec in fit_rows(a.threads):
            print(f"{what}: {sps:.0f} samples/s ({sec:.1f} s, best of 2)")
    print(load_note(load0, a.threads))


if __name__ == "__main__":
    main()
