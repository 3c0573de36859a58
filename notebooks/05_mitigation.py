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
# # 5. Mitigation: does bounding gamma/sigma reduce memorization while keeping utility?
# *Reference run:* [figures](../figures/05_mitigation/fashion_mnist/) · [this notebook executed](../figures/05_mitigation/fashion_mnist/05_mitigation.html) · [report](../figures/REPORT.md)
#
# **The paper's claim.** BN multiplies an outlier's per-step margin growth by (gamma/sigma)^2
# (notebook 04). A **gamma/sigma regularizer** that bounds the ratio during training *"reduces
# memorization of the corrupted subsets substantially while keeping clean-data performance"*.
#
# **What this notebook measures.** On label-flipped and OOD-corrupted data, the same
# architecture with BN, with BN + the regularizer and without BN, on the *same* corrupted subset
# from the same seed: memorization (accuracy on the corrupted samples w.r.t. their corrupted
# labels) beside clean test accuracy. The regularizer (`mitigation.GammaSigmaRegularizer`) adds
#
# $$\lambda \sum_{\text{BN channels } c} \operatorname{relu}\!\left(\frac{|\gamma_c|}{\sigma_c} - \tau\right)^2,
# \qquad \sigma_c = \sqrt{\operatorname{Var}_{\text{batch}}[x_c] + \epsilon}$$
#
# to the loss (sigma of the current batch, BN's own normalizer: differentiable in gamma *and* in
# the layers before BN); the alternative `GammaSigmaProjection` clips |gamma_c| <= tau * sigma_c
# (running statistics) after every SGD step. Then a sweep, gamma/sigma before and after, and LiRA.

# %% tags=["parameters"]
dataset = "fashion_mnist"        # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"                 # ci | quick | paper: which params/<budget>.yaml applies
arch = "lenet"                   # lenet | resnet20 | resnet18 | densenet
corruption = ["flip", "ood"]     # "flip", "ood", or both as a list
noise_frac = 0.1                 # share of training samples corrupted, in (0, 1)
ood_source = "digits"            # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
n_train = 800                    # training samples drawn from the training set (seeded)
n_test = 500                     # clean test samples used for test accuracy
epochs = 12                      # training epochs
seeds = [0, 1, 2]                # seeds of the BN / BN+regularizer / no-BN comparison (paired)
batch_size = 64                  # SGD mini-batch size
lr = 0.05                        # peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4              # L2 weight decay (also on gamma)
augment = False                  # random crop + flip (CIFAR)
headline_lam = 0.01              # lambda of the regularizer the verdict is about (fixed in advance, not taken from the sweep)
headline_tau = 1.0               # tau (bound on gamma/sigma) of the headline regularizer (fixed in advance)
sweep = [[0.001, 1.0]]           # sweep: penalty [lambda, tau] pairs
projection_taus = []             # sweep: bounds tau of the hard projection ([] to skip)
sweep_seeds = [0]                # seeds used for the sweep (a subset of seeds)
lira = True                      # run the LiRA section (shadow models with and without the regularizer)
lira_corruption = "flip"         # corruption of the LiRA pool: flip | ood | none
lira_n = 600                     # LiRA pool: examples; every shadow trains on half of them
lira_shadows = 8                 # shadow models per variant (each is in turn the target)
lira_epochs = 10                 # training epochs of each shadow model
lira_variant = "online_fixed"    # online | online_fixed | offline | offline_fixed (fixed: few shadows)
download = False                 # allow torchvision to download the dataset if it is missing

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook; run = notebook.start(globals(), "05_mitigation")  # noqa: E702

# %% [markdown]
# ## The experiment
# Per (corruption, seed) one corrupted subset on which every variant trains from the same seed:
# differences are *paired*. The headline regularizer (`headline_lam`, `headline_tau`: lambda =
# 0.01, tau = 1, the bound the theory names) is fixed in advance, runs on every seed, and is the
# only one judged; the sweep (`sweep_seeds`, also evaluation seeds) describes the trade-off and
# selects nothing. Every model is a cached unit (`units.trained`).

