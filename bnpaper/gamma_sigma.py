"""|gamma|/sigma per BN channel measured in trained networks, and the trained-network study."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn as nn

from .bn_scale import scale_free
from .data import Dataset, Split, make_split, normalize
from .models import bn_layers, build_model
from .stats import Estimate, t_mean
from .train import TrainConfig, TrainResult


@torch.no_grad()
def gamma_sigma(
    model: nn.Module, x: torch.Tensor, batch_size: int = 128, n_batches: int = 4
) -> list[dict]:
    """Per BN layer: |gamma|/sigma per channel (the factor is its square), sigma from the running
    variance and from batch statistics (median over `n_batches` batches of `x`: (N, C, H, W),
    normalized images)."""
    n_batches = max(1, min(n_batches, len(x) // batch_size))  # whole batches only
    layers = bn_layers(model)
    seen: dict[str, list[torch.Tensor]] = {name: [] for name, _ in layers}
    hooks = []
    for name, layer in layers:

        def hook(mod, inp, out, name=name):
            v = inp[0].transpose(0, 1).reshape(inp[0].shape[1], -1)
            seen[name].append((v.var(1, unbiased=False) + mod.eps).sqrt())

        hooks.append(layer.register_forward_hook(hook))
    was, moms = model.training, [layer.momentum for _, layer in layers]
    model.train()  # training-mode forward: each BN layer normalizes by these batch statistics
    for _, layer in layers:
        layer.momentum = 0.0  # ... while its running statistics stay unchanged
    for k in range(n_batches):
        model(x[k * batch_size : (k + 1) * batch_size])
    for h, (_, layer), mom in zip(hooks, layers, moms):
        h.remove()
        layer.momentum = mom
    model.train(was)
    out = []
    for name, layer in layers:
        gam = layer.weight.abs() if layer.weight is not None else torch.ones(layer.num_features)
        s_run = (layer.running_var + layer.eps).sqrt()
        s_batch = torch.stack(seen[name]).median(0).values
        out.append(
            {
                "layer": name,
                "ratio_running": (gam / s_run).cpu(),
                "ratio_batch": (gam / s_batch).cpu(),
                "gamma": gam.cpu(),
                "sigma_running": s_run.cpu(),
                "sigma_batch": s_batch.cpu(),
            }
        )
    return out


def initial_model(config: dict, split: Split) -> nn.Module:
    """The model `train.fit` starts from for a `TrainResult.config` (seeded the same way)."""
    torch.manual_seed(config["seed"])
    return build_model(
        config["arch"], config["norm"], split.x.shape[1], split.n_classes, split.x.shape[2]
    )


def trained_gamma_sigma(
    result: TrainResult, split: Split, batch_size: int = 128, n_batches: int = 4, init: bool = False
) -> dict:
    """|gamma|/sigma per BN layer and channel of a trained model (`train.TrainResult` on `split`),
    batch statistics from its first `n_batches` batches; with its final clean test accuracy and
    memorization (accuracy of the corrupted samples on their corrupted labels), the epochs it
    trained, whether it was censored (hit its epoch cap below its fit level), and per directly
    fed BN layer the readings that survive rescaling (`bn_scale.scale_free` at the model's peak
    learning rate: "scale_free"). With `init`, also "init_layers": the same |gamma|/sigma for
    the model at initialization, on the same batches."""
    model = result.model(split.x.shape[1], split.n_classes, split.x.shape[2])
    xs = normalize(split.x[: n_batches * batch_size], split.mean, split.std)
    layers = gamma_sigma(model, xs, batch_size, n_batches)
    out = {
        "layers": layers,
        "scale_free": scale_free(model, layers, result.config["lr"]),
        "test_acc": result.history["test_acc"][-1],
        "noisy_acc": result.history["noisy_acc"][-1],
        "epochs": result.epochs,
        "censored": result.censored,
    }
    if init:
        start = initial_model(result.config, split)
        out["init_layers"] = gamma_sigma(start, xs, batch_size, n_batches)
    return out


def channel_fractions(layers: list[dict]) -> dict:
    """Share of channels with |gamma|/sigma > 1, per layer (sigma from the running variance and
    from batch statistics) and over all channels pooled (boolean arrays, for a bootstrap)."""
    running = [layer["ratio_running"].numpy() for layer in layers]
    batch = [layer["ratio_batch"].numpy() for layer in layers]
    return {
        "running": [float((r > 1).mean()) for r in running],
        "batch": [float((r > 1).mean()) for r in batch],
        "all_running": np.concatenate(running) > 1,
        "all_batch": np.concatenate(batch) > 1,
    }


def factor_parts(a: list[dict], b: list[dict]) -> dict[str, np.ndarray]:
    """log (gamma/sigma)^2 of network state `a` minus state `b` (same architecture: channel k of
    both is the same unit, e.g. trained vs initial, or flipped vs clean labels from one init),
    split exactly into a gamma part 2 log(|gamma_a|/|gamma_b|) and a sigma part
    -2 log(sigma_a/sigma_b) (sigma from batch statistics at both ends: at initialization the
    running variance is still 1). Mean over each layer's channels: (layers,) arrays 'gamma',
    'sigma', 'total'; over all channels pooled: scalars 'all_gamma', 'all_sigma', 'all_total'."""
    g = [2 * np.log(la["gamma"].numpy() / lb["gamma"].numpy()) for la, lb in zip(a, b)]
    s = [-2 * np.log(la["sigma_batch"].numpy() / lb["sigma_batch"].numpy()) for la, lb in zip(a, b)]
    out = {"gamma": np.array([x.mean() for x in g]), "sigma": np.array([x.mean() for x in s])}
    out["total"] = out["gamma"] + out["sigma"]
    out["all_gamma"] = float(np.concatenate(g).mean())
    out["all_sigma"] = float(np.concatenate(s).mean())
    out["all_total"] = out["all_gamma"] + out["all_sigma"]
    return out


def driver_of(gamma_part, sigma_part) -> np.ndarray:
    """Which part carries a change of log (gamma/sigma)^2 in its direction: 'gamma' where
    the gamma part, signed by the total, is the larger, else 'sigma' (elementwise)."""
    sign = np.sign(np.asarray(gamma_part) + np.asarray(sigma_part))
    return np.where(
        sign * np.asarray(gamma_part) >= sign * np.asarray(sigma_part), "gamma", "sigma"
    )


def exp_estimate(e: Estimate) -> Estimate:
    """An estimate of a log quantity as the estimate of the quantity (exp of value and bounds)."""
    return Estimate(math.exp(e.value), math.exp(e.lo), math.exp(e.hi), e.n, e.level)


MEASURES = {
    "gamma_sigma": "median |gamma|/sigma",
    "effective_step": "median effective step lr/|w_c|^2",
    "unit_norm": "median |gamma|/sigma at unit weight norm",
}  # the readings of a network that memorization may track (`net_medians`)


def net_medians(net: dict) -> dict[str, float]:
    """The medians over a network's channels (directly fed BN layers, `bn_scale.scale_free`)
    of |gamma|/sigma (batch statistics), the effective step and |gamma|/sigma at unit weight
    norm, keyed by `MEASURES`."""
    fed = {layer["layer"] for layer in net["scale_free"]}
    ratio = [la["ratio_batch"].numpy() for la in net["layers"] if la["layer"] in fed]
    step = [la["effective_step"].numpy() for la in net["scale_free"]]
    unit = [la["ratio_unit_w"].numpy() for la in net["scale_free"]]
    return {k: float(np.median(np.concatenate(v))) for k, v in zip(MEASURES, (ratio, step, unit))}


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of `a` and `b` (ties: average ranks); NaN without spread."""
    from scipy.stats import rankdata

    ra, rb = rankdata(a), rankdata(b)
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


