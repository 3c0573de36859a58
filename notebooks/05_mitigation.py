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
# # 5. Mitigation: does bounding gamma/sigma reduce memorization while keeping utility?
# *Reference run:* [figures](../figures/05_mitigation/fashion_mnist/) ·
# [this notebook executed](../figures/05_mitigation/fashion_mnist/05_mitigation.html) ·
# [report](../figures/REPORT.md)
#
# **The paper's claim.** BN multiplies an outlier's per-step margin growth by (gamma/sigma)^2
# (notebook 04). A **gamma/sigma regularizer** that bounds the ratio during training *"reduces
# memorization of the corrupted subsets substantially while keeping clean-data performance"*.
# The regularizer (`bnpaper.GammaSigmaRegularizer`, one call per step in any training loop:
# README) adds to the loss
#
# $$\lambda \sum_{\text{BN channels } c}
# \operatorname{relu}\!\left(\frac{|\gamma_c|}{\sigma_c} - \tau\right)^2,
# \qquad \sigma_c = \sqrt{\operatorname{Var}_{\text{batch}}[x_c] + \epsilon}$$
#
# (sigma of the current batch); the projection clips |gamma_c| <= tau sigma_c (running
# statistics) after every step. **What this notebook measures**, in steps that never share
# seeds: (1) the setting (lambda, tau, penalty or projection) is *chosen* by a rule fixed in
# advance, on selection seeds and validation images held out of the training data; (2) on the
# evaluation seeds the chosen setting is judged, and the regularizer's frontier (clean accuracy
# against memorization, and against LiRA AUC, over lambda) is set beside what a practitioner
# would try instead, each baseline norm with its own learning rate; (3) the regularizer taken
# apart: does it work through gamma or through sigma, the scale of the weights feeding BN?
# (4) LiRA on pools trained with this notebook's own recipe, the pools as the unit.
#
# **Rare samples** (the paper's third kind): one class kept at `rare_share` of the training
# subset, labels true; memorization is, as in notebook 01, accuracy on its trained members minus
# on its held-out test samples. Rare is *judged only* (never chosen on): does a setting chosen on
# label flips and OOD images protect rare samples, at what cost?

# %% tags=["parameters"]
dataset = "fashion_mnist"  # mnist | fashion_mnist (offline default) | cifar10 | cifar100
budget = "quick"  # ci | quick | paper: which params/<budget>.yaml applies
arch = "lenet"  # lenet | resnet20 | resnet18 | densenet
# any of "flip", "ood", "rare" (one or a list; flip or ood needed)
corruption = ["flip", "ood", "rare"]
noise_frac = 0.1  # flip / ood: share of training samples corrupted, in (0, 1)
ood_source = "digits"  # OOD images: noise | digits | mnist | fashion_mnist | cifar10 | cifar100
rare_share = 0.02  # rare: the rare class's share of the training subset, in (0, 1/classes]
rare_class = -1  # rare: which class is rare; -1: a seeded choice per seed
n_train = 4000  # training samples of every model (a seeded subset)
n_test = 2000  # clean test images: the evaluation models' clean accuracy
# epochs of every judged model, fixed (the regularizer lowers training fit by design, so models
# are compared at equal clean test accuracy on the frontier); fair: the lr search's epoch cap
epochs = 8
seeds = [0, 1, 2]  # evaluation seeds: every reported number (paired across models)
selection_seeds = [100, 101, 102]  # selection seeds: candidates train here (disjoint from seeds)
n_val = 2000  # validation images held out of the training set (lr search and selection)
batch_size = 64  # SGD mini-batch size
protocol = "fair"  # fair (each norm its own lr, chosen on validation data) | paper (one lr)
lr_grid = [0.005, 0.0158, 0.05, 0.158, 0.5]  # fair: lrs searched per norm (5+, 1.5+ decades)
lr_seeds = [0, 1, 2]  # fair: seeds of the search (one model per norm, lr and seed)
fit_level = 0.99  # fair: a search model stops once its clean training accuracy reaches it
lr = 0.05  # paper: every norm's peak learning rate (cosine schedule, momentum 0.9)
weight_decay = 5e-4  # L2 weight decay of every model (also on gamma)
augment = False  # random crop + flip (CIFAR)
# penalty weights lambda (3 decades): frontier and candidates
lams = [1e-4, 4e-4, 1.6e-3, 6.3e-3, 2.5e-2, 1e-1]
taus = [1.0]  # penalty bounds tau of the candidates (every lambda x tau)
frontier_tau = 1.0  # tau of the frontier (one of taus)
projection_taus = [0.5, 1.0, 2.0]  # candidates: the projection at these bounds ([] for none)
# the kinds the frontier and alternatives train on (those corruption has, else its first)
frontier_corruption = ["flip"]
gamma_decays = [0.05]  # alternative: an extra L2 on the BN gammas only (its coefficient)
strong_weight_decays = [5e-3]  # alternative: a stronger global weight decay
lower_lrs = [0.25]  # alternative: BN at these multiples of its lr (the effective-lr arm)
lira = True  # LiRA with and without the chosen setting, and LiRA's frontier
# below 64 shadows Carlini et al. advise fixed variance: online_fixed | online | offline(_fixed)
lira_variant = "online_fixed"
lira_seeds = [0, 1, 2]  # one LiRA pool per seed (03's pool drawing, 05's recipe): the unit
lira_shadows = 8  # shadows per family and pool (even, 4+); 8 x 3 pools fits the quick budget
# LiRA frontier's lambdas, a subset of lams (the chosen setting is measured beside): two, so
# that 11 families x 3 pools x 8 shadows fit the quick budget (about 4 M training samples)
lira_lams = [1.6e-3, 2.5e-2]
trainer = "auto"  # auto (LeNets packed, one packed model per norm and setting) | plain | packed
download = False  # allow torchvision to download the dataset if it is missing
device = "auto"  # auto (a GPU when torch sees one, else the CPU) | cpu | cuda

