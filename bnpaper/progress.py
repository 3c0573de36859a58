"""Progress of long cells: each finished unit appends one line to the file $BNPAPER_PROGRESS.

The runner sets the variable per notebook and prints the lines as they come, with a time left
(`bnpaper.follow`); without it, nothing is written (JupyterLab shows its tqdm bars).

A leaf (imports no other bnpaper module), kept small: it is part of the code of every unit that
reports, so its lines are data (JSON) and the runner words them.
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable

ENV = "BNPAPER_PROGRESS"


def report(record: dict) -> None:
    """Append `record` as one JSON line to $BNPAPER_PROGRESS, if set (one short write: lines of
    parallel workers do not interleave); a worker that cannot reach the file reports nothing."""
    path = os.environ.get(ENV)
    if not path:
        return
    try:
        with open(path, "a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError:
        pass


class Counter:
    """Counts the finished units of one job (`total` of them, `done` already there, e.g. from
    the cache) and reports each: what, done, total, the first count and the seconds since the
    counter started. With `every`, a line is written only when `every` seconds passed since
    the last one (for steps that are many and usually fast)."""

    def __init__(
        self,
        what: str,
        total: int | None = None,
        done: int = 0,
        verb: str = "trained",
        every: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.what, self.total, self.done, self.first, self.verb = what, total, done, done, verb
        self.every, self.clock = every, clock
        self.start = self.last = clock()

    def add(self, n: int = 1, seconds: float | None = None, detail: str = "") -> None:
        """`n` more units finished (`seconds`: the time the last one took, where known)."""
        self.done += n
        now = self.clock()
        if self.every and now - self.last < self.every:
            return
        self.last = now
        report(
            {
                "what": self.what,
                "done": self.done,
                "total": self.total,
                "first": self.first,
                "elapsed": round(now - self.start, 3),
                "verb": self.verb,
                "seconds": seconds,
                "detail": detail,
            }
        )

    def begin(self) -> None:
        """Report the start (the runner prints how many units are to go)."""
        self.add(0)


_COUNTERS: dict[str, Counter] = {}


def counter(what: str, verb: str = "trained") -> Counter:
    """This process's running count of `what` (units of unknown total, e.g. single models)."""
    return _COUNTERS.setdefault(what, Counter(what, verb=verb))
