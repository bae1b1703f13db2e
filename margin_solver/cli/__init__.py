"""Command-line interface: ``margin-solver VERB ...``.

Each verb lives in its own module of this package and exposes ``NAME``, ``HELP``,
``EXAMPLE``, ``add_arguments(parser)`` and ``run(args) -> int``. A verb module imports only
the standard library at its top; ``add_arguments`` runs only for the verb on the command line
(or whose help is shown), so ``margin-solver solve`` never loads the experiment framework
(matplotlib, joblib, Dask). Expected failures
(bad input, unreadable or unwritable files, bad arguments) print one line on stderr and exit
with status 2.

Exit statuses (docs/statuses.md): 0 the method did what it set out to do; 2 bad input;
3 a well-formed problem with no answer (proven infeasible, no feasible point found, an engine
failure, GD that diverged or did not fit when meant to); 4 an answer with a caveat (iteration
or time limit, inaccurate, not certified when certification was asked for); 130 interrupted;
141 the reader of standard output went away (``margin-solver ... | head``): the command stops
quietly, with the status a shell gives a command killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import NoReturn

from margin_solver._version import __version__
from margin_solver.core.validation import InvalidInputError

#: Verb modules, in the order ``--help`` lists them.
VERB_MODULES: tuple[str, ...] = ("demo", "make_data", "check", "solve", "gd", "sweep", "bench")

EXIT_OK = 0
EXIT_INPUT_ERROR = 2
EXIT_NO_ANSWER = 3
EXIT_CAVEAT = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


def exit_status(result: object) -> int:
    """The exit status for a solver result: 0 on success, 4 when a usable solution with a
    caveat is attached, 3 when there is none (see
    :data:`margin_solver.core.results.STATUS_TABLE`)."""
    if result.success:  # type: ignore[attr-defined]
        return EXIT_OK
    return EXIT_CAVEAT if result.solution_present else EXIT_NO_ANSWER  # type: ignore[attr-defined]


class CLIError(Exception):
    """An expected failure to report as one line and a non-zero exit status."""


def check_outputs(*paths: str | None, kind: str = "result") -> None:
    """Refuse output paths that are not regular files or are files this package did not
    write as outputs of ``kind``, before any work starts (see
    :func:`margin_solver.core.fileio.check_replaceable`); None entries are options not given."""
    from margin_solver.core.fileio import check_replaceable

    for path in paths:
        if path is not None:
            check_replaceable(path, kind)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _VerbParser(_Parser):
    """A verb's parser that adds the verb's arguments the first time it parses or shows help.

    Building every verb's arguments up front would import what each verb needs (the sweep
    registry, the studies, matplotlib) just to list the verbs.
    """

    def __init__(self, *args, add_arguments: Callable[[argparse.ArgumentParser], None], **kwargs):
        super().__init__(*args, **kwargs)
        self._add_arguments: Callable[[argparse.ArgumentParser], None] | None = add_arguments

    def _ensure_arguments(self) -> None:
        if self._add_arguments is not None:
            add, self._add_arguments = self._add_arguments, None
            add(self)

    def parse_known_args(self, args=None, namespace=None):
        self._ensure_arguments()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._ensure_arguments()
        return super().format_help()

    def format_usage(self) -> str:
        self._ensure_arguments()
        return super().format_usage()


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
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_VerbParser)
    for module in verbs:
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.HELP,
            epilog=f"example:\n  {module.EXAMPLE}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            add_arguments=module.add_arguments,
        )
        p.set_defaults(_run=module.run)
        # -v also after the verb; SUPPRESS keeps a -v given before the verb when absent here
        p.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="log diagnostics to stderr (as before the verb)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``margin-solver`` command line and return its exit status.

    A closed standard output (``margin-solver ... | head``) ends the command quietly with
    :data:`EXIT_BROKEN_PIPE`, as the Python documentation recommends for ``BrokenPipeError``
    (standard output is pointed at ``os.devnull`` so that the interpreter's final flush does
    not fail again).
    """
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # buffered output meets a closed pipe here
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return EXIT_INPUT_ERROR
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        return int(args._run(args))
    except BrokenPipeError:
        raise
    except (CLIError, InvalidInputError, OSError) as exc:
        # OSError: an unreadable input or unwritable output path (a directory, no permission).
        # InvalidInputError includes InsufficientMemoryError (a MemoryError refused up front).
        print(f"margin-solver {args.verb}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except MemoryError as exc:
        # An allocation no memory check foresaw: still one line, and the input is too large.
        print(
            f"margin-solver {args.verb}: error: out of memory ({exc}); use a smaller input",
            file=sys.stderr,
        )
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        print(f"margin-solver {args.verb}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _stdout_to_devnull() -> None:
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stand-in stream (tests) has no descriptor
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- lives until the interpreter exits
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
