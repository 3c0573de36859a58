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

import torch
import torch.nn.functional as F
from torch import nn

import bnpaper.train
from bnpaper.config import ConfigError
from bnpaper.data import load_dataset, make_split
from bnpaper.models import BasicBlock, NFBasicBlock, build_model
from bnpaper.train import TrainConfig, TrainingDiverged, fit


def with_dropout(p: float):
    """`build_model` with dropout of rate `p` before the classifier (`fc`), as the NF-ResNet
    recipes use (Brock et al., 2021): the probe's stand-in for a recipe the package lacks."""

    def build(*args, **kwargs) -> nn.Module:
        model = build_model(*args, **kwargs)
        model.fc = nn.Sequential(nn.Dropout(p), model.fc)
        return model

    return build


def nf_forward_with_drop_path(self: NFBasicBlock, x: torch.Tensor) -> torch.Tensor:
    """`NFBasicBlock.forward` with stochastic depth (Huang et al. 2016, as the NF-ResNet recipes
    use it): in training each sample's residual branch is dropped with the block's
    `drop_rate` and scaled by 1 / (1 - drop_rate) when kept (timm's `drop_path`)."""
    out = F.relu(x) / self.beta
    skip = x if self.shortcut is None else self.shortcut(out)
    branch = self.alpha * self.conv2(F.relu(self.conv1(out)))
    rate = getattr(self, "drop_rate", 0.0)
    if self.training and rate > 0:
        keep = torch.rand(x.shape[0], 1, 1, 1, device=x.device) >= rate
        branch = branch * keep.to(branch.dtype) / (1.0 - rate)
    return skip + branch


def bn_forward_with_drop_path(self: BasicBlock, x: torch.Tensor) -> torch.Tensor:
    """`BasicBlock.forward` with stochastic depth on its residual branch (as
    `nf_forward_with_drop_path`)."""
    branch = self.norm2(self.conv2(F.relu(self.norm1(self.conv1(x)))))
    rate = getattr(self, "drop_rate", 0.0)
    if self.training and rate > 0:
        keep = torch.rand(x.shape[0], 1, 1, 1, device=x.device) >= rate
        branch = branch * keep.to(branch.dtype) / (1.0 - rate)
    return F.relu(branch + self.shortcut(x))


def with_drop_path(build, rate: float):
    """`build` with stochastic depth in the residual blocks, the rate rising linearly with depth
    to `rate` at the last block."""

    def build_dropped(*args, **kwargs) -> nn.Module:
        model = build(*args, **kwargs)
        blocks = [m for m in model.modules() if isinstance(m, (BasicBlock, NFBasicBlock))]
        for i, block in enumerate(blocks):
            block.drop_rate = rate * (i + 1) / len(blocks)
        return model

    return build_dropped


def _runs(args: argparse.Namespace) -> list:
    """(seed, recipe, split: clean, or with --flips) per seed of the parsed arguments, each
    checked (TrainConfig, make_split), so that bad input fails before any training."""
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
    if not 0.0 <= args.dropout < 1.0 or (args.dropout > 0 and args.arch == "lenet"):
        raise ConfigError(
            f"--dropout={args.dropout!r} is not allowed; allowed: a rate in [0, 1), above 0 "
            "only for the nets with one classifier layer `fc` (resnet20, resnet18, densenet)"
        )
    if not 0.0 <= args.drop_path < 1.0 or (args.drop_path > 0 and args.arch != "resnet20"):
        raise ConfigError(
            f"--drop-path={args.drop_path!r} is not allowed; allowed: a rate in [0, 1), "
            "above 0 only with --arch resnet20"
        )
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
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout before the classifier")
    ap.add_argument("--drop-path", type=float, default=0.0, help="stochastic depth (ResNet-20)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args(argv)
    try:
        runs = _runs(args)
    except ConfigError as e:  # bad input: one line, before any training
        raise SystemExit(f"probe_test_gap: {e}") from None
    if args.dropout > 0:
        bnpaper.train.build_model = with_dropout(args.dropout)
    if args.drop_path > 0:
        NFBasicBlock.forward = nf_forward_with_drop_path
        BasicBlock.forward = bn_forward_with_drop_path
        bnpaper.train.build_model = with_drop_path(bnpaper.train.build_model, args.drop_path)
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
