"""The alternating solver of P_R from one start: v-step, then projected gradient steps on p.

P_R (docs/theory.md, min-norm section):  minimize ||v||  s.t.  y_i f(X_i; v, p) >= 1,
||p|| <= R.

For fixed p the v-step (:func:`margin_solver.svm.vstep.solve_vstep`, an SVM on the attended
features z_i = X_i^T s_i) gives v*(p) and its dual alpha. The value function
phi(p) = 1/2 ||v*(p)||^2 has, where alpha is unique, the envelope gradient

    grad phi(p) = - sum_i alpha_i y_i X_i^T [ s_i * (u_i - f_i) ],   u_i = X_i v*,  f_i = s_i^T u_i,

a combination of tokens with coefficients ``G_it = -alpha_i y_i s_it (u_it - f_i)``
(:func:`gradient_coefficients`). The weights are the Lagrange multipliers alpha_i y_i, not
the v-step's ``coef`` (v = sum_i coef_i z_i): the two agree when the features are linearly
independent, but when they are not (n > d, e.g. d = 1) ``coef`` is only the minimum-norm way
of writing v and a gradient built from it is wrong. The p-step is a projected gradient step
``p <- Proj(p - t pg / ||pg||)`` along the projected gradient pg (g with its blocked outward
radial part removed when p is on the sphere, :func:`projected_gradient`) and
``Proj(p) = p min(1, R / ||p||)``, accepted only when phi decreases by at least an Armijo
fraction of the predicted decrease ``<g, p - p_new>``.

Direction and step schedule: after a few steps the direction is the L-BFGS one, ``H pg`` with
H the inverse-curvature estimate built from the last ``memory`` pairs (p change, projected
gradient change) of positive curvature (:func:`_quasi_newton`), and its first trial length is
``||H pg||`` (the quasi-Newton step, at most 2R). Without usable pairs (at the start, or when
``H pg`` is not a descent direction or its trial must shrink 10-fold before the Armijo test
holds; both also empty the memory) the direction is ``pg``
and the trial length is the Barzilai-Borwein one ``||pg|| <s, s> / <s, r>`` when the last step
had positive curvature, else the doubling schedule: measured in units of R (the first trial is
``t = R``), doubled up to 2R after a step accepted at its first trial. A rejected trial is
shrunk to the minimiser of the quadratic through phi(0), phi'(0) and phi(t), kept within
[t/10, t/2]. Why: on strongly correlated tokens (lifted image patches, token Gram condition
number ~1e6) phi is ill-conditioned and plain projected-gradient steps zigzag (step lengths
of ~5e-4 R, relative decrease ~1e-4 per step), so the digits cells of the benchmark stopped at
``max_iter`` far from stationarity; the curvature pairs remove most of that (docs/decisions.md,
"Quasi-Newton direction for the P_R descent"). No tuning to the scale of R or of the gradient
is needed.

Support-aware SQP steps (``sqp=True`` after ``sqp_after = 250`` quasi-Newton steps, the
defaults of the strategy table, :class:`margin_solver.core.strategy.Strategy`): each step
solves a QP model of phi that keeps every margin constraint, linearised, so samples may
enter and leave the support within the step (:mod:`margin_solver.descent.sqp`), and is
accepted by the ratio of actual to predicted decrease (:func:`_sqp_descent`). Why: on lifted
digit patches at n >= 80 the quasi-Newton descent ended every cell at its 500-step cap, far
from stationarity, and a fixed-support Newton model is wrong after a short move because the
support changes at nearly every step. docs/theory.md, "Support-aware SQP step", has the maths.

Stopping rule (first that holds): the relative projected-gradient norm ``||pg|| R / phi``
falls below ``gtol`` (a first-order stationary point); phi decreased by less than ``rtol``
(relative) over the last ``window`` accepted steps (first-order methods crawl in the last
digits: stopping there trades about ``rtol`` of relative accuracy in phi for a several-fold
shorter run); no step longer than ``1e-12 R`` passes
the Armijo test (a kink of phi, where alpha is not unique); ``max_iter`` steps.

Cost of an evaluation: every trial point of the line search first solves its v-step from
the current iterate's support vectors (:func:`margin_solver.svm.vstep.solve_vstep_on_support`,
exact and checked against the KKT conditions); along a descent the support rarely changes,
so most evaluations cost a Cholesky factorisation of support size instead of a general
v-step (124 of 128 on the benchmark instance of the same entry).

Two forms of the same computation (docs/theory.md, "Token-Gram (kernel) form"):
:class:`DenseForm` stores p as a
vector of R^d; :class:`KernelForm` stores the coefficients c of ``p = sum_it c_it x_it`` and
works with the token Gram matrix only, so each iteration costs O((nT)^2) whatever d is.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from margin_solver.core.kernel import TokenGram, attended_features, softmax
from margin_solver.core.results import INFEASIBLE, LOCAL_OPTIMAL, MAX_ITER, TIME_LIMIT
from margin_solver.core.strategy import (
    DEFAULT_STRATEGY,
    Strategy,
    deprecated_constants,
    strategy_from,
)
from margin_solver.core.tolerances import ARMIJO
from margin_solver.descent.sqp import SQPModel
from margin_solver.svm.vstep import VStepResult, solve_vstep_from_support

__all__ = [
    "STOPPED",
    "DenseForm",
    "DescentRun",
    "KernelForm",
    "PhiPoint",
    "check_descent_options",
    "descend",
    "evaluate_phi",
    "gradient_coefficients",
    "norm",
    "project",
    "projected_gradient",
    "with_gradient",
]

# DESCENT_OPTIONS, the descent's defaults before the strategy table, now its fields
__getattr__ = deprecated_constants(__name__, {"DESCENT_OPTIONS": "descent_options"})

#: Status of a descent that its caller's test (``until`` of :func:`descend`) stopped; the
#: caller gives it its own meaning, so no solver result carries it.
STOPPED = "stopped"

# Shortest trial step, relative to R, before declaring that no descent step exists (rounding
# level: a step this short changes no score in float64).
_MIN_STEP = 1e-12


class DenseForm:
    """p and gradients as dense vectors of R^d; per-iteration cost O(n T d + n^2 d)."""

    name = "dense"

    def __init__(self, X: np.ndarray):
        self.X = X
        self.n, self.T, self.d = X.shape

    def zeros(self) -> np.ndarray:
        """The zero attention vector."""
        return np.zeros(self.d)

    def from_coefficients(self, coef: np.ndarray) -> np.ndarray:
        """The vector ``sum_it coef_it x_it`` in this form's representation."""
        return TokenGram.materialize(self.X, coef)

    def scores(self, p: np.ndarray) -> np.ndarray:
        """Attention scores ``X_i p``; shape (n, T)."""
        return self.X @ p

    def inner(self, a: np.ndarray, b: np.ndarray) -> float:
        """Inner product of two vectors in this form's representation."""
        return float(a @ b)

    def metric(self, a: np.ndarray) -> np.ndarray:
        """The representation ``m`` with ``inner(b, a) = sum(b * m)`` for every b: a itself."""
        return a

    def feature_gram(self, s: np.ndarray) -> np.ndarray:
        """``K_ij = <z_i, z_j>`` for attention ``s``."""
        Z = attended_features(self.X, s)
        return Z @ Z.T

    def token_values(self, a: np.ndarray) -> np.ndarray:
        """``<x_it, sum_jr a_jr x_jr>`` for token coefficients ``a``; shape (n, T)."""
        return self.X @ TokenGram.materialize(self.X, a)

    def dense(self, p: np.ndarray) -> np.ndarray:
        """p as a vector of R^d."""
        return p

    def token_gram_matrix(self) -> np.ndarray | None:
        """The token Gram matrix ``H = X X^T`` (nT x nT), for the SQP model of the descent."""
        if getattr(self, "_token_gram", None) is None:
            flat = self.X.reshape(self.n * self.T, self.d)
            self._token_gram = flat @ flat.T
        return self._token_gram

    def token_coefficients(self, p: np.ndarray) -> np.ndarray | None:
        """Coefficients c with ``p = sum_it c_it x_it`` (least squares), None if p is not in
        the tokens' span."""
        flat = self.X.reshape(self.n * self.T, self.d)
        c = np.linalg.lstsq(flat.T, p, rcond=None)[0]
        off_span = np.linalg.norm(flat.T @ c - p)
        return c.reshape(self.n, self.T) if off_span <= 1e-9 * np.linalg.norm(p) else None


