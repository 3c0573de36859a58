"""An exploratory probe, not a judged run: the clean test accuracy of BN and no-BN models trained
on a training subset (clean, or with a share of its labels flipped) at one fixed recipe, to see
which recipe or data size closes BN's test-accuracy lead (issue 24). Nothing here is cached, and
no verdict reads it.

Each line printed is one model, as JSON: the recipe, the epochs it trained, its clean training
accuracy, its clean test accuracy and (with --flips) the share of flipped samples it predicts with
their flipped label (memorization), all at the end. With --flips the subset is the one notebook 01
draws for that seed (`make_split(..., "flip", frac, seed, n_test=...)`), so with 01's recipe and
--n-test 1000 a model is the twin of that cell's. The numbers in params/matrix.yaml's declaration of
ResNet-20's 2,000-image 01 cell came from runs like these, e.g.

    python scripts/probe_test_gap.py --arch resnet20 --norm bn --lr 0.158 --n-train 2000 --seeds 0
    python scripts/probe_test_gap.py --arch resnet20 --norm none --lr 0.158 --epochs 21 --no-fit
    python scripts/probe_test_gap.py --norm bn --lr 0.05 --n-train 2000 --flips 0.05 --n-test 1000

(batch 32, cap 40 epochs, trained to 0.99 clean training accuracy unless --no-fit, tested on the
first 5,000 test images).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from bnpaper.config import ConfigError
from bnpaper.data import load_dataset, make_split
from bnpaper.train import TrainConfig, TrainingDiverged, fit


def _runs(args: argparse.Namespace) -> list:
    """(seed, recipe, split: clean, or with --flips) per seed of the parsed arguments, each checked (TrainConfig,
    make_split), so that bad input fails before any training."""
    recipe = TrainConfig(
        arch=args.arch,
        norm=args.norm,
        lr=args.lr,
        weight_decay=args.weight_decay,
        epochs=args.epochs,
        batch_size=32,
        fit_level=None if args.no_fit else 0.99,
    )
    ds = load_dataset(args.dataset)
    if not 0.0 <= args.flips < 1.0:
        raise ConfigError(f"--flips={args.flips!r} is out of range; allowed: a share in [0, 1)")
    kind = "flip" if args.flips > 0 else "none"
    return [
        (
            seed,
            replace(recipe, seed=seed),
            make_split(ds, args.n_train, kind, args.flips, seed, n_test=args.n_test),
        )
        for seed in args.seeds
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="fashion_mnist")
    ap.add_argument("--arch", default="resnet20")
    ap.add_argument("--norm", default="bn")
    ap.add_argument("--lr", type=float, default=0.158)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-test", type=int, default=5000)
    ap.add_argument("--flips", type=float, default=0.0, help="share of labels flipped (0: clean)")
    ap.add_argument("--epochs", type=int, default=40, help="the cap (the schedule's length)")
    ap.add_argument("--no-fit", action="store_true", help="train every epoch, no stop at fit")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args(argv)
    try:
        runs = _runs(args)
    except ConfigError as e:  # bad input: one line, before any training
        raise SystemExit(f"probe_test_gap: {e}") from None
    for seed, recipe, split in runs:
        row = {**vars(args), "seed": seed}
        start = time.time()
        try:
            result = fit(split, recipe, progress=False)
        except TrainingDiverged as e:
            print(json.dumps({**row, "diverged": str(e)}), flush=True)
            continue
        h = result.history
        row.update(
            trained_epochs=result.epochs,
            clean_train_acc=round(h["clean_acc"][-1], 4),
            test_acc=round(h["test_acc"][-1], 4),
            memorized=round(h["noisy_acc"][-1], 4) if args.flips > 0 else None,
            seconds=round(time.time() - start, 1),
        )
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
