r"""Tokens larger than memory (issue 17): generate to disk, Gram-reduce, solve, locally and on Dask.

Phases, each in a fresh process so its peak resident memory (``ru_maxrss``) is its own:

``generate``
    :func:`margin_solver.core.generate.write_paper_dataset` of the paper's model (n, T, d) at
    kappa = 1, eta = 0.1 into a dataset directory.
``solve-local``
    ``Dataset.load`` (X memory-mapped), :func:`solve_min_norm` (token Gram product in blocks over
    d, kernel-form descent, v and p in one blocked pass, margins in one pass over samples) and
    :func:`evaluate` on the training set (one more pass).
``solve-dask``
    The same inside :func:`margin_solver.core.ooc.execution` with the address of a Dask
    ``LocalCluster`` (scheduler in this process, 2 single-threaded worker processes, all on
    127.0.0.1) started and stopped by the phase; the workers read the token file themselves.
    The workers' peak memory is reported too.
``check``
    ``Dataset.load`` (X memory-mapped) and :func:`check_conditions`, under ``tracemalloc``
    (the Python and numpy allocations; the memory map's pages are the file's, not the
    process's): its blocked passes keep a few blocks, not a copy of the tokens (issue 43:
    1.24 GiB traced for a 610 MiB X.npy before).
``gd-compare``
    The same for :func:`gradient_descent` (two-step, the default) and :func:`compare` of its
    endpoint with itself on the same data.
``identical``
    At a size that fits in memory: ``PaperDistribution.sample`` against the file written in
    blocks (bitwise), and the solve in memory against the blocked and the Dask solve.

The times of the passes over X come from the ``ooc pass`` log records of
:mod:`margin_solver.core.ooc`. Results go to one JSON file, written after every phase.

Usage::

    python -m margin_solver.bench.measure.out_of_core --n 1000 --T 2 --d 1000000 \
        --workdir /work/tmp --out ooc.json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from margin_solver.analysis.compare import compare
from margin_solver.analysis.metrics import evaluate
from margin_solver.bench.provenance import run_metadata
from margin_solver.core import ooc
from margin_solver.core.data import PaperDistribution, load_dataset
from margin_solver.core.fileio import write_json
from margin_solver.core.generate import write_paper_dataset
from margin_solver.core.results import ConvergenceWarning
from margin_solver.gd.endpoints import gradient_descent
from margin_solver.minnorm.solve import solve_min_norm
from margin_solver.theory.check import check_conditions

SEED = 20261130
KAPPA, ETA = 1.0, 0.1


def distribution(n: int, T: int, d: int) -> PaperDistribution:
    """The benchmark's model: kappa = n SNR^2 = 1, eta = 0.1."""
    return PaperDistribution(d=d, T=T, snr=math.sqrt(KAPPA / n), eta=ETA)


class _PassLog(logging.Handler):
    """Collects the ``ooc pass`` records: (what, where, seconds)."""

    pattern = re.compile(r"ooc pass (.+?) over X .* \((local|dask)\): ([0-9.]+) s")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.passes: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        match = self.pattern.match(record.getMessage())
        if match:
            self.passes.append({"pass": match[1], "where": match[2], "s": float(match[3])})