# %%
# NBVAL_IGNORE_OUTPUT
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display
from bnpaper import claims, data, mitigation, plots, train, units

plots.use_style()
ds = data.load_dataset(dataset, download=download)
V, MC = mitigation.Variant, mitigation.MitigationConfig
BN, NOBN, HEAD = V("bn"), V("none"), V("bn", MC("penalty", headline_lam, headline_tau))
MAIN = [BN, HEAD, NOBN]                                   # the comparison the verdict is about
SWEEP = [V("bn", MC("penalty", lam, tau)) for lam, tau in sweep] + \
        [V("bn", MC("projection", tau=tau)) for tau in projection_taus]
ALL = list(dict.fromkeys(MAIN + SWEEP))
runs = {}  # (corruption, variant name, seed) -> TrainResult
for corr in corruption:
    for seed in seeds:
        split = data.make_split(ds, n_train, corr, noise_frac, seed, ood_source, n_test)
        for v in MAIN + (SWEEP if seed in sweep_seeds else []):
            cfg = train.TrainConfig(arch=arch, norm=v.norm, epochs=epochs, batch_size=batch_size,
                                    lr=lr, weight_decay=weight_decay, augment=augment, seed=seed)
            if (corr, v.name, seed) not in runs:
                runs[corr, v.name, seed] = units.trained(split, cfg, mitigation=v.mit,
                                                         desc=f"{corr} {v.name} seed {seed}")
hist = lambda corr, v, use=seeds: [runs[corr, v.name, s].history for s in use]  # noqa: E731
final = lambda corr, v, key: train.curves(hist(corr, v), key)[:, -1]  # noqa: E731  (one per seed)
ep = np.array(runs[corruption[0], BN.name, seeds[0]].history["epoch"])
TITLE = {"flip": "label flips", "ood": "OOD samples"}
print(f"{len(runs)} models ready")

# %% [markdown]
# ## Figure 1 and table: memorization and utility
# Top: accuracy on the corrupted samples w.r.t. their *corrupted* labels (dotted: chance, 1/classes);
# bottom: clean test accuracy of the same models; mean over seeds, band = min..max over seeds; the
# legend gives each model's final values (the table's). The table adds mean memorization over
# training (speed and strength), the flipped samples' accuracy on their *true* labels (n/a for OOD
# samples: theirs is the replaced image's) and clean train accuracy, over each variant's seeds.

# %%
summary = {f"{c}/{v.name}": mitigation.summarize(hist(c, v, seeds if v in MAIN else sweep_seeds), c)
           for c in corruption for v in ALL}
fig, axes = plt.subplots(2, len(corruption), figsize=(4.8 * len(corruption), 6.4), squeeze=False, sharex=True)
for j, corr in enumerate(corruption):
    plots.memorization_column(axes[:, j], ep, {mitigation.curve_label(v.label, summary[f"{corr}/{v.name}"]):
                                               (train.curves(hist(corr, v), "noisy_acc"),
                                                train.curves(hist(corr, v), "test_acc"), v.color) for v in MAIN},
                              f"{TITLE[corr]}: {noise_frac:.0%} of {n_train} training samples corrupted", ds.n_classes)
fig.tight_layout()
run.figure(fig, "memorization_curves")
display(Markdown(mitigation.summary_table(summary, ALL)))

# %% [markdown]
# ## Figure 2: the utility/memorization trade-off
# One point per variant, mean over every seed it trained on (`seeds` for the three models of the
# verdict, `sweep_seeds` for the other sweep points; error bars: the range over seeds): final
# memorization against clean test accuracy, up and to the left is better. Circles: the penalty
# (lambda, tau); squares: the projection (tau). results.json's `tradeoff`: means over `sweep_seeds`.

# %%
tradeoff = mitigation.sweep_table(runs, corruption, ALL, sweep_seeds)
fig, axes = plots.panels(len(corruption), 4.8, 3.8)
for ax, corr in zip(axes, corruption):
    pts = mitigation.tradeoff_points(runs, corr, ALL)
    plots.tradeoff(ax, [pts[v.name] | {"family": v.family, "note": v.params + " (judged)" * (v == HEAD),
                                       "color": plots.color(v.color), "kind": v.mit.method.replace("none", "base")}
                        for v in ALL], f"{TITLE[corr]}: mean over seeds, bars: range over seeds")