class KernelForm:
    """p as token coefficients c (p = X^T c); per-iteration cost O((nT)^2), independent of d."""

    name = "kernel"

    def __init__(self, X: np.ndarray, gram: TokenGram):
        self.X = X
        self.gram = gram
        self.n, self.T, self.d = X.shape

    def zeros(self) -> np.ndarray:
        """The zero attention vector (all coefficients zero)."""
        return np.zeros((self.n, self.T))

    def from_coefficients(self, coef: np.ndarray) -> np.ndarray:
        """Token coefficients are this form's representation."""
        return np.array(coef, dtype=np.float64)

    def scores(self, c: np.ndarray) -> np.ndarray:
        """Scores ``X_i p = (H c)_i``; shape (n, T)."""
        return self.gram.apply(c)

    def inner(self, a: np.ndarray, b: np.ndarray) -> float:
        """``<X^T a, X^T b> = a^T H b``."""
        return float(a.reshape(-1) @ (self.gram.H @ b.reshape(-1)))

    def metric(self, a: np.ndarray) -> np.ndarray:
        """``H a``, so that ``inner(b, a) = sum(b * H a)`` costs O(nT) once it is stored."""
        return self.gram.apply(a)

    def feature_gram(self, s: np.ndarray) -> np.ndarray:
        """``K_ij = s_i^T H_ij s_j``."""
        return self.gram.feature_gram(s)

    def token_values(self, a: np.ndarray) -> np.ndarray:
        """``H a``; shape (n, T)."""
        return self.gram.apply(a)

    def dense(self, c: np.ndarray) -> np.ndarray:
        """p = X^T c as a vector of R^d (one O(nTd) product)."""
        return TokenGram.materialize(self.X, c)

    def token_gram_matrix(self) -> np.ndarray | None:
        """The token Gram matrix H (nT x nT), for the SQP model of the descent."""
        return self.gram.H

    def token_coefficients(self, c: np.ndarray) -> np.ndarray | None:
        """Token coefficients are this form's representation."""
        return c


