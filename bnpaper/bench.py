"""`python -m bnpaper.bench [name ...]`: run the benchmarks in bench/ one after another (never two
at once on 2 cores). Each prints speed ratios measured within its own single run."""

from __future__ import annotations

import os
import runpy
import sys
import time
from typing import Callable

from .config import repo_root


def load_note(load0: float, threads: int) -> str:
    """The machine's 1-minute load before and after: other processes on the cores slow
    multi-threaded small ops far more than big GEMMs, so a loaded run's ratios are suspect."""
    load1 = os.getloadavg()[0]
    warn = (
        " -- other processes were running: absolute numbers are low and ratios noisy"
        if max(load0, load1) > threads + 1.0
        else ""
    )
    cores = os.cpu_count()
    return f"load average {load0:.1f} at the start, {load1:.1f} at the end ({cores} cores){warn}"


def best_of(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Seconds of each callable, the best of `rounds` interleaved rounds (load from other
    processes then hits every variant alike)."""
    sec = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            sec[name] = min(sec[name], time.perf_counter() - t)
    return sec


def main(argv: list[str] | None = None) -> int:
    names = argv if argv is not None else sys.argv[1:]
    scripts = sorted((repo_root() / "bench").glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if any(n in s.stem for n in names)]
    argv0 = sys.argv
    try:
        for s in scripts:
            print(f"== {s.name}", flush=True)
            sys.argv = [str(s)]  # each script with its own defaults (the names are ours)
            runpy.run_path(str(s), run_name="__main__")
    finally:
        sys.argv = argv0
    return 0


if __name__ == "__main__":
    sys.exit(main())
