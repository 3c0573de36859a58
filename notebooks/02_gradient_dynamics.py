# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. Per-sample gradient dynamics: do noisy samples carry larger gradients under BN?
#
# **The paper's claim.** In BN models the per-sample gradient l2 norms of noisy (mislabeled or
# out-of-distribution) samples shift to much higher values than those of clean samples, and
# than those of noisy samples in no-BN models.
#
# **What this notebook measures.** While training (the same data and seed for every norm), at
# chosen epochs we compute exact per-sample gradient norms (`bnpaper.grads`; over all
# parameters and per parameter group) of fixed probe samples, clean and noisy, with the two
# BatchNorm semantics and the theory's simplification:
# - `"batch"`: the gradient of sample i's loss term (unreduced cross-entropy, i.e. B times its
#   share of the mean-reduced batch gradient) *inside a training batch*, train-mode BN whose
#   batch mean and variance depend on every sample — what actually moves the parameters;
#   computed on fixed training batches of natural composition;
# - `"eval"`: the gradient with running statistics (batch-independent), on a fixed random probe
#   subset of the training set;
# - `"batch_fixed"`: the `"batch"` gradient with the batch mean and variance held constant —
#   the simplification of the paper's theory ("batch statistics treated as fixed during a
#   step"), on the same probe batches. Comparing it with `"batch"` shows how much of a
#   sample's gradient reaches the parameters through the batch statistics.
#
# For models without BN (and GroupNorm) the three coincide. Computing them never changes the
# running statistics nor the training trajectory (the probes use their own random generator).

# %% tags=["parameters"]
dataset = "fashion_mnist"        # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"                 # label only: which params/<budget>.yaml set this run
arch = "lenet"                   # lenet | resnet20 | resnet18 | densenet
norms = ["bn", "none"]           # must include "bn" and "none"; add "gn", "bn_noaffine" as controls
corruption = "flip"              # flip (label flips) | ood (injected OOD images with random labels)
noise_frac = 0.1                 # share of training samples corrupted, in (0, 1)
ood_source = "digits"            # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
n_train = 6000                   # training samples drawn from the training set (seeded)
n_test = 5000                    # clean test samples used for test accuracy
epochs = 10                      # training epochs
seeds = [0, 1, 2]                # one run per seed and norm
batch_size = 128                 # SGD mini-batch size (also the size of the "batch" probe batches)
lr = 0.05                        # peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4              # L2 weight decay
augment = False                  # random crop + flip (CIFAR)
probe_epochs = [0, 1, 2, 4, 7, 10]  # epochs at which gradient norms are recorded; 0 is the initialization
n_probe = 1000                   # "eval" probe: random training samples (natural noise share)
probe_batches = 2                # "batch" probe: training batches; all noisy + as many clean per batch
min_ratio = 2.0                  # "much higher": BN's median noisy/clean norm ratio must reach this
acc_tolerance = 0.05             # BN vs no-BN counts only if BN's clean test accuracy exceeds no-BN's
                                 # by at most this (else no-BN may just have learned less)
download = False                 # allow torchvision to download the dataset if it is missing

# %%
from bnpaper import config

P = config.check_params(globals(), "02_gradient_dynamics")
from bnpaper import data, models

NB = "02_gradient_dynamics"
config.check_common(P)
config.check_choice("corruption", corruption, ("flip", "ood"))
config.check_int_list("probe_epochs", probe_epochs, lo=0, min_len=2)
config.check_number("min_ratio", min_ratio, 1.0, None)
config.check_number("acc_tolerance", acc_tolerance, 0.0, 1.0)
if max(probe_epochs) > epochs or sorted(probe_epochs) != list(probe_epochs):
    raise config.ConfigError(f"probe_epochs={probe_epochs!r} must be increasing and within 0..epochs={epochs}")
