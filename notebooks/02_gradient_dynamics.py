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
#
# **The fair comparison.** BN trains faster, so at equal epochs a BN model fits its clean data
# better than a no-BN one, and a larger gradient of noisy samples may only say so. By default
# (`protocol = "fair"`) each norm trains with its own learning rate, chosen on held-out data
# before any judged run, until its clean training accuracy reaches `fit_level`, and the verdicts
# are read where BN and no-BN fit their clean training data equally well: at fixed levels of clean
# training accuracy and at convergence. The readings at fixed epochs stay as secondary rows
# (`protocol = "paper"` runs the paper's protocol: one learning rate, fixed epochs).

# %% tags=["parameters"]
dataset = "fashion_mnist"  # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"  # ci | quick | paper: which params/<budget>.yaml applies
arch = "lenet"  # lenet | resnet20 | resnet18 | densenet
norms = ["bn", "none"]  # must include "bn" and "none"; add "gn", "bn_noaffine" as controls
corruption = "flip"  # flip (label flips) | ood (injected OOD images with random labels)
noise_frac = 0.05  # share of training samples corrupted, in (0, 1): the paper's example, 5%
ood_source = "digits"  # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
n_train = 4000  # training samples drawn from the training set (seeded)
n_test = 5000  # clean test samples used for test accuracy
protocol = "fair"  # fair: each norm its own lr (chosen on held-out data), trained to fit_level
# paper: the paper's protocol, every norm at `lr` for exactly `epochs` epochs (no search, no fit)
lr_grid = [0.005, 0.0158, 0.05, 0.158, 0.5]  # fair: lrs searched per norm (5+, 1.5+ decades)
n_val = 1000  # fair: held-out training images the lr is chosen on (never trained on)
lr_seeds = [0, 1, 2]  # fair: seeds of the lr search (one clean model per norm, lr and seed)
fit_level = 0.99  # fair: each model trains until its clean training accuracy reaches it
fit_levels = [0.95, 0.98, 0.99]  # clean training accuracies the matched-fit rows are read at
epochs = 40  # fair: the epoch cap (a model that hits it unfitted is censored); paper: epochs
# (01's cap and search settings: the learning-rate search's units are shared with 01)
seeds = [0, 1, 2]  # one run per seed and norm
batch_size = 128  # SGD mini-batch size (also the size of the "batch" probe batches)
lr = 0.05  # paper: the peak learning rate of every norm (cosine schedule, momentum 0.9)
weight_decay = 5e-4  # L2 weight decay
augment = False  # random crop + flip (CIFAR)
probe_epochs = [0, 1, 2, 4, 7, 10]  # fixed-epoch reading; paper: probed (with the last epoch)
# fair: every epoch is probed up to each model's stop (the matched-fit reading needs them)
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
from IPython.display import Markdown, display

from bnpaper import claims, data, grad_analysis, grad_fit, plot_gradients, plot_recipes, plots
from bnpaper import probes, recipes, text, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)

# %% [markdown]
# Each norm's recipe. Under the fair protocol (the default) each norm's learning rate is chosen
# before any judged run, on clean data with held-out validation images, by the rule in
# `claims.yaml` (each grid point a cached unit), and every model trains until its clean training
# accuracy reaches `fit_level` (at most `epochs`); under the paper's protocol every norm trains
# at `lr` for exactly `epochs` epochs.

# %%
# NBVAL_IGNORE_OUTPUT
chosen = recipes.norm_recipes(ds, run.params, norms)
print(chosen.name)

# %% [markdown]
# ## Figure 0: how each norm's learning rate was chosen
# Validation accuracy against the learning rate, one curve per norm, the chosen one ringed (the
# fair protocol only); the table gives every grid point and the epochs its model used.

# %%
if chosen.choices is not None:
    title = f"{arch} on {dataset}: the learning rate search"
    run.figure(plot_recipes.lr_choice_figure(chosen, title), "lr_choice")
display(Markdown(text.recipe_table(chosen)))

# %% [markdown]
# One probe per seed: it records the norms of fixed samples, drawn with its own random generator
# (its settings are part of the training unit's key), at every epoch up to the model's stop under
# the fair protocol (the matched-fit reading needs them); under the paper's, at `probe_epochs`
# and the last epoch.

# %%
schedule = grad_fit.probe_schedule(protocol, probe_epochs, epochs)
grad_probes = {
    seed: probes.GradProbe(
        epochs=schedule, n_probe=n_probe, batches=probe_batches, batch_size=batch_size, seed=seed
    )
    for seed in seeds
}

# %% [markdown]
# For every seed one corrupted training subset; every norm trains on it from the same seed
# (paired) with its own recipe, recording its probe inside the cached training unit: a re-run
# re-renders in seconds and a killed run resumes.

# %%
# NBVAL_IGNORE_OUTPUT
trained = {norm: [] for norm in norms}  # norm -> one TrainResult per seed
for seed in seeds:
    split = data.make_split(ds, n_train, corruption, noise_frac, seed, ood_source, n_test)
    for norm in norms:
        cfg = chosen.config(norm, seed=seed)
        desc = f"{norm} seed {seed}"
        trained[norm].append(units.trained(split, cfg, probe=grad_probes[seed], desc=desc))
