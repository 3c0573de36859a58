"""Train many LeNet jobs as packed models; each member equals its `train.fit` twin, history too.

A job is a split (optionally rows of it), a `TrainConfig` and a mitigation. Jobs of one pack
share the architecture, norm, mitigation, input shape, batch size and steps per epoch (`packs`
groups them); within a pack members differ in seed, data, learning rate, weight decay, momentum,
schedule, epochs and fit rule. The SGD-with-momentum step is written per member: every packed
tensor holds its members in blocks, and each member's learning rate, weight decay and momentum
scale its own block, so a member's trajectory is its own `torch.optim.SGD` run up to float
rounding. Evaluation runs the packed model in eval mode once per epoch over every member's own
training and test images (members' chunks side by side), and scores each member with
`train.scores`, the function `train.fit` records its history with.

Stopping: a member stops after its epoch cap or, with `cfg.fit_level`, after the first epoch
whose clean training accuracy reaches the level. Its state is taken at that moment and it leaves
the pack (the remaining members are repacked into a smaller model with their optimizer state),
so a stopped member costs nothing afterwards; the pack ends when every member has stopped.

Speed (bench/bench_pack.py, 2 cores, one run): 01's mix of 8 members (seeds, data subsets,
learning rates) trains 2.2-2.4x faster packed than one at a time; the packed step reaches about
22,000 samples/s at K=8, batch 64 (25% of the run's float32 sgemm peak; K=16 is no faster).
The members' images come from one bank in one gather (2.2-3x faster than per-member gathers and
a stack). torch.compile of the packed model ran at 0.7x eager after 26 s of compilation: not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple, Sequence

import torch
import torch.nn.functional as F

from .config import device as default_device
from .data import Split, normalize
from .mitigation import MitigationConfig
from .models import build_model
from .packed import PackedLeNet, pack_input, select_members
from .progress import Counter
from .train import (
    TrainConfig,
    TrainingDiverged,
    TrainResult,
    epoch_done,
    lr_at,
    new_snapshots,
    random_crop_flip,
    scores,
)

TRAINERS = ("auto", "plain", "packed")  # LeNets packed (auto), one at a time, or all packed


@dataclass(frozen=True, eq=False)
class Job:
    """One model to train: `cfg` on `split` (on its `rows` only, when given) with `mitigation`."""

    split: Split
    cfg: TrainConfig
    rows: torch.Tensor | None = None
    mitigation: MitigationConfig = MitigationConfig()

    def member_split(self) -> Split:
        """The split this model trains on (the rows' images and labels, the same test set)."""
        if self.rows is None:
            return self.split
        r, s = torch.as_tensor(self.rows), self.split
        return replace(s, x=s.x[r], y=s.y[r], y_true=s.y_true[r], mask=s.mask[r])

    def pack_key(self) -> tuple:
        """What members of one pack must share: architecture, norm, mitigation, augmentation,
        image shape, classes, steps per epoch and batch size."""
        n, c = len(self.split.x if self.rows is None else self.rows), self.cfg
        shape, classes = tuple(self.split.x.shape[1:]), self.split.n_classes
        steps, batch = max(1, n // c.batch_size), min(n, c.batch_size)
        return (c.arch, c.norm, self.mitigation, c.augment, shape, classes, steps, batch)


def packs(jobs: Sequence[Job], pack_size: int = 16) -> list[list[int]]:
    """Indices of `jobs` grouped into packs of at most `pack_size` members (in order of first
    appearance; a group larger than `pack_size` is cut into near-equal packs)."""
    groups: dict[tuple, list[int]] = {}
    for i, job in enumerate(jobs):
        groups.setdefault(job.pack_key(), []).append(i)
    out = []
    for idx in groups.values():
        n = math.ceil(len(idx) / pack_size)
        out += [idx[j * len(idx) // n : (j + 1) * len(idx) // n] for j in range(n)]
    return out


class _Bank:
    """Every distinct image tensor of a pack, normalized once, in one (M, H, W, C) tensor: a
    member's images are rows of it (views of one dataset share their rows)."""

    def __init__(self, device: str):
        self.device, self.parts, self.at, self.size = device, [], {}, 0

    def rows(self, x: torch.Tensor, mean, std) -> torch.Tensor:
        key = (x.data_ptr(), tuple(x.shape), x.stride(), tuple(mean), tuple(std))
        if key not in self.at:
            self.at[key] = self.size
            self.parts.append(normalize(x, mean, std, self.device).permute(0, 2, 3, 1))
            self.size += len(x)
        return torch.arange(len(x), device=self.device) + self.at[key]

    def done(self) -> torch.Tensor:
        self.x = torch.cat(self.parts).contiguous()
        self.parts = []
        return self.x


def _packed_images(bank: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Bank rows (K, B) -> the packed input (B, K*C, H, W), channels_last, in one copy."""
    k, b = rows.shape
    x = bank[rows.reshape(-1)]  # (K*B, H, W, C)
    _, h, w, c = x.shape
    x = x.view(k, b, h, w, c).permute(1, 2, 3, 0, 4).reshape(b, h, w, k * c)
    return x.permute(0, 3, 1, 2)


def _member_index(model: PackedLeNet) -> list[torch.Tensor]:
    """For each parameter, the member each element belongs to, shaped to broadcast."""
    out = []
    for name, p in model.named_parameters():
        if name.split(".")[0] in PackedLeNet._LIN:
            out.append(torch.arange(model.k).view(-1, *[1] * (p.dim() - 1)))
        else:
            per = torch.arange(model.k).repeat_interleave(p.shape[0] // model.k)
            out.append(per.view(-1, *[1] * (p.dim() - 1)))
    return out


class _PackState:
    """The packed model of the active members, its momentum buffers and hooks."""

    def __init__(self, model, bufs, cfgs, mitigation, device, channels_last):
        self.model = model.to(device)
        if channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.params = list(self.model.parameters())
        self.bufs = bufs
        self.cfgs = cfgs
        self.mitigation = mitigation
        self.reg, self.proj = mitigation.hooks(self.model)
        idx = _member_index(self.model)
        to = dict(device=device, dtype=torch.float32)
        wd = torch.tensor([c.weight_decay for c in cfgs], **to)
        mom = torch.tensor([c.momentum for c in cfgs], **to)
        self.index = [i.to(device) for i in idx]
        self.wd = [wd[i] for i in self.index]
        self.mom = [mom[i] for i in self.index]
        self.any_wd = bool((wd != 0).any())

    def close(self) -> None:
        if self.reg is not None:
            self.reg.remove()

    @torch.no_grad()
    def step(self, lrs: torch.Tensor) -> None:
        """One SGD step, each member with its own lr (`lrs` (K,)), weight decay and momentum:
        d = g + wd p; buf = mom buf + d (buf = d at the first step); p -= lr buf."""
        for i, p in enumerate(self.params):
            d = torch.addcmul(p.grad, p, self.wd[i]) if self.any_wd else p.grad
            if self.bufs[i] is None:
                self.bufs[i] = d.clone()
            else:
                self.bufs[i].mul_(self.mom[i]).add_(d)
            p.addcmul_(self.bufs[i], lrs[self.index[i]], value=-1.0)
        if self.proj is not None:
            self.proj(self.model)

    def without(self, keep: list[int], device, channels_last) -> "_PackState":
        """The pack of the members `keep` (positions in this pack), optimizer state included."""
        self.close()
        m = self.model
        sub = PackedLeNet(len(keep), m.norm, m.in_channels, m.n_classes, m.image_size)
        state = {n: select_members(n, t, keep, m.k) for n, t in m.state_dict().items()}
        sub.load_state_dict(state)
        names = [n for n, _ in m.named_parameters()]
        bufs = [
            None if b is None else select_members(n, b, keep, m.k).clone()
            for n, b in zip(names, self.bufs)
        ]
        cfgs = [self.cfgs[i] for i in keep]
        return _PackState(sub, bufs, cfgs, self.mitigation, device, channels_last)


def _eval_rows(train_rows, test_rows, device) -> tuple[torch.Tensor, list[int], list[int]]:
    """Per member its training then test bank rows, padded to one length with its first row:
    (K, L) rows, the members' training counts and test counts."""
    rows = [torch.cat([a, b]) for a, b in zip(train_rows, test_rows)]
    length = max(len(r) for r in rows)
    pad = [torch.cat([r, r[:1].expand(length - len(r))]) for r in rows]
    return torch.stack(pad).to(device), [len(a) for a in train_rows], [len(b) for b in test_rows]


@torch.no_grad()
def _eval_logits(
    model: PackedLeNet,
    bank: torch.Tensor,
    rows: torch.Tensor,
    chunk: int,
    refute: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Eval-mode logits (K, L, classes) of every member on its own bank rows (K, L).

    With `refute` = (labels (K, L), counted (K, L) bool, allowed (K,)), the pass stops after the
    first chunk at which every member has at least `allowed` wrong predictions among its
    `counted` rows: the logits returned then cover only the rows seen (fewer than L columns)."""
    model.eval()
    parts, wrong = [], torch.zeros(rows.shape[0], device=rows.device)
    for i in range(0, rows.shape[1], chunk):
        z = model(_packed_images(bank, rows[:, i : i + chunk]))
        parts.append(z)
        if refute is not None:
            labels, counted, allowed = refute
            miss = z.argmax(-1) != labels[:, i : i + chunk]
            wrong += (miss & counted[:, i : i + chunk]).sum(1)
            if bool((wrong >= allowed).all()) and i + chunk < rows.shape[1]:
                break
    model.train()
    return torch.cat(parts, 1)


def fit_pack(
    jobs: Sequence[Job],
    device: str | None = None,
    channels_last: bool = True,
    history: bool = True,
    logits_at: Sequence[int] = (),
    eval_chunk: int | None = None,
    progress: bool = False,
    snapshots: Sequence[float] = (),
    eval_test: bool = True,
    fit_only: bool = False,
) -> list[TrainResult]:
    """Train `jobs` (LeNets of one `Job.pack_key`) as one packed model; per job a `TrainResult`
    equal to `train.fit`'s up to float rounding: state, history (without `history`: none, and
    no evaluation unless a fit rule needs it), and with `logits_at` the eval-mode logits on the
    member's own training and test images at those epochs (0: initialization), taken from the
    evaluation pass (`TrainResult.logits`). The evaluation feeds `eval_chunk` images per member
    per forward (default 512 / K: about 2x faster than 512 per member at K=8 on 2 cores,
    bench/bench_pack.py). With `snapshots` (clean training accuracies), each member's weights at
    its first epoch reaching each level are kept too (`TrainResult.snapshots`, as `train.fit`).
    Without `eval_test`, the evaluation passes skip the test images (the history's test entries
    are NaN): for models whose per-epoch record only feeds the fit rule (shadow models).

    With `fit_only` (not with `logits_at`), the per-epoch record only decides the fit rule and
    the snapshots (shadow models, the learning-rate search): an epoch's pass stops at the first
    chunk after which every member has more wrong clean training predictions than its lowest
    level not yet reached allows (its fit level or a snapshot level), so that no member can have
    reached one; the history of such an epoch holds NaN scores (NaN test scores where the pass
    stopped inside the test images). Stopping, snapshots, weights and the history's last entry
    (a member's fit epoch or epoch cap always gets the whole pass) are those of the whole pass:
    a level is ruled out only once one more error than it allows has been seen."""
    if fit_only and logits_at:
        raise ValueError("fit_only evaluates for the fit rule only: it keeps no logits_at")
    from tqdm.auto import tqdm

    device = device or default_device()
    keys = {j.pack_key() for j in jobs}
    if len(keys) != 1 or any(j.cfg.arch != "lenet" for j in jobs):
        raise ValueError(f"one pack needs LeNet jobs of one pack key, got {sorted(map(str, keys))}")
    cfgs = [j.cfg for j in jobs]
    subs = [j.member_split() for j in jobs]
    first, k = subs[0], len(jobs)
    c, h = first.x.shape[1], first.x.shape[2]
    bank = _Bank(device)
    train_rows, test_rows = [], []
    for job in jobs:
        s = job.split
        rows = bank.rows(s.x, s.mean, s.std)
        train_rows.append(rows if job.rows is None else rows[torch.as_tensor(job.rows)])
        test = bank.rows(s.x_test, s.mean, s.std)
        test_rows.append(test if eval_test else test[:0])
    images = bank.done()
    labels = torch.cat([s.y for s in subs]).to(device)
    label_at = [sum(len(s.y) for s in subs[:i]) for i in range(k)]
    n = [len(s.y) for s in subs]
    batch = min(n[0], cfgs[0].batch_size)
    steps = max(1, n[0] // cfgs[0].batch_size)
    fit_rule = any(cfg.fit_level is not None for cfg in cfgs)
    evaluate = history or fit_rule or bool(logits_at) or bool(snapshots)
    inits = []
    for cfg in cfgs:  # the same initialization as train.fit
        torch.manual_seed(cfg.seed)
        inits.append(build_model("lenet", cfg.norm, c, first.n_classes, h).state_dict())
    model = PackedLeNet(k, cfgs[0].norm, c, first.n_classes, h).load_members(inits)
    pack = _PackState(
        model,
        [None] * len(list(model.parameters())),
        cfgs,
        jobs[0].mitigation,
        device,
        channels_last,
    )
    active = list(range(k))  # job index of each member of the pack
    eval_rows, n_train, _ = _eval_rows(train_rows, test_rows, device)
    refute = _refutation(subs, eval_rows.shape[1], device) if fit_only else None
    hist: list[dict[str, list]] = [{} for _ in jobs]
    logits: list[dict] = [{} for _ in jobs]
    taken: list[dict] = [{} for _ in jobs]  # level -> (epoch, state) per job: `snapshots`
    results: list[TrainResult | None] = [None] * k

    def record(epoch: int, train_loss: list[float]) -> None:
        chunk = eval_chunk or max(16, 512 // len(active))
        until = None
        if refute is not None and all(epoch < cfgs[j].epochs for j in active):
            allowed = [_allowed(cfgs[j], snapshots, taken[j], refute.clean[j]) for j in active]
            until = (refute.labels, refute.counted, torch.tensor(allowed, device=device))
        z = _eval_logits(pack.model, images, eval_rows, chunk, until)
        for slot, j in enumerate(active):
            zj, zt = z[slot, : n_train[j]], z[slot, n_train[j] : n_train[j] + len(test_rows[j])]
            whole = z.shape[1] >= n_train[j] + len(test_rows[j])  # the test images seen too
            zt = zt if eval_test and whole else None
            if len(zj) < n_train[j]:  # a pass stopped early: no level reached, no score known
                got = {key: math.nan for key in refute.names}
            else:
                got = scores(subs[j], zj, zt)
            row = {"epoch": epoch, **got, "train_loss": train_loss[slot]}
            for key, v in row.items():
                hist[j].setdefault(key, []).append(v)
            if epoch in logits_at:
                logits[j][epoch] = (zj.cpu().clone(), None if zt is None else zt.cpu().clone())
            for level in new_snapshots(snapshots, taken[j], hist[j]):
                taken[j][level] = (epoch, _cpu(pack.model.member_state(slot)))

    what = f"packed x{k} {cfgs[0].norm}"
    count = Counter(what, max(cfg.epochs for cfg in cfgs), verb="epochs done", every=60.0)
    try:
        if evaluate:
            record(0, [float("nan")] * k)
        for epoch in tqdm(
            range(1, max(cfg.epochs for cfg in cfgs) + 1),
            disable=not progress,
            leave=False,
            desc=what,
        ):
            pack.model.train()
            gens = [torch.Generator().manual_seed(cfgs[j].seed * 100_003 + epoch) for j in active]
            perms = [torch.randperm(n[j], generator=g).to(device) for j, g in zip(active, gens)]
            img_rows = torch.stack(
                [train_rows[j][p[: steps * batch]] for j, p in zip(active, perms)]
            )
            lab_rows = torch.stack(
                [label_at[j] + p[: steps * batch] for j, p in zip(active, perms)]
            )
            run = torch.zeros(len(active), dtype=torch.float64, device=device)
            at = [(epoch - 1) * steps + s for s in range(steps)]  # each member's lr at each step
            lrs = torch.tensor(
                [[lr_at(cfgs[j], t, steps * cfgs[j].epochs) for j in active] for t in at],
                device=device,
            )
            for s in range(steps):
                sel = slice(s * batch, (s + 1) * batch)
                if cfgs[0].augment:
                    xb = [
                        random_crop_flip(images[r].permute(0, 3, 1, 2), g)
                        for r, g in zip(img_rows[:, sel], gens)
                    ]
                    xin = pack_input(torch.stack(xb)).contiguous(memory_format=torch.channels_last)
                else:
                    xin = _packed_images(images, img_rows[:, sel])
                if not channels_last:
                    xin = xin.contiguous()
                z = pack.model(xin)  # (K, B, classes)
                yb = labels[lab_rows[:, sel]]
                loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), yb.reshape(-1), reduction="none")
                loss = loss.view(len(active), -1).mean(1)
                if pack.reg is not None:
                    loss = loss + pack.reg.per_member(pack.model, len(active))
                total = loss.sum()
                if not torch.isfinite(total):
                    where = [active[i] for i in range(len(active)) if not loss[i].isfinite()]
                    bad = [cfgs[m] for m in where]
                    raise TrainingDiverged(
                        f"packed training diverged at epoch {epoch}, step {s}: "
                        + ", ".join(f"norm={b.norm}, lr={b.lr}, seed={b.seed}" for b in bad)
                        + "; lower lr",
                        bad,
                        where,
                    )
                pack.model.zero_grad(set_to_none=True)
                total.backward()
                pack.step(lrs[s])
                run += loss.detach().double()
            if evaluate:
                record(epoch, (run / steps).tolist())
            stop = [
                epoch_done(cfgs[j], hist[j]) if evaluate else epoch >= cfgs[j].epochs
                for j in active
            ]
            for slot, j in enumerate(active):
                if stop[slot]:
                    results[j] = TrainResult(
                        cfgs[j].as_dict(),
                        _cpu(pack.model.member_state(slot)),
                        hist[j] if history else {},
                        logits[j] or None,
                        taken[j] or None,
                    )
            keep = [slot for slot, done in enumerate(stop) if not done]
            if not keep:
                break
            if len(keep) < len(active):
                pack = pack.without(keep, device, channels_last)
                active = [active[slot] for slot in keep]
                eval_rows = eval_rows[keep]
                if refute is not None:
                    refute = refute._replace(
                        labels=refute.labels[keep], counted=refute.counted[keep]
                    )
            count.add()
    finally:
        pack.close()
    return results


class _Refutation(NamedTuple):
    """What `fit_only` counts wrong predictions with: per active member its training labels and
    clean flags along its evaluation rows (K, L; test and padding rows not counted), per job its
    clean count, and the names of a history row's scores."""

    labels: torch.Tensor
    counted: torch.Tensor
    clean: list[int]
    names: list[str]


def _refutation(subs: list[Split], length: int, device) -> _Refutation:
    """`_Refutation` of the jobs' member splits `subs`, evaluation rows `length` long."""
    labels = torch.zeros(len(subs), length, dtype=torch.long)
    counted = torch.zeros(len(subs), length, dtype=torch.bool)
    for i, s in enumerate(subs):
        labels[i, : len(s.y)] = s.y
        counted[i, : len(s.y)] = ~s.mask
    clean = [int((~s.mask).sum()) for s in subs]
    names = list(scores(subs[0], torch.zeros(len(subs[0].y), subs[0].n_classes), None))
    return _Refutation(labels.to(device), counted.to(device), clean, names)


def _allowed(cfg: TrainConfig, levels: Sequence[float], taken: dict, n_clean: int) -> float:
    """Wrong clean predictions that prove a member below every level it has still to reach (its
    fit level, snapshot levels not yet taken): one more than its lowest such level allows
    (0 when none is left: nothing to decide)."""
    left = [lv for lv in levels if lv not in taken]
    if cfg.fit_level is not None:
        left.append(cfg.fit_level)
    return (1.0 - min(left)) * n_clean + 1.0 if left else 0.0


def _cpu(state: dict) -> dict:
    return {key: v.detach().cpu().clone() for key, v in state.items()}


def fit_packed(
    split: Split,
    members: list[torch.Tensor],
    cfgs: list[TrainConfig],
    device: str | None = None,
    channels_last: bool = True,
    progress: bool = False,
    mitigation: MitigationConfig = MitigationConfig(),
) -> list[dict]:
    """The weights of shadow models: member k trains `cfgs[k]` on `split` rows `members[k]`
    (one pack: `fit_pack` without history)."""
    jobs = [Job(split, cfg, rows, mitigation) for cfg, rows in zip(cfgs, members)]
    results = fit_pack(jobs, device, channels_last, history=False, progress=progress)
    return [r.state for r in results]
