"""Mitigation: bound gamma/sigma of every BatchNorm channel during training.

The paper's theory says BN multiplies an outlier's per-step margin growth by (gamma/sigma)^2,
gamma being BN's learned scale and sigma the batch standard deviation of the channel's input.
Two ways to bound the ratio, both generic (any model whose BN layers are
`torch.nn.modules.batchnorm._BatchNorm`, including packed shadow models that keep K*C channels):

- `GammaSigmaRegularizer(lam, tau)`: a penalty
      lam * sum over BN channels c of relu(|gamma_c| / sigma_c - tau)^2
  with sigma_c = sqrt(Var_batch[x_c] + eps) of the *current* training batch (BN's own
  normalizer), captured by forward hooks during the forward pass, so the penalty is
  differentiable in gamma and in everything that produced x. Use it as
  `bnpaper.train.fit(..., regularizer=reg)` (fit calls `reg(model)` after the batch's forward
  pass), inside `with GammaSigmaRegularizer(...) as reg:` so the hooks are removed afterwards.
- `GammaSigmaProjection(tau)`: after each optimizer step, clip gamma_c to
  [-tau * sigma_c, tau * sigma_c] with sigma_c from the running statistics. Use it as
  `fit(..., after_step=proj)`.

`gamma_sigma(model)` returns the per-channel ratios (running statistics) for histograms;
`fit_mitigated(split, cfg, mit)` is `train.fit` with a `MitigationConfig`'s hooks (removed
afterwards); `relative_reductions(base, mitigated)` the per-seed share of the baseline's
memorization that a mitigation removes.

Notebook 05's machinery: `Variant` (a norm + a mitigation: its name, label and colour),
`summarize` (one variant's memorization and utility over seeds), `sweep_table` (the trade-off
of every variant), `reduction` (the verdict's estimate), `channel_scales` / `scale_summary` (the
gamma/sigma histograms) and `compare_lira` (LiRA on shadow pools with and
without the regularizer); for its figures `tradeoff_points` (means and seed ranges) and the
legend and title text (`curve_label`, `scale_label`, `lira_labels`, `lira_title`, whose
`lira_reading` says in words whether a lower AUC came at a clean-accuracy cost).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from .config import ConfigError, check_number

_BatchNorm = nn.modules.batchnorm._BatchNorm
METHODS = ("none", "penalty", "projection")


def _has_gamma(m: nn.Module) -> bool:
    return isinstance(m, _BatchNorm) and m.weight is not None


def affine_bn_layers(model: nn.Module) -> list[tuple[str, _BatchNorm]]:
    """(name, layer) of every BatchNorm layer of `model` that has a learned gamma."""
    return [(n, m) for n, m in model.named_modules() if _has_gamma(m)]


def batch_sigma(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Per-channel batch standard deviation sqrt(Var[x] + eps) as BN computes it in training
    (biased variance over every dimension but the channel dimension 1): shape (C,)."""
    dims = [0] + list(range(2, x.dim()))
    return torch.sqrt(x.var(dim=dims, unbiased=False) + eps)


def running_sigma(bn: _BatchNorm) -> torch.Tensor:
    """sqrt(running_var + eps) of a BN layer: shape (C,)."""
    if bn.running_var is None:
        raise ConfigError(f"{type(bn).__name__} has track_running_stats=False: no running "
                          "statistics to project with; use the penalty (batch statistics)")
    return torch.sqrt(bn.running_var + bn.eps)


def ratio_penalty(gamma: torch.Tensor, sigma: torch.Tensor, tau: float) -> torch.Tensor:
    """sum_c relu(|gamma_c| / sigma_c - tau)^2 (differentiable in gamma and sigma)."""
    return torch.relu(gamma.abs() / sigma - tau).pow(2).sum()


