"""A Lagrangian (S-lemma) lower bound on P_R for two tokens per sample, certified in numpy.

For fixed attention the v-step's dual gives ``1/2 ||v*||^2 = max_alpha sum(alpha) -
1/2 ||sum_i alpha_i y_i z_i||^2``, so for every alpha >= 0

    1/2 P_R^2 >= sum(alpha) - 1/2 max_{||p|| <= R} ||w_alpha(p)||^2,
    w_alpha(p) = sum_i alpha_i y_i z_i(p).

With T = 2, ``z_i = m_i + theta_i d_i`` (``m_i`` the token mean, ``d_i = x_i1 - x_i0``,
``theta_i = sigmoid(delta_i) - 1/2``, ``delta_i = <p, d_i>``), so ``||w_alpha||^2`` is a
quadratic ``q(theta)``. Its maximum is bounded above by the S-lemma over three facts about
``theta`` (docs/theory.md, "Lagrangian bound"):

* ``delta`` lies in the ellipsoid ``delta^T G^+ delta <= R^2`` (``G = [<d_i, d_j>]``);
* ``theta_i^2 = h(delta_i^2)`` with ``h(u) = tanh(sqrt(u) / 2)^2 / 4`` concave, so every
  tangent ``theta_i^2 <= h(u_k) + h'(u_k) (delta_i^2 - u_k)`` holds;
* ``theta_i^2 <= h(R^2 G_ii)``.

Multipliers for them make ``tau - q(theta)`` a sum of squares, and then
``P_R >= sqrt(2 sum(alpha) - tau)``. The best multipliers solve one semidefinite program
(cvxpy with Clarabel, an interior-point method, up to :data:`CLARABEL_MAX_SAMPLES` samples;
above, SCS, a first-order method, which is many times faster there); whatever the solver
returns, the bound is recomputed here from the multipliers alone (:func:`_certified_value`),
so solver inaccuracy can only make it weaker, never invalid.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from margin_solver.core.strategy import DEFAULT_STRATEGY
from margin_solver.core.tolerances import EIG_FLOOR
from margin_solver.svm.vstep import solve_trusted_vstep

__all__ = [
    "CLARABEL_MAX_ITER",
    "MAX_SAMPLES",
    "SCS_MAX_ITERS",
    "SETUP_RATIO",
    "LagrangianBound",
    "floored_root",
    "lagrangian_bound",
    "lagrangian_cap",
]

#: Largest n the SDP is set up for, and the size rule that alone decides whether the finite-R
#: bound runs this stage (T = 2 and n <= MAX_SAMPLES). Measured on a 2-core machine (12
#: tangents per spacing, the paper's data, R sqrt(d) in {1, 3, 10}; docs/decisions.md, "The
#: Lagrangian bound by SCS above n = 30"): Clarabel n = 12 in 0.4-0.9 s, n = 20 in 2-2.4 s,
#: n = 40 in 80-190 s (an earlier machine); SCS n = 40 in 5-12 s, n = 60 in 21 s (0.8 GB),
#: n = 100 in 530 s (3.3 GB).
MAX_SAMPLES = 60

#: Up to this n the SDP is solved by Clarabel (interior point: the multipliers to about 1e-8),
#: above it by SCS (first order, to ``SCS_EPS``): at n = 40 Clarabel took 80-190 s.
CLARABEL_MAX_SAMPLES = DEFAULT_STRATEGY.lagrangian_clarabel_max_samples

#: Clarabel's iteration budget (interior-point iterations; Clarabel's own default): it used at
#: most 52 on the measured instances, n <= 30 (docs/decisions.md, "The Lagrangian SDP").
CLARABEL_MAX_ITER = 200

#: SCS's iteration budget (ADMM iterations), the default of the strategy table's
#: ``lagrangian_scs_iters``: it converged within 950-1400 on the paper's data, n = 30-60
#: (docs/decisions.md, "The Lagrangian SDP").
SCS_MAX_ITERS = DEFAULT_STRATEGY.lagrangian_scs_iters

#: SCS's relative tolerance. At n = 40 the certified bound is within 2e-4 of 1e-6's (below
#: it by the solver's inaccuracy) in half the time (docs/decisions.md, "The Lagrangian bound
#: by SCS above n = 30").
SCS_EPS = 1e-4

#: Under a caller's time limit, the SDP solver's set-up (SCS's factorisation, which nothing
#: can interrupt, and which its own time limit does not count) is predicted at this many
#: times the seconds cvxpy took to compile the same problem in the same call: the default of
#: the strategy table's ``lagrangian_setup_ratio``.
SETUP_RATIO = DEFAULT_STRATEGY.lagrangian_setup_ratio

#: Tangent points per sample and spacing (|delta| and theta each evenly spaced; 2 x this): the
#: default of the strategy table's ``lagrangian_tangents``.
TANGENTS = DEFAULT_STRATEGY.lagrangian_tangents


# N's smallest eigenvalue is raised to this fraction of its largest diagonal entry before
# b^T N^-1 b is computed, so that the solve's relative error (about cond(N) eps) stays below
# 1e-7; raising the box multipliers to do so only weakens the bound.
_N_FLOOR = 1e-9
# Relative safety margin on the computed largest eigenvalue.
_EIGENVALUE_ROUNDING = 1e-10


@dataclass
class LagrangianBound:
    """A certified lower bound on P_R from one set of multipliers.

    Attributes
    ----------
    value : float
        The bound (0 when the solver returned nothing usable).
    solver_status : str
        The SDP solver's status.
    solve_time : float
        Seconds.
    iterations : int or None
        The solver's iterations (None when it reported none).
    """

    value: float
    solver_status: str
    solve_time: float
    iterations: int | None = None


def _h(u: np.ndarray) -> np.ndarray:
    """``(sigmoid(sqrt(u)) - 1/2)^2 = tanh(sqrt(u) / 2)^2 / 4``."""
    return np.tanh(np.sqrt(u) / 2) ** 2 / 4


def _h_slope(u: np.ndarray) -> np.ndarray:
    """``h'(u) = tanh(r / 2) sech(r / 2)^2 / (8 r)`` with ``r = sqrt(u)``; 1/16 at u = 0."""
    r = np.sqrt(u)
    safe = np.maximum(r, 1e-300)
    sech = 1 / np.cosh(np.minimum(safe / 2, 300.0))  # 0 to double precision beyond
    return np.where(r > 1e-6, np.tanh(safe / 2) * sech**2 / (8 * safe), 1 / 16)


