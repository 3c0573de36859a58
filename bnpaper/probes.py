"""Notebook 02's gradient-norm probes: which samples, and the hook that records their norms.

Which samples are probed (`GradProbe`) and the `on_epoch_end` hook that `bnpaper.units.trained`
runs inside its cached unit; the analysis of what it records is `grad_analysis` (not part of any
unit's code)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import grads
from .data import Split, normalize


@dataclass(frozen=True)
class GradProbe:
    """At `epochs`: 'eval' norms of `n_probe` random training samples, and 'batch' norms (total
    and per parameter group) and 'batch_fixed' norms in `batches` training batches of
    `batch_size` (all noisy samples of a batch and as many clean ones). Part of the unit's key."""

    epochs: tuple[int, ...]
    n_probe: int
    batches: int
    batch_size: int
    seed: int

    def indices(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The 'eval' subset (n_probe,) and the probe batches (batches, batch_size), drawn with
        the probe's own generator."""
        g = torch.Generator().manual_seed(10_007 + self.seed)
        sub = torch.randperm(n, generator=g)[: self.n_probe]
        b = torch.randperm(n, generator=g)[: self.batches * self.batch_size]
        return sub, b.view(self.batches, self.batch_size)

    def hook(self, split: Split):
        """on_epoch_end(epoch, model) for `bnpaper.train.fit`: {"grads": {...}} at probe epochs."""
        xs = normalize(split.x, split.mean, split.std)
        sub, batches = self.indices(len(split.x))
        m = split.mask

        def on_epoch_end(epoch, model):
            if epoch not in self.epochs:
                return None
            out = {"epoch": epoch}
            r = grads.per_sample_grad_norms(model, xs[sub], split.y[sub], mode="eval")
            out["eval_norm"], out["eval_noisy"] = r.total.tolist(), m[sub].tolist()
            norms_b, noisy_b, norms_f, groups_b = [], [], [], {}
            for b in batches:
                sel = m[b].clone()
                sel[torch.nonzero(~m[b]).flatten()[: int(sel.sum())]] = True
                r = grads.per_sample_grad_norms(model, xs[b], split.y[b], mode="batch", select=sel)
                norms_b += r.total[sel].tolist()
                noisy_b += m[b][sel].tolist()
                for g, v in r.groups.items():
                    groups_b.setdefault(g, []).extend(v[sel].tolist())
                r = grads.per_sample_grad_norms(model, xs[b], split.y[b], mode="batch_fixed")
                norms_f += r.total[sel].tolist()
            out["batch_norm"], out["batch_noisy"] = norms_b, noisy_b
            out["batch_fixed_norm"], out["batch_fixed_noisy"] = norms_f, noisy_b
            out["batch_groups"] = groups_b
            return {"grads": out}

        return on_epoch_end


# ---------------------------------------------------------------- analysis of the recorded probes
# Every function takes the histories of several runs (one per seed, same norm) and returns one
# row per run; a run's probe records are `history["grads"]`, one dict per probe epoch.
MODES = ("batch", "eval", "batch_fixed")