class GammaSigmaRegularizer:
    """The penalty lam * sum_c relu(|gamma_c|/sigma_c - tau)^2 over every BN channel.

    Hooks: with `model` given, one forward hook on each of its BN layers; without, one global
    module forward hook (`torch.nn.modules.module.register_module_forward_hook`) that sees the
    BN layers of any model built later, e.g. inside `bnpaper.train.fit`. Either way a hook only
    records the batch sigma of BN layers in training mode, and `remove()` (or leaving the `with`
    block) removes every hook. Calling `reg(model)` consumes the sigmas captured in the last
    forward pass of `model`; it raises if that model ran no training-mode forward pass since the
    last call (a penalty computed from stale or absent statistics would be silently wrong).

    `detach_sigma=True` treats sigma as a constant (gradient through gamma only), an ablation.
    """

    def __init__(self, lam: float, tau: float, model: nn.Module | None = None,
                 detach_sigma: bool = False):
        check_number("lam", lam, 0.0, None)
        check_number("tau", tau, 0.0, None, lo_open=True)
        self.lam, self.tau, self.detach_sigma = float(lam), float(tau), bool(detach_sigma)
        self._sigma: "weakref.WeakKeyDictionary[nn.Module, torch.Tensor]" = \
            weakref.WeakKeyDictionary()
        self._handles: list[RemovableHandle] = []
        if model is not None:
            layers = affine_bn_layers(model)
            if not layers:
                raise ConfigError("GammaSigmaRegularizer: the model has no BatchNorm layer with "
                                  "a learned gamma (norm='bn' is needed)")
            self._handles = [m.register_forward_hook(self._hook) for _, m in layers]
        else:
            self._handles = [nn.modules.module.register_module_forward_hook(self._hook)]

    def _hook(self, module: nn.Module, inputs: tuple, output) -> None:
        if module.training and _has_gamma(module):
            s = batch_sigma(inputs[0], module.eps)
            self._sigma[module] = s.detach() if self.detach_sigma else s

    @property
    def active(self) -> bool:
        return bool(self._handles)

    def remove(self) -> None:
        """Remove every hook and drop the captured statistics."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._sigma = weakref.WeakKeyDictionary()

    def __enter__(self) -> "GammaSigmaRegularizer":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __call__(self, model: nn.Module) -> torch.Tensor:
        """The penalty for the batch `model` has just seen (a scalar tensor)."""
        if not self._handles:
            raise RuntimeError("GammaSigmaRegularizer was removed; create a new one")
        layers = affine_bn_layers(model)
        if not layers:
            raise ConfigError("GammaSigmaRegularizer: the model has no BatchNorm layer with a "
                              "learned gamma (norm='bn' is needed)")
        missing = [n for n, m in layers if m not in self._sigma]
        if missing:
            raise RuntimeError(f"no batch statistics captured for BN layer(s) {missing}: call "
                               "the regularizer right after a training-mode forward pass")
        total = layers[0][1].weight.new_zeros(())
        for _, m in layers:
            total = total + ratio_penalty(m.weight, self._sigma.pop(m), self.tau)
        return self.lam * total

    def __repr__(self) -> str:
        return f"GammaSigmaRegularizer(lam={self.lam}, tau={self.tau})"


class GammaSigmaProjection:
    """After an optimizer step: clip |gamma_c| <= tau * sqrt(running_var_c + eps) in every BN
    layer of the model (in place, no gradient)."""

    def __init__(self, tau: float):
        check_number("tau", tau, 0.0, None, lo_open=True)
        self.tau = float(tau)

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> None:
        for _, m in affine_bn_layers(model):
            bound = self.tau * running_sigma(m)
            m.weight.copy_(torch.maximum(torch.minimum(m.weight, bound), -bound))

    def __repr__(self) -> str:
        return f"GammaSigmaProjection(tau={self.tau})"


@torch.no_grad()
def gamma_sigma(model: nn.Module) -> dict[str, torch.Tensor]:
    """|gamma_c| / sqrt(running_var_c + eps) per channel, for each affine BN layer: {name: (C,)}."""
    return {n: (m.weight.abs() / running_sigma(m)).detach().cpu()
            for n, m in affine_bn_layers(model)}


@dataclass(frozen=True)
class MitigationConfig:
    """Which mitigation a training run uses: method in METHODS, lam (penalty weight), tau
    (bound on gamma/sigma). `as_dict()` is part of a cache key."""
    method: str = "none"
    lam: float = 0.0
    tau: float = 1.0

    def __post_init__(self):
        if self.method not in METHODS:
            raise ConfigError(f"method={self.method!r} is not allowed; choose one of "
                              f"{list(METHODS)}")
        check_number("lam", self.lam, 0.0, None)
        check_number("tau", self.tau, 0.0, None, lo_open=True)

    def as_dict(self) -> dict:
        if self.method == "none":
            return {"method": "none"}
        if self.method == "projection":
            return {"method": "projection", "tau": self.tau}
        return {"method": "penalty", "lam": self.lam, "tau": self.tau}

    def hooks(self) -> tuple[GammaSigmaRegularizer | None, GammaSigmaProjection | None]:
        """(regularizer, after_step) for `bnpaper.train.fit`; remove the regularizer after use."""
        if self.method == "penalty":
            return GammaSigmaRegularizer(self.lam, self.tau), None
        if self.method == "projection":
            return None, GammaSigmaProjection(self.tau)
        return None, None


def fit_mitigated(split, cfg, mit: MitigationConfig, **kw):
    """`bnpaper.train.fit(split, cfg, **kw)` with the regularizer / projection of `mit`; the
    regularizer's hooks are removed afterwards, also when training fails. Every variant of a
    comparison (method "none" included) goes through this one trainer."""
    from .train import fit
    reg, proj = mit.hooks()
    try:
        return fit(split, cfg, regularizer=reg, after_step=proj, **kw)
    finally:
        if reg is not None:
            reg.remove()


def relative_reductions(base: Sequence[float], mitigated: Sequence[float]) -> np.ndarray:
    """Per paired run: 1 - mitigated / base, the share of the baseline's memorization that the
    mitigation removes (1: all of it, 0: none, < 0: more memorization). A baseline of 0 leaves
    nothing to reduce and has no defined share: it raises."""
    b, m = np.asarray(base, np.float64), np.asarray(mitigated, np.float64)
    if b.shape != m.shape:
        raise ValueError(f"paired values need equal shapes, got {b.shape} and {m.shape}")
    if np.any(b <= 0):
        raise ValueError(f"the baseline memorization must be > 0 in every run, got {b.tolist()}")
    return 1.0 - m / b


# ---------------------------------------------------------------- notebook 05: the comparison
@dataclass(frozen=True)
class Variant:
    """One model family of the comparison: a norm and a mitigation (BN, no-BN, BN + penalty,
    BN + projection). `name` keys results.json; `label` and `color` are for figures."""
    norm: str
    mit: MitigationConfig = MitigationConfig()

    @property
    def name(self) -> str:
        """'bn', 'none', 'bn+pen(l=0.01,t=1)', 'bn+proj(t=1)'."""
        return self.norm if self.mit.method == "none" else f"{self.norm}+{self.short}"

    @property
    def short(self) -> str:
        """The mitigation and its parameters: 'pen(l=0.01,t=1)', 'proj(t=1)', '' for none."""
        if self.mit.method == "penalty":
            return f"pen(l={self.mit.lam:g},t={self.mit.tau:g})"
        return f"proj(t={self.mit.tau:g})" if self.mit.method == "projection" else ""

    @property
    def family(self) -> str:
        """'BN', 'no-BN', 'BN + regularizer', 'BN + projection'."""
        base = {"bn": "BN", "none": "no-BN"}.get(self.norm, self.norm)
        what = {"penalty": " + regularizer", "projection": " + projection"}
        return base + what.get(self.mit.method, "")

    @property
    def params(self) -> str:
        """The mitigation's parameters in mathtext: '$\\lambda$=0.01, $\\tau$=1' ('' for none)."""
        if self.mit.method == "penalty":
            return f"$\\lambda$={self.mit.lam:g}, $\\tau$={self.mit.tau:g}"
        return f"$\\tau$={self.mit.tau:g}" if self.mit.method == "projection" else ""

    @property
    def label(self) -> str:
        """The family with its parameters: 'BN + regularizer ($\\lambda$=0.01, $\\tau$=1)'."""
        return f"{self.family} ({self.params})" if self.params else self.family

    @property
    def color(self) -> str:
        """A key of `bnpaper.plots.COLORS`: the norm, or 'bn_reg' for a mitigated BN model."""
        return self.norm if self.mit.method == "none" else "bn_reg"


