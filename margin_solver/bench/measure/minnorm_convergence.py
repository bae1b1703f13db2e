"""Convergence of the P_R descent on the digits study's cells and on the paper's data.

Runs :func:`margin_solver.bench.methods.min_norm_solution` (the benchmark's ``min-norm``
method: R = 100 / nu with nu the RMS token norm, its seeds) with each variant's descent
options on

- the cells of the digits study at full size (``margin-solver bench --studies digits``: 3 vs
  8, T = 4 patches with position code, ReLU lift to d = 2048, eta = 0.1, n = 20 ... 240,
  seeds 0-4, the sweep's data and initialisation streams), and
- the paper's data (n = 40, T = 2, d = 2000, eta = 0.15) at kappa 0.25, 4, 8, certified,

and prints one markdown row per run (``--out FILE.json``: also writes them): status, accepted
p-steps of the winning start, ||v||, the relative projected-gradient norm ``||pg|| R / phi`` of
the returned point computed independently of the descent (:func:`stationarity`), seconds and
the winning start's reason.

Usage::

    .venv/bin/python -m margin_solver.bench.measure.minnorm_convergence
        [--variants quasi-Newton "SQP after 250"] [--n 20 40] [--seeds 0 1] [--no-paper]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
from scipy.optimize import nnls

from margin_solver.bench.methods import R_SCALE, min_norm_solution
from margin_solver.bench.page import rows_table
from margin_solver.bench.provenance import run_metadata
from margin_solver.bench.studies import STUDIES
from margin_solver.bench.sweeps import DATA_SOURCES, cell_seeds
from margin_solver.core.data import Dataset, PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.core.kernel import softmax
from margin_solver.gd.endpoints import token_scale
from margin_solver.minnorm.solve import MinNormResult, solve_min_norm

#: Descent options of each variant (``solve_min_norm(options=...)``).
VARIANTS = {
    "plain": {"memory": 0, "use_bb": False, "sqp": False},
    "quasi-Newton": {"sqp": False},
    "SQP": {"sqp": True, "sqp_after": 0},
    "SQP after 250": {"sqp": True, "sqp_after": 250},
}

# Margins within this of 1 count as active in the independent KKT check.
_ACTIVE = 1e-6


def stationarity(
    X: np.ndarray, y: np.ndarray, v: np.ndarray, p: np.ndarray, R: float
) -> tuple[float, float]:
    """``(||pg|| R / phi, KKT residual)`` at (v, p), computed from the dense tokens alone.

    The multipliers are recomputed from v: the non-negative least-squares fit of
    ``v = sum_i alpha_i y_i z_i`` over the samples whose margin is within 1e-6 of 1 (its
    relative residual is returned as the second number), then the envelope gradient
    ``g = -sum_i alpha_i y_i X_i^T [s_i * (u_i - f_i)]`` and its projection on the ball's
    tangent cone at p. It shares only the stable softmax with the descent (docs/theory.md, min-norm
    table, has the formulas).
    """
    s = softmax(X @ p)
    Z = np.einsum("it,itd->id", s, X)
    active = np.flatnonzero(y * (Z @ v) <= 1 + _ACTIVE)
    alpha, residual = nnls((y[active, None] * Z[active]).T, v)
    u = X @ v
    f = np.sum(s * u, axis=1, keepdims=True)
    g = -np.einsum("i,it,itd->d", alpha * y[active], (s * (u - f))[active], X[active])
    radial = float(g @ p) / np.linalg.norm(p)
    if np.linalg.norm(p) >= R * (1 - 1e-9) and radial < 0:
        g = g - radial * p / np.linalg.norm(p)
    phi = 0.5 * float(v @ v)
    return float(np.linalg.norm(g)) * R / phi, float(residual / np.linalg.norm(v))


Case = tuple[str, Dataset, Callable[[dict[str, Any]], tuple[MinNormResult, float]]]


def digits_cells(ns: list[int] | None, seeds: list[int] | None) -> Iterator[Case]:
    """The digits study's full-size cells (label, training set, solve with given descent
    options as the sweep's ``min-norm`` method does), optionally restricted to some n and
    seeds."""
    study = STUDIES["digits"]
    config = study.config("full")
    for grid in study.grids("full", ["min-norm"]):
        for cell in grid.cells():
            if (ns and cell.n not in ns) or (seeds and cell.seed not in seeds):
                continue
            streams = cell_seeds(cell, config.sweep_seed)
            train, _ = DATA_SOURCES["digits"](cell, streams, config.n_test, config.data_options)
            yield (
                f"digits n={cell.n} seed={cell.seed}",
                train,
                partial(_study_solve, train, streams.init),
            )


def _study_solve(
    train: Dataset, init: np.random.SeedSequence, options: dict[str, Any]
) -> tuple[MinNormResult, float]:
    return min_norm_solution(train, {"options": options}, init)


def paper_cases() -> Iterator[Case]:
    """The paper's data at kappa 0.25, 4, 8, solved certified with the default seed."""
    for kappa in (0.25, 4, 8):
        ds = PaperDistribution(d=2000, T=2, snr=math.sqrt(kappa / 40), eta=0.15).sample(40, seed=1)
        yield f"paper n=40 kappa={kappa}", ds, partial(_certified_solve, ds)


def _certified_solve(data: Dataset, options: dict[str, Any]) -> tuple[MinNormResult, float]:
    R = R_SCALE / math.sqrt(token_scale(data.X))
    return solve_min_norm(data, R=R, certify=True, options=options), R


def main(argv: list[str] | None = None) -> int:
    """Print the table (markdown) on stdout; ``--out``: also write its rows as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--variants", nargs="+", choices=list(VARIANTS), default=["quasi-Newton", "SQP after 250"]
    )
    parser.add_argument("--n", nargs="+", type=int, help="digits cells with these n only")
    parser.add_argument("--seeds", nargs="+", type=int, help="digits cells with these seeds only")
    parser.add_argument("--no-paper", action="store_true", help="skip the paper's data")
    parser.add_argument("--out", metavar="FILE.json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)
    cases = list(digits_cells(args.n, args.seeds))
    if not args.no_paper:
        cases += list(paper_cases())
    rows: list[dict[str, Any]] = []
    for label, data, solve in cases:
        for name in args.variants:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the status column says it
                res, R = solve(VARIANTS[name])
            elapsed = time.perf_counter() - t0
            rel, kkt = stationarity(data.X, data.y.astype(float), res.v, res.p, R)
            rows.append(
                {
                    "case": label,
                    "method": name,
                    "status": res.status,
                    "steps": res.nit,
                    "norm": f"{res.norm:.10g}",
                    "lower bound": None if res.lower_bound is None else f"{res.lower_bound:.10g}",
                    "||pg|| R / phi": rel,
                    "KKT res.": kkt,
                    "s": elapsed,
                    "stopped by": res.message.split(" (", 1)[1].split(")")[0],
                }
            )
            if args.out:
                write_json(args.out, {"meta": meta, "rows": rows})
    print(rows_table(rows, None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
