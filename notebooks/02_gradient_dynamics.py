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
# # 2. Per-sample gradient dynamics: do noisy samples carry larger gradients under BN?
# *Reference run:* [figures][figures] · [this notebook executed][executed] · [report][report]
#
# [figures]: ../figures/02_gradient_dynamics/fashion_mnist/
# [executed]: ../figures/02_gradient_dynamics/fashion_mnist/02_gradient_dynamics.html
# [report]: ../figures/REPORT.md
#
# **The paper's claim.** In BN models the per-sample gradient l2 norms of noisy (mislabeled or
# out-of-distribution) samples shift to much higher values than those of clean samples, and
# than those of noisy samples in no-BN models.
#
# **What this notebook measures.** While training (the same data and seed for every norm), at
# chosen epochs we compute exact per-sample gradient norms (`bnpaper.grads`; over all
# parameters and per parameter group) of fixed probe samples, clean and noisy, with the two
# BatchNorm semantics and the theory's simplification:
# - `"batch"` (figures: *batch statistics (exact, as in training)*): the gradient of sample i's
#   loss term (unreduced cross-entropy, i.e. B times its share of the mean-reduced batch
#   gradient) *inside a training batch*, train-mode BN whose mean and variance depend on every
#   sample — what actually moves the parameters; on fixed training batches of natural
#   composition;
# - `"eval"` (*running statistics*): batch-independent, on a fixed random training subset;
# - `"batch_fixed"` (*batch statistics held fixed*): `"batch"` with the batch mean and variance
#   held constant — the simplification of the paper's theory ("batch statistics treated as
#   fixed during a step"), on the same batches: against `"batch"` it shows how much of a
#   sample's gradient reaches the parameters through the batch statistics.
#
# For models without BN (and GroupNorm) the three coincide. Computing them never changes the
# running statistics nor the training trajectory (the probes use their own random generator).

# %% tags=["parameters"]
dataset = "fashion_mnist"  # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"  # ci | quick | paper: which params/<budget>.yaml applies
arch = "lenet"  # lenet | resnet20 | resnet18 | densenet
norms = ["bn", "none"]  # must include "bn" and "none"; add "gn", "bn_noaffine" as controls
corruption = "flip"  # flip (label flips) | ood (injected OOD images with random labels)
noise_frac = 0.1  # share of training samples corrupted, in (0, 1)
ood_source = "digits"  # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
n_train = 6000  # training samples drawn from the training set (seeded)
n_test = 5000  # clean test samples used for test accuracy
epochs = 10  # training epochs
seeds = [0, 1, 2]  # one run per seed and norm
batch_size = 128  # SGD mini-batch size (also the size of the "batch" probe batches)
lr = 0.05  # peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4  # L2 weight decay
augment = False  # random crop + flip (CIFAR)
probe_epochs = [0, 1, 2, 4, 7, 10]  # epochs at which gradient norms are recorded; 0: the start
n_probe = 1000  # "eval" probe: random training samples (natural noise share)
probe_batches = 2  # "batch" probe: training batches; all noisy + as many clean per batch
download = False  # allow torchvision to download the dataset if it is missing
device = "auto"  # auto (a GPU when torch sees one, else the CPU) | cpu | cuda

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook

run = notebook.start(globals(), "02_gradient_dynamics")

# %% [markdown]
# ## The experiment
# The dataset is loaded once; every figure shares one style.

# %%
# NBVAL_IGNORE_OUTPUT
import dataclasses

from bnpaper import claims, data, grad_analysis, plot_gradients, plots, probes, text, train, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)

# %% [markdown]
# Every model trains with one recipe; only its normalization and its seed change.

# %%
recipe = train.TrainConfig.from_params(run.params)

# %% [markdown]
# One probe per seed: at the probe epochs it records the norms of fixed samples, drawn with its
# own random generator (its settings are part of the training unit's key).

# %%
grad_probes = {
    seed: probes.GradProbe(
        epochs=tuple(probe_epochs),
        n_probe=n_probe,
        batches=probe_batches,
        batch_size=batch_size,
        seed=seed,
    )
    for seed in seeds
}

# %% [markdown]
# For every seed one corrupted training subset; every norm trains on it from the same seed
# (paired), recording its probe inside the cached training unit: a re-run re-renders in
# seconds and a killed run resumes.

# %%
# NBVAL_IGNORE_OUTPUT
histories = {norm: [] for norm in norms}  # norm -> one history per seed (norms under "grads")
for seed in seeds:
    split = data.make_split(ds, n_train, corruption, noise_frac, seed, ood_source, n_test)
    for norm in norms:
        cfg = dataclasses.replace(recipe, norm=norm, seed=seed)
        desc = f"{norm} seed {seed}"
        trained = units.trained(split, cfg, probe=grad_probes[seed], desc=desc)
        histories[norm].append(trained.history)
print(f"{len(seeds) * len(norms)} models ready")

# %% [markdown]
# Every figure reads the medians of each probe definition, per model and seed; the legends carry
# each model's final clean test accuracy.

# %%
probed = grad_analysis.probed_epochs(histories[norms[0]][0])
medians = {
    mode: {n: grad_analysis.medians(histories[n], mode) for n in norms} for mode in probes.MODES
}
acc = grad_analysis.final(histories, "test_acc")  # clean test accuracy
memorized = grad_analysis.final(histories, "noisy_acc")  # final memorization
names = text.accuracy_legends(acc)
bars = f"mean over {len(seeds)} seeds; bars: range over seeds"

# %% [markdown]
# ## Figure 1: distributions of per-sample gradient norms
# The exact `"batch"` norms (l2 over all parameters, sum-reduced loss), pooled over seeds, at
# three probe epochs: densities of log10 of the norm, the same bins (linear in log10) everywhere.

