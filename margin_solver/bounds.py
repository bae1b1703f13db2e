"""A certified global lower bound on P_R: the hard-selection problem LB (docs/theory.md).

For any p, ``y_i f_i = sum_t s_it y_i <v, x_it> <= max_t y_i <v, x_it>``, so

    (LB)  minimize ||v||  s.t.  for every i some token t has  y_i <v, x_it> >= 1

is a lower bound on the optimal value of P_R for every R. LB picks one token per sample and
solves an SVM on the picked tokens (:func:`margin_solver.selection.selection_svm`); its value
is the smallest such SVM norm over the T^n selections.

Two exact methods:

``"enumerate"``
    Every selection, one SVM each (T^n SVMs).
``"bnb"``
    Best-first branch-and-bound. A node fixes the token of some samples; the SVM over the
    fixed samples alone has fewer constraints than any completion, so its norm bounds the
    node from below. When that SVM's v already satisfies every free sample through some
    token, the node is solved (its best completion is that v). Otherwise each free sample's
    tokens get a cheap lifted bound (:func:`_lifted_bounds`, from the strong convexity of the
    node's SVM); the node is pruned when the hardest free sample's smallest lifted bound
    reaches the incumbent, else that sample is branched on, one child per token whose lifted
    bound is below the incumbent. The incumbent
    starts from the hard-selection alternation (:func:`hard_selection_alternation`) from the
    first GD step's v (``v_1 ∝ sum_i y_i xbar_i``), and nodes whose bound reaches it are
    pruned. With a time limit the result still carries a proven bound: the smallest bound of
    the open nodes and solved leaves.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from margin_solver.blas import single_threaded_blas
from margin_solver.kernel import TokenGram
from margin_solver.progress import ProgressBar
from margin_solver.results import (
    FAILED,
    INFEASIBLE,
    OPTIMAL,
    TIME_LIMIT,
    ConvergenceWarning,
    ResultMixin,
)
from margin_solver.selection import (
    SelectionSVM,
    best_tokens,
    hard_selection_alternation,
    selection_svm,
    token_margins,
)
from margin_solver.validation import (
    InvalidInputError,
    check_labels,
    check_magnitude,
    check_positive,
    check_tokens,
)

__all__ = [
    "BOUND_METHODS",
    "LowerBoundResult",
    "first_step_margins",
    "global_lower_bound",
    "trusted_lower_bound",
]

#: Methods of :func:`global_lower_bound`.
BOUND_METHODS = ("auto", "enumerate", "bnb")

#: ``method="auto"`` enumerates when T^n is at most this, else runs branch-and-bound.
ENUMERATION_LIMIT = 2**8

# A free sample counts as satisfied by a node's v when its best token's margin is at least
# 1 - _SATISFIED_TOL; the completed selection's SVM is then re-solved exactly.
_SATISFIED_TOL = 1e-9
# Relative slack under which a node bound counts as reaching the incumbent (prune).
_PRUNE_RTOL = 1e-12


@dataclass(repr=False)
class LowerBoundResult(ResultMixin):
    """The hard-selection lower bound LB.

    Attributes
    ----------
    value : float
        The proven lower bound on LB, hence on P_R for every R: LB itself when
        ``status == "optimal"`` (up to 1e-9 relative), the best bound proven so far with
        ``"time_limit"``, ``inf`` when infeasible (no v satisfies any selection, so P_R is
        infeasible for every R).
    incumbent : float
        ``||v||`` of the best selection found (an upper bound on LB).
    selection : ndarray of int, shape (n,) or None
        Token of each sample in the best selection found.
    status : str
        ``"failed"`` (an SVM's engines all broke down: ``value`` is the trivial bound 0),
        ``"optimal"`` (the search finished: ``value`` is LB), ``"time_limit"`` (the
        branch-and-bound stopped at its time limit: ``value`` is the bound proven so far, a
        valid lower bound but not LB) or ``"infeasible"`` (the search finished and no
        selection can be separated: P_R is infeasible for every R). docs/statuses.md.
    message : str
    method : str
        ``"enumerate"`` or ``"bnb"``.
    nodes : int
        SVMs solved (selections for enumeration, nodes for branch-and-bound).
    solve_time : float
        Wall-clock seconds, including the token Gram product.
    certified : bool
        True when the search finished, so that ``value`` is proven to be LB itself (or LB's
        infeasibility is proven); False after a time limit.
    """

    value: float
    incumbent: float
    selection: np.ndarray | None
    status: str
    message: str
    method: str
    nodes: int
    solve_time: float
    certified: bool = False

    @property
    def gap(self) -> float:
        """``(incumbent - value) / incumbent``: 0 when LB is solved exactly."""
        if not math.isfinite(self.incumbent):
            return math.nan
        return (self.incumbent - self.value) / self.incumbent


def first_step_margins(H: np.ndarray, y: np.ndarray, T: int) -> np.ndarray:
    """``y_i <v_1, x_it>`` with ``v_1 = sum_j y_j xbar_j`` (the first GD step's direction); (n, T)."""
    n = len(y)
    values = (H @ np.repeat(y / T, T)).reshape(n, T)
    return y[:, None] * values


def global_lower_bound(
    X,
    y,
    method: str = "auto",
    *,
    time_limit: float = 60.0,
    gram: TokenGram | None = None,
    progress: bool = False,
) -> LowerBoundResult:
    """Compute the hard-selection lower bound LB on P_R (valid for every R).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, n_features)
    y : array-like of shape (n_samples,)
        Labels in {-1, +1}.
    method : {"auto", "enumerate", "bnb"}, default="auto"
        ``"auto"`` enumerates when ``T**n <= 256`` and runs branch-and-bound otherwise.
    time_limit : float, default=60.0
        Seconds after which branch-and-bound stops with status ``"time_limit"`` and the best
        bound proven so far (enumeration ignores it: use it only where T^n is small).
    gram : TokenGram, optional
        Precomputed token Gram matrix of ``X`` (saves the O((nT)^2 d) product).
    progress : bool, default=False
        Show a progress bar on stderr (selections enumerated; or branch-and-bound's elapsed
        time against ``time_limit``, with nodes, proven bound and best selection).

    Returns
    -------
    LowerBoundResult

    Raises
    ------
    InvalidInputError
        On malformed X or y, an unknown method or a non-positive time limit.

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[-2.0, 0.0], [0.0, 3.0]]])
    >>> res = global_lower_bound(X, [1, -1])
    >>> res.status, round(res.value, 6), res.selection.tolist()
    ('optimal', 1.0, [0, 0])
    """
    start = time.perf_counter()
    X = check_magnitude(check_tokens(X), "X")
    n, T, _ = X.shape
    y = check_labels(y, n)
    if method not in BOUND_METHODS:
        raise InvalidInputError(
            f"Unknown method {method!r}; expected one of {list(BOUND_METHODS)}."
        )
    time_limit = check_positive(time_limit, "time_limit", allow_inf=True)
    H = (gram if gram is not None else TokenGram(X)).H
    result = trusted_lower_bound(H, y, T, method, time_limit, progress, start)
    if not result.success:
        warnings.warn(f"global_lower_bound returned status {result.status!r}: {result.message}",
                      ConvergenceWarning, stacklevel=2)
    return result


def trusted_lower_bound(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    method: str,
    time_limit: float,
    progress: bool,
    start: float,
) -> LowerBoundResult:
    """:func:`global_lower_bound` on checked inputs (the worker behind that door).

    ``H`` is the exactly symmetric (nT, nT) token Gram matrix
    (:attr:`margin_solver.kernel.TokenGram.H`), ``y`` float64 labels in {-1, +1}, ``method``
    one of :data:`BOUND_METHODS`, ``time_limit`` positive; ``start`` the
    :func:`time.perf_counter` reading the solve time counts from. Nothing is validated: for
    callers that validated the data already (:func:`margin_solver.minnorm.solve_min_norm`).
    """
    n = len(y)
    if method == "auto":
        method = "enumerate" if T**n <= ENUMERATION_LIMIT else "bnb"
    with single_threaded_blas():
        if method == "enumerate":
            with ProgressBar(progress, total=T**n, desc="lower bound (enumeration)",
                             unit="SVM") as bar:
                best, nodes, failed = _enumerate(H, y, T, bar)
            return _finish(best, best.norm, OPTIMAL, "enumerate", nodes, start, failed)
        total = time_limit if math.isfinite(time_limit) else None
        with ProgressBar(progress, total=total, desc="lower bound (branch-and-bound)",
                         unit="s", bar_format=_BNB_BAR) as bar:
            return _branch_and_bound(H, y, T, time_limit, start, bar)


# elapsed seconds against the time limit, then nodes, proven bound and best selection
_BNB_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.0f} s{postfix}"


def _enumerate(
    H: np.ndarray, y: np.ndarray, T: int, bar: ProgressBar
) -> tuple[SelectionSVM, int, bool]:
    best = None
    nodes = 0
    failed = False
    for tokens in itertools.product(range(T), repeat=len(y)):
        svm = selection_svm(H, y, T, np.array(tokens))
        nodes += 1
        failed |= svm.failed
        if best is None or svm.norm < best.norm:
            best = svm
        if bar.throttle():
            bar.set_to(nodes, best=f"{best.norm:.6g}")
    bar.set_to(nodes)
    return best, nodes, failed


@dataclass(order=True)
class _Node:
    bound: float
    order: int
    svm: SelectionSVM


def _branch_and_bound(
    H: np.ndarray, y: np.ndarray, T: int, time_limit: float, start: float, bar: ProgressBar
) -> LowerBoundResult:
    n = len(y)
    token_sq_norms = np.diag(H).reshape(n, T)
    incumbent = hard_selection_alternation(H, y, T, first_step_margins(H, y, T))
    nodes = 1
    root = selection_svm(H, y, T, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    counter = itertools.count()
    heap = [_Node(0.0, next(counter), root)]
    # Smallest node bound among leaves closed by a completed selection; those bounds can sit
    # a rounding error below the completed SVM's norm, and the proven bound must include them.
    closed_floor = math.inf
    failed = root.failed  # an engine breakdown drops a node without proof
    while heap:
        if heap[0].bound >= incumbent.norm * (1 - _PRUNE_RTOL):
            heap = []
            break
        if time.perf_counter() - start > time_limit:
            break
        if bar.throttle():
            bar.set_to(
                min(time.perf_counter() - start, time_limit),
                nodes=nodes,
                bound=f"{min(heap[0].bound, closed_floor, incumbent.norm):.6g}",
                best=f"{incumbent.norm:.6g}",
            )
        node = heapq.heappop(heap)
        margins = token_margins(H, y, T, node.svm)
        free = np.setdiff1d(np.arange(n), node.svm.samples)
        if free.size == 0 or margins[free].max(axis=1).min() >= 1 - _SATISFIED_TOL:
            tokens = best_tokens(margins)
            tokens[node.svm.samples] = node.svm.tokens
            completed = selection_svm(H, y, T, tokens)
            nodes += 1
            failed |= completed.failed
            closed_floor = min(closed_floor, node.bound)
            if completed.norm < incumbent.norm:
                incumbent = completed
            continue
        lifted = _lifted_bounds(node.svm.norm, margins[free], token_sq_norms[free])
        hardest = np.argmax(lifted.min(axis=1))
        if lifted[hardest].min() >= incumbent.norm * (1 + _PRUNE_RTOL):
            continue
        branch = free[hardest]
        for t in np.flatnonzero(lifted[hardest] < incumbent.norm * (1 + _PRUNE_RTOL)):
            child = selection_svm(
                H, y, T, np.append(node.svm.tokens, t), np.append(node.svm.samples, branch)
            )
            nodes += 1
            failed |= child.failed
            if child.norm < incumbent.norm:
                heapq.heappush(heap, _Node(child.norm, next(counter), child))
    bound = min([incumbent.norm, closed_floor] + [node.bound for node in heap])
    status = OPTIMAL if not heap else TIME_LIMIT
    return _finish(incumbent, bound, status, "bnb", nodes, start, failed)


def _lifted_bounds(norm: float, margins: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
    """Lower bounds on the SVM norm after adding one token constraint to a solved node.

    The node's v_F is the min-norm point of its convex feasible set, so every v in that set
    has ``||v||^2 >= ||v_F||^2 + ||v - v_F||^2``; a new constraint ``y <v, x> >= 1`` where v_F
    has margin m needs ``||v - v_F|| >= (1 - m)_+ / ||x||``. Hence, per token,
    ``sqrt(||v_F||^2 + (1 - m)_+^2 / ||x||^2)`` (inf for a zero token that cannot help).
    A free sample needs some token, so the node is bounded by the largest over free samples
    of the smallest over their tokens: the node can be pruned, and a child skipped, without
    solving its SVM.
    """
    deficit = np.maximum(1.0 - margins, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = np.where(deficit > 0, deficit**2 / sq_norms, 0.0)
    return np.sqrt(norm**2 + lift)


def _finish(
    best: SelectionSVM,
    bound: float,
    status: str,
    method: str,
    nodes: int,
    start: float,
    engine_failed: bool = False,
) -> LowerBoundResult:
    elapsed = time.perf_counter() - start
    if engine_failed:  # a selection or node was dropped without proof: only 0 is proven
        selection = None
        if best.feasible:
            selection = np.empty(len(best.samples), dtype=np.int64)
            selection[best.samples] = best.tokens
        return LowerBoundResult(
            0.0,
            best.norm,
            selection,
            FAILED,
            "every v-step engine broke down on some selection SVM; nothing beyond the trivial "
            "bound 0 is proven",
            method,
            nodes,
            elapsed,
        )
    if not best.feasible and status == OPTIMAL:
        return LowerBoundResult(
            math.inf,
            math.inf,
            None,
            INFEASIBLE,
            "infeasible: no token selection can be separated, so no (v, p) interpolates "
            "the data for any R",
            method,
            nodes,
            elapsed,
            certified=True,
        )
    selection = np.empty(len(best.samples), dtype=np.int64)
    selection[best.samples] = best.tokens
    if status == OPTIMAL:
        message = f"LB solved exactly by {method} ({nodes} SVMs)"
    else:
        message = (
            f"time limit reached after {nodes} SVMs; proven bound {bound:.6g}, best selection "
            f"{best.norm:.6g} (relative gap {(best.norm - bound) / best.norm:.3g})"
        )
    return LowerBoundResult(bound, best.norm, selection, status, message, method, nodes, elapsed,
                            certified=status == OPTIMAL)
