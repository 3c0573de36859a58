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
# *Reference run:* [figures][figures] · [this notebook executed][executed] · [report][report]
#
# [figures]: ../figures/01_forced_memorization/fashion_mnist/
# [executed]: ../figures/01_forced_memorization/fashion_mnist/01_forced_memorization.html
# [report]: ../figures/REPORT.md
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
# first two): a long tail made from real data. One class (a seeded choice per seed) is kept at
# only `rare_share` of the training subset, far below its natural share 1/classes; the other
# classes fill the rest, labels untouched. Their labels are right, so accuracy on them is not
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
norms = ["bn", "none", "gn", "bn_noaffine"]  # "bn" and "none" required; the rest: controls
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
trainer = "auto"  # auto (LeNets packed, one packed model per norm) | plain | packed
download = False  # allow torchvision to download the dataset if it is missing
device = "auto"  # auto (a GPU when torch sees one, else the CPU) | cpu | cuda

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook

run = notebook.start(globals(), "01_forced_memorization")

# %% [markdown]
# ## The experiment
# The dataset is loaded once; every figure shares one style.

# %%
# NBVAL_IGNORE_OUTPUT
import dataclasses

from IPython.display import Markdown, display

from bnpaper import claims, data, memorization, plot_memorization, plots, text, train, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)

# %% [markdown]
# Every model trains with one recipe; only its normalization and its seed change.

# %%
recipe = train.TrainConfig.from_params(run.params)

# %% [markdown]
# Each (corruption, seed) draws one training subset, and every norm trains on that same subset
# from the same seed, so BN and no-BN are compared *paired*.

# %%
jobs, atypical = {}, {}  # (corruption, norm, seed) -> model to train; corruption -> atypical
for corr in corruption:
    for seed in seeds:
        split = data.make_split(
            ds, n_train, corr, noise_frac, seed, ood_source, n_test, rare_share, rare_class
        )
        atypical[corr] = int(split.mask.sum())
        for norm in norms:
            cfg = dataclasses.replace(recipe, norm=norm, seed=seed)
            jobs[corr, norm, seed] = units.Job(split, cfg)

# %% [markdown]
# Each trained model is a cached unit: a re-run re-renders in seconds and trains only the models
# not yet cached. LeNets train packed (`trainer`): one packed model per norm holds every
# corruption and seed, each member equal to its own training run up to float rounding.

# %%
# NBVAL_IGNORE_OUTPUT
descs = [f"{corr} {norm} seed {seed}" for corr, norm, seed in jobs]
results = units.trained_all(list(jobs.values()), trainer, descs=descs)
histories = {key: result.history for key, result in zip(jobs, results)}
print(f"{len(histories)} models ready")

# %% [markdown]
# The histories are read paired by seed; each model's final clean test accuracy goes into the
# legends, and each panel's title says how many samples are atypical.

# %%
runs = memorization.Runs(histories, tuple(seeds))
acc = {c: runs.test_acc(c, norms) for c in corruption}
names = {c: text.accuracy_legends(acc[c]) for c in corruption}
titles = text.corruption_titles(atypical, n_train, ood_source, rare_share, ds.n_classes)
band = f"mean of {len(seeds)} seeds; band: range over seeds"

# %% [markdown]
# ## Figure 1: memorization curves
# Label flips and OOD images: accuracy on the corrupted samples with respect to their
# *corrupted* labels (chance: 1/classes). Rare class: accuracy on its trained members minus on
# its held-out test samples (0: the model knows the rare members no better than unseen ones).
# Mean over seeds, band = min..max, each model's final clean test accuracy in the legend.

# %%
memorized = runs.by_case(corruption, norms)
fig = plot_memorization.memorization_figure(
    runs.epochs, memorized, names, titles, ds.n_classes, band
)
run.figure(fig, "memorization_curves")

# %% [markdown]
# ## Figure 2: the rare class, trained vs held out
# Solid: the rare class's trained members; dashed: its held-out test samples; dotted: every
# held-out class. The gap between solid and dashed is memorization of rare samples.

# %%
if "rare" in corruption:
    curves = {}
    for norm in norms:
        gap = runs.mem("rare", norm)[:, -1].mean()
        kinds = ("noisy_acc", "rare_test_acc", "test_acc")
        curves[f"{plots.label(norm)}: final gap {gap:+.3f}"] = (
            norm,
            *(runs.curves("rare", norm, kind) for kind in kinds),
        )
    fig = plot_memorization.rare_members_figure(runs.epochs, curves, f"{titles['rare']}; {band}")
    run.figure(fig, "rare_members")

