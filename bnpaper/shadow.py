"""The shadow-model pool for membership inference: cached shadow training and its logits.

Keep matrix, query augmentations, shadow training through an executor, the pool's scores.

Each shadow model is one cached unit (`Store.put("shadow", config, ...)`, keyed by its full
training config, its mitigation, its keep column, the pool's data fingerprint and the code this
module imports). Results are stored on the client as each unit finishes, so a killed run loses at
most the units in flight and a re-run trains only the missing ones. A pack of K shadows trained
together gives each member a K-th of the pack's time in its sidecar (`pack_seconds`: the whole).

Executors (`executor=`):
  "inprocess"         one unit after the other in this process (default)
  "process[:N]"       a local pool of N worker processes (concurrent.futures, spawn)
  "dask://host:port"  a running Dask scheduler (`dask.distributed.Client(...).get_executor()`).
On Slurm, start the cluster with dask-jobqueue and pass its scheduler address, e.g.::

    from dask_jobqueue import SLURMCluster
    cluster = SLURMCluster(cores=8, memory="32GB", walltime="04:00:00", processes=1)
    cluster.scale(jobs=16)            # 16 Slurm jobs, one Dask worker each
    executor = "dask://" + cluster.scheduler_address.removeprefix("tcp://")

Workers need `bnpaper` installed; results travel back to the client, no shared disk needed.
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import hashlib
import multiprocessing
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from . import mia
from .progress import Counter
from .mitigation import MitigationConfig, fit_mitigated
from .config import ConfigError, check_choice
from .data import Split, normalize
from .models import build_model
from .packed_fit import TRAINERS  # the trainers a pool accepts
from .store import Store
from .train import TrainConfig

QUERY_MODES = ("eval", "train-batch")


# ---------------------------------------------------------------- keep matrix and queries
def keep_matrix(m: int, n: int, seed: int) -> np.ndarray:
    """(M, N) bool: every example is IN for exactly M/2 models, and every model holds
    floor(N/2) or ceil(N/2) examples (seeded; random swaps balance the model sizes)."""
    if m < 2 or m % 2:
        raise ConfigError(f"n_shadows={m} must be an even number >= 2 (balanced keep matrix)")
    rng = np.random.default_rng(seed)
    keep = np.argsort(rng.random((m, n)), axis=0) < m // 2
    sizes = keep.sum(1)
    while sizes.max() - sizes.min() > 1:
        a, b = int(sizes.argmax()), int(sizes.argmin())
        cand = np.flatnonzero(keep[a] & ~keep[b])
        j = cand[rng.integers(len(cand))]
        keep[a, j], keep[b, j] = False, True
        sizes[a] -= 1
        sizes[b] += 1
    return keep


def query_shifts(image_shape: tuple[int, ...], augment: bool) -> list[tuple[bool, int, int]]:
    """Query augmentations (mirror, dy, dx) = the training augmentations: none for digits
    (1 query); for augmented training (CIFAR) mirror x {no shift, +-4 px along each axis}."""
    if not augment:
        return [(False, 0, 0)]
    shifts = [(0, 0), (-4, 0), (4, 0), (0, -4), (0, 4)]
    return [(f, dy, dx) for f in (False, True) for dy, dx in shifts]


def augment_query(x: torch.Tensor, mirror: bool, dy: int, dx: int, pad: int = 4) -> torch.Tensor:
    """Shift (zero padding, as in training) and optionally mirror a batch (B, C, H, W)."""
    if dy or dx:
        h, w = x.shape[-2:]
        x = F.pad(x, (pad, pad, pad, pad))[..., pad + dy : pad + dy + h, pad + dx : pad + dx + w]
    return x.flip(-1) if mirror else x


@torch.no_grad()
def query_logits(
    model: torch.nn.Module, x: torch.Tensor, queries, mode: str = "eval", batch: int = 1024
) -> torch.Tensor:
    """Logits (N, queries, classes) of normalized images x (N, C, H, W).

    mode "eval" uses running statistics; "train-batch" normalizes with the statistics of each
    query batch (an ablation) on a copy, so the model's saved statistics never change."""
    check_choice("bn_query_mode", mode, QUERY_MODES)
    if mode == "train-batch":
        model = copy.deepcopy(model).train()
    else:
        model.eval()
    out = []
    for q in queries:
        out.append(
            torch.cat([model(augment_query(x[i : i + batch], *q)) for i in range(0, len(x), batch)])
        )
    return torch.stack(out, 1).float()