def floored_root(G: np.ndarray) -> np.ndarray:
    """The symmetric square root of ``G' >= G``: the eigenvalues of the Gram matrix G (as
    ``numpy.linalg.eigh`` reads it, from its lower triangle) raised to at least
    :data:`~margin_solver.core.tolerances.EIG_FLOOR` of the largest, so that the ellipsoid of
    reachable score differences, ``{G'^(1/2) w : ||w|| <= R}``, holds G's and rounding
    cannot cut a reachable score difference off (the Lagrangian and soft-selection bounds)."""
    lam, U = np.linalg.eigh(G)
    lam = np.maximum(lam, EIG_FLOOR * max(lam[-1], np.finfo(np.float64).tiny))
    return (U * np.sqrt(lam)) @ U.T


class _Data:
    """The Gram blocks of the token means m_i and differences d_i, in units of mean ||x||^2."""

    def __init__(self, H: np.ndarray, y: np.ndarray, R: float, tangents: int) -> None:
        n = len(y)
        self.scale = max(float(np.mean(np.diag(H))), np.finfo(np.float64).tiny)
        # x -> x / sqrt(scale) with R -> R sqrt(scale) keeps every score, and divides the
        # norm of v by sqrt(scale): P_R(X) = P_{R sqrt(s)}(X / sqrt(s)) / sqrt(s).
        Hs = H / self.scale
        self.R = R * math.sqrt(self.scale)
        mean = np.zeros((n, 2 * n))
        diff = np.zeros((n, 2 * n))
        rows = np.arange(n)
        mean[rows, 2 * rows] = mean[rows, 2 * rows + 1] = 0.5
        diff[rows, 2 * rows] = -1.0
        diff[rows, 2 * rows + 1] = 1.0
        self.Gmm = mean @ Hs @ mean.T
        self.Gmd = mean @ Hs @ diff.T
        self.G = diff @ Hs @ diff.T
        self.y = y
        self.G_half = floored_root(self.G)  # G'^(1/2), G' >= G
        reach = self.R * np.sqrt(np.maximum(np.diag(self.G), 0.0))  # max |delta_i|
        self.box = _h(reach**2)
        # tangent points evenly spaced in |delta| over [0, reach] and, as many, evenly spaced
        # in theta = sigmoid(delta) - 1/2 (these crowd where the sigmoid bends)
        grid = np.linspace(0.0, 1.0, tangents)[None, :]
        theta = np.sqrt(self.box)[:, None] * grid
        bend = np.minimum(2 * np.arctanh(np.minimum(2 * theta, 1 - 1e-16)), reach[:, None])
        u = np.hstack([reach[:, None] * grid, bend]) ** 2
        self.slope = _h_slope(u)
        self.offset = _h(u) - self.slope * u