# %%
# NBVAL_IGNORE_OUTPUT
from bnpaper import notebook

run = notebook.start(globals(), "05_mitigation")

# %% [markdown]
# The package's modules, one per step of the experiment, one figure style, and the dataset.

# %%
# NBVAL_IGNORE_OUTPUT
from IPython.display import Markdown, display

from bnpaper import claims, data, frontier, mitigation_claims, mitigation_lira, params, parts
from bnpaper import mitigation_text, plot_mitigation, plot_recipes, plots, reduction, selection
from bnpaper import text, variants

plots.use_style()
ds = data.load_dataset(dataset, download=download)

# %% [markdown]
# Every training subset is drawn one way: its size, the share corrupted, the source of the OOD
# images, the clean test images, and the rare class.

# %%
subsets = variants.SplitRecipe(n_train, noise_frac, ood_source, n_test, rare_share, rare_class)

# %% [markdown]
# ## Each norm's recipe
# Under the fair protocol every baseline norm gets its own learning rate, chosen before any
# judged run by the rule in `claims.yaml` (`settings.lr_selection`) on clean data and the
# `n_val` held-out images; the regularized BN models use BN's. `protocol="paper"` gives every
# norm `lr`: the paper's protocol.

# %%
# NBVAL_IGNORE_OUTPUT
norms = ["bn", "none", "gn", "bn_noaffine"]
chosen_lrs = variants.baseline_recipes(ds, run.params, norms, trainer)
lrs = {n: chosen_lrs.lr(n) for n in norms}
display(Markdown(text.recipe_table(chosen_lrs)))

# %% [markdown]
# Validation accuracy against the learning rate, one curve per norm, the chosen one ringed.

# %%
if chosen_lrs.choices is not None:
    title = f"learning-rate search: {chosen_lrs.search.n_train} clean images, {n_val} held out"
    run.figure(plot_recipes.lr_choice_figure(chosen_lrs, title), "lr_choice")

# %% [markdown]
# Every judged model trains `epochs` epochs with its norm's learning rate (BN's for the
# regularized and other BN families): a family changes only its norm, its mitigation, its weight
# decay or its learning rate. BN and no-BN are the two families every comparison starts from.

# %%
recipe = variants.evaluation_config(run.params)
bn, no_bn = variants.Variant("bn"), variants.Variant("none")

