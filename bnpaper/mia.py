"""Membership inference from a pool of shadow models: scores, attacks and their metrics.

Stages (as in LiRA's reference pipeline): `shadow` trains the pool and stores logits
(N, queries, classes); here, `phi` turns logits into scores; `lira`, `loss_attack` and `rmia`
turn scores into membership scores per target; `attack_metrics`, `evaluate_targets` and
`paired_delta_auc` measure them. Every model of the pool is in turn the target and the other
M-1 models are its shadows (leave-one-out). Everything is float64 numpy; NaN/inf raise.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, logsumexp
from scipy.stats import rankdata

from .stats import Estimate, t_mean

FPRS = (0.01, 0.001)


class ScoreError(ValueError):
    """Scores or logits that are NaN or infinite, or inputs of mismatched shapes."""


class LowFPRWarning(UserWarning):
    """A TPR at an FPR below 1 / (number of non-members) cannot be resolved."""


def _finite(name: str, a: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(a)):
        bad = int(np.size(a) - np.isfinite(a).sum())
        raise ScoreError(f"{name} holds {bad} NaN/inf value(s); the model or its logits are broken")
    return a


# ---------------------------------------------------------------- scores
def phi(logits, labels) -> np.ndarray:
    """LiRA's logit-scaled confidence phi = z_y - logsumexp_{j != y} z_j, exact in float64.

    logits: (..., classes); labels: broadcastable to logits.shape[:-1] (integer classes).
    Equals log(p_y / (1 - p_y)) without ever forming p_y (no saturation at p_y -> 1).
    """
    z = _finite("logits", np.asarray(logits, dtype=np.float64))
    y = np.broadcast_to(np.asarray(labels, dtype=np.int64), z.shape[:-1])
    zy = np.take_along_axis(z, y[..., None], -1)[..., 0]
    others = z.copy()
    np.put_along_axis(others, y[..., None], -np.inf, -1)
    return zy - logsumexp(others, axis=-1)


def log_softmax_y(logits, labels) -> np.ndarray:
    """log p_y (= minus the cross-entropy loss) in float64; shapes as in `phi`."""
    z = _finite("logits", np.asarray(logits, dtype=np.float64))
    y = np.broadcast_to(np.asarray(labels, dtype=np.int64), z.shape[:-1])
    return np.take_along_axis(z, y[..., None], -1)[..., 0] - logsumexp(z, axis=-1)


# ---------------------------------------------------------------- attacks
LIRA_VARIANTS = ("online", "online_fixed", "offline", "offline_fixed")


def _norm_logpdf(x, mu, sigma):
    return -0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def _pooled_sd(var: np.ndarray, count: np.ndarray, floor: float) -> np.ndarray:
    """One sd per query (1, Q): the mean variance over the examples with at least two shadows."""
    ok = count >= 2
    pooled = np.where(ok, var, 0).sum(0, keepdims=True) / np.maximum(ok.sum(0, keepdims=True), 1)
    return np.maximum(np.sqrt(pooled), floor)


def lira(
    scores: np.ndarray, keep: np.ndarray, targets=None, sigma_floor: float = 1e-3
) -> dict[str, np.ndarray]:
    """All four LiRA variants in one pass; leave-one-out over the pool.

    scores: phi of every model on every example, (M, N, queries); keep: (M, N) bool.
    Returns {variant: (T, N)} membership scores (higher = more likely member) for the targets
    (default all M). Per query a Gaussian is fitted to the IN and OUT shadows' phi; the
    per-query log-likelihoods are averaged. "online": log N(phi; mu_in, s_in) -
    log N(phi; mu_out, s_out); "offline": one-sided log P[Z < phi], Z ~ N(mu_out, s_out);
    "_fixed": one global sigma (per query) instead of a per-example one, the mean variance over
    the examples with at least two IN (OUT) shadows; an example with a single IN (OUT) shadow
    has no variance of its own and takes that global sigma in the per-example variants too.

    Conventions, and how they differ from the official code (tensorflow/privacy,
    research/mi_lira_2021/plot.py): every model is in turn the target, the other M-1 its
    shadows (official: the last models are targets of a fixed split); mu is the mean over the
    shadows (official: the median) and the variance uses ddof=1 (official: np.std, ddof=0); the
    fixed variance is the mean of the per-example variances, each centred on its own example's
    mean (official: np.std of all IN values pooled, uncentred, and the IN value also for OUT);
    offline is the one-sided log P[Z < phi] (official: minus the two-sided log density under
    OUT); sigma is floored at `sigma_floor` (official: + 1e-30). With these aligned the scores
    equal the official code's.
    """
    s = _finite("scores", np.asarray(scores, dtype=np.float64))
    keep = np.asarray(keep, dtype=bool)
    if s.ndim == 2:
        s = s[..., None]
    m, n, _ = s.shape
    if keep.shape != (m, n):
        raise ScoreError(f"keep has shape {keep.shape}, scores need {(m, n)}")
    targets = range(m) if targets is None else targets
    out = {v: [] for v in LIRA_VARIANTS}
    for t in targets:
        sh = np.arange(m) != t
        sk, ks = s[sh], keep[sh][..., None]  # (M-1, N, Q)
        n_in, n_out = ks.sum(0), (~ks).sum(0)
        if (n_in < 1).any() or (n_out < 1).any():
            raise ScoreError("every example needs at least one IN and one OUT shadow")
        mu_in = np.where(ks, sk, 0).sum(0) / n_in
        mu_out = np.where(~ks, sk, 0).sum(0) / n_out
        var_in = np.where(ks, (sk - mu_in) ** 2, 0).sum(0) / np.maximum(n_in - 1, 1)
        var_out = np.where(~ks, (sk - mu_out) ** 2, 0).sum(0) / np.maximum(n_out - 1, 1)
        fix_in, fix_out = (
            _pooled_sd(var_in, n_in, sigma_floor),
            _pooled_sd(var_out, n_out, sigma_floor),
        )
        # a variance needs two shadows: with one IN (or OUT) shadow the example takes the pooled sd
        sd_in = np.where(n_in >= 2, np.maximum(np.sqrt(var_in), sigma_floor), fix_in)
        sd_out = np.where(n_out >= 2, np.maximum(np.sqrt(var_out), sigma_floor), fix_out)
        x = s[t]
        out["online"].append(
            (_norm_logpdf(x, mu_in, sd_in) - _norm_logpdf(x, mu_out, sd_out)).mean(-1)
        )
        out["online_fixed"].append(
            (_norm_logpdf(x, mu_in, fix_in) - _norm_logpdf(x, mu_out, fix_out)).mean(-1)
        )
        out["offline"].append(log_ndtr((x - mu_out) / sd_out).mean(-1))
        out["offline_fixed"].append(log_ndtr((x - mu_out) / fix_out).mean(-1))
    return {k: _finite(f"lira {k}", np.stack(v)) for k, v in out.items()}


def loss_attack(logp: np.ndarray, targets=None) -> np.ndarray:
    """The loss (global threshold) attack: the target's own log p_y, averaged over queries.
    logp: (M, N, queries) -> (T, N)."""
    lp = _finite("log p_y", np.asarray(logp, dtype=np.float64))
    lp = lp[..., None] if lp.ndim == 2 else lp
    targets = list(range(len(lp))) if targets is None else list(targets)
    return lp[targets].mean(-1)


def rmia(
    logp_x: np.ndarray,
    logp_z: np.ndarray,
    keep: np.ndarray,
    targets=None,
    gamma: float = 1.0,
    offline_a: float | None = None,
) -> np.ndarray:
    """RMIA (Zarifzadeh, Liu, Shokri 2024): Pr_z[ (p(x|t)/p(x)) / (p(z|t)/p(z)) > gamma ].

    logp_x: log p_y of every model on the pool (M, N, Q); logp_z: on population samples that
    no model trained on (M, Z, Q); p(.) averages the other M-1 models (online) or only the
    OUT models with the offline correction p = ((1+a) p_out + (1-a)) / 2 when `offline_a` is set
    (for x and, as population samples are OUT for every model, for z alike). 2-D inputs (M, N)
    are one query, never averaged over examples.
    """
    lx = _finite("log p_y (pool)", np.asarray(logp_x, np.float64))
    lz = _finite("log p_y (population)", np.asarray(logp_z, np.float64))
    lx, lz = (a[..., None] if a.ndim == 2 else a for a in (lx, lz))  # (M, N) -> one query
    keep = np.asarray(keep, bool)
    m = len(lx)
    if lx.ndim != 3 or lz.ndim != 3 or keep.shape != lx.shape[:2] or len(lz) != m:
        raise ScoreError(
            f"rmia needs logp_x (M, N, Q), logp_z (M, Z, Q) and keep (M, N); got "
            f"{lx.shape}, {lz.shape}, {keep.shape}"
        )
    targets = range(m) if targets is None else targets
    res = []
    for t in targets:
        sh = np.arange(m) != t
        ref_z = logsumexp(lz[sh], 0) - np.log(sh.sum())  # population: OUT for every model
        if offline_a is None:
            ref_x = logsumexp(lx[sh], 0) - np.log(sh.sum())
        else:
            out = ~keep[sh][..., None]
            w = np.where(out, 0.0, -np.inf)
            p_out = np.exp(logsumexp(lx[sh] + w, 0) - np.log(out.sum(0)))
            ref_x = np.log(0.5 * ((1 + offline_a) * p_out + (1 - offline_a)))
            ref_z = np.log(0.5 * ((1 + offline_a) * np.exp(ref_z) + (1 - offline_a)))
        rx = (lx[t] - ref_x).mean(-1)  # log ratio, (N,)
        rz = np.sort((lz[t] - ref_z).mean(-1))  # (Z,)
        res.append(np.searchsorted(rz, rx - np.log(gamma), side="left") / len(rz))
    return np.stack(res)


# ---------------------------------------------------------------- metrics
def auc(scores: np.ndarray, member: np.ndarray) -> float:
    """ROC AUC (Mann-Whitney, ties count half)."""
    s, y = np.asarray(scores, np.float64), np.asarray(member, bool)
    n1, n0 = y.sum(), (~y).sum()
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _all_thresholds(scores: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) at every distinct threshold `score >= s` (none dropped: sklearn's default
    drop_intermediate removes collinear points, which loses operating points under ties)."""
    from sklearn.metrics import roc_curve

    f, t, _ = roc_curve(
        np.asarray(member, bool), np.asarray(scores, np.float64), drop_intermediate=False
    )
    return f, t