def lagrangian_bound(
    H: np.ndarray,
    y: np.ndarray,
    R: float,
    *,
    tangents: int = TANGENTS,
    max_iter: int | None = None,
    time_limit: float = math.inf,
    setup_ratio: float = SETUP_RATIO,
    solver: str = "auto",
) -> LagrangianBound:
    """Certified lower bound on P_R for T = 2 by the S-lemma (module docstring).

    Parameters
    ----------
    H : ndarray of shape (2n, 2n)
        Token Gram matrix (two tokens per sample).
    y : ndarray of shape (n,)
        Labels in {-1, +1} (float).
    R : float
        Radius of the ball on p.
    tangents : int, default=12
        Tangent lines of h per sample and spacing (2 x this per sample).
    max_iter : int, optional
        The solver's iteration budget: :data:`CLARABEL_MAX_ITER` or :data:`SCS_MAX_ITERS` by
        the solver when omitted. A count, so that the multipliers, hence the bound, are the
        same on a loaded and an idle machine; the last iterate is certified as it is.
    time_limit : float, default=inf
        A caller's guard: seconds counted from the call. It is checked after cvxpy's import
        and after the problem's compilation, and the SDP is not solved (value 0,
        ``solver_status`` "not solved: ...") when either ended past it or when the solver's
        set-up, predicted at ``setup_ratio`` times the compilation's seconds, would;
        what is left after that prediction is the solver's own time limit (the last iterate
        is then certified as it is). It decides nothing while it does not act. The import
        (1.5-2.3 s the first time in a process) and the compilation (about 1 s at n = 40)
        cannot be cut short, so a guard that passes during one of them is overrun by at most
        that step.
    setup_ratio : float, default=4.0
        The set-up's prediction under a finite ``time_limit``, as a multiple of this call's
        compilation time (:data:`SETUP_RATIO`).
    solver : {"auto", "CLARABEL", "SCS"}, default="auto"
        The SDP solver; ``"auto"``: Clarabel up to :data:`CLARABEL_MAX_SAMPLES` samples,
        SCS above.

    Returns
    -------
    LagrangianBound

    Raises
    ------
    ValueError
        When ``len(y) > MAX_SAMPLES`` (the SDP's memory and time; callers check first), or
        an unknown ``solver``.
    """
    if len(y) > MAX_SAMPLES:
        raise ValueError(f"the Lagrangian bound's SDP is set up for n <= {MAX_SAMPLES}")
    if solver not in ("auto", "CLARABEL", "SCS"):
        raise ValueError(f"unknown solver {solver!r}; expected 'auto', 'CLARABEL' or 'SCS'")
    start = time.perf_counter()
    deadline = start + time_limit
    import cvxpy as cp  # imported only here: 1.5-2.3 s the first time in a process

    if time.perf_counter() > deadline:
        return _not_solved("the time limit passed during cvxpy's import", start)
    data = _Data(H, y, R, tangents)
    n = len(y)
    lam, U = np.linalg.eigh(np.block([[data.Gmm, data.Gmd], [data.Gmd.T, data.G]]))
    keep = lam > n * np.finfo(np.float64).eps * lam[-1]
    factor = U[:, keep] * np.sqrt(lam[keep])  # Gram of (m_1..m_n, d_1..d_n) = factor factor^T
    Fm, Fd = factor[:n], factor[n:]
    r = factor.shape[1]

    alpha = cp.Variable(n, nonneg=True)
    tau = cp.Variable()
    mu0 = cp.Variable(nonneg=True)  # ellipsoid
    lam_t = cp.Variable(data.slope.shape, nonneg=True)  # tangents
    mu = cp.Variable(n, nonneg=True)  # box
    ay = cp.multiply(alpha, y)
    c0 = Fm.T @ ay  # w_0 = sum_i alpha_i y_i m_i in factor coordinates
    C = Fd.T @ cp.diag(ay)  # columns alpha_i y_i d_i
    top = tau - mu0 * data.R**2 - data.box @ mu - cp.sum(cp.multiply(data.offset, lam_t))
    quadratic = cp.sum(lam_t, axis=1) + mu
    slopes = cp.sum(cp.multiply(data.slope, lam_t), axis=1)
    lmi = cp.bmat(
        [
            [
                cp.reshape(top, (1, 1), order="C"),
                np.zeros((1, n)),
                cp.reshape(c0, (1, r), order="C"),
            ],
            [np.zeros((n, 1)), cp.diag(quadratic), C.T],
            [cp.reshape(c0, (r, 1), order="C"), C, np.eye(r)],
        ]
    )
    ellipsoid = mu0 * np.eye(n) - data.G_half @ cp.diag(slopes) @ data.G_half
    problem = cp.Problem(
        cp.Maximize(cp.sum(alpha) - tau / 2),
        [(lmi + lmi.T) / 2 >> 0, (ellipsoid + ellipsoid.T) / 2 >> 0],
    )
    if solver == "auto":
        solver = "CLARABEL" if n <= CLARABEL_MAX_SAMPLES else "SCS"
    # compiled here, not inside problem.solve, so that the solver gets the time left after
    # the compilation and a compilation that ended past the guard is not solved at all
    if solver == "CLARABEL":
        options = {"max_iter": CLARABEL_MAX_ITER if max_iter is None else max_iter}
        time_option = "time_limit"
    else:
        options = {
            "eps_abs": SCS_EPS,
            "eps_rel": SCS_EPS,
            "max_iters": SCS_MAX_ITERS if max_iter is None else max_iter,
        }
        time_option = "time_limit_secs"
    compiling = time.perf_counter()
    try:
        compiled, chain, inverse = problem.get_problem_data(solver, solver_opts=options)
    except (cp.error.SolverError, ArithmeticError, ValueError) as exc:
        return LagrangianBound(0.0, f"solver error: {exc}", time.perf_counter() - start)
    now = time.perf_counter()
    if now > deadline:
        return _not_solved("the time limit passed during cvxpy's compilation", start)
    # the solver's set-up (SCS: a factorisation) cannot be cut short either, and its time
    # limit counts from its first iterate: predicted from this call's own compilation
    setup = setup_ratio * (now - compiling)
    seconds = deadline - now - setup
    if seconds <= 0:
        return _not_solved(
            f"the solver's set-up, predicted at {setup_ratio:g} x the compilation's "
            f"{now - compiling:.2g} s, would end past the time limit",
            start,
        )
    if math.isfinite(seconds):
        options[time_option] = seconds
    try:
        with warnings.catch_warnings():
            # "solution may be inaccurate": the certificate below does not trust it anyway
            warnings.simplefilter("ignore", UserWarning)
            solution = chain.solve_via_data(problem, compiled, solver_opts=options)
            problem.unpack_results(solution, chain, inverse)
    except (cp.error.SolverError, ArithmeticError, ValueError) as exc:
        return LagrangianBound(0.0, f"solver error: {exc}", time.perf_counter() - start)
    iterations = problem.solver_stats.num_iters if problem.solver_stats is not None else None
    if alpha.value is None or lam_t.value is None:
        return LagrangianBound(0.0, str(problem.status), time.perf_counter() - start, iterations)
    value = _certified_value(data, alpha.value, lam_t.value, mu.value)
    return LagrangianBound(
        value / math.sqrt(data.scale),
        str(problem.status),
        time.perf_counter() - start,
        iterations,
    )


