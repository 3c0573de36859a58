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
# # 3. Privacy leakage: are BN models more exposed to membership inference (LiRA)?
#
# **The paper's claim.** Attacked with LiRA, the likelihood-ratio attack of Carlini et al.
# (IEEE S&P 2022), BN models consistently have a higher attack AUC; with 1% and 5% outlier
# mixes BN raises the AUC by *at least 3 and 4 points* respectively; the trend holds on clean
# data too (overall increase 3-5 points).
#
# **What this notebook measures.** One pool of N examples per (outlier mix, seed), with a share of
# injected outliers (label flips or OOD images). M shadow models per norm train on the halves given by one
# balanced, seeded keep matrix (every example IN for exactly M/2 models); all norms (and the controls, if
# in `norms`: GroupNorm, a learned gamma without batch coupling; BN with gamma fixed at 1, the reverse)
# use the *same* keep matrix: every comparison is paired. Each model is in turn the target and the other
# M-1 are its shadows. LiRA online/offline (per-example, fixed variance), loss attack, RMIA: AUC, balanced
# accuracy, TPR at 1%/0.1% FPR, on all examples and outliers, beside clean test accuracy and train-test gap.
#
# **Rare samples** (the paper's third kind): per seed one more pool where one class makes up only
# `rare_share` of it, far below its natural share 1/classes; LiRA on its members.
#
# **Data size.** Our pools hold thousands of images, the paper's presumably whole training sets
# (50,000-60,000; it gives no size): does the gap shrink over the clean pools of `size_sweep`?
#
# **BN semantics.** Queries use eval mode (running statistics); `bn_query_mode="train-batch"`
# normalizes each query batch with its own statistics (an ablation, on a copy of the model).
#
# **Scale.** `papermill notebooks/03_lira.ipynb out.ipynb -p dataset cifar10` runs `params/cifar10.yaml`;
# `-p executor dask://host:port` spreads the shadows over a Dask cluster (README); `-p device cuda`.
#
# **The reference run's outputs:** [figures](../figures/03_lira/fashion_mnist/) · [this notebook,
# executed](../figures/03_lira/fashion_mnist/03_lira.html) (static HTML) · [report](../figures/REPORT.md).

# %% tags=["parameters"]
dataset = "fashion_mnist"  # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"  # ci | quick | paper: which params/<budget>.yaml applies
arch = "lenet"  # lenet | resnet20 | resnet18 | densenet
norms = ["bn", "none"]  # must include "bn" and "none"; "gn", "bn_noaffine" as controls
outlier_frac = [0.0, 0.01, 0.05]  # outlier mixes (share of the pool); the paper: 0, 0.01, 0.05
outlier_kind = "flip"  # flip (label flipped to another class) | ood (foreign images, random labels)
ood_source = "digits"  # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
n_train = 4000  # pool size N (each shadow trains on N/2 of it)
n_test = 1000  # clean test images: test accuracy and RMIA's population samples
n_shadows = 16  # models per norm and pool (even); each is in turn the target
epochs = 15  # training epochs per shadow model
batch_size = 64  # SGD mini-batch size
lr = 0.05  # peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4  # L2 weight decay
augment = "auto"  # random crop + mirror in training and queries; auto: on for CIFAR
seeds = [0]  # one pool (data subset, outliers, keep matrix) per seed
executor = "inprocess"  # inprocess | process | process:N | dask://host:port
trainer = "auto"  # auto (packed LeNets, plain otherwise) | plain | packed
pack_size = 8  # LeNet shadows trained together as one packed model
bn_query_mode = "eval"  # eval (running statistics) | train-batch (ablation)
sigma_floor = 1e-3  # lower bound on LiRA's fitted standard deviations (phi units)
n_boot = 500  # bootstrap resamples for intervals
rare_pool = True  # also one pool per seed with a rare class (LiRA on its members)
rare_share = 0.02  # the rare class's share of that pool, in (0, 1/classes]
rare_class = -1  # which class is rare; -1: a seeded choice per seed
download = False  # allow torchvision to download the dataset if it is missing
device = "auto"  # auto (a GPU when torch sees one, else the CPU) | cpu | cuda
size_sweep = [
    500,
    1000,
    2000,
    4000,
]  # clean pool sizes N for the delta-AUC vs N ([]: skip); N of n_train: reused

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook

