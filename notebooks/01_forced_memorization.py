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
# # 1. Forced memorization: does BN memorize atypical samples faster and more strongly?
#
# *Reference run:* [figures](../figures/01_forced_memorization/fashion_mnist/) · [this notebook executed](../figures/01_forced_memorization/fashion_mnist/01_forced_memorization.html) · [report](../figures/REPORT.md)
#
# **The paper's claim.** Batch Normalization *speeds up learning of typical samples*, but the
# same mechanism makes a network *memorize* atypical samples (mislabeled, out-of-distribution,
# rare) faster and more strongly. Train on data with deliberately corrupted labels (label
# flipping) or with injected out-of-distribution (OOD) samples carrying random labels: no
# generalizable rule links those inputs to their labels, so accuracy on them (with respect to
# the corrupted labels) measures pure **memorization**. *Reported:* across architectures and
# datasets, BN models reach higher accuracy on the corrupted/OOD subsets, and drive the loss on
# noisy samples down much faster than no-BN models.
#
# **Rare samples** (the paper's third kind; the experiments its summary reports use only the
# first two): a long tail made from real data. One class (a seeded choice per seed) is kept at only
# `rare_share` of the training subset, far below its natural share 1/classes; the other classes
# fill the rest, labels untouched. Their labels are right, so accuracy on them is not
# memorization by itself: **memorization of rare samples** = accuracy on the trained members of
# the rare class minus accuracy on held-out test samples of that class (Feldman's
# train-versus-held-out reading).
#
# **What this notebook measures.** For each corruption and seed we train the same architecture
# with BN and without, and with two controls that the paper lacks: GroupNorm (normalization
# without batch coupling, learned gamma) and BN with gamma fixed at 1 (batch coupling, no
# learned gamma), all on the *same* subset. Per epoch: memorization, loss on atypical vs clean
# samples, clean training accuracy (how fast the typical samples are learned) and clean test
# accuracy: a model that memorizes less only because it learned less would prove nothing.

# %% tags=["parameters"]
dataset = "fashion_mnist"  # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"  # ci | quick | paper: which params/<budget>.yaml applies
arch = "lenet"  # lenet | resnet20 | resnet18 | densenet
norms = [
    "bn",
    "none",
    "gn",
    "bn_noaffine",
]  # must include "bn" and "none"; "gn", "bn_noaffine": controls
corruption = ["flip", "ood", "rare"]  # any of "flip", "ood", "rare" (one or a list)
noise_frac = 0.1  # flip / ood: share of training samples corrupted, in (0, 1)
ood_source = "digits"  # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
rare_share = 0.02  # rare: the rare class's share of the training subset, in (0, 1/classes]
rare_class = -1  # rare: which class is rare; -1: a seeded choice per seed
clean_level = 0.85  # clean training accuracy at which speed and its cost are read
n_train = 4000  # training samples drawn from the training set (seeded)
n_test = 2000  # clean test samples used for test accuracy
epochs = 15  # training epochs
seeds = [0, 1, 2, 3]  # one run per seed and norm; data subset and corruption follow the seed
batch_size = 128  # SGD mini-batch size
lr = 0.05  # peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4  # L2 weight decay
augment = False  # random crop + flip (CIFAR)
download = False  # allow torchvision to download the dataset if it is missing
device = "auto"  # auto (a GPU when torch sees one, else the CPU) | cpu | cuda

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook

run = notebook.start(globals(), "01_forced_memorization")  # noqa: E702

# %% [markdown]
# ## The experiment
# For every (corruption, seed) one training subset; every norm trains on that same subset from
# the same seed, so BN and no-BN are compared *paired*. Each trained model is a cached unit
# (configuration + data fingerprint + package source hash): re-running this notebook re-renders
# in seconds, and a killed run resumes from the last finished epoch.

# %%
# NBVAL_IGNORE_OUTPUT
import numpy as np
from IPython.display import Markdown, display

from bnpaper import claims, data, memorization, plot_memorization, plots, train, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)
runs, n_atyp = (
    {},
    {},
)  # (corruption, norm, seed) -> per-epoch history; corruption -> atypical samples
for corr in corruption:
    for seed in seeds:
        split = data.make_split(
            ds, n_train, corr, noise_frac, seed, ood_source, n_test, rare_share, rare_class
        )
        n_atyp[corr] = int(split.mask.sum())
        for norm in norms:
            cfg = train.TrainConfig(
                arch=arch,
                norm=norm,
                epochs=epochs,
                batch_size=batch_size,
                lr=lr,
                weight_decay=weight_decay,
                augment=augment,
                seed=seed,
            )
            runs[corr, norm, seed] = units.trained(
                split, cfg, desc=f"{corr} {norm} seed {seed}"
            ).history