def _curves(histories: Sequence[dict], key: str) -> np.ndarray:
    return np.array([h[key] for h in histories], dtype=float)


def summarize(histories: Sequence[dict], corruption: str) -> dict:
    """One variant over its seeds (one training history each), mean over seeds: final
    memorization (accuracy on the corrupted labels), mean memorization over training (area under
    the curve / epochs: speed and strength), the flipped samples' final accuracy on their true
    labels (None for OOD samples: the replaced image's label says nothing about an OOD image),
    final clean train and test accuracy."""
    from .stats import area_under_curve
    ep = histories[0]["epoch"]
    mem = _curves(histories, "noisy_acc")
    final = lambda key: float(_curves(histories, key)[:, -1].mean())  # noqa: E731
    return {"final_memorization": float(mem[:, -1].mean()),
            "memorization_auc": float(np.mean([area_under_curve(c, ep) for c in mem])),
            "noisy_true_acc": final("noisy_true_acc") if corruption == "flip" else None,
            "clean_train_acc": final("clean_acc"), "clean_test_acc": final("test_acc"),
            "n_seeds": len(histories)}


def sweep_table(runs: Mapping[tuple, object], corruptions: Sequence[str],
                variants: Sequence[Variant], seeds: Sequence[int]) -> dict[str, dict]:
    """The utility/memorization trade-off: for every corruption and variant ('corr/name'),
    final memorization and clean test accuracy, mean over `seeds`. `runs` maps
    (corruption, variant name, seed) to a TrainResult."""
    out = {}
    for corr in corruptions:
        for v in dict.fromkeys(variants):
            s = summarize([runs[corr, v.name, seed].history for seed in seeds], corr)
            out[f"{corr}/{v.name}"] = {"memorization": s["final_memorization"],
                                       "clean_test_acc": s["clean_test_acc"]}
    return out