config.check_number("n_probe", n_probe, 10, n_train, integer=True)
config.check_number("probe_batches", probe_batches, 1, n_train // batch_size, integer=True)
ds = data.load_dataset(dataset, download=download)  # a missing dataset is one clear error here
config.check_number("n_train", n_train, 10, len(ds.x_train), integer=True)
if corruption == "ood" and ood_source not in ("noise", "digits"):
    data.locate(ood_source)

# %%
# NBVAL_IGNORE_OUTPUT
import platform

import matplotlib.pyplot as plt
import numpy as np
import torch

from bnpaper import grads, plots, stats, store, train

plots.use_style()
print(f"python {platform.python_version()}, torch {torch.__version__}, "
      f"{torch.get_num_threads()} threads; dataset {dataset}: {len(ds.x_train)} train / "
      f"{len(ds.x_test)} test images of shape {tuple(ds.x_train.shape[1:])}")


# %% [markdown]
# ## The experiment
# `on_epoch_end` records the norms at the probe epochs; its settings are part of each cached
# unit's key (with the training configuration, the data fingerprint and the source of
# `bnpaper.grads`), so a re-run re-renders in seconds and a killed run resumes.

# %%
def make_probe(split, seed):
    """Fixed probe indices: an 'eval' subset and the 'batch' probe batches (own generator)."""
    g = torch.Generator().manual_seed(10_007 + seed)
    perm = torch.randperm(len(split.x), generator=g)
    sub = perm[:n_probe]
    batches = torch.randperm(len(split.x), generator=g)[:probe_batches * batch_size].view(
        probe_batches, batch_size)
    return sub, batches


def grad_hook(split, seed):
    xs = data.normalize(split.x, split.mean, split.std)
    sub, batches = make_probe(split, seed)
    m = split.mask

    def on_epoch_end(epoch, model):
        if epoch not in probe_epochs:
            return None
        out = {"epoch": epoch}
        r = grads.per_sample_grad_norms(model, xs[sub], split.y[sub], mode="eval")
        out["eval_norm"], out["eval_noisy"] = r.total.tolist(), m[sub].tolist()
        norms_b, noisy_b, norms_f, groups_b = [], [], [], {}
        for b in batches:
            sel = m[b].clone()
            clean = torch.nonzero(~m[b]).flatten()[:int(sel.sum())]
            sel[clean] = True
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


# %%
# NBVAL_IGNORE_OUTPUT
cache = store.Store()
runs = {}  # (norm, seed) -> history
probe_cfg = {"probe_epochs": list(probe_epochs), "n_probe": n_probe, "probe_batches": probe_batches,
             "definition": "sum-reduced per-sample cross-entropy; eval + batch (total and per "
                           "parameter group) and batch_fixed (noisy + equal clean)"}
for seed in seeds:
    split = data.make_split(ds, n_train, corruption, noise_frac, seed, ood_source, n_test)
    for norm in norms:
        cfg = train.TrainConfig(arch=arch, norm=norm, epochs=epochs, batch_size=batch_size,
                                lr=lr, weight_decay=weight_decay, augment=augment, seed=seed)
        key = {"train": cfg.__dict__, "corruption": corruption, "noise_frac": noise_frac,
               "ood_source": ood_source if corruption == "ood" else None, "probe": probe_cfg}
        res = cache.cached(
            "grad_dynamics", key, data=split.fingerprint(), resumable=True,
            modules=("grads", "lenet_grads"),
            compute=lambda checkpoint, split=split, cfg=cfg: train.fit(
                split, cfg, checkpoint=checkpoint, on_epoch_end=grad_hook(split, cfg.seed),
                desc=f"{cfg.norm} seed {cfg.seed}"))
        runs[norm, seed] = res.history
print(f"{len(runs)} models ready")

# %%
acc = {n: float(np.mean([runs[n, s]["test_acc"][-1] for s in seeds])) for n in norms}
mem = {n: float(np.mean([runs[n, s]["noisy_acc"][-1] for s in seeds])) for n in norms}
name = {n: f"{plots.label(n)} (test acc {acc[n]:.2f})" for n in norms}
MODES = ("batch", "eval")


def records(norm, seed, mode):
    """[(epoch, norms (k,), noisy (k,) bool)] at the probe epochs."""
    return [(r["epoch"], np.array(r[f"{mode}_norm"]), np.array(r[f"{mode}_noisy"], bool))
            for r in runs[norm, seed]["grads"]]


def medians(norm, mode):
    """(seeds, probe epochs) medians of noisy and of clean norms, and the share of noisy norms."""
    noisy, clean, share = [], [], []
    for s in seeds:
        rec = records(norm, s, mode)
        noisy.append([np.median(v[k]) for _, v, k in rec])
        clean.append([np.median(v[~k]) for _, v, k in rec])
        share.append([v[k].sum() / v.sum() for _, v, k in rec])
    return np.array(noisy), np.array(clean), np.array(share)


ep = [r["epoch"] for r in runs[norms[0], seeds[0]]["grads"]]

# %% [markdown]
# ## Figure 1: distributions of per-sample gradient norms
# `"batch"` definition (sum-reduced loss, l2 norm over all parameters), pooled over seeds, at
# three probe epochs: densities of log10 of the norm (linear bins in log10, so the shapes are
# not distorted by log-spaced bins).

# %%
show = [ep[0], ep[len(ep) // 2], ep[-1]]
fig, axes = plt.subplots(len(norms), len(show), figsize=(3.4 * len(show), 2.4 * len(norms)),
                         squeeze=False, sharex=True)
for i, norm in enumerate(norms):
    for j, e in enumerate(show):
        ax = axes[i, j]
        vals = [(v, k) for s in seeds for (ee, v, k) in records(norm, s, "batch") if ee == e]
        v = np.concatenate([a for a, _ in vals])
        k = np.concatenate([b for _, b in vals])
        lv = np.log10(np.maximum(v, 1e-12))
        bins = np.linspace(lv.min(), lv.max() + 1e-9, 30)
        ax.hist(lv[~k], bins=bins, alpha=0.6, color="0.5", label="clean", density=True)
        ax.hist(lv[k], bins=bins, alpha=0.6, color=plots.color(norm), label="noisy", density=True)
        ax.set(title=f"{plots.label(norm)}, epoch {e}", xlabel="log10 per-sample gradient l2 norm",
               ylabel="density" if j == 0 else None)
        if j == 0:
            ax.legend()
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "norm_histograms")

# %% [markdown]
# ## Figure 2: medians over training
# Median norm of noisy (solid) and clean (dashed) probe samples, mean over seeds with a min-max
# band; left `"batch"`, right `"eval"` definition.

# %%
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4))
for ax, mode in zip(axes, MODES):
    for norm in norms:
        noisy, clean, _ = medians(norm, mode)
        plots.band(ax, ep, noisy, norm, f"{name[norm]}: noisy")
        plots.band(ax, ep, clean, norm, f"{plots.label(norm)}: clean", "--")
    ax.set(title=f'"{mode}" gradients', xlabel="epoch",
           ylabel="median per-sample gradient l2 norm (log scale)", yscale="log")
