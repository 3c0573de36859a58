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
# *Reference run:* [figures](../figures/02_gradient_dynamics/fashion_mnist/) · [this notebook executed](../figures/02_gradient_dynamics/fashion_mnist/02_gradient_dynamics.html) · [report](../figures/REPORT.md)
#
# **The paper's claim.** In BN models the per-sample gradient l2 norms of noisy (mislabeled or
# out-of-distribution) samples shift to much higher values than those of clean samples, and
# than those of noisy samples in no-BN models.
#
# **What this notebook measures.** While training (the same data and seed for every norm), at
# chosen epochs we compute exact per-sample gradient norms (`bnpaper.grads`; over all
# parameters and per parameter group) of fixed probe samples, clean and noisy, with the two
# BatchNorm semantics and the theory's simplification:
# - `"batch"` (figures: *batch statistics (exact, as in training)*): the gradient of sample i's loss term
#   (unreduced cross-entropy, i.e. B times its share of the mean-reduced batch gradient) *inside
#   a training batch*, train-mode BN whose mean and variance depend on every sample — what
#   actually moves the parameters; on fixed training batches of natural composition;
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
probe_epochs = [
    0,
    1,
    2,
    4,
    7,
    10,
]  # epochs at which gradient norms are recorded; 0 is the initialization
n_probe = 1000  # "eval" probe: random training samples (natural noise share)
probe_batches = 2  # "batch" probe: training batches; all noisy + as many clean per batch
download = False  # allow torchvision to download the dataset if it is missing
device = "auto"  # auto (a GPU when torch sees one, else the CPU) | cpu | cuda

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook

run = notebook.start(globals(), "02_gradient_dynamics")  # noqa: E702

# %% [markdown]
# ## The experiment
# For every seed one corrupted training subset; every norm trains on it from the same seed (paired).
# `probes.GradProbe` records the norms at the probe epochs inside the cached training unit (its
# settings are part of the unit's key): a re-run re-renders in seconds and a killed run resumes.

# %%
# NBVAL_IGNORE_OUTPUT
import matplotlib.pyplot as plt

from bnpaper import claims, data, plot_gradients, plots, probes, stats, train, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)
H = {n: [] for n in norms}  # norm -> one history per seed (the probe's records under "grads")
for seed in seeds:
    split = data.make_split(ds, n_train, corruption, noise_frac, seed, ood_source, n_test)
    probe = probes.GradProbe(
        epochs=tuple(probe_epochs),
        n_probe=n_probe,
        batches=probe_batches,
        batch_size=batch_size,
        seed=seed,
    )
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
        H[norm].append(units.trained(split, cfg, probe=probe, desc=f"{norm} seed {seed}").history)
acc = {n: float(train.curves(H[n], "test_acc")[:, -1].mean()) for n in norms}  # clean test accuracy
mem = {n: float(train.curves(H[n], "noisy_acc")[:, -1].mean()) for n in norms}  # final memorization
name = {n: f"{plots.label(n)} (clean test acc. {acc[n]:.2f})" for n in norms}
MODE = {
    "batch": "batch statistics (exact, as in training)",
    "eval": "running statistics (eval mode)",
    "batch_fixed": "batch statistics held fixed (theory)",
}  # the probe definitions in words
BARS = f"mean over {len(seeds)} seeds; bars: range over seeds"
ep = probes.probed_epochs(H[norms[0]][0])
print(f"{sum(map(len, H.values()))} models ready")

# %% [markdown]
# ## Figure 1: distributions of per-sample gradient norms
# The exact `"batch"` norms (l2 over all parameters, sum-reduced loss), pooled over seeds, at
# three probe epochs: densities of log10 of the norm, the same bins (linear in log10) everywhere.