run = notebook.start(globals(), "03_lira")  # noqa: E702

# %% [markdown]
# ## Shadow models
# For every (outlier mix, seed), and per seed for the pool with a rare class: one pool, one keep
# matrix, `n_shadows` models per norm (LeNets trained `pack_size` at a time as one packed model).

# %%
# NBVAL_IGNORE_OUTPUT
import time
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display
from bnpaper import claims, data, exposure, memorization, mia, plot_lira, plots, units

plots.use_style()
ds, t0 = data.load_dataset(dataset, download=download), time.time()
masks = {
    (m, s): units.lira_split(ds, run.params, m, s).mask.numpy() for m in outlier_frac for s in seeds
}
pools = {(m, s, n): units.lira_pool(ds, run.params, m, s, n) for m, s in masks for n in norms}
rare_masks = {
    s: units.lira_split(ds, run.params, "rare", s).mask.numpy() for s in seeds if rare_pool
}
rare = {(s, n): units.lira_pool(ds, run.params, "rare", s, n) for s in rare_masks for n in norms}
print(f"{(len(pools) + len(rare)) * n_shadows} shadow models ready in {time.time() - t0:.0f} s")

# %% [markdown]
# ## Attacks
# phi = z_y - logsumexp_{j != y} z_j (float64); per target: four LiRA variants, the loss attack
# and RMIA (online, population = test images), on all examples, the outliers and the rest.

# %%
scores = {key: mia.pool_scores(pool, sigma_floor) for key, pool in pools.items()}
groups = lambda mix, seed: {
    "all": np.ones_like(masks[mix, seed]),
    **(
        {"outliers": masks[mix, seed], "inliers": ~masks[mix, seed]}
        if masks[mix, seed].any()
        else {}
    ),
}
metrics = {
    key: {a: mia.evaluate_targets(s[a], pools[key].keep, groups(*key[:2])) for a in mia.ATTACKS}
    for key, s in scores.items()
}
mean_over = lambda mix, norm, field: float(
    np.mean([getattr(pools[mix, s, norm], field).mean() for s in seeds])
)
acc = {mix: {n: mean_over(mix, n, "test_acc") for n in norms} for mix in outlier_frac}
gap = {mix: {n: mean_over(mix, n, "gap") for n in norms} for mix in outlier_frac}

# %% [markdown]
# ## Table: attack success and utility
# Mean over targets with a 95% bootstrap interval over targets only (optimistic: targets share
# shadows). TPR at an FPR below 1/(non-members) is not resolvable (n/r). Clean test accuracy
# and the train-test gap are means over the same models.

# %%
table, md = exposure.attack_table(
    metrics, pools, groups, outlier_frac, norms, seeds, acc, gap, n_boot
)
display(Markdown(md))

# %% [markdown]
# ## Paired BN - no-BN difference in LiRA AUC
# Online LiRA (the paper's attack), AUC points, hierarchical bootstrap over targets and examples.
# The paper's "at least 3 / 4 points" at 1% / 5% needs the whole interval above it; other mixes
# and the outliers, for which the paper gives no number, are tested for direction (claims.yaml).

# %%
deltas = exposure.online_deltas(
    scores, pools, groups, outlier_frac, seeds, n_boot
)  # all pools, one bootstrap
paper = {m: claims.claim(claims.lira_claim_id(m, "all")) for m in outlier_frac}
fig, ax = plt.subplots(figsize=(6.4, 3.8))
plot_lira.delta_auc_points(
    ax,
    outlier_frac,
    deltas,
    {m: c.get("threshold") for m, c in paper.items()},
    claims.claim("03.auc.mix0.all")["paper_range"],
    acc,
    f"online LiRA, {n_shadows} models per norm, {len(seeds)} pool(s) of {n_train}; 95% intervals",
)
fig.tight_layout()
run.figure(fig, "delta_auc")

