"""The command line: run the notebooks, print a notebook's parameters, write the report.

python -m bnpaper reproduce [--dataset D] [--budget B] [--only 01 03] [-p key=v | -p 03.key=v]
python -m bnpaper reproduce --reference     # the reference run: writes figures/ and results/
python -m bnpaper matrix [--reference]      # every configuration of params/matrix.yaml (full)
python -m bnpaper params 03 [--dataset D] [--budget B] [-p key=v] > p.yaml   # for papermill -f
python -m bnpaper report [--readme]
"""

from __future__ import annotations

import argparse
import sys

from .config import BUDGETS, ConfigError


def _override(text: str) -> tuple[str, object]:
    from .params import load_yaml

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"-p expects key=value or NN.key=value, got {text!r}")
    key, value = text.split("=", 1)
    return key.strip(), load_yaml(value)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        default="fashion_mnist",
        help="mnist, fashion_mnist (default, offline), cifar10, cifar100",
    )
    p.add_argument("--budget", default="quick", help=f"one of {list(BUDGETS)} (default quick)")
    p.add_argument(
        "-p",
        "--param",
        action="append",
        type=_override,
        default=[],
        metavar="KEY=VALUE",
        help="set a parameter (YAML value); NN.key=value for notebook NN only",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bnpaper",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="run the notebooks with papermill, then the report")
    _common(rep)
    rep.add_argument("--only", nargs="+", default=None, help="notebook numbers, e.g. 01 03")
    rep.add_argument("--out", default=None, help="folder for executed notebooks (default runs/)")
    rep.add_argument(
        "--reference",
        action="store_true",
        help="the reference run: write the repository's figures/ and results/",
    )
    rep.add_argument("--no-report", action="store_true", help="skip the report at the end")
    mx = sub.add_parser(
        "matrix",
        help="run every configuration of a matrix file (default "
        "params/matrix.yaml, the full budget), then the report",
    )
    mx.add_argument("--file", default=None, help="a matrix file (default params/matrix.yaml)")
    mx.add_argument("--out", default=None, help="folder for executed notebooks (default runs/)")
    mx.add_argument(
        "--reference",
        action="store_true",
        help="write the repository's figures/ and results/ (one folder per configuration)",
    )
    pp = sub.add_parser("params", help="print one notebook's resolved parameters as flat YAML")
    pp.add_argument("notebook", help="e.g. 03 or 03_lira")
    _common(pp)
    rp = sub.add_parser("report", help="collect results/*.json into figures/REPORT.md, print it")
    rp.add_argument("--readme", action="store_true", help="also update the README's table")
    args = parser.parse_args(argv)

    from . import params, report, reproduce

    try:
        if args.command == "params":
            over = {"dataset": args.dataset, "budget": args.budget, **dict(args.param)}
            print(params.flat_file(args.notebook, over), end="")
            return 0
        if args.command == "reproduce":
            records = reproduce.run(
                args.dataset,
                args.budget,
                args.only,
                dict(args.param),
                args.out,
                reference=args.reference,
            )
            for r in records:
                print(f"[bnpaper] {r.notebook}: {r.seconds:.0f} s -> {r.output}")
            print(f"[bnpaper] total: {sum(r.seconds for r in records):.0f} s")
            if args.no_report or not args.reference:
                return 0
        if args.command == "matrix":
            from pathlib import Path

            records = reproduce.run_matrix(
                Path(args.file) if args.file else None, args.reference, args.out
            )
            print(f"[bnpaper] matrix total: {sum(r.seconds for r in records) / 60:.1f} min")
            if not args.reference:
                return 0
        print(report.write_report())
        if args.command == "report" and args.readme:
            report.update_readme()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except reproduce.NotebookFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