# ---------------------------------------------------------------- one unit of work
@dataclass(frozen=True)
class ShadowTask:
    """Shadows to train together (one model, or K packed LeNets) on rows of one pool."""

    split: Split
    cfgs: tuple[TrainConfig, ...]
    members: tuple[np.ndarray, ...]  # row indices each shadow trains on
    trainer: str  # "plain" or "packed"
    threads: int = 0  # torch threads in the worker (0: leave as is)
    mitigation: MitigationConfig = MitigationConfig()  # a gamma/sigma regularizer (either trainer)
    levels: tuple[float, ...] = ()  # clean training accuracies at which weights are also kept


def _train_states(task: ShadowTask) -> list[tuple[dict, int, bool, dict]]:
    """Per shadow of `task`: its trained weights, the epochs it trained (fewer than the cap when
    it reached its fit rule), whether it hit the cap below its fit level (censored) and its
    snapshots {level: (epoch, weights)} at `task.levels`; the hook tests interrupt."""
    if task.trainer == "packed":
        from .packed_fit import Job, fit_pack

        jobs = [Job(task.split, c, m, task.mitigation) for c, m in zip(task.cfgs, task.members)]
        fit = any(c.fit_level is not None for c in task.cfgs)  # the epochs are in the history
        # the per-epoch record feeds the fit rule and the snapshots only: no test pass, and a
        # pass stops once it proves every member below its levels (`fit_only`)
        results = fit_pack(jobs, history=fit, snapshots=task.levels, eval_test=False, fit_only=True)
        return [_used(r, c) for r, c in zip(results, task.cfgs)]
    out = []
    for cfg, rows in zip(task.cfgs, task.members):
        r = torch.as_tensor(rows)
        s = task.split
        sub = replace(s, x=s.x[r], y=s.y[r], y_true=s.y_true[r], mask=s.mask[r])
        result = fit_mitigated(sub, cfg, task.mitigation, progress=False, snapshots=task.levels)
        out.append(_used(result, cfg))
    return out


def _used(result, cfg: TrainConfig) -> tuple[dict, int, bool, dict]:
    """A trained shadow's weights, epochs used, censoring (without a fit rule: all epochs, not
    censored) and snapshots."""
    snaps = result.snapshots or {}
    if cfg.fit_level is None:
        return result.state, cfg.epochs, False, snaps
    return result.state, result.epochs, result.censored, snaps


def train_task(task: ShadowTask) -> list[dict]:
    """Train the shadows of `task`; return per shadow its state, query logits on the whole pool
    (N, Q, C) and on the test set (Z, Q, C), its train/test accuracy, the epochs it trained and
    whether it hit the epoch cap below its fit level (censored); with `task.levels`, under
    "levels" {level: the same scores and the epoch} for each level the shadow reached (its
    weights at the first epoch whose clean training accuracy reached it)."""
    if task.threads:
        torch.set_num_threads(task.threads)
    s = task.split
    xs, xt = normalize(s.x, s.mean, s.std), normalize(s.x_test, s.mean, s.std)
    out = []
    trained = _train_states(task)
    for cfg, rows, (state, epochs, censored, snaps) in zip(task.cfgs, task.members, trained):
        res = {
            "state": state,
            **_queried(state, cfg, rows, s, xs, xt),
            "epochs": int(epochs),
            "censored": bool(censored),
        }
        if task.levels:
            res["levels"] = {
                lv: {"state": st, **_queried(st, cfg, rows, s, xs, xt), "epoch": int(ep)}
                for lv, (ep, st) in snaps.items()
            }
        out.append(res)
    return out


