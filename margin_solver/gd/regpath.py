"""The weight-decay (regularisation) path of single-head attention (docs/theory.md).

For each ``lam`` of a decreasing sequence, :func:`regularization_path` minimises

    ``F_lam(v, p) = mean_i log(1 + exp(-y_i f(X_i; v, p))) + (lam / 2) ||v||^2``
    subject to ``||p|| <= R``

by projected gradient descent, warm-started from the previous ``lam``'s solution. The authors
argue that the min-norm interpolator P_R "roughly corresponds" to GD with a small weight decay
(Magen et al., arXiv 2410.07746; authors' reply, W2 and Q1). For a *fixed* attention this is a
theorem: the direction of the ridge-logistic minimiser tends to the hard-margin SVM's as
``lam -> 0`` (Rosset, Zhu and Hastie, JMLR 2004), i.e. to the v-step of P_R at that attention.
With ``p`` free the problem is not convex in ``p``: the path reaches a stationary point for each
``lam``, and whether its limit is P_R's solution or a local one is what the path measures.

Form: ``v`` and ``p`` are kept as coefficients on the training tokens (plus ``p0`` when the
attention is fixed elsewhere), as in GD's kernel form; gradients lie in that span, and the
component of ``p`` outside it changes no score, so nothing is lost.

Step: spectral (Barzilai-Borwein) step with Armijo backtracking on the projection arc
(Birgin, Martinez and Raydan, SIAM J. Optim. 2000). A ``lam`` is ``"converged"`` when the
projected gradient's norm is at most ``tol * lam * ||v||`` (the ridge term's own gradient, so
the stopping error is relative to what moves ``v``'s direction), ``"max_iter"`` when the cap
stops it first, ``"diverged"`` on non-finite values.

The classical constrained path (Rosset, Zhu and Hastie 2004 prove the same limit for it) is
:func:`constrained_path`: for each radius ``r`` of an increasing sequence it minimises the mean
logistic loss ``L`` subject to ``||v|| <= r`` and ``||p|| <= R``, with the same projected steps
(``v`` is scaled back to its ball too) on ``log L``: the same minimisers and stationary points,
without the factor ``exp(-margin)`` that makes ``L``'s curvature vanish at large ``r``. (On
``F_lam`` the curvature falls like ``lam``, and the weight-decay path's Barzilai-Borwein steps
reach their cap at very small ``lam``: weight-decay-path study.) At a stationary point on the sphere
``||v|| = r`` the loss gradient is ``-mu v`` for a multiplier ``mu >= 0``: the point is then also
stationary for ``F_mu``, so the two paths are one family of stationary points indexed by ``lam``
or by ``r``, and a constrained point reports ``mu`` as its ``lam``. Its stopping test is the
weight-decay test with ``lam`` the multiplier ``mu / L`` of ``log L``, estimated as
``max(0, -<grad_v log L, v>) / ||v||^2``; inside the sphere the multiplier is 0 and the test
cannot pass: for data that no attention in the ball separates, the large radii end
``"max_iter"``. Below float64's normal range for ``L`` (margins above about 708) ``grad L / L``
loses its digits: a step that reaches such a point stops the solve with ``"failed"`` (the ball
is too large to test stationarity in float64), keeping the last point before it.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from margin_solver.core.data import as_dataset
from margin_solver.core.kernel import token_loss_and_grads
from margin_solver.core.results import (
    CONVERGED,
    DIVERGED,
    FAILED,
    MAX_ITER,
    STATUS_TABLE,
    ConvergenceWarning,
    RecordMixin,
    ResultMixin,
)
from margin_solver.core.tolerances import ARMIJO
from margin_solver.core.validation import (
    InvalidInputError,
    check_int,
    check_memory,
    check_nonnegative,
    check_positive,
    check_radius,
    check_vector,
)

__all__ = [
    "PathPoint",
    "RegularizationPath",
    "constrained_path",
    "default_lambdas",
    "regularization_path",
]

#: The BB step's safeguards (relative to 1 / nu^2).
_STEP_MIN, _STEP_MAX = 1e-10, 1e10
_TINY = np.finfo(float).tiny


@dataclass(repr=False)
class PathPoint(RecordMixin):
    """The stationary point found at one ``lam`` (weight-decay path) or one ``r`` (constrained
    path).

    Attributes
    ----------
    lam : float
        The weight decay at which the point is stationary for ``F_lam``: the given one on the
        weight-decay path, the multiplier ``mu`` of ``||v|| <= r`` on the constrained path
        (module docstring; 0 when the point lies inside the ball).
    radius : float
        The bound ``r`` on ``||v||`` (constrained path); ``inf`` on the weight-decay path.
    v, p : ndarray of shape (n_features,)
    status : {"converged", "max_iter", "diverged", "failed"}
        See docs/statuses.md; ``"converged"``: projected-gradient test met (a stationary
        point; with ``p`` trained the problem is not convex, so not certified global).
    message : str
    iterations : int
    objective, loss : float
        ``F_lam`` (weight-decay path) or the loss (constrained path), and the mean logistic
        loss at ``(v, p)``.
    grad_norm : float
        Norm of the projected gradient at the end.
    margin : float
        ``min_i y_i f_i``.
    norm : float
        ``||v||``.
    normalized_norm : float
        ``||v|| / margin`` (NaN unless the point interpolates): the norm at margin 1,
        comparable with P_R's value at the same ``R``.
    selected_token : ndarray of shape (n_samples,)
        Argmax of each training sample's attention.
    """

    lam: float
    radius: float
    v: np.ndarray
    p: np.ndarray
    status: str
    message: str
    iterations: int
    objective: float
    loss: float
    grad_norm: float
    margin: float
    norm: float
    normalized_norm: float
    selected_token: np.ndarray

    @property
    def success(self) -> bool:
        """True when the stopping test was met (``STATUS_TABLE``)."""
        return STATUS_TABLE[self.status][0]


@dataclass(repr=False)
class RegularizationPath(ResultMixin):
    """Result of :func:`regularization_path` and :func:`constrained_path`.

    Attributes
    ----------
    points : list of PathPoint
        One per ``lam`` in decreasing order (weight-decay path) or one per ``r`` in
        increasing order (constrained path).
    status : {"converged", "max_iter", "diverged", "failed"}
        ``"converged"`` when every point is; otherwise the first failing point's status.
    message : str
    R : float
    trained : tuple of str
    kind : {"weight-decay", "constraint"}
        Which path: ``(lam / 2) ||v||^2`` added to the loss, or ``||v|| <= r``.
    solve_time : float
    """

    points: list[PathPoint]
    status: str
    message: str
    R: float
    trained: tuple[str, ...]
    kind: str
    solve_time: float = field(default=0.0)

    @property
    def lambdas(self) -> np.ndarray:
        """Each point's ``lam`` (given, or the multiplier of ``||v|| <= r``)."""
        return np.array([pt.lam for pt in self.points])

    @property
    def radii(self) -> np.ndarray:
        """Each point's bound ``r`` on ``||v||`` (``inf`` on the weight-decay path)."""
        return np.array([pt.radius for pt in self.points])