def tpr_at_fpr(scores: np.ndarray, member: np.ndarray, fpr: float) -> float:
    """Largest TPR among thresholds whose FPR is <= `fpr` (Carlini et al.'s convention)."""
    f, t = _all_thresholds(scores, member)
    return float(t[f <= fpr + 1e-12].max())


def balanced_accuracy(scores: np.ndarray, member: np.ndarray) -> float:
    """Best balanced accuracy over thresholds: max (1 + TPR - FPR) / 2."""
    f, t = _all_thresholds(scores, member)
    return float(((1 + t - f) / 2).max())


def roc(scores: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) of the ROC curve (sklearn.metrics.roc_curve)."""
    from sklearn.metrics import roc_curve

    f, t, _ = roc_curve(np.asarray(member, bool), np.asarray(scores, np.float64))
    return f, t


def attack_metrics(
    scores: np.ndarray,
    member: np.ndarray,
    fprs=FPRS,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """AUC, balanced accuracy and TPR at each FPR of one target, each with a bootstrap interval
    over examples; `resolvable[fpr]` is False (and a LowFPRWarning is issued) where
    fpr < 1 / n_nonmembers."""
    s, y = _finite("membership scores", np.asarray(scores, np.float64)), np.asarray(member, bool)
    n0 = int((~y).sum())
    fns = {
        "auc": auc,
        "balanced_acc": balanced_accuracy,
        **{f"tpr@{f:g}": (lambda a, b, f=f: tpr_at_fpr(a, b, f)) for f in fprs},
    }
    point = {k: fn(s, y) for k, fn in fns.items()}
    rng = np.random.default_rng(seed)
    boots = {k: [] for k in fns}
    for _ in range(n_boot):
        i = rng.integers(0, len(s), len(s))
        if y[i].all() or not y[i].any():
            continue
        for k, fn in fns.items():
            boots[k].append(fn(s[i], y[i]))
    a = (1 - level) / 2
    out = {
        k: Estimate(
            v,
            float(np.quantile(boots[k], a)),
            float(np.quantile(boots[k], 1 - a)),
            len(s),
            level,
            se=float(np.std(boots[k], ddof=1)),
        )
        for k, v in point.items()
    }
    resolvable = {f: f >= 1.0 / max(n0, 1) for f in fprs}
    for f, ok in resolvable.items():
        if not ok:
            warnings.warn(
                f"TPR at FPR={f:g} is not resolvable with {n0} non-members "
                f"(needs >= {int(np.ceil(1 / f))}); treat it as 0 or use more examples",
                LowFPRWarning,
                stacklevel=2,
            )
    return {
        "estimates": out,
        "resolvable": resolvable,
        "n_members": int(y.sum()),
        "n_nonmembers": n0,
    }


@dataclass(frozen=True)
class TargetMetrics:
    """Per-target metrics (T,) per subgroup, and their mean over targets."""

    values: dict[str, dict[str, np.ndarray]]  # subgroup -> metric -> (T,)

    def mean(self, subgroup: str, metric: str) -> float:
        return float(np.mean(self.values[subgroup][metric]))


def evaluate_targets(
    scores: np.ndarray, member: np.ndarray, subgroups: dict[str, np.ndarray], fprs=FPRS
) -> TargetMetrics:
    """AUC, balanced accuracy and TPR@FPR for each target (rows of scores/member, (T, N)) on each
    subgroup (boolean masks over the N examples)."""
    out: dict[str, dict[str, list]] = {}
    for g, mask in subgroups.items():
        mask = np.asarray(mask, bool)
        d: dict[str, list] = {"auc": [], "balanced_acc": [], **{f"tpr@{f:g}": [] for f in fprs}}
        for s, y in zip(scores, member):
            s, y = s[mask], y[mask]
            d["auc"].append(auc(s, y))
            d["balanced_acc"].append(balanced_accuracy(s, y))
            for f in fprs:
                d[f"tpr@{f:g}"].append(tpr_at_fpr(s, y, f))
        out[g] = {k: np.asarray(v) for k, v in d.items()}
    return TargetMetrics(out)


def _auc_rows(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AUC of each row of s (T, n) against the labels y (T, n)."""
    r = rankdata(s, axis=1)
    n1 = y.sum(1)
    n0 = y.shape[1] - n1
    a = ((r * y).sum(1) - n1 * (n1 + 1) / 2) / np.maximum(n1 * n0, 1)
    return np.where((n1 > 0) & (n0 > 0), a, np.nan)  # no members (or no non-members): no AUC


