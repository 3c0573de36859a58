# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
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
noise_frac = 0.05  # flip / ood: share of training samples corrupted, in (0, 1): paper's 5%
ood_source = "digits"  # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
rare_share = 0.02  # rare: the rare class's share of the training subset, in (0, 1/classes]
rare_class = -1  # rare: which class is rare; -1: a seeded choice per seed
clean_level = 0.85  # clean training accuracy at which speed and its cost are read
n_train = 4000  # training samples drawn from the training set (seeded)
n_test = 2000  # clean test samples used for test accuracy
protocol = "fair"  # fair (each norm its own lr, chosen on validation, trained to fit) | paper
lr_grid = [0.005, 0.0158, 0.05, 0.158, 0.5]  # fair: lrs searched per norm (5+, 1.5+ decades)
n_val = 1000  # fair: validation images held out of the training set for the search
lr_seeds = [0, 1, 2]  # fair: seeds of the search (one model per norm, lr and seed)
wd_grid = []  # fair: weight decays searched per norm at its chosen lr ([]: weight_decay for all)
fit_level = 0.99  # fair: each model trains until its clean training accuracy reaches it, in (0, 1]
fit_levels = [0.95, 0.98, 0.99]  # fair: clean training accuracies the matched-fit rows read
effective_lr = [2.0]  # fair: no-BN also trained at these multiples of its lr ([]: none)
lr_curve = ["flip"]  # fair: kinds on which BN and no-BN also train at every lr of lr_grid
epochs = 40  # epoch cap (fair: a model stops earlier once fitted) | the epochs (paper)
seeds = [0, 1, 2, 3]  # one run per seed and norm; data subset and corruption follow the seed
batch_size = 128  # SGD mini-batch size
lr = 0.05  # paper: the peak learning rate of every norm (cosine schedule, momentum 0.9)
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
from IPython.display import Markdown, display

from bnpaper import claims, data, fit_rows, lr_dependence, memorization, plot_memorization
from bnpaper import plot_recipes, plots, recipes, text, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)

# %% [markdown]
# ## Each norm's recipe
# Under the fair protocol every norm gets its own learning rate, chosen before any judged run by
# the rule in `claims.yaml` (the largest validation accuracy on held-out training images, clean
# data), with `wd_grid` its own weight decay too (chosen after the learning rate, by the same
# rule), and every model trains until it fits its clean training samples (`fit_level`), so that
# BN and no-BN are compared when both have learned what they can. `protocol="paper"` trains every
# norm with one learning rate for a fixed number of epochs: the paper's protocol.

# %%
# NBVAL_IGNORE_OUTPUT
chosen = recipes.norm_recipes(ds, run.params, norms, trainer)
display(Markdown(text.recipe_table(chosen)))

# %% [markdown]
# Validation accuracy against the learning rate, one curve per norm; the chosen one is ringed.

# %%
if chosen.choices is not None:
    title = f"learning-rate search: {chosen.search.n_train} clean images, {n_val} held out"
    run.figure(plot_recipes.lr_choice_figure(chosen, title), "lr_choice")

# %% [markdown]
# Each (corruption, seed) draws one training subset, and every norm trains on that same subset
# from the same seed, so BN and no-BN are compared *paired*. Under the fair protocol no-BN also
# trains at `effective_lr` times its own learning rate (the effective-learning-rate arm).

# %%
jobs, atypical = {}, {}  # (corruption, norm, seed) -> model to train; corruption -> atypical
for corr in corruption:
    for seed in seeds:
        split = data.make_split(
            ds, n_train, corr, noise_frac, seed, ood_source, n_test, rare_share, rare_class
        )
        atypical[corr] = int(split.mask.sum())
        for norm in norms:
            jobs[corr, norm, seed] = units.Job(split, chosen.config(norm, seed=seed))
        for factor in effective_lr if protocol == "fair" else []:
            cfg = chosen.config("none", seed=seed, lr=factor * chosen.lr("none"))
            jobs[corr, fit_rows.arm_norm(factor), seed] = units.Job(split, cfg)

# %% [markdown]
# **The learning-rate curve.** Validation accuracy can barely move over the grid while
# memorization does, so on the kinds of `lr_curve` BN and no-BN also train to fit at every other
# rate of `lr_grid`, on the same subsets and seeds (fair protocol only).

