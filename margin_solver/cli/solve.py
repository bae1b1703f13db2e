"""``margin-solver solve``: the min-norm interpolator P_R of a dataset file, optionally
certified."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from typing import TYPE_CHECKING

from margin_solver.cli import EXIT_CAVEAT, EXIT_OK, CLIError, check_outputs, exit_status

if TYPE_CHECKING:
    from margin_solver.minnorm.solve import MinNormResult

NAME = "solve"
HELP = "compute the min-norm interpolator P_R of a dataset (optionally with a certified bound)"
EXAMPLE = "margin-solver solve train.npz --R 0.5 --certify --json result.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the ``solve`` verb."""
    from margin_solver.core.ooc import DEFAULT_BLOCK_BYTES
    from margin_solver.minnorm.solve import DEFAULT_GAP_TOL, FORMS

    parser.add_argument(
        "data",
        help="dataset file (.npz with arrays X (n, T, d) and y (n,)) or dataset directory "
        "(X.npy + labels.npz: tokens on disk, read in blocks)",
    )
    parser.add_argument(
        "--R",
        type=float,
        required=True,
        help="radius of the ball ||p|| <= R (e.g. 100/sqrt(d) for near-hard attention)",
    )
    parser.add_argument("--certify", action="store_true", help="compute the global lower bound")
    parser.add_argument("--json", metavar="OUT", help="write the full result as JSON to OUT")
    parser.add_argument("--form", choices=FORMS, default="auto", help="dense or token-Gram form")
    parser.add_argument("--random-starts", type=int, default=2, help="random starts (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random starts")
    parser.add_argument("--max-iter", type=int, default=500, help="p-steps per start")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=math.inf,
        help="a guard on the whole solve, in seconds (default: none); when it acts, the best "
        "feasible point so far, status time_limit (exit 4)",
    )
    parser.add_argument(
        "--bound-time-limit",
        type=float,
        default=math.inf,
        help="a guard on the lower bound, in seconds (default: none; its stages have budgets "
        "of work, so the answer is the same on any machine); when it acts, status time_limit "
        "(exit 4)",
    )
    parser.add_argument(
        "--gap-tol",
        type=float,
        default=DEFAULT_GAP_TOL,
        help=f"largest relative gap to the lower bound certified as optimal, in (0, 1) "
        f"(default {DEFAULT_GAP_TOL:g})",
    )
    parser.add_argument(
        "--search-starts",
        type=int,
        default=None,
        help="further starts after the first ones (default: 8 when they leave a gap, see "
        "solve_min_norm's search_starts; 0 turns the search off; more is a more patient "
        "search, with a screen search_starts/8 times larger)",
    )
    parser.add_argument(
        "--p0",
        metavar="SOL.json",
        help="warm start: the p of a solution file (JSON with 'v' and 'p', e.g. from gd --json)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler (e.g. tcp://127.0.0.1:8786) for the passes over tokens on disk",
    )
    parser.add_argument(
        "--block-mb",
        type=float,
        help=f"MB of tokens on disk per block (default {DEFAULT_BLOCK_BYTES // 2**20})",
    )
    parser.add_argument(
        "--heads",
        type=int,
        default=1,
        help="attention heads H (default 1); H > 1 starts from the single-head solution and is "
        "never certified (exit 4 with --certify)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="hide the progress bars (shown on a terminal: lower bound, then the starts)",
    )