Form = DenseForm | KernelForm


def kernel_trials_cheaper(n: int, T: int, d: int) -> bool:
    """Whether a trial point of the descent costs fewer multiply-adds in :class:`KernelForm`
    than in :class:`DenseForm`, once the token Gram matrix is built (the solve builds it in
    both forms).

    A kernel trial point is about four products with the (nT, nT) token Gram matrix (the
    norm of the projected point, the Armijo prediction, the scores, the feature Gram
    matrix): ``4 (nT)^2``. A dense one forms the attended features and their Gram matrix:
    ``n^2 d + 2 nT d``. At n = 5000, T = 2, d = 10^4 that is 4e8 against 2.5e11.
    """
    return 4 * (n * T) ** 2 < n * n * d + 2 * n * T * d


@dataclass
class PhiPoint:
    """phi(p) = 1/2 ||v*(p)||^2 and what the v-step gave at p.

    ``gradient`` is filled only for accepted iterates (trial points need phi alone).
    """

    p: np.ndarray
    attention: np.ndarray
    vstep: VStepResult
    phi: float
    y: np.ndarray
    gradient: np.ndarray | None = None

    @property
    def feasible(self) -> bool:
        """True when some v interpolates the data at this p."""
        return math.isfinite(self.phi)

    @property
    def value_coefficients(self) -> np.ndarray:
        """Token coefficients of v*: ``a_it = coef_i s_it`` (v = sum_i coef_i z_i)."""
        return self.attention * self.vstep.coef[:, None]


def evaluate_phi(
    form: Form,
    y: np.ndarray,
    p: np.ndarray,
    vstep_solver: str = DEFAULT_STRATEGY.vstep_solver,
    support: np.ndarray | None = None,
) -> PhiPoint:
    """Solve the v-step at p; phi = inf when the attended features cannot be separated.

    With ``support`` (the duals at a nearby p, or a mask of its support vectors) the v-step
    is first solved from that guess (:func:`margin_solver.svm.vstep.solve_vstep_on_support`:
    a few Cholesky solves of support size, exact when it succeeds); when that fails, or
    without ``support``, the full v-step runs. When ``vstep_solver`` raises or is
    inaccurate the v-step falls back to the other engines (recorded in
    ``point.vstep.fallbacks``), so an engine failure is not read as infeasibility.
    """
    s = softmax(form.scores(p))
    K = form.feature_gram(s)
    result = solve_vstep_from_support(K, y, support, vstep_solver)
    phi = 0.5 * result.norm**2 if result.success else math.inf
    return PhiPoint(p, s, result, phi, y)