histories = {norm: [r.history for r in trained[norm]] for norm in norms}
print(f"{len(seeds) * len(norms)} models ready")

# %% [markdown]
# How each model trained: its learning rate, the epochs each seed used and whether it hit the
# epoch cap before its clean training accuracy reached the fit level (censored).

# %%
training = grad_fit.training_record(trained, {n: chosen.lr(n) for n in norms})
print("\n".join(text.training_lines(training, epochs)))

# %% [markdown]
# The fixed-epoch figures and rows read the epochs of `probe_epochs` that every run reached (a
# run that stopped at fit was not probed after it): the paper's reading, secondary here.

# %%
fixed_epochs = grad_fit.common_epochs(histories, probe_epochs)
at_fixed = grad_fit.restrict(histories, fixed_epochs)
reading = text.fixed_reading(fixed_epochs, protocol)
print(reading)

# %% [markdown]
# Every fixed-epoch figure reads the medians of each probe definition, per model and seed; the
# legends carry each model's final clean test accuracy.

# %%
probed = grad_analysis.probed_epochs(at_fixed[norms[0]][0])
medians = {
    mode: {n: grad_analysis.medians(at_fixed[n], mode) for n in norms} for mode in probes.MODES
}
acc = grad_analysis.final(histories, "test_acc")  # clean test accuracy
memorized = grad_analysis.final(histories, "noisy_acc")  # final memorization
names = text.accuracy_legends(acc)
bars = f"mean over {len(seeds)} seeds; bars: range over seeds"

# %% [markdown]
# ## Figure 1: the noisy/clean ratio against the clean training fit (matched fit)
# Median noisy / median clean `"batch"` norm at each probed epoch against the run's clean
# training error there (1 - clean training accuracy, log axis: training runs left to right),
# one colour per norm (thin lines: runs); dots: the mean over seeds where each run first reaches
# each level of `fit_levels` (dotted lines; interpolated within the run).

# %%
runs_fit = {n: grad_fit.trajectories(histories[n]) for n in norms}
curves = grad_fit.ratio_vs_fit(runs_fit, fit_levels)
title = f"{text.PROBE_MODES['batch']}\n{chosen.name}"
fig = plot_gradients.ratio_fit_figure(runs_fit, curves, names, fit_levels, title)
run.figure(fig, "ratio_vs_fit")

# %% [markdown]
# ## Figure 2: distributions of per-sample gradient norms
# The exact `"batch"` norms (l2 over all parameters, sum-reduced loss), pooled over seeds, at
# three fixed epochs: densities of log10 of the norm, the same bins (linear in log10) everywhere.