# %% [markdown]
# ## Figure: log-log ROC curves
# Online LiRA at the largest mix, every target's scores pooled into one curve; the legend gives
# the mean per-target AUC and the models' clean test accuracy.

# %%
mix_hi = max(outlier_frac)
rocs = exposure.pooled_rocs(scores, pools, groups, mix_hi, seeds, norms, table, acc)
fig, axes = plots.panels(len(rocs), 4.4, 4.6)
for ax, (group, curves) in zip(axes, rocs.items()):
    n_ex, n_out = int(groups(mix_hi, seeds[0])[group].sum()), int(masks[mix_hi, seeds[0]].sum())
    plots.roc_loglog(
        ax,
        curves,
        f"{'all examples' if group == 'all' else 'outliers only'}: {n_ex} examples "
        f"({n_out} outliers)\ncurve: {n_shadows} targets pooled; AUC: mean per target",
    )
fig.tight_layout()
run.figure(fig, "roc_loglog")

# %% [markdown]
# ## Figure: memorization scores and utility
# Left: Feldman-Zhang memorization mem(i) = P[correct | IN] - P[correct | OUT] from the same
# pools (largest mix), inliers and outliers apart. Right: clean test accuracy against the
# train-test gap of every model.

# %%
mem = {
    n: np.concatenate(
        [
            mia.memorization_score(pools[mix_hi, s, n].correct, pools[mix_hi, s, n].keep)
            for s in seeds
        ]
    )
    for n in norms
}
out_mask = np.concatenate([masks[mix_hi, s] for s in seeds])
fig, axes = plots.panels(3, 4.2, 3.6)
plot_lira.memorization_hists(axes[:2], mem, out_mask, acc[mix_hi], f"{mix_hi:.0%} outliers")
plot_lira.accuracy_vs_gap(
    axes[2],
    {
        f"{plots.label(n)}, {m:.0%} outliers": (
            np.concatenate([pools[m, s, n].gap for s in seeds]),
            np.concatenate([pools[m, s, n].test_acc for s in seeds]),
            plots.color(n),
            "os^v"[i % 4],
        )
        for n in norms
        for i, m in enumerate(outlier_frac)
    },
    f"every model ({len(pools) * n_shadows})",
)
fig.tight_layout()
run.figure(fig, "memorization_utility")

# %% [markdown]
# ## Rare samples: LiRA on a rare class
# The pools with a rare class (`rare_share` of the pool, each member IN for half of the models):
# online LiRA's AUC on its members, on all examples and on the rest, BN vs no-BN paired on the same
# targets (hierarchical bootstrap), beside memorization scores, clean test accuracy, train-test gap.

# %%
if rare_pool:
    RX = exposure.rare_exposure(rare, rare_masks, norms, seeds, sigma_floor, n_boot)
    display(Markdown(RX["table"]))
    fig, axes = plots.panels(2, 4.8, 4.8)
    for ax, g in zip(axes, ("all", "rare")):
        plots.roc_loglog(
            ax,
            RX["curves"][g],
            f"{'all examples' if g == 'all' else 'rare members'} ({RX['n'][g]}) of "
            f"the pool(s) with a rare class\nBN - no-BN: {RX['delta'][g].fmt(1)} AUC points\n"
            f"curve: {n_shadows} targets pooled; AUC: mean per target",
        )
    fig.tight_layout()
    run.figure(fig, "rare_roc")

# %% [markdown]
# ## Data size: does the delta-AUC close toward the paper's 3-5 points as N grows?
# Our pools hold thousands of examples, the paper's (presumably) whole training sets. Per N in `size_sweep`,
# clean pools (no injected outliers; at N = `n_train` the main clean pools) of BN and no-BN models
# trained with the same recipe (the same epochs: a smaller pool also trains fewer steps); online
# LiRA's paired delta-AUC over every seed's pool; a weighted line on log2 N gives the change per
# doubling and, labelled as the extrapolation it is, the value at the paper's N.