def gradient_coefficients(form: Form, point: PhiPoint) -> np.ndarray:
    """Token coefficients ``G_it = -alpha_i y_i s_it (u_it - f_i)`` of grad phi at a feasible p."""
    s = point.attention
    u = form.token_values(point.value_coefficients)
    f = np.sum(s * u, axis=-1, keepdims=True)  # per head too (multihead.MultiHeadForm)
    return -(point.vstep.alpha * point.y)[:, None] * s * (u - f)


def with_gradient(form: Form, point: PhiPoint) -> PhiPoint:
    """``point`` with its envelope gradient of phi set (:func:`gradient_coefficients`)."""
    point.gradient = form.from_coefficients(gradient_coefficients(form, point))
    return point


def norm(form: Form, a: np.ndarray) -> float:
    """Euclidean norm of a vector of R^d given in ``form``'s representation."""
    return math.sqrt(max(form.inner(a, a), 0.0))


def project(form: Form, p: np.ndarray, R: float) -> np.ndarray:
    """``Proj(p) = p min(1, R / ||p||)``, the projection on the ball of radius R."""
    length = norm(form, p)
    return p if length <= R else p * (R / length)


def projected_gradient(form: Form, p: np.ndarray, g: np.ndarray, R: float) -> np.ndarray:
    """The minimum-norm element of ``g + N(p)``, N the ball's normal cone at p.

    Inside the ball it is g; on the sphere the outward radial part of -g (which the
    constraint blocks) is removed: ``pg = g + max(0, -<g, p_hat>) p_hat``. Its norm is zero
    exactly at first-order stationary points of phi on the ball.
    """
    pp = form.inner(p, p)
    if pp < (R * (1 - 1e-9)) ** 2:
        return g
    radial = form.inner(g, p) / math.sqrt(pp)
    return g if radial >= 0 else g - radial * p / math.sqrt(pp)


def _backtrack(step: float, phi0: float, phi_step: float, slope: float) -> float:
    """Next trial step after a rejected one: the minimiser of the quadratic through phi(0),
    phi'(0) = -slope and phi(step), kept within [step / 10, step / 2] (plain halving when
    phi(step) is infinite)."""
    curvature = phi_step - phi0 + slope * step
    if not math.isfinite(phi_step) or curvature <= 0:
        return 0.5 * step
    return min(max(slope * step**2 / (2 * curvature), 0.1 * step), 0.5 * step)


def _barzilai_borwein(form: Form, previous: PhiPoint, point: PhiPoint) -> float | None:
    """The Barzilai-Borwein step ``<s, s> / <s, r>`` (s = p change, r = gradient change), the
    inverse of phi's curvature along the last step; None when that curvature is not positive."""
    s = point.p - previous.p
    r = point.gradient - previous.gradient
    sr = form.inner(s, r)
    return form.inner(s, s) / sr if sr > 0 else None


def _line_search(
    form: Form,
    y: np.ndarray,
    point: PhiPoint,
    direction: np.ndarray,
    step: float,
    shortest: float,
    R: float,
    run: DescentRun,
    vstep_solver: str,
) -> tuple[PhiPoint | None, float, bool]:
    """Backtrack from ``Proj(p - step direction)`` (``direction`` of unit norm) until the
    Armijo test holds or the step falls below ``shortest``; return (accepted point or None,
    last trial length, accepted at once)."""
    g = point.gradient
    slope = form.inner(g, direction)  # d phi / d step at step 0, before projection
    first_trial = True
    while step >= shortest:
        q = project(form, point.p - step * direction, R)
        predicted = form.inner(g, point.p - q)
        candidate = evaluate_phi(form, y, q, vstep_solver, support=point.vstep.alpha)
        run.count_solve(candidate)
        if candidate.phi <= point.phi - ARMIJO * predicted:
            return candidate, step, first_trial
        step = _backtrack(step, point.phi, candidate.phi, slope)
        first_trial = False
    return None, step, False