def _queried(state: dict, cfg: TrainConfig, rows, s: Split, xs, xt) -> dict:
    """A shadow's query logits on the pool and on the test set, from its weights `state`, and
    its accuracies: on its IN examples (`rows`), on its clean IN examples, on the test set."""
    model = build_model(cfg.arch, cfg.norm, s.x.shape[1], s.n_classes, s.x.shape[2])
    model.load_state_dict(state)
    queries = query_shifts(tuple(s.x.shape[1:]), cfg.augment)
    logits, test_logits = query_logits(model, xs, queries), query_logits(model, xt, queries)
    pred, inn = logits[:, 0].argmax(1), torch.zeros(len(xs), dtype=torch.bool)
    inn[torch.as_tensor(rows)] = True
    return {
        "logits": logits,
        "test_logits": test_logits,
        "train_acc": float((pred == s.y)[inn].float().mean()),
        "train_clean_acc": float((pred == s.y)[inn & ~s.mask].float().mean()),
        "test_acc": float((test_logits[:, 0].argmax(1) == s.y_test).float().mean()),
    }


def timed_task(task: ShadowTask) -> tuple[float, list[dict]]:
    """`train_task` and the seconds it took (measured where it runs: a worker's own time)."""
    t0 = time.perf_counter()
    out = train_task(task)
    return time.perf_counter() - t0, out


# ---------------------------------------------------------------- executors
class InProcessExecutor(cf.Executor):
    """Runs each submitted call at once, in this process (the default executor)."""

    def submit(self, fn, /, *args, **kwargs):
        fut: cf.Future = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller via the future
            fut.set_exception(exc)
        return fut


def check_executor(spec: str) -> str:
    """Validate an executor spec ("inprocess", "process", "process:N", "dask://host:port")."""
    ok = isinstance(spec, str) and (
        spec == "inprocess"
        or spec == "process"
        or (spec.startswith("process:") and spec[8:].isdigit() and int(spec[8:]) > 0)
        or (spec.startswith("dask://") and ":" in spec[7:])
    )
    if not ok:
        raise ConfigError(
            f"executor={spec!r} is not allowed; choose 'inprocess', 'process', "
            "'process:N' or 'dask://host:port'"
        )
    return spec


@contextmanager
def open_executor(spec: str = "inprocess"):
    """A concurrent.futures-style executor for `spec` and its number of workers."""
    check_executor(spec)
    if spec == "inprocess":
        yield InProcessExecutor(), 1
    elif spec.startswith("process"):
        n = int(spec[8:]) if ":" in spec else max(1, multiprocessing.cpu_count())
        with cf.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as ex:
            yield ex, n
    else:
        from dask.distributed import Client

        client = Client("tcp://" + spec[len("dask://") :], timeout="20s")
        try:
            n = max(1, sum(w["nthreads"] for w in client.scheduler_info()["workers"].values()))
            yield client.get_executor(), n
        finally:
            client.close()


# ---------------------------------------------------------------- the pool
@dataclass(frozen=True)
class ShadowPool:
    """Scores of M shadow models: phi and log p_y on the pool (M, N, Q) and on the test set
    (M, Z, Q) in float64, correctness (M, N) on the un-augmented query, accuracies (M,)."""

    keep: np.ndarray
    phi: np.ndarray
    logp: np.ndarray
    test_logp: np.ndarray
    correct: np.ndarray
    train_acc: np.ndarray
    train_clean_acc: np.ndarray
    test_acc: np.ndarray
    configs: tuple[dict, ...]
    epochs: np.ndarray | None = None  # (M,) epochs each model trained (None: not recorded)
    censored: np.ndarray | None = None  # (M,) bool: hit the epoch cap below its fit level
    # level -> the same models' scores at their first epoch whose clean training accuracy
    # reached that level (`run_shadows(levels=...)`); there, `epochs` is that epoch and a model
    # that never reached the level is read at its end and marked `censored`
    at_levels: Mapping[float, "ShadowPool"] | None = None

    @property
    def gap(self) -> np.ndarray:
        """Train-test accuracy gap of every model (on its own training examples)."""
        return self.train_acc - self.test_acc