# %% [markdown]
# ## Figure 3: loss on atypical vs clean samples (BN vs no-BN)
# Solid: mean cross-entropy on the atypical samples (against their training labels); dashed: on
# clean training samples. The paper reports that BN drives the noisy loss down much faster.

# %%
pair = ("bn", "none")
loss_titles = {c: f"{titles[c]}\n{text.accuracy_line(acc[c], pair)}" for c in corruption}
noisy_loss = runs.by_case(corruption, pair, "noisy_loss")
clean_loss = runs.by_case(corruption, pair, "clean_loss")
fig = plot_memorization.loss_figure(
    runs.epochs, noisy_loss, clean_loss, memorization.SUBSET, loss_titles, band
)
run.figure(fig, "loss_noisy_vs_clean")

# %% [markdown]
# ## Figure 4: clean test accuracy
# The utility side: every model must learn the task for the comparison to be fair.

# %%
test_titles = {c: f"{titles[c]}\n{n_test} clean test samples" for c in corruption}
test_acc = runs.by_case(corruption, norms, "test_acc")
fig = plot_memorization.clean_accuracy_figure(runs.epochs, test_acc, test_titles, band)
run.figure(fig, "test_accuracy")

# %% [markdown]
# ## Figure 5: BN speeds up learning of typical samples, and what it costs
# The typical samples are the clean training samples. Top: their accuracy per epoch, with the
# epoch each model reaches `clean_level` (interpolated between evaluated epochs). Bottom:
# memorization against clean training accuracy: at the same accuracy on the typical samples,
# how much of the atypical subset has each model memorized? That is the price of the speed.

# %%
clean_acc = runs.by_case(corruption, norms, "clean_acc")
reached = {c: {n: runs.level_epochs(c, n, clean_level) for n in norms} for c in corruption}
fig = plot_memorization.typical_figure(
    runs.epochs, clean_acc, memorized, clean_level, reached, titles, band
)
run.figure(fig, "typical_speed")

# %% [markdown]
# ## Figure 6: the controls — batch coupling or the learned gamma?
# Final memorization of every model (a dot per seed, a bar at the mean); GroupNorm has a
# learned gamma but no batch statistics, BN with gamma fixed at 1 has batch statistics but no
# learned scale. The paper makes no claim here: this asks which part of BN carries its effect.

# %%
controls = bool(set(memorization.CONTROLS) & set(norms))
if controls:
    final = {c: {n: runs.mem(c, n)[:, -1] for n in norms} for c in corruption}
    fig = plot_memorization.controls_figure(final, acc, titles)
    run.figure(fig, "controls")

# %% [markdown]
# ## Table: speed and strength of memorization, typical learning, utility
# Means over seeds. Epochs to 50% / 90% memorization ("never" if a seed did not reach it); the
# subset's final accuracy on its training labels; for flips the accuracy on their *true* labels,
# for the rare class the accuracy on its held-out test samples (an OOD image has no true label
# here); epochs to `clean_level` clean training accuracy and the memorization at that epoch;
# clean train and test accuracy at the end of training.

# %%
summary = {f"{c}/{n}": runs.summary(c, n, clean_level) for c in corruption for n in norms}
display(Markdown(text.memorization_table(summary, clean_level)))

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
rows = memorization.verdict_rows(
    runs, corruption, norms, clean_level, dataset=dataset, budget=budget
)
rows = claims.holm(rows)  # Holm's correction within each family of this run's rows

# %% [markdown]
# The results file keeps the table's numbers, the verdict rows, the key figures and every
# training history.

# %%
key_figures = ["memorization_curves", "typical_speed"] + (["controls"] if controls else [])
run.save(
    {
        "summary": summary,
        "claims": rows,
        "key_figures": notebook.figure_paths(run, key_figures),
        "histories": {f"{c}/{n}/{s}": h for (c, n, s), h in histories.items()},
    }
)

# %% [markdown]
# The verdicts, then what the two controls say about which part of BN carries its effect.

# %%
# NBVAL_CHECK_OUTPUT
print(
    f"Forced memorization on {dataset} ({arch}, flip/ood {noise_frac:.0%} corrupted, rare class "
    f"{rare_share:.0%} of the subset, {len(seeds)} seeds, {epochs} epochs, budget {budget})"
)
claims.show(rows)
print("Controls (which part of BN carries its effect on memorization?):")
print("\n".join(f"- {line}" for line in text.controls_reading(rows)))
print(
    "Paper: BN speeds up learning of typical samples and makes networks memorize atypical "
    "samples faster and more strongly."
)