def _remember(form: Form, pairs: list, move: np.ndarray, change: np.ndarray, memory: int) -> None:
    """Keep the pair (step, change of projected gradient) when its curvature is positive.

    Each pair is stored with its images under the form's metric, so that the two-loop
    recursion of :func:`_quasi_newton` takes O(nT) inner products in kernel form instead of
    O((nT)^2) ones (2 ``memory`` of them per step).
    """
    if memory == 0:
        return
    move_m, change_m = form.metric(move), form.metric(change)
    sr = float(np.vdot(move, change_m))
    # norms taken apart: the product of the squared norms can overflow
    move_norm = math.sqrt(max(float(np.vdot(move, move_m)), 0.0))
    change_norm = math.sqrt(max(float(np.vdot(change, change_m)), 0.0))
    if sr > 1e-12 * move_norm * change_norm:
        pairs.append((move, change, move_m, change_m, 1.0 / sr))
        del pairs[:-memory]


def _quasi_newton(form: Form, pairs: list, pg: np.ndarray) -> np.ndarray | None:
    """L-BFGS two-loop product ``H pg`` (H the inverse-curvature estimate from ``pairs``);
    None when it is not a descent direction (``<pg, H pg> <= 0``)."""
    q = pg.copy()
    coefs = []
    for _s, r, s_m, _r_m, rho in reversed(pairs):
        a = rho * float(np.vdot(s_m, q))
        q = q - a * r
        coefs.append(a)
    s, r, s_m, r_m, rho = pairs[-1]
    q = q / (rho * float(np.vdot(r, r_m)))
    for (s, _r, _s_m, r_m, rho), a in zip(pairs, reversed(coefs)):
        b = rho * float(np.vdot(r_m, q))
        q = q + (a - b) * s
    return q if form.inner(pg, q) > 0 else None


def check_descent_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The descent's fields of :func:`margin_solver.core.strategy.strategy_from` ``(options)``,
    as keywords of :func:`descend`.

    Raises
    ------
    InvalidInputError
        On an unknown key or a bad value (:func:`margin_solver.core.strategy.strategy_from`).
    """
    return strategy_from(options).descent_options()


@dataclass
class DescentRun:
    """Outcome of :func:`descend` from one start.

    ``n_iter`` counts accepted p-steps, ``n_eval`` v-step solves (trial points included),
    ``n_on_support`` those solved from the support vectors of the current iterate
    (:func:`margin_solver.svm.vstep.solve_vstep_on_support`, a few solves or the active-set
    engine);
    the histories hold ``||v*||`` and the projected gradient norm at each iterate;
    ``fallbacks`` counts the v-step solves whose first engine failed (``last_fallback`` is
    the most recent such failure, ``"engine: reason"``).
    """

    point: PhiPoint
    status: str
    reason: str
    n_iter: int
    n_eval: int = 1
    n_on_support: int = 0
    norm_history: list[float] = field(default_factory=list)
    pg_history: list[float] = field(default_factory=list)
    fallbacks: int = 0
    last_fallback: str = ""

    def count_solve(self, point: PhiPoint) -> None:
        """Count a trial point's v-step solve and whether it needed a fallback engine."""
        self.n_eval += 1
        self.n_on_support += point.vstep.solver in ("support", "active")
        self.count_fallbacks(point)

    def count_fallbacks(self, point: PhiPoint) -> None:
        """Note whether ``point``'s v-step needed a fallback engine."""
        if point.vstep.fallbacks:
            self.fallbacks += 1
            self.last_fallback = point.vstep.fallbacks[-1]

    @property
    def norm(self) -> float:
        """``||v*||`` at the final p (inf when infeasible)."""
        return math.sqrt(2 * self.point.phi)

    def record(self, point: PhiPoint, pg_norm: float) -> float:
        """Append an iterate's ``||v*||`` and projected gradient norm; return the latter."""
        self.norm_history.append(math.sqrt(2 * point.phi))
        self.pg_history.append(pg_norm)
        return pg_norm

    def stops_at(
        self, point: PhiPoint, pg_norm: float, R: float, gtol: float, deadline: float
    ) -> bool:
        """The tests every descent applies at an iterate before its next step: the time
        limit (status ``"time_limit"``) and stationarity, ``||pg|| R / phi <= gtol``
        (``"local_optimal"``). True, with the status and reason set, when the run stops."""
        if time.perf_counter() > deadline:
            self.status, self.reason = TIME_LIMIT, "stopped by the time limit"
        elif pg_norm * R <= gtol * point.phi:
            self.status = LOCAL_OPTIMAL
            self.reason = f"projected gradient ||pg|| R / phi <= gtol={gtol:g}"
        else:
            return False
        return True

    def stopped_by(self, until: Callable[[PhiPoint], str | None] | None, point: PhiPoint) -> bool:
        """The caller's test ``until`` at an accepted iterate: True, with status
        ``"stopped"`` and its reason, when it returns one."""
        reason = None if until is None else until(point)
        if reason is None:
            return False
        self.status, self.reason = STOPPED, reason
        return True

    def stalls(self, phis: list[float], rtol: float, window: int) -> bool:
        """The stall test after an accepted step: phi (history ``phis``) decreased by less
        than ``rtol`` (relative) over the last ``window`` steps; True, with status
        ``"local_optimal"`` and the reason set, when the run stops."""
        if len(phis) > window and phis[-1 - window] - phis[-1] <= rtol * phis[-1 - window]:
            self.status = LOCAL_OPTIMAL
            self.reason = f"phi decreased by less than rtol={rtol:g} (relative) in {window} steps"
            return True
        return False


