"""A certified lower bound on P_R at finite R: branch-and-bound over boxes of score differences.

The hard-selection bound LB (:mod:`margin_solver.bounds.lower`) ignores R. Here the attention a
ball ``||p|| <= R`` can reach is used (docs/theory.md, "Finite-R lower bound"):

* scores relative to each sample's token 0, ``delta_it = <p, x_it - x_i0>`` (t = 1..T-1),
  stacked as ``delta = D p`` with ``G = D D^T``, range over the ellipsoid
  ``{delta in range(D): delta^T G^+ delta <= R^2}``; its extent along coordinate j is
  ``R sqrt(G_jj)`` (the root box);
* a box of score differences maps to a polytope of attention vectors whose vertices are the
  softmaxes of the box's corners (:func:`vertex_attention`), so "some attention in the box
  gives y_i f_i >= 1" holds iff some corner's attended feature ``z = X_i^T s`` has margin
  >= 1: a disjunction over corner features, which branch-and-bound resolves like the
  hard-selection bound resolves its disjunction over tokens;
* a box that misses the ellipsoid is pruned on a dual certificate (:func:`_box_misses_ball`).

A node is a box plus "pins": attended features that the node's region must satisfy. Its
bound is the SVM over the pinned features. Branching either pins a free sample to each
corner of its box, or splits a pinned sample's box in two (children keep their old pins and
add a corner of the half box when the old pins are not corners of it). Incumbents come
from the alternating solver (:func:`margin_solver.minnorm.solve.solve_min_norm`) and from
realising a node's v by an attention vector in the ball (:func:`_realise`).
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from margin_solver.core.kernel import softmax
from margin_solver.core.progress import ProgressBar
from margin_solver.core.results import FAILED, INFEASIBLE, MAX_ITER, OPTIMAL, TIME_LIMIT
from margin_solver.core.strategy import DEFAULT_STRATEGY, Strategy
from margin_solver.svm.selection import lifted_bounds
from margin_solver.svm.vstep import solve_vstep_from_support

__all__ = [
    "LOW_RANK_MAX",
    "P_BOX_NODES",
    "SCORE_BOX_FULL_SAMPLES",
    "SCORE_BOX_NODES",
    "FiniteRBound",
    "corner_attention",
    "finite_r_bound",
    "low_rank_bound",
    "nodes_for_samples",
    "realising_coefficients",
    "score_box_nodes",
    "score_difference_gram",
    "score_rank",
    "vertex_attention",
]

# The dual certificate of a box missing the ball must exceed R^2 / 2 by this relative margin.
_BALL_RTOL = 1e-9
# Root box half-widths are widened by this factor so that rounding in G_jj cannot cut a
# reachable score difference off.
_WIDEN = 1 + 1e-9
#: The defaults of the strategy table's ``score_box_nodes``, ``score_box_full_samples`` and
#: ``p_box_nodes`` (the budgets of :func:`finite_r_bound` and :func:`low_rank_bound`), kept as
#: public names.
SCORE_BOX_NODES = DEFAULT_STRATEGY.score_box_nodes
SCORE_BOX_FULL_SAMPLES = DEFAULT_STRATEGY.score_box_full_samples
P_BOX_NODES = DEFAULT_STRATEGY.p_box_nodes


@dataclass
class FiniteRBound:
    """What :func:`finite_r_bound` proves.

    Attributes
    ----------
    value : float
        Proven lower bound on the optimal value of P_R.
    incumbent : float
        Smallest ``||v||`` of a point (v, p) found feasible for P_R (inf when none).
    status : str
        ``"optimal"`` when ``(incumbent - value) / incumbent <= gap_tol``, ``"infeasible"``
        when every node was pruned as infeasible, ``"time_limit"`` when the caller's time
        limit stopped it, else ``"max_iter"`` (``max_nodes`` SVMs, ``stall_nodes`` SVMs
        without progress, or no node left that can be refined).
    nodes : int
        SVMs solved.
    scores : ndarray of shape (n, T-1) or None
        Score differences of the incumbent's attention (None when it came from the
        alternating solver, whose p is not kept here).
    """

    value: float
    incumbent: float
    status: str
    nodes: int
    scores: np.ndarray | None


def nodes_for_samples(n: int, nodes: int, full_samples: int) -> int:
    """A budget of SVMs for a branch-and-bound over n samples: ``nodes`` up to
    ``full_samples`` samples, in proportion to 1 / n above, where the cost of its SVMs grows
    about linearly with n, so that the search costs about the same time at any n."""
    return nodes * full_samples // max(n, full_samples)


def score_box_nodes(n: int, strategy: Strategy = DEFAULT_STRATEGY) -> int:
    """The budget of SVMs of :func:`finite_r_bound` for n samples (the strategy's
    ``score_box_nodes`` up to ``score_box_full_samples`` samples, in proportion to 1 / n
    above)."""
    return nodes_for_samples(n, strategy.score_box_nodes, strategy.score_box_full_samples)


def score_difference_gram(H: np.ndarray, n: int, T: int) -> np.ndarray:
    """``G = D D^T`` for the rows ``x_it - x_i0`` (t = 1..T-1) of D; shape (n(T-1), n(T-1))."""
    H4 = H.reshape(n, T, n, T)
    diff = H4[:, 1:, :, 1:] - H4[:, 1:, :, :1] - H4[:, :1, :, 1:] + H4[:, :1, :, :1]
    return diff.reshape(n * (T - 1), n * (T - 1))


def vertex_attention(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corners of the box ``lo <= delta <= hi`` (T-1 score differences) and their softmaxes.

    The attention vectors reachable from the box form the polytope
    ``{s in simplex: e^lo_t s_0 <= s_t <= e^hi_t s_0}`` whose vertices are exactly these
    softmaxes (docs/theory.md). Duplicate corners (``lo_t == hi_t``) are dropped.

    Returns
    -------
    corners : ndarray of shape (k, T-1)
    attention : ndarray of shape (k, T)
    """
    # each axis's distinct ends in increasing order: the rows of np.unique(axis=0) of all
    # corners, without its sort (80 us a call; 14 of 41 s of a certified solve at n = 200)
    ends = [sorted({float(a), float(b)}) for a, b in zip(lo, hi, strict=True)]
    corners = np.array(list(itertools.product(*ends)), dtype=np.float64)
    scores = np.hstack([np.zeros((len(corners), 1)), corners])
    scores -= scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    return corners, weights / weights.sum(axis=1, keepdims=True)