def lagrangian_cap(
    H: np.ndarray, y: np.ndarray, R: float, selection: np.ndarray, *, tangents: int, svms: int
) -> tuple[float, int]:
    """An upper bound on every value :func:`lagrangian_bound` can certify (T = 2), and the
    SVMs it took.

    Its S-lemma uses three facts about (theta, delta), none of them signed: ``delta`` in the
    ellipsoid, ``theta_i^2`` below the tangents of h at ``delta_i^2``, and the box. So for
    any ``w`` of the ball and ``delta = G'^(1/2) w``, ``theta_i = s_i (min of those
    bounds)^(1/2)`` with any signs s satisfies all of them, the certificate's ``tau`` is at
    least ``q_alpha(theta)``, and its value is at most the SVM norm at the features ``m_i +
    theta_i d_i``. The signs are ``selection``'s (LB's best: theta > 0 attends token 1); w
    starts at the least-norm equal scores in those signs and takes projected-gradient steps
    (the SVM's duals give the gradient), ``svms`` SVMs in all. inf when the first does not
    separate.
    """
    data = _Data(H, y, R, tangents)
    sign = np.where(np.asarray(selection) == 1, 1.0, -1.0)
    rows = np.arange(len(y))

    def value(w: np.ndarray) -> tuple[float, np.ndarray | None]:
        """The SVM's squared norm at the features of ``w`` and its gradient in w."""
        delta = data.G_half @ w
        bounds = data.offset + data.slope * (delta**2)[:, None]
        k = np.argmin(bounds, axis=1)
        square = np.minimum(bounds[rows, k], data.box)
        theta = sign * np.sqrt(np.maximum(square, 0.0))
        # d theta_i / d delta_i where a tangent, not the box, is the least bound
        inner = (bounds[rows, k] < data.box) & (square > 0)
        slope = np.where(
            inner, sign * data.slope[rows, k] * delta / np.sqrt(np.where(inner, square, 1.0)), 0.0
        )
        K = data.Gmm + data.Gmd * theta[None, :] + data.Gmd.T * theta[:, None]
        K = K + data.G * np.outer(theta, theta)
        svm = solve_trusted_vstep((K + K.T) / 2, y, "active")
        if svm.alpha is None or not svm.success:
            return math.inf, None
        ay = svm.alpha * y
        # d ||v||^2 / d theta_i = -2 alpha_i y_i <d_i, sum_j alpha_j y_j z_j>
        along = data.Gmd.T @ ay + data.G @ (ay * theta)
        return svm.norm**2, data.G_half @ (-2 * ay * along * slope)

    equal = np.linalg.lstsq(data.G_half, sign, rcond=None)[0]  # delta = G'^(1/2) w = sign
    w = equal * (data.R / max(np.linalg.norm(equal), np.finfo(np.float64).tiny))
    best, gradient = value(w)
    if gradient is None:
        return math.inf, 1
    if not np.any(gradient):  # every theta at its box: no direction lowers the SVM
        return math.sqrt(best) / math.sqrt(data.scale), 1
    step = 0.1 * data.R / float(np.linalg.norm(gradient))
    for _ in range(svms - 1):
        trial = w - step * gradient
        trial *= min(1.0, data.R / max(float(np.linalg.norm(trial)), np.finfo(np.float64).tiny))
        found, slope_at = value(trial)
        if found < best and slope_at is not None:
            w, best, gradient, step = trial, found, slope_at, 1.5 * step
        else:
            step /= 2
    return math.sqrt(best) / math.sqrt(data.scale), max(svms, 1)