def default_lambdas(num: int = 9, largest: float = 1e-1, smallest: float = 1e-5) -> np.ndarray:
    """``num`` values from ``largest`` down to ``smallest``, evenly spaced on a log scale."""
    check_int(num, "num", 1)
    return np.geomspace(
        check_positive(largest, "largest"), check_positive(smallest, "smallest"), num
    )


def regularization_path(
    X: Any,
    y: Any = None,
    R: float = 1.0,
    *,
    lambdas: Iterable[float] | None = None,
    train: tuple[str, ...] = ("v", "p"),
    p0: Any = None,
    tol: float = 1e-6,
    max_iter: int = 20000,
) -> RegularizationPath:
    """Minimisers of the weight-decayed loss over a decreasing sequence of ``lam``.

    Parameters
    ----------
    X : Dataset or array-like of shape (n_samples, n_tokens, n_features)
    y : array-like of shape (n_samples,), optional
        Any two labels (numbers, booleans or strings; read once by
        :func:`margin_solver.core.validation.encode_labels`: the larger is +1);
        required unless ``X`` is a Dataset.
    R : float, default=1.0
        Attention radius: ``||p|| <= R``.
    lambdas : iterable of float, optional
        Weight decays (> 0), solved from the largest down, each warm-started from the
        previous solution. Default :func:`default_lambdas`.
    train : tuple of {"v", "p"}, default=("v", "p")
        ``("v",)`` keeps the attention fixed at ``p0`` (a convex ridge-logistic path, whose
        direction tends to the hard-margin SVM at that attention).
    p0 : array-like of shape (n_features,), optional
        Starting (or, with ``train=("v",)``, fixed) attention vector; default zero
        (uniform attention). Must satisfy ``||p0|| <= R`` when ``p`` is trained.
    tol : float, default=1e-6
        Relative stationarity tolerance (module docstring).
    max_iter : int, default=20000
        Iteration cap per ``lam``.

    Returns
    -------
    RegularizationPath
        ``kind = "weight-decay"``; each point's ``radius`` is ``inf``.

    Raises
    ------
    InvalidInputError
        Bad data, a non-positive ``lam``, an unknown ``train`` block, ``p0`` of another
        dimension or outside the ball.

    Warns
    -----
    margin_solver.core.results.ConvergenceWarning
        Some ``lam`` ended ``"max_iter"`` or ``"diverged"``.

    See Also
    --------
    constrained_path : the same family of stationary points, indexed by ``||v|| <= r``.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> train = PaperDistribution(d=200, snr=0.5, eta=0.0).sample(8, seed=0)
    >>> path = regularization_path(train, R=1.0, lambdas=[1e-1, 1e-2])
    >>> path.status, [pt.status for pt in path.points]
    ('converged', ['converged', 'converged'])
    """
    start = time.perf_counter()
    lams = _grid(
        default_lambdas() if lambdas is None else lambdas,
        "lambdas",
        "lambda",
        check_positive,
        descending=True,
    )
    settings = [(lam, math.inf) for lam in lams]
    return _run(X, y, R, train, p0, tol, max_iter, settings, "weight-decay", start)


