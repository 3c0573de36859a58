"""The code a cached unit runs: a module's import closure within the package, and its hash.

The hash covers exactly the closure's module files (names and contents); it is part of every
cache key (`bnpaper.store`).

The closure is read from the code, not from what happens to be imported: every `import` and
`from ... import` of a package module in the module's syntax tree (inside functions too),
followed transitively. `__init__` is left out: it only re-exports, and importing any module runs
it, so counting it would make every unit depend on every module.

The package's files are read once per process, when this module is first imported (`import
bnpaper` imports it, together with every module of the package, in the same moment): the sources
hashed are the ones this process loaded and runs, so an edit after import never passes for new
code; it takes effect, under its own key, in the next process.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

PACKAGE = Path(__file__).resolve().parent
NAME = PACKAGE.name  # "bnpaper"


def read_sources(package: Path = PACKAGE) -> dict[str, bytes]:
    """{module name: source bytes} of every module file of `package` (no `__init__`)."""
    return {p.stem: p.read_bytes() for p in sorted(package.glob("*.py")) if p.stem != "__init__"}


SOURCES = read_sources()  # the files as this process loaded them (see the module docstring)


def module_name(name: str) -> str:
    """'bnpaper.units' or 'units' -> 'units'."""
    return name[len(NAME) + 1 :] if name.startswith(NAME + ".") else name


def direct_imports(source: bytes, modules: set[str]) -> set[str]:
    """The package modules (names in `modules`) that `source` imports anywhere in its code."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == NAME and len(parts) > 1:
                    found.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".") if node.module else []
            if node.level == 0 and (not parts or parts[0] != NAME):
                continue  # another package
            if node.level == 0:
                parts = parts[1:]
            if parts:  # from .train import fit  /  from bnpaper.train import fit
                found.add(parts[0])
            else:  # from . import shadow, mia  (names that are not modules come from __init__)
                found.update(a.name for a in node.names if a.name in modules)
    return found & modules


@dataclass(frozen=True)
class Code:
    """The code of a unit: its module, the modules of its import closure, their sources' hash."""

    module: str
    closure: tuple[str, ...]
    hash: str

    def as_dict(self) -> dict:
        return {"module": self.module, "closure": list(self.closure), "hash": self.hash}


def closure(module: str, sources: Mapping[str, bytes] | None = None) -> tuple[str, ...]:
    """The sorted names of `module` and every package module it imports, transitively."""
    sources = SOURCES if sources is None else sources
    start = module_name(module)
    if start not in sources:
        raise KeyError(f"{module!r} is not a module file of the {NAME} package")
    seen, todo = {start}, [start]
    while todo:
        for dep in direct_imports(sources[todo.pop()], set(sources)) - seen:
            seen.add(dep)
            todo.append(dep)
    return tuple(sorted(seen))


def code(module: str, sources: Mapping[str, bytes] | None = None) -> Code:
    """`module`'s closure and the sha256 over the names and contents of exactly those files."""
    if sources is None:
        return _code_of_this_process(module_name(module))
    names = closure(module, sources)
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode() + b"\0" + sources[name] + b"\0")
    return Code(module_name(module), names, h.hexdigest())


@functools.cache
def _code_of_this_process(module: str) -> Code:
    return code(module, SOURCES)
