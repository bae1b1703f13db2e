"""Token selections some attention vector p realises, and a search for the best of them.

A selection (one token ``sel_i`` per sample, for some or all samples) is *realised* by p when
every selected token scores above the other tokens of its sample: ``<p, x_{i, sel_i} - x_it>
> 0`` for all ``t != sel_i``. The condition is homogeneous in p, so whether some p realises a
selection does not depend on R: any realising p, rescaled to norm R, realises it in the ball
(more sharply the larger R). At large R the min-norm problem P_R tends to the smallest
selection-SVM norm over *realisable* selections; the hard-selection bound LB minimises over all
of them, and when n > d many selections, LB's among them, are realised by no p.

:class:`Realiser` decides realisability by a linear program: with ``u_k`` the unit token
differences of the selection (differences of zero length, identical tokens, are dropped: the
choice between such tokens changes no score), it computes

    gamma = max  t   s.t.  <p, u_k> >= t  for all k,   -1 <= p_j <= 1,   t <= 1,

over p in the coordinates of the span of the tokens (from a pivoted Cholesky factorisation
of the token Gram matrix). ``gamma > 0`` iff some p realises the selection; it is the margin of the
best realising p in the unit box. Realisations with ``gamma <= REALISABLE_TOL`` cannot be told
from ties in floating point (the LP solver's feasibility tolerance is 1e-7) and count as not
realisable.

:func:`realisable_selections` is a best-first branch-and-bound over selections like LB's
(:mod:`margin_solver.bounds.lower`): a node fixes the tokens of some samples and is bounded below
by the SVM on them (:func:`margin_solver.svm.selection.selection_svm`); children that make the
partial selection unrealisable are pruned, since no completion of an unrealisable partial
selection is realisable. Each node popped first *dives*: it completes its selection greedily
(the free samples, hardest first, each take the token of largest margin under the node's v,
at the root the first GD step's, that keeps the selection realisable), so improving
realisable selections come early and the search is useful under a small budget. The budget
counts linear programs and SVMs, not seconds, so the same input gives the same selections on
a loaded and on an idle machine; only a caller's deadline (its time limit) can stop it
sooner.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Iterator

import numpy as np
import scipy.optimize
from scipy.linalg.lapack import dpstrf

from margin_solver.bounds.lower import first_step_margins
from margin_solver.core.guard import Progress
from margin_solver.core.tolerances import PRUNE_RTOL, SAME_TOKEN_RTOL
from margin_solver.svm.selection import (
    lifted_bounds,
    selection_svm,
    token_margins,
)

__all__ = ["REALISABLE_TOL", "Realiser", "realisable_selections"]

#: Smallest margin gamma (unit token differences, p in the unit box) that counts as realisable.
REALISABLE_TOL = 1e-7

# The pivoted Cholesky factorisation of the token Gram matrix stops (its rank) when the
# largest remaining pivot is below this fraction of the largest squared token norm.
_RANK_RTOL = 1e-12
# The least-distance residual's last entry (-1 when the solution is 0) is below -this when
# U p >= 1 is feasible.
_LDP_RTOL = 1e-12
# Rounds of the realisable alternation after each new incumbent (dive from its own v).
_POLISH_ROUNDS = 5


class Realiser:
    """Decides which (partial) token selections some p realises.

    Parameters
    ----------
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix.
    T : int
        Tokens per sample.

    Attributes
    ----------
    checks : int
        Realisability problems decided so far (by least distance, or by the LP).
    lps : int
        Of those, the ones least distance left to the linear program.
    """

    def __init__(self, H: np.ndarray, T: int):
        # token coordinates Z with H = Z Z^T, by pivoted Cholesky: O(nT r^2) for rank r
        # (an eigendecomposition costs O((nT)^3): seconds at nT = 800)
        top = max(float(np.max(np.diag(H))), np.finfo(np.float64).tiny)
        factor, pivots, rank, _ = dpstrf((H + H.T) / 2, lower=1, tol=_RANK_RTOL * top)
        self.Z = np.zeros((len(H), rank))
        self.Z[pivots - 1] = np.tril(factor)[:, :rank]
        self.T = T
        self.threshold = SAME_TOKEN_RTOL * max(
            float(np.mean(np.diag(H))), np.finfo(np.float64).tiny
        )
        self.checks = 0
        self.lps = 0

    def _differences(self, samples, tokens) -> np.ndarray:
        """Unit token differences ``u_k`` of the selection (identical tokens dropped)."""
        T = self.T
        rows = [
            self.Z[i * T + s] - self.Z[i * T + t]
            for i, s in zip(samples, tokens)
            for t in range(T)
            if t != s
        ]
        if not rows:
            return np.zeros((0, self.Z.shape[1]))
        D = np.array(rows)
        lengths = np.sqrt(np.einsum("kj,kj->k", D, D))
        keep = lengths**2 > self.threshold
        return D[keep] / lengths[keep, None]

    def witness(self, samples: np.ndarray, tokens: np.ndarray) -> np.ndarray | None:
        """A p (token-span coordinates, in the unit box) realising the selection with margin
        above :data:`REALISABLE_TOL`, or None when gamma is at most that."""
        U = self._differences(samples, tokens)
        r = U.shape[1]
        if len(U) == 0:
            return np.zeros(r)
        self.checks += 1
        decided, p = self._least_distance(U)
        return p if decided else self._linear_program(U)

    @staticmethod
    def _least_distance(U: np.ndarray) -> tuple[bool, np.ndarray | None]:
        """The cheap decision: ``minimize ||p|| s.t. U p >= 1`` as one non-negative least
        squares problem (least-distance programming, Lawson and Hanson 1974, ch. 23). Its
        solution u >= 0 gives either a p (checked: a witness when its recomputed margin
        clears the tolerance) or, when ``U^T u ~ 0`` and ``sum(u) = 1``, Gordan's
        alternative: for every p in the unit box ``min_k <p, u_k> <= <p, U^T u> <=
        ||U^T u||_1``, so gamma is at most that. ``(False, None)`` when neither settles it."""
        m, r = U.shape
        E = np.vstack([U.T, np.ones((1, m))])
        f = np.zeros(r + 1)
        f[-1] = 1.0
        u = scipy.optimize.nnls(E, f)[0]
        residual = E @ u - f
        if residual[-1] < -_LDP_RTOL:  # feasible: p = -residual[:r] / residual[-1]
            p = -residual[:r] / residual[-1]
            p /= max(float(np.max(np.abs(p))), np.finfo(np.float64).tiny)
            if float(np.min(U @ p)) > REALISABLE_TOL:
                return True, p
        total = float(np.sum(u))
        if total > 0 and float(np.sum(np.abs(U.T @ u))) / total <= REALISABLE_TOL:
            return True, None
        return False, None

    def _linear_program(self, U: np.ndarray) -> np.ndarray | None:
        """gamma by the LP of the module docstring (HiGHS), for what least distance leaves."""
        r = U.shape[1]
        # variables (p, t): maximise t subject to t - <p, u_k> <= 0
        objective = np.zeros(r + 1)
        objective[-1] = -1.0
        A = np.hstack([-U, np.ones((len(U), 1))])
        bounds = [(-1.0, 1.0)] * r + [(None, 1.0)]
        self.lps += 1
        result = scipy.optimize.linprog(
            objective, A_ub=A, b_ub=np.zeros(len(U)), bounds=bounds, method="highs"
        )
        if result.status != 0:  # the LP is bounded and feasible (p = 0, t = 0)
            raise RuntimeError(f"realisability LP failed: {result.message}")
        p = result.x[:r]
        # judged on the recomputed margins, not the solver's (tolerance-limited) objective
        return p if float(np.min(U @ p)) > REALISABLE_TOL else None

    def realises(self, p: np.ndarray, samples, tokens) -> bool:
        """True when ``p`` (from :meth:`witness`) realises the selection with margin above
        :data:`REALISABLE_TOL`; no LP."""
        U = self._differences(samples, tokens)
        return len(U) == 0 or float(np.min(U @ p)) > REALISABLE_TOL

    def extend(self, p, samples, tokens, i, t) -> np.ndarray | None:
        """A witness for the selection plus token ``t`` of sample ``i``: ``p`` itself when it
        realises that token too, else one from the LP (None when there is none)."""
        if p is not None and self.realises(p, [i], [t]):
            return p
        return self.witness(np.append(samples, i), np.append(tokens, t))


def realisable_selections(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    *,
    max_work: int = 2000,
    realiser: Realiser | None = None,
    keep: int = 1,
    deadline: float = math.inf,
) -> Iterator[tuple[np.ndarray, float]]:
    """Yield realisable selections of small selection-SVM norm, best-first.

    Parameters
    ----------
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    T : int
        Tokens per sample.
    max_work : int, default=2000
        Realisability problems plus SVMs after which the search stops.
    realiser : Realiser, optional
        Its counters are shared (built from H when omitted).
    keep : int, default=1
        Size of the set of best selections the search keeps: a node is pruned when its bound
        reaches the ``keep``-th smallest SVM norm found so far (the incumbent when 1).
    deadline : float, default=inf
        A ``time.perf_counter()`` time after which no further node is taken (a caller's
        time limit; without one the search depends on its work budget only, not the clock).

    Yields
    ------
    (ndarray of int of shape (n,), float)
        Each selection that enters the kept set: a realisable selection and its SVM norm,
        each selection once. With ``keep=1`` these are the incumbents, of strictly
        decreasing norm; in general the ``keep`` smallest norms yielded are the kept set.
        When the generator ends before the budget and the deadline, the kept set holds the
        ``keep`` smallest SVM norms of all realisable selections (fewer when fewer are
        separable; none yielded: no realisable selection is separable), unless an SVM's
        engines all broke down (its node is dropped: this search proves nothing, it only
        finds starts).
    """
    n = len(y)
    realiser = Realiser(H, T) if realiser is None else realiser
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    sq_norms = np.diag(H).reshape(n, T)
    svms = 0
    kept: list[tuple[float, bytes]] = []  # max-heap (negated norms) of the kept selections
    yielded: set[bytes] = set()

    def threshold() -> float:
        """The norm a selection must beat to enter the kept set."""
        return -kept[0][0] if len(kept) == keep else math.inf

    def offer(selection: np.ndarray, value: float) -> bool:
        """Put a full selection in the kept set if it enters; True when it does."""
        key = selection.tobytes()
        if key in yielded or not value < threshold() * (1 - PRUNE_RTOL):
            return False
        yielded.add(key)
        (heapq.heappush if len(kept) < keep else heapq.heapreplace)(kept, (-value, key))
        return True

    def work() -> int:
        return realiser.checks + svms

    def svm(tokens, samples=None):
        nonlocal svms
        svms += 1
        return selection_svm(H, y, T, tokens, samples)

    def dive(fixed, p, margins) -> np.ndarray | None:
        """``fixed``'s selection (realised by ``p``) completed greedily under ``margins``
        (of some v): each free sample, hardest first, takes its token of largest margin that
        keeps the selection realisable."""
        samples, tokens = fixed.samples.copy(), fixed.tokens.copy()
        free = np.setdiff1d(np.arange(n), fixed.samples)
        for i in free[np.argsort(margins[free].max(axis=1), kind="stable")]:
            for t in np.argsort(-margins[i], kind="stable"):
                if work() >= max_work:
                    return None
                extended = realiser.extend(p, samples, tokens, i, t)
                if extended is not None:
                    p, samples, tokens = extended, np.append(samples, i), np.append(tokens, t)
                    break
            else:
                return None
        selection = np.empty(n, dtype=np.int64)
        selection[samples] = tokens
        return selection

    def improve(selection: np.ndarray) -> Iterator[tuple[np.ndarray, float]]:
        """Offer ``selection`` to the kept set, then alternate "realisable best tokens for v"
        and "SVM on them" from it while the selections enter."""
        for _ in range(_POLISH_ROUNDS):
            if work() >= max_work:
                return
            full = svm(selection)
            if not offer(selection, full.norm):
                return
            yield selection.copy(), full.norm
            following = dive(root, origin, token_margins(H, y, T, full))
            if following is None or np.array_equal(following, selection):
                return
            selection = following

    root = svm(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    origin = np.zeros(realiser.Z.shape[1])
    counter = itertools.count()
    heap = [(0.0, next(counter), root, origin)]
    progress = Progress("realisable selections", max_work, "units of work (LPs and SVMs)")
    while heap and work() < max_work and time.perf_counter() <= deadline:
        progress.update(work())
        bound, _, node, p = heapq.heappop(heap)
        if bound >= threshold() * (1 - PRUNE_RTOL):
            return
        free = np.setdiff1d(np.arange(n), node.samples)
        if free.size == 0:  # a full selection, realisable by construction
            selection = np.empty(n, dtype=np.int64)
            selection[node.samples] = node.tokens
            if offer(selection, node.norm):
                yield selection, node.norm
            continue
        margins = token_margins(H, y, T, node)
        # the root has no v yet: its dive follows the first GD step's v
        completed = dive(node, p, margins if node.samples.size else first_step_margins(H, y, T))
        if completed is not None:
            yield from improve(completed)
        lifted = lifted_bounds(node.norm, margins[free], sq_norms[free])
        hardest = int(np.argmax(lifted.min(axis=1)))
        branch = free[hardest]
        for t in np.argsort(lifted[hardest], kind="stable"):
            if lifted[hardest, t] >= threshold() * (1 + PRUNE_RTOL) or work() >= max_work:
                break
            witness = realiser.extend(p, node.samples, node.tokens, branch, t)
            if witness is None:
                continue
            child = svm(np.append(node.tokens, t), np.append(node.samples, branch))
            if child.norm < threshold() * (1 - PRUNE_RTOL):
                heapq.heappush(heap, (child.norm, next(counter), child, witness))