def descend(
    form: Form,
    y: np.ndarray,
    p0: np.ndarray,
    R: float,
    *,
    max_iter: int = 500,
    gtol: float = 1e-6,
    rtol: float = 1e-7,
    strategy: Strategy = DEFAULT_STRATEGY,
    window: int | None = None,
    vstep_solver: str | None = None,
    use_bb: bool | None = None,
    memory: int | None = None,
    sqp: bool | None = None,
    sqp_after: int | None = None,
    deadline: float = math.inf,
    until: Callable[[PhiPoint], str | None] | None = None,
    newton: bool | None = None,
) -> DescentRun:
    """Projected quasi-Newton descent on phi(p) over ``||p|| <= R`` from ``p0``.

    See the module docstring for the direction, the step schedule and the stopping rule.
    ``strategy`` holds the descent's knobs (:class:`margin_solver.core.strategy.Strategy`,
    the defaults of :func:`margin_solver.minnorm.solve.solve_min_norm`); a keyword of the
    same name (``window``, ``vstep_solver``, ``use_bb``, ``memory``, ``sqp``,
    ``sqp_after``) overrides its field. ``memory`` is the number of L-BFGS curvature pairs
    (0: projected-gradient steps only); ``use_bb`` takes Barzilai-Borwein trial lengths for
    those gradient steps (False: the doubling schedule alone). Both are there to compare
    with the plain method. ``sqp`` takes the support-aware sequential-QP steps of
    :func:`_sqp_descent` instead (forms with a token Gram matrix: :class:`DenseForm`,
    :class:`KernelForm`; other forms take the quasi-Newton descent), after ``sqp_after``
    quasi-Newton steps (a descent that stops within them is the quasi-Newton one).
    ``deadline`` is a :func:`time.perf_counter` reading after which the descent stops at
    its current iterate (the whole-call time limit of
    :func:`margin_solver.minnorm.solve.solve_min_norm`). ``until`` is called with every accepted
    iterate; when it returns a reason the descent stops there (status ``"stopped"``): a
    caller's own test, e.g. :func:`margin_solver.minnorm.search.hard_descend`'s, without restarting
    the quasi-Newton memory. ``newton`` is deprecated and ignored (Newton steps in the
    score space were removed; docs/decisions.md, "Newton steps removed").

    Returns
    -------
    DescentRun
        Status ``"local_optimal"`` (a stopping test held; a local, not global, statement),
        ``"max_iter"``, ``"time_limit"`` (``deadline`` passed), ``"stopped"`` (by ``until``)
        or ``"infeasible"`` (the v-step is infeasible at ``p0``; a statement about ``p0``
        only).
    """
    if newton is not None:
        warnings.warn(
            "descend(newton=...) is deprecated and ignored: Newton steps in the score space "
            'were removed (docs/decisions.md, "Newton steps removed").',
            DeprecationWarning,
            stacklevel=2,
        )
    window = strategy.window if window is None else window
    vstep_solver = strategy.vstep_solver if vstep_solver is None else vstep_solver
    use_bb = strategy.use_bb if use_bb is None else use_bb
    memory = strategy.memory if memory is None else memory
    sqp = strategy.sqp if sqp is None else sqp
    sqp_after = strategy.sqp_after if sqp_after is None else sqp_after
    point = evaluate_phi(form, y, project(form, p0, R), vstep_solver)
    run = DescentRun(point, MAX_ITER, f"reached max_iter={max_iter}", 0)
    run.count_fallbacks(point)
    if not point.feasible:
        run.status, run.reason = INFEASIBLE, point.vstep.message
        return run
    point = with_gradient(form, point)
    if sqp and type(form) in (DenseForm, KernelForm):
        if sqp_after > 0:
            run = descend(
                form,
                y,
                p0,
                R,
                max_iter=min(sqp_after, max_iter),
                gtol=gtol,
                rtol=rtol,
                window=window,
                vstep_solver=vstep_solver,
                use_bb=use_bb,
                memory=memory,
                sqp=False,
                deadline=deadline,
                until=until,
            )
            if run.status != MAX_ITER or run.n_iter >= max_iter:
                return run
            point = run.point
            run.reason = f"reached max_iter={max_iter}"
            del run.norm_history[-1], run.pg_history[-1]  # recorded again below
        return _sqp_descent(
            form,
            y,
            point,
            R,
            run,
            max_iter=max_iter,
            gtol=gtol,
            rtol=rtol,
            window=window,
            vstep_solver=vstep_solver,
            trials=strategy.sqp_trials,
            deadline=deadline,
            until=until,
        )
    step = R
    bb_lambda = None
    pairs: list[tuple] = []  # quasi-Newton (s, r, metric s, metric r, 1 / <s, r>)
    last_move, last_pg = None, None
    phis = [point.phi]
    for it in range(max_iter):
        g = point.gradient
        pg = projected_gradient(form, point.p, g, R)
        pg_norm = run.record(point, norm(form, pg))
        if run.stops_at(point, pg_norm, R, gtol, deadline):
            break
        if last_move is not None:
            _remember(form, pairs, last_move, pg - last_pg, memory)
        trial, first_trial = None, False
        quasi = _quasi_newton(form, pairs, pg) if pairs else None
        if quasi is not None:
            length = norm(form, quasi)
            # a quasi-Newton step that must shrink 10-fold is a bad model: restart instead
            step0 = min(length, 2 * R)
            trial, _, _ = _line_search(
                form, y, point, quasi / length, step0, 0.1 * step0, R, run, vstep_solver
            )
        if trial is None:  # no quasi-Newton step: a projected-gradient step, memory restarted
            pairs.clear()
            if bb_lambda is not None:
                step = min(max(bb_lambda * pg_norm, _MIN_STEP * R), 2 * R)
            trial, step, first_trial = _line_search(
                form, y, point, pg / pg_norm, step, _MIN_STEP * R, R, run, vstep_solver
            )
        if trial is None:
            run.status = LOCAL_OPTIMAL
            run.reason = "no step passes the Armijo test (a kink of phi or a stationary point)"
            break
        previous, point = point, with_gradient(form, trial)
        run.point, run.n_iter = point, it + 1
        last_move, last_pg = point.p - previous.p, pg
        bb_lambda = _barzilai_borwein(form, previous, point) if use_bb else None
        if bb_lambda is None and first_trial:
            step = min(2 * step, 2 * R)
        phis.append(point.phi)
        if run.stalls(phis, rtol, window) or run.stopped_by(until, point):
            break
    if len(run.norm_history) == run.n_iter:  # the last accepted iterate is not recorded yet
        run.record(point, norm(form, projected_gradient(form, point.p, point.gradient, R)))
    return run


