"""Throughput of K LeNet-5 shadow models trained packed (one model, grouped convs, batched
matmuls, BN over K*C channels) vs the same K models trained one after the other.

Run: python bench/bench_packed.py [--k 8] [--norm bn] [--steps 30] [--batch 128] [--rounds 3]
Prints examples/s for both and their ratio, measured in this one run (same data, same steps).
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from bnpaper.models import build_model
from bnpaper.packed import PackedLeNet, pack_input


def _time(fn, steps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--norm", default="bn")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-channels-last", dest="channels_last", action="store_false",
                    help="packed model in the default layout (slow grouped convs on CPU)")
    a = ap.parse_args()
    torch.manual_seed(0)
    k, b, c, s = a.k, a.batch, 1, a.size
    x = torch.randn(k, b, c, s, s)
    y = torch.randint(0, 10, (k, b))

    models = [build_model("lenet", a.norm, c, 10, s) for _ in range(k)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in models]

    def sequential():
        for i, (m, o) in enumerate(zip(models, opts)):
            loss = F.cross_entropy(m(x[i]), y[i])
            o.zero_grad(set_to_none=True)
            loss.backward()
            o.step()

    packed = PackedLeNet(k, a.norm, c, 10, s).load_members([m.state_dict() for m in models])
    xin = pack_input(x)
    if a.channels_last:
        packed = packed.to(memory_format=torch.channels_last)
        xin = xin.contiguous(memory_format=torch.channels_last)
    popt = torch.optim.SGD(packed.parameters(), lr=0.01, momentum=0.9)

    def packed_step():
        loss = F.cross_entropy(packed(xin).reshape(-1, 10), y.reshape(-1)) * k
        popt.zero_grad(set_to_none=True)
        loss.backward()
        popt.step()

    # interleave rounds so that load from other processes hits both alike; take medians
    n = a.steps * k * b
    rounds = [(_time(sequential, a.steps), _time(packed_step, a.steps)) for _ in range(a.rounds)]
    t_seq = sorted(r[0] for r in rounds)[len(rounds) // 2]
    t_pack = sorted(r[1] for r in rounds)[len(rounds) // 2]
    print(f"threads={torch.get_num_threads()} k={k} norm={a.norm} batch={b} image={s}x{s} "
          f"steps={a.steps} channels_last={a.channels_last}")
    print(f"sequential: {n / t_seq:9.0f} examples/s")
    print(f"packed:     {n / t_pack:9.0f} examples/s")
    print(f"ratio packed/sequential: {t_seq / t_pack:.2f}x")


if __name__ == "__main__":
    main()