fig.tight_layout()
run.figure(fig, "tradeoff")

# %% [markdown]
# ## Figure 3: gamma/sigma before and after
# Per-channel |gamma_c| / sqrt(running_var_c + eps) of every BN layer after training, pooled over
# layers and seeds (dashed: tau; the paper reports gamma/sigma > 1 in most channels), with clean
# test accuracy in the legend. BN's output ignores the scale of the weights before it, so the
# penalty can be met by a smaller gamma *or* a larger sigma (larger pre-BN weights, which also
# slows their learning): the table shows which.

# %%
fig, axes = plots.panels(len(corruption), 4.8, 4.0)
gs_summary = {}
for ax, corr in zip(axes, corruption):
    scales = {v: mitigation.channel_scales([runs[corr, v.name, s] for s in seeds], ds) for v in (BN, HEAD)}
    gs_summary |= {f"{corr}/{v.name}": mitigation.scale_summary(g, sg, headline_tau)
                   for v, (g, sg, _) in scales.items()}
    acc = {v: summary[f"{corr}/{v.name}"]["clean_test_acc"] for v in scales}
    plots.log_histograms(
        ax, {mitigation.scale_label(v.label, r, len(seeds), acc[v]): (r, plots.color(v.color))
             for v, (_, _, r) in scales.items()}, f"{TITLE[corr]}: BN channels of every layer and seed",
        r"$|\gamma_c| / \sigma_c$ per channel ($\sigma_c$ from the running variance)", "channels per bin",
        vlines=mitigation.scale_lines(headline_tau), zero_note=r"{n} channels with $\gamma$ = 0 not shown")
fig.tight_layout()
run.figure(fig, "gamma_sigma")
display(Markdown(mitigation.scale_table(gs_summary, ALL)))

# %% [markdown]
# ## Membership inference with and without the regularizer (LiRA)
# Optional (`lira = True`). One pool from the `lira_corruption` split and one balanced keep
# matrix, shared by BN and BN + regularizer with the same shadow seeds (*paired*); each shadow in
# turn is the target of the others (leave-one-out), queries in eval mode. Both pools train one
# model at a time (`trainer="plain"`; the packed trainer has no regularizer hook), so the
# regularizer is their only difference.

# %%
# NBVAL_IGNORE_OUTPUT
lira_out = None
if lira:
    pool = data.make_split(ds, lira_n, lira_corruption, noise_frac, 10_000 + seeds[0], ood_source, n_test)
    base = train.TrainConfig(arch=arch, norm="bn", epochs=lira_epochs, batch_size=batch_size,
                             lr=lr, weight_decay=weight_decay, augment=augment)
    pools = {v.name: units.shadow_pool(pool, base, lira_shadows, seeds[0], mitigation=v.mit,
                                       trainer="plain") for v in (BN, HEAD)}
    groups = mitigation.example_groups(pool.mask.numpy())         # all, corrupted, clean
    lira_out = mitigation.compare_lira(pools, lira_variant, groups, BN.name, HEAD.name)
    ls = lira_out.summary
    display(Markdown(f"LiRA ({lira_variant}, {lira_shadows} shadows, mean over targets)\n\n"
                     + mitigation.lira_table(ls, [BN, HEAD])))
    fig, ax = plt.subplots(figsize=(5.4, 5.4))
    plots.roc_loglog(ax, {mitigation.lira_labels(lira_out, (BN, HEAD))[v.name]: (*lira_out.roc(v.name), plots.color(
        v.color)) for v in (BN, HEAD)}, mitigation.lira_title(lira_out, lira_variant, lira_shadows, BN.name,
                                                             HEAD.name, claims.acc_tolerance("05")))
    fig.tight_layout()
    run.figure(fig, "lira_roc")

