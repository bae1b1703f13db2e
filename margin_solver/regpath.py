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
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from margin_solver.data import as_dataset
from margin_solver.kernel import token_loss_and_grads
from margin_solver.results import (
    CONVERGED,
    DIVERGED,
    MAX_ITER,
    STATUS_TABLE,
    ConvergenceWarning,
    RecordMixin,
    ResultMixin,
)
from margin_solver.validation import (
    InvalidInputError,
    check_int,
    check_memory,
    check_nonnegative,
    check_positive,
    check_radius,
    check_vector,
)

__all__ = ["PathPoint", "RegularizationPath", "default_lambdas", "regularization_path"]

#: Armijo sufficient-decrease constant and the BB step's safeguards (relative to 1 / nu^2).
_ARMIJO = 1e-4
_STEP_MIN, _STEP_MAX = 1e-10, 1e10


@dataclass(repr=False)
class PathPoint(RecordMixin):
    """The regularised minimiser found at one ``lam``.

    Attributes
    ----------
    lam : float
    v, p : ndarray of shape (n_features,)
    status : {"converged", "max_iter", "diverged"}
        See docs/statuses.md; ``"converged"``: projected-gradient test met (a stationary
        point; with ``p`` trained the problem is not convex, so not certified global).
    message : str
    iterations : int
    objective, loss : float
        ``F_lam`` and the mean logistic loss at ``(v, p)``.
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
    """Result of :func:`regularization_path`.

    Attributes
    ----------
    points : list of PathPoint
        One per ``lam``, in decreasing ``lam`` order.
    status : {"converged", "max_iter", "diverged"}
        ``"converged"`` when every point is; otherwise the first failing point's status.
    message : str
    R : float
    trained : tuple of str
    solve_time : float
    """

    points: list[PathPoint]
    status: str
    message: str
    R: float
    trained: tuple[str, ...]
    solve_time: float = field(default=0.0)

    @property
    def lambdas(self) -> np.ndarray:
        """The ``lam`` values, decreasing."""
        return np.array([pt.lam for pt in self.points])


def default_lambdas(num: int = 9, largest: float = 1e-1, smallest: float = 1e-5) -> np.ndarray:
    """``num`` values from ``largest`` down to ``smallest``, evenly spaced on a log scale."""
    check_int(num, "num", 1)
    return np.geomspace(check_positive(largest, "largest"), check_positive(smallest, "smallest"), num)


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
        Labels in {-1, +1}; required unless ``X`` is a Dataset.
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

    Raises
    ------
    InvalidInputError
        Bad data, a non-positive ``lam``, an unknown ``train`` block, ``p0`` of another
        dimension or outside the ball.

    Warns
    -----
    margin_solver.results.ConvergenceWarning
        Some ``lam`` ended ``"max_iter"`` or ``"diverged"``.

    Examples
    --------
    >>> from margin_solver.data import PaperDistribution
    >>> train = PaperDistribution(d=200, snr=0.5, eta=0.0).sample(8, seed=0)
    >>> path = regularization_path(train, R=1.0, lambdas=[1e-1, 1e-2])
    >>> path.status, [pt.status for pt in path.points]
    ('converged', ['converged', 'converged'])
    """
    start = time.perf_counter()
    data = as_dataset(X, y)
    n, T, d = data.X.shape
    yf = data.y.astype(np.float64)
    R = check_radius(R)
    blocks = (train,) if isinstance(train, str) else tuple(train)
    if "v" not in blocks or not set(blocks) <= {"v", "p"}:
        raise InvalidInputError(
            f"train must be ('v', 'p') or ('v',) (v is always trained), got {train!r}."
        )
    lams = sorted(
        (check_positive(lam, "lambda") for lam in (default_lambdas() if lambdas is None else lambdas)),
        reverse=True,
    )
    if not lams:
        raise InvalidInputError("lambdas is empty.")
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
    for lam in lams:
        W, point = problem.solve(W, lam, tol, max_iter)
        v, p = W @ basis
        points.append(_point(point, lam, v, p))
    failing = [pt for pt in points if not pt.success]
    if failing:
        status = failing[0].status
        message = (
            f"{len(failing)} of {len(points)} weight decays did not converge; first: lam = "
            f"{failing[0].lam:.3g}: {failing[0].message}"
        )
        warnings.warn(f"regularization_path: {message}", ConvergenceWarning, stacklevel=2)
    else:
        status = CONVERGED
        message = f"all {len(points)} weight decays converged (tol = {tol:g})."
    return RegularizationPath(
        points=points,
        status=status,
        message=message,
        R=R,
        trained=tuple(b for b in ("v", "p") if b in blocks),
        solve_time=time.perf_counter() - start,
    )