def constrained_path(
    X: Any,
    y: Any = None,
    R: float = 1.0,
    *,
    radii: Iterable[float],
    train: tuple[str, ...] = ("v", "p"),
    p0: Any = None,
    tol: float = 1e-6,
    max_iter: int = 20000,
) -> RegularizationPath:
    """Minimisers of the loss subject to ``||v|| <= r`` over an increasing sequence of ``r``.

    The classical constrained form of the regularisation path (Rosset, Zhu and Hastie,
    JMLR 2004): minimise the mean logistic loss subject to ``||v|| <= r`` and ``||p|| <= R``
    by projected gradient, for each ``r`` from the smallest up, each warm-started from the
    previous solution (module docstring).

    Parameters
    ----------
    X : Dataset or array-like of shape (n_samples, n_tokens, n_features)
    y : array-like of shape (n_samples,), optional
        Any two labels (numbers, booleans or strings; read once by
        :func:`margin_solver.core.validation.encode_labels`: the larger is +1);
        required unless ``X`` is a Dataset.
    R : float, default=1.0
        Attention radius: ``||p|| <= R``.
    radii : iterable of float
        Bounds ``r`` on ``||v||`` (positive, finite, within the radius range of
        :func:`margin_solver.core.validation.check_radius`), solved in increasing order.
    train : tuple of {"v", "p"}, default=("v", "p")
        ``("v",)`` keeps the attention fixed at ``p0`` (convex; the direction tends to the
        hard-margin SVM at that attention as ``r`` grows).
    p0 : array-like of shape (n_features,), optional
        Starting (or, with ``train=("v",)``, fixed) attention vector; default zero
        (uniform attention). Must satisfy ``||p0|| <= R`` when ``p`` is trained.
    tol : float, default=1e-6
        Relative stationarity tolerance: the weight-decay path's test, with ``lam`` the
        multiplier of ``||v|| <= r`` for ``log L`` (module docstring).
    max_iter : int, default=20000
        Iteration cap per ``r``.

    Returns
    -------
    RegularizationPath
        ``kind = "constraint"``; each point's ``lam`` is its multiplier ``mu``.

    Raises
    ------
    InvalidInputError
        Bad data, an empty ``radii`` or a radius that is not a positive number in range, an
        unknown ``train`` block, ``p0`` of another dimension or outside the ball.

    Warns
    -----
    margin_solver.core.results.ConvergenceWarning
        Some ``r`` ended ``"max_iter"``, ``"diverged"`` or ``"failed"``.

    See Also
    --------
    regularization_path : the same family of stationary points, indexed by ``lam``.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> train = PaperDistribution(d=200, snr=0.5, eta=0.0).sample(8, seed=0)
    >>> path = constrained_path(train, R=1.0, radii=[1.0, 10.0])
    >>> path.status, bool(path.lambdas[0] > path.lambdas[1] > 0)
    ('converged', True)
    """
    start = time.perf_counter()
    settings = [(0.0, r) for r in _grid(radii, "radii", "radius", check_radius, descending=False)]
    return _run(X, y, R, train, p0, tol, max_iter, settings, "constraint", start)


