"""``margin-solver demo``: the main job on built-in data."""

from __future__ import annotations

import argparse

from margin_solver.cli import EXIT_OK

NAME = "demo"
HELP = "run the demonstration on data from the paper's model and write results/"
EXAMPLE = "margin-solver demo --out results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="results", help="output folder (default: results)")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default: 0)")


def run(args: argparse.Namespace) -> int:
    from margin_solver.bench.demo import format_report, run_demo

    report = run_demo(args.out, seed=args.seed)
    print(format_report(report))
    print("\nfiles written:\n" + "\n".join(f"  {f}" for f in report["files"]))
    return EXIT_OK