# %%
curve_kinds = lr_curve if protocol == "fair" else []
chosen_lrs = {norm: chosen.lr(norm) for norm in lr_dependence.COMPARED}
for corr in curve_kinds:
    for seed in seeds:
        split = jobs[corr, "bn", seed].split
        for norm, rate in lr_dependence.extra_points(chosen_lrs, lr_grid):
            cfg = chosen.config(norm, seed=seed, lr=rate)
            name = lr_dependence.key(norm, rate, chosen_lrs[norm])
            jobs[corr, name, seed] = units.Job(split, cfg)

# %% [markdown]
# Each trained model is a cached unit: a re-run re-renders in seconds and trains only the packs
# with a model not yet cached. LeNets train packed (`trainer`): one packed model per norm holds
# every corruption and seed, each member equal to its own training run up to float rounding.

# %%
# NBVAL_IGNORE_OUTPUT
descs = [f"{corr} {norm} seed {seed}" for corr, norm, seed in jobs]
results = units.trained_or_diverged(list(jobs.values()), trainer, descs=descs)
histories, diverged = fit_rows.histories_of(jobs, results, norms)
print(f"{len(histories)} models ready; diverged (effective-lr arm, lr curve): {diverged or 'none'}")

# %% [markdown]
# The histories are read paired by seed; each model's final clean test accuracy goes into the
# legends, and each panel's title says how many samples are atypical.

# %%
runs = memorization.Runs(histories, tuple(seeds), cap=epochs)
acc = {c: runs.test_acc(c, norms) for c in corruption}
names = {c: text.accuracy_legends(acc[c]) for c in corruption}
titles = text.corruption_titles(atypical, n_train, ood_source, rare_share, ds.n_classes)
band = f"mean of {len(seeds)} seeds; band: range over seeds"

# %% [markdown]
# How long each model trained: under the fair protocol a model stops once it fits its clean
# training samples, so BN and no-BN use different numbers of epochs; a run that hits the epoch
# cap first is censored, and every verdict that reads it says so.

# %%
every = norms + [fit_rows.arm_norm(f) for f in effective_lr if protocol == "fair"]
used = fit_rows.epochs_used(histories, corruption, every, seeds, chosen.base.fit_level)
display(Markdown(text.epochs_table(used, chosen.base.fit_level, epochs)))

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
# ## Figure 2: memorization at matched fit
# The fair reading: memorization against clean training accuracy along training, every norm on
# each panel (mean over the runs that reached each accuracy, band: their range). A curve above
# another has memorized more *at the same fit*; a model that only trains faster lies on the same
# curve. Dashed: no-BN at `effective_lr` times its own learning rate.

# %%
fit_curves = fit_rows.curves(histories, corruption, norms, seeds)
arm = fit_rows.arm_curves(histories, corruption, effective_lr, seeds)
fig = plot_memorization.matched_fit_figure(fit_curves, arm, fit_levels, titles, band)
run.figure(fig, "memorization_at_fit")

# %% [markdown]
# ## Figure 2b: memorization at fit against the learning rate
# Left: each model's memorization at the end of training (trained to fit) at every rate of the
# grid, BN and no-BN (mean over seeds, bar: an uncorrected 95% t interval; ringed: the chosen
# rate; hollow: a run hit the epoch cap unfitted; a cross at the foot: a run diverged). Right:
# the same models' clean test accuracy. BN's excess does not hang on the chosen rates when every
# BN point lies above no-BN's ringed one and BN's ringed point above every no-BN one: the rows
# `01.lr.bn` and `01.lr.none` judge exactly that, with the family's correction.

# %%
lr_points = {}
for corr in curve_kinds:
    lr_points[corr] = lr_dependence.points(histories, corr, chosen_lrs, lr_grid, seeds, fit_level)
if lr_points:
    fig = plot_memorization.lr_curve_figure(lr_points, titles, band)
    run.figure(fig, "memorization_vs_lr")
    display(Markdown(text.lr_points_table(lr_points, fit_level)))

# %% [markdown]
# ## Figure 3: the rare class, trained vs held out
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
# ## Figure 4: loss on atypical vs clean samples (BN vs no-BN)
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
# ## Figure 5: clean test accuracy
# The utility side: every model must learn the task for the comparison to be fair.

# %%
test_titles = {c: f"{titles[c]}\n{n_test} clean test samples" for c in corruption}
test_acc = runs.by_case(corruption, norms, "test_acc")
fig = plot_memorization.clean_accuracy_figure(runs.epochs, test_acc, test_titles, band)
run.figure(fig, "test_accuracy")