# %% [markdown]
# ## 1. The setting is chosen in advance, on held-out data
# The candidates: the penalty at every lambda and tau, and the projection at every bound.

# %%
candidates = variants.penalties(lams, taus) + variants.projections(projection_taus)

# %% [markdown]
# The candidates and plain BN train on the selection seeds, for every flip and OOD kind (never
# rare), on subsets of the training set minus `n_val` held-out validation images; their clean
# accuracy is read on the validation images, never on the test set.

# %%
# NBVAL_IGNORE_OUTPUT
selection_kinds = variants.grid_kinds(corruption)
bn_recipe = bn.config(recipe, 0, lrs["bn"])  # every BN family: BN's learning rate
selection_runs = selection.train_selection(
    ds, selection_kinds, selection_seeds, [bn, *candidates], bn_recipe, subsets, n_val, trainer
)

# %% [markdown]
# The rule written in `bnpaper/claims.yaml` (`settings.selection`) picks one candidate from
# these runs; only that one is judged.

# %%
choice = selection.select(selection_runs, selection_kinds, selection_seeds, bn, candidates)
chosen = choice.chosen
display(Markdown(mitigation_text.selection_summary(choice, n_val)))

# %% [markdown]
# ## 2. Evaluation seeds: the chosen setting, the frontier, the alternatives
# The frontier: the regularizer at every lambda, at tau = `frontier_tau`.

# %%
frontier_settings = variants.penalties(lams, [frontier_tau])

# %% [markdown]
# The alternatives a practitioner would try instead: no BN, GroupNorm, BN with gamma fixed at 1,
# extra weight decay on the gammas only, a stronger global weight decay, and BN at a lower
# learning rate (the effective-learning-rate alternative: a larger |w| lowers BN's step
# lr/|w|^2 the same way).

# %%
alternatives = [no_bn, variants.Variant("gn"), variants.Variant("bn_noaffine")]
alternatives += variants.gamma_decays(gamma_decays)
alternatives += variants.stronger_weight_decays(strong_weight_decays)
alternatives += variants.lower_lrs(lower_lrs)

# %% [markdown]
# BN, the chosen setting and no BN are judged on every corruption kind; the frontier and the
# alternatives join them on the kinds the frontier is drawn on (`frontier_corruption`).

# %%
lineup = variants.Lineup(bn, chosen, no_bn, frontier_settings, alternatives)
frontier_kinds = variants.frontier_kinds(corruption, frontier_corruption)

# %% [markdown]
# Per (corruption, evaluation seed) one subset, on which every model trains from the same seed
# (*paired*).

# %%
# NBVAL_IGNORE_OUTPUT
splits = variants.evaluation_splits(ds, corruption, seeds, subsets)
plan = variants.plan(corruption, lineup.every, lineup.judged, frontier_kinds)
runs = variants.train_grid(splits, plan, recipe, trainer=trainer, lrs=lrs)
print(f"{len(selection_runs)} selection and {len(runs)} evaluation models ready")

# %% [markdown]
# ## Figure 1 and table: memorization and utility of the chosen setting
# Top: memorization (flips, OOD: accuracy on the *corrupted* labels, dotted chance; rare: trained
# minus held-out accuracy of the class, dotted 0). Bottom: clean test accuracy; mean over the
# evaluation seeds, band = range.

# %%
figure = plot_mitigation.memorization_figure(
    runs, splits, corruption, seeds, lineup.judged, n_train, ds.n_classes
)
run.figure(figure, "memorization_curves")

# %% [markdown]
# The table splits the rare class's memorization into its parts: the accuracy of its trained
# members minus that of its held-out test samples.

# %%
judged_finals = reduction.judged_finals(runs, corruption, seeds, lineup.judged)
display(Markdown(mitigation_text.judged_table(judged_finals)))

# %% [markdown]
# ## 3. The regularizer taken apart
# The penalty lowers |gamma|/sigma by shrinking gamma or by growing sigma, the scale of the
# weights feeding BN (which lowers BN's effective step lr/|w|^2). Its parts, at the chosen
# (lambda, tau) (else the middle lambda): sigma detached (its gradient moves gamma only), gamma
# detached (it moves only the weights feeding BN), a bound on |gamma| itself; beside them the
# whole penalty and BN at a lower learning rate.

