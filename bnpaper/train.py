"""The in-memory training loop, seeded, with a per-epoch history of what the notebooks read.

SGD with momentum and a learning-rate schedule; the history holds the clean, corrupted
(memorization) and test loss and accuracy at every epoch."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import check_choice, check_number
from .config import device as default_device
from .data import Split, normalize
from .models import ARCHS, NORMS, build_model

SCHEDULES = ("cosine", "step", "constant")


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; `configs`: the training configurations that diverged;
    `members`: for a pack, their positions among its jobs (two members may share a
    configuration on other data)."""

    def __init__(
        self, message: str, configs: Sequence["TrainConfig"] = (), members: Sequence[int] = ()
    ):
        super().__init__(message)
        self.configs = tuple(configs)
        self.members = tuple(members)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a trained model besides its data."""

    arch: str = "lenet"
    norm: str = "bn"
    epochs: int = 20
    batch_size: int = 128
    lr: float = 0.05  # peak learning rate
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: str = "cosine"  # per-step cosine decay, step (x0.1 at 50% and 75%), constant
    augment: bool = False  # random crop (pad 4) + horizontal flip, for CIFAR
    seed: int = 0
    fit_level: float | None = None  # stop once clean training accuracy reaches it (None: never)

    @classmethod
    def from_params(cls, p: Mapping[str, Any], **changes: Any) -> TrainConfig:
        """The training recipe of a notebook's resolved parameters `p` (every field of this class
        that `p` names, e.g. arch, epochs, batch_size, lr, weight_decay, augment), with `changes`
        (e.g. norm, seed) on top."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in p.items() if k in names}, **changes)

    def __post_init__(self):
        check_choice("arch", self.arch, ARCHS)
        check_choice("norm", self.norm, NORMS)
        check_number("epochs", self.epochs, 1, 10_000, integer=True)
        check_number("batch_size", self.batch_size, 2, 1_000_000, integer=True)
        check_number("lr", self.lr, 0.0, 10.0, lo_open=True)
        check_number("momentum", self.momentum, 0.0, 1.0, hi_open=True)
        check_number("weight_decay", self.weight_decay, 0.0, 1.0)
        check_choice("schedule", self.schedule, SCHEDULES)
        check_number("seed", self.seed, 0, None, integer=True)
        if self.fit_level is not None:
            check_number("fit_level", self.fit_level, 0.0, 1.0, lo_open=True)

    def as_dict(self) -> dict:
        """The fields as a dict (part of a cache key), without the optional rules left unset
        (`fit_level=None`), so a config that does not use them keeps the key it always had."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in OPTIONAL}

    def fitted(self, clean_acc: float) -> bool:
        """Whether a model at this clean training accuracy has reached the fit rule."""
        return self.fit_level is not None and clean_acc >= self.fit_level


OPTIONAL = ("fit_level",)  # fields left out of `as_dict` while None


@dataclass
class TrainResult:
    """A trained model's weights (state_dict) and its per-epoch history (lists, one entry per
    evaluated epoch, epoch 0 = initialization)."""

    config: dict
    state: dict
    history: dict[str, list] = field(default_factory=dict)
    logits: dict | None = None  # epoch -> (train logits (N, classes), test logits (Z, classes))
    # level -> (epoch, state): the weights at the first epoch (>= 1) whose clean training
    # accuracy reached the level (`new_snapshots`); a level never reached is absent
    snapshots: dict | None = None

    @property
    def epochs(self) -> int:
        """The epochs this model trained (fewer than `config['epochs']` when it stopped at fit)."""
        return int(self.history["epoch"][-1])

    @property
    def censored(self) -> bool:
        """Whether the fit rule was set and the model hit its epoch cap below the level."""
        level = self.config.get("fit_level")
        return level is not None and not self.history["clean_acc"][-1] >= level

    def model(self, in_channels: int, n_classes: int, image_size: int) -> nn.Module:
        m = build_model(
            self.config["arch"], self.config["norm"], in_channels, n_classes, image_size
        )
        m.load_state_dict(self.state)
        return m.eval()


def lr_at(cfg: TrainConfig, step: int, total: int) -> float:
    """Learning rate at optimizer step `step` of `total`."""
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "step":
        return cfg.lr * (0.1 ** ((step >= 0.5 * total) + (step >= 0.75 * total)))
    return 0.5 * cfg.lr * (1 + math.cos(math.pi * step / total))


def random_crop_flip(x: torch.Tensor, g: torch.Generator, pad: int = 4) -> torch.Tensor:
    """Random translation by up to `pad` pixels (zero padding) and horizontal mirror, per sample."""
    b, c, h, w = x.shape
    xp = F.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=g)
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=g)
    rows = (torch.arange(h)[None] + dy[:, None])[:, None, :, None].expand(b, c, h, w)
    cols = torch.arange(w)[None] + dx[:, None]
    flip = torch.rand(b, generator=g) < 0.5
    cols = torch.where(flip[:, None], cols.flip(1), cols)[:, None, None, :].expand(b, c, h, w)
    ch = torch.arange(c)[None, :, None, None].expand(b, c, h, w)
    bi = torch.arange(b)[:, None, None, None].expand(b, c, h, w)
    return xp[bi, ch, rows, cols]


@torch.no_grad()
def per_sample_loss(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 512
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eval-mode cross-entropy per sample and correctness per sample: (N,), (N,) bool. Batches of
    512: on 2 CPU cores twice the throughput of 2048 for LeNet, 1.7x for ResNet-20 (measured in
    the training benchmark's session)."""
    was = model.training
    model.eval()
    losses, correct = [], []
    for i in range(0, len(x), batch):
        z = model(x[i : i + batch])
        losses.append(F.cross_entropy(z, y[i : i + batch], reduction="none"))
        correct.append(z.argmax(1) == y[i : i + batch])
    model.train(was)
    if not losses:
        return torch.zeros(0), torch.zeros(0, dtype=torch.bool)
    return torch.cat(losses), torch.cat(correct)


