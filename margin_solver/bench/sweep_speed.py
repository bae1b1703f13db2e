"""Sweep throughput: cells per second and the harness's share of the time, per backend.

Runs one grid with each ``--jobs`` value (and on a Dask scheduler when ``--scheduler`` is
given), each into a fresh temporary file, side by side in one process, and prints a table:

- ``cells/s``: cells of the grid over the wall-clock time of :func:`run_sweep`;
- ``method s``: the rows' own ``seconds`` (the method calls alone) summed;
- ``overhead share``: ``(workers * wall - method s) / method s``, everything that is not a
  method call (data, the checker, scheduling, worker start-up, idle workers) relative to
  the method time;
- ``speed-up``: wall time of the first backend over this one's.

Grids: ``second`` (cells of about a second each: min-norm and 3000 GD steps at n = 120,
d = 2000), ``phase`` (the ``quick`` phase-diagram study grid, min-norm and two-step GD)
and ``issue`` (the 24-cell grid of issue 18).

    .venv/bin/python benchmarks/sweep_speed.py --grid second --jobs 1 2 [--local-dask]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from margin_solver.bench.studies import STUDIES
from margin_solver.bench.sweeps import SweepConfig, SweepGrid, load_results, run_sweep


def _grids(name: str) -> tuple[list[SweepGrid], SweepConfig]:
    if name == "phase":
        study = STUDIES["phase"]
        return study.grids("quick", study.methods), study.config("quick")
    if name == "issue":
        grid = SweepGrid(n=[20, 40], kappa=[1.0, 4.0], d=[4000], seeds=2,
                         methods=["min-norm", "gd-two-step", "uniform-svm"])
        return [grid], SweepConfig()
    grid = SweepGrid(n=[120], kappa=[1.0, 4.0], d=[2000], seeds=4, methods=["min-norm", "gd-long"])
    return [grid], SweepConfig(method_options={"gd-long": {"steps": 3000}})


def main(argv: list[str] | None = None) -> int:
    """Run the grid once per backend and print the throughput table."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--grid", choices=("second", "phase", "issue"), default="second")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--scheduler", default=None, help="also run on this Dask scheduler")
    ap.add_argument("--dask-workers", type=int, default=2, help="its workers (for the share)")
    ap.add_argument("--local-dask", action="store_true",
                    help="also run on a local Dask cluster of --dask-workers one-thread workers")
    args = ap.parse_args(argv)
    if args.local_dask:
        from distributed import LocalCluster

        with LocalCluster(n_workers=args.dask_workers, threads_per_worker=1,
                          dashboard_address=None) as cluster:
            args.scheduler = cluster.scheduler_address
            return _run(args)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    grids, config = _grids(args.grid)
    backends: list[tuple[str, int, str | None]] = [(f"joblib --jobs {j}", j, None)
                                                   for j in args.jobs]
    if args.scheduler:
        backends.append((f"dask ({args.dask_workers} workers)", args.dask_workers, args.scheduler))
    print(f"grid {args.grid}; load average before: {os.getloadavg()[0]:.2f}")
    print("| backend | cells | wall s | cells/s | method s | overhead share | speed-up |")
    print("|---|---|---|---|---|---|---|")
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for label, workers, scheduler in backends:
            out = Path(tmp) / f"{label.replace(' ', '_')}.csv"
            start = time.perf_counter()
            result = run_sweep(grids, out, config, jobs=workers, scheduler=scheduler)
            wall = time.perf_counter() - start
            method = sum(row["seconds"] for row in load_results(out))
            first = first or wall
            print(f"| {label} | {result.n_run} | {wall:.1f} | {result.n_run / wall:.2f} | "
                  f"{method:.1f} | {(workers * wall - method) / method:.0%} | "
                  f"{first / wall:.2f}x |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0
