"""The runner's view of a running notebook: its units' progress lines, with the time left.

The lines its units append to the progress file (`bnpaper.progress`) are printed as they come,
with a count and, where the total is known, the time left.

Apart from `progress` on purpose: that one is part of the code of every unit that reports (its
cache key), this one is not, so the wording here can change without retraining anything.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path

from . import progress


def progress_line(notebook: str, rec: dict) -> str:
    """One progress record (`progress.Counter`) as the runner prints it: the count, and the time
    left where the total is known (from the time per unit finished since the counter started)."""
    done, total, verb = rec["done"], rec["total"], rec["verb"]
    if total is None:
        detail = f": {rec['detail']}" if rec.get("detail") else ""
        took = f" ({_duration(rec['seconds'])})" if rec.get("seconds") is not None else ""
        return f"{notebook}: {rec['what']} {done} {verb}{detail}{took}"
    line = f"{notebook}: {rec['what']} {done}/{total} {verb}"
    if done == rec["first"]:
        return f"{line}, {total - done} to go"
    if done >= total:
        return f"{line} in {_duration(rec['elapsed'])}"
    left = rec["elapsed"] / (done - rec["first"]) * (total - done)
    return f"{line}, about {_duration(left)} left"


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds))} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class ProgressTail:
    """The records appended to a progress file since the last read (a line still being written
    waits for the next read)."""

    def __init__(self, path: Path):
        self.path, self.offset = Path(path), 0

    def records(self) -> list[dict]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:  # not written yet, or removed by a cleanup racing this read
            return []
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        return [json.loads(line) for line in chunk[:end].splitlines() if line.strip()]


@contextmanager
def following(notebook: str, path: Path, log=print, every: float = 1.0):
    """While the block runs, $BNPAPER_PROGRESS names `path` (the kernel inherits it) and a thread
    prints its new lines every `every` seconds, in order; the last ones when the block ends.
    Yields a `log` that prints the progress lines still pending first (so a "cell done" line
    follows the units the cell finished)."""
    path.unlink(missing_ok=True)
    before = os.environ.get(progress.ENV)
    os.environ[progress.ENV] = str(path)
    tail, stop, lock = ProgressTail(path), threading.Event(), threading.Lock()

    def show() -> None:
        with lock:
            for rec in tail.records():
                log(f"[bnpaper] {progress_line(notebook, rec)}")

    def in_order(line: str) -> None:
        show()
        log(line)

    def poll() -> None:
        while not stop.wait(every):
            show()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield in_order
    finally:
        stop.set()
        thread.join()
        show()
        path.unlink(missing_ok=True)
        if before is None:
            os.environ.pop(progress.ENV, None)
        else:
            os.environ[progress.ENV] = before