def paired_delta_auc(
    runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    mask_per_run=None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Estimate:
    """Mean AUC(a) - AUC(b) over targets and runs (seeds), paired on the same targets and examples.

    runs: one (scores_a (T, N), scores_b (T, N), member (T, N)) per seed (pool); mask_per_run:
    boolean (N,) subgroup masks. The interval comes from a hierarchical bootstrap that resamples
    the pools (with more than one: redrawing the data subset, the outliers and the keep matrix),
    then targets and examples within each (targets share shadows, examples are finite). With a
    few pools a percentile bootstrap over them returns about their range and overstates
    certainty, so with two or more the interval is widened to contain the Student-t interval
    over the pools' own estimates (df = pools - 1; then its df and the larger standard error give
    the p-value).
    """
    masks = mask_per_run or [None] * len(runs)
    data = []
    for (a, b, y), mk in zip(runs, masks):
        mk = np.ones(a.shape[1], bool) if mk is None else np.asarray(mk, bool)
        data.append((np.asarray(a)[:, mk], np.asarray(b)[:, mk], np.asarray(y, bool)[:, mk]))
    per_pool = np.array([np.nanmean(_auc_rows(a, y) - _auc_rows(b, y)) for a, b, y in data])
    point = float(np.mean(per_pool))
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        per_run = []
        pools = rng.integers(0, len(data), len(data)) if len(data) > 1 else range(len(data))
        for a, b, y in (data[k] for k in pools):
            t = rng.integers(0, len(a), len(a))
            i = rng.integers(0, a.shape[1], a.shape[1])
            yy = y[t][:, i]
            d = _auc_rows(a[t][:, i], yy) - _auc_rows(b[t][:, i], yy)  # NaN: a row without members
            per_run.append(np.nanmean(d) if np.isfinite(d).any() else np.nan)
        boots.append(np.nanmean(per_run) if np.isfinite(per_run).any() else np.nan)
    boots = np.asarray(boots)[np.isfinite(boots)]
    q = (1 - level) / 2
    lo, hi, se, df = (
        float(np.quantile(boots, q)),
        float(np.quantile(boots, 1 - q)),
        float(np.std(boots, ddof=1)),
        None,
    )
    per_pool = per_pool[np.isfinite(per_pool)]
    if len(per_pool) >= 2:  # between-pool spread, judged with the t quantile of so few pools
        t = t_mean(per_pool, level)
        if (
            t.lo < lo or t.hi > hi
        ):  # the t interval decides a bound: its df (and the larger se) give the p-value
            lo, hi, se, df = min(lo, t.lo), max(hi, t.hi), max(se, t.se), t.df
    return Estimate(point, lo, hi, sum(len(a) for a, _, _ in data), level, se=se, df=df)


def points(e: Estimate) -> Estimate:
    """An AUC difference (0-1 scale) in AUC points."""
    se = None if e.se is None else 100 * e.se
    return Estimate(100 * e.value, 100 * e.lo, 100 * e.hi, e.n, e.level, se=se, df=e.df)


def memorization_score(correct: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Feldman-Zhang memorization mem(i) = P[correct | i IN] - P[correct | i OUT] over the pool.
    correct, keep: (M, N) bool -> (N,) float64; NaN where an example is never OUT (or never IN):
    it has no estimate (a balanced keep matrix never does this)."""
    c, k = np.asarray(correct, np.float64), np.asarray(keep, bool)
    n_in, n_out = k.sum(0), (~k).sum(0)
    p_in = np.divide((c * k).sum(0), n_in, out=np.full(c.shape[1], np.nan), where=n_in > 0)
    p_out = np.divide((c * ~k).sum(0), n_out, out=np.full(c.shape[1], np.nan), where=n_out > 0)
    return p_in - p_out  # NaN (no warning) for an example IN, or OUT, for every model


ATTACKS = ("online", "online_fixed", "offline", "offline_fixed", "loss", "rmia")


def example_groups(
    mask: np.ndarray, names: tuple[str, str] = ("outliers", "inliers")
) -> dict[str, np.ndarray]:
    """The example groups an attack is measured on, (N,) boolean each: "all", and when `mask`
    (the outliers) holds any example, the masked ones and the rest, named by `names`."""
    mask = np.asarray(mask, bool)
    groups = {"all": np.ones_like(mask)}
    return groups | ({names[0]: mask, names[1]: ~mask} if mask.any() else {})


def pool_scores(pool, sigma_floor: float = 1e-3) -> dict[str, np.ndarray]:
    """Membership scores (M targets, N examples) of every attack on a shadow pool (each model in
    turn the target, the other M-1 its shadows): four LiRA variants, the loss attack, RMIA."""
    s = lira(pool.phi, pool.keep, sigma_floor=sigma_floor)
    s["loss"] = loss_attack(pool.logp)
    s["rmia"] = rmia(pool.logp, pool.test_logp, pool.keep)
    return s
