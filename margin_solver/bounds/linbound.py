"""A lower bound on P_R at small R from the attention linearised at p = 0, certified in numpy.

For fixed attention the v-step's dual gives, for every alpha >= 0 and every p,

    1/2 ||v*(p)||^2 >= sum(alpha) - 1/2 ||w_alpha(p)||^2,   w_alpha(p) = sum_i alpha_i y_i z_i(p),

so ``P_R >= sum(alpha) / K`` whenever ``K >= max_{||p|| <= R} ||w_alpha(p)||`` (the best
multiple of alpha). At small R the attention is nearly uniform and the attended features are
nearly affine in p: ``z_i(p) = xbar_i + X_i^T J X_i p + r_i(p)`` with ``J = (I - 11^T / T) / T``
the softmax's Jacobian at uniform attention and a remainder bounded by a quadratic form in p
(docs/theory.md, "Linearised bound"):

* T = 2: ``r_i = -e_i d_i`` (``d_i = x_i1 - x_i0``) with ``|e_i| <= |delta_i|^3 / 48
  <= w_i delta_i^2 / 48``, ``delta_i = <p, d_i>``, ``w_i = R ||d_i||``;
* T >= 3: a second-order term ``q_i = 1 / (2T) sum_t <p, u_it>^2 u_it`` (``u_it = x_it -
  xbar_i``) and ``r_i = sum_t rho_t u_it`` with ``sum rho = 0`` and ``||rho||_1 <= 7/12 w_i
  s_max(w_i) sum_t <p, u_it>^2``, ``w_i = R max_{t,u} ||x_it - x_iu||``, ``s_max(w) = 1 / (1 +
  (T - 1) e^{-w})`` (the largest attention weight a spread w allows).

Then ``||w_alpha||^2 <= ||b + M p||^2 + 2 <b + M p, E> + ||E||^2`` (``b = sum alpha_i y_i
xbar_i``, ``M = sum alpha_i y_i X_i^T J X_i``, ``E`` the weighted second-order terms and
remainders); ``2 <b, E>``'s second-order part is a quadratic form in p, kept exactly, the rest of
the cross term is bounded by one; the first two terms are bounded together by one trust-region
problem (a quadratic form over the ball, exact by the S-lemma), the last by the largest
eigenvalue of a positive semidefinite matrix. Unlike the Lagrangian bound
(:mod:`margin_solver.bounds.sdpbound`), the attention keeps its coupling through the
shared p (the sign of every score difference follows p), which is what real tokens with
n T > d need; the price is the remainder, small only when the scores' spread R ||x_it - x_iu||
is: what is bounded rather than kept is of order w^3 for every T (for T >= 3 the
second-order term's product with b, of order w^2, is kept exactly).
alpha is improved by an ascent on the bound (any alpha gives a valid bound).
"""

from __future__ import annotations

import math
import time

import numpy as np

from margin_solver.core.strategy import DEFAULT_STRATEGY

__all__ = ["MAX_TOKENS", "linearised_bound"]

#: Largest n T the finite-R bound runs this stage for, the default of the strategy table's
#: ``linearised_max_tokens``: each evaluation eigen-decomposes (nT)-square matrices.
MAX_TOKENS = DEFAULT_STRATEGY.linearised_max_tokens

# Relative safety margin on the computed bound: the token factor, the eigen-decompositions and
# the secular equation are accurate to a few hundred eps relatively; this is far above that.
_BOUND_ROUNDING = 1e-9
# Ascent steps on alpha (each a few (nT)-square eigen-decompositions): the stage's budget, a
# count; the ascent stops sooner when the bound rose by less than _ASCENT_RISE (relative) over
# the last _ASCENT_WINDOW steps, or is below half the ``floor`` at such a check. The certified
# solves of docs/decisions.md ("The linearised bound") took at most 40.
_ASCENT_STEPS = 200
_ASCENT_WINDOW = 20
_ASCENT_RISE = 1e-4