def corner_attention(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The softmaxes of every corner of k boxes at once, repeated corners included.

    For boxes ``lo[j] <= delta <= hi[j]`` (shape (k, T-1)), shape (k, 2^(T-1), T): row j holds
    the rows of ``vertex_attention(lo[j], hi[j])[1]``, in the same order, and again where
    ``lo[j, t] == hi[j, t]``. A largest, smallest or spread over a box's corners is the same
    with the repeats, and one pass over all boxes replaces a call per sample (173,000 calls,
    3.1 of 16 s of a certified solve at n = 200).
    """
    k, m = lo.shape
    high = np.array(list(itertools.product((False, True), repeat=m)), dtype=bool)
    corners = np.where(high, hi[:, None, :], lo[:, None, :])
    scores = np.concatenate([np.zeros((k, len(high), 1)), corners], axis=2)
    scores -= scores.max(axis=2, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=2, keepdims=True)


@dataclass(order=True)
class _Node:
    bound: float
    order: int
    lo: np.ndarray  # (n, T-1)
    hi: np.ndarray
    pin_samples: np.ndarray  # (k,)
    pin_corners: np.ndarray  # (k, T-1)
    pin_attention: np.ndarray  # (k, T)
    coef: np.ndarray  # (k,) v = sum_a coef_a X_{i_a}^T s_a
    alpha: np.ndarray  # (k,) SVM duals
    norm: float  # the SVM's ||v|| (bound can exceed it by the parent's bound)


class _Problem:
    """Token Gram, labels and the ellipsoid of reachable score differences."""

    def __init__(self, H: np.ndarray, y: np.ndarray, T: int, R: float) -> None:
        self.H, self.y, self.T, self.R = H, y, T, R
        self.n = len(y)
        self.H4 = H.reshape(self.n, T, self.n, T)
        self.G = score_difference_gram(H, self.n, T)
        self.B = _reachable_basis(self.G)
        half = R * np.sqrt(np.maximum(np.diag(self.G), 0.0)) * _WIDEN
        self.root_hi = half.reshape(self.n, T - 1)
        self.root_lo = -self.root_hi

    def gram(self, samples: np.ndarray, attention: np.ndarray) -> np.ndarray:
        """Gram matrix of the attended features ``X_i^T s`` of the given (sample, attention)."""
        block = self.H4[samples][:, :, samples]
        K = np.einsum("at,atbu,bu->ab", attention, block, attention)
        return (K + K.T) / 2  # exactly symmetric, as solve_trusted_vstep needs

    def worst_free(self, node: _Node, margins: np.ndarray, pinned: np.ndarray) -> tuple[float, int]:
        """The free sample whose corners' smallest lifted bound
        (:func:`~margin_solver.svm.selection.lifted_bounds`) is largest, and that bound;
        ``(-inf, -1)`` when every free sample has a corner with margin 1 under the node's v."""
        free = np.flatnonzero(~pinned)
        attention = corner_attention(node.lo[free], node.hi[free])
        corner_margins = np.einsum("kct,kt->kc", attention, margins[free])
        short = corner_margins.max(axis=1) < 1 - 1e-9
        if not short.any():
            return -math.inf, -1
        samples, attention = free[short], attention[short]
        blocks = self.H4[samples, :, samples, :]  # (k, T, T): each sample's token Gram
        sq_norms = np.einsum("kct,ktu,kcu->kc", attention, blocks, attention)
        lifts = lifted_bounds(node.norm, corner_margins[short], sq_norms).min(axis=1)
        worst = int(np.argmax(lifts))
        return float(lifts[worst]), int(samples[worst])

    def token_margins(self, node: _Node) -> np.ndarray:
        """``y_i <v, x_it>`` for the node's v; shape (n, T)."""
        coefficients = np.zeros((self.n, self.T))
        np.add.at(coefficients, node.pin_samples, node.coef[:, None] * node.pin_attention)
        values = (self.H @ coefficients.reshape(-1)).reshape(self.n, self.T)
        return self.y[:, None] * values

    def svm(self, samples, attention, support=None):
        """(norm, coef, alpha, status) of the SVM over the given attended features."""
        if samples.size == 0:
            return 0.0, np.zeros(0), np.zeros(0), OPTIMAL
        return self.solve(self.gram(samples, attention), self.y[samples], support)

    @staticmethod
    def solve(K, y, support=None):
        """(norm, coef, alpha, status) of the SVM with Gram matrix K and labels y."""
        guess = support if support is not None and support.any() else None
        result = solve_vstep_from_support(K, y, guess)
        if result.status == INFEASIBLE:
            return math.inf, None, None, INFEASIBLE
        if not result.success:
            return math.nan, None, None, FAILED
        return result.norm, result.coef, result.alpha, OPTIMAL

    def ball_distance_dual(self, lo: np.ndarray, hi: np.ndarray) -> float:
        """A lower bound on ``min ||p||^2 / 2`` over p whose score differences lie in the box.

        Only coordinates tighter than the root box (which every p in the ball satisfies)
        are used. The value is the Lagrangian dual of the box-constrained least-norm
        problem at multipliers from an NNLS solve, evaluated with G itself, so it is a valid
        bound however inaccurate the solve (weak duality).
        """
        lo, hi = lo.reshape(-1), hi.reshape(-1)
        lower = np.flatnonzero(lo > self.root_lo.reshape(-1))
        upper = np.flatnonzero(hi < self.root_hi.reshape(-1))
        if lower.size == 0 and upper.size == 0:
            return 0.0
        rows = np.vstack([self.B[lower], -self.B[upper]])
        h = np.concatenate([lo[lower], -hi[upper]])
        solved = _least_distance(rows, h)
        if solved is None:
            return math.inf
        weights = solved[1]
        beta = np.zeros(len(lo))
        np.add.at(beta, lower, weights[: lower.size])
        np.add.at(beta, upper, -weights[lower.size :])
        linear = float(weights @ h)
        quad = float(beta @ self.G @ beta)
        if linear <= 0:
            return 0.0
        if quad <= 0:
            return math.inf
        return linear**2 / (2 * quad)  # the best multiple of the multipliers

    def realise(self, node: _Node, margins: np.ndarray) -> np.ndarray | None:
        """Score differences in the ball at which the node's v meets every margin, or None.

        Per sample, a set of score differences where ``y_i f_i >= 1`` for this v, described by
        linear constraints (exact for T = 2, an orthant at the best corner otherwise); then the
        least-norm point of their intersection, accepted when its norm is at most R.
        """
        lo = np.full((self.n, self.T - 1), -np.inf)
        hi = np.full((self.n, self.T - 1), np.inf)
        excess = margins - 1.0  # y_i <v, x_it> - 1
        for i in range(self.n):
            if self.T == 2:
                a, b = excess[i]
                if b > 0 and a < 0:
                    lo[i, 0] = math.log(-a / b)
                elif b < 0:
                    if a <= 0:
                        return None
                    hi[i, 0] = math.log(a / -b)
                elif b == 0 and a < 0:
                    return None
            else:
                corners, attention = vertex_attention(node.lo[i], node.hi[i])
                best = int(np.argmax(attention @ excess[i]))
                if attention[best] @ excess[i] < 0:
                    return None
                up = excess[i, 1:] > 0
                lo[i, up] = corners[best, up]
                hi[i, ~up] = corners[best, ~up]
        lo = np.maximum(lo, self.root_lo)
        hi = np.minimum(hi, self.root_hi)
        if (lo > hi).any():
            return None
        lo, hi = lo.reshape(-1), hi.reshape(-1)
        lower = np.flatnonzero(lo > self.root_lo.reshape(-1))
        upper = np.flatnonzero(hi < self.root_hi.reshape(-1))
        if lower.size == 0 and upper.size == 0:
            return np.zeros((self.n, self.T - 1))
        rows = np.vstack([self.B[lower], -self.B[upper]])
        h = np.concatenate([lo[lower], -hi[upper]])
        solved = _least_distance(rows, h)
        if solved is None or float(np.linalg.norm(solved[0])) > self.R:
            return None
        return (self.B @ solved[0]).reshape(self.n, self.T - 1)

    def value_at(self, scores: np.ndarray) -> float:
        """``||v*||`` at the attention given by the score differences (the P_R objective)."""
        full = np.hstack([np.zeros((self.n, 1)), scores])
        full -= full.max(axis=1, keepdims=True)
        attention = np.exp(full)
        attention /= attention.sum(axis=1, keepdims=True)
        norm, *_ = self.svm(np.arange(self.n), attention)
        return norm if math.isfinite(norm) else math.inf


def _least_distance(rows: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``argmin ||w|| s.t. rows @ w >= h`` and its multipliers (up to scale), by one NNLS
    (Lawson-Hanson LDP); None when the constraints are inconsistent (the residual vanishes)."""
    E = np.vstack([rows.T, h[None, :]])
    f = np.zeros(E.shape[0])
    f[-1] = 1.0
    u, rnorm = nnls(E, f, maxiter=50 * max(len(h), 1))
    r = E @ u - f
    if rnorm <= 1e-10 or r[-1] >= 0:  # r[-1] = -||r||^2 < 0 at an exact optimum
        return None
    return -r[:-1] / r[-1], u


def finite_r_bound(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    R: float,
    *,
    incumbent: float = math.inf,
    time_limit: float = math.inf,
    gap_tol: float = 1e-4,
    start: float | None = None,
    bar: ProgressBar | None = None,
    floor: float = 0.0,
    max_nodes: int | None = None,
    stall_nodes: int | None = None,
) -> FiniteRBound:
    """Branch-and-bound lower bound on P_R over boxes of score differences.

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
    incumbent : float, default=inf
        ``||v||`` of a known feasible point of P_R (e.g. from the alternating solver).
    time_limit : float, default=inf
        A caller's guard: seconds (counted from ``start``) after which the search stops
        between nodes with the bound proven so far (status ``"time_limit"``). It changes
        nothing while it does not act.
    gap_tol : float, default=1e-4
        The search stops when ``(incumbent - bound) / incumbent <= gap_tol``.
    start : float, optional
        ``time.perf_counter()`` at which the clock started (default: now).
    bar : ProgressBar, optional
        Advanced by the SVMs solved; shows the proven bound and gap.
    floor : float, default=0.0
        A bound on P_R proven otherwise (e.g.
        :func:`margin_solver.bounds.sdpbound.lagrangian_bound`): the search stops once it is within
        ``gap_tol`` of the incumbent, and the progress bar shows the larger of the two.
    max_nodes : int, optional
        SVMs after which the search stops (checked between nodes; a count, not seconds, so
        that the answer does not depend on the machine's speed); :func:`score_box_nodes`
        of n by default.
    stall_nodes : int, optional
        Stop when the proven bound (the larger of the tree's and ``floor``) has not risen
        (relatively by 1e-9) over this many SVMs (counted, not timed, like ``max_nodes``).

    Returns
    -------
    FiniteRBound
    """
    problem, root = _unit_problem(H, y, T, R)
    search = _Search(problem, incumbent * root, gap_tol, floor * root)
    found = search.run(
        time.perf_counter() if start is None else start,
        time_limit,
        bar if bar is not None else ProgressBar(False),
        score_box_nodes(len(y)) if max_nodes is None else max_nodes,
        stall_nodes,
        root,
    )
    return FiniteRBound(
        found.value / root, found.incumbent / root, found.status, found.nodes, found.scores
    )


def _unit_problem(H: np.ndarray, y: np.ndarray, T: int, R: float) -> tuple[_Problem, float]:
    """The problem on H / s with R sqrt(s) (s = mean diag H) and sqrt(s): the scores are
    unchanged and every norm of v is divided by sqrt(s), so tolerances mean the same at any
    scale of the tokens."""
    s = max(float(np.mean(np.diag(H))), np.finfo(np.float64).tiny)
    root = math.sqrt(s)
    return _Problem(H / s, y, T, R * root), root


class _Search:
    """State of one branch-and-bound run (heap, incumbent, closed-node floors)."""

    def __init__(self, problem: _Problem, incumbent: float, gap_tol: float, known: float) -> None:
        self.problem, self.incumbent, self.gap_tol = problem, incumbent, gap_tol
        self.known = known  # a bound proven by other means
        self.best_scores = None
        self.counter = itertools.count()
        self.heap: list[_Node] = []
        self.nodes = 0
        # smallest bound of a node closed because it reached the incumbent
        self.floor = math.inf
        # smallest bound of a node left unrefined (its SVM failed, or nothing to split)
        self.stuck = math.inf
        # why the search ended short of the gap: the clock, or its work without progress
        self.stopped_by = MAX_ITER

    def closes(self, bound: float) -> bool:
        return bound >= self.incumbent * (1 - self.gap_tol)

    def proven(self) -> float:
        """The bound proven so far (with the externally known one)."""
        tree = min([self.incumbent, self.floor, self.stuck] + [nd.bound for nd in self.heap[:1]])
        return max(tree, min(self.known, self.incumbent))

    def push(self, child: _Node) -> None:
        if self.closes(child.bound):
            self.floor = min(self.floor, child.bound)
        else:
            heapq.heappush(self.heap, child)

    def reuse(self, node: _Node, lo: np.ndarray, hi: np.ndarray) -> None:
        """The node's pins and SVM on a smaller box."""
        self.push(
            _Node(
                node.bound,
                -next(self.counter),
                lo,
                hi,
                node.pin_samples,
                node.pin_corners,
                node.pin_attention,
                node.coef,
                node.alpha,
                node.norm,
            )
        )

    def pin(self, node: _Node, lo, hi, i: int, corner, attention) -> None:
        """Child of ``node`` on box (lo, hi) with sample i's feature at ``attention`` pinned."""
        samples = np.append(node.pin_samples, i)
        corners = np.vstack([node.pin_corners, corner])
        attentions = np.vstack([node.pin_attention, attention])
        support = np.append(node.alpha > 0, True) if node.alpha.size else None
        norm, coef, alpha, status = self.problem.svm(samples, attentions, support)
        self.nodes += 1
        if status == INFEASIBLE:
            return
        if status == FAILED:
            self.stuck = min(self.stuck, node.bound)
            return
        self.push(
            _Node(
                max(norm, node.bound),
                -next(self.counter),
                lo,
                hi,
                samples,
                corners,
                attentions,
                coef,
                alpha,
                norm,
            )
        )

    def run(
        self,
        start: float,
        time_limit: float,
        bar: ProgressBar,
        max_nodes: int,
        stall_nodes: int | None,
        unit: float,
    ) -> FiniteRBound:
        """Search until the gap closes, ``max_nodes`` SVMs, ``stall_nodes`` without progress,
        or the caller's time limit; ``unit`` converts norms back to the caller's scale for
        the progress bar."""
        problem = self.problem
        n, T = problem.n, problem.T
        empty = np.zeros(0, dtype=np.int64)
        self.heap = [
            _Node(
                0.0,
                0,
                problem.root_lo.copy(),
                problem.root_hi.copy(),
                empty,
                np.zeros((0, T - 1)),
                np.zeros((0, T)),
                np.zeros(0),
                np.zeros(0),
                0.0,
            )
        ]
        best_proven, rose = 0.0, 0
        shown = _Shown(bar, unit)
        while self.heap:
            if self.closes(self.heap[0].bound) or self.closes(self.known):
                self.floor = min(self.floor, self.heap[0].bound)
                self.heap = []
                break
            if self.nodes >= max_nodes:
                break
            # progress counts only above the bound known from elsewhere
            proven = max(
                min([self.incumbent, self.floor, self.stuck, self.heap[0].bound]), self.known
            )
            if proven > best_proven * (1 + 1e-9):
                best_proven, rose = proven, self.nodes
            elif stall_nodes is not None and self.nodes - rose > stall_nodes:
                break
            if time.perf_counter() - start > time_limit:
                self.stopped_by = TIME_LIMIT
                break
            if bar.throttle():
                shown(self.nodes, self.proven(), self.incumbent)
            node = heapq.heappop(self.heap)
            margins = problem.token_margins(node)
            pinned = np.zeros(n, dtype=bool)
            pinned[node.pin_samples] = True
            worst_lift, worst_sample = problem.worst_free(node, margins, pinned)
            if worst_sample >= 0:
                if self.closes(worst_lift):
                    self.floor = min(self.floor, worst_lift)
                    continue
                corners, attention = vertex_attention(node.lo[worst_sample], node.hi[worst_sample])
                for corner, att in zip(corners, attention, strict=True):
                    self.pin(node, node.lo, node.hi, worst_sample, corner, att)
                continue
            # Every sample is satisfied by a corner: the relaxation is solved at v. Realise it.
            scores = problem.realise(node, margins)
            if scores is not None:
                value = problem.value_at(scores)
                if value < self.incumbent:
                    self.incumbent, self.best_scores = value, scores
                if self.closes(node.bound):
                    self.floor = min(self.floor, node.bound)
                    continue
            if not self.split(node, margins):
                self.stuck = min(self.stuck, node.bound)

        shown(self.nodes, self.proven(), self.incumbent)
        if (
            not math.isfinite(self.incumbent)
            and not self.heap
            and not math.isfinite(min(self.floor, self.stuck))
        ):
            return FiniteRBound(math.inf, math.inf, INFEASIBLE, self.nodes, None)
        value = min([self.incumbent, self.floor, self.stuck] + [nd.bound for nd in self.heap])
        gap = (
            (self.incumbent - value) / self.incumbent if math.isfinite(self.incumbent) else math.inf
        )
        status = OPTIMAL if gap <= self.gap_tol else self.stopped_by
        return FiniteRBound(value, self.incumbent, status, self.nodes, self.best_scores)

    def split(self, node: _Node, margins: np.ndarray) -> bool:
        """Bisect one score-difference interval of one sample; children cover the node.

        The sample is the pinned one whose margin, weighted by its SVM dual, varies most
        over the corners of its box (else the free one whose margin varies most); the
        interval is its widest in attention, cut where that token's attention is halfway.
        A half box that has one of the sample's pins as a corner keeps the node's pins (the
        pin already holds there), as does every half box of a free sample; otherwise the
        half box gets one child per corner, each pinning that corner's feature. Half boxes
        that miss the ball are dropped. False when no interval varies.
        """
        problem = self.problem
        spread = np.ptp(
            np.einsum("kct,kt->kc", corner_attention(node.lo, node.hi), margins), axis=1
        )
        weights = {int(i): a for i, a in zip(node.pin_samples, node.alpha, strict=True)}
        pinned = np.array(sorted(weights), dtype=np.int64)
        free = np.setdiff1d(np.arange(problem.n), pinned)
        pinned_scores = spread[pinned] * (np.array([weights[i] for i in pinned.tolist()]) + 1e-12)
        i = -1
        for samples, scores in ((pinned, pinned_scores), (free, spread[free])):
            if samples.size and scores.max() > 0:
                i = int(samples[np.argmax(scores)])
                break
        if i < 0:
            return False
        sigma_lo, sigma_hi = _logistic(node.lo[i]), _logistic(node.hi[i])
        t = int(np.argmax(sigma_hi - sigma_lo))
        middle = (sigma_lo[t] + sigma_hi[t]) / 2
        cut = math.log(middle) - math.log1p(-middle) if 0 < middle < 1 else math.nan
        if not node.lo[i, t] < cut < node.hi[i, t]:
            cut = (node.lo[i, t] + node.hi[i, t]) / 2
        if not node.lo[i, t] < cut < node.hi[i, t]:
            return False
        own = node.pin_samples == i
        for side in (0, 1):
            lo, hi = node.lo.copy(), node.hi.copy()
            (hi if side == 0 else lo)[i, t] = cut
            if problem.ball_distance_dual(lo, hi) > problem.R**2 / 2 * (1 + _BALL_RTOL):
                continue
            corners, attention = vertex_attention(lo[i], hi[i])
            keeps = not own.any() or any(
                (np.abs(corners - c).max(axis=1) == 0).any() for c in node.pin_corners[own]
            )
            if keeps:
                self.reuse(node, lo, hi)
                continue
            for corner, att in zip(corners, attention, strict=True):
                self.pin(node, lo, hi, i, corner, att)
        return True


def _logistic(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(x / 2))


class _Shown:
    """A box search's progress on a bar that other stages may share: advanced by the SVMs
    solved since the last call, with the proven bound, the best point and their gap."""

    def __init__(self, bar: ProgressBar, unit: float) -> None:
        self.bar, self.unit, self.nodes = bar, unit, 0

    def __call__(self, nodes: int, proven: float, incumbent: float) -> None:
        gap = (incumbent - proven) / incumbent if math.isfinite(incumbent) else math.nan
        self.bar.update(
            nodes - self.nodes,
            bound=f"{proven / self.unit:.6g}",
            best=f"{incumbent / self.unit:.6g}",
            gap=f"{gap:.2e}",
        )
        self.nodes = nodes


#: Largest dimension of the reachable score space (the rank of the score-difference Gram
#: matrix G) for which the finite-R bound runs :func:`low_rank_bound`, which branches on boxes
#: of p itself: the default of the strategy table's ``p_box_max_rank``.
LOW_RANK_MAX = DEFAULT_STRATEGY.p_box_max_rank


def score_rank(H: np.ndarray, n: int, T: int) -> int:
    """Dimension of the score differences a p can reach (the rank of G, as
    :class:`_Problem` counts it)."""
    return _reachable_basis(score_difference_gram(H, n, T)).shape[1]


def _reachable_basis(G: np.ndarray) -> np.ndarray:
    """B with B B^T = G on range(G), so that delta = B w is reachable by a p with
    ``||p|| = ||w||``; eigenvalues below rounding of the product are dropped."""
    scale = max(float(np.mean(np.diag(G))), np.finfo(np.float64).tiny)
    lam, U = np.linalg.eigh(G / scale)
    keep = lam > len(lam) * np.finfo(np.float64).eps * max(lam[-1], 0.0)
    return U[:, keep] * np.sqrt(lam[keep] * scale)


@dataclass(order=True)
class _Box:
    bound: float
    order: int
    lo: np.ndarray  # (r,) corner of the box of w (p = V w, ||p|| = ||w||)
    hi: np.ndarray
    support: np.ndarray | None  # the parent's SVM duals, a guess for this box's support


def low_rank_bound(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    R: float,
    *,
    incumbent: float = math.inf,
    time_limit: float = math.inf,
    gap_tol: float = 1e-4,
    start: float | None = None,
    bar: ProgressBar | None = None,
    floor: float = 0.0,
    max_nodes: int = P_BOX_NODES,
    stall_nodes: int | None = None,
) -> FiniteRBound:
    """Branch-and-bound lower bound on P_R over boxes of p, when the score space is small.

    Only the score differences ``delta = D p`` matter, and they are ``B w`` for a w of the
    same norm as p (:class:`_Problem`), w in R^r with r the rank of G. When r is small (n > d:
    more samples than dimensions) boxes of w shrink fast, and each gets a bound from one SVM
    (docs/theory.md, "Finite-R bound over boxes of p"): with c the box's centre, ``z_i`` the
    features attended at c and ``rho_i`` the largest distance from ``z_i`` of a feature some w
    of the box can attend (a vertex of the attention polytope of the box's score intervals;
    the distance is convex in the attention), every (v, w) of the box has ``||v|| >=
    1 / (1 / ||v_c|| + max_i rho_i)``, ``||v_c||`` the SVM norm at c (``||v|| >= 1 / max_i
    rho_i`` when no v separates the centre's features). Centres inside the ball are
    feasible points (incumbents). Best-first; a box is split in two across the side that
    moves the scores most.

    Parameters are those of :func:`finite_r_bound`, with ``max_nodes`` defaulting to
    :data:`P_BOX_NODES`; ``stall_nodes`` stops the search when the tree's own bound (without
    ``floor``) has not risen by 1e-9 (relative) over that many SVMs.

    Returns
    -------
    FiniteRBound
        ``scores``: the score differences of the incumbent's p when this search found it.
    """
    problem, root = _unit_problem(H, y, T, R)
    search = _BoxSearch(problem, incumbent * root, gap_tol, floor * root)
    found = search.run(
        time.perf_counter() if start is None else start,
        time_limit,
        bar if bar is not None else ProgressBar(False),
        max_nodes,
        root,
        stall_nodes,
    )
    return FiniteRBound(
        found.value / root, found.incumbent / root, found.status, found.nodes, found.scores
    )


def realising_coefficients(H: np.ndarray, n: int, T: int, scores: np.ndarray) -> np.ndarray:
    """Token coefficients c (p = sum_it c_it x_it) of the least-norm p whose score
    differences ``<p, x_it - x_i0>`` are ``scores`` (shape (n, T-1), reachable ones: in the
    range of G); ``||p||^2 = scores^T G^+ scores``."""
    G = score_difference_gram(H, n, T)
    beta = np.linalg.lstsq(G, scores.reshape(-1), rcond=None)[0].reshape(n, T - 1)
    return np.hstack([-beta.sum(axis=1, keepdims=True), beta])


class _BoxSearch:
    """One run of :func:`low_rank_bound` (on the problem scaled to mean diag H = 1)."""

    def __init__(self, problem: _Problem, incumbent: float, gap_tol: float, known: float) -> None:
        self.problem, self.incumbent, self.gap_tol, self.known = (
            problem,
            incumbent,
            gap_tol,
            known,
        )
        n, T = problem.n, problem.T
        self.B = problem.B  # (n (T-1), r)
        self.absB = np.abs(self.B)
        self.reach = self.absB.max(axis=0)  # how far a unit of w_k moves a score difference
        index = np.arange(n)
        self.blocks = problem.H4[index, :, index, :]  # (n, T, T): H_ii
        # the corners of a sample's box of T - 1 score differences, as 0/1 choices
        self.choices = np.array(list(itertools.product((0.0, 1.0), repeat=T - 1)))
        self.counter = itertools.count()
        self.nodes = 0
        self.floor = math.inf  # smallest bound of a box closed against the incumbent
        self.stuck = math.inf  # smallest bound of a box whose SVM failed and cannot shrink
        self.best_scores: np.ndarray | None = None  # score differences of the incumbent

    def closes(self, bound: float) -> bool:
        return bound >= self.incumbent * (1 - self.gap_tol)

    def evaluate(
        self, lo: np.ndarray, hi: np.ndarray, parent: float, support: np.ndarray | None
    ) -> _Box | None:
        """The box's node (its bound, at least ``parent``), or None when it is pruned (it
        misses the ball, no v can separate it, or its bound reaches the incumbent)."""
        problem = self.problem
        nearest = np.clip(0.0, lo, hi)
        if float(nearest @ nearest) > problem.R**2 * (1 + _BALL_RTOL):
            return None
        centre, half = (lo + hi) / 2, (hi - lo) / 2
        n, T = problem.n, problem.T
        mid = (self.B @ centre).reshape(n, T - 1)
        spread = (self.absB @ half).reshape(n, T - 1)
        attention = softmax(np.hstack([np.zeros((n, 1)), mid]))
        # every corner of each sample's box of score differences, and its attention
        corners = (mid - spread)[:, None, :] + self.choices[None] * (2 * spread)[:, None, :]
        vertices = softmax(np.concatenate([np.zeros(corners.shape[:2] + (1,)), corners], axis=2))
        moved = vertices - attention[:, None, :]
        rho = np.sqrt(
            np.maximum(np.einsum("ikt,itu,iku->ik", moved, self.blocks, moved).max(axis=1), 0.0)
        )
        self.nodes += 1
        K = problem.gram(np.arange(n), attention)
        norm, coef, alpha, status = problem.solve(K, problem.y, support)
        guess = None
        if status == FAILED:
            bound = parent
        elif status == INFEASIBLE:  # weights with sum_i a_i y_i z_i = 0 exist: 1 / max rho
            bound = math.inf if rho.max() == 0 else 1.0 / float(rho.max())
        else:
            weights = alpha / alpha.sum() if alpha.sum() > 0 else np.full(n, 1.0 / n)
            first = _robust_margin_bound(K, problem.y, rho, weights)
            second = self.second_order(K, attention, weights, rho, centre, half, spread)
            bound = 1.0 / min(first, second)
            guess = alpha
            if float(centre @ centre) <= problem.R**2 and norm < self.incumbent:
                self.incumbent, self.best_scores = norm, mid
        bound = max(bound, parent)
        if bound == math.inf:
            return None
        if self.closes(bound):
            self.floor = min(self.floor, bound)
            return None
        if status == FAILED and not (hi - lo > 0).any():
            self.stuck = min(self.stuck, bound)
            return None
        return _Box(bound, next(self.counter), lo, hi, guess)

    def second_order(
        self,
        K: np.ndarray,
        attention: np.ndarray,
        weights: np.ndarray,
        rho: np.ndarray,
        centre: np.ndarray,
        half: np.ndarray,
        spread: np.ndarray,
    ) -> float:
        """An upper bound on ``max ||sum_i w_i y_i z_i(w')||`` over the w' of the box in the
        ball (``weights`` w of the simplex; docs/theory.md, "Finite-R bound over boxes of
        p"): with m the value at the centre and f_i = <u_i, s_i> (u_i the token values of
        m), ``||m||^2 + 2 max <g, w' - c> + sum_i w_i L_i ||delta_i - delta_i(c)||^2 +
        (sum_i w_i rho_i)^2``, where g is the gradient of ``sum_i w_i y_i f_i`` in w', its
        maximum over the box and the ball is at most ``min(|g| . h, R ||g|| - g . c)``, and
        ``L_i = 3/2 (max_t u_it - min_t u_it)`` bounds the curvature of f_i along the
        score differences (a row sum of its Hessian)."""
        problem = self.problem
        n, T = problem.n, problem.T
        signed = weights * problem.y
        m_sq = max(float(signed @ K @ signed), 0.0)
        values = np.einsum("itju,ju->it", problem.H4, signed[:, None] * attention)
        mean = np.sum(attention * values, axis=1, keepdims=True)
        slope = (attention * (values - mean))[:, 1:]  # d f_i / d delta_it at the centre
        g = np.einsum("i,it,itk->k", signed, slope, self.B.reshape(n, T - 1, -1))
        linear = min(
            float(np.abs(g) @ half), problem.R * float(np.linalg.norm(g)) - float(g @ centre)
        )
        curvature = 1.5 * np.ptp(values, axis=1)
        rest = float(weights @ (curvature * np.sum(spread**2, axis=1))) + float(weights @ rho) ** 2
        return math.sqrt(max(m_sq + 2 * max(linear, 0.0) + rest, 0.0))

    def run(
        self,
        start: float,
        time_limit: float,
        bar: ProgressBar,
        max_nodes: int,
        unit: float,
        stall_nodes: int | None = None,
    ) -> FiniteRBound:
        problem = self.problem
        r = self.B.shape[1]
        heap: list[_Box] = []
        root = self.evaluate(np.full(r, -problem.R), np.full(r, problem.R), 0.0, None)
        if root is not None:
            heap.append(root)
        stopped = MAX_ITER
        best_tree, rose = 0.0, 0
        shown = _Shown(bar, unit)

        def proven() -> float:
            return max(min(self.incumbent, self.floor, self.stuck, heap[0].bound), self.known)

        while heap:
            # progress of the tree's own bound (below a floor proven otherwise it still rises);
            # without a point, a rising bound is no progress: the boxes prune nothing (their
            # bound 1 / max rho grows only as they shrink) and cannot prove infeasibility, so
            # the search stops when it has found no point within the stall budget
            tree = min(self.incumbent, self.floor, self.stuck, heap[0].bound)
            if tree > best_tree * (1 + 1e-9) and math.isfinite(self.incumbent):
                best_tree, rose = tree, self.nodes
            elif stall_nodes is not None and self.nodes - rose > stall_nodes:
                break
            if self.closes(heap[0].bound) or self.closes(self.known):
                self.floor = min(self.floor, heap[0].bound)
                heap = []
                break
            if self.nodes >= max_nodes:
                break
            if time.perf_counter() - start > time_limit:
                stopped = TIME_LIMIT
                break
            if bar.throttle():
                shown(self.nodes, proven(), self.incumbent)
            box = heapq.heappop(heap)
            if self.closes(box.bound):  # the incumbent fell since it was pushed
                self.floor = min(self.floor, box.bound)
                continue
            k = int(np.argmax((box.hi - box.lo) * self.reach))
            cut = (box.lo[k] + box.hi[k]) / 2
            for side in (0, 1):
                lo, hi = box.lo.copy(), box.hi.copy()
                (hi if side == 0 else lo)[k] = cut
                child = self.evaluate(lo, hi, box.bound, box.support)
                if child is not None:
                    heapq.heappush(heap, child)
        shown(self.nodes, proven() if heap else self.incumbent, self.incumbent)
        if not heap and not math.isfinite(min(self.incumbent, self.floor, self.stuck)):
            return FiniteRBound(math.inf, math.inf, INFEASIBLE, self.nodes, None)
        value = max(
            min([self.incumbent, self.floor, self.stuck] + [b.bound for b in heap[:1]]),
            min(self.known, self.incumbent),
        )
        gap = (
            (self.incumbent - value) / self.incumbent if math.isfinite(self.incumbent) else math.inf
        )
        status = OPTIMAL if gap <= self.gap_tol else stopped
        return FiniteRBound(value, self.incumbent, status, self.nodes, self.best_scores)


def _robust_margin_bound(
    K: np.ndarray, y: np.ndarray, rho: np.ndarray, weights: np.ndarray
) -> float:
    """An upper bound on ``max_{||u|| <= 1} min_i (y_i z_i^T u + rho_i)`` (K the Gram matrix
    of the z_i): ``||sum_i w_i y_i z_i|| + sum_i w_i rho_i`` at ``weights`` w of the simplex,
    which weak duality makes valid for any w of the simplex (docs/theory.md, "Finite-R
    bound over boxes of p")."""
    signed = weights * y
    return math.sqrt(max(float(signed @ K @ signed), 0.0)) + float(weights @ rho)