SCALE_FREE_COLUMNS = (
    ("w_norm", "|w_c|"),
    ("effective_step", "lr/|w_c|^2"),
    ("ratio_unit_w", "gamma/sigma at |w_c|=1"),
)  # `bn_scale.scale_free`'s keys and their column names


def _mean_median(tensors: Sequence[torch.Tensor]) -> float:
    """The mean over networks of each network's median (one tensor of channels per network)."""
    return float(np.mean([np.median(t.numpy()) for t in tensors]))


COMPARISONS = ("init", "clean")  # trained vs initialization, flipped vs clean labels


@dataclass(frozen=True)
class TrainedStudy:
    """|gamma|/sigma of BN networks trained over seeds: nets[(arch, labels, seed)] is
    `trained_gamma_sigma(..., init=True)` of the network trained on flipped ('flip') or clean
    ('none') labels. Every interval is over seeds (networks, Student t): the channels of one
    network share its data and training, so they are not independent units.

    Two comparisons split the change of (gamma/sigma)^2 into gamma growth and sigma shrinkage
    (`factor_parts`): 'init' (the flipped-label network, trained vs initialization) and 'clean'
    (flipped vs clean labels, same seed: same images, initialization and data order)."""

    nets: dict
    archs: list[str]
    seeds: list[int]

    def clean_archs(self) -> list[str]:
        """The architectures also trained on clean labels (every seed)."""
        return [a for a in self.archs if all((a, "none", s) in self.nets for s in self.seeds)]

    def layer_names(self, arch: str) -> list[str]:
        """The BN layers of `arch`, in forward order."""
        return [layer["layer"] for layer in self.nets[arch, "flip", self.seeds[0]]["layers"]]

    def test_acc(self, arch: str, labels: str = "flip") -> float:
        """Clean test accuracy, mean over seeds."""
        return float(np.mean([self.nets[arch, labels, s]["test_acc"] for s in self.seeds]))

    def shares(self, arch: str, key: str = "ratio_running") -> tuple[np.ndarray, np.ndarray]:
        """Share of channels with |gamma|/sigma > 1 per seed: per layer (seeds, layers) and
        over all channels of the network pooled (seeds,)."""
        per_layer, pooled = [], []
        for s in self.seeds:
            above = [layer[key].numpy() > 1 for layer in self.nets[arch, "flip", s]["layers"]]
            per_layer.append([x.mean() for x in above])
            pooled.append(np.concatenate(above).mean())
        return np.array(per_layer), np.array(pooled)

    def most_channels(self, arch: str) -> Estimate:
        """The share of a network's channels with |gamma|/sigma > 1 (running variance), mean
        over networks (seeds) with a t interval over them."""
        return t_mean(self.shares(arch)[1])

    def parts(self, arch: str, versus: str) -> dict[str, np.ndarray]:
        """`factor_parts` per seed, stacked: (seeds, layers) arrays and (seeds,) pooled ones."""
        rows = []
        for s in self.seeds:
            net = self.nets[arch, "flip", s]
            other = net["init_layers"] if versus == "init" else self.nets[arch, "none", s]["layers"]
            rows.append(factor_parts(net["layers"], other))
        return {k: np.array([r[k] for r in rows]) for k in rows[0]}

    def drivers(self, arch: str, versus: str) -> list[dict]:
        """Per layer, and for all channels pooled (layer 'all channels'): the change of
        log (gamma/sigma)^2 and its gamma and sigma parts (t over seeds), the part that drives
        it (from the means) and in how many seeds the same part drives it."""
        p = self.parts(arch, versus)
        names = self.layer_names(arch) + ["all channels"]
        cols = {k: np.column_stack([p[k], p[f"all_{k}"]]) for k in ("gamma", "sigma")}
        out = []
        for j, name in enumerate(names):
            g, s = cols["gamma"][:, j], cols["sigma"][:, j]
            d = str(driver_of(g.mean(), s.mean()))
            out.append(
                {
                    "layer": name,
                    "total": t_mean(g + s),
                    "gamma": t_mean(g),
                    "sigma": t_mean(s),
                    "driver": d,
                    "agree": int((driver_of(g, s) == d).sum()),
                    "n": len(g),
                }
            )
        return out

    def first_network(self) -> tuple[dict, dict]:
        """The first seed's flipped-label network per architecture and its `channel_fractions`
        (the arguments of `plot_theory.gamma_sigma_layers`)."""
        nets = {a: self.nets[a, "flip", self.seeds[0]] for a in self.archs}
        return nets, {a: channel_fractions(n["layers"]) for a, n in nets.items()}

    def gamma_ratio(self, arch: str) -> Estimate:
        """|gamma| flipped / clean labels: per seed the geometric mean over channels, then the
        geometric mean over seeds with a t interval over them (on the log scale)."""
        return exp_estimate(t_mean(self.parts(arch, "clean")["all_gamma"] / 2))

    def epochs_used(self, arch: str, labels: str = "flip") -> list[int]:
        """The epochs each seed's network trained."""
        return [int(self.nets[arch, labels, s]["epochs"]) for s in self.seeds]

    def censored(self, arch: str, labels: str = "flip") -> list[bool]:
        """Per seed: whether the network hit its epoch cap below its fit level."""
        return [bool(self.nets[arch, labels, s]["censored"]) for s in self.seeds]

    def medians(self, arch: str) -> dict[str, list[float]]:
        """`net_medians` of each seed's flipped-label network, one list per measure."""
        per_seed = [net_medians(self.nets[arch, "flip", s]) for s in self.seeds]
        return {k: [m[k] for m in per_seed] for k in MEASURES}

    def scale_free_table(self, arch: str) -> list[dict]:
        """Per directly fed BN layer: the median over its channels of |gamma|/sigma (batch
        statistics), |w_c|, the effective step and |gamma|/sigma at unit weight norm, each the
        mean of the seeds' medians."""
        nets = [self.nets[arch, "flip", s] for s in self.seeds]
        out = []
        for j, fed in enumerate(nets[0]["scale_free"]):
            ratio = [
                next(la for la in n["layers"] if la["layer"] == fed["layer"])["ratio_batch"]
                for n in nets
            ]
            row = {"layer": fed["layer"], "gamma/sigma": _mean_median(ratio)}
            for key, name in SCALE_FREE_COLUMNS:
                row[name] = _mean_median([n["scale_free"][j][key] for n in nets])
            out.append(row)
        return out

    def most_fields(self, arch: str) -> dict:
        """Side numbers of the verdict row 'gamma/sigma > 1 in most channels' (unit: `text`):
        the shares per seed, the epochs each network trained and which were censored, and the
        medians of the readings that survive rescaling."""
        first = self.nets[arch, "flip", self.seeds[0]]["layers"]
        return {
            "share_per_seed": self.shares(arch)[1].tolist(),
            "n_channels": int(sum(len(layer["gamma"]) for layer in first)),
            "share_batch_stats_per_seed": self.shares(arch, "ratio_batch")[1].tolist(),
            "epochs_used": self.epochs_used(arch),
            "censored": self.censored(arch),
            "medians_per_seed": self.medians(arch),
        }

    def gamma_fields(self, arch: str) -> dict:
        """Side numbers of the verdict row '|gamma| flipped / clean labels': the split of
        (gamma/sigma)^2 flipped / clean into its gamma and sigma parts (unit: `text`)."""
        pooled = self.drivers(arch, "clean")[-1]
        return {
            "factor_ratio": math.exp(pooled["total"].value),
            "factor_ratio_from_gamma": math.exp(pooled["gamma"].value),
            "factor_ratio_from_sigma": math.exp(pooled["sigma"].value),
            "driver": pooled["driver"],
        }

    def summary(self) -> dict:
        """The study's numbers for results.json: per architecture the layer names, the share of
        channels > 1 per seed and layer, and both decompositions (log scale, t over seeds)."""
        out = {}
        for arch in self.archs:
            per_layer, pooled = self.shares(arch)
            out[arch] = {
                "layers": self.layer_names(arch),
                "share_above_one": per_layer.tolist(),
                "share_above_one_pooled": pooled.tolist(),
                "test_acc": self.test_acc(arch),
                "epochs_used": self.epochs_used(arch),
                "censored": self.censored(arch),
                "medians_per_seed": self.medians(arch),
                "scale_free_layers": self.scale_free_table(arch),
            }
            for versus in COMPARISONS:
                if versus == "init" or arch in self.clean_archs():
                    out[arch][f"log_factor_{versus}"] = [
                        {**r, **{k: r[k].as_dict() for k in ("total", "gamma", "sigma")}}
                        for r in self.drivers(arch, versus)
                    ]
        return out


