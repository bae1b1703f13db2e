"""Certified gaps of the min-norm solver at R sqrt(d) = 100: the measurement behind ``gap_tol``.

For each (n, d, T, kappa, seed) a training set is drawn from the paper's model (eta = 0.15)
and :func:`margin_solver.minnorm.solve.solve_min_norm` runs with ``certify=True`` at
``R = 100 / sqrt(d)``; the relative gap ``(norm - lower_bound) / norm`` is recorded with the
bound's status. The summary gives quantiles of the gaps where the bound was solved exactly
and lists every run whose gap exceeds the default ``gap_tol`` (docs/statuses.md).

    # n in {8, 12, 16}: 72 runs
    .venv/bin/python -m margin_solver.bench.measure.certified_gaps
    # n in {40, 100, 200}, d = 2000
    .venv/bin/python -m margin_solver.bench.measure.certified_gaps --large
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
import warnings

import numpy as np

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.core.results import ConvergenceWarning
from margin_solver.minnorm.solve import DEFAULT_GAP_TOL, solve_min_norm


def run(sizes, dims, tokens, kappas, seeds, bound_time_limit):
    """One row ``(n, d, T, kappa, seed, bound status, gap, status, seconds)`` per solve."""
    rows = []
    for n, d, T, kappa, seed in itertools.product(sizes, dims, tokens, kappas, seeds):
        data = PaperDistribution(d=d, T=T, snr=math.sqrt(kappa / n), eta=0.15).sample(n, seed=seed)
        start = time.perf_counter()
        with warnings.catch_warnings():  # a failure status is recorded in the row
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = solve_min_norm(
                data, R=100 / math.sqrt(d), certify=True, bound_time_limit=bound_time_limit
            )
        rows.append(
            (
                n,
                d,
                T,
                kappa,
                seed,
                res.bound.status,
                res.gap,
                res.status,
                time.perf_counter() - start,
            )
        )
    return rows


def gap_table(rows) -> list[dict]:
    """Per n: runs, runs with the bound solved exactly, their median and largest gap, and
    the runs above ``gap_tol``."""
    out = []
    for n in sorted({r[0] for r in rows}):
        group = [r for r in rows if r[0] == n]
        exact = [r[6] for r in group if r[5] == "optimal"]
        out.append(
            {
                "n": n,
                "runs": len(group),
                "bound exact": len(exact),
                "median gap": float(np.median(exact)) if exact else None,
                "largest gap": max(exact) if exact else None,
                f"gap > {DEFAULT_GAP_TOL:g}": sum(not r[6] <= DEFAULT_GAP_TOL for r in group),
                "median s": float(np.median([r[8] for r in group])),
            }
        )
    return out


def summary(rows) -> str:
    """Quantiles of the gaps with the bound solved exactly, and the runs above gap_tol."""
    exact = np.array([r[6] for r in rows if r[5] == "optimal"])
    lines = [f"{len(rows)} runs, {len(exact)} with the lower bound solved exactly"]
    if exact.size:
        q = np.quantile(exact, [0.0, 0.5, 0.9, 0.99, 1.0])
        lines.append("gap quantiles 0 / 0.5 / 0.9 / 0.99 / 1: " + " / ".join(f"{x:.2g}" for x in q))
    lines.append(f"runs with gap > gap_tol = {DEFAULT_GAP_TOL:g}:")
    lines += [
        f"  n={n} d={d} T={T} kappa={k} seed={s}: bound {b}, gap {g:.3g}, {st}, {t:.1f} s"
        for n, d, T, k, s, b, g, st, t in rows
        if not g <= DEFAULT_GAP_TOL
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the grid (``--large``: fewer, larger instances) and print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="n in {40, 100, 200}, d = 2000, T = 2")
    parser.add_argument("--n", type=int, nargs="+", help="these n only (default 8 12 16)")
    parser.add_argument(
        "--bound-time-limit",
        type=float,
        default=math.inf,
        help="a guard on each bound, in seconds (default: none; the bound's budgets are work)",
    )
    parser.add_argument("--out", metavar="FILE.json", help="also write the runs as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)  # before the run: its load average
    if args.large:
        rows = run((40, 100, 200), (2000,), (2,), (0.1, 1.0, 4.0), (0,), args.bound_time_limit)
    else:
        sizes = args.n or (8, 12, 16)
        rows = run(sizes, (200, 2000), (2, 3), (0.1, 1.0, 4.0), (0, 1), args.bound_time_limit)
    print(summary(rows))
    if args.out:
        fields = ("n", "d", "T", "kappa", "seed", "bound status", "gap", "status", "seconds")
        write_json(
            args.out,
            {
                "meta": meta,
                "table": gap_table(rows),
                "rows": [dict(zip(fields, row, strict=True)) for row in rows],
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
