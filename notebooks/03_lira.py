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
# # 3. Privacy leakage: are BN models more exposed to membership inference (LiRA)?
#
# **The paper's claim.** Attacked with LiRA, the likelihood-ratio attack of Carlini et al.
# (IEEE S&P 2022), BN models consistently have a higher attack AUC; with 1% and 5% outlier
# mixes BN raises the AUC by *at least 3 and 4 points* respectively; the trend holds on clean
# data too (overall increase 3-5 points).
#
# **What this notebook measures.** One pool of N examples per (outlier mix, seed), with a
# share of injected outliers (label flips or OOD images). M shadow models per norm train on
# the halves given by one balanced, seeded keep matrix (every example IN for exactly M/2
# models); BN and no-BN use the *same* keep matrix, so every comparison is paired. Each model
# is in turn the target and the other M-1 are its shadows. We report LiRA online/offline with
# per-example and fixed variance, the loss attack and RMIA (Zarifzadeh et al. 2024), with AUC,
# balanced accuracy and TPR at 1% and 0.1% FPR, on all examples and on the outliers, next to
# every model's clean test accuracy and train-test gap.
#
# **BN semantics.** Queries use eval mode (running statistics) by default;
# `bn_query_mode="train-batch"` normalizes each query batch with its own statistics (an
# ablation, computed on a copy: the saved statistics never change).
#
# **Scale.** `papermill notebooks/03_lira.ipynb out.ipynb -p dataset cifar10 -p n_train 50000
# -p n_shadows 64` runs the paper's setting on a GPU machine. To spread shadow training over a
# cluster, start a Dask scheduler and pass `-p executor dask://host:port`; on Slurm, create it
# with dask-jobqueue (`SLURMCluster(cores=8, memory="32GB").scale(jobs=16)`) and pass its
# scheduler address. Every shadow model is a cached unit: a killed run resumes where it stopped.

# %% tags=["parameters"]
dataset = "fashion_mnist"        # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"                 # label only: which params/<budget>.yaml set this run
arch = "lenet"                   # lenet | resnet20 | resnet18 | densenet
norms = ["bn", "none"]           # must include "bn" and "none"; "gn", "bn_noaffine" as controls
outlier_frac = [0.0, 0.01, 0.05] # outlier mixes (share of the pool); the paper: 0, 0.01, 0.05
outlier_kind = "flip"            # flip (label flipped to another class) | ood (foreign images, random labels)
ood_source = "digits"            # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
n_train = 4000                   # pool size N (each shadow trains on N/2 of it)
n_test = 1000                    # clean test images: test accuracy and RMIA's population samples
n_shadows = 16                   # models per norm and pool (even); each is in turn the target
epochs = 15                      # training epochs per shadow model
batch_size = 64                  # SGD mini-batch size
lr = 0.05                        # peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4              # L2 weight decay
augment = "auto"                 # random crop + mirror in training and queries; auto: on for CIFAR
seeds = [0]                      # one pool (data subset, outliers, keep matrix) per seed
executor = "inprocess"           # inprocess | process | process:N | dask://host:port
trainer = "auto"                 # auto (packed LeNets, plain otherwise) | plain | packed
pack_size = 8                    # LeNet shadows trained together as one packed model
bn_query_mode = "eval"           # eval (running statistics) | train-batch (ablation)
sigma_floor = 1e-3               # lower bound on LiRA's fitted standard deviations (phi units)
n_boot = 500                     # bootstrap resamples for intervals
acc_tolerance = 0.05             # a BN - no-BN gap counts only if BN's clean test accuracy exceeds
                                 # no-BN's by at most this (else no-BN may leak less as it learned less)
download = False                 # allow torchvision to download the dataset if it is missing

# %%
from bnpaper import config

P = config.check_params(globals(), "03_lira")
from bnpaper import data, models, shadow

NB = "03_lira"
config.check_common(P)
mixes = [outlier_frac] if isinstance(outlier_frac, (int, float)) else list(outlier_frac)
for f in mixes:
    config.check_number("outlier_frac", f, 0.0, 0.5, hi_open=True)