def _summary(loss: torch.Tensor, correct: torch.Tensor) -> tuple[float, float]:
    if len(loss) == 0:
        return float("nan"), float("nan")
    return float(loss.mean()), float(correct.float().mean())


def evaluate(
    model: nn.Module, xs: torch.Tensor, split: Split, xt: torch.Tensor
) -> dict[str, float]:
    """`scores` of `model`'s eval-mode logits on the training samples `xs` and test samples
    `xt` of `split` (normalized images)."""
    return scores(split, _eval_logits(model, xs), _eval_logits(model, xt, 512))


def scores(split: Split, z: torch.Tensor, zt: torch.Tensor | None) -> dict[str, float]:
    """From a model's logits on the training samples z (N, classes) and on the test samples
    zt (Z, classes): loss/accuracy on clean train samples, on corrupted samples against their
    training labels (memorization) and against their true labels, on the test set, and
    `rare_test_acc`: the accuracy on the test samples `split.test_mask` marks (the held-out
    samples of a rare class; NaN where the split has no such group). With `zt` None (no test
    pass), the test entries are NaN."""
    m = split.mask.to(z.device)
    out = {}
    for name, y, sel in (
        ("clean", split.y, ~m),
        ("noisy", split.y, m),
        ("noisy_true", split.y_true, m),
    ):
        y = y.to(z.device)[sel]
        out[f"{name}_loss"], out[f"{name}_acc"] = _summary(
            F.cross_entropy(z[sel], y, reduction="none"), z[sel].argmax(1) == y
        )
    if zt is None:
        return {**out, "test_loss": math.nan, "test_acc": math.nan, "rare_test_acc": math.nan}
    yt = split.y_test.to(zt.device)
    ec = zt.argmax(1) == yt
    out["test_loss"], out["test_acc"] = _summary(F.cross_entropy(zt, yt, reduction="none"), ec)
    out["rare_test_acc"] = _group_acc(ec, split.test_mask)
    return out


@torch.no_grad()
def _eval_logits(model: nn.Module, x: torch.Tensor, batch: int = 2048) -> torch.Tensor:
    """Eval-mode logits (N, classes) of a non-empty batch of normalized images, in chunks."""
    was = model.training
    model.eval()
    z = torch.cat([model(x[i : i + batch]) for i in range(0, len(x), batch)])
    model.train(was)
    return z


def _group_acc(correct: torch.Tensor, mask: torch.Tensor | None) -> float:
    """Accuracy over the samples `mask` marks (NaN without a mask or with an empty one)."""
    if mask is None or not bool(mask.any()):
        return float("nan")
    return float(correct[mask.to(correct.device)].float().mean())


