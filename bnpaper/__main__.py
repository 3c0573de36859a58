"""Command line: `python -m bnpaper reproduce --dataset fashion_mnist --budget quick [--only 01]`."""
from __future__ import annotations

import argparse
import sys

import yaml

from .config import BUDGETS, ConfigError


def _override(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"-p expects key=value, got {text!r}")
    key, value = text.split("=", 1)
    return key.strip(), yaml.safe_load(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bnpaper", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="run the notebooks with papermill, then the report")
    rep.add_argument("--dataset", default="fashion_mnist",
                     help="mnist, fashion_mnist (default, offline), cifar10, cifar100")
    rep.add_argument("--budget", default="quick", help=f"one of {list(BUDGETS)} (default quick)")
    rep.add_argument("--only", nargs="+", default=None, help="notebook numbers, e.g. 01 03")
    rep.add_argument("-p", "--param", action="append", type=_override, default=[],
                     metavar="KEY=VALUE", help="override one parameter (YAML value)")
    rep.add_argument("--out", default=None, help="folder for executed notebooks (default runs/)")
    rep.add_argument("--no-report", action="store_true", help="skip the report at the end")
    rp = sub.add_parser("report", help="collect results/*.json into figures/REPORT.md, print it")
    rp.add_argument("--readme", action="store_true", help="also update the README's table")
    args = parser.parse_args(argv)

    from . import report, reproduce
    try:
        if args.command == "reproduce":
            import papermill as pm
            try:
                records = reproduce.run(args.dataset, args.budget, args.only, dict(args.param),
                                        args.out)
            except pm.PapermillExecutionError as exc:
                print(f"error: notebook failed: {exc.ename}: {exc.evalue}", file=sys.stderr)
                return 1
            for r in records:
                print(f"[bnpaper] {r.notebook}: {r.seconds:.0f} s -> {r.output}")
            print(f"[bnpaper] total: {sum(r.seconds for r in records):.0f} s")
            if args.no_report:
                return 0
        print(report.write_report())
        if args.command == "report" and args.readme:
            report.update_readme()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