if len(set(mixes)) != len(mixes) or not mixes:
    raise config.ConfigError(f"outlier_frac={outlier_frac!r} must be a number or a list of distinct numbers")
config.check_choice("outlier_kind", outlier_kind, ("flip", "ood"))
config.check_number("n_train", n_train, 20, None, integer=True)
config.check_number("n_test", n_test, 10, None, integer=True)
config.check_number("n_shadows", n_shadows, 4, None, integer=True)
if n_shadows % 2:
    raise config.ConfigError(f"n_shadows={n_shadows} must be even (balanced keep matrix)")
config.check_number("batch_size", batch_size, 2, n_train // 2, integer=True)
config.check_choice("augment", augment, ("auto", True, False))
shadow.check_executor(executor)
config.check_choice("trainer", trainer, shadow.TRAINERS)
if trainer == "packed" and arch != "lenet":
    raise config.ConfigError(f"trainer='packed' needs arch='lenet', got arch={arch!r}")
config.check_number("pack_size", pack_size, 1, 64, integer=True)
config.check_choice("bn_query_mode", bn_query_mode, shadow.QUERY_MODES)
config.check_number("sigma_floor", sigma_floor, 0.0, 10.0, lo_open=True)
config.check_number("n_boot", n_boot, 10, None, integer=True)
config.check_number("acc_tolerance", acc_tolerance, 0.0, 1.0)
ds = data.load_dataset(dataset, download=download)  # a missing dataset is one clear error here
config.check_number("n_train", n_train, 20, len(ds.x_train), integer=True)
if outlier_kind == "ood" and ood_source not in ("noise", "digits"):
    data.load_dataset(ood_source)
use_augment = (dataset in ("cifar10", "cifar100")) if augment == "auto" else augment

# %%
# NBVAL_IGNORE_OUTPUT
import platform
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display

from bnpaper import mia, plots, stats, store, train

plots.use_style()
print(f"python {platform.python_version()}, torch {torch.__version__}, "
      f"{torch.get_num_threads()} threads; dataset {dataset}: {len(ds.x_train)} train / "
      f"{len(ds.x_test)} test images of shape {tuple(ds.x_train.shape[1:])}; executor {executor}")

# %% [markdown]
# ## Shadow models
# For every (outlier mix, seed): one pool, one keep matrix, and `n_shadows` models per norm.
# LeNets are trained `pack_size` at a time as one packed model (grouped convolutions, batched
# matmuls, BN over K*C channels: each member keeps its own weights and statistics; see
# `bench/bench_packed.py`). Every shadow model is a cached unit keyed by its full config, its
# keep column and the pool's fingerprint.

# %%
# NBVAL_IGNORE_OUTPUT
t0 = time.time()
pools, masks = {}, {}
for mix in mixes:
    for seed in seeds:
        kind = outlier_kind if mix > 0 else "none"
        split = data.make_split(ds, n_train, kind, mix, seed, ood_source, n_test)
        keep = shadow.keep_matrix(n_shadows, n_train, seed)
        masks[mix, seed] = split.mask.numpy()
        for norm in norms:
            base = train.TrainConfig(arch=arch, norm=norm, epochs=epochs, batch_size=batch_size,
                                     lr=lr, weight_decay=weight_decay, augment=use_augment)
            pools[mix, seed, norm] = shadow.run_shadows(
                split, base, keep, seed=seed, executor=executor, trainer=trainer,
                pack_size=pack_size, bn_query_mode=bn_query_mode)
print(f"{len(pools) * n_shadows} shadow models ready in {time.time() - t0:.0f} s")

# %% [markdown]
# ## Attacks
# phi = z_y - logsumexp_{j != y} z_j (float64). Membership scores for every target (each model
# in turn, the other M-1 are its shadows): four LiRA variants, the loss attack (the target's
# own log p_y with a global threshold) and RMIA (online, gamma = 1, population = test images).

# %%
ATTACKS = ("online", "online_fixed", "offline", "offline_fixed", "loss", "rmia")
scores = {}
for key, pool in pools.items():
    s = mia.lira(pool.phi, pool.keep, sigma_floor=sigma_floor)
    s["loss"] = mia.loss_attack(pool.logp)
    s["rmia"] = mia.rmia(pool.logp, pool.test_logp, pool.keep)
    scores[key] = s


def subgroups(mix, seed):
    m = masks[mix, seed]
    return {"all": np.ones_like(m), **({"outliers": m, "inliers": ~m} if m.any() else {})}


metrics = {key: {a: mia.evaluate_targets(s[a], pools[key].keep, subgroups(*key[:2]))
                 for a in ATTACKS} for key, s in scores.items()}

# %% [markdown]
# ## Table: attack success and utility
# Mean over targets (and seeds) with a 95% bootstrap interval over targets only (targets share
# shadow models, so this interval is optimistic; the delta-AUC below uses a hierarchical
# bootstrap over targets and examples). TPR at an FPR below
# 1/(non-members) is not resolvable and shown as n/r. Clean test accuracy and the train-test
# gap are means over the same models.

# %%
def over_targets(mix, norm, attack, group, metric):
    v = np.concatenate([metrics[mix, s, norm][attack].values[group][metric] for s in seeds])
    return stats.bootstrap_mean(v, n_boot=n_boot, seed=0)


table, rows = {}, []
for mix in mixes:
    for norm in norms:
        acc = np.concatenate([pools[mix, s, norm].test_acc for s in seeds])
        gap = np.concatenate([pools[mix, s, norm].gap for s in seeds])
        for group in subgroups(mix, seeds[0]):
            n_out = int((~pools[mix, seeds[0], norm].keep[0][subgroups(mix, seeds[0])[group]]).sum())
            for attack in ATTACKS:
                e = {m: over_targets(mix, norm, attack, group, m)
                     for m in ("auc", "balanced_acc", "tpr@0.01", "tpr@0.001")}
                table[f"{mix}/{norm}/{group}/{attack}"] = {
                    **{m: v.as_dict() for m, v in e.items()}, "n_nonmembers": n_out,
                    "clean_test_acc": float(acc.mean()), "train_test_gap": float(gap.mean())}
                if attack in ("online", "offline", "loss", "rmia"):
                    tpr = lambda f: (f"{e[f'tpr@{f:g}'].value:.3f}" if f * n_out >= 1 else "n/r")
                    rows.append(f"| {mix:.0%} | {plots.label(norm)} | {group} | {attack} | "
                                f"{e['auc'].value:.3f} [{e['auc'].lo:.3f}, {e['auc'].hi:.3f}] | "
                                f"{e['balanced_acc'].value:.3f} | {tpr(0.01)} | {tpr(0.001)} | "
                                f"{acc.mean():.3f} | {gap.mean():+.3f} |")
display(Markdown("| outliers | model | examples | attack | AUC [95% CI, targets] | bal. acc. | TPR@1% FPR "
                 "| TPR@0.1% FPR | clean test acc. | train-test gap |\n"
                 "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)))

# %% [markdown]
# ## Paired BN - no-BN difference in LiRA AUC
# Online LiRA with per-example variance (the paper's attack). The interval is a hierarchical
# bootstrap over targets and examples (targets share shadows, so resampling targets alone would
# be too optimistic).

# %%
deltas = {}
for mix in mixes:
    for group in subgroups(mix, seeds[0]):
        runs = [(scores[mix, s, "bn"]["online"], scores[mix, s, "none"]["online"],
                 pools[mix, s, "bn"].keep) for s in seeds]
        deltas[mix, group] = mia.paired_delta_auc(
            runs, [subgroups(mix, s)[group] for s in seeds], n_boot=n_boot, seed=0)
fig, ax = plt.subplots(figsize=(5, 3.4))
for j, group in enumerate(("all", "outliers")):
    xs = [i + 0.12 * (2 * j - 1) for i, mix in enumerate(mixes) if (mix, group) in deltas]
    es = [deltas[mix, group] for mix in mixes if (mix, group) in deltas]
    if es:
        ax.errorbar(xs, [100 * e.value for e in es],
                    yerr=[[100 * (e.value - e.lo) for e in es], [100 * (e.hi - e.value) for e in es]],
                    fmt="o", capsize=3, label="all examples" if group == "all" else "outliers only")
paper_min = {0.01: 3.0, 0.05: 4.0}
for i, mix in enumerate(mixes):
    if mix in paper_min:
        ax.plot([i - 0.3, i + 0.3], [paper_min[mix]] * 2, "k--", lw=1)
ax.axhline(0, color="grey", lw=0.8)
ax.set(xticks=range(len(mixes)), xticklabels=[f"{m:.0%}" for m in mixes], xlabel="outlier mix",
       ylabel="AUC(BN) - AUC(no-BN) (points)", title="online LiRA; dashed: paper's minimum (all examples)")
ax.legend()
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "delta_auc")

# %% [markdown]
# ## Figure: log-log ROC curves
# Online LiRA, all targets pooled (the curve) for the largest outlier mix; left: all examples,
# right: the injected outliers only; the legend gives the mean of the per-target AUCs. The
# diagonal is chance; both axes are logarithmic.

# %%
mix_hi = max(mixes)
groups_hi = [g for g in ("all", "outliers") if g in subgroups(mix_hi, seeds[0])]
fig, axes = plt.subplots(1, len(groups_hi), figsize=(4.2 * len(groups_hi), 3.8), squeeze=False)
for ax, group in zip(axes[0], groups_hi):
    for norm in norms:
        s = np.concatenate([scores[mix_hi, sd, norm]["online"][:, subgroups(mix_hi, sd)[group]].ravel()
                            for sd in seeds])
        y = np.concatenate([pools[mix_hi, sd, norm].keep[:, subgroups(mix_hi, sd)[group]].ravel()
                            for sd in seeds])
        fpr, tpr = mia.roc(s, y)
        a = table[f"{mix_hi}/{norm}/{group}/online"]["auc"]["value"]
        ax.plot(fpr, tpr, color=plots.color(norm), label=f"{plots.label(norm)} (mean per-target AUC {a:.3f})")
    ax.plot([1e-4, 1], [1e-4, 1], color="grey", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlim=(1e-3, 1), ylim=(1e-3, 1), xlabel="false positive rate",
           ylabel="true positive rate", title=f"online LiRA: {'all examples' if group == 'all' else 'outliers only'}, {mix_hi:.0%} outliers")
    ax.legend(loc="lower right")
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "roc_loglog")

# %% [markdown]
# ## Figure: memorization scores and utility
# Left: Feldman-Zhang memorization score mem(i) = P[correct | IN] - P[correct | OUT] from the
# same shadow pools (largest mix). Right: clean test accuracy against the train-test gap of
# every model.

# %%
mem = {norm: np.concatenate([mia.memorization_score(pools[mix_hi, s, norm].correct,
                                                    pools[mix_hi, s, norm].keep) for s in seeds])
       for norm in norms}
out_mask = np.concatenate([masks[mix_hi, s] for s in seeds])
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
bins = np.linspace(-0.2, 1.0, 25)
for norm in norms:
    axes[0].hist(mem[norm][~out_mask], bins, histtype="step", color=plots.color(norm), density=True,
                 label=f"{plots.label(norm)}: inliers")
    if out_mask.any():
        axes[0].hist(mem[norm][out_mask], bins, histtype="step", color=plots.color(norm), ls="--",
                     density=True, label=f"{plots.label(norm)}: outliers")
    for i, mix in enumerate(mixes):
        acc = np.concatenate([pools[mix, s, norm].test_acc for s in seeds])
        gap = np.concatenate([pools[mix, s, norm].gap for s in seeds])
        axes[1].scatter(gap, acc, color=plots.color(norm), marker="os^v"[i % 4], s=14,
                        label=f"{plots.label(norm)}, {mix:.0%} outliers")
axes[0].set(xlabel="memorization score", ylabel="density", title=f"{mix_hi:.0%} outliers")
axes[1].set(xlabel="train - test accuracy gap", ylabel="clean test accuracy", title="every model")
axes[0].legend()
axes[1].legend()
fig.tight_layout()
plots.save_figure(fig, NB, dataset, "memorization_utility")

# %% [markdown]
# ## Verdict
# Claims are checked with the paired delta-AUC of online LiRA (points = 100 x AUC) and the
# shared rule `stats.verdict`. On all examples with an outlier mix the paper gives a minimum
# ("at least 3 / 4 points"): *reproduced* when the interval lies above zero and the estimate
# reaches that minimum, *not reproduced* when the whole interval stays below it,
# *inconclusive* otherwise. On clean data ("the trend holds") and on the outliers subgroup
# (the paper gives no number for it) only the direction is tested: reproduced when the
# interval is above zero, not reproduced when below.
#
# **Read it next to utility.** A no-BN model that has not fitted its training set leaks less
# because it learned less, not because it lacks BN: a "reproduced" becomes *inconclusive*
# when BN's clean test accuracy exceeds no-BN's by more than `acc_tolerance`.

# %%
claims = []
for mix in mixes:
    acc = {n: float(np.mean([pools[mix, s, n].test_acc.mean() for s in seeds])) for n in norms}
    for group in ("all", "outliers"):
        if (mix, group) not in deltas:
            continue
        need = paper_min.get(mix, 0.0) if mix > 0 and group == "all" else 0.0
        e = deltas[mix, group]
        points = stats.Estimate(100 * e.value, 100 * e.lo, 100 * e.hi, e.n, e.level)
        words = (f"BN raises LiRA AUC with a {mix:.0%} outlier mix" if mix > 0 else
                 "BN models have higher LiRA AUC on clean data")
        claims.append({
            "claim": words + (" (outliers only)" if group == "outliers" else " (all examples)"),
            "paper": f"at least {need:g} points" if need else
                     "BN higher (no number for outliers)" if group == "outliers" else "BN higher (overall 3-5 points)",
            "measured": points.value, "lo": points.lo, "hi": points.hi,
            "unit": "AUC points, BN minus no-BN (online LiRA)",
            "verdict": stats.verdict(points, need, acc["bn"] - acc["none"], acc_tolerance),
            "dataset": dataset, "budget": budget, "outlier_frac": mix, "subgroup": group,
            "clean_test_acc": acc,
            "train_test_gap": {n: float(np.mean([pools[mix, s, n].gap.mean() for s in seeds]))
                               for n in norms}})
results = {"notebook": NB, "params": P, "claims": claims, "table": table,
           "delta_auc": {f"{m}/{g}": e.as_dict() for (m, g), e in deltas.items()},
           "memorization_score": {n: {"inliers": float(mem[n][~out_mask].mean()),
                                      "outliers": float(mem[n][out_mask].mean()) if out_mask.any() else None}
                                  for n in norms},
           "per_model": {f"{m}/{s}/{n}": {"test_acc": p.test_acc.tolist(),
                                          "train_acc": p.train_acc.tolist(), "gap": p.gap.tolist()} for (m, s, n), p in pools.items()},
           "key_figures": [f"figures/{NB}/{dataset}/roc_loglog.png",
                           f"figures/{NB}/{dataset}/delta_auc.png"]}
store.save_results(NB, dataset, results)

# %%
# NBVAL_CHECK_OUTPUT
print(f"LiRA on {dataset} ({arch}, {outlier_kind} outliers, {n_shadows} models per norm, "
      f"{len(seeds)} seed(s), {epochs} epochs, budget {budget})")
for c in claims:
    accs = ", ".join(f"{plots.label(n)} {a:.2f}" for n, a in c["clean_test_acc"].items())
    print(f"- {c['claim']}: paper {c['paper']}; measured {c['measured']:+.1f} "
          f"[{c['lo']:+.1f}, {c['hi']:+.1f}] points; clean test acc. {accs}; {c['verdict']}")