R = memorization.Runs(runs, tuple(seeds))
ep, acc = R.epochs, {c: R.test_acc(c, norms) for c in corruption}
TITLE = {
    "flip": f"label flips: {n_atyp.get('flip')} of {n_train} training labels",
    "ood": f"OOD images ({ood_source}), random labels: {n_atyp.get('ood')} of {n_train}",
    "rare": f"rare class: {n_atyp.get('rare')} of {n_train} ({rare_share:.0%}; natural {1 / ds.n_classes:.0%})",
}
BAND = f"mean of {len(seeds)} seeds; band: range over seeds"
name = lambda corr, norm: f"{plots.label(norm)} (clean test acc. {acc[corr][norm]:.2f})"
accs = lambda corr, ns=norms: (
    "clean test acc.: " + ", ".join(f"{plots.label(n)} {acc[corr][n]:.2f}" for n in ns)
)
print(f"{len(runs)} models ready")

# %% [markdown]
# ## Figure 1: memorization curves
# Label flips and OOD images: accuracy on the corrupted samples with respect to their
# *corrupted* labels (chance: 1/classes). Rare class: accuracy on its trained members minus on
# its held-out test samples (0: the model knows the rare members no better than unseen ones).
# Mean over seeds, band = min..max, each model's final clean test accuracy in the legend.

# %%
fig = plot_memorization.memorization_figure(
    ep,
    {c: {n: R.mem(c, n) for n in norms} for c in corruption},
    {c: {n: name(c, n) for n in norms} for c in corruption},
    TITLE,
    ds.n_classes,
    BAND,
)
run.figure(fig, "memorization_curves")

# %% [markdown]
# ## Figure 2: the rare class, trained vs held out
# Solid: the rare class's trained members; dashed: its held-out test samples; dotted: every
# held-out class. The gap between solid and dashed is memorization of rare samples.

# %%
if "rare" in corruption:
    fig = plot_memorization.rare_members_figure(
        ep,
        {
            f"{plots.label(n)}: final gap {R.mem('rare', n)[:, -1].mean():+.3f}": (
                n,
                R.curves("rare", n, "noisy_acc"),
                R.curves("rare", n, "rare_test_acc"),
                R.curves("rare", n, "test_acc"),
            )
            for n in norms
        },
        f"{TITLE['rare']}; {BAND}",
    )
    run.figure(fig, "rare_members")

# %% [markdown]
# ## Figure 3: loss on atypical vs clean samples (BN vs no-BN)
# Solid: mean cross-entropy on the atypical samples (against their training labels); dashed: on
# clean training samples. The paper reports that BN drives the noisy loss down much faster.

# %%
fig, axes = plots.panels(len(corruption))
for ax, corr in zip(axes, corruption):
    for norm in ("bn", "none"):
        plots.band(
            ax,
            ep,
            R.curves(corr, norm, "noisy_loss"),
            norm,
            f"{plots.label(norm)}: {memorization.SUBSET[corr]}",
        )
        plots.band(
            ax,
            ep,
            R.curves(corr, norm, "clean_loss"),
            norm,
            f"{plots.label(norm)}: clean samples",
            "--",
        )
    ax.set(
        title=f"{TITLE[corr]}\n{accs(corr, ('bn', 'none'))}",
        xlabel="epoch",
        yscale="log",
        ylabel="mean cross-entropy (nats, log scale)",
    )
    plots.plain_log_axis(ax)
fig.tight_layout()
for ax in axes:
    plots.legend_below(ax, title=BAND, title_fontsize=7, ncol=2)
run.figure(fig, "loss_noisy_vs_clean")

# %% [markdown]
# ## Figure 4: clean test accuracy
# The utility side: every model must learn the task for the comparison to be fair.

# %%
fig, axes = plots.panels(len(corruption))
for ax, corr in zip(axes, corruption):
    for norm in norms:
        plots.band(ax, ep, R.curves(corr, norm, "test_acc"), norm)
    ax.set(
        title=f"{TITLE[corr]}\n{n_test} clean test samples",
        xlabel="epoch",
        ylabel="clean test accuracy",
    )
fig.tight_layout()
for ax in axes:
    plots.legend_below(ax, title=BAND, title_fontsize=7, ncol=2)
run.figure(fig, "test_accuracy")