# %%
part_lam, part_tau = variants.parts_setting(chosen, lams, frontier_tau)
full = variants.full_penalty(part_lam, part_tau)
arms = [full, *variants.parts(part_lam, part_tau), *variants.lower_lrs(lower_lrs)]

# %% [markdown]
# They train on the frontier's kinds and evaluation seeds, paired with BN.

# %%
# NBVAL_IGNORE_OUTPUT
part_splits = {k: v for k, v in splits.items() if k[0] in frontier_kinds}
runs.update(variants.train_grid(part_splits, arms, recipe, "parts ", trainer, lrs))

# %% [markdown]
# Per model, mean over seeds: memorization, clean accuracy, and the medians over BN channels of
# |gamma|/sigma, sigma (batch statistics), |gamma| and the effective step lr/|w_c|^2
# (`bn_scale.scale_free`).

# %%
part_kind = frontier_kinds[0]
readings = parts.readings_table(runs, splits, part_kind, seeds, [bn, *arms])
display(Markdown(mitigation_text.parts_table(readings, {v.name: v.label for v in [bn, *arms]})))

# %% [markdown]
# ## 4. LiRA on pools of this notebook's recipe
# Notebook 03's way of drawing a pool of examples (its largest outlier mix), trained with this
# notebook's epochs and learning rates, one pool per seed of `lira_seeds`, `lira_shadows`
# shadows per family and pool. Each shadow is in turn the target of the others.

# %%
# NBVAL_IGNORE_OUTPUT
lira_comparison = lira_recipe = None
if lira:
    p03 = params.resolve("03_lira", {"dataset": dataset, "budget": budget}).values
    lira_recipe = mitigation_lira.own_recipe(p03, run.params, lira_shadows)
    mix, how = max(p03["outlier_frac"]), (lira_variant, p03["sigma_floor"])
    families = {"bn": bn, "reg": chosen, "none": no_bn}
    lira_comparison = mitigation_lira.on_own_pools(
        ds, lira_recipe, lrs, mix, lira_seeds, families, *how
    )

# %% [markdown]
# Per family and example group, LiRA's AUC and TPR at 1% FPR (mean over pools) beside the
# shadows' clean accuracy, then the ROC curves of the first pool; a lower AUC counts only at
# equal clean accuracy.

# %%
# NBVAL_IGNORE_OUTPUT
labels = {"bn": bn.label, "reg": chosen.label, "none": no_bn.label}
if lira_comparison:
    display(Markdown(mitigation_text.lira_comparison_table(lira_comparison, labels)))
    tolerance = claims.acc_tolerance("05")
    figure = plot_mitigation.lira_roc_figure(lira_comparison, labels, tolerance)
    run.figure(figure, "lira_roc")

# %% [markdown]
# **LiRA's frontier**: the same pools for BN, the lambdas of `lira_lams` and every alternative,
# the pools in place of the seeds of Figure 2.

# %%
# NBVAL_IGNORE_OUTPUT
lira_frontier = None
if lira_comparison:
    lira_lineup = variants.Lineup(
        bn, chosen, no_bn, variants.penalties(lira_lams, [frontier_tau]), alternatives
    )
    lira_frontier = mitigation_lira.own_lira_frontier(
        ds, lira_recipe, lrs, mix, lira_seeds, lira_lineup, how
    )

# %% [markdown]
# ## Figure 2 and table: the frontier, next to the alternatives
# **At equal clean accuracy**: per seed, accuracy and memorization are fitted non-increasing in
# lambda, and memorization is read where accuracy falls to the alternative's (an alternative
# more accurate than every lambda meets the regularizer's most accurate point). BN stopped early
# at no-BN's memorization, read off BN's history (an oracle stop), joins the alternatives.

# %%
frontiers = frontier.compare(runs, frontier_kinds, seeds, lineup)

# %% [markdown]
# Clean test accuracy against memorization (mean over evaluation seeds, 95% t intervals): the
# line runs from BN (lambda = 0) through every lambda, the star is the chosen setting; the last
# panel is LiRA's frontier (targets in place of seeds).

