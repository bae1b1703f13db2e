"""Speed of the P_R solver and of the lower bound (issue 3).

Three studies, each row appended to one JSON results file (written atomically after every row):

``per_iteration``
    Seconds per p-step of :func:`margin_solver.descent.alternating.descend` in kernel and dense form
    for d in {1e3, 1e4, 1e5} at n = 50, T = 2 (the kernel form should be flat in d).
``whole_solve``
    Wall-clock of :func:`solve_min_norm` (all starts, no certificate) against the one token
    Gram product ``X X^T`` it needs (target: at most 3x at n = 100, T = 4, d = 50,000,
    kappa = 1, R = 10/sqrt(d)); then the same instance size at kappa in {0.1, 1, 5} and
    R in {1, 10, 100}/sqrt(d), and kappa = 4 at R = 100/sqrt(d) (nearly hard attention).
    With ``--baseline PYTHON`` every row is measured twice, in turn, by two subprocesses: the
    interpreter PYTHON of an environment where an earlier version of the package is installed
    (e.g. ``../main/.venv/bin/python``), then this interpreter, so that before and after meet
    the same load.
``lower_bound``
    Branch-and-bound against enumeration (SVMs solved and seconds) for n from 10 to 30 at
    T = 2, in a benign (kappa = 4) and a harmful (kappa = 0.1) regime; enumeration only up
    to n = 16 (n = 12 with ``--quick``). Also T = 4 (enumeration at n = 6, branch-and-bound
    with the time limit beyond), where the node bound is much weaker.

Usage::

    python -m margin_solver.bench.measure.minnorm_scaling [--quick] [--study whole_solve]
        [--out FILE.json] [--baseline PYTHON]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from margin_solver.bench.provenance import run_metadata
from margin_solver.bounds.lower import global_lower_bound
from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.core.kernel import TokenGram
from margin_solver.descent.alternating import DenseForm, KernelForm, descend
from margin_solver.minnorm.solve import solve_min_norm

SEED = 20260101


def paper(n: int, T: int, d: int, kappa: float, seed: int = SEED):
    return PaperDistribution(d=d, T=T, snr=math.sqrt(kappa / n), eta=0.15).sample(n, seed=seed)


def per_iteration(d: int, n: int = 50, T: int = 2, steps: int = 20) -> dict:
    """Seconds per accepted p-step (backtracking included) from p = 0, both forms,
    R = 10/sqrt(d)."""
    ds = paper(n, T, d, kappa=1.0)
    y = ds.y.astype(float)
    R = 10 / math.sqrt(d)
    t0 = time.perf_counter()
    gram = TokenGram(ds.X)
    gram_time = time.perf_counter() - t0
    row = {"study": "per_iteration", "n": n, "T": T, "d": d, "gram_s": gram_time}
    for form in (KernelForm(ds.X, gram), DenseForm(ds.X)):
        t0 = time.perf_counter()
        with single_threaded_blas():  # as solve_min_norm runs it
            run = descend(form, y, form.zeros(), R, max_iter=steps, gtol=1e-300, rtol=1e-300)
        elapsed = time.perf_counter() - t0
        row[f"{form.name}_s_per_iter"] = elapsed / max(run.n_iter, 1)
        row[f"{form.name}_s_per_eval"] = elapsed / run.n_eval
        row[f"{form.name}_iters"] = run.n_iter
        row[f"{form.name}_norm"] = run.norm
    return row


def whole_solve(
    n: int,
    T: int,
    d: int,
    kappa: float = 1.0,
    R_scale: float = 10.0,
    repeats: int = 5,
    options: dict | None = None,
) -> dict:
    """solve_min_norm (default options, or the strategy table's fields ``options``) against
    the token Gram product alone.

    The two are timed alternately, ``repeats`` times each, and medians are compared, so that
    a burst of load from other processes on the shared machine hits both alike.
    """
    ds = paper(n, T, d, kappa=kappa)
    R = R_scale / math.sqrt(d)
    gram_times, solve_times = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        TokenGram(ds.X)
        gram_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = solve_min_norm(ds, R=R, options=options)
        solve_times.append(time.perf_counter() - t0)
    gram_time, solve_time = float(np.median(gram_times)), float(np.median(solve_times))
    return {
        "study": "whole_solve",
        "n": n,
        "T": T,
        "d": d,
        "kappa": kappa,
        "R_scale": R_scale,
        "options": json.dumps(options or {}, sort_keys=True),
        "gram_s": gram_time,
        "solve_s": solve_time,
        "ratio": solve_time / gram_time,
        "gram_s_all": gram_times,
        "solve_s_all": solve_times,
        "norm": res.norm,
        "status": res.status,
        "start": res.start,
        "n_iter": res.nit,
        "starts": len(res.start_norms),
    }


def whole_solve_in(python: str | None, *args) -> dict:
    """:func:`whole_solve` run by the interpreter ``python`` (this one when None) with the
    ``margin_solver`` installed there; the row gains ``code``, the package's path and its
    commit."""
    code = (
        "import json, margin_solver; "
        "from margin_solver.bench.measure.minnorm_scaling import whole_solve; "
        f"print(json.dumps({{**whole_solve(*{args!r}), 'package': margin_solver.__file__}}))"
    )
    # run outside this checkout: "-c" puts the working directory first on sys.path
    out = subprocess.run(
        [python or sys.executable, "-c", code],
        check=True,
        text=True,
        capture_output=True,
        cwd=tempfile.gettempdir(),
    ).stdout
    row = json.loads(out.strip().splitlines()[-1])
    root = str(Path(row["package"]).parent)
    commit = subprocess.run(
        ["git", "-C", root, "rev-parse", "--short", "HEAD"], text=True, capture_output=True
    ).stdout.strip()
    row.update(code="baseline" if python else "current", commit=commit)
    return row


def lower_bound(n: int, kappa: float, enumerate_too: bool, time_limit: float, T: int = 2) -> dict:
    ds = paper(n, T, 2000, kappa)
    row = {
        "study": "lower_bound",
        "n": n,
        "T": T,
        "d": 2000,
        "kappa": kappa,
        "noisy": int(ds.flipped.sum()),
    }
    gram = TokenGram(ds.X)
    bnb = global_lower_bound(ds.X, ds.y, "bnb", time_limit=time_limit, gram=gram)
    row.update(
        bnb_status=bnb.status,
        bnb_value=bnb.value,
        bnb_incumbent=bnb.incumbent,
        bnb_nodes=bnb.nodes,
        bnb_s=bnb.solve_time,
    )
    if enumerate_too:
        enum = global_lower_bound(ds.X, ds.y, "enumerate", gram=gram)
        row.update(
            enum_value=enum.value,
            enum_nodes=enum.nodes,
            enum_s=enum.solve_time,
            rel_diff=abs(bnb.value - enum.value) / enum.value,
        )
    return row


def main(argv: list[str] | None = None) -> int:
    """Command line of the benchmark: run the chosen studies, writing ``--out`` after each row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--out", default="results/minnorm_scaling.json")
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="also time whole_solve with the package installed for this interpreter, in turn",
    )
    parser.add_argument(
        "--study",
        choices=("per_iteration", "whole_solve", "lower_bound"),
        action="append",
        help="run only this study (repeatable; default: all three)",
    )
    parser.add_argument(
        "--size",
        nargs=3,
        type=int,
        action="append",
        metavar=("N", "T", "D"),
        help="whole_solve at this size only, kappa 1, R sqrt(d) = 10 (repeatable)",
    )
    parser.add_argument(
        "--options",
        type=json.loads,
        help='whole_solve with these strategy fields (JSON), e.g. \'{"vstep_solver": "active"}\'',
    )
    parser.add_argument("--repeats", type=int, help="whole_solve's repeats (default 5 and 3)")
    args = parser.parse_args(argv)
    studies = set(args.study or ("per_iteration", "whole_solve", "lower_bound"))
    if args.quick:
        dims, solve_sizes = (1000, 10000), [(50, 2, 5000), (100, 4, 10000)]
        bnb_ns, max_enum, limit = (10, 12, 20), 12, 10.0
        t4_ns = (6, 10)
    else:
        dims, solve_sizes = (1000, 10000, 100000), [(50, 2, 10000), (100, 4, 50000)]
        bnb_ns, max_enum, limit = (10, 12, 14, 16, 20, 25, 30), 16, 120.0
        t4_ns = (6, 8, 10, 20)
    rows: list[dict] = []
    meta = {**run_metadata(__spec__.name, argv), "quick": args.quick, "seed": SEED}

    def record(row: dict) -> None:
        rows.append(row)
        write_json(args.out, {"meta": meta, "rows": rows})
        print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()}, flush=True)

    if "per_iteration" in studies:
        for d in dims:
            record(per_iteration(d))
    if "whole_solve" in studies:
        # the target instance in other regimes: SNR below / at / above the threshold, soft
        # to nearly hard attention
        n, T, d = solve_sizes[-1]
        cases = [(*size, 1.0, 10.0, 5) for size in solve_sizes]
        cases += [
            (n, T, d, kappa, R_scale, 3)
            for kappa in (0.1, 1.0, 5.0)
            for R_scale in (1.0, 10.0, 100.0)
            if (kappa, R_scale) != (1.0, 10.0)
        ]
        cases.append((n, T, d, 4.0, 100.0, 3))
        if args.size:
            cases = [(*size, 1.0, 10.0, 5) for size in args.size]
        if args.repeats is not None:
            cases = [(*case[:5], args.repeats) for case in cases]
        for case in cases:
            if args.options is not None:
                record(whole_solve(*case, options=args.options))
            elif args.baseline:
                record(whole_solve_in(args.baseline, *case))
                record(whole_solve_in(None, *case))
            else:
                record(whole_solve(*case))
    if "lower_bound" in studies:
        for n in bnb_ns:
            for kappa in (4.0, 0.1):
                record(lower_bound(n, kappa, n <= max_enum, limit))
        for n in t4_ns:
            for kappa in (4.0, 0.1):
                record(lower_bound(n, kappa, 4**n <= 4096, limit / 4, T=4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