axes[0].legend(fontsize=7)
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "median_norms")

# %% [markdown]
# ## Figure 3: noisy/clean ratio and the noisy samples' share of the gradient
# Left: median noisy norm / median clean norm per model (`"batch"` solid, `"eval"` dotted).
# Right: share of the summed per-sample gradient norms carried by noisy samples (`"eval"` probe
# of natural composition; dotted line: their share of the samples).

# %%
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4))
for norm in norms:
    for mode, ls in zip(MODES, ("-", ":")):
        noisy, clean, _ = medians(norm, mode)
        plots.band(axes[0], ep, noisy / clean, norm, f"{name[norm]} ({mode})", ls)
    plots.band(axes[1], ep, medians(norm, "eval")[2], norm, name[norm])
axes[0].set(xlabel="epoch", ylabel="median noisy / median clean norm (log scale)", yscale="log")
axes[1].axhline(noise_frac, color="k", linestyle=":", linewidth=1)
axes[1].set(xlabel="epoch", ylabel="share of total gradient norm (noisy)", ylim=(0, 1))
axes[0].legend(fontsize=7)
axes[1].legend(fontsize=7)
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "noisy_clean_ratio")

# %% [markdown]
# ## Figure 4: the batch statistics' part of the gradient (the theory's simplification)
# The paper's theory treats BN's batch statistics as fixed during a step. Left: the median over
# probe samples of `"batch_fixed"` / `"batch"` norm, noisy (solid) and clean (dashed) — how far
# each sample's gradient changes once the gradient through the batch mean and variance is
# dropped (1 would mean not at all). Right: the median noisy/clean ratio under both
# definitions. For no-BN models the two definitions coincide (a ratio of exactly 1).

# %%
bn_like = [n for n in norms if n in ("bn", "bn_noaffine")]