# %%
figure = plot_mitigation.frontier_figure(
    runs, seeds, frontiers, chosen, frontier_tau, lira_frontier, lira_comparison
)
run.figure(figure, "frontier")

# %% [markdown]
# The table gives every point with its interval, and each alternative beside the regularizer at
# its accuracy; the last column says how much accuracy the regularizer lacks there.

# %%
display(Markdown(mitigation_text.frontier_tables(frontiers, lira_frontier)))

# %% [markdown]
# ## Figure 3: gamma/sigma with and without the chosen setting
# Per-channel |gamma_c| / sqrt(running_var_c + eps), all BN layers and seeds (paper: > 1 in most
# channels); a bound is met by a smaller gamma *or* a larger sigma (results' `gamma_sigma`).

# %%
scales = reduction.channel_scales_by_kind(runs, splits, corruption, seeds, [bn, chosen])
figure = plot_mitigation.gamma_sigma_figure(
    scales, runs, corruption, seeds, [bn, chosen], chosen.mit.tau
)
run.figure(figure, "gamma_sigma")

# %% [markdown]
# ## Verdict
# Tests fixed in advance in `bnpaper/claims.yaml` (`05.*`), at the chosen setting on the
# evaluation seeds. **"Reduces memorization substantially"**: per seed the share of BN's
# memorization removed (95% t interval above 0, mean at least a quarter), inconclusive if it
# costs more clean accuracy than the tolerance; for the rare class (**"protects rare samples"**)
# the same rule on its train-minus-held-out gap, at the setting chosen on the other kinds.
# **LiRA**: the AUC change, BN minus the chosen setting, per pool, interval over pools.
# **Against each alternative** (no claim in the paper): its memorization (over seeds) and its
# LiRA AUC (over pools) minus the regularizer's at its accuracy; inconclusive where the
# regularizer cannot reach that accuracy. **Parts** (`05.part`, exploratory): each arm by the
# rule of `05.reduction`.

# %%
common = {"dataset": dataset, "budget": budget}
rows = mitigation_claims.verdict_rows(
    runs, corruption, seeds, lineup, frontiers, lira_comparison, lira_frontier, **common
)
tol = claims.acc_tolerance("05")
part_rows = parts.part_rows(runs, part_kind, seeds, bn, arms, tol, **common)
rows = claims.correct(rows + part_rows)  # Bonferroni at each verdict family's declared size

# %% [markdown]
# Beside the verdicts: LiRA over pools, each norm's recipe, LiRA's pool recipe and the parts'
# channel readings.

# %%
read_beside = {
    "lira": lira_comparison.summary if lira_comparison else {},
    "recipes": chosen_lrs.as_dict(),
    "lira_recipe": lira_recipe.as_dict() if lira_recipe else {},
    "parts": {"lam": part_lam, "tau": part_tau, "kind": part_kind, "readings": readings},
}

# %% [markdown]
# The run's results file holds the selection, the frontiers, gamma/sigma, LiRA, the verdict rows
# and every training history.

# %%
run.save(
    {
        "selection": choice.as_dict(),
        **frontiers.as_dict(),
        "lira_frontier": frontier.jsonable(lira_frontier or {}),
        "gamma_sigma": reduction.scale_summaries(scales, chosen.mit.tau),
        **read_beside,
        "claims": rows,
        "key_figures": notebook.figure_paths(run, ["frontier", "memorization_curves"]),
        "histories": {f"{c}/{n}/{s}": r.history for (c, n, s), r in runs.items()},
    }
)

# %% [markdown]
# The verdicts, one line each, under the run they belong to and its protocol.

# %%
# NBVAL_CHECK_OUTPUT
how = mitigation_text.protocol_words(chosen_lrs)
print(
    mitigation_text.mitigation_header(
        dataset, budget, arch, noise_frac, n_train, epochs, choice, seeds, how
    )
)
claims.show(rows)
print(mitigation_text.which_part_words(parts.which_part(part_rows, arms), part_kind))
print(mitigation_text.MITIGATION_PAPER)