def trained_study(
    ds: Dataset,
    configs: Mapping[str, TrainConfig],
    n_train: Mapping[str, int],
    n_test: int,
    noise_frac: float,
    seeds: Sequence[int],
    clean_reference: Sequence[str] = (),
    trainer: str = "auto",
) -> TrainedStudy:
    """Train (or load from the cache) one BN network per architecture of `configs` and seed on
    `noise_frac` flipped labels, and for `clean_reference` its twin on clean labels (same images,
    initialization and data order), LeNets packed under trainer "auto" (`units.trained_all`);
    read |gamma|/sigma of each, trained and at initialization (4 batches of the training batch
    size)."""
    from .units import Job, trained_all

    jobs = {}
    for arch, cfg in configs.items():
        for labels, frac in (("flip", noise_frac), ("none", 0.0)):
            for seed in seeds if labels == "flip" or arch in clean_reference else []:
                split = make_split(ds, n_train[arch], labels, frac, seed, n_test=n_test)
                jobs[arch, labels, seed] = Job(split, replace(cfg, seed=seed))
    descs = [f"{arch} bn, {labels} labels, seed {seed}" for arch, labels, seed in jobs]
    results = trained_all(list(jobs.values()), trainer, descs=descs)
    nets = {
        key: trained_gamma_sigma(result, job.split, job.cfg.batch_size, 4, init=True)
        for (key, job), result in zip(jobs.items(), results)
    }
    return TrainedStudy(nets, list(configs), list(seeds))


