"""``margin-solver check``: the theorems' conditions, the predicted regime and, given a
solution and a test set, the observed one."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from margin_solver.cli import EXIT_OK, CLIError, check_outputs

if TYPE_CHECKING:
    from margin_solver.theory import Constants

NAME = "check"
HELP = "check the benign-overfitting theorems' conditions on a dataset (scaling-level verdicts)"
EXAMPLE = (
    "margin-solver check train.npz --test test.npz --solution sol.json --json check.json; "
    "margin-solver check train.npz --method two-step-gd --steps 0.5,20"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the verb's arguments."""
    from margin_solver.theory import METHODS, Constants

    parser.add_argument("data", metavar="DATA.npz", help="training set (.npz with X and y)")
    parser.add_argument("--test", metavar="TEST.npz", help="test set for the observed behaviour")
    parser.add_argument(
        "--solution", metavar="SOL.json", help="fitted model: JSON object with lists 'v' and 'p'"
    )
    parser.add_argument("--json", metavar="OUT", help="also write the full report as JSON")
    parser.add_argument(
        "--method",
        help=f"method the prediction is for: {', '.join(METHODS)} (default: inferred from "
        "--solution, else min-norm)",
    )
    parser.add_argument(
        "--R",
        metavar="R",
        help="min-norm's attention radius (default: the solution's, else large R)",
    )
    parser.add_argument(
        "--steps",
        metavar="BETA0,BETA1",
        help="two-step GD's step sizes (default: the solution's, else the package defaults)",
    )
    parser.add_argument(
        "--heads",
        type=int,
        default=1,
        help="attention heads H of the model (default 1); the theorems cover one head, so "
        "H > 1 predicts 'outside the theory' and states the rows per head",
    )
    # The calibration table is not a number: the API's Constants(calibration=...) sets it.
    names = ", ".join(f.name for f in dataclasses.fields(Constants) if f.name != "calibration")
    parser.add_argument(
        "--constant",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="override a threshold constant (repeatable; a kappa threshold or gd_upper_C "
        f"replaces the calibration table per d / n^2 and T); names: {names}",
    )


def parse_constants(items: list[str]) -> Constants:
    """Build :class:`Constants` from ``NAME=VALUE`` strings."""
    from margin_solver.theory import Constants

    fields = {f.name: f for f in dataclasses.fields(Constants) if f.name != "calibration"}
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
    from margin_solver.theory.constants import THRESHOLDS

    if set(values) & set(THRESHOLDS):
        # Thresholds given by hand replace the calibration table (its entries would
        # otherwise decide and the given values go unused).
        return Constants(**values, calibration=())
    return Constants(**values)


def _number(raw: str, flag: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise CLIError(f"{flag} needs a number, got {raw!r}.") from None


def parse_method(args: argparse.Namespace) -> dict[str, object]:
    """``method``, ``R`` and ``steps`` keywords of :func:`check_conditions` from the flags."""
    from margin_solver.theory import METHODS

    if args.method is not None and args.method not in METHODS:
        raise CLIError(f"--method must be one of {', '.join(METHODS)}, got {args.method!r}.")
    R = None if args.R is None else _number(args.R, "--R")
    steps = None
    if args.steps is not None:
        parts = args.steps.split(",")
        if len(parts) != 2:
            raise CLIError(f"--steps expects BETA0,BETA1 (two numbers), got {args.steps!r}.")
        steps = tuple(_number(p, "--steps") for p in parts)
    return {"method": args.method, "R": R, "steps": steps}


def run(args: argparse.Namespace) -> int:
    """Run the check, print the table, write JSON when asked; 0 whenever the check ran."""
    from margin_solver.core.data import load_dataset
    from margin_solver.core.fileio import write_json
    from margin_solver.theory import check_conditions

    constants = parse_constants(args.constant)
    method = parse_method(args)
    check_outputs(args.json)
    train = load_dataset(args.data)
    test = None if args.test is None else load_dataset(args.test)
    report = check_conditions(
        train,
        solution=args.solution,
        test=test,
        constants=constants,
        heads=args.heads,
        **method,
    )
    print(report)
    if args.json:
        path = write_json(args.json, report)
        print(f"report written to {path}")
    return EXIT_OK
