"""Command-line interface: ``margin-solver VERB ...``.

Each verb lives in its own module of this package and exposes ``NAME``, ``HELP``,
``EXAMPLE``, ``add_arguments(parser)`` and ``run(args) -> int``. Expected failures
(bad input, unreadable or unwritable files, bad arguments) print one line on stderr and exit
with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from types import ModuleType
from typing import NoReturn

from margin_solver import __version__
from margin_solver.validation import InvalidInputError

#: Verb modules, in the order ``--help`` lists them.
VERB_MODULES: tuple[str, ...] = ("demo", "check", "solve", "gd", "sweep", "bench")

EXIT_INPUT_ERROR = 2


class CLIError(Exception):
    """An expected failure to report as one line and a non-zero exit status."""


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _verbs() -> list[ModuleType]:
    return [importlib.import_module(f"margin_solver.cli.{name}") for name in VERB_MODULES]


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-command per verb."""
    verbs = _verbs()
    epilog = "examples:\n" + "\n".join(f"  {m.EXAMPLE}" for m in verbs)
    parser = _Parser(
        prog="margin-solver",
        description="Min-norm interpolators, theorem checks and GD endpoints for "
        "single-head softmax attention.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log diagnostics to stderr")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for module in verbs:
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.HELP,
            epilog=f"example:\n  {module.EXAMPLE}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``margin-solver`` command line and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return EXIT_INPUT_ERROR
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        return int(args._run(args))
    except (CLIError, InvalidInputError, OSError) as exc:
        # OSError: an unreadable input or unwritable output path (a directory, no permission).
        print(f"margin-solver {args.verb}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        print(f"margin-solver {args.verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