def arch_params(p: Mapping, arch: str) -> dict:
    """Notebook 04's resolved parameters `p` for one architecture's BN networks: its `n_train`
    and `epochs` (the epoch cap under the fair protocol), norm 'bn'."""
    return {
        **p,
        "arch": arch,
        "norm": "bn",
        "n_train": p["n_train"][arch],
        "epochs": p["epochs"][arch],
    }


def bn_recipes(ds: Dataset, p: Mapping, trainer: str = "auto") -> dict:
    """{arch: `recipes.NormRecipes`} of BN for every architecture of `p['archs']`: under the
    fair protocol BN's own learning rate chosen on held-out data (`recipes.norm_recipes`, the
    search on `n_train[arch]` clean images) and training to `fit_level` under the epoch cap;
    under the paper's protocol `p['lr']` for exactly `epochs[arch]` epochs."""
    from .recipes import norm_recipes

    return {a: norm_recipes(ds, arch_params(p, a), ["bn"], trainer) for a in p["archs"]}


@dataclass(frozen=True)
class DecayStudy:
    """BN LeNets trained on the same flipped data per seed (same images, flips, initialization
    and order) at several weight decays, everything else equal: nets[(decay, seed)] is
    `trained_gamma_sigma`. Weight decay moves the norm of the weights feeding BN, hence sigma
    and |gamma|/sigma, and the effective step lr/|w_c|^2: which of the three readings
    (`MEASURES`) does memorization of the flips follow across the decays? The unit is a seed:
    per seed Spearman's rank correlation over the decays, then a t interval over seeds."""

    nets: dict
    decays: list[float]
    seeds: list[int]

    def memorization(self) -> np.ndarray:
        """Final accuracy of the flipped samples on their flipped labels: (decays, seeds)."""
        return np.array([[self.nets[d, s]["noisy_acc"] for s in self.seeds] for d in self.decays])

    def measure(self, key: str) -> np.ndarray:
        """`net_medians` reading `key` (a `MEASURES` key): (decays, seeds)."""
        return np.array(
            [[net_medians(self.nets[d, s])[key] for s in self.seeds] for d in self.decays]
        )

    def _spearman_per_seed(self, key: str) -> list[float]:
        """Per seed: Spearman's rank correlation over the decays of memorization and reading
        `key` (NaN where either does not vary)."""
        mem, val = self.memorization(), self.measure(key)
        return [spearman(mem[:, j], val[:, j]) for j in range(len(self.seeds))]

    def rank_correlations(self, key: str) -> list[float]:
        """Per seed: Spearman's rank correlation over the decays of memorization and reading
        `key`; a seed whose memorization (or reading) does not vary has no rank to follow and
        counts 0 (no agreement)."""
        return [0.0 if math.isnan(r) else r for r in self._spearman_per_seed(key)]

    def unranked(self, key: str) -> int:
        """Seeds whose memorization or reading `key` does not vary over the decays (no rank)."""
        return sum(math.isnan(r) for r in self._spearman_per_seed(key))

    def tracking(self, key: str) -> Estimate:
        """Mean over seeds of `rank_correlations(key)`, t interval over seeds (04.tracks)."""
        return t_mean(self.rank_correlations(key))

    def table(self) -> list[dict]:
        """Per weight decay: memorization and each reading, mean over seeds with its t interval
        over seeds (`_lo`, `_hi`), the epochs used (mean) and how many seeds were censored."""
        mem = self.memorization()
        vals = {k: self.measure(k) for k in MEASURES}
        out = []
        for i, d in enumerate(self.decays):
            nets = [self.nets[d, s] for s in self.seeds]
            e = t_mean(mem[i])
            row = {"weight_decay": d, "memorization": e.value, "mem_lo": e.lo, "mem_hi": e.hi}
            for k, v in vals.items():
                e = t_mean(v[i])
                row.update({MEASURES[k]: e.value, f"{k}_lo": e.lo, f"{k}_hi": e.hi})
            row["test_acc"] = float(np.mean([n["test_acc"] for n in nets]))
            row["epochs"] = float(np.mean([n["epochs"] for n in nets]))
            row["censored"] = int(sum(bool(n["censored"]) for n in nets))
            out.append(row)
        return out

    def fields(self, key: str) -> dict:
        """Side numbers of the row 04.tracks for reading `key`."""
        return {
            "rank_correlation_per_seed": self.rank_correlations(key),
            "seeds_without_rank": self.unranked(key),
            "weight_decays": list(self.decays),
            "memorization": self.memorization().tolist(),
            "reading": self.measure(key).tolist(),
            "censored": [
                [bool(self.nets[d, s]["censored"]) for s in self.seeds] for d in self.decays
            ],
        }

    def summary(self) -> dict:
        """The study's numbers for results.json."""
        return {"table": self.table(), **{k: self.fields(k) for k in MEASURES}}


