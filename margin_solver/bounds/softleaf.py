r"""A finite-R lower bound at nearly hard attention: LB's leaves with the softness R leaves.

For two tokens per sample, take a point (v, p) of P_R and let ``a_i`` be the token of sample
``i`` with the larger margin ``y_i <v, x_it>`` (its *selection*) and ``b_i`` the other, with
``d_i = a_i - b_i`` and ``delta_i = <p, d_i>``. Attention puts ``eps_i = sigmoid(-delta_i)`` on
``b_i``, so interpolation reads

    y_i <v, a_i>  >=  1 + eps_i y_i <v, d_i>,        y_i <v, d_i> >= 0.

The hard-selection bound LB drops the second term; at large R, where LB is nearly tight,
that term is what separates P_R from LB (docs/decisions.md, "Open: what keeps n = 200 at
R sqrt(d) = 100 from certifying"). With T > 2 each other token t gives a row ``d_it = a_i -
x_it``; the other tokens' attention sums to at least ``sigmoid(-delta_it)`` for every t, so
``eps_i k_i`` below becomes ``k_i max_t g_it(delta_it)`` with ``k_i`` the sample's smallest
charge (docs/theory.md, "The soft-selection bound"). To prove that no point of a selection
has ``||v|| < U``:

* such a point is feasible for the selection's hard SVM, whose optimum ``v*`` is unique, so
  ``||v - v*||^2 <= U^2 - ||v*||^2 = r^2`` (strong convexity), and then
  ``y_i <v, d_i> >= k_i = max(c_i - r ||d_i||, c_i + 1 - m_i - r ||b_i||, 0)`` with
  ``c_i = y_i <v*, d_i>`` and ``m_i = y_i <v*, a_i>``;
* ``eps_i >= g_i(delta_i)``, the convex envelope of ``sigmoid(-delta)`` on
  ``[-R ||d_i||, R ||d_i||]`` (the reach of ``||p|| <= R``);
* ``delta = D p`` ranges over the ellipsoid ``{G^(1/2) w : ||w|| <= R}``, ``G = D D^T``: the
  direction the samples share is kept, not lifted away.

So ``||v||^2 >= V(p) = min ||v||^2 s.t. y_i <v, a_i> >= 1 + k_i g_i(delta_i)``, convex in p,
and for every ``alpha >= 0`` (weak duality of that SVM, then the tangent of the convex
``g_i`` at any ``delta0``)

    min_p V(p) >= 2 sum(alpha) - alpha^T Q alpha + sum_i c_i (g_i(delta0_i) - g_i'(delta0_i)
                  delta0_i) - R ||G^(1/2) (c g'(delta0))||,

with ``c_i = 2 alpha_i k_i`` and ``Q_ij = y_i y_j <a_i, a_j>``. ``alpha`` comes from one
second-order cone program (cvxpy with Clarabel; ``g`` replaced by tangent lines), ``delta0``
from projected gradient steps on the inner minimum for that ``alpha``; whatever they return,
the bound is this formula evaluated in numpy, so an inaccurate solver only weakens it.

:func:`soft_selection_bound` applies it where it can close a gap: LB's branch-and-bound is
run again with the target ``U`` as its pruning threshold; every node it cannot prune is
solved by a completion (LB's "every free sample satisfied"); each other allowed token of a
free sample is shown to cost at least ``U`` by one SVM, so that on the node every sample's
selection is the completion's; and the completion's leaf is bounded as above.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from margin_solver.bounds.sdpbound import floored_root

__all__ = ["SoftSelectionBound", "leaf_bound", "sigmoid_envelope"]


@dataclass(frozen=True)
class SoftSelectionBound:
    """What :func:`margin_solver.bounds.lower.soft_selection_bound` proves.

    Attributes
    ----------
    value : float
        A proven lower bound on P_R (0 when the stage proved nothing).
    nodes : int
        SVMs solved (its branch-and-bound and the free samples' other tokens).
    reason : str
        Why it stopped where it did.
    """

    value: float
    nodes: int
    reason: str


def _tangent_points(reach: np.ndarray) -> np.ndarray:
    """For each ``L = reach_i``, the point ``t >= 0`` where the tangent of ``sigmoid(-x)``
    passes through ``(-L, sigmoid(L))`` (L when no tangent does: then the envelope is the
    chord)."""

    def excess(t: np.ndarray) -> np.ndarray:
        s = expit(-t)
        return s + s * expit(t) * (reach + t) - expit(reach)

    lo, hi = np.zeros_like(reach), reach.copy()
    chord = excess(hi) >= 0
    for _ in range(80):  # bisection to the last bits of t on [0, L]
        mid = (lo + hi) / 2
        above = excess(mid) > 0
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return np.where(chord, reach, hi)


def sigmoid_envelope(reach: np.ndarray) -> tuple:
    """The convex envelope ``g_i`` of ``sigmoid(-x)`` on ``[-reach_i, reach_i]`` and its slope.

    Returns functions ``g(x)`` and ``g'(x)`` of a vector x (one entry per sample): the line
    from ``(-reach_i, sigmoid(reach_i))`` to the tangent point, then the sigmoid. Convex on the
    whole line, at most ``sigmoid(-x)`` on ``[-reach_i, reach_i]``.
    """
    reach = np.asarray(reach, dtype=np.float64)
    touch = _tangent_points(reach)
    slope = (expit(-touch) - expit(reach)) / np.maximum(touch + reach, np.finfo(float).tiny)

    def g(x: np.ndarray) -> np.ndarray:
        return np.where(x >= touch, expit(-x), expit(reach) + slope * (x + reach))

    def dg(x: np.ndarray) -> np.ndarray:
        return np.where(x >= touch, -expit(-x) * expit(x), slope)

    return g, dg


def leaf_bound(
    H: np.ndarray,
    y: np.ndarray,
    R: float,
    selection: np.ndarray,
    target: float,
    svm_coef: np.ndarray,
    *,
    tangents: int,
    inner_steps: int,
) -> float:
    """A lower bound on ``||v||`` over the points of P_R whose larger-margin tokens are
    ``selection`` and whose ``||v||`` is below ``target`` (module docstring).

    Parameters
    ----------
    H : ndarray of shape (nT, nT)
        Token Gram matrix.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    R : float
        Radius of the ball ``||p|| <= R``.
    selection : ndarray of int, shape (n,)
        Each sample's selected token (0 to T - 1).
    target : float
        ``U``: the bound is claimed for points with ``||v|| < U`` only, so a value at or
        above ``U`` proves that the leaf has none.
    svm_coef : ndarray of shape (n,)
        The selection's hard SVM: ``v* = sum_j svm_coef_j a_j``
        (:attr:`margin_solver.svm.selection.SelectionSVM.coef`).
    tangents : int
        Tangent lines of each ``g_i`` in the cone program (they choose alpha only).
    inner_steps : int
        Projected gradient steps on the inner minimum (they choose delta0 only).

    Returns
    -------
    float
        The bound (0 when the cone program returned no multipliers); valid whatever the
        solver's accuracy.
    """
    # in units of the mean squared token norm (x -> x / sqrt(s), R -> R sqrt(s), ||v|| ->
    # ||v|| sqrt(s)), as the Lagrangian stage: the cone program's tolerances are absolute
    scale = max(float(np.mean(np.diag(H))), np.finfo(np.float64).tiny)
    H, R, target, svm_coef = (
        H / scale,
        R * math.sqrt(scale),
        target * math.sqrt(scale),
        svm_coef * scale,
    )
    return _leaf_bound(H, y, R, selection, target, svm_coef, tangents, inner_steps) / math.sqrt(
        scale
    )


def _leaf_bound(H, y, R, selection, target, svm_coef, tangents, inner_steps) -> float:
    """:func:`leaf_bound` in units where the mean squared token norm is 1."""
    n = len(y)
    T = H.shape[0] // n
    a = np.arange(n) * T + selection
    # the other tokens, sample by sample: row j of D is d_j = a_i - x_it, t != selection_i
    owner = np.repeat(np.arange(n), T - 1)
    others = np.array([[t for t in range(T) if t != s] for s in selection]).reshape(-1)
    b = owner * T + others
    Ka = H[np.ix_(a, a)]
    Kab = H[np.ix_(a[owner], b)]  # <a_i(j), x_b(l)>
    G = H[np.ix_(a[owner], a[owner])] - Kab - Kab.T + H[np.ix_(b, b)]
    d_norm = np.sqrt(np.maximum(np.diag(G), 0.0))
    b_norm = np.sqrt(np.maximum(np.diag(H)[b], 0.0))
    star = svm_coef @ Ka  # <v*, a_i>
    m = y * star
    c = y[owner] * (star[owner] - svm_coef @ H[np.ix_(a, b)])  # y_i <v*, d_j>
    v_sq = float(svm_coef @ Ka @ svm_coef)
    r = math.sqrt(max(target**2 - v_sq, 0.0))
    k_rows = np.maximum(np.maximum(c - r * d_norm, c + 1 - m[owner] - r * b_norm), 0.0)
    k = k_rows.reshape(n, T - 1).min(axis=1)  # each sample's smallest charge
    if not np.any(k > 0):
        return math.sqrt(max(v_sq, 0.0))
    reach = R * d_norm
    g, dg = sigmoid_envelope(reach)
    G_half = floored_root((G + G.T) / 2)
    Q = Ka * np.outer(y, y)
    multipliers = _cone_multipliers(Ka, G_half, y, k, owner, R, reach, g, dg, tangents)
    if multipliers is None:
        return math.sqrt(max(v_sq, 0.0))
    alpha, w = multipliers
    # max over a sample's rows >= any weighting of them: the row whose envelope is largest
    # at the cone program's point
    delta = G_half @ w
    top = np.zeros(len(owner), dtype=bool)
    top[np.arange(n) * (T - 1) + np.argmax(g(delta).reshape(n, T - 1), axis=1)] = True
    weights = np.where(top, (2 * alpha * k)[owner], 0.0)
    inner = _inner_minimum(weights, G_half, R, g, dg, inner_steps, w)
    value = 2 * alpha.sum() - alpha @ Q @ alpha + inner
    # every point of the leaf is feasible for its hard SVM too
    return math.sqrt(max(value, v_sq, 0.0))


def _cone_multipliers(Ka, G_half, y, k, owner, R, reach, g, dg, tangents) -> tuple | None:
    """The margins' multipliers alpha of the leaf's relaxation with g as tangent lines (one
    cone program, Clarabel) and its point w of the ball, or None when it returned none.
    ``owner[j]``: the sample of row j of the score differences."""
    import cvxpy as cp  # imported only here, as for the Lagrangian stage

    n, rows = len(y), len(owner)
    lam, U = np.linalg.eigh((Ka + Ka.T) / 2)
    keep = lam > n * np.finfo(np.float64).eps * max(lam[-1], np.finfo(np.float64).tiny)
    factor = U[:, keep] * np.sqrt(lam[keep])  # Ka = factor factor^T
    knots = np.linspace(0.0, min(float(reach.max()), 40.0), tangents)  # sigmoid(-40) ~ 4e-18
    at = np.repeat(knots[None, :], rows, axis=0)
    value = np.stack([g(np.full(rows, z)) for z in knots], axis=1)
    slope = np.stack([dg(np.full(rows, z)) for z in knots], axis=1)
    spread = np.zeros((rows, n))
    spread[np.arange(rows), owner] = 1.0  # t of each row's sample
    coef = cp.Variable(n)
    w = cp.Variable(rows)
    t = cp.Variable(n)
    delta = cp.Variable(rows)
    margins = cp.multiply(y, Ka @ coef) >= 1 + cp.multiply(k, t)
    ones = np.ones((1, tangents))
    constraints = [
        margins,
        delta == G_half @ w,
        cp.norm(w, 2) <= R,
        t >= 0,
        cp.reshape(spread @ t, (rows, 1), order="C") @ ones
        >= value - slope * at + cp.multiply(slope, cp.reshape(delta, (rows, 1), order="C") @ ones),
    ]
    problem = cp.Problem(cp.Minimize(cp.sum_squares(factor.T @ coef)), constraints)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "inaccurate": certified below
            problem.solve(solver="CLARABEL")
    except (cp.error.SolverError, ArithmeticError, ValueError):
        return None
    if margins.dual_value is None or w.value is None:
        return None
    # Lagrangian ||v||^2 - lambda^T (margins - b): the formula's alpha is lambda / 2
    alpha = np.maximum(np.asarray(margins.dual_value, dtype=np.float64), 0.0) / 2
    return alpha, np.asarray(w.value, dtype=np.float64)


def _inner_minimum(weights, G_half, R, g, dg, steps, start) -> float:
    """A certified lower bound on ``min over ||w|| <= R of sum weights_i g_i((G^(1/2) w)_i)``:
    accelerated projected gradient steps from ``start`` choose where the convex ``g_i`` are
    linearised, and the linear function's minimum over the ball is exact."""

    def value(x: np.ndarray) -> float:
        return float(weights @ g(G_half @ x))

    def gradient(x: np.ndarray) -> np.ndarray:
        return G_half @ (weights * dg(G_half @ x))

    def project(x: np.ndarray) -> np.ndarray:
        length = np.linalg.norm(x)
        return x * (R / length) if length > R else x

    x = project(np.asarray(start, dtype=np.float64))
    z, momentum, lipschitz = x.copy(), 1.0, 1.0
    for _ in range(steps):
        grad, at_z = gradient(z), value(z)
        while True:  # backtracking on the step's quadratic model
            new = project(z - grad / lipschitz)
            step = new - z
            if value(new) <= at_z + grad @ step + 0.5 * lipschitz * (step @ step):
                break
            lipschitz *= 2
        following = (1 + math.sqrt(1 + 4 * momentum**2)) / 2
        z = new + (momentum - 1) / following * (new - x)
        x, momentum = new, following
        lipschitz *= 0.9
    delta0 = G_half @ x
    slope = weights * dg(delta0)
    return float(weights @ g(delta0) - slope @ delta0 - R * np.linalg.norm(G_half @ slope))