def run(args: argparse.Namespace) -> int:
    """Solve, print a summary, write JSON; return the exit status (docs/statuses.md).

    0 on success (with ``--certify``: only when certified), 3 without an answer (proven
    infeasible, no feasible point found, engine failure), 4 with a caveat (time or iteration
    limit, inaccurate, or ``--certify`` without a certificate).
    """
    from margin_solver.analysis.solutions import read_solution
    from margin_solver.core.data import load_dataset
    from margin_solver.core.fileio import write_json
    from margin_solver.core.ooc import execution
    from margin_solver.core.results import ConvergenceWarning

    check_outputs(args.json)
    block_bytes = None
    if args.block_mb is not None:
        if not 0 < args.block_mb < math.inf:
            raise CLIError(f"--block-mb must be a positive number, got {args.block_mb}.")
        block_bytes = max(1, int(args.block_mb * 2**20))
    data = load_dataset(args.data)
    p0 = None if args.p0 is None else read_solution(args.p0, data.d)[1]
    with execution(scheduler=args.scheduler, block_bytes=block_bytes):
        with warnings.catch_warnings():  # the summary states the status; one line on stderr
            warnings.simplefilter("ignore", ConvergenceWarning)
            result = _solve(args, data, p0)
        if args.json:
            write_json(args.json, result)
        print(_summary(result, data))  # evaluates on data: another pass over tokens on disk
    if args.json:
        print(f"wrote {args.json}")
    code = exit_status(result)
    if code == EXIT_OK and args.certify and not result.certified:
        code = EXIT_CAVEAT  # an answer, but not the certified one that was asked for
    if code != EXIT_OK:
        what = "not certified" if result.success else result.status
        hint = getattr(result, "radius_hint", None)
        if hint is not None and hint.finding == "found":
            what += f"; an interpolator exists at --R {hint.R_found:.6g}"
        print(f"margin-solver solve: {what} (exit {code}; see the status line)", file=sys.stderr)
    return code


def _solve(args: argparse.Namespace, data, p0) -> MinNormResult:
    from margin_solver.minnorm.multihead import solve_min_norm_heads
    from margin_solver.minnorm.solve import solve_min_norm

    heads = {} if args.heads == 1 else {"heads": args.heads}
    return (solve_min_norm_heads if heads else solve_min_norm)(
        data,
        R=args.R,
        certify=args.certify,
        form=args.form,
        n_random_starts=args.random_starts,
        seed=args.seed,
        max_iter=args.max_iter,
        bound_time_limit=args.bound_time_limit,
        time_limit=args.time_limit,
        gap_tol=args.gap_tol,
        search_starts=args.search_starts,
        p0=p0,
        progress=not args.no_progress and sys.stderr.isatty(),
        **heads,
    )


def _summary(result: MinNormResult, data) -> str:
    from margin_solver.core.results import classes_note

    heads = getattr(result, "heads", 1)
    lines = [
        f"P_R on {data!r}, R = {result.R:.6g} ({result.form} form"
        + (f", {heads} heads)" if heads > 1 else ")"),
        f"  status      {result.status}: {result.message}",
        f"  certified   {'yes' if result.certified else 'no'} (gap_tol {result.gap_tol:g}, "
        f"feas_tol {result.feas_tol:g}{', v rescaled' if result.repaired else ''})",
    ]
    note = classes_note(result.classes)
    if note is not None:
        lines.append(f"  labels      {note}")
    hint = getattr(result, "radius_hint", None)  # multi-head results have none
    if hint is not None:
        lines.append(f"  larger R    {hint.finding}: {hint.message}")
    if result.v is None:
        return "\n".join(lines)
    if not result.solution_present:
        lines.append(
            f"  best attempt: ||p|| {result.p_norm:.6g}, min margin "
            f"{result.min_margin:.9f} (start {result.start})"
        )
        return "\n".join(lines)
    from margin_solver.analysis.heads import head_metrics

    metrics = head_metrics(result.v, result.p, data)  # the solver's own checked (v, p)
    lines += [
        f"  ||v||       {result.norm:.6g}   (margin 1/||v|| = {1 / result.norm:.6g})",
        f"  ||p||       {result.p_norm:.6g}",
        f"  min margin  {result.min_margin:.9f}",
    ]
    if result.lower_bound is not None:
        lines.append(
            f"  lower bound {result.lower_bound:.6g} ({result.bound.status}, "
            f"{result.bound.method}, {result.bound.nodes} SVMs)   gap {result.gap:.3g}"
        )
    starts = ", ".join(
        f"{k} {v:.6g}" if math.isfinite(v) else f"{k} inf" for k, v in result.start_norms.items()
    )
    lines.append(f"  starts      {starts}")
    lines.append(f"  train error {metrics.error:.4g}")
    if metrics.attn_signal_clean is not None:
        noisy = metrics.attn_signal_noisy
        lines.append(
            f"  attention on signal: clean {metrics.attn_signal_clean:.4g}, noisy "
            + ("n/a" if noisy is None else f"{noisy:.4g}")
        )
    return "\n".join(lines)
