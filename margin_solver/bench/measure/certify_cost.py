"""What a certificate costs: ``solve_min_norm(certify=True)`` beside ``global_lower_bound``.

On the paper's model (d = 2000, kappa = 4, eta = 0.15, seed 0) at R = 100 / sqrt(d), where
attention is nearly hard and the hard-selection bound LB is what certifies, each instance
runs, side by side in one process:

``bound``
    ``global_lower_bound(X, y)``: LB alone (its branch-and-bound over token sets); its work is
    its SVMs (``nodes``).
``certify``
    ``solve_min_norm(X, y, R, certify=True)``: the bound and a certified point; its work is
    ``MinNormResult.work`` (the bound's SVMs plus the v-step solves of every descent and
    polish).

The table gives both works and times and their ratios (the target of issue 40: at most 3x
wherever the bound closes), with the solve's status, gap, winning start and number of starts
run. Seconds depend on the machine and its load; the works do not.

With ``--study finite_r``, another table: the certified solve at n = 40, T = 2 and
R sqrt(d) in {1, 3, 10}, where attention is soft and the finite-R stages decide the gap: the
gap proven at the default budgets of work, the stages that ran, the bound's SVMs, the
solve's work and seconds.

    .venv/bin/python -m margin_solver.bench.measure.certify_cost \\
        --out docs/results/certify_cost.json
    # fewer cases: --cases 100:2 30:4
    .venv/bin/python -m margin_solver.bench.measure.certify_cost --study finite_r \\
        --out docs/results/certify_finite_r.json
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

from margin_solver.bench.provenance import run_metadata
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.core.results import ConvergenceWarning
from margin_solver.minnorm.solve import solve_min_norm

#: ``(n, T)`` of the default cases (issue 40's targets).
CASES = ((50, 2), (100, 2), (200, 2), (30, 4))
D, KAPPA, ETA, R_SQRT_D = 2000, 4.0, 0.15, 100.0
#: The finite-R table: n, and the values of R sqrt(d).
FINITE_R_SAMPLES, FINITE_R_SCALES = 40, (1.0, 3.0, 10.0)


def _paper(n: int, T: int, seed: int = 0):
    return PaperDistribution(d=D, T=T, snr=math.sqrt(KAPPA / n), eta=ETA).sample(n, seed=seed)


def run_finite_r(n: int, R_sqrt_d: float, seed: int = 0) -> dict:
    """The certified solve at T = 2 and ``R = R_sqrt_d / sqrt(d)``: its gap, stages and work."""
    data = _paper(n, 2, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        res = solve_min_norm(data, R=R_sqrt_d / math.sqrt(D), certify=True)
        seconds = time.perf_counter() - t0
    return {
        "n": n,
        "R_sqrt_d": R_sqrt_d,
        "status": res.status,
        "gap": res.gap,
        "stages": res.bound.method,
        "bound_status": res.bound.status,
        "nodes": res.nodes,
        "work": res.work,
        "seconds": seconds,
    }


def run_case(n: int, T: int, seed: int = 0) -> dict:
    """One instance: LB alone, then the certified solve, with their work and seconds."""
    data = _paper(n, T, seed)
    R = R_SQRT_D / math.sqrt(D)
    with warnings.catch_warnings():  # a failure status is recorded in the row
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        bound = global_lower_bound(data.X, data.y)
        bound_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = solve_min_norm(data, R=R, certify=True)
        certify_s = time.perf_counter() - t0
    return {
        "n": n,
        "T": T,
        "bound_status": bound.status,
        "bound_work": bound.nodes,
        "bound_s": bound_s,
        "certify_status": res.status,
        "gap": res.gap,
        "certify_work": res.work,
        "certify_s": certify_s,
        "work_ratio": res.work / bound.nodes,
        "time_ratio": certify_s / bound_s,
        "start": res.start,
        "starts": len(res.start_norms),
    }


def _case(text: str) -> tuple[int, int]:
    try:
        n, T = (int(k) for k in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a case is N:T, got {text!r}") from None
    if n < 2 or T < 1:
        raise argparse.ArgumentTypeError(f"a case needs n >= 2 and T >= 1, got {text!r}")
    return n, T


def main(argv: list[str] | None = None) -> int:
    """Run the cases, print one line each, and write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        type=_case,
        nargs="+",
        default=list(CASES),
        metavar="N:T",
        help="instances as n:T (default: " + " ".join(f"{n}:{T}" for n, T in CASES) + ")",
    )
    parser.add_argument(
        "--study",
        choices=("cost", "finite_r"),
        default="cost",
        help="cost: the cases against the bound alone (default); finite_r: the certified "
        f"solve at n = {FINITE_R_SAMPLES}, R sqrt(d) in "
        + ", ".join(f"{r:g}" for r in FINITE_R_SCALES),
    )
    parser.add_argument(
        "--n",
        type=int,
        default=FINITE_R_SAMPLES,
        help=f"the finite_r study's samples (default: {FINITE_R_SAMPLES})",
    )
    parser.add_argument(
        "--R-scales",
        type=float,
        nargs="+",
        default=list(FINITE_R_SCALES),
        metavar="S",
        help="the finite_r study's R sqrt(d) (default: "
        + " ".join(f"{r:g}" for r in FINITE_R_SCALES)
        + ")",
    )
    parser.add_argument("--out", metavar="FILE.json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)  # before the run: its load average
    rows = []
    if args.study == "finite_r":
        for scale in args.R_scales:
            row = run_finite_r(args.n, scale)
            rows.append(row)
            print(
                f"n={row['n']} R sqrt(d)={scale:g}: {row['status']} gap {row['gap']:.3g} "
                f"({row['stages']}, {row['bound_status']}) {row['nodes']} SVMs, work "
                f"{row['work']}, {row['seconds']:.1f} s",
                flush=True,
            )
    else:
        for n, T in args.cases:
            row = run_case(n, T)
            rows.append(row)
            print(
                f"n={n} T={T}: bound {row['bound_status']} {row['bound_work']} SVMs "
                f"{row['bound_s']:.2f} s | certify {row['certify_status']} gap "
                f"{row['gap']:.2g} work {row['certify_work']} {row['certify_s']:.2f} s | "
                f"ratios work {row['work_ratio']:.2f} time {row['time_ratio']:.2f} | "
                f"{row['starts']} starts, won by {row['start']}",
                flush=True,
            )
    if args.out:
        write_json(args.out, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