class _Problem:
    """``F_lam`` in token-coefficient form: row 0 of ``W`` holds v's coefficients, row 1 p's."""

    def __init__(self, G: np.ndarray, n: int, T: int, y: np.ndarray, R: float, train_p: bool):
        self.G, self.n, self.T, self.y, self.R, self.train_p = G, n, T, y, R, train_p
        self.cols = np.ascontiguousarray(G[:, : n * T])
        self.nu2 = max(float(np.mean(np.diag(G)[: n * T])), np.finfo(float).tiny)

    def value(self, W: np.ndarray, lam: float) -> tuple[float, Any, np.ndarray]:
        """Objective, loss-and-gradients and the objective's gradient (coefficients)."""
        values, scores = (W @ self.cols).reshape(2, self.n, self.T)
        lg = token_loss_and_grads(self.y, scores, values)
        grad = np.zeros_like(W)
        grad[0, : self.n * self.T] = lg.grad_v.reshape(-1)
        grad[0] += lam * W[0]
        if self.train_p:
            grad[1, : self.n * self.T] = lg.grad_p.reshape(-1)
        sq_v = float(W[0] @ self.G @ W[0])
        return lg.loss + 0.5 * lam * sq_v, lg, grad

    def norm(self, w: np.ndarray) -> float:
        return math.sqrt(max(float(w @ self.G @ w), 0.0))

    def project(self, W: np.ndarray) -> np.ndarray:
        length = self.norm(W[1])
        if self.train_p and length > self.R:
            W = W.copy()
            W[1] *= self.R / length
        return W

    def solve(self, W: np.ndarray, lam: float, tol: float, max_iter: int) -> tuple[np.ndarray, dict]:
        F, lg, grad = self.value(W, lam)
        step = 1.0 / (self.nu2 * (0.25 + lam / self.nu2))  # 1 / (a curvature bound at v = 0)
        status, it, gnorm = MAX_ITER, 0, math.inf
        with np.errstate(over="ignore", invalid="ignore"):
            for it in range(max_iter + 1):
                gap = W - self.project(W - grad)
                gnorm = math.hypot(self.norm(gap[0]), self.norm(gap[1]))
                if not math.isfinite(F) or not math.isfinite(gnorm):
                    status = DIVERGED
                    break
                if gnorm <= tol * lam * max(self.norm(W[0]), 1e-300):
                    status = CONVERGED
                    break
                if it == max_iter:
                    break
                W_new, F_new, lg_new, grad_new = self._line_search(W, F, grad, step, lam)
                S, Yd = W_new - W, grad_new - grad
                sy = float(np.sum((S @ self.G) * Yd))
                ss = float(np.sum((S @ self.G) * S))
                step = min(max(ss / sy, _STEP_MIN / self.nu2), _STEP_MAX / self.nu2) if sy > 0 else (
                    _STEP_MAX / self.nu2
                )
                W, F, lg, grad = W_new, F_new, lg_new, grad_new
        if status == CONVERGED:
            message = f"projected gradient norm {gnorm:.3g} <= tol * lam * ||v|| after {it} iterations."
        elif status == MAX_ITER:
            message = f"max_iter = {max_iter} reached with projected gradient norm {gnorm:.3g}."
        else:
            message = f"non-finite objective or gradient after {it} iterations."
        return W, {
            "status": status,
            "message": message,
            "iterations": it,
            "objective": F,
            "loss": lg.loss,
            "grad_norm": gnorm,
            "margins": lg.margins,
            "attention": lg.attention,
        }

    def _line_search(
        self, W: np.ndarray, F: float, grad: np.ndarray, step: float, lam: float
    ) -> tuple[np.ndarray, float, Any, np.ndarray]:
        """Armijo backtracking along the projection arc ``P(W - t grad)``."""
        for _ in range(60):
            W_new = self.project(W - step * grad)
            F_new, lg_new, grad_new = self.value(W_new, lam)
            D = W_new - W
            if math.isfinite(F_new) and F_new <= F + _ARMIJO * float(np.sum((grad @ self.G) * D)):
                return W_new, F_new, lg_new, grad_new
            step /= 2
        return W_new, F_new, lg_new, grad_new


def _point(found: dict, lam: float, v: np.ndarray, p: np.ndarray) -> PathPoint:
    margin = float(np.min(found["margins"]))
    norm = float(np.linalg.norm(v))
    return PathPoint(
        lam=lam,
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