def decay_study(
    ds: Dataset,
    cfg: TrainConfig,
    n_train: int,
    n_test: int,
    noise_frac: float,
    seeds: Sequence[int],
    decays: Sequence[float],
    trainer: str = "auto",
) -> DecayStudy:
    """Train (or load) `cfg` (a BN recipe) at each weight decay of `decays` and seed on the
    seed's flipped-label subset (the same subset `trained_study` draws: the network at `cfg`'s
    own weight decay is the same model, the same cached unit where it trains alone; LeNets train
    in this study's own packs, so equal up to float rounding) and read each with
    `trained_gamma_sigma`."""
    from .units import Job, trained_all

    keys = [(d, s) for d in decays for s in seeds]
    jobs = [
        Job(
            make_split(ds, n_train, "flip", noise_frac, s, n_test=n_test),
            replace(cfg, seed=s, weight_decay=d),
        )
        for d, s in keys
    ]
    descs = [f"{cfg.arch} bn, weight decay {d:g}, seed {s}" for d, s in keys]
    results = trained_all(jobs, trainer, descs=descs)
    nets = {
        k: trained_gamma_sigma(r, j.split, cfg.batch_size, 4)
        for k, j, r in zip(keys, jobs, results)
    }
    return DecayStudy(nets, list(decays), list(seeds))
