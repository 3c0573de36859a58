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
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Forced memorization: does BN memorize corrupted samples faster and more strongly?
#
# *Reference run:* [figures](../figures/01_forced_memorization/fashion_mnist/) · [this notebook executed](../figures/01_forced_memorization/fashion_mnist/01_forced_memorization.html) · [report](../figures/REPORT.md)
#
# **The paper's claim.** Batch Normalization speeds up learning of typical samples, but the
# same mechanism makes a network *memorize* atypical samples faster and more strongly. Train
# on data with deliberately corrupted labels (label flipping) or with injected
# out-of-distribution (OOD) samples carrying random labels: no generalizable rule links those
# inputs to their labels, so accuracy on them (with respect to the corrupted labels) measures
# pure **memorization**. *Reported:* across architectures and datasets, BN models reach higher
# accuracy on the corrupted/OOD subsets, and drive the loss on noisy samples down much faster
# than no-BN models.
#
# **What this notebook measures.** For each corruption and seed we train the same architecture
# with BN and without (optionally GroupNorm and BN with gamma fixed at 1, as controls that
# separate batch statistics from the learned scale gamma) on the *same* corrupted subset, and
# record per epoch: memorization (accuracy on corrupted samples w.r.t. their corrupted labels),
# loss on noisy vs clean samples, and clean test accuracy — a model that memorizes less only
# because it learned less would prove nothing.

# %% tags=["parameters"]
dataset = "fashion_mnist"        # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"                 # ci | quick | paper: which params/<budget>.yaml applies
arch = "lenet"                   # lenet | resnet20 | resnet18 | densenet
norms = ["bn", "none"]           # must include "bn" and "none"; add "gn", "bn_noaffine" as controls
corruption = ["flip", "ood"]     # "flip", "ood", or both as a list
noise_frac = 0.1                 # share of training samples corrupted, in [0, 1)
ood_source = "digits"            # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
n_train = 8000                   # training samples drawn from the training set (seeded)
n_test = 10000                   # clean test samples used for test accuracy
epochs = 15                      # training epochs
seeds = [0, 1, 2]                # one run per seed and norm; data subset and corruption follow the seed
batch_size = 128                 # SGD mini-batch size
lr = 0.05                        # peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4              # L2 weight decay
augment = False                  # random crop + flip (CIFAR)
download = False                 # allow torchvision to download the dataset if it is missing

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook; run = notebook.start(globals(), "01_forced_memorization")  # noqa: E702

# %% [markdown]
# ## The experiment
# For every (corruption, seed) one corrupted training subset; every norm trains on that same
# subset from the same seed, so BN and no-BN are compared *paired*. Each trained model is a
# cached unit (configuration + data fingerprint + package source hash): re-running this
# notebook re-renders in seconds, and a killed run resumes from the last finished epoch.

# %%
# NBVAL_IGNORE_OUTPUT
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from bnpaper import claims, data, plots, stats, train, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)
runs, n_noisy = {}, {}  # (corruption, norm, seed) -> per-epoch history; corruption -> corrupted samples
for corr in corruption:
    for seed in seeds:
        split = data.make_split(ds, n_train, corr, noise_frac, seed, ood_source, n_test)
        n_noisy[corr] = int(split.mask.sum())
        for norm in norms:
            cfg = train.TrainConfig(arch=arch, norm=norm, epochs=epochs, batch_size=batch_size,
                                    lr=lr, weight_decay=weight_decay, augment=augment, seed=seed)
            runs[corr, norm, seed] = units.trained(split, cfg, desc=f"{corr} {norm} seed {seed}").history
curves = lambda corr, norm, key: train.curves([runs[corr, norm, s] for s in seeds], key)  # (seeds, epochs+1)
ep = np.array(runs[corruption[0], norms[0], seeds[0]]["epoch"])
TITLE = {"flip": f"label flips: {n_noisy.get('flip')} of {n_train} training labels",
         "ood": f"OOD images ({ood_source}), random labels: {n_noisy.get('ood')} of {n_train}"}