def shadow_configs(base: TrainConfig, m: int, seed: int) -> list[TrainConfig]:
    """The M shadow training configs of one pool: seeds derived from the pool's seed."""
    return [replace(base, seed=seed * 1000 + i) for i in range(m)]


def _unit_config(
    cfg: TrainConfig,
    rows: np.ndarray,
    trainer: str,
    mitigation: MitigationConfig = MitigationConfig(),
    levels: tuple[float, ...] = (),
    pack_size: int = 1,
) -> dict:
    """A shadow's unit: its training, rows, trainer, regularizer, snapshot levels and, packed,
    the pack size (a packed shadow's numbers depend on its pack: the pool packs its shadows in
    pool order, so the size fixes the pack)."""
    out = {
        "train": cfg.as_dict(),
        "trainer": trainer,
        "mitigation": mitigation.as_dict(),
        "keep": hashlib.sha256(np.asarray(rows, np.int64).tobytes()).hexdigest(),
    }
    if trainer == "packed":
        out["pack_size"] = int(pack_size)
    return {**out, "levels": [float(lv) for lv in levels]} if levels else out


def _trainer(trainer: str, arch: str, pack_size: int) -> str:
    """The trainer "auto" stands for: packed LeNets (with or without a regularizer), else plain."""
    check_choice("trainer", trainer, TRAINERS)
    if trainer == "auto":
        return "packed" if arch == "lenet" and pack_size > 1 else "plain"
    if trainer == "packed" and arch != "lenet":
        raise ConfigError(f"trainer='packed' supports arch='lenet' only, not {arch!r}")
    return trainer


def run_shadows(
    split: Split,
    base: TrainConfig,
    keep: np.ndarray,
    seed: int = 0,
    executor: str = "inprocess",
    trainer: str = "auto",
    pack_size: int = 8,
    bn_query_mode: str = "eval",
    store: Store | None = None,
    progress: bool = True,
    threads: int = 0,
    mitigation: MitigationConfig = MitigationConfig(),
    levels: tuple[float, ...] = (),
) -> ShadowPool:
    """Train (or load) the M = len(keep) shadows of `split` and return their scores.

    trainer "auto" packs LeNets (`pack_size` per unit), with or without a `mitigation` (the
    gamma/sigma regularizer), and trains other archs one by one.
    bn_query_mode "train-batch" recomputes the queries from the stored weights.
    With `levels` (clean training accuracies, part of each unit's key), every shadow also keeps
    its weights and scores at the first epoch reaching each level: `ShadowPool.at_levels`."""
    from tqdm.auto import tqdm

    check_choice("bn_query_mode", bn_query_mode, QUERY_MODES)
    trainer = _trainer(trainer, base.arch, pack_size)
    store = store or Store()
    fp = split.fingerprint()
    cfgs = shadow_configs(base, len(keep), seed)
    rows = [np.flatnonzero(k) for k in keep]
    levels = tuple(float(lv) for lv in levels)
    units = [_unit_config(c, r, trainer, mitigation, levels, pack_size) for c, r in zip(cfgs, rows)]
    missing = [i for i, u in enumerate(units) if not store.has("shadow", u, fp, module=__name__)]
    size = pack_size if trainer == "packed" else 1
    groups: list[list[int]] = []
    for i in missing:  # packed members need index sets of equal length
        g = next((g for g in groups if len(g) < size and len(rows[g[0]]) == len(rows[i])), None)
        g.append(i) if g is not None else groups.append([i])
    what = f"shadows {base.arch}/{base.norm}"
    cached = len(keep) - len(missing)
    bar = tqdm(total=len(keep), initial=cached, disable=not progress, desc=what, leave=False)
    count = Counter(what, len(keep), cached)
    if missing:
        count.begin()
    with open_executor(executor) as (ex, n_workers):
        todo, running = deque(groups), {}
        while todo or running:
            while todo and len(running) < n_workers:
                g = todo.popleft()
                task = ShadowTask(
                    split,
                    tuple(cfgs[i] for i in g),
                    tuple(rows[i] for i in g),
                    "packed" if len(g) > 1 else "plain",
                    threads,
                    mitigation,
                    levels,
                )
                running[ex.submit(timed_task, task)] = g
            fin, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
            for fut in fin:
                g = running.pop(fut)
                seconds, results = fut.result()  # a failed unit stops the run; finished ones stay
                for i, res in zip(g, results):
                    store.put(
                        "shadow", units[i], res, fp, module=__name__, seconds=seconds, pack=len(g)
                    )
                bar.update(len(g))
                count.add(len(g), seconds / len(g))
    bar.close()
    results = [store.load("shadow", u, fp, module=__name__) for u in units]
    pool = _pool(split, keep, cfgs, results, bn_query_mode)
    if not levels:
        return pool
    at = {
        lv: _pool(split, keep, cfgs, [_at(r, lv) for r in results], bn_query_mode) for lv in levels
    }
    return replace(pool, at_levels=at)