# %%
shown = [probed[0], probed[len(probed) // 2], probed[-1]]
pooled = {(n, e): grad_analysis.pooled_log10(at_fixed[n], e, "batch") for n in norms for e in shown}
title = f"{text.PROBE_MODES['batch']}, {len(seeds)} seeds pooled"
run.figure(plot_gradients.histogram_figure(pooled, names, title), "norm_histograms")

# %% [markdown]
# ## Figure 3: medians over training
# Median norm of noisy (solid) and clean (dashed) probe samples at each fixed epoch, mean over
# seeds with the seeds' range as bars; left the exact `"batch"` definition, right `"eval"`.

# %%
titles = {}
for mode in ("batch", "eval"):
    counts = text.probe_counts(*grad_analysis.sample_counts(at_fixed[norms[0]], mode))
    titles[mode] = f"{text.PROBE_MODES[mode]}\nmedians of {counts} samples per seed"
fig = plot_gradients.median_figure(probed, medians, names, titles, bars)
run.figure(fig, "median_norms")

# %% [markdown]
# ## Figure 4: noisy/clean ratio and the noisy samples' share of the gradient
# Left and middle: median noisy norm / median clean norm per model at the fixed epochs, under the
# two definitions (the same y axis). Right: share of the summed per-sample gradient norms carried
# by noisy samples (`"eval"` probe of natural composition; dotted line: their share of samples).

# %%
titles = {mode: text.PROBE_MODES[mode] for mode in ("batch", "eval")}
share = (noise_frac, n_probe)
fig = plot_gradients.ratio_figure(probed, medians, names, titles, share, bars)
run.figure(fig, "noisy_clean_ratio")

# %% [markdown]
# ## Figure 5: the batch statistics' part of the gradient (the theory's simplification)
# The paper's theory treats BN's batch statistics as fixed during a step. Left: the median over
# probe samples of the `"batch_fixed"` / the exact `"batch"` norm, noisy (solid) and clean
# (dashed): how far a sample's gradient changes once the gradient through the batch mean and
# variance is dropped (1: not at all). Right: the median noisy/clean ratio under both
# definitions. For no-BN models the two coincide (not shown).

# %%
bn_like = [n for n in norms if n in ("bn", "bn_noaffine")]
fixed = {n: grad_analysis.fixed_over_batch(at_fixed[n]) for n in bn_like}
counts = text.probe_counts(*grad_analysis.sample_counts(at_fixed["bn"], "batch"))
fig = plot_gradients.fixed_statistics_figure(
    probed, fixed, medians, names, text.PROBE_MODES, f"per sample ({counts} per seed)", bars
)
run.figure(fig, "fixed_statistics")

# %% [markdown]
# ## Figure 6: which parameters carry the noisy samples' gradient
# The exact `"batch"` norm split by parameter group (`bnpaper.grads`): median noisy / median
# clean norm of each group, per model. The theory says outliers drive the growth of gamma; a
# noisy/clean ratio on gamma above the one on the weights says that noisy samples push on gamma
# harder than on the rest, relative to clean samples (the norm does not say in which direction).

# %%
ratios = {
    names[n]: {g: grad_analysis.group_ratio(at_fixed[n], g) for g in grad_analysis.groups(h[0])}
    for n, h in at_fixed.items()
}
ylabel = f"median noisy / median clean norm\n{text.PROBE_MODES['batch']}"
fig = plot_gradients.group_ratio_figure(probed, ratios, ylabel, bars)
run.figure(fig, "groups_noisy_clean_ratio")

# %% [markdown]
# ## Verdict
# **At matched fit (the primary reading).** Per seed, the ratio of median noisy to median clean
# `"batch"` norm where the run's clean training accuracy first reaches each level of
# `fit_levels` (interpolated between the probed epochs around the crossing, within the run; a
# run that never reaches a level gives no reading there), and at each run's last epoch once
# trained to fit (convergence; a run that hit the epoch cap unfitted is censored). Judged by
# `bnpaper/claims.yaml`: (1) in BN models noisy norms are *much* higher than clean ones (the
# BN ratio's interval reaches 2); (2) BN minus no-BN, paired over the seeds read in both, lies
# above 0 and reaches the claim's minimum effect, and counts only where the two models' clean
# training accuracy at the reading is within 1 point and their clean test accuracy within 2
# ("inconclusive" otherwise, saying which).

# %%
comps = grad_fit.comparisons(histories, fit_levels, fit_level, epochs)
common = {"dataset": dataset, "budget": budget, "corruption": corruption}
fit_rows = grad_fit.verdict_rows(comps, chosen.base.fit_level, **common)

# %% [markdown]
# **The paper's own comparison, at the same readings.** The paper compares the noisy samples'
# norms in BN with those in no-BN models. Per seed, the log of the noisy samples' median
# `"batch"` norm is read at each level and at convergence, BN minus no-BN is paired over seeds,
# and the mean is exponentiated: BN's noisy norm over no-BN's (a geometric mean over seeds),
# judged against 1.25 times. Absolute norms depend on each model's parametrization, so this row
# stands beside the ratio rows and does not replace them.

# %%
norm_comps = grad_fit.comparisons(histories, fit_levels, fit_level, epochs, quantity="log_noisy")
norm_rows = grad_fit.noisy_norm_rows(norm_comps, chosen.base.fit_level, **common)

# %% [markdown]
# **At fixed epochs (secondary, the paper's reading).** Per seed the same ratio averaged over the
# fixed epochs after initialization, mean over seeds with a 95% Student-t interval; BN minus
# no-BN is inconclusive when BN's final clean test accuracy exceeds no-BN's by more than the
# tolerance. At fixed epochs only ratios are compared across models (the medians are in Figure 3
# and in the results JSON).

# %%
fixed_rows = grad_analysis.verdict_rows(at_fixed, **common, reading=reading)
rows = claims.correct(fit_rows + norm_rows + fixed_rows)  # each row within its verdict family

# %% [markdown]
# The results file keeps the recipes (each norm's learning rate and search), the epochs each
# model used, the matched-fit readings, the verdict rows, every secondary number (ratios per
# definition and per parameter group, medians, shares), the final memorization and key figures.

# %%
summary = grad_analysis.summary(at_fixed)
matched = grad_fit.comparison_dicts(comps)
figures = notebook.figure_paths(run, ["ratio_vs_fit", "median_norms", "noisy_clean_ratio"])
extra = {"recipes": chosen.as_dict(), "training": training, "fixed_epochs": fixed_epochs}
extra["matched_fit_noisy_norm"] = [c.as_dict() for c in norm_comps]
results = {"claims": rows, "matched_fit": matched, **extra, **summary}
run.save({**results, "memorization_final": memorized, "key_figures": figures})

# %% [markdown]
# The verdicts, then how each model trained and fitted, then each model's fixed-epoch ratios:
# over all parameters, per parameter group, and with the batch statistics held fixed.

# %%
# NBVAL_CHECK_OUTPUT
print(f"Gradient dynamics on {dataset} ({arch}, {corruption}, {noise_frac:.0%} noisy,")
print(f"{len(seeds)} seeds, budget {budget}); {chosen.name}")
claims.show(rows)
print("\n".join(text.training_lines(training, epochs) + text.matched_fit_lines(matched)))
print("\n".join(text.gradient_reading(summary, acc, memorized)))
print("Paper: noisy samples' per-sample gradient norms shift much higher than clean ones under")
print("BN, and higher than in no-BN models (read at equal epochs).")
