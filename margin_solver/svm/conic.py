"""The v-step's conic engines: ECOS and Clarabel through cvxpy (see :mod:`margin_solver.svm.vstep`).

Kept apart from :mod:`margin_solver.svm.vstep` because importing cvxpy takes about half a second,
most of ``import margin_solver``, while the min-norm solver, the lower bound and the selection
SVMs use the exact LDP engine only: :mod:`margin_solver.svm.vstep` imports this module the first
time a conic engine runs.

Both problems handed to these engines have the form minimize ||x|| s.t. A x >= 1:
the Gram-reduced one (x = w, A = G, n variables; its cvxpy model is built once per
(n, solver) with G as a DPP parameter and cached, so re-solves skip canonicalisation) and the
primal reference (x = v, A = diag(y) Z, d variables).
"""

from __future__ import annotations

import logging
import threading
import warnings
from functools import lru_cache
from typing import NamedTuple

import cvxpy as cp
import numpy as np

from margin_solver.core.results import FAILED, INFEASIBLE, OPTIMAL, OPTIMAL_INACCURATE

logger = logging.getLogger("margin_solver")

# cvxpy solver name used by each conic engine, and the pip package that provides it.
CVXPY_SOLVER = {"ecos": "ECOS", "clarabel": "CLARABEL", "primal": "ECOS"}
_SOLVER_PACKAGE = {"ECOS": "ecos", "CLARABEL": "clarabel"}
# Solvers given the objective 1/2 ||x||^2 instead of ||x|| (see _objective).
_QUADRATIC_OBJECTIVE = frozenset({"CLARABEL"})

# Cached cvxpy models are shared objects; setting a parameter and solving must not interleave
# between threads.
_MODEL_LOCK = threading.Lock()


class SolverFailure(RuntimeError):
    """A conic solver is missing or broke down (cvxpy's ``SolverError``, re-raised as this so
    that :mod:`margin_solver.svm.vstep` can fall back without importing cvxpy)."""


class ConicAnswer(NamedTuple):
    """Status, primal point x, dual alpha of the objective 1/2 ||x||^2, and iterations."""

    status: str
    x: np.ndarray | None
    alpha: np.ndarray | None
    n_iter: int | None


def solve_reduced(G: np.ndarray, engine: str, tol: float) -> ConicAnswer:
    """Gram-reduced SOCP on the cached DPP model: minimize ||w|| s.t. G w >= 1.

    Parameters
    ----------
    G : ndarray of shape (n, n)
    engine : {"ecos", "clarabel"}
    tol : float
        Absolute and relative gap and feasibility tolerance of the solver.

    Raises
    ------
    SolverFailure
        When the solver is not installed or fails.
    """
    solver = _require_installed(CVXPY_SOLVER[engine])
    model = gram_model(G.shape[0], solver)
    with _MODEL_LOCK:
        model.G.value = G
        return _solve(model.problem, model.w, model.constraint, solver, tol)


def solve_primal(A: np.ndarray, tol: float) -> ConicAnswer:
    """Reference SOCP in d variables, with ECOS: minimize ||x|| s.t. A x >= 1."""
    solver = _require_installed(CVXPY_SOLVER["primal"])
    x = cp.Variable(A.shape[1])
    constraint = A @ x >= 1
    problem = cp.Problem(cp.Minimize(_objective(x, solver)), [constraint])
    return _solve(problem, x, constraint, solver, tol)


class GramModel(NamedTuple):
    """A cached cvxpy model of minimize ||w|| s.t. G w >= 1 with G a parameter."""

    problem: cp.Problem
    G: cp.Parameter
    w: cp.Variable
    constraint: cp.Constraint


@lru_cache(maxsize=32)
def gram_model(n: int, solver: str) -> GramModel:
    """Build (once per (n, solver)) the DPP model of minimize ||w|| s.t. G w >= 1.

    ``solver`` is part of the key because cvxpy keeps one canonicalisation per problem and
    redoes it when asked for another solver, and because the objective differs per solver
    (see :func:`_objective`).
    """
    G = cp.Parameter((n, n), name="G")
    w = cp.Variable(n, name="w")
    constraint = G @ w >= 1
    logger.debug("building cached v-step model for n=%d, solver=%s", n, solver)
    problem = cp.Problem(cp.Minimize(_objective(w, solver)), [constraint])
    return GramModel(problem, G, w, constraint)


def _objective(x: cp.Variable, solver: str) -> cp.Expression:
    """||x|| as an SOC for ECOS; 1/2 ||x||^2 for solvers with native quadratic objectives.

    Same minimiser. Measured on random instances with tol = 1e-9, Clarabel's duals are
    accurate to about 1e-10 (relative) on the quadratic form but only about 1e-7 on the SOC
    form; ECOS has no quadratic objective (cvxpy would rewrite it as an SOC, with duals worse
    than the plain norm's).
    """
    if solver in _QUADRATIC_OBJECTIVE:
        return cp.sum_squares(x) / 2
    return cp.norm(x, 2)


def _require_installed(solver: str) -> str:
    if solver not in cp.installed_solvers():
        raise SolverFailure(
            f"solver {solver} is not installed in cvxpy; install it with "
            f"`pip install {_SOLVER_PACKAGE[solver]}`."
        )
    return solver


def _solver_options(solver: str, tol: float) -> dict[str, float]:
    if solver == "ECOS":
        return {"abstol": tol, "reltol": tol, "feastol": tol}
    return {"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol}


def _solve(
    problem: cp.Problem, x: cp.Variable, constraint: cp.Constraint, solver: str, tol: float
) -> ConicAnswer:
    """Solve minimize ||x|| s.t. A x >= 1; return status, x, the dual alpha and iterations.

    alpha is the dual of the objective 1/2 ||x||^2 (KKT: x = A^T alpha). When the model
    minimises ||x|| instead, its KKT condition x / ||x|| = A^T mu gives alpha = ||x|| mu.
    """
    with warnings.catch_warnings():
        # cvxpy warns "Solution may be inaccurate"; the status carries that and we act on it.
        warnings.filterwarnings(
            "ignore", message="Solution may be inaccurate", category=UserWarning
        )
        try:
            problem.solve(solver=solver, **_solver_options(solver, tol))
        except cp.error.SolverError as exc:
            raise SolverFailure(str(exc)) from exc
    status = {
        cp.OPTIMAL: OPTIMAL,
        cp.OPTIMAL_INACCURATE: OPTIMAL_INACCURATE,
        cp.INFEASIBLE: INFEASIBLE,
        cp.INFEASIBLE_INACCURATE: INFEASIBLE,
    }.get(problem.status, FAILED)
    n_iter = problem.solver_stats.num_iters
    if status not in (OPTIMAL, OPTIMAL_INACCURATE) or x.value is None:
        return ConicAnswer(status, None, None, n_iter)
    alpha = np.asarray(constraint.dual_value, dtype=np.float64)
    if solver not in _QUADRATIC_OBJECTIVE:
        alpha = np.linalg.norm(x.value) * alpha
    return ConicAnswer(status, x.value, alpha, n_iter)