def _at(res: dict, level: float) -> dict:
    """A shadow's stored result as read at `level`: its snapshot there, or, when it never
    reached the level, its end of training marked censored."""
    snap = res.get("levels", {}).get(level)
    if snap is None:
        return {**res, "censored": True}
    return {**snap, "epochs": snap["epoch"], "censored": False}


def _pool(split: Split, keep, cfgs, results: list[dict], bn_query_mode: str) -> ShadowPool:
    """The pool's scores from each shadow's stored result (`train_task`'s dict)."""
    xs = normalize(split.x, split.mean, split.std)
    c, h = split.x.shape[1], split.x.shape[2]
    acc = {
        k: []
        for k in ("phi", "logp", "test_logp", "correct", "train_acc", "train_clean_acc", "test_acc")
    }
    used = []
    for cfg, res in zip(cfgs, results):
        logits = res["logits"]
        if bn_query_mode != "eval":
            model = build_model(cfg.arch, cfg.norm, c, split.n_classes, h)
            model.load_state_dict(res["state"])
            logits = query_logits(
                model, xs, query_shifts(tuple(split.x.shape[1:]), cfg.augment), bn_query_mode
            )
        y = split.y.numpy()[:, None]
        acc["phi"].append(mia.phi(logits.numpy(), y))
        acc["logp"].append(mia.log_softmax_y(logits.numpy(), y))
        acc["test_logp"].append(
            mia.log_softmax_y(res["test_logits"].numpy(), split.y_test.numpy()[:, None])
        )
        acc["correct"].append(logits[:, 0].argmax(1).numpy() == split.y.numpy())
        for k in ("train_acc", "train_clean_acc", "test_acc"):
            acc[k].append(res[k])
        used.append((res.get("epochs", cfg.epochs), res.get("censored", False)))
    return ShadowPool(
        keep=np.asarray(keep, bool),
        configs=tuple(c.as_dict() for c in cfgs),
        epochs=np.asarray([e for e, _ in used], np.int64),
        censored=np.asarray([c for _, c in used], bool),
        **{k: np.asarray(v) for k, v in acc.items()},
    )


def n_cached(
    split: Split,
    base: TrainConfig,
    keep: np.ndarray,
    seed: int = 0,
    trainer: str = "auto",
    pack_size: int = 8,
    store: Store | None = None,
    mitigation: MitigationConfig = MitigationConfig(),
    levels: tuple[float, ...] = (),
) -> int:
    """How many shadows of this pool (with its snapshot `levels`) are already in the store."""
    trainer = _trainer(trainer, base.arch, pack_size)
    store = store or Store()
    fp = split.fingerprint()
    cfgs = shadow_configs(base, len(keep), seed)
    return sum(
        store.has(
            "shadow",
            _unit_config(
                c, np.flatnonzero(k), trainer, mitigation, tuple(map(float, levels)), pack_size
            ),
            fp,
            module=__name__,
        )
        for c, k in zip(cfgs, keep)
    )