# %%
show = [ep[0], ep[len(ep) // 2], ep[-1]]
fig, axes = plt.subplots(
    len(norms),
    len(show),
    figsize=(3.3 * len(show) + 1.6, 2.5 * len(norms)),
    squeeze=False,
    sharex=True,
)
cells = {
    (i, j): (*probes.pooled_log10(H[n], e, "batch"), f"{name[n]}, epoch {e}")
    for i, n in enumerate(norms)
    for j, e in enumerate(show)
}
plot_gradients.grad_norm_histograms(
    axes, cells, [plots.color(n) for n in norms], "per-sample gradient l2 norm (log scale)"
)
fig.suptitle(f"{MODE['batch']}, {len(seeds)} seeds pooled", fontsize=10)
fig.tight_layout()
run.figure(fig, "norm_histograms")

# %% [markdown]
# ## Figure 2: medians over training
# Median norm of noisy (solid) and clean (dashed) probe samples at each probe epoch, mean over
# seeds with the seeds' range as bars; left the exact `"batch"` definition, right `"eval"`.

# %%
fig, axes = plots.panels(2, 4.6, 3.6)
for ax, mode in zip(axes, ("batch", "eval")):
    m = {n: probes.medians(H[n], mode) for n in norms}
    plot_gradients.probe_curves(
        ax,
        ep,
        {
            **{f"{name[n]}: noisy": (m[n].noisy, plots.color(n), "-", "o") for n in norms},
            **{f"{plots.label(n)}: clean": (m[n].clean, plots.color(n), "--", "s") for n in norms},
        },
    )
    ax.set(
        title=f"{MODE[mode]}\nmedians of {probes.probe_counts(H[norms[0]], mode)} samples per seed",
        xlabel="epoch",
        ylabel="median per-sample gradient l2 norm",
        yscale="log",
    )
    plots.plain_log_axis(ax)
fig.tight_layout()
plots.figure_legend(fig, axes, BARS, ncol=len(norms))
run.figure(fig, "median_norms")

# %% [markdown]
# ## Figure 3: noisy/clean ratio and the noisy samples' share of the gradient
# Left and middle: median noisy norm / median clean norm per model, under the two definitions
# (the same y axis). Right: share of the summed per-sample gradient norms carried by noisy
# samples (`"eval"` probe of natural composition; dotted line: their share of the samples).

# %%
fig, axes = plots.panels(3, 3.7, 3.4)
axes[1].sharey(axes[0])
for ax, mode in zip(axes, ("batch", "eval")):
    plot_gradients.probe_curves(
        ax,
        ep,
        {name[n]: (probes.medians(H[n], mode).ratio, plots.color(n), "-", "o") for n in norms},
    )
    ax.axhline(1, color="grey", lw=0.8, ls=":", label="equal medians (ratio 1)")
    ax.set(
        title=MODE[mode], xlabel="epoch", ylabel="median noisy / median clean norm", yscale="log"
    )
plots.plain_log_axis(axes[0])
plot_gradients.probe_curves(
    axes[2],
    ep,
    {name[n]: (probes.medians(H[n], "eval").share, plots.color(n), "-", "o") for n in norms},
)
axes[2].axhline(
    noise_frac, color="k", ls=":", lw=1, label=f"noisy share of the samples ({noise_frac:.0%})"
)
axes[2].set(
    title=f"running statistics, all {n_probe} probe samples",
    xlabel="epoch",
    ylim=(0, 1),
    ylabel="share of the summed gradient norm\ncarried by noisy samples",
)
fig.tight_layout()
plots.figure_legend(fig, axes, BARS, ncol=2)
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
fig, axes = plots.panels(2, 4.6, 3.6)
left, right = {}, {}
for n in bn_like:
    noisy, clean = probes.fixed_over_batch(H[n])
    left[f"{name[n]}: noisy"] = (noisy, plots.color(n), "-", "o")
    left[f"{plots.label(n)}: clean"] = (clean, plots.color(n), "--", "s")
    for mode, ls, mk in (("batch", "-", "o"), ("batch_fixed", "-.", "^")):
        right[f"{plots.label(n)}, {MODE[mode]}"] = (
            probes.medians(H[n], mode).ratio,
            plots.color(n),
            ls,
            mk,
        )
for ax, cur in zip(axes, (left, right)):
    plot_gradients.probe_curves(ax, ep, cur)
axes[0].axhline(1.0, color="grey", lw=0.8, ls=":", label="held fixed = exact (ratio 1)")
axes[0].set(
    xlabel="epoch",
    ylabel="norm, statistics held fixed / exact norm\n(median over probe samples)",
    title=f"per sample ({probes.probe_counts(H['bn'], 'batch')} per seed)",
)
axes[1].set(
    xlabel="epoch",
    ylabel="median noisy / median clean norm",
    yscale="log",
    title="noisy/clean ratio under both definitions",
)
plots.plain_log_axis(axes[1])
fig.tight_layout()
for ax in axes:
    plots.legend_below(ax, title=BARS, title_fontsize=7)
run.figure(fig, "fixed_statistics")

# %% [markdown]
# ## Figure 5: which parameters carry the noisy samples' gradient
# The exact `"batch"` norm split by parameter group (`bnpaper.grads`): median noisy / median
# clean norm of each group, per model. The theory says outliers drive the growth of gamma; a
# noisy/clean ratio on gamma above the one on the weights says that noisy samples push on gamma
# harder than on the rest, relative to clean samples (the norm does not say in which direction).

# %%
fig, axes = plots.panels(len(norms), 3.8, 3.4)
plot_gradients.group_ratio_panels(
    axes,
    ep,
    {name[n]: {g: probes.group_ratio(H[n], g) for g in probes.groups(H[n][0])} for n in norms},
    f"median noisy / median clean norm\n{MODE['batch']}",
)
fig.tight_layout()
plots.figure_legend(fig, axes, BARS)
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
per_seed = {n: probes.after_init(probes.medians(H[n], "batch").ratio, ep) for n in norms}
ratio = {n: stats.t_mean(per_seed[n]) for n in norms}
gap = stats.t_paired_diff(per_seed["bn"], per_seed["none"])
common = {"clean_test_acc": acc, "dataset": dataset, "budget": budget, "corruption": corruption}
rows = [
    claims.judge(
        "02.noisy_vs_clean",
        ratio["bn"],
        **common,
        unit="median noisy / median clean gradient norm (batch definition)",
    ),
    claims.judge(
        "02.bn_vs_none",
        gap,
        acc_gap=acc["bn"] - acc["none"],
        **common,
        unit="BN minus no-BN, noisy/clean median norm ratio",
    ),
]
summary = probes.summary(H)
rows = claims.holm(rows)  # Holm's correction within each family of this run's rows
run.save(
    {
        "claims": rows,
        **summary,
        "memorization_final": mem,
        "key_figures": notebook.figure_paths(run, ["median_norms", "noisy_clean_ratio"]),
    }
)

# %%
# NBVAL_CHECK_OUTPUT
print(
    f"Gradient dynamics on {dataset} ({arch}, {corruption}, {noise_frac:.0%} noisy, {len(seeds)} seeds, "
    f"{epochs} epochs, budget {budget})"
)
print(
    "Paper: noisy samples' per-sample gradient norms shift much higher than clean ones under BN, "
    "and higher than in no-BN models."
)
for n in norms:
    r = ratio[n]
    print(
        f"- {plots.label(n)}: median noisy/clean norm ratio {r.value:.1f} [{r.lo:.1f}, {r.hi:.1f}] "
        f"(clean test acc {acc[n]:.2f}, final memorization {mem[n]:.2f})"
    )
for c in rows:
    print(
        f"- {c['claim']}: {c['measured']:+.1f} [{c['lo']:+.1f}, {c['hi']:+.1f}] -> {c['verdict']}"
    )
for n in norms:
    by = summary["ratio_by_group"][n]
    print(
        f"- {plots.label(n)}, noisy/clean ratio by parameter group: "
        + ", ".join(f"{g} {v['value']:.1f}" for g, v in by.items())
    )
for n in bn_like:
    d, rf = summary["fixed_over_batch_median"][n], summary["ratio_batch_fixed"][n]
    print(
        f"- {plots.label(n)} with the batch statistics held fixed (the theory's simplification): "
        f"per-sample norms are a median {d['noisy']:.1f}x (noisy) / {d['clean']:.1f}x (clean) "
        f"their 'batch' norms; noisy/clean ratio {rf['value']:.1f} [{rf['lo']:.1f}, {rf['hi']:.1f}]"
    )