def _peak_rss() -> int:
    """This process's peak resident memory in bytes: ``VmHWM`` on Linux (``ru_maxrss`` keeps
    the size of the process that forked this one, at least that of the driver), else
    ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _phase_generate(args: argparse.Namespace) -> dict[str, Any]:
    start = time.perf_counter()
    write_paper_dataset(args.data, distribution(args.n, args.T, args.d), args.n, SEED)
    size = (Path(args.data) / "X.npy").stat().st_size
    return {"seconds": time.perf_counter() - start, "file_bytes": size}


def _solve(data, args: argparse.Namespace) -> dict[str, Any]:
    log = _PassLog()
    logger = logging.getLogger("margin_solver")
    logger.addHandler(log)
    logger.setLevel(logging.INFO)
    start = time.perf_counter()
    result = solve_min_norm(
        data,
        R=args.R_scale / math.sqrt(data.d),
        max_iter=args.max_iter,
        n_random_starts=args.random_starts,
        seed=0,
    )
    solve_s = time.perf_counter() - start
    metrics = evaluate(result.v, result.p, data)
    total_s = time.perf_counter() - start
    logger.removeHandler(log)
    return {
        "solve_s": solve_s,
        "solve_and_evaluate_s": total_s,
        "passes": log.passes,
        "status": result.status,
        "start": result.start,
        "norm": result.norm,
        "min_margin": result.min_margin,
        "n_iter": result.nit,
        "train_error": metrics.error,
        "attn_signal_clean": metrics.attn_signal_clean,
        "v_head": result.v[:4].tolist(),
        "v_norm": float(np.linalg.norm(result.v)),
        "selected_token": result.selected_token.tolist(),
    }


def _phase_solve_local(args: argparse.Namespace) -> dict[str, Any]:
    data = load_dataset(args.data)
    with ooc.execution(block_bytes=args.block_mb * 2**20):
        return _solve(data, args)


def _phase_solve_dask(args: argparse.Namespace) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    data = load_dataset(args.data)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        with ooc.execution(scheduler=cluster.scheduler_address, block_bytes=args.block_mb * 2**20):
            row = _solve(data, args)
        with Client(cluster.scheduler_address) as client:
            workers = client.run(_peak_rss)
    row["scheduler"] = "LocalCluster: 2 worker processes x 1 thread, 127.0.0.1"
    row["worker_peak_rss_bytes"] = sorted(workers.values())
    return row


def _traced(args: argparse.Namespace, call: Callable[[Any], str]) -> dict[str, Any]:
    """``call(data)`` on the memory-mapped tokens in blocks of ``--block-mb``, under
    ``tracemalloc``: its seconds, traced peak and what it returned (a status)."""
    data = load_dataset(args.data)
    with ooc.execution(block_bytes=args.block_mb * 2**20), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the status column says it
        tracemalloc.start()
        start = time.perf_counter()
        try:
            status = call(data)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return {
        "seconds": time.perf_counter() - start,
        "traced_peak_bytes": peak,
        "block_bytes": args.block_mb * 2**20,
        "status": status,
    }


def _phase_check(args: argparse.Namespace) -> dict[str, Any]:
    return _traced(args, lambda data: check_conditions(data).predicted_regime)


def _phase_gd_compare(args: argparse.Namespace) -> dict[str, Any]:
    def run(data: Any) -> str:
        gd = gradient_descent(data)
        compare(gd, gd, data, data)
        return gd.status

    return _traced(args, run)


def _phase_identical(args: argparse.Namespace) -> dict[str, Any]:
    """In memory against on disk (blocked) against Dask, at a size that fits in memory."""
    from distributed import LocalCluster

    n, T, d = args.small
    dist = distribution(n, T, d)
    mem = dist.sample(n, seed=SEED)
    block_bytes = 4 * 2**20  # several blocks: d / (4 MiB / (8 n T)) of them
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        write_paper_dataset(Path(tmp) / "small", dist, n, SEED, block=7)
        disk = load_dataset(Path(tmp) / "small")
        row: dict[str, Any] = {
            "n": n,
            "T": T,
            "d": d,
            "tokens_bitwise": bool(np.array_equal(disk.X, mem.X)),
        }
        opts = {
            "R": args.R_scale / math.sqrt(d),
            "max_iter": args.max_iter,
            "n_random_starts": args.random_starts,
            "seed": 0,
        }
        ref = solve_min_norm(mem, **opts)
        runs = {}
        with ooc.execution(block_bytes=block_bytes):
            runs["blocked"] = solve_min_norm(disk, **opts)
        with LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster:
            with ooc.execution(scheduler=cluster.scheduler_address, block_bytes=block_bytes):
                runs["dask"] = solve_min_norm(disk, **opts)
        for name, res in runs.items():
            row[name] = {
                "same_status_start_selection": bool(
                    res.status == ref.status
                    and res.start == ref.start
                    and np.array_equal(res.selected_token, ref.selected_token)
                ),
                "norm_rel_diff": abs(res.norm - ref.norm) / ref.norm,
                "v_max_rel_diff": float(np.abs(res.v - ref.v).max() / np.abs(ref.v).max()),
                "v_bitwise": bool(np.array_equal(res.v, ref.v)),
            }
    return row


PHASES = {
    "generate": _phase_generate,
    "solve-local": _phase_solve_local,
    "solve-dask": _phase_solve_dask,
    "check": _phase_check,
    "gd-compare": _phase_gd_compare,
    "identical": _phase_identical,
}


def _run_phase(name: str, args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; its last stdout line is the JSON row."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "margin_solver.bench.measure.out_of_core", "--phase", name, *argv],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise RuntimeError(f"phase {name} failed:\n{proc.stderr[-3000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row.update(phase=name, wall_s=time.perf_counter() - start, load_avg_after=os.getloadavg())
    return row


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--T", type=int, default=2)
    parser.add_argument("--d", type=int, default=1_000_000)
    parser.add_argument(
        "--small",
        type=int,
        nargs=3,
        default=[200, 2, 20_000],
        metavar=("N", "T", "D"),
        help="size of the in-memory comparison",
    )
    parser.add_argument("--R-scale", type=float, default=100.0, help="R = R_scale / sqrt(d)")
    parser.add_argument("--max-iter", type=int, default=50, help="p-steps per start")
    parser.add_argument("--random-starts", type=int, default=0)
    parser.add_argument("--block-mb", type=int, default=256, help="MiB of tokens per block/chunk")
    parser.add_argument("--workdir", default=".", help="where the token file is written")
    parser.add_argument("--keep", action="store_true", help="keep the token file")
    parser.add_argument("--phases", nargs="+", default=list(PHASES), choices=list(PHASES))
    parser.add_argument("--out", default="out_of_core.json")
    parser.add_argument("--phase", choices=list(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the phases (each in its own process), write the JSON report, delete the token file."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    if args.phase:  # inside a child process
        row = PHASES[args.phase](args)
        row["peak_rss_bytes"] = _peak_rss()
        print(json.dumps(row))
        return 0
    data = Path(args.workdir) / f"ooc_bench_n{args.n}_T{args.T}_d{args.d}"
    report = {
        "meta": run_metadata(__spec__.name, argv),
        "n": args.n,
        "T": args.T,
        "d": args.d,
        "block_mb": args.block_mb,
        "max_iter": args.max_iter,
        "random_starts": args.random_starts,
        "R_scale": args.R_scale,
        "rows": [],
    }
    try:
        for name in args.phases:
            report["rows"].append(_run_phase(name, args, [*argv, "--data", str(data)]))
            write_json(args.out, report)
            print(json.dumps(report["rows"][-1])[:400], flush=True)
    finally:
        if not args.keep and data.exists():
            shutil.rmtree(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