def fixed_vs_batch(norm):
    """(seeds, probe epochs) median of batch_fixed / batch norm per sample, noisy and clean."""
    noisy, clean = [], []
    for s in seeds:
        b, f = records(norm, s, "batch"), records(norm, s, "batch_fixed")
        rel = [(vf / vb, k) for (_, vb, k), (_, vf, _) in zip(b, f)]
        noisy.append([np.median(r[k]) for r, k in rel])
        clean.append([np.median(r[~k]) for r, k in rel])
    return np.array(noisy), np.array(clean)


fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4))
for norm in bn_like:
    noisy, clean = fixed_vs_batch(norm)
    plots.band(axes[0], ep, noisy, norm, f"{plots.label(norm)}: noisy")
    plots.band(axes[0], ep, clean, norm, f"{plots.label(norm)}: clean", "--")
    for mode, ls in (("batch", "-"), ("batch_fixed", "-.")):
        n_, c_, _ = medians(norm, mode)
        plots.band(axes[1], ep, n_ / c_, norm, f"{plots.label(norm)} ({mode})", ls)
axes[0].axhline(1.0, color="k", linestyle=":", linewidth=1)
axes[0].set(xlabel="epoch", ylabel="median batch_fixed / batch norm")
axes[1].set(xlabel="epoch", ylabel="median noisy / median clean norm (log scale)", yscale="log")
axes[0].legend(fontsize=7)
axes[1].legend(fontsize=7)
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "fixed_statistics")

# %% [markdown]
# ## Figure 5: which parameters carry the noisy samples' gradient
# The `"batch"` norm split by parameter group (`bnpaper.grads` groups: conv/linear `weight`,
# BN `gamma` and `beta`, linear `bias`): median noisy / median clean norm of each group, per
# model. The theory says outliers drive the growth of gamma; a noisy/clean ratio on `gamma`
# above the one on the weights says that noisy samples push on gamma harder than on the rest,
# relative to clean samples (the norm does not say in which direction they push).

# %%
GROUP_STYLE = {"weight": "-", "gamma": "--", "beta": ":", "bias": "-.", "other": (0, (1, 3))}


def group_ratio(norm, group):
    """(seeds, probe epochs) median noisy / median clean "batch" norm of one parameter group."""
    out = []
    for s in seeds:
        row = []
        for r in runs[norm, s]["grads"]:
            v, k = np.array(r["batch_groups"][group]), np.array(r["batch_noisy"], bool)
            row.append(np.median(v[k]) / np.median(v[~k]))
        out.append(row)
    return np.array(out)


groups_of = {n: list(runs[n, seeds[0]]["grads"][0]["batch_groups"]) for n in norms}
fig, axes = plt.subplots(1, len(norms), figsize=(3.6 * len(norms), 3.2), squeeze=False, sharey=True)
for ax, norm in zip(axes[0], norms):
    for g in groups_of[norm]:
        plots.band(ax, ep, group_ratio(norm, g), norm, g, GROUP_STYLE.get(g, "-"))
    ax.set(title=name[norm], xlabel="epoch", yscale="log",
           ylabel="median noisy / median clean norm (log scale)" if norm == norms[0] else None)
    ax.legend(fontsize=7)
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "groups_noisy_clean_ratio")

# %% [markdown]
# ## Verdict
# Per seed, the ratio of median noisy to median clean `"batch"` norm, averaged over the probe
# epochs after initialization; mean over seeds with a 95% Student-t interval (`stats.t_mean`,
# `stats.t_paired_diff`). Two claims, read with `stats.verdict`: (1) in BN models noisy norms
# are *much* higher than clean ones — the BN ratio's interval lies above 1 and its mean
# reaches `min_ratio`; (2) relative to clean samples, noisy samples' norms are higher in BN
# than in no-BN models — the paired BN minus no-BN gap in the ratio lies above 0, and BN's
# clean test accuracy exceeds no-BN's by at most `acc_tolerance`. Ratios, not absolute norms,
# are compared across models: absolute gradient norms depend on each model's parametrization
# (the medians themselves are in Figure 2 and in the results JSON).

# %%
late = np.array(ep) > 0   # the probe epochs after initialization


def ratio_per_seed(norm, mode="batch"):
    noisy, clean, _ = medians(norm, mode)
    return (noisy / clean)[:, late].mean(1)


