"""How far the certified lower bound reaches, over several seeds per size.

Two studies on the paper's data (kappa = n SNR^2 = 4, eta = 0.1), each row appended to one
JSON results file (written after every row):

``finite_r``
    :func:`global_lower_bound` with ``R`` (the finite-R bound: Lagrangian bound for T = 2,
    then branch-and-bound) at T = 2, d = 2000, n in {12, 20, 40, 100} and
    R sqrt(d) in {0.1, 1, 3, 10, 100}, ``gap_tol=1e-3``, the bound's default budgets of work.
``hard_selection``
    :func:`global_lower_bound` without R (the hard-selection bound LB, valid for every R) at
    d = 20,000 for (T, n) in {(4, 30), (4, 50), (8, 20), (2, 500)} (issue 12's targets) and
    beyond them {(4, 100), (8, 50), (2, 1000)}, the default budget of SVMs.

Each row: seed, n, T, R sqrt(d), seconds, nodes, proven bound, incumbent, relative gap,
status, method; the file's ``frontier`` rows summarise the ``finite_r`` rows per (n, R): how
many of the seeds' instances were certified (gap at most ``gap_tol``), the median and largest
gap. One instance per size says little about the size, hence ``--seeds`` (default 0-4). Run:
``.venv/bin/python -m margin_solver.bench.measure.certificate_frontier [--study finite_r]
[--seeds 0 1 2 3 4] [--quick] [--time-limit SECONDS] [--out FILE.json]``. The budgets are
counts of work, so the rows are the same on any machine;
``--time-limit`` is a guard (none by default) that makes them depend on it when it acts.

``--quick`` keeps n <= 20 (a smoke run, not the table).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from margin_solver.bench.provenance import run_metadata
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json

SEEDS = (0, 1, 2, 3, 4)
#: The finite-R study's tolerance: "certified" in the summary means a gap at most this.
FINITE_R_GAP_TOL = 1e-3
KAPPA = 4.0
ETA = 0.1
R_SCALES = (0.1, 1.0, 3.0, 10.0, 100.0)
#: (T, n) of the hard-selection study: issue 12's targets, then larger instances.
HARD_SELECTION_CASES = ((4, 30), (4, 50), (8, 20), (2, 500), (4, 100), (8, 50), (2, 1000))


def paper(n: int, T: int, d: int, seed: int):
    return PaperDistribution(d=d, T=T, snr=math.sqrt(KAPPA / n), eta=ETA).sample(n, seed=seed)


def row(
    study: str,
    ds,
    seed: int,
    R_scale: float | None,
    time_limit: float,
    gap_tol: float,
    options: dict | None = None,
) -> dict:
    """One bound, timed from the raw tokens (the token Gram product included); ``options``:
    fields of the strategy table, as :func:`global_lower_bound` takes them."""
    R = None if R_scale is None else R_scale / math.sqrt(ds.d)
    t0 = time.perf_counter()
    res = global_lower_bound(
        ds.X, ds.y, R=R, time_limit=time_limit, gap_tol=gap_tol, options=options
    )
    seconds = time.perf_counter() - t0
    return {
        "study": study,
        "seed": seed,
        "n": ds.n,
        "T": ds.T,
        "d": ds.d,
        "R_sqrt_d": R_scale,
        "seconds": round(seconds, 3),
        "nodes": res.nodes,
        "bound": res.value,
        "incumbent": res.incumbent,
        "gap": res.gap,
        "status": res.status,
        "method": res.method,
        "bound_kind": res.bound_kind,
    }


def frontier(rows: list[dict]) -> list[dict]:
    """Per (n, R sqrt(d)) of the ``finite_r`` rows: certified seeds, median and largest gap."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["study"] == "finite_r":
            groups.setdefault((r["n"], r["R_sqrt_d"]), []).append(r)
    summary = []
    for (n, scale), group in groups.items():
        gaps = [r["gap"] for r in group]
        summary.append(
            {
                "n": n,
                "R_sqrt_d": scale,
                "seeds": len(group),
                "certified": sum(g <= FINITE_R_GAP_TOL for g in gaps),
                "median_gap": float(np.median(gaps)),
                "largest_gap": max(gaps),
                "median_s": float(np.median([r["seconds"] for r in group])),
                "largest_nodes": max(r["nodes"] for r in group),
            }
        )
    return summary


def main(argv: list[str] | None = None) -> int:
    """Command line of the study: the rows into ``--out`` (JSON, rewritten after each row)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=("finite_r", "hard_selection", "all"), default="all")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--time-limit", type=float, default=math.inf)
    parser.add_argument(
        "--n", type=int, nargs="+", help="finite_r study at these n only (default 12 20 40 100)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument(
        "--options",
        type=json.loads,
        default=None,
        help="fields of the strategy table as JSON, e.g. '{\"lagrangian_max_samples\": 30}'",
    )
    parser.add_argument(
        "--R-scales", type=float, nargs="+", default=list(R_SCALES), help="R sqrt(d) values"
    )
    parser.add_argument("--out", default="results/certificate_frontier.json")
    args = parser.parse_args(argv)
    limit = args.time_limit
    rows: list[dict] = []
    meta = run_metadata(__spec__.name, argv)

    def emit(result: dict) -> None:
        rows.append(result)
        print(
            " ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()
            ),
            flush=True,
        )
        write_json(args.out, {"meta": meta, "rows": rows, "frontier": frontier(rows)})

    if args.study in ("finite_r", "all"):
        for n in args.n or ((12, 20) if args.quick else (12, 20, 40, 100)):
            for seed in args.seeds:
                ds = paper(n, 2, 2000, seed)
                for scale in args.R_scales:
                    emit(row("finite_r", ds, seed, scale, limit, FINITE_R_GAP_TOL, args.options))
    if args.study in ("hard_selection", "all"):
        cases = ((4, 20), (8, 10)) if args.quick else HARD_SELECTION_CASES
        for T, n in cases:
            for seed in args.seeds:
                ds = paper(n, T, 20_000, seed)
                emit(row("hard_selection", ds, seed, None, limit, 1e-4, args.options))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