def _not_solved(why: str, start: float) -> LagrangianBound:
    """No multipliers: the caller's guard passed before the solver could start (``why``);
    only the trivial bound 0 is claimed."""
    return LagrangianBound(0.0, f"not solved: {why}", time.perf_counter() - start)


def _certified_value(data: _Data, alpha: np.ndarray, lam_t: np.ndarray, mu: np.ndarray) -> float:
    """``sqrt(2 sum(alpha) - tau)`` with the smallest tau these multipliers certify.

    The ellipsoid multiplier is raised to ``lambda_max(G'^(1/2) diag(nu) G'^(1/2))`` (the
    least that makes ``mu0 G'^-1 - diag(nu)`` PSD) and the box multipliers until
    ``N = diag(sum_k lam_ik + mu_i) - Q^T Q`` is positive definite; then
    ``tau = mu0 R^2 + sum mu_i box_i + sum lam_ik offset_ik + ||w_0||^2 + b^T N^-1 b``
    makes ``tau - q(theta)`` minus the multiplied constraints a sum of squares.
    """
    alpha = np.maximum(alpha, 0.0)
    lam_t = np.maximum(lam_t, 0.0)
    mu = np.maximum(np.asarray(mu, dtype=np.float64), 0.0)
    nu = (data.slope * lam_t).sum(axis=1)
    mu0 = max(float(np.linalg.eigvalsh(data.G_half @ (nu[:, None] * data.G_half)).max()), 0.0)
    mu0 *= 1 + _EIGENVALUE_ROUNDING
    ay = alpha * data.y
    QtQ = np.outer(ay, ay) * data.G
    b = ay * (data.Gmd.T @ ay)
    w0_sq = float(ay @ data.Gmm @ ay)
    N = np.diag(lam_t.sum(axis=1) + mu) - QtQ
    low = float(np.linalg.eigvalsh(N).min())
    floor = _N_FLOOR * max(float(np.abs(np.diag(N)).max()), np.finfo(np.float64).tiny)
    if low < floor:
        mu = mu + (floor - low)
        N = N + (floor - low) * np.eye(len(mu))
    tau = (
        mu0 * data.R**2
        + float(data.box @ mu)
        + float((data.offset * lam_t).sum())
        + w0_sq
        + float(b @ np.linalg.solve(N, b))
    )
    return math.sqrt(max(2 * float(alpha.sum()) - tau, 0.0))
