"""``margin-solver gd``: run gradient descent on a dataset file and report its trajectory."""

from __future__ import annotations

import argparse
import math
import sys
import warnings

from margin_solver.cli import CLIError, check_outputs, exit_status

NAME = "gd"
HELP = "gradient descent on the logistic loss (two-step, constant, normalised), with trajectory"
EXAMPLE = "margin-solver gd train.npz --test test.npz --json gd.json --plot gd.png"

_SHOWN = (
    ("step", "step"),
    ("loss", "loss"),
    ("train_error", "train err"),
    ("test_error_clean", "test err (clean)"),
    ("attn_signal_clean", "attn clean"),
    ("attn_signal_noisy", "attn noisy"),
    ("norm_v", "||v||"),
    ("norm_p", "||p||"),
    ("normalized_margin", "norm. margin"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the ``gd`` verb."""
    from margin_solver.gd.endpoints import SCHEDULES

    parser.add_argument("data", metavar="DATA.npz", help="training set (.npz from Dataset.save)")
    parser.add_argument("--test", metavar="TEST.npz", help="test set for test errors")
    parser.add_argument("--schedule", choices=SCHEDULES, default="two-step")
    parser.add_argument("--steps", type=int, help="steps (not for two-step; default 1000)")
    parser.add_argument("--step-size", type=float, help="step of constant / normalized")
    parser.add_argument("--beta0", type=float, help="first step of two-step (default: scaled)")
    parser.add_argument("--beta1", type=float, help="second step of two-step (default: scaled)")
    parser.add_argument("--weight-decay", type=float, default=0.0, help="lambda (default 0)")
    parser.add_argument("--R", type=float, help="norm cap on p")
    parser.add_argument("--init", choices=("zero", "random"), default="zero")
    parser.add_argument("--seed", type=int, help="seed of the random initialisation")
    parser.add_argument("--form", choices=("auto", "dense", "kernel"), default="auto")
    parser.add_argument("--record-every", type=int, help="trajectory spacing in steps")
    parser.add_argument(
        "--heads",
        type=int,
        default=1,
        help="attention heads H (default 1; H > 1 wants --init random, else the heads stay equal)",
    )
    parser.add_argument(
        "--json", metavar="OUT", help="write the result as JSON (updated as it runs)"
    )
    parser.add_argument(
        "--plot", metavar="OUT.pdf", help="write a trajectory figure (.pdf, .svg or .png)"
    )


def run(args: argparse.Namespace) -> int:
    """Run GD, print the trajectory table, optionally write JSON and a figure.

    Returns :func:`margin_solver.cli.exit_status` of the result: 0, or 3 when GD diverged or
    its two steps did not fit the training set (the warning then goes to stderr).
    """
    from margin_solver.core.data import load_dataset
    from margin_solver.core.fileio import write_json
    from margin_solver.core.results import ConvergenceWarning, classes_note
    from margin_solver.gd.endpoints import gradient_descent

    check_outputs(args.json)
    check_outputs(args.plot, kind="figure")
    if args.plot:
        from margin_solver.bench.style import figure_format

        figure_format(args.plot)  # an unknown suffix fails here, before GD runs
    train = load_dataset(args.data)
    test = load_dataset(args.test) if args.test else None
    if args.steps is not None and args.schedule == "two-step":
        raise CLIError("--steps does not apply to --schedule two-step (always 2 steps).")
    rows: list[dict] = []

    def progress(row: dict) -> None:
        rows.append(row)
        if args.json:
            write_json(args.json, {"status": "running", "trajectory": rows})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        result = gradient_descent(
            train,
            schedule=args.schedule,
            steps=args.steps,
            step_size=args.step_size,
            beta0=args.beta0,
            beta1=args.beta1,
            weight_decay=args.weight_decay,
            R=args.R,
            init=args.init,
            seed=args.seed,
            form=args.form,
            test=test,
            record_every=args.record_every,
            callback=progress,
            heads=args.heads,
        )
    for warning in caught:  # one line each, not Python's source-location format
        print(f"margin-solver gd: {warning.category.__name__}: {warning.message}", file=sys.stderr)
    print(f"{result.status}: {result.message}")
    note = classes_note(result.classes)
    if note is not None:
        print(f"labels: {note}")
    sizes = ", ".join(f"{s:.4g}" for s in result.step_sizes)
    print(f"schedule={result.schedule} steps={result.nit} step sizes=[{sizes}] form={result.form}")
    print(_table(result.trajectory))
    if args.json:
        write_json(args.json, result)
        print(f"wrote {args.json}")
    if args.plot:
        from margin_solver.bench.plots import plot_gd_trajectory

        title = f"GD ({result.schedule}) on {args.data}"
        plot_gd_trajectory(result.trajectory, args.plot, title=title)
        print(f"wrote {args.plot}")
    return exit_status(result)


def _table(traj: dict) -> str:
    cols = [(k, h) for k, h in _SHOWN if not all(math.isnan(x) for x in traj[k])]
    widths = [max(len(h), 10) for _, h in cols]
    lines = ["  ".join(h.rjust(w) for (_, h), w in zip(cols, widths))]
    for i in range(len(traj["step"])):
        cells = []
        for (key, _), w in zip(cols, widths):
            x = traj[key][i]
            cells.append(str(int(x)).rjust(w) if key == "step" else f"{x:.4g}".rjust(w))
        lines.append("  ".join(cells))
    return "\n".join(lines)
