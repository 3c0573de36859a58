"""`python -m bnpaper.bench [name ...]`: run the benchmarks in bench/ one after another (never two
at once on 2 cores). Each prints speed ratios measured within its own single run."""
from __future__ import annotations

import runpy
import sys

from .config import repo_root


def main(argv: list[str] | None = None) -> int:
    names = argv if argv is not None else sys.argv[1:]
    scripts = sorted((repo_root() / "bench").glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if any(n in s.stem for n in names)]
    for s in scripts:
        print(f"== {s.name}", flush=True)
        runpy.run_path(str(s), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