BAND = f"mean of {len(seeds)} seeds; band: range over seeds"
final_acc = {(c, n): curves(c, n, "test_acc")[:, -1].mean() for c in corruption for n in norms}
name = lambda corr, norm: f"{plots.label(norm)} (clean test acc. {final_acc[corr, norm]:.2f})"
accs = lambda corr: "clean test acc.: " + ", ".join(f"{plots.label(n)} {final_acc[corr, n]:.2f}" for n in norms)
print(f"{len(runs)} models ready")

# %% [markdown]
# ## Figure 1: memorization curves
# Accuracy on the corrupted samples with respect to their *corrupted* labels, per epoch (mean
# over seeds, band = min..max), with each model's final clean test accuracy in the legend.
# Chance level is 1/classes.

# %%
fig, axes = plots.panels(len(corruption), 4.6, 3.2)
for ax, corr in zip(axes, corruption):
    for norm in norms:
        plots.band(ax, ep, curves(corr, norm, "noisy_acc"), norm, name(corr, norm))
    ax.axhline(1 / ds.n_classes, color="grey", lw=0.8, ls=":", label=f"chance (1/{ds.n_classes})")
    ax.set(title=TITLE[corr], xlabel="epoch", ylabel="memorization\n(accuracy on the corrupted labels)",
           ylim=(0, 1.02), yticks=np.linspace(0, 1, 6))
fig.tight_layout()
for ax in axes:
    plots.legend_below(ax, title=BAND, title_fontsize=7)
run.figure(fig, "memorization_curves")

# %% [markdown]
# ## Figure 2: loss on noisy vs clean samples
# Solid: mean cross-entropy on corrupted samples (against their corrupted labels); dashed: on
# clean training samples. The paper reports that BN drives the noisy loss down much faster.

# %%
fig, axes = plots.panels(len(corruption))
for ax, corr in zip(axes, corruption):
    for norm in norms:
        plots.band(ax, ep, curves(corr, norm, "noisy_loss"), norm, f"{plots.label(norm)}: corrupted samples")
        plots.band(ax, ep, curves(corr, norm, "clean_loss"), norm, f"{plots.label(norm)}: clean samples", "--")
    ax.set(title=f"{TITLE[corr]}\n{accs(corr)}", xlabel="epoch", yscale="log",
           ylabel="mean cross-entropy (nats, log scale)")
    plots.plain_log_axis(ax)
fig.tight_layout()
for ax in axes:
    plots.legend_below(ax, title=BAND, title_fontsize=7, ncol=2)
run.figure(fig, "loss_noisy_vs_clean")

# %% [markdown]
# ## Figure 3: clean test accuracy
# The utility side: BN and no-BN must both learn the task for the comparison to be fair.

# %%
fig, axes = plots.panels(len(corruption))
for ax, corr in zip(axes, corruption):
    for norm in norms:
        plots.band(ax, ep, curves(corr, norm, "test_acc"), norm)
    ax.set(title=f"{TITLE[corr]}\n{n_test} clean test samples", xlabel="epoch", ylabel="clean test accuracy")
fig.tight_layout()
for ax in axes:
    plots.legend_below(ax, title=BAND, title_fontsize=7)
run.figure(fig, "test_accuracy")

# %% [markdown]
# ## Table: speed and strength of memorization
# Epochs to reach 50% / 90% memorization (first epoch, mean over seeds; "never" if a seed did
# not reach it), final memorization, the corrupted samples' accuracy on their *true* labels
# (label flips only: an OOD image has no true label in this task), and clean train / test
# accuracy at the end of training.

