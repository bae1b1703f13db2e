"""``margin-solver check``: the theorems' conditions, the predicted regime and, given a
solution and a test set, the observed one."""

from __future__ import annotations

import argparse
import dataclasses

from margin_solver.cli import EXIT_OK, CLIError, check_outputs
from margin_solver.data import load_dataset
from margin_solver.fileio import write_json
from margin_solver.theory import Constants, check_conditions

NAME = "check"
HELP = "check the benign-overfitting theorems' conditions on a dataset (scaling-level verdicts)"
EXAMPLE = "margin-solver check train.npz --test test.npz --solution sol.json --json check.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the verb's arguments."""
    parser.add_argument("data", metavar="DATA.npz", help="training set (.npz with X and y)")
    parser.add_argument("--test", metavar="TEST.npz", help="test set for the observed behaviour")
    parser.add_argument(
        "--solution", metavar="SOL.json", help="fitted model: JSON object with lists 'v' and 'p'"
    )
    parser.add_argument("--json", metavar="OUT", help="also write the full report as JSON")
    names = ", ".join(f.name for f in dataclasses.fields(Constants))
    parser.add_argument(
        "--constant",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help=f"override a threshold constant (repeatable); names: {names}",
    )


def parse_constants(items: list[str]) -> Constants:
    """Build :class:`Constants` from ``NAME=VALUE`` strings."""
    fields = {f.name: f for f in dataclasses.fields(Constants)}
    values: dict[str, float | int] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in fields:
            raise CLIError(
                f"--constant expects NAME=VALUE with NAME in {sorted(fields)}, got {item!r}."
            )
        integer = fields[name].type in ("int", int)
        try:
            values[name] = int(raw) if integer else float(raw)
        except ValueError:
            kind = "an integer" if integer else "a number"
            raise CLIError(f"--constant {name} needs {kind}, got {raw!r}.") from None
    return Constants(**values)


def run(args: argparse.Namespace) -> int:
    """Run the check, print the table, write JSON when asked; 0 whenever the check ran."""
    constants = parse_constants(args.constant)
    check_outputs(args.json)
    train = load_dataset(args.data)
    test = None if args.test is None else load_dataset(args.test)
    report = check_conditions(train, solution=args.solution, test=test, constants=constants)
    print(report)
    if args.json:
        path = write_json(args.json, report)
        print(f"report written to {path}")
    return EXIT_OK