def _grid(
    values: Any, name: str, item: str, check: Callable[[Any, str], float], descending: bool
) -> list[float]:
    """The validated, sorted values of a path's grid."""
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InvalidInputError(f"{name} must be a sequence of numbers, got {values!r}.")
    out = sorted((check(value, item) for value in values), reverse=descending)
    if not out:
        raise InvalidInputError(f"{name} is empty.")
    return out


def _run(
    X: Any,
    y: Any,
    R: float,
    train: Any,
    p0: Any,
    tol: float,
    max_iter: int,
    settings: list[tuple[float, float]],
    kind: str,
    start: float,
) -> RegularizationPath:
    """Validate the shared arguments and solve each ``(lam, r)`` of ``settings`` in turn."""
    data = as_dataset(X, y)
    n, T, d = data.X.shape
    yf = data.y.astype(np.float64)
    R = check_radius(R)
    blocks = (train,) if isinstance(train, str) else tuple(train)
    if "v" not in blocks or not set(blocks) <= {"v", "p"}:
        raise InvalidInputError(
            f"train must be ('v', 'p') or ('v',) (v is always trained), got {train!r}."
        )
    tol = check_nonnegative(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", 1)
    flat = data.X.reshape(n * T, d)
    basis = flat
    if p0 is not None:
        p0 = check_vector(p0, d, "p0")
        if "p" in blocks and float(p0 @ p0) > R * R * (1 + 1e-12):
            raise InvalidInputError(f"||p0|| = {np.linalg.norm(p0):.6g} exceeds R = {R:.6g}.")
        if np.any(p0):
            basis = np.concatenate([flat, p0[None]])
    m = len(basis)
    check_memory(
        2 * 8.0 * m * m,  # the Gram matrix and its token columns
        f"the token Gram matrix of the regularisation path ({m} x {m})",
        "subsample the training set (the path works on the nT x nT token Gram matrix)",
    )
    problem = _Problem(basis @ basis.T, n, T, yf, R, "p" in blocks)
    W = np.zeros((2, len(basis)))
    if len(basis) > n * T:
        W[1, n * T] = 1.0
    points = []
    for lam, radius in settings:
        W, point = problem.solve(W, lam, radius, tol, max_iter)
        v, p = W @ basis
        points.append(_point(point, radius, v, p))
    what = "weight decays" if kind == "weight-decay" else "radii"
    failing = [pt for pt in points if not pt.success]
    if failing:
        first = failing[0]
        at = f"lam = {first.lam:.3g}" if kind == "weight-decay" else f"r = {first.radius:.3g}"
        status = first.status
        message = (
            f"{len(failing)} of {len(points)} {what} did not converge; first: {at}: {first.message}"
        )
        name = "regularization_path" if kind == "weight-decay" else "constrained_path"
        warnings.warn(f"{name}: {message}", ConvergenceWarning, stacklevel=3)
    else:
        status = CONVERGED
        message = f"all {len(points)} {what} converged (tol = {tol:g})."
    return RegularizationPath(
        points=points,
        status=status,
        message=message,
        R=R,
        trained=tuple(b for b in ("v", "p") if b in blocks),
        kind=kind,
        solve_time=time.perf_counter() - start,
    )


class _Problem:
    """``F_lam`` subject to ``||v|| <= r`` (``r = inf`` on the weight-decay path) in
    token-coefficient form: row 0 of ``W`` holds v's coefficients, row 1 p's."""

    def __init__(self, G: np.ndarray, n: int, T: int, y: np.ndarray, R: float, train_p: bool):
        self.G, self.n, self.T, self.y, self.R, self.train_p = G, n, T, y, R, train_p
        self.cols = np.ascontiguousarray(G[:, : n * T])
        self.nu2 = max(float(np.mean(np.diag(G)[: n * T])), np.finfo(float).tiny)

    def value(self, W: np.ndarray, lam: float, radius: float) -> tuple[float, Any, np.ndarray]:
        """Objective, loss-and-gradients and the objective's gradient (coefficients).

        The objective is ``F_lam`` without a bound on ``v`` and ``log L`` with one
        (``lam = 0``): the same minimisers and stationary points, but the scale
        ``exp(-margin)`` of ``L`` and of its curvature at large ``r`` cancels, so the
        Barzilai-Borwein steps stay within their safeguards at every radius.
        """
        values, scores = (W @ self.cols).reshape(2, self.n, self.T)
        lg = token_loss_and_grads(self.y, scores, values)
        grad = np.zeros_like(W)
        grad[0, : self.n * self.T] = lg.grad_v.reshape(-1)
        if self.train_p:
            grad[1, : self.n * self.T] = lg.grad_p.reshape(-1)
        if math.isfinite(radius):
            # Below float64's normal range (margins above ~708) grad / L loses its digits:
            # the solve stops there with status "failed".
            if lg.loss < _TINY:
                return -math.inf, lg, grad
            return math.log(lg.loss), lg, grad / lg.loss
        grad[0] += lam * W[0]
        sq_v = float(W[0] @ self.G @ W[0])
        return lg.loss + 0.5 * lam * sq_v, lg, grad

    def norm(self, w: np.ndarray) -> float:
        return math.sqrt(max(float(w @ self.G @ w), 0.0))

    def project(self, W: np.ndarray, radius: float) -> np.ndarray:
        """Scale ``v`` back to ``||v|| <= radius`` and ``p`` to ``||p|| <= R``."""
        out = W.copy()
        for row, bound in ((0, radius), (1, self.R if self.train_p else math.inf)):
            length = self.norm(W[row]) if math.isfinite(bound) else 0.0
            if length > bound:
                out[row] *= bound / length
        return out

    def multiplier(self, W: np.ndarray, grad: np.ndarray, radius: float) -> float:
        """Estimate of the multiplier ``mu`` of ``||v|| <= radius``: ``max(0, -<g_v, v>) /
        ||v||^2`` on the sphere, 0 inside it (or with no bound)."""
        sq = float(W[0] @ self.G @ W[0])
        if math.isinf(radius) or sq < radius * radius * (1 - 1e-9) or sq == 0.0:
            return 0.0
        return max(0.0, -float(grad[0] @ self.G @ W[0])) / sq

    def solve(
        self, W: np.ndarray, lam: float, radius: float, tol: float, max_iter: int
    ) -> tuple[np.ndarray, dict]:
        F, lg, grad = self.value(W, lam, radius)
        step = 1.0 / (self.nu2 * (0.25 + lam / self.nu2))  # 1 / (a curvature bound at v = 0)
        status, it, gnorm, mu = MAX_ITER, 0, math.inf, 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            for it in range(max_iter + 1):
                gap = W - self.project(W - grad, radius)
                gnorm = math.hypot(self.norm(gap[0]), self.norm(gap[1]))
                if not math.isfinite(F) or not math.isfinite(gnorm):
                    status = DIVERGED
                    break
                # On the sphere the point is stationary for F_{lam + mu}: the weight-decay
                # test at that decay (module docstring; mu of log L is mu of L over L).
                mu = self.multiplier(W, grad, radius)
                if gnorm <= tol * (lam + mu) * max(self.norm(W[0]), 1e-300):
                    status = CONVERGED
                    break
                if it == max_iter:
                    break
                W_new, F_new, lg_new, grad_new = self._line_search(W, F, grad, step, lam, radius)
                if F_new == -math.inf:
                    status = FAILED
                    break
                S, Yd = W_new - W, grad_new - grad
                sy = float(np.sum((S @ self.G) * Yd))
                ss = float(np.sum((S @ self.G) * S))
                step = (
                    min(max(ss / sy, _STEP_MIN / self.nu2), _STEP_MAX / self.nu2)
                    if sy > 0
                    else _STEP_MAX / self.nu2
                )
                W, F, lg, grad = W_new, F_new, lg_new, grad_new
        test = "tol * lam * ||v||" if math.isinf(radius) else "tol * mu * ||v||"
        if status == CONVERGED:
            message = f"projected gradient norm {gnorm:.3g} <= {test} after {it} iterations."
        elif status == MAX_ITER:
            message = f"max_iter = {max_iter} reached with projected gradient norm {gnorm:.3g}."
        elif status == FAILED:
            message = (
                f"after {it} iterations a step reached a point of the ball whose mean logistic "
                "loss is below float64's normal range (margins above about 708: use smaller "
                "radii); stationarity cannot be tested there."
            )
        else:
            message = f"non-finite objective or gradient after {it} iterations."
        return W, {
            "status": status,
            "message": message,
            "iterations": it,
            "objective": F,
            "loss": lg.loss,
            "grad_norm": gnorm,
            "lam": lam + mu * lg.loss,
            "margins": lg.margins,
            "attention": lg.attention,
        }

    def _line_search(
        self, W: np.ndarray, F: float, grad: np.ndarray, step: float, lam: float, radius: float
    ) -> tuple[np.ndarray, float, Any, np.ndarray]:
        """Armijo backtracking along the projection arc ``P(W - t grad)``."""
        for _ in range(60):
            W_new = self.project(W - step * grad, radius)
            F_new, lg_new, grad_new = self.value(W_new, lam, radius)
            if F_new == -math.inf:  # log L of a loss below float64's normal range
                break
            D = W_new - W
            if math.isfinite(F_new) and F_new <= F + ARMIJO * float(np.sum((grad @ self.G) * D)):
                return W_new, F_new, lg_new, grad_new
            step /= 2
        return W_new, F_new, lg_new, grad_new


def _point(found: dict, radius: float, v: np.ndarray, p: np.ndarray) -> PathPoint:
    margin = float(np.min(found["margins"]))
    norm = float(np.linalg.norm(v))
    return PathPoint(
        lam=found["lam"],
        radius=radius,
        v=v,
        p=p,
        status=found["status"],
        message=found["message"],
        iterations=found["iterations"],
        objective=found["objective"],
        loss=found["loss"],
        grad_norm=found["grad_norm"],
        margin=margin,
        norm=norm,
        normalized_norm=norm / margin if margin > 0 else float("nan"),
        selected_token=np.argmax(found["attention"], axis=1),
    )