# Ratio test of the SQP step (Nocedal and Wright, Algorithm 4.1): accept when phi decreased
# by at least this fraction of the model's prediction; divide the proximal parameter t by
# _SQP_FACTOR below the lower ratio, multiply it above the upper one.
_SQP_ACCEPT = 0.1
_SQP_LOW, _SQP_HIGH, _SQP_FACTOR = 0.25, 0.75, 4.0


def _sqp_model(form: Form, point: PhiPoint, R: float) -> SQPModel | None:
    """The QP model of phi at ``point`` (:mod:`margin_solver.descent.sqp`), or None when p is not
    in the tokens' span (a dense p from outside; then only the quasi-Newton step applies).

    The ball's multiplier is ``mu = -<grad phi, p> / ||p||^2`` when p is on the sphere
    (within 1e-6 R) and the gradient pushes outward, else 0 (the ball enters linearised).
    """
    c = form.token_coefficients(point.p)
    if c is None:
        return None
    pp = form.inner(point.p, point.p)
    mu = 0.0
    if pp >= (R * (1 - 1e-6)) ** 2:
        mu = max(0.0, -form.inner(point.gradient, point.p) / pp)
    return SQPModel(
        form.token_gram_matrix(),
        point.y,
        point.attention,
        point.value_coefficients,
        point.vstep.alpha,
        c,
        R,
        mu,
    )


