"""Benchmark: a regularized shadow pool trained packed (K LeNet-5 members at once, as notebook
05's LiRA pools and frontier now train) against one shadow at a time (`fit_mitigated`, as they
trained before), and what the gamma/sigma penalty costs the packed trainer, all in one run.

    .venv/bin/python bench/bench_pool.py [--threads 2] [--members 8] [--rows 1000] [--epochs 2]
                                         [--rounds 2]

Random 1x28x28 images (the timing does not depend on their content), batch 64, the penalty at
lambda = 0.0063, tau = 1 (notebook 05's chosen setting in the committed quick run). One-at-a-time
training includes `train.fit`'s per-epoch evaluation, as the plain shadow trainer runs it; the
packed trainer evaluates nothing. Variants alternate round by round and each keeps its best
round, so load from other processes hits them alike.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

import torch

from bnpaper import data, packed_fit
from bnpaper.bench import best_of, load_note
from bnpaper.mitigation import MitigationConfig, fit_mitigated
from bnpaper.train import TrainConfig

PENALTY = MitigationConfig("penalty", 0.0063, 1.0)


def synthetic_split(n: int, seed: int = 0) -> data.Split:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, 1, 28, 28), generator=g, dtype=torch.uint8)
    y = torch.randint(0, 10, (n,), generator=g)
    return data.Split(
        x, y, y.clone(), torch.zeros(n, dtype=torch.bool), x[:256], y[:256], 10, (0.5,), (0.3,)
    )


def variants(split: data.Split, members: int, rows: int, epochs: int) -> dict:
    """The three ways to train `members` shadows of `rows` rows each: name -> a callable."""
    cfgs = [
        TrainConfig(arch="lenet", norm="bn", epochs=epochs, batch_size=64, lr=0.05, seed=i)
        for i in range(members)
    ]
    idx = [
        torch.randperm(len(split.x), generator=torch.Generator().manual_seed(i))[:rows]
        for i in range(members)
    ]

    def one_at_a_time():
        for cfg, r in zip(cfgs, idx):
            sub = replace(
                split, x=split.x[r], y=split.y[r], y_true=split.y_true[r], mask=split.mask[r]
            )
            fit_mitigated(sub, cfg, PENALTY, progress=False)

    return {
        "one at a time, penalty": one_at_a_time,
        "packed, penalty": lambda: packed_fit.fit_packed(split, idx, cfgs, mitigation=PENALTY),
        "packed, no penalty": lambda: packed_fit.fit_packed(split, idx, cfgs),
    }


def measure(
    members: int = 8, rows: int = 1000, epochs: int = 2, rounds: int = 2
) -> dict[str, float]:
    """Best-of-`rounds` seconds of each variant, rounds interleaved."""
    return best_of(variants(synthetic_split(2 * rows), members, rows, epochs), rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()[0]
    sec = measure(a.members, a.rows, a.epochs, a.rounds)
    samples = a.members * (a.rows // 64) * 64 * a.epochs
    print(
        f"{a.members} LeNet-5 shadows x {a.rows} rows x {a.epochs} epochs, batch 64, "
        f"{a.threads} threads, "
        f"best of {a.rounds} interleaved rounds"
    )
    for name, s in sec.items():
        print(f"{name:24s} {s:7.2f} s  {samples / s:8.0f} training samples/s")
    print(
        f"packed vs one at a time, with the penalty: "
        f"{sec['one at a time, penalty'] / sec['packed, penalty']:.2f}x faster"
    )
    print(
        f"the penalty's cost on the packed trainer: "
        f"{sec['packed, penalty'] / sec['packed, no penalty']:.2f}x the time"
    )
    print(load_note(load0, a.threads))


if __name__ == "__main__":
    main()