def reduction(base: Sequence[float], mitigated: Sequence[float]):
    """The share of the baseline's final memorization that the mitigation removes, per paired
    seed (`relative_reductions`), as a mean with a 95% Student-t interval over seeds. If the
    baseline memorized nothing in some seed there is no share to reduce: NaN (inconclusive)."""
    from .stats import Estimate, t_mean
    b = np.asarray(base, np.float64)
    if not np.all(b > 0):
        return Estimate(float("nan"), float("nan"), float("nan"), len(b))
    return t_mean(relative_reductions(b, mitigated))


def paired_changes(mem_base: Sequence[float], mem_mitigated: Sequence[float],
                   acc_base: Sequence[float], acc_mitigated: Sequence[float]) -> dict:
    """For the record beside the verdict, per paired seed with a Student-t interval: the absolute
    reduction of memorization (base minus mitigated) and the change in clean test accuracy
    (mitigated minus base)."""
    from .stats import t_paired_diff
    return {"absolute_reduction": t_paired_diff(mem_base, mem_mitigated).as_dict(),
            "clean_acc_change": t_paired_diff(acc_mitigated, acc_base).as_dict()}


def channel_scales(results: Sequence, ds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel |gamma|, running sigma = sqrt(running_var + eps) and their ratio, pooled over
    every affine BN layer of every trained model (TrainResults on dataset `ds`, e.g. one per
    seed)."""
    g, sg = [], []
    shape = (ds.x_train.shape[1], ds.n_classes, ds.x_train.shape[2])
    for r in results:
        for _, bn in affine_bn_layers(r.model(*shape)):
            g.append(bn.weight.detach().abs())
            sg.append(running_sigma(bn))
    g_np, s_np = torch.cat(g).numpy(), torch.cat(sg).numpy()
    return g_np, s_np, g_np / s_np


def scale_summary(gamma: np.ndarray, sigma: np.ndarray, tau: float) -> dict:
    """Median gamma/sigma, the share of channels above 1 and above `tau`, median |gamma| and
    median sigma: whether a bound was met by a smaller gamma or by a larger sigma."""
    r = gamma / sigma
    return {"median": float(np.median(r)), "frac_above_1": float((r > 1).mean()),
            "frac_above_tau": float((r > tau).mean()), "median_gamma": float(np.median(gamma)),
            "median_sigma": float(np.median(sigma))}


@dataclass(frozen=True)
class LiraComparison:
    """LiRA on shadow pools that share one keep matrix: membership scores (T, N) per variant,
    `summary` (per variant and example group the mean over targets of AUC, balanced accuracy and
    TPR at low FPR, and the shadows' mean clean test accuracy; the paired change in AUC) and
    `delta` (group -> Estimate of AUC(base) - AUC(mitigated))."""
    scores: dict
    keep: np.ndarray
    summary: dict
    delta: dict

    def roc(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(fpr, tpr) of variant `name`'s membership scores, all targets pooled."""
        from .mia import roc
        return roc(self.scores[name].ravel(), self.keep.ravel())


def example_groups(mask: np.ndarray) -> dict[str, np.ndarray]:
    """The example groups an attack is measured on: all, and (if any example is corrupted) the
    corrupted and the clean ones."""
    mask = np.asarray(mask, bool)
    groups = {"all": np.ones(len(mask), bool)}
    return groups | ({"corrupted": mask, "clean": ~mask} if mask.any() else {})


def compare_lira(pools: Mapping[str, object], variant: str, groups: Mapping[str, np.ndarray],
                 base: str, mitigated: str, n_boot: int = 1000) -> LiraComparison:
    """Attack every pool (`bnpaper.shadow.ShadowPool`, by variant name) with LiRA `variant`,
    each shadow in turn the target of the others (leave-one-out), and compare `base` with
    `mitigated` paired on the same targets and examples (`mia.paired_delta_auc`: bootstrap over
    targets and examples, seed 0). The pools must share their keep matrix."""
    from . import mia
    keep = np.asarray(pools[base].keep, bool)
    for name, p in pools.items():
        if not np.array_equal(p.keep, keep):
            raise ValueError(f"pool {name!r} has another keep matrix than {base!r}: not paired")
    scores = {n: mia.lira(p.phi, keep)[variant] for n, p in pools.items()}
    summary: dict = {}
    for n, s in scores.items():
        tm = mia.evaluate_targets(s, keep, groups)
        summary[n] = {g: {k: float(np.mean(v)) for k, v in tm.values[g].items()} for g in groups}
        summary[n]["shadow_test_acc"] = float(np.mean(pools[n].test_acc))
    delta = {g: mia.paired_delta_auc([(scores[base], scores[mitigated], keep)],
                                     mask_per_run=[np.asarray(m, bool)], n_boot=n_boot, seed=0)
             for g, m in groups.items()}
    summary["delta_auc_bn_minus_reg"] = {g: d.as_dict() for g, d in delta.items()}
    return LiraComparison(scores, keep, summary, delta)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table; floats with 3 decimals, None as 'n/a'."""
    cell = lambda x: "n/a" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows])


def _label(key: str, variants: Sequence[Variant]) -> list:
    corr, name = key.split("/", 1)
    return [corr, next((v.label for v in variants if v.name == name), name)]


def summary_table(summary: Mapping[str, dict], variants: Sequence[Variant]) -> str:
    """`summarize`'s results ('corr/name' -> dict) as a Markdown table, memorization beside clean
    accuracy."""
    cols = {"n_seeds": "seeds", "final_memorization": "final memorization",
            "memorization_auc": "mean memorization", "noisy_true_acc": "flipped: true-label acc.",
            "clean_train_acc": "clean train acc.", "clean_test_acc": "clean test acc."}
    return markdown_table(["corruption", "model", *cols.values()],
                          [_label(k, variants) + [s[c] for c in cols] for k, s in summary.items()])


def scale_table(scales: Mapping[str, dict], variants: Sequence[Variant]) -> str:
    """`scale_summary`'s results ('corr/name' -> dict) as a Markdown table."""
    cols = {"median": "median gamma/sigma", "frac_above_1": "share > 1",
            "median_gamma": "median abs(gamma)", "median_sigma": "median sigma"}
    return markdown_table(["corruption", "model", *cols.values()],
                          [_label(k, variants) + [s[c] for c in cols] for k, s in scales.items()])


def lira_table(summary: Mapping[str, dict], variants: Sequence[Variant]) -> str:
    """`LiraComparison.summary` as a Markdown table: per variant and example group the mean AUC
    and TPR at 1% FPR over targets, beside the shadows' clean test accuracy."""
    rows = [[v.label, g, m["auc"], m["tpr@0.01"], summary[v.name]["shadow_test_acc"]]
            for v in variants for g, m in summary[v.name].items() if g != "shadow_test_acc"]
    return markdown_table(["model", "examples", "AUC", "TPR@1%FPR", "clean test acc."], rows)


# ---------------------------------------------------------------- notebook 05: figure text
LIRA_NAMES = {"online": "online", "online_fixed": "online, global variance",
              "offline": "offline", "offline_fixed": "offline, global variance"}


def tradeoff_points(runs: Mapping[tuple, object], corruption: str,
                    variants: Sequence[Variant]) -> dict[str, dict]:
    """Figure 2's points: per variant (by name), final memorization `x` and clean test accuracy
    `y`, mean over every seed the variant was trained on in `runs` (the seeds of `summarize`),
    their seed ranges `x_range`, `y_range` (min, max) and the number of seeds `n`."""
    out = {}
    for v in dict.fromkeys(variants):
        hs = [r.history for (c, n, _), r in sorted(runs.items(), key=lambda kv: kv[0][2])
              if c == corruption and n == v.name]
        mem, acc = _curves(hs, "noisy_acc")[:, -1], _curves(hs, "test_acc")[:, -1]
        out[v.name] = {"x": float(mem.mean()), "y": float(acc.mean()), "n": len(hs),
                       "x_range": (float(mem.min()), float(mem.max())),
                       "y_range": (float(acc.min()), float(acc.max()))}
    return out


def curve_label(label: str, s: Mapping) -> str:
    """Legend entry of a memorization curve from its `summarize` row: seeds and final values."""
    return (f"{label}, {s['n_seeds']} seeds\nfinal: memorization {s['final_memorization']:.2f},"
            f" clean test acc. {s['clean_test_acc']:.2f}")


def scale_label(label: str, ratios: np.ndarray, n_models: int, clean_acc: float) -> str:
    """Legend entry of a gamma/sigma histogram: models, channels, median, share > 1, clean acc."""
    r = np.asarray(ratios)
    return (f"{label}: {len(r)} channels of {n_models} models\nmedian {np.median(r):.2f}, "
            f"{(r > 1).mean():.0%} above 1; clean test acc. {clean_acc:.2f}")


def lira_labels(comparison: LiraComparison, variants: Sequence[Variant]) -> dict[str, str]:
    """Legend entries of the LiRA ROC figure by variant name: AUC beside clean test accuracy."""
    s = comparison.summary
    return {v.name: f"{v.label}\nmean AUC per target {s[v.name]['all']['auc']:.2f}, clean test acc. "
                    f"{s[v.name]['shadow_test_acc']:.2f}" for v in variants}


def lira_reading(comparison: LiraComparison, base: str, mitigated: str, tol: float) -> str:
    """What the LiRA comparison says, in words computed from its numbers: a lower AUC is a
    privacy gain only if the mitigated models keep the clean test accuracy (within `tol`); a
    lower AUC at a larger accuracy cost is that of a weaker model, not a privacy win."""
    s, d = comparison.summary, comparison.delta["all"]
    auc = f"{s[mitigated]['all']['auc']:.2f}, without it {s[base]['all']['auc']:.2f}"
    cost = s[base]["shadow_test_acc"] - s[mitigated]["shadow_test_acc"]
    acc = f"{s[mitigated]['shadow_test_acc']:.2f}, without it {s[base]['shadow_test_acc']:.2f}"
    if d.hi < 0:
        return f"With the regularizer the AUC is higher ({auc}); clean test accuracy {acc}."
    if not d.lo > 0:
        return (f"With the regularizer the AUC does not clearly change ({auc}; the 95% interval of "
                f"the difference includes 0); clean test accuracy {acc}.")
    if cost > tol:
        return (f"With the regularizer the AUC is lower ({auc}) but so is clean test accuracy "
                f"({acc}: {cost:.2f} lower, tolerance {tol:.2f}). A lower AUC at lower clean "
                "accuracy is that of a weaker model, not a privacy win.")
    return (f"With the regularizer the AUC is lower ({auc}) without losing clean test accuracy "
            f"({acc}, tolerance {tol:.2f}): a privacy gain at equal utility.")


def lira_title(comparison: LiraComparison, variant: str, n_shadows: int, base: str,
               mitigated: str, tol: float, width: int = 64) -> str:
    """Title of the LiRA ROC figure: the attack, the models behind each curve, then
    `lira_reading` (what the numbers say about privacy at equal utility), wrapped."""
    import textwrap
    head = (f"LiRA ({LIRA_NAMES.get(variant, variant)}): {n_shadows} shadow models per variant, "
            f"each the target of the other {n_shadows - 1}; ROC of all targets pooled")
    return "\n".join(textwrap.wrap(head, width) + textwrap.wrap(
        lira_reading(comparison, base, mitigated, tol), width))


def scale_lines(tau: float) -> dict[str, float]:
    """Reference lines of the gamma/sigma histograms {label: x}: the regularizer's bound tau and
    the paper's reference 1 (it reports gamma/sigma > 1 in most channels), one line if equal."""
    paper = "paper: $|\\gamma|/\\sigma$ > 1 in most channels"
    if np.isclose(tau, 1.0):
        return {f"1 = $\\tau$, the regularizer's bound ({paper})": 1.0}
    return {f"$\\tau$ = {tau:g}, the regularizer's bound": tau, f"1 ({paper})": 1.0}
