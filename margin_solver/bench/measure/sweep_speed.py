r"""Sweep throughput: cells per second, the harness's share of the time, and where time goes.

Runs one grid with each ``--jobs`` value (and on a Dask scheduler when ``--scheduler`` or
``--local-dask`` is given), each into a fresh temporary file, side by side in one process,
and prints a table:

- ``failed``: cells whose row failed (listed after the table, with their message; the
  benchmark then exits with status 1): their method calls are timed like the others;
- ``wall s``, ``cells/s``: :func:`run_sweep`'s wall-clock time and cells over it;
- ``speed-up``: wall time of the first backend over this one's (the target of issue 18 is
  ``--jobs 2`` >= 1.7x ``--jobs 1`` on an idle 2-core machine);
- ``method s``: the rows' own ``seconds`` (the method calls, wall-clock) summed;
- ``method CPU s``: the CPU time of the same calls, measured inside the workers;
- ``CPU/wall``: ``method CPU s / method s``: 1 when a worker had a core to itself while
  solving, 0.5 when it got half of one (other processes on the machine, or our own
  workers oversubscribing it);
- ``total CPU s``: CPU time of the sweep's processes (this one and its workers, which end
  with the sweep; not measured for Dask, whose workers outlive it);
- ``overhead (CPU)``: ``(total CPU s - method CPU s) / method CPU s``: the harness's work
  (data, checker, log, pickling, worker start-up) relative to the methods', whatever the
  load; ``overhead (wall)``: ``(workers x wall - method s) / method s``, which also
  counts idle or descheduled workers and is what an idle machine gives;
- ``first cell s``: from the start of the sweep to the start of its first method call
  (worker start-up and the first point's data);
- ``threads``: the most OS threads seen in a process while it ran a method, and the BLAS
  threads allowed there.

``--checker on off`` runs every backend with the theorem checker's per-row prediction
(``SweepConfig.check``, a measurement of each data point) and again without it, so that the
harness proper and the checker's share read apart.

Grids: ``second`` (cells of about a second each: min-norm and 3000 GD steps at n = 120,
d = 2000, kappa 1 and 4, ``--seeds`` seeds), ``phase`` (the ``quick`` phase-diagram study
grid, min-norm and two-step GD) and ``issue`` (the 24-cell grid of issue 18).

    .venv/bin/python -m margin_solver.bench.measure.sweep_speed --grid second --jobs 1 2 \
        --local-dask
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from margin_solver.bench.methods import SWEEP_METHODS
from margin_solver.bench.provenance import run_metadata
from margin_solver.bench.studies import STUDIES
from margin_solver.bench.sweeps import SweepConfig, SweepGrid, load_results, run_sweep
from margin_solver.core.blas import blas_threads
from margin_solver.core.fileio import write_json
from margin_solver.core.results import FAILED

#: Environment variable naming the directory where timed method calls leave their records.
RECORD_DIR = "MARGIN_SOLVER_SWEEP_SPEED_RECORDS"


def _grids(name: str, seeds: int = 16) -> tuple[list[SweepGrid], SweepConfig]:
    if name == "phase":
        study = STUDIES["phase"]
        return study.grids("quick", study.methods), study.config("quick")
    if name == "issue":
        grid = SweepGrid(
            n=[20, 40],
            kappa=[1.0, 4.0],
            d=[4000],
            seeds=2,
            methods=["min-norm", "gd-two-step", "uniform-svm"],
        )
        return [grid], SweepConfig()
    grid = SweepGrid(
        n=[120], kappa=[1.0, 4.0], d=[2000], seeds=seeds, methods=["min-norm", "gd-long"]
    )
    return [grid], SweepConfig(method_options={"gd-long": {"steps": 3000}})


@dataclass(frozen=True)
class TimedMethod:
    """A sweep method that also records, in the worker running it, its CPU and wall time,
    its start (epoch seconds), the process's OS threads and its BLAS thread limit.

    Picklable (the method function by reference), so that it runs in worker processes; each
    record is one line appended to ``<RECORD_DIR>/<pid>.txt``.
    """

    name: str
    method: Any

    def __call__(self, train: Any, test: Any, call: Any) -> dict[str, Any]:
        """Run the method, then append its record."""
        started, cpu, wall = time.time(), time.process_time(), time.perf_counter()
        try:
            return self.method(train, test, call)
        finally:  # a call that raised (a failed cell) spent its time too
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            record = f"{started!r} {cpu!r} {wall!r} {_os_threads()} {blas_threads()}\n"
            with open(Path(os.environ[RECORD_DIR]) / f"{os.getpid()}.txt", "a") as fh:
                fh.write(record)


def _os_threads() -> int:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    return next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads:")), 0
    )


def main(argv: list[str] | None = None) -> int:
    """Run the grid once per backend and print the throughput table."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--grid", choices=("second", "phase", "issue"), default="second")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--scheduler", default=None, help="also run on this Dask scheduler")
    ap.add_argument("--dask-workers", type=int, default=2, help="its workers (for the share)")
    ap.add_argument(
        "--local-dask",
        action="store_true",
        help="also run on a local Dask cluster of --dask-workers one-thread workers",
    )
    ap.add_argument(
        "--seeds",
        type=int,
        default=16,
        help="seeds of the 'second' grid (4 cells each; default 16: 64 cells, which "
        "amortise the workers' start-up)",
    )
    ap.add_argument("--out", metavar="FILE.json", help="also write the table's rows as JSON")
    ap.add_argument(
        "--n-test",
        type=int,
        default=None,
        help="test samples per data point (default: the grid's config, 1000 but for 'phase'); "
        "at d = 4000 drawing 1000 costs about as much as the issue grid's three methods",
    )
    ap.add_argument(
        "--checker",
        nargs="+",
        choices=("on", "off"),
        default=["on"],
        help="run the backends with the theorem checker's per-row prediction "
        "(SweepConfig.check), without it, or both in turn ('on off'); the speed-up is "
        "against the first backend of the same setting",
    )
    args = ap.parse_args(argv)
    args.meta = run_metadata(__spec__.name, argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[RECORD_DIR] = tmp  # before any worker starts: they inherit it
        try:
            if args.local_dask:
                from distributed import LocalCluster

                with LocalCluster(
                    n_workers=args.dask_workers, threads_per_worker=1, dashboard_address=None
                ) as cluster:
                    args.scheduler = cluster.scheduler_address
                    return _run(args, Path(tmp))
            return _run(args, Path(tmp))
        finally:
            del os.environ[RECORD_DIR]


def _run(args: argparse.Namespace, tmp: Path) -> int:
    grids, config = _grids(args.grid, args.seeds)
    if args.n_test is not None:
        config = dataclasses.replace(config, n_test=args.n_test)
    backends: list[tuple[str, int, str | None]] = [
        (f"joblib --jobs {j}", j, None) for j in args.jobs
    ]
    if args.scheduler:
        backends.append((f"dask ({args.dask_workers} workers)", args.dask_workers, args.scheduler))
    print(
        f"grid {args.grid}, n_test {config.n_test}; "
        f"{os.cpu_count()} cores; "
        "load average before: "
        f"{os.getloadavg()[0]:.2f}"
    )
    failed: list[str] = []
    table: list[dict[str, Any]] = []
    print(
        "| backend | cells | failed | wall s | cells/s | speed-up | method s | method CPU s "
        "| CPU/wall | total CPU s | overhead (CPU) | overhead (wall) | first cell s "
        "| threads (OS/BLAS) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    originals = dict(SWEEP_METHODS)
    firsts: dict[str, float] = {}  # wall time of each checker setting's first backend
    runs = [
        (check, f"{label}{'' if check == 'on' else ' (no checker)'}", workers, scheduler)
        for check in dict.fromkeys(args.checker)
        for label, workers, scheduler in backends
    ]
    try:
        for name, method in originals.items():
            SWEEP_METHODS[name] = TimedMethod(name, method)
        for k, (check, label, workers, scheduler) in enumerate(runs):
            for old in tmp.glob("*.txt"):
                old.unlink()
            out = tmp / f"run_{k}.csv"
            start_epoch, cpu0 = time.time(), _cpu_seconds()
            start = time.perf_counter()
            result = run_sweep(
                grids,
                out,
                dataclasses.replace(config, check=check == "on"),
                jobs=workers,
                scheduler=scheduler,
            )
            wall = time.perf_counter() - start
            total_cpu = None if scheduler else _cpu_seconds() - cpu0
            rows = load_results(out)
            # A cell whose data could not be drawn ran no method: no seconds (NaN), no time.
            method = math.fsum(r["seconds"] for r in rows if math.isfinite(r["seconds"]))
            failed.extend(
                f"{label}: {_cell_text(r)}: {r['message']}" for r in rows if r["status"] == FAILED
            )
            records = [
                line.split() for f in tmp.glob("*.txt") for line in f.read_text().splitlines()
            ]
            method_cpu = sum(float(r[1]) for r in records)
            first_call = min(float(r[0]) for r in records) - start_epoch
            threads = f"{max(int(r[3]) for r in records)}/{max(int(r[4]) for r in records)}"
            first = firsts.setdefault(check, wall)
            cpu_share = "-" if total_cpu is None else f"{(total_cpu - method_cpu) / method_cpu:.0%}"
            cpu_text = "-" if total_cpu is None else f"{total_cpu:.1f}"
            table.append(
                {
                    "backend": label,
                    "cells": result.n_run,
                    "failed": result.n_failed,
                    "wall s": wall,
                    "cells/s": result.n_run / wall,
                    "speed-up": first / wall,
                    "method CPU s": method_cpu,
                    "total CPU s": total_cpu,
                    "overhead (CPU)": cpu_share,
                    "first cell s": first_call,
                }
            )
            if args.out:
                write_json(args.out, {"meta": args.meta, "grid": args.grid, "rows": table})
            print(
                f"| {label} | {result.n_run} | {result.n_failed} | {wall:.1f} | "
                f"{result.n_run / wall:.2f} | "
                f"{first / wall:.2f}x | {method:.1f} | {method_cpu:.1f} | "
                f"{method_cpu / method:.2f} | {cpu_text} | {cpu_share} | "
                f"{(workers * wall - method) / method:.0%} | {first_call:.2f} | "
                f"{threads} |",
                flush=True,
            )
    finally:
        SWEEP_METHODS.update(originals)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    for line in failed:
        print(f"failed cell, {line}")
    return 1 if failed else 0


def _cell_text(row: dict[str, Any]) -> str:
    keys = ("n", "d", "T", "kappa", "eta", "seed", "method", "heads")
    return " ".join(f"{k}={row[k]:g}" if k != "method" else row[k] for k in keys)


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the sweep's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