# %% [markdown]
# ## Figure 6: BN speeds up learning of typical samples, and what it costs
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
# ## Figure 7: the controls — batch coupling or the learned gamma?
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
# **At matched fit: the primary reading of the fair protocol.** Per corruption, BN minus no-BN in
# memorization where each run's clean training accuracy first reaches each of `fit_levels`
# (interpolated within the run; a run that never gets there gives no reading) and at the end of
# training, both trained to `fit_level`; each control minus no-BN at the end; BN minus no-BN at
# `effective_lr` times its own learning rate. Paired over seeds, 95% Student-t intervals. Any
# verdict needs the two models within 1 point of clean training accuracy and 2 points of clean
# test accuracy at the reading (`claims.yaml`, `matched_fit`), else it reads *inconclusive*, for
# the paper or against it; censored runs are named.

# %%
rows = []
if protocol == "fair":
    common = dict(dataset=dataset, budget=budget)
    rows += fit_rows.verdict_rows(
        histories, corruption, norms, seeds, fit_levels, fit_level, epochs, **common
    )
    rows += fit_rows.arm_rows(
        histories, corruption, effective_lr, seeds, fit_level, epochs, **common
    )
    rows += lr_dependence.rows(
        histories, curve_kinds, chosen_lrs, lr_grid, seeds, fit_level, epochs, **common
    )

# %% [markdown]
# **The paper's readings, over epochs.** First the typical samples, per seed averaged over the
# corruptions: no-BN's minus BN's epochs to `clean_level` and BN's minus no-BN's mean clean
# training accuracy over training (Figure 6, top). Then per corruption, BN minus no-BN: final
# memorization, memorization over training (the area under Figure 1's curve) and, for flips and
# OOD images, the corrupted samples' loss over training (no-BN minus BN); memorization when each
# model reaches `clean_level` (Figure 6, bottom); each control minus no-BN (Figure 7). Under the
# fair protocol these are secondary rows, read over the epoch cap with each model held at its
# stop, and compared models whose final clean training accuracies differ by more than the
# matched-fit tolerance make a row *inconclusive*; under `protocol="paper"` they are the only ones.

# %%
reading = "the paper's protocol" if protocol == "paper" else "secondary: over the epoch cap"
over_cap = dict(dataset=dataset, budget=budget, reading=reading)
rows += memorization.verdict_rows(
    runs, corruption, norms, clean_level, chosen.base.fit_level, **over_cap
)
rows = claims.correct(rows)  # each row within its verdict family (claims.yaml `families:`)

# %% [markdown]
# The results file keeps the table's numbers, the verdict rows, the key figures and every
# training history.

# %%
key_figures = ["memorization_curves", "typical_speed"] + (["controls"] if controls else [])
key_figures = ["memorization_at_fit"] * (protocol == "fair") + key_figures
key_figures += ["memorization_vs_lr"] * bool(lr_points)

# %% [markdown]
# Saved beside them: each norm's recipe, the epochs each model used, the learning-rate curve's
# points and the verdict rows.

# %%
run.save(
    {
        "recipes": chosen.as_dict(),
        "epochs_used": used,
        "lr_curve": {c: [p.as_dict() for p in pts] for c, pts in lr_points.items()},
        "summary": summary,
        "claims": rows,
        "key_figures": notebook.figure_paths(run, key_figures),
        "histories": {f"{c}/{n}/{s}": h for (c, n, s), h in histories.items()},
    }
)

# %% [markdown]
# The verdicts, one line each.

# %%
# NBVAL_CHECK_OUTPUT
print(
    f"Forced memorization on {dataset} ({arch}, flip/ood {noise_frac:.0%} corrupted, rare class "
    f"{rare_share:.0%} of the subset, {len(seeds)} seeds, budget {budget})"
)
print(f"Recipes: {chosen.name}; learning rates {chosen.as_dict()['lr']}")
claims.show(rows)

# %% [markdown]
# What the two controls say about which part of BN carries its effect, and what the
# effective-learning-rate arm says.

# %%
# NBVAL_CHECK_OUTPUT
print("Controls (which part of BN carries its effect on memorization?):")
prefix = "01.converged.control." if protocol == "fair" else "01.control."
print("\n".join(f"- {line}" for line in text.controls_reading(rows, prefix)))
print("Effective learning rate (does a larger no-BN step memorize like BN at matched fit?):")
print("\n".join(f"- {line}" for line in text.effective_lr_reading(rows)))
if lr_points:
    print("Learning-rate curve (does BN's excess hold at every rate of the grid?):")
    print("\n".join(f"- {line}" for line in text.lr_dependence_reading(rows, lr_points)))
print(
    "Paper: BN speeds up learning of typical samples and makes networks memorize atypical "
    "samples faster and more strongly."
)