def _sqp_descent(
    form: Form,
    y: np.ndarray,
    point: PhiPoint,
    R: float,
    run: DescentRun,
    *,
    max_iter: int,
    gtol: float,
    rtol: float,
    window: int,
    vstep_solver: str,
    trials: int,
    deadline: float,
    until: Callable[[PhiPoint], str | None] | None = None,
) -> DescentRun:
    """:func:`descend` with support-aware SQP steps (``sqp=True``) from a feasible point
    (``run.n_iter`` steps already taken; ``max_iter`` counts them).

    Each step solves the QP model of :class:`margin_solver.descent.sqp.SQPModel` (all n margins
    linearised, the Lagrangian's second derivatives, a proximal term 1/(2t) ||dp||^2), maps
    p + dp back onto the sphere when the ball is active (else projects it onto the ball),
    and accepts it by the ratio of phi's actual to predicted decrease; t grows after good
    ratios and shrinks after bad ones (docs/theory.md, "Support-aware SQP step"). Same
    stopping tests as the quasi-Newton descent (gtol, rtol over ``window`` steps, no
    decreasing step, max_iter, deadline, ``until``).
    """
    t = math.inf
    phis = [point.phi]
    for it in range(run.n_iter, max_iter):
        pg_norm = run.record(
            point, norm(form, projected_gradient(form, point.p, point.gradient, R))
        )
        if run.stops_at(point, pg_norm, R, gtol, deadline):
            break
        model = _sqp_model(form, point, R)
        trial = (
            None
            if model is None
            else _sqp_trial(
                form, y, point, model, R, run, min(t, R / pg_norm), vstep_solver, trials
            )
        )
        if trial is None:
            run.status = LOCAL_OPTIMAL
            run.reason = "no SQP step decreases phi (a kink of phi or a stationary point)"
            break
        trial_point, t = trial
        point = with_gradient(form, trial_point)
        run.point, run.n_iter = point, it + 1
        phis.append(point.phi)
        if run.stalls(phis, rtol, window) or run.stopped_by(until, point):
            break
    if len(run.norm_history) == run.n_iter:
        run.record(point, norm(form, projected_gradient(form, point.p, point.gradient, R)))
    return run


def _sqp_trial(
    form: Form,
    y: np.ndarray,
    point: PhiPoint,
    model: SQPModel,
    R: float,
    run: DescentRun,
    t: float,
    vstep_solver: str,
    trials: int,
) -> tuple[PhiPoint, float] | None:
    """The first of ``trials`` SQP trial points that passes the ratio test, with the next t;
    None if none."""
    on_sphere = model.mu > 0
    for _ in range(trials):
        out = model.step(t)
        if out is None or not (np.all(np.isfinite(out[1])) and math.isfinite(out[2])):
            t /= _SQP_FACTOR  # a failed (or, in rounding, non-finite) model: a shorter step
            continue
        _, dc, value = out
        move = form.from_coefficients(dc.reshape(form.n, form.T))
        if norm(form, move) <= _MIN_STEP * R:
            return None
        predicted = point.phi - value
        q = point.p + move
        q = q * (R / norm(form, q)) if on_sphere else project(form, q, R)
        candidate = evaluate_phi(form, y, q, vstep_solver, support=point.vstep.alpha)
        run.count_solve(candidate)
        ratio = (point.phi - candidate.phi) / predicted if predicted > 0 else -math.inf
        accepted = ratio >= _SQP_ACCEPT and candidate.phi < point.phi
        if ratio < _SQP_LOW:
            t /= _SQP_FACTOR
        elif ratio > _SQP_HIGH:
            t *= _SQP_FACTOR
        if accepted:
            return candidate, t
    return None