class _Linearised:
    """The tokens in a factor of the Gram matrix and the pieces of the linearised features."""

    def __init__(self, H: np.ndarray, y: np.ndarray, T: int, R: float) -> None:
        n = len(y)
        lam, U = np.linalg.eigh(H)
        # F F^T = H with rounding-negative eigenvalues raised to 0: p ranges over the span of
        # the tokens (a component outside it changes no score and only adds to ||p||)
        self.F = (U * np.sqrt(np.maximum(lam, 0.0))).reshape(n, T, -1)
        self.y, self.R = y, R
        self.mean = self.F.mean(axis=1)  # xbar_i
        dev = self.F - self.mean[:, None, :]
        diffs = self.F[:, :, None, :] - self.F[:, None, :, :]
        spread = R * np.sqrt((diffs**2).sum(axis=-1)).max(axis=(1, 2))  # w_i
        if T == 2:
            # the sigmoid is odd about 0: no second-order term, a cubic remainder
            self.directions = (self.F[:, 1] - self.F[:, 0])[:, None, :]
            self.coef = spread / 48
            self.quad = 0.0
        else:
            # the second-order term quad * sum_t <p, u_it>^2 u_it is kept exactly where it
            # meets b, so only a third-order remainder is bounded (on wine tokens, T = 3, the
            # gap fell from 0.024 to 5.7e-3 with it: docs/decisions.md, "The linearised bound
            # keeps the softmax's second-order term")
            self.directions = dev
            top_weight = 1 / (1 + (T - 1) * np.exp(-spread))  # max_t softmax_t, spread w_i
            self.coef = 7 / 12 * spread * top_weight
            self.quad = 1 / (2 * T)
        # the remainder r_i is a combination of these vectors, with weights of l1 norm at most
        # coef_i * sum_k <p, directions_ik>^2
        self.reach_norm = np.linalg.norm(self.directions, axis=2).max(axis=1)
        J = (np.eye(T) - np.ones((T, T)) / T) / T  # the softmax's Jacobian at uniform
        self.FJ = np.einsum("tu,iur->itr", J, self.F).reshape(n * T, -1)  # rows of J X_i

    def value(self, alpha: np.ndarray) -> float:
        """``sum(alpha) / K(alpha)``: a lower bound on P_R for this alpha >= 0."""
        R = self.R
        # K is homogeneous of degree 1 in alpha, so the value is scale-free; scaling alpha to
        # max 1 keeps ||E||^2 finite (the dual ascent's line search tried alpha ~ 1e200 on an
        # issue-19 instance, scales n = 8, T = 3, seed 20261293: OverflowError)
        if alpha.max() > 0:
            alpha = alpha / alpha.max()
        b, M = self.affine(alpha)
        # E = sum_i alpha_i y_i (q_i + r_i), q_i the second-order term: ||E|| <= p^T P p
        P = self.form(alpha * (self.coef + self.quad) * self.reach_norm)
        norm_E = R**2 * max(float(np.linalg.eigvalsh(P)[-1]), 0.0)
        # 2 <b + M p, E> = 2 <b, Q> (exact, a quadratic form) + 2 <M p, Q> + 2 <b + M p, r>,
        # each |<v, r_i>| <= (weights' l1 norm) max_k |<v, directions_ik>|
        b_along = np.einsum("r,ikr->ik", b, self.directions)
        M_along = R * np.linalg.norm(np.einsum("rs,iks->ikr", M, self.directions), axis=2)
        # (q_i's weights are known, so its terms keep one weight per direction; r_i's are not)
        weights = 2 * (alpha * self.coef * (np.abs(b_along) + M_along).max(axis=1))[:, None]
        weights = weights + 2 * self.quad * (
            alpha[:, None] * M_along + (alpha * self.y)[:, None] * b_along
        )
        cross = self.form(weights)
        # ||w||^2 <= ||b + M p||^2 + 2 <b + M p, E> + ||E||^2: the first two over the ball at once
        top = _quadratic_max(M @ M + cross, M @ b, float(b @ b), R)
        K = math.sqrt(max(top, 0.0) + norm_E**2)
        total = float(alpha.sum())
        return total / K * (1 - _BOUND_ROUNDING) if K > 0 and total > 0 else 0.0

    def affine(self, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``b = sum alpha_i y_i xbar_i`` and ``M = sum alpha_i y_i X_i^T J X_i`` (symmetric)."""
        ay = alpha * self.y
        n, T, r = self.F.shape
        M = (self.FJ * np.repeat(ay, T)[:, None]).T @ self.F.reshape(n * T, r)
        return ay @ self.mean, (M + M.T) / 2

    def form(self, weights: np.ndarray) -> np.ndarray:
        """``sum_ik weights_ik directions_ik directions_ik^T`` (weights of shape (n,) are
        the same for every k of a sample)."""
        n, k, r = self.directions.shape
        flat = self.directions.reshape(n * k, r)
        each = np.broadcast_to(weights.reshape(n, -1), (n, k)).reshape(-1)
        return (flat * each[:, None]).T @ flat

    def ascent_direction(self, alpha: np.ndarray) -> np.ndarray:
        """The gradient of ``sum(alpha) / ||b + M p||`` at the trust-region maximiser p,
        remainders left out (a direction only: every trial alpha is evaluated in full)."""
        b, M = self.affine(alpha)
        p = _quadratic_argmax(M @ M, M @ b, self.R)
        w = b + M @ p
        size = float(np.linalg.norm(w))
        if size == 0:
            return np.zeros_like(alpha)
        n, T, r = self.F.shape
        scores = self.FJ.reshape(n, T, r) @ p  # J X_i p, since J is symmetric
        feature = self.mean + np.einsum("it,itr->ir", scores, self.F)  # linearised z_i(p)
        slope = self.y * (feature @ w) / size
        return size - float(alpha.sum()) * slope


def _secular(
    A: np.ndarray, g: np.ndarray, R: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Eigen-decomposition ``A = Q diag(mu) Q^T``, g in its basis, and the multiplier
    lambda > lambda_max(A) minimising ``lambda R^2 + g^T (lambda I - A)^-1 g`` (bisection on
    its derivative): (mu, Q, Q^T g, lambda)."""
    mu, Q = np.linalg.eigh((A + A.T) / 2)
    gq = Q.T @ g
    weight = gq**2
    top = max(float(mu[-1]), 0.0)
    scale = max(top, float(np.abs(mu).max()), np.finfo(np.float64).tiny)
    lo = top + 1e-12 * scale

    def slope(lam: float) -> float:
        return R**2 - float(np.sum(weight / (lam - mu) ** 2))

    if slope(lo) >= 0:
        return mu, Q, gq, lo
    hi = 2 * top + scale
    while slope(hi) < 0:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
    return mu, Q, gq, hi


def _quadratic_max(A: np.ndarray, g: np.ndarray, c: float, R: float) -> float:
    """An upper bound on ``max_{||p|| <= R} p^T A p + 2 g^T p + c`` (A symmetric): for every
    lambda > lambda_max(A), ``c + lambda R^2 + g^T (lambda I - A)^-1 g`` (S-lemma)."""
    mu, _, gq, lam = _secular(A, g, R)
    return c + lam * R**2 + float(np.sum(gq**2 / (lam - mu)))


def _quadratic_argmax(A: np.ndarray, g: np.ndarray, R: float) -> np.ndarray:
    """The maximiser of the same problem, ``(lambda I - A)^-1 g`` (for the ascent only)."""
    mu, Q, gq, lam = _secular(A, g, R)
    return Q @ (gq / (lam - mu))


def linearised_bound(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    R: float,
    alpha: np.ndarray,
    *,
    target: float = math.inf,
    floor: float = 0.0,
    deadline: float = math.inf,
) -> float:
    """Certified lower bound on P_R from the attention linearised at p = 0 (module docstring).

    Parameters
    ----------
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix.
    y : ndarray of shape (n,)
        Labels in {-1, +1} (float).
    T : int
        Tokens per sample (>= 2).
    R : float
        Radius of the ball on p.
    alpha : ndarray of shape (n,)
        Starting multipliers (>= 0), e.g. the v-step's duals at uniform attention; improved
        by an ascent on the bound.
    target : float, default=inf
        The ascent stops once the bound reaches this (e.g. what closes a gap).
    floor : float, default=0.0
        A bound proven otherwise: the ascent stops when, at a check every 20 steps (the
        first at the start), its bound is below half of this.
    deadline : float, default=inf
        A caller's guard: a :func:`time.perf_counter` reading after which the ascent takes no
        further step. Its budget is a count of steps; the guard changes nothing while it does
        not act.

    Returns
    -------
    float
        The bound (far below the others at large R, where the remainder dominates).
    """
    # on H / s with R sqrt(s) (s = mean diag H) the scores are unchanged and ||v|| is divided
    # by sqrt(s), so the ascent's steps mean the same at any scale of the tokens
    s = max(float(np.mean(np.diag(H))), np.finfo(np.float64).tiny)
    root = math.sqrt(s)
    model = _Linearised(H / s, y, T, R * root)
    a = np.maximum(np.asarray(alpha, dtype=np.float64), 0.0)
    a = a / a.sum() if a.any() else np.full(len(y), 1.0 / len(y))
    best, step = model.value(a), 0.3
    checkpoint = 0.0
    for k in range(_ASCENT_STEPS):
        if best >= target * root or time.perf_counter() > deadline:
            break
        if k % _ASCENT_WINDOW == 0:
            # an ascent that is slow, or far below a bound proven otherwise, will not close
            # the gap (at large R the remainder dominates): stop instead of spending time
            if best < checkpoint * (1 + _ASCENT_RISE) or best < floor * root / 2:
                break
            checkpoint = best
        direction = model.ascent_direction(a)
        largest = float(np.abs(direction).max())
        if largest == 0:
            break
        # additive steps on the simplex's scale: a sample outside the start's support can join
        direction *= float(a.max()) / largest
        while step > 1e-8:
            trial = np.maximum(a + step * direction, 0.0)
            value = model.value(trial / trial.sum()) if trial.any() else 0.0
            if value > best:
                best, a = value, trial / trial.sum()
                step = min(1.5 * step, 1.0)
                break
            step /= 2
        else:
            break
    return best / root
