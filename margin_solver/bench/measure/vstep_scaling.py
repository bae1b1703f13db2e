r"""The v-step in n: the active-set engine, cold and warm, against the LDP and LinearSVC (issue 44).

The features are the paper model's tokens averaged by uniform attention (p = 0: the first
v-step of every descent), ``PaperDistribution(d, T=2, snr=sqrt(1/n), eta=0.15)``, d = 1000,
separable at every n measured. Side by side in one run, at each n:

``active``
    :func:`margin_solver.svm.vstep.solve_vstep` with ``solver="active"`` from the features
    (the Gram product included), cold.
``active-warm``
    The same problem solved from the support of a perturbed one (every token moved by
    Gaussian noise of ``--perturb`` times its root-mean-square entry), as the descent does
    from its previous v-step (:func:`~margin_solver.svm.vstep.solve_vstep_from_support`).
``ldp``
    Today's default engine, Lawson-Hanson LDP by :func:`scipy.optimize.nnls`.
``linearsvc``
    scikit-learn's ``LinearSVC(loss="hinge", C=1e6, tol=1e-8, fit_intercept=False)`` on the
    features: the box-constrained dual of the same problem, equal to it once C exceeds every
    dual (largest dual at most 0.1 here).

``s`` is the median wall-clock of ``--repeats`` calls from the features, ``s_K_given`` of the
v-step alone given the Gram matrix (inside the descent, the form computes K itself);
``x_linearsvc`` is LinearSVC's time over the row's (both from the features).
``rel_objective_diff`` compares ``||v||^2`` with the active engine's cold answer;
LinearSVC's point, which may miss margins by its tolerance, is first scaled to smallest
margin 1 (``linearsvc_min_margin`` is the smallest margin before that). Timings are ratios
side by side on a shared machine; the counts (support vectors, status) are exact.

Usage::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m margin_solver.bench.measure.vstep_scaling \
        --n 100 500 2000 --out docs/results/vstep_scaling.json
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from margin_solver.bench.provenance import run_metadata
from margin_solver.core.data import PaperDistribution
from margin_solver.core.fileio import write_json
from margin_solver.svm.vstep import (
    VStepResult,
    solve_trusted_vstep,
    solve_vstep,
    solve_vstep_from_support,
)

#: LinearSVC's penalty: far above every dual of the hard-margin problems measured here.
SVC_C = 1e6


def features(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens averaged by uniform attention, the labels, and the tokens themselves."""
    ds = PaperDistribution(d=d, T=2, snr=math.sqrt(1.0 / n), eta=0.15).sample(n, seed=seed)
    return ds.X.mean(axis=1), ds.y.astype(float), ds.X


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall-clock seconds of ``repeats`` calls of ``fn`` and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def linear_svc(Z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """LinearSVC's weight vector (scikit-learn is a test dependency: imported here only)."""
    from sklearn.svm import LinearSVC

    svc = LinearSVC(C=SVC_C, loss="hinge", tol=1e-8, fit_intercept=False, max_iter=10**7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a ConvergenceWarning would show in the row's numbers
        return svc.fit(Z, y).coef_.ravel()


def run(n: int, d: int, repeats: int, seed: int, perturb: float) -> list[dict]:
    """The four rows at one n."""
    Z, y, X = features(n, d, seed)
    K = Z @ Z.T
    rng = np.random.default_rng(seed + 1)
    noise = perturb * np.sqrt(np.mean(X**2)) * rng.standard_normal(X.shape)
    Z_near = (X + noise).mean(axis=1)
    near = solve_vstep(Z_near, y, "active")
    guess = near.alpha

    def warm(K: np.ndarray) -> VStepResult:
        return solve_vstep_from_support(K, y, guess, "active")

    svc_s, w = timed(lambda: linear_svc(Z, y), repeats)
    cold_s, cold = timed(lambda: solve_vstep(Z, y, "active"), repeats)
    rows = []
    for engine, from_z, from_k in (
        (
            "active",
            lambda: solve_vstep(Z, y, "active"),
            lambda: solve_trusted_vstep(K, y, "active"),
        ),
        ("active-warm", lambda: warm(Z @ Z.T), lambda: warm(K)),
        ("ldp", lambda: solve_vstep(Z, y, "ldp"), lambda: solve_trusted_vstep(K, y, "ldp")),
    ):
        s, res = (cold_s, cold) if engine == "active" else timed(from_z, repeats)
        k_s, _ = timed(from_k, repeats)
        rows.append(
            {
                "n": n,
                "d": d,
                "engine": engine,
                "status": res.status,
                "solver": res.solver,
                "support": int(np.count_nonzero(res.alpha)),
                "s": s,
                "s_K_given": k_s,
                "x_linearsvc": svc_s / s,
                "rel_objective_diff": (res.norm**2 - cold.norm**2) / cold.norm**2,
                "gap": res.gap,
            }
        )
    margin = float(np.min(y * (Z @ w)))
    rows.append(
        {
            "n": n,
            "d": d,
            "engine": "linearsvc",
            "s": svc_s,
            "x_linearsvc": 1.0,
            "rel_objective_diff": (float(w @ w) / margin**2 - cold.norm**2) / cold.norm**2,
            "linearsvc_min_margin": margin,
        }
    )
    rows[1]["perturbed_support"] = int(np.count_nonzero(guess))
    rows[1]["support_changes"] = int(np.count_nonzero((guess > 0) != (cold.alpha > 0)))
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as a terminal table."""
    cols = (
        "n",
        "engine",
        "status",
        "support",
        "s",
        "s_K_given",
        "x_linearsvc",
        "rel_objective_diff",
    )
    lines = [" | ".join(cols)]
    for row in rows:
        cells = []
        for col in cols:
            value = row.get(col, "-")
            cells.append(f"{value:.4g}" if isinstance(value, float) else str(value))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: measure every n, print the table, optionally write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 500, 2000], help="samples")
    parser.add_argument("--d", type=int, default=1000, help="features (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    parser.add_argument(
        "--perturb", type=float, default=0.01, help="token noise of the warm start (default 0.01)"
    )
    parser.add_argument("--out", metavar="FILE.json", help="also write the results file")
    args = parser.parse_args(argv)
    meta = run_metadata(__spec__.name, argv)  # before the run: its load average
    rows: list[dict] = []
    for n in args.n:
        rows += run(n, args.d, args.repeats, args.seed, args.perturb)
        print(format_table(rows[-4:]), flush=True)
    if args.out:
        write_json(args.out, {"benchmark": "vstep_scaling", "rows": rows, "meta": meta})
    return 0


if __name__ == "__main__":
    sys.exit(main())