# %%
shown = [probed[0], probed[len(probed) // 2], probed[-1]]
pooled = {
    (n, e): grad_analysis.pooled_log10(histories[n], e, "batch") for n in norms for e in shown
}
title = f"{text.PROBE_MODES['batch']}, {len(seeds)} seeds pooled"
run.figure(plot_gradients.histogram_figure(pooled, names, title), "norm_histograms")

# %% [markdown]
# ## Figure 2: medians over training
# Median norm of noisy (solid) and clean (dashed) probe samples at each probe epoch, mean over
# seeds with the seeds' range as bars; left the exact `"batch"` definition, right `"eval"`.

# %%
titles = {}
for mode in ("batch", "eval"):
    counts = text.probe_counts(*grad_analysis.sample_counts(histories[norms[0]], mode))
    titles[mode] = f"{text.PROBE_MODES[mode]}\nmedians of {counts} samples per seed"
fig = plot_gradients.median_figure(probed, medians, names, titles, bars)
run.figure(fig, "median_norms")

# %% [markdown]
# ## Figure 3: noisy/clean ratio and the noisy samples' share of the gradient
# Left and middle: median noisy norm / median clean norm per model, under the two definitions
# (the same y axis). Right: share of the summed per-sample gradient norms carried by noisy
# samples (`"eval"` probe of natural composition; dotted line: their share of the samples).

# %%
titles = {mode: text.PROBE_MODES[mode] for mode in ("batch", "eval")}
share = (noise_frac, n_probe)
fig = plot_gradients.ratio_figure(probed, medians, names, titles, share, bars)
run.figure(fig, "noisy_clean_ratio")

# %% [markdown]
# ## Figure 4: the batch statistics' part of the gradient (the theory's simplification)
# The paper's theory treats BN's batch statistics as fixed during a step. Left: the median over
# probe samples of the `"batch_fixed"` / the exact `"batch"` norm, noisy (solid) and clean
# (dashed): how far a sample's gradient changes once the gradient through the batch mean and
# variance is dropped (1: not at all). Right: the median noisy/clean ratio under both
# definitions. For no-BN models the two coincide (not shown).

# %%
bn_like = [n for n in norms if n in ("bn", "bn_noaffine")]
fixed = {n: grad_analysis.fixed_over_batch(histories[n]) for n in bn_like}
counts = text.probe_counts(*grad_analysis.sample_counts(histories["bn"], "batch"))
fig = plot_gradients.fixed_statistics_figure(
    probed, fixed, medians, names, text.PROBE_MODES, f"per sample ({counts} per seed)", bars
)
run.figure(fig, "fixed_statistics")

# %% [markdown]
# ## Figure 5: which parameters carry the noisy samples' gradient
# The exact `"batch"` norm split by parameter group (`bnpaper.grads`): median noisy / median
# clean norm of each group, per model. The theory says outliers drive the growth of gamma; a
# noisy/clean ratio on gamma above the one on the weights says that noisy samples push on gamma
# harder than on the rest, relative to clean samples (the norm does not say in which direction).

# %%
ratios = {
    names[n]: {
        g: grad_analysis.group_ratio(histories[n], g) for g in grad_analysis.groups(histories[n][0])
    }
    for n in norms
}
ylabel = f"median noisy / median clean norm\n{text.PROBE_MODES['batch']}"
fig = plot_gradients.group_ratio_figure(probed, ratios, ylabel, bars)
run.figure(fig, "groups_noisy_clean_ratio")

# %% [markdown]
# ## Verdict
# Per seed, the ratio of median noisy to median clean `"batch"` norm, averaged over the probe
# epochs after initialization; mean over seeds with a 95% Student-t interval (`stats.t_mean`,
# `stats.t_paired_diff`), judged by the claim's test in `bnpaper/claims.yaml`: (1) in BN models
# noisy norms are *much* higher than clean ones — the BN ratio's whole interval reaches 2;
# (2) relative to clean samples, noisy norms are higher in BN than in no-BN models — the paired
# BN minus no-BN gap lies above 0 and reaches the claim's minimum effect, unless BN's clean test
# accuracy exceeds no-BN's by more than the tolerance ("inconclusive"). Ratios, not absolute
# norms, are compared across models: absolute norms depend on each model's parametrization (the
# medians are in Figure 2 and in the results JSON).

# %%
rows = grad_analysis.verdict_rows(histories, dataset=dataset, budget=budget, corruption=corruption)
rows = claims.holm(rows)  # Holm's correction within each family of this run's rows

# %% [markdown]
# The results file keeps the verdict rows, every secondary number (ratios per definition and per
# parameter group, medians, shares), the final memorization and the key figures.

# %%
summary = grad_analysis.summary(histories)
run.save(
    {
        "claims": rows,
        **summary,
        "memorization_final": memorized,
        "key_figures": notebook.figure_paths(run, ["median_norms", "noisy_clean_ratio"]),
    }
)

# %% [markdown]
# The verdicts, then each model's ratios: over all parameters, per parameter group, and with the
# batch statistics held fixed.

# %%
# NBVAL_CHECK_OUTPUT
print(
    f"Gradient dynamics on {dataset} ({arch}, {corruption}, {noise_frac:.0%} noisy, "
    f"{len(seeds)} seeds, {epochs} epochs, budget {budget})"
)
claims.show(rows)
print("\n".join(text.gradient_reading(summary, acc, memorized)))
print(
    "Paper: noisy samples' per-sample gradient norms shift much higher than clean ones under BN, "
    "and higher than in no-BN models."
)