ratio = {n: stats.t_mean(ratio_per_seed(n)) for n in norms}
gap = stats.t_paired_diff(ratio_per_seed("bn"), ratio_per_seed("none"))
above_one = stats.t_mean(ratio_per_seed("bn") - 1)   # the ratio minus its null value 1
v1 = stats.verdict(above_one, need=min_ratio - 1)
v2 = stats.verdict(gap, 0.0, acc["bn"] - acc["none"], acc_tolerance)
common = {"dataset": dataset, "budget": budget, "clean_test_acc": acc, "corruption": corruption}
claims = [
    {"claim": "In BN models the per-sample gradient norms of noisy samples are much higher than "
              "those of clean samples", "paper": f"noisy norms shift to much higher values (here: ratio >= {min_ratio:g})",
     "measured": ratio["bn"].value, "lo": ratio["bn"].lo, "hi": ratio["bn"].hi,
     "unit": "median noisy / median clean gradient norm (batch definition)", "verdict": v1, **common},
    {"claim": "Noisy samples' gradient norms are higher (relative to clean) in BN than in no-BN models",
     "paper": "BN noisy norms higher than no-BN noisy norms", "measured": gap.value, "lo": gap.lo,
     "hi": gap.hi, "unit": "BN minus no-BN, noisy/clean median norm ratio", "verdict": v2, **common}]
results = {"notebook": NB, "params": P, "claims": claims,
           "ratio": {n: ratio[n].as_dict() for n in norms},
           "ratio_eval": {n: stats.t_mean(ratio_per_seed(n, "eval")).as_dict() for n in norms},
           "ratio_by_group": {n: {g: stats.t_mean(group_ratio(n, g)[:, late].mean(1)).as_dict()
                                  for g in groups_of[n]} for n in norms},
           "ratio_batch_fixed": {n: stats.t_mean(ratio_per_seed(n, "batch_fixed")).as_dict()
                                 for n in norms},
           "fixed_over_batch_median": {n: dict(zip(("noisy", "clean"), (
               float(v[:, late].mean()) for v in fixed_vs_batch(n)))) for n in bn_like},
           "median_noisy_norm_final": {n: float(medians(n, "batch")[0][:, -1].mean()) for n in norms},
           "median_clean_norm_final": {n: float(medians(n, "batch")[1][:, -1].mean()) for n in norms},
           "noisy_share_eval_final": {n: float(medians(n, "eval")[2][:, -1].mean()) for n in norms},
           "memorization_final": mem,
           "key_figures": [f"figures/{NB}/{dataset}/median_norms.png",
                           f"figures/{NB}/{dataset}/noisy_clean_ratio.png"]}
store.save_results(NB, dataset, results)

# %%
# NBVAL_CHECK_OUTPUT
print(f"Gradient dynamics on {dataset} ({arch}, {corruption}, {noise_frac:.0%} noisy, {len(seeds)} seeds, "
      f"{epochs} epochs, budget {budget})")
print("Paper: noisy samples' per-sample gradient norms shift much higher than clean ones under BN, "
      "and higher than in no-BN models.")
for n in norms:
    r = ratio[n]
    print(f"- {plots.label(n)}: median noisy/clean norm ratio {r.value:.1f} [{r.lo:.1f}, {r.hi:.1f}] "
          f"(clean test acc {acc[n]:.2f})")
print(f"- BN ratio >= {min_ratio:g}: {v1}; BN - no-BN ratio = {gap.value:+.1f} "
      f"[{gap.lo:+.1f}, {gap.hi:+.1f}]: {v2}")
for n in norms:
    by = results["ratio_by_group"][n]
    print(f"- {plots.label(n)}, noisy/clean ratio by parameter group: "
          + ", ".join(f"{g} {by[g]['value']:.1f}" for g in groups_of[n]))
for n in bn_like:
    d = results["fixed_over_batch_median"][n]
    rf = results["ratio_batch_fixed"][n]
    print(f"- {plots.label(n)} with the batch statistics held fixed (the theory's simplification): "
          f"per-sample norms are a median {d['noisy']:.1f}x (noisy) / {d['clean']:.1f}x (clean) "
          f"their 'batch' norms; noisy/clean ratio {rf['value']:.1f} [{rf['lo']:.1f}, {rf['hi']:.1f}]")