def _atomic_save(obj, path: Path) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def fit(
    split: Split,
    cfg: TrainConfig,
    device: str | None = None,
    regularizer: Callable[[nn.Module], torch.Tensor] | None = None,
    after_step: Callable[[nn.Module], None] | None = None,
    on_epoch_end: Callable[[int, nn.Module], dict | None] | None = None,
    checkpoint: str | Path | None = None,
    progress: bool = True,
    desc: str | None = None,
    snapshots: Sequence[float] = (),
) -> TrainResult:
    """Train a model of `cfg` on `split` and return its weights and history.

    regularizer(model) is added to the loss; after_step(model) runs after each optimizer step
    (e.g. a projection); on_epoch_end(epoch, model) may return a dict of values to record.
    With `checkpoint`, the state is saved atomically after every epoch and a re-run resumes
    from it with identical results. With `cfg.fit_level`, training stops after the first epoch
    whose clean training accuracy reaches it (`epoch_done`); `epochs` is then the cap. With
    `snapshots` (clean training accuracies), the weights at the first epoch reaching each are
    kept too (`TrainResult.snapshots`; not with `checkpoint`: a resumed run would lose them).
    """
    from tqdm.auto import tqdm

    device = device or default_device()  # the notebook's `device` parameter (config.set_device)
    if snapshots and checkpoint:
        raise ValueError("snapshots are not kept across a resumed checkpoint: pass one of them")
    torch.manual_seed(cfg.seed)
    c, h = split.x.shape[1], split.x.shape[2]
    # ResNets train 1.2-1.25x faster in channels_last on CPU; LeNet is 0.43x slower in it
    # (bench/bench_train.py). Saved states load into either layout unchanged.
    layout = torch.channels_last if cfg.arch.startswith("resnet") else torch.contiguous_format
    model = build_model(cfg.arch, cfg.norm, c, split.n_classes, h).to(device, memory_format=layout)
    opt = torch.optim.SGD(
        model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    )
    xs = normalize(split.x, split.mean, split.std, device).contiguous(memory_format=layout)
    xt = normalize(split.x_test, split.mean, split.std, device).contiguous(memory_format=layout)
    ys = split.y.to(device)
    n = len(xs)
    steps_per_epoch = max(1, n // cfg.batch_size)  # drop the last partial batch (BN needs > 1)
    total = steps_per_epoch * cfg.epochs
    history: dict[str, list] = {}
    taken: dict[float, tuple[int, dict]] = {}  # level -> (epoch, state): `snapshots`
    start = 1

    def record(epoch: int, extra: dict | None = None):
        row = {"epoch": epoch, **evaluate(model, xs, split, xt), **(extra or {})}
        for k, v in row.items():
            history.setdefault(k, []).append(v)

    ckpt = Path(checkpoint) if checkpoint else None
    if ckpt and ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        history, start = saved["history"], saved["epoch"] + 1
    else:
        record(
            0,
            {
                "train_loss": float("nan"),
                **((on_epoch_end(0, model) or {}) if on_epoch_end else {}),
            },
        )

    if epoch_done(cfg, history):  # resumed from a model that had already reached the rule
        start = cfg.epochs + 1
    bar = tqdm(
        range(start, cfg.epochs + 1),
        desc=desc or f"{cfg.arch}/{cfg.norm} s{cfg.seed}",
        disable=not progress,
        leave=False,
        initial=start - 1,
        total=cfg.epochs,
    )
    for epoch in bar:
        model.train()
        g = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        perm = torch.randperm(n, generator=g).to(device)
        run_loss = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * cfg.batch_size : (s + 1) * cfg.batch_size]
            xb = xs[idx]
            if cfg.augment:
                xb = random_crop_flip(xb, g)
            for group in opt.param_groups:
                group["lr"] = lr_at(cfg, (epoch - 1) * steps_per_epoch + s, total)
            loss = F.cross_entropy(model(xb), ys[idx])
            if regularizer is not None:
                loss = loss + regularizer(model)
            if not torch.isfinite(loss):
                raise TrainingDiverged(
                    f"training diverged at epoch {epoch}, step {s} (loss={float(loss)}) for "
                    f"arch={cfg.arch}, norm={cfg.norm}, lr={cfg.lr}; lower lr",
                    (cfg,),
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if after_step is not None:
                after_step(model)
            run_loss += float(loss.detach())
        record(
            epoch,
            {
                "train_loss": run_loss / steps_per_epoch,
                **((on_epoch_end(epoch, model) or {}) if on_epoch_end else {}),
            },
        )
        bar.set_postfix(
            mem=f"{history['noisy_acc'][-1]:.2f}", test=f"{history['test_acc'][-1]:.2f}"
        )
        if ckpt:
            _atomic_save(
                {
                    "model": model.state_dict(),
                    "opt": opt.state_dict(),
                    "history": history,
                    "epoch": epoch,
                },
                ckpt,
            )
        for level in new_snapshots(snapshots, taken, history):
            taken[level] = (epoch, _cpu_state(model))
        if epoch_done(cfg, history):
            break
    bar.close()
    return TrainResult(cfg.as_dict(), _cpu_state(model), history, snapshots=taken or None)


def _cpu_state(model: nn.Module) -> dict:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def new_snapshots(levels, taken: dict, history: dict[str, list]) -> list[float]:
    """The levels of `levels` not yet in `taken` that the last recorded epoch (>= 1) reached in
    clean training accuracy: the ones whose weights are to be kept now (matched-fit readings of
    a model that trains on to a higher fit level)."""
    epoch, acc = history["epoch"][-1], history["clean_acc"][-1]
    return [lv for lv in levels if lv not in taken and epoch >= 1 and acc >= lv]


def epoch_done(cfg: TrainConfig, history: dict[str, list]) -> bool:
    """Whether training stops after the last recorded epoch: the epoch cap, or the fit rule
    (`cfg.fit_level`) reached at an epoch >= 1."""
    epoch = history["epoch"][-1]
    return epoch >= cfg.epochs or (epoch >= 1 and cfg.fitted(history["clean_acc"][-1]))