# %%
rows, summary = [], {}
for corr in corruption:
    for norm in norms:
        mem = curves(corr, norm, "noisy_acc")
        e50 = [stats.epochs_to(c, ep, 0.5) for c in mem]
        e90 = [stats.epochs_to(c, ep, 0.9) for c in mem]
        fmt = lambda e: "never" if not np.all(np.isfinite(e)) else f"{np.mean(e):.1f}"
        s = {"final_memorization": float(mem[:, -1].mean()),
             "memorization_auc": float(np.mean([stats.area_under_curve(c, ep) for c in mem])),
             "epochs_to_50": float(np.mean(e50)), "epochs_to_90": float(np.mean(e90)),
             "noisy_true_acc": float(curves(corr, norm, "noisy_true_acc")[:, -1].mean()),
             "clean_train_acc": float(curves(corr, norm, "clean_acc")[:, -1].mean()),
             "clean_test_acc": float(curves(corr, norm, "test_acc")[:, -1].mean())}
        summary[f"{corr}/{norm}"] = s
        true_acc = "n/a" if corr == "ood" else f"{s['noisy_true_acc']:.3f}"
        rows.append(f"| {corr} | {plots.label(norm)} | {fmt(e50)} | {fmt(e90)} | "
                    f"{s['final_memorization']:.3f} | {true_acc} | "
                    f"{s['clean_train_acc']:.3f} | {s['clean_test_acc']:.3f} |")
display(Markdown("| corruption | model | epochs to 50% | epochs to 90% | final memorization "
                 "| corrupted: true-label acc. | clean train acc. | clean test acc. |\n"
                 "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)))

# %% [markdown]
# ## Verdict
# Each claim is a paired comparison BN minus no-BN (same data, same seed) with a 95% Student-t
# interval over seeds (`stats.t_paired_diff`; with a handful of seeds a bootstrap would only
# return the seeds' range), judged by the claim's test in `bnpaper/claims.yaml`: the interval
# must exclude zero and the estimate reach the claim's minimum effect, and a "reproduced" turns
# "inconclusive" when BN's clean test accuracy exceeds no-BN's by more than the tolerance (no-BN
# may memorize less only because it learned less). Three measurements per corruption: final
# memorization (strength), mean memorization over training (the area under Figure 1's curve:
# speed and strength together), and the mean cross-entropy of the corrupted samples over
# training (Figure 2; no-BN minus BN, so that positive means BN lower).

# %%
auc = lambda corr, norm, key: [stats.area_under_curve(c, ep) for c in curves(corr, norm, key)]
rows = []
for corr in corruption:
    acc = {n: summary[f"{corr}/{n}"]["clean_test_acc"] for n in norms}
    for metric, bn_v, no_v, unit in (
            ("final", curves(corr, "bn", "noisy_acc")[:, -1], curves(corr, "none", "noisy_acc")[:, -1],
             "BN minus no-BN, final accuracy on corrupted labels"),
            ("speed", auc(corr, "bn", "noisy_acc"), auc(corr, "none", "noisy_acc"),
             "BN minus no-BN, mean accuracy on corrupted labels over training"),
            ("loss", auc(corr, "none", "noisy_loss"), auc(corr, "bn", "noisy_loss"),
             "no-BN minus BN, mean cross-entropy (nats) of corrupted samples over training")):
        rows.append(claims.judge(f"01.{metric}.{corr}", stats.t_paired_diff(bn_v, no_v),
                                 acc_gap=acc["bn"] - acc["none"], unit=unit, clean_test_acc=acc,
                                 dataset=dataset, budget=budget, corruption=corr))
run.save({"summary": summary, "claims": rows,
          "key_figures": notebook.figure_paths(run, ["memorization_curves", "loss_noisy_vs_clean"]),
          "histories": {f"{c}/{n}/{s}": h for (c, n, s), h in runs.items()}})

# %%
# NBVAL_CHECK_OUTPUT
print(f"Forced memorization on {dataset} ({arch}, {noise_frac:.0%} corrupted, {len(seeds)} seeds, "
      f"{epochs} epochs, budget {budget})")
for c in rows:
    accs = ", ".join(f"{plots.label(n)} {a:.2f}" for n, a in c["clean_test_acc"].items())
    print(f"- {c['claim']}: {c['unit'].split(',')[0]} = {c['measured']:+.2f} "
          f"[{c['lo']:+.2f}, {c['hi']:+.2f}] -> {c['verdict']} (clean test acc: {accs})")
print("Paper: BN models reach higher accuracy on corrupted/OOD subsets and drive the noisy loss down faster.")
