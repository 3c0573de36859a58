"""Benchmark: the packed trainer of LeNet jobs (`packed_fit.fit_pack`) against one model at a
time (`train.fit`), its share of this machine's sgemm peak, and the cost of stopping at fit, all
measured in one run.

    .venv/bin/python bench/bench_pack.py [--threads 2] [--rounds 2] [--n 4000] [--epochs 2]

Rows:
  01's mix: K=8 LeNet-5 jobs as notebook 01 trains them (batch 128, n_train rows of real
    Fashion-MNIST with 10% flipped labels or OOD digits, 2000 test images, per-epoch evaluation),
    members differing in seed, data subset and learning rate (0.05 and 0.02): packed against
    `train.fit` one after the other;
  throughput: the packed step alone (no evaluation) at K=8 and 16, batch 64, synthetic images,
    in GFLOP/s against the float32 sgemm peak measured in the same run (FLOPs: the matmul and
    convolution FLOPs of a LeNet-5 step, as bench_train.py counts them, times K);
  evaluation: one eval-mode pass of K=8 members over 4000 images each, per chunk size;
  batch assembly: one gather from the pack's image bank against per-member gathers, a stack and
    a layout change (the two ways to feed members different data);
  stop at fit: 8 BN LeNets (4 seeds x 2 learning rates) on a real Fashion-MNIST split, with the
    fit rule (clean training accuracy --level 0.9, cap --fit-epochs 8) against the fixed epochs;
  fit-only evaluation: 8 BN shadows as 03 trains them (1,250 rows, fit rule 0.99, weights kept
    at 0.95 and 0.98), every epoch's evaluation pass whole against `fit_only`.
Variants alternate round by round and each keeps its best round.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import Trainer, sgemm_peak  # noqa: E402

from bnpaper import data, packed_fit, train  # noqa: E402
from bnpaper.bench import best_of, load_note  # noqa: E402
from bnpaper.packed import pack_input  # noqa: E402


def mix_jobs(splits: list[data.Split], k: int = 8, batch: int = 128) -> list[packed_fit.Job]:
    """K jobs of 01's kind: member i trains on `splits[i % len(splits)]` with seed i and lr 0.05
    or 0.02 (alternating)."""
    return [
        packed_fit.Job(
            splits[i % len(splits)],
            train.TrainConfig(batch_size=batch, lr=(0.05, 0.02)[i % 2], seed=i, epochs=EPOCHS[0]),
        )
        for i in range(k)
    ]


EPOCHS = [2]  # set from --epochs


def measure_mix(jobs: list[packed_fit.Job], rounds: int) -> dict[str, float]:
    """Seconds to train `jobs` one at a time (`train.fit`) and packed (`fit_pack`)."""
    return best_of(
        {
            "one at a time": lambda: [fit_job(j) for j in jobs],
            "packed": lambda: packed_fit.fit_pack(jobs),
        },
        rounds,
    )


def fit_job(job: packed_fit.Job) -> train.TrainResult:
    return train.fit(job.member_split(), job.cfg, progress=False)


def synthetic_split(n: int, seed: int = 0) -> data.Split:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, 1, 28, 28), generator=g, dtype=torch.uint8)
    y = torch.randint(0, 10, (n,), generator=g)
    return data.Split(
        x, y, y.clone(), torch.zeros(n, dtype=torch.bool), x[:256], y[:256], 10, (0.5,), (0.3,)
    )


def step_rate(k: int, batch: int, steps: int, rounds: int, channels_last: bool = True) -> float:
    """Samples per second of the packed step alone: K members, `steps` steps of `batch` each,
    no evaluation (one epoch of `fit_pack(history=False)`, setup included)."""
    split = synthetic_split(batch * steps)
    jobs = [
        packed_fit.Job(split, train.TrainConfig(batch_size=batch, epochs=1, seed=i))
        for i in range(k)
    ]

    def run():
        packed_fit.fit_pack(jobs, channels_last=channels_last, history=False)

    sec = best_of({"run": run}, rounds)["run"]
    return k * batch * steps / sec


def assembly_seconds(k: int, batch: int, n: int, reps: int) -> dict[str, float]:
    """Seconds per step to build the packed input of K members' batches: one gather from one
    (N, H, W, C) bank, or per-member gathers from per-member tensors + stack + layout change."""
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 1, 28, 28, generator=g) for _ in range(k)]
    bank = torch.cat(xs).permute(0, 2, 3, 1).contiguous()
    rows = torch.stack([i * n + torch.randperm(n, generator=g)[:batch] for i in range(k)])

    def one_gather():
        packed_fit._packed_images(bank, rows)

    def per_member():
        xb = torch.stack([x[r - i * n] for i, (x, r) in enumerate(zip(xs, rows))])
        pack_input(xb).contiguous(memory_format=torch.channels_last)

    fns = {"one gather from the bank": one_gather, "per-member gathers + stack": per_member}
    sec = best_of({name: (lambda f=f: [f() for _ in range(reps)]) for name, f in fns.items()}, 3)
    return {name: s / reps for name, s in sec.items()}


def eval_seconds(k: int, n: int, chunks: tuple[int, ...], rounds: int) -> dict[int, float]:
    """Seconds of one evaluation pass of a K-member pack over n images each, per chunk size
    (images per member per forward)."""
    from bnpaper.packed import PackedLeNet

    model = PackedLeNet(k).to(memory_format=torch.channels_last)
    bank = synthetic_split(n).x.float().permute(0, 2, 3, 1).contiguous()
    rows = torch.arange(n).repeat(k, 1)
    fns = {c: (lambda c=c: packed_fit._eval_logits(model, bank, rows, c)) for c in chunks}
    return best_of(fns, rounds)


def fit_cost(split: data.Split, level: float, epochs: int, rounds: int) -> dict:
    """Seconds and epochs used of 8 BN LeNets (4 seeds x lr 0.05, 0.02) on `split`: fixed
    `epochs`, and stopping at clean training accuracy `level` (cap `epochs`)."""
    cfgs = [
        train.TrainConfig(batch_size=128, epochs=epochs, lr=lr, seed=s)
        for s in range(4)
        for lr in (0.05, 0.02)
    ]
    fixed = [packed_fit.Job(split, c) for c in cfgs]
    stop = [packed_fit.Job(split, replace(c, fit_level=level)) for c in cfgs]
    used = {}

    def run(name, jobs):
        used[name] = [r.epochs for r in packed_fit.fit_pack(jobs)]

    sec = best_of({"fixed": lambda: run("fixed", fixed), "fit": lambda: run("fit", stop)}, rounds)
    return {"seconds": sec, "epochs": used}


def fit_only_cost(split: data.Split, rounds: int) -> dict:
    """Seconds of 8 BN LeNet shadows (seeds 0-7, lr 0.05, batch 64, 03's fit rule: clean
    training accuracy 0.99, cap 40, weights kept at 0.95 and 0.98, no test pass) with every
    epoch's evaluation pass whole, and with `fit_only` (a pass stops once it proves every member
    below its levels); the epochs used by each, which must agree."""
    cfgs = [
        train.TrainConfig(batch_size=64, epochs=40, lr=0.05, seed=s, fit_level=0.99)
        for s in range(8)
    ]
    jobs = [packed_fit.Job(split, c) for c in cfgs]
    used = {}

    def run(name, fit_only):
        res = packed_fit.fit_pack(jobs, snapshots=(0.95, 0.98), eval_test=False, fit_only=fit_only)
        used[name] = [r.epochs for r in res]

    sec = best_of(
        {"whole": lambda: run("whole", False), "fit_only": lambda: run("fit_only", True)}, rounds
    )
    return {"seconds": sec, "epochs": used}


def flops_per_sample(batch: int) -> float:
    return Trainer("lenet", "nchw", batch).flops() / batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--fit-epochs", type=int, default=8)
    ap.add_argument("--level", type=float, default=0.9)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    EPOCHS[0] = a.epochs
    load0 = os.getloadavg()[0]
    peak, peak_n = sgemm_peak()
    print(
        f"{a.threads} threads; sgemm peak {peak:.1f} GFLOP/s (float32, n={peak_n}, this run); "
        f"each row the best of {a.rounds} interleaved rounds"
    )
    fl64 = flops_per_sample(64)
    for k in (8, 16):
        for cl in (True, False):
            sps = step_rate(k, 64, 60, a.rounds + 1, cl)
            gf = sps * fl64 / 1e9
            print(
                f"packed step K={k:2d} batch 64 {'channels_last' if cl else 'nchw':13s}: "
                f"{sps:8.0f} samples/s, {gf:6.1f} GFLOP/s = {gf / peak:5.1%} of sgemm peak"
            )
    ev = eval_seconds(8, 4000, (32, 64, 128, 256, 512), a.rounds)
    print(
        "evaluation pass K=8 x 4000 images, chunk (images per member per forward): "
        + ", ".join(f"{c}: {s:.2f} s" for c, s in ev.items())
    )
    asm = assembly_seconds(8, 64, 4000, 50)
    for name, s in asm.items():
        print(f"batch assembly K=8 batch 64, {name}: {s * 1e6:7.0f} us/step")
    try:
        ds = data.load_dataset("fashion_mnist")
    except data.DatasetNotFoundError as e:  # the data is optional for the benchmark
        print(f"Fashion-MNIST rows skipped: {e}")
        print(load_note(load0, a.threads))
        return
    splits = [
        data.make_split(ds, a.n, kind, 0.1, seed, "digits", 2000)
        for kind in ("flip", "ood")
        for seed in (0, 1)
    ]
    sec = measure_mix(mix_jobs(splits), a.rounds)
    seen = 8 * (a.n // 128) * 128 * a.epochs
    print(
        f"01's mix, K=8 (seeds 0-7, lr 0.05/0.02, 4 subsets of {a.n} rows, batch 128, "
        f"{a.epochs} epochs, evaluation of {a.n}+2000 images per epoch): one at a time "
        f"{sec['one at a time']:.1f} s ({seen / sec['one at a time']:.0f} samples/s), packed "
        f"{sec['packed']:.1f} s ({seen / sec['packed']:.0f} samples/s): "
        f"{sec['one at a time'] / sec['packed']:.2f}x"
    )
    cost = fit_cost(splits[0], a.level, a.fit_epochs, a.rounds)
    s, e = cost["seconds"], cost["epochs"]
    print(
        f"stop at fit (clean train acc {a.level}, cap {a.fit_epochs}) vs {a.fit_epochs} fixed "
        f"epochs, 8 BN LeNets on one {a.n}-row flip split: {s['fit']:.1f} s vs {s['fixed']:.1f} s "
        f"= {s['fit'] / s['fixed']:.2f}x; epochs used {e['fit']}"
    )
    shadow = data.make_split(ds, 1250, "flip", 0.05, 0, "digits", 1000)
    cost = fit_only_cost(shadow, a.rounds)
    s, e = cost["seconds"], cost["epochs"]
    same = "the same" if e["whole"] == e["fit_only"] else "DIFFERENT"
    print(
        f"fit-only evaluation, 8 BN shadows on 1250 rows (03's quick size, batch 64, fit 0.99, "
        f"levels 0.95/0.98): {s['fit_only']:.1f} s vs whole passes {s['whole']:.1f} s = "
        f"{s['fit_only'] / s['whole']:.2f}x; epochs used {same}: {e['fit_only']}"
    )
    print(load_note(load0, a.threads))


if __name__ == "__main__":
    main()