# %% [markdown]
# ## Verdict
# Tests fixed in advance in `bnpaper/claims.yaml` (`05.*`), judged by `claims.judge`.
# **"Reduces memorization substantially"**: per seed, the share of BN's final memorization removed,
# 1 - memorization(BN + regularizer) / memorization(BN); mean over seeds, 95% Student-t interval.
# It must lie above 0 with the mean >= the claim's `min_effect` (a quarter). **"Keeping clean-data
# performance"**: a "reproduced" turns "inconclusive" if the regularizer costs more clean test
# accuracy than the tolerance (a model that learns less also memorizes less). **LiRA**: the paired
# change in AUC, BN minus BN + regularizer, all pool examples (bootstrap over targets and examples).

# %%
rows, tol = [], claims.acc_tolerance("05")
for corr in corruption:
    acc = {v.name: summary[f"{corr}/{v.name}"]["clean_test_acc"] for v in MAIN}
    cost = acc[BN.name] - acc[HEAD.name]                       # what the regularizer costs
    mem = {v: final(corr, v, "noisy_acc") for v in (BN, HEAD)}
    rows.append(claims.judge(
        f"05.reduction.{corr}", mitigation.reduction(mem[BN], mem[HEAD]), acc_gap=cost,
        unit="share of BN's final memorization removed, 1 - (BN+regularizer)/BN, per seed",
        clean_test_acc=acc, dataset=dataset, budget=budget, corruption=corr, acc_cost=cost,
        acc_tolerance=tol, regularizer=HEAD.mit.as_dict(), **mitigation.paired_changes(
            mem[BN], mem[HEAD], final(corr, BN, "test_acc"), final(corr, HEAD, "test_acc"))))
if lira:
    acc = {v.name: ls[v.name]["shadow_test_acc"] for v in (BN, HEAD)}      # the shadows'
    cost = acc[BN.name] - acc[HEAD.name]
    rows.append(claims.judge(
        "05.lira", lira_out.delta["all"], acc_gap=cost, unit=f"LiRA ({lira_variant}) AUC, BN minus "
        "BN+regularizer", clean_test_acc=acc, dataset=dataset, budget=budget, acc_cost=cost,
        acc_tolerance=tol, corruption=lira_corruption, regularizer=HEAD.mit.as_dict(),
        n_shadows=lira_shadows))
run.save({"summary": summary, "tradeoff": tradeoff, "gamma_sigma": gs_summary,
          "lira": lira_out.summary if lira else {}, "claims": rows,
          "key_figures": notebook.figure_paths(run, ["tradeoff", "memorization_curves"]),
          "histories": {f"{c}/{n}/{s}": r.history for (c, n, s), r in runs.items()}})

# %%
# NBVAL_CHECK_OUTPUT
print(f"Mitigation on {dataset} ({arch}, {noise_frac:.0%} corrupted, {len(seeds)} seeds, {epochs} epochs, "
      f"budget {budget}); regularizer lambda={headline_lam:g}, tau={headline_tau:g}; tolerance {tol:.3f}")
FAMILY = {v.name: v.family for v in MAIN}
for c in rows:
    need = claims.claim(c["id"])["min_effect"]
    accs = ", ".join(f"{FAMILY[n]} {a:.3f}" for n, a in c["clean_test_acc"].items())
    what = (f"{c['corruption']}: share of BN's memorization removed {c['measured']:+.0%} "
            f"[{c['lo']:+.0%}, {c['hi']:+.0%}] (need >= {need:.0%})" if c["id"] != "05.lira" else
            f"LiRA ({c['corruption']} pool): AUC BN - BN+reg {c['measured']:+.3f} "
            f"[{c['lo']:+.3f}, {c['hi']:+.3f}] (need >= {need:g})")
    print(f"- {what}; clean-accuracy cost {c['acc_cost']:+.3f} -> {c['verdict']}"
          f"{' (' + c['magnitude'] + ')' if c['magnitude'] else ''}; clean test acc.: {accs}")
print("Paper: the regularizer reduces memorization substantially while keeping clean-data performance.")