# %% [markdown]
# ## Figure 5: BN speeds up learning of typical samples, and what it costs
# The typical samples are the clean training samples. Top: their accuracy per epoch, with the
# epoch each model reaches `clean_level` (interpolated between evaluated epochs). Bottom:
# memorization against clean training accuracy: at the same accuracy on the typical samples,
# how much of the atypical subset has each model memorized? That is the price of the speed.

# %%
fig = plot_memorization.typical_figure(
    ep,
    {c: {n: R.curves(c, n, "clean_acc") for n in norms} for c in corruption},
    {c: {n: R.mem(c, n) for n in norms} for c in corruption},
    clean_level,
    {c: {n: R.level_epochs(c, n, clean_level) for n in norms} for c in corruption},
    TITLE,
    BAND,
)
run.figure(fig, "typical_speed")

# %% [markdown]
# ## Figure 6: the controls — batch coupling or the learned gamma?
# Final memorization of every model (a dot per seed, a bar at the mean); GroupNorm has a
# learned gamma but no batch statistics, BN with gamma fixed at 1 has batch statistics but no
# learned scale. The paper makes no claim here: this asks which part of BN carries its effect.

# %%
if set(memorization.CONTROLS) & set(norms):
    fig = plot_memorization.controls_figure(
        {c: {n: R.mem(c, n)[:, -1] for n in norms} for c in corruption}, acc, TITLE
    )
    run.figure(fig, "controls")

# %% [markdown]
# ## Table: speed and strength of memorization, typical learning, utility
# Means over seeds. Epochs to 50% / 90% memorization ("never" if a seed did not reach it); the
# subset's final accuracy on its training labels; for flips the accuracy on their *true* labels,
# for the rare class the accuracy on its held-out test samples (an OOD image has no true label
# here); epochs to `clean_level` clean training accuracy and the memorization at that epoch;
# clean train and test accuracy at the end of training.

# %%
summary = {f"{c}/{n}": R.summary(c, n, clean_level) for c in corruption for n in norms}
display(Markdown(memorization.table(summary, clean_level)))

# %% [markdown]
# ## Verdict
# Each claim is a paired comparison over seeds (same data, same seed) with a 95% Student-t
# interval, judged by its test in `bnpaper/claims.yaml` (the interval must exclude zero and the
# estimate reach the claim's minimum effect; Holm's correction over this run's rows; a
# "reproduced" turns "inconclusive" when the compared model's clean test accuracy is higher by
# more than the tolerance). First the typical samples, per seed averaged over the corruptions:
# no-BN's minus BN's epochs to `clean_level` and BN's minus no-BN's mean clean training accuracy
# over training (Figure 5, top). Then per corruption, BN minus no-BN: final memorization,
# memorization over training (the area under Figure 1's curve) and, for flips and OOD images,
# the corrupted samples' loss over training (no-BN minus BN); the cost: memorization when each
# model reaches `clean_level` clean training accuracy (Figure 5, bottom); each control minus
# no-BN in final memorization (Figure 6).

# %%
rows = memorization.verdict_rows(R, corruption, norms, clean_level, dataset=dataset, budget=budget)
rows = claims.holm(rows)  # Holm's correction within each family of this run's rows
run.save(
    {
        "summary": summary,
        "claims": rows,
        "key_figures": notebook.figure_paths(
            run,
            ["memorization_curves", "typical_speed"]
            + (["controls"] if set(memorization.CONTROLS) & set(norms) else []),
        ),
        "histories": {f"{c}/{n}/{s}": h for (c, n, s), h in runs.items()},
    }
)

# %%
# NBVAL_CHECK_OUTPUT
print(
    f"Forced memorization on {dataset} ({arch}, flip/ood {noise_frac:.0%} corrupted, rare class "
    f"{rare_share:.0%} of the subset, {len(seeds)} seeds, {epochs} epochs, budget {budget})"
)
for c in rows:
    accs = ", ".join(f"{plots.label(n)} {a:.2f}" for n, a in c["clean_test_acc"].items())
    est = (
        f"{c['measured']:+.2f} [{c['lo']:+.2f}, {c['hi']:+.2f}]"
        if np.isfinite(c["measured"])
        else "no estimate (a seed never reached the level)"
    )
    print(
        f"- {c['claim']}: {c['unit'].split(',')[0]} = {est} -> {c['verdict']} (clean test acc: {accs})"
    )
print("Controls (which part of BN carries its effect on memorization?):")
print("\n".join(f"- {line}" for line in memorization.controls_reading(rows)))
print(
    "Paper: BN speeds up learning of typical samples and makes networks memorize atypical samples faster and more strongly."
)