# %%
if size_sweep:
    SW = exposure.size_sweep(
        exposure.size_pools(ds, run.params, pools), run.params, sigma_floor, n_boot
    )
    display(Markdown(SW["table"]))
    fig = plot_lira.size_sweep_figure(
        SW,
        claims.claim("03.auc.mix0.all")["paper_range"],
        f"online LiRA, {n_shadows} "
        f"models per norm and N,\n{len(seeds)} pool(s) per N; 95% intervals",
    )
    fig.tight_layout()
    run.figure(fig, "delta_auc_vs_size")
    display(Markdown("**Reading.** " + SW["reading"]))

# %% [markdown]
# ## Verdict
# Each delta-AUC judged by its claim next to utility (Holm's correction; the exploratory size trend and
# controls apart): a "reproduced" becomes *inconclusive* when BN's (or the control's) clean test accuracy
# exceeds no-BN's by more than the tolerance (no-BN may leak less as it learned less).

# %%
rows = [
    claims.judge(
        claims.lira_claim_id(mix, group),
        e,
        acc_gap=acc[mix]["bn"] - acc[mix]["none"],
        unit="AUC points, BN minus no-BN (online LiRA)",
        mix=f"{mix:.0%}",
        clean_test_acc=acc[mix],
        train_test_gap=gap[mix],
        dataset=dataset,
        budget=budget,
        outlier_frac=mix,
        subgroup=group,
    )
    for (mix, group), e in deltas.items()
    if group != "inliers"
]
rows += [
    claims.judge(
        cid,
        RX["delta"][g],
        acc_gap=RX["acc"]["bn"] - RX["acc"]["none"],
        share=f"{rare_share:.0%}",
        subgroup=g,
        unit="AUC points, BN minus no-BN (online LiRA)",
        clean_test_acc=RX["acc"],
        train_test_gap=RX["gap"],
        dataset=dataset,
        budget=budget,
    )
    for g, cid in (("rare", "03.auc.rare"), ("all", "03.auc.rare.all"))
    if rare_pool
]
if size_sweep:  # "falls": the estimate is minus the slope, AUC points lost per doubling of N
    rows.append(
        claims.judge("03.size.trend", SW["fall"], dataset=dataset, budget=budget, **SW["row"])
    )
rows += exposure.control_rows(
    scores,
    pools,
    groups,
    outlier_frac,
    seeds,
    norms,
    n_boot,
    acc,
    gap,
    dataset=dataset,
    budget=budget,
)
rows = claims.holm(rows)  # Holm's correction within each family of this run's rows
run.save(
    {
        "claims": rows,
        "table": table,
        "rare": RX["results"] if rare_pool else None,
        "delta_auc": {f"{m}/{g}": e.as_dict() for (m, g), e in deltas.items()},
        "memorization_score": {
            n: {
                g: float(mem[n][m].mean()) if m.any() else None
                for g, m in (("inliers", ~out_mask), ("outliers", out_mask))
            }
            for n in norms
        },
        "per_model": exposure.per_model(pools),
        "size_sweep": SW["results"] if size_sweep else None,
        "key_figures": notebook.figure_paths(
            run,
            ["roc_loglog", "delta_auc"]
            + ["rare_roc"] * rare_pool
            + ["delta_auc_vs_size"] * bool(size_sweep),
        ),
    }
)

# %%
# NBVAL_CHECK_OUTPUT
print(
    f"LiRA on {dataset} ({arch}, {outlier_kind} outliers, {n_shadows} models per norm, "
    f"{len(seeds)} seed(s), {epochs} epochs, budget {budget})"
)
for c in rows:
    accs = ", ".join(f"{plots.label(n)} {a:.2f}" for n, a in c["clean_test_acc"].items())
    print(
        f"- {c['claim']}: paper {c['paper']}; measured {c['measured']:+.1f} [{c['lo']:+.1f}, "
        f"{c['hi']:+.1f}] points; clean test acc. {accs}; {c['verdict']}"
        + (f" ({c['magnitude']})" if c["magnitude"] else "")
    )
print(
    *[
        f"- controls, {x}"
        for x in memorization.controls_reading(rows, "03.control.", "case", "the attack's AUC")
    ],
    sep="\n",
    end="",
)
