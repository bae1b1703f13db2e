r"""Speed of the v-step engines against the plain primal SOCP, measured side by side.

Random Gaussian features Z (n, d) with random labels (separable almost surely when d >= n).
For every engine the whole :func:`margin_solver.svm.vstep.solve_vstep` call is timed, so the
Gram engines pay for the Gram product Z @ Z.T; a second timing passes the precomputed Gram
matrix (and the problem is already cached), which is the cost of a re-solve inside an
alternating loop that maintains K itself. Only solves are timed; data generation is not.

Usage (the script is a shim over :func:`main`; ``margin-solver bench`` runs it in-process)::

    python -m margin_solver.bench.measure.vstep_speed --n 100 --d 10000 --repeats 3 \
        --json results/vstep_speed.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.fileio import write_json
from margin_solver.svm.vstep import solve_vstep

GRAM_ENGINES = ("ecos", "clarabel", "ldp")


def make_data(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian features and uniform random labels in {-1, +1}, from one seeded generator."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.choice([-1.0, 1.0], size=n)


def timed(fn, repeats: int) -> tuple[list[float], object]:
    """Wall-clock seconds of ``repeats`` calls of ``fn`` and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def run(n: int, d: int, repeats: int, seed: int) -> dict:
    """Time every engine and the primal reference; return a tidy table."""
    Z, y = make_data(n, d, seed)
    gram_times, K = timed(lambda: Z @ Z.T, repeats)
    primal_times, primal = timed(lambda: solve_vstep(Z, y, "primal", fallback=False), repeats)
    rows = [_row("primal", primal_times, None, None, primal, primal)]
    for engine in GRAM_ENGINES:
        # The first call builds and canonicalises the cached cvxpy model; report it apart.
        first_times, _ = timed(lambda e=engine: solve_vstep(Z, y, e, fallback=False), 1)
        times, res = timed(lambda e=engine: solve_vstep(Z, y, e, fallback=False), repeats)
        warm_times, _ = timed(lambda e=engine: solve_vstep(Z, y, e, fallback=False, K=K), repeats)
        rows.append(_row(engine, times, warm_times, first_times[0], res, primal))
    return {
        "benchmark": "vstep_speed",
        "n": n,
        "d": d,
        "repeats": repeats,
        "seed": seed,
        "gram_product_s": statistics.median(gram_times),
        "rows": rows,
    }


def _row(engine, times, warm_times, first_s, res, primal) -> dict:
    """One table row; ``warm_times`` and ``first_s`` are None for the primal reference."""
    return {
        "engine": engine,
        "status": res.status,
        "refined": res.refined,
        "median_s": statistics.median(times),
        "times_s": times,
        "median_excl_gram_s": None if warm_times is None else statistics.median(warm_times),
        "first_call_s": first_s,
        "rel_objective_diff": abs(res.norm**2 - primal.norm**2) / primal.norm**2,
        "gap": res.gap,
    }


def format_table(report: dict) -> str:
    """The table printed to the terminal (docs/benchmarks.md renders the JSON's rows)."""
    header = (
        "| engine | status | median s | primal / engine | median s, K given (warm) "
        "| primal / engine | first call s | rel. objective diff vs primal | gap |"
    )
    lines = [header, "|" + "---|" * 9]
    primal_s = report["rows"][0]["median_s"]
    for row in report["rows"]:
        warm = row["median_excl_gram_s"]
        warm_cells = (
            "- | - | -"
            if warm is None
            else f"{warm:.4f} | {primal_s / warm:.0f}x | {row['first_call_s']:.3f}"
        )
        lines.append(
            f"| {row['engine']} | {row['status']} | {row['median_s']:.4f} | "
            f"{primal_s / row['median_s']:.0f}x | {warm_cells} | "
            f"{row['rel_objective_diff']:.1e} | {row['gap']:.1e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line of the benchmark: time, print the table, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="samples (default 100)")
    parser.add_argument("--d", type=int, default=10_000, help="features (default 10000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    parser.add_argument("--json", metavar="OUT", help="also write the full report as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)  # before the run: its load average
    report = {**run(args.n, args.d, args.repeats, args.seed), "meta": meta}
    print(
        f"n={args.n} d={args.d} repeats={args.repeats} seed={args.seed} "
        f"Gram product Z @ Z.T: {report['gram_product_s']:.4f} s (median)"
    )
    print(format_table(report))
    if args.json:
        write_json(args.json, report)  # regular files only, atomically, umask permissions
    return 0


if __name__ == "__main__":
    sys.exit(main())
