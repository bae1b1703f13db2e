"""A certified global lower bound on P_R: the hard-selection problem LB (docs/theory.md).

For any p, ``y_i f_i = sum_t s_it y_i <v, x_it> <= max_t y_i <v, x_it>``, so

    (LB)  minimize ||v||  s.t.  for every i some token t has  y_i <v, x_it> >= 1

is a lower bound on the optimal value of P_R for every R. LB picks one token per sample and
solves an SVM on the picked tokens (:func:`margin_solver.svm.selection.selection_svm`); its value
is the smallest such SVM norm over the T^n selections.

Two exact methods:

``"enumerate"``
    Every selection, one SVM each (T^n SVMs).
``"bnb"``
    Best-first branch-and-bound over token sets (:class:`_SelectionSearch`). A node allows
    each sample a set of tokens; samples left with one are fixed, and the SVM over the fixed
    samples alone (fewer constraints than any completion) bounds the node from below. When
    that SVM's v already satisfies every free sample through an allowed token, the node is
    solved (its best completion is that v). Otherwise the free samples add the lifted bound
    of the hardest one (:func:`~margin_solver.svm.selection.lifted_bounds`, from the strong
    convexity of the node's SVM) and the aggregated lift of all of them
    (:func:`~margin_solver.svm.selection.aggregated_lift`: nearly orthogonal tokens, such as the
    paper's noise tokens, add up instead of being charged one at a time). A node whose bound
    reaches the incumbent is pruned; else the hardest free sample is branched on: its most
    promising token fixed, or its other tokens (tokens whose lifted bound reaches the
    incumbent are dropped). The incumbent starts from the hard-selection alternation
    (:func:`hard_selection_alternation`) from the first GD step's v
    (``v_1 ∝ sum_i y_i xbar_i``) and improves at solved nodes. Its budget is a count of
    SVMs (:func:`lb_nodes`), so that the same call proves the same bound on any machine; a
    search stopped by it, or by a caller's time limit, still carries a proven bound: the
    smallest bound of the open nodes and solved leaves.
    docs/theory.md, "Hard-selection branch-and-bound over token sets".

With ``R`` given, :func:`global_lower_bound` bounds P_R itself through the attention that
``||p|| <= R`` can reach (:mod:`margin_solver.bounds.rbounds`): ``bound_kind="finite-R"``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from margin_solver.bounds.linbound import linearised_bound
from margin_solver.bounds.rbounds import (
    finite_r_bound,
    low_rank_bound,
    nodes_for_samples,
    realising_coefficients,
    score_box_nodes,
    score_rank,
)
from margin_solver.bounds.sdpbound import CLARABEL_MAX_ITER, lagrangian_bound, lagrangian_cap
from margin_solver.bounds.sdpbound import MAX_SAMPLES as LAGRANGIAN_MAX_SAMPLES
from margin_solver.bounds.softleaf import SoftSelectionBound, leaf_bound
from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.guard import Guard, TimeLimitReached, heartbeat
from margin_solver.core.kernel import TokenGram, conflicting_pairs
from margin_solver.core.progress import ProgressBar, verbose_switch
from margin_solver.core.results import (
    FAILED,
    INACCURATE,
    INFEASIBLE,
    MAX_ITER,
    NO_FEASIBLE_POINT_FOUND,
    OPTIMAL,
    TIME_LIMIT,
    ConvergenceWarning,
    ResultMixin,
)
from margin_solver.core.strategy import DEFAULT_STRATEGY, Strategy, strategy_from
from margin_solver.core.tolerances import PRUNE_RTOL
from margin_solver.core.validation import (
    InvalidInputError,
    check_gap_tol,
    check_int,
    check_labels,
    check_magnitude,
    check_memory,
    check_positive,
    check_radius,
    check_tokens,
)
from margin_solver.descent.alternating import KernelForm, descend
from margin_solver.svm.selection import (
    SelectionSVM,
    aggregated_lift,
    attention_svm,
    best_tokens,
    hard_selection_alternation,
    lifted_bounds,
    selection_key,
    selection_svm,
    signed_token_gram,
    token_margins,
)
from margin_solver.svm.vstep import solve_trusted_vstep

logger = logging.getLogger("margin_solver")

__all__ = [
    "BOUND_METHODS",
    "FINITE_R",
    "HARD_SELECTION",
    "LB_FULL_SAMPLES",
    "LB_NODES",
    "LowerBoundResult",
    "first_selection",
    "first_step_margins",
    "global_lower_bound",
    "lb_nodes",
    "trusted_lower_bound",
]

#: Methods of :func:`global_lower_bound`.
BOUND_METHODS = ("auto", "enumerate", "bnb")

#: ``LowerBoundResult.bound_kind`` values.
HARD_SELECTION = "hard-selection"
FINITE_R = "finite-R"

#: ``method="auto"`` enumerates when T^n is at most this, else runs branch-and-bound.
ENUMERATION_LIMIT = 2**8

# A free sample counts as satisfied by a node's v when its best token's margin is at least
# 1 - _SATISFIED_TOL; the completed selection's SVM is then re-solved exactly.
_SATISFIED_TOL = 1e-9
#: The default of the strategy table's ``lb_nodes``: SVMs of LB's branch-and-bound up to
#: :data:`LB_FULL_SAMPLES` samples (:func:`lb_nodes`), kept as a public name.
LB_NODES = DEFAULT_STRATEGY.lb_nodes
#: The default of the strategy table's ``lb_full_samples``, kept as a public name.
LB_FULL_SAMPLES = DEFAULT_STRATEGY.lb_full_samples


@dataclass(repr=False)
class LowerBoundResult(ResultMixin):
    """A certified lower bound on P_R: the hard-selection bound LB, or the finite-R bound.

    Attributes
    ----------
    value : float
        The proven lower bound. ``bound_kind="hard-selection"``: on LB, hence on P_R for
        every R; LB itself when ``status == "optimal"`` (up to 1e-9 relative), the best
        bound proven so far with ``"max_iter"`` or ``"time_limit"``, ``inf`` when infeasible
        (no v satisfies any selection, so P_R is infeasible for every R).
        ``bound_kind="finite-R"``: on P_R for the given R; within ``gap_tol`` of
        ``incumbent`` when ``"optimal"``.
    incumbent : float
        Hard-selection: ``||v||`` of the best selection found (an upper bound on LB, not on
        P_R). Finite-R: the smallest ``||v||`` of a point (v, p) with ``||p|| <= R`` found
        feasible for P_R (an upper bound on P_R), inf when none was found.
    selection : ndarray of int, shape (n,) or None
        Token of each sample in the best selection found (finite-R: that of its LB stage,
        else each sample's most attended token at the descent's point).
    status : str
        ``"failed"`` (an SVM's engines all broke down: ``value`` is the trivial bound 0),
        ``"optimal"`` (the search finished: ``value`` is LB), ``"max_iter"`` (a budget of
        work stopped it: LB's ``max_nodes``, or the finite-R box search's budget of SVMs, its
        SVMs without progress or no node left to refine; ``value`` is the bound proven so
        far, a valid lower bound but not LB), ``"time_limit"`` (the caller's time limit
        stopped it first; ``value`` as with ``"max_iter"``) or ``"infeasible"`` (the search
        finished and no selection can be separated: P_R is infeasible for every R).
        docs/statuses.md.
    message : str
    method : str
        ``"enumerate"`` or ``"bnb"``; for the finite-R bound the stages that ran, joined by
        ``"+"`` (of ``"hard-selection"``, ``"linearised"``, ``"lagrangian"``, ``"p-boxes"``,
        ``"bnb"``).
    nodes : int
        SVMs solved (selections for enumeration, nodes for branch-and-bound).
    solve_time : float
        Wall-clock seconds, including the token Gram product.
    certified : bool
        True when the search finished, so that ``value`` is proven to be LB itself (or LB's
        infeasibility is proven); False after a time limit. Finite-R: True when the gap to
        the incumbent is within ``gap_tol`` (or infeasibility of P_R is proven).
    bound_kind : str
        ``"hard-selection"`` (valid for every R) or ``"finite-R"`` (valid for ``R``).
    R : float or None
        The radius the bound is for (None for the hard-selection bound).
    point : ndarray of shape (n, T) or None
        Finite-R: token coefficients of a p (``p = sum_it point_it x_it``, ``||p|| <= R``)
        at which the branch-and-bound found its ``incumbent``, when that is below the
        incumbent it was given (the caller's best point); else None.
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
    bound_kind: str = HARD_SELECTION
    R: float | None = None
    point: np.ndarray | None = None

    @property
    def gap(self) -> float:
        """``(incumbent - value) / incumbent``: 0 when the bound is attained."""
        if not math.isfinite(self.incumbent):
            return math.nan
        return (self.incumbent - self.value) / self.incumbent


def first_step_margins(H: np.ndarray, y: np.ndarray, T: int) -> np.ndarray:
    """``y_i <v_1, x_it>`` with ``v_1 = sum_j y_j xbar_j`` (the first GD step's
    direction); (n, T)."""
    n = len(y)
    values = (H @ np.repeat(y / T, T)).reshape(n, T)
    return y[:, None] * values


@verbose_switch
def global_lower_bound(
    X,
    y,
    method: str = "auto",
    *,
    R: float | None = None,
    time_limit: float = math.inf,
    gap_tol: float = 1e-4,
    gram: TokenGram | None = None,
    progress: bool = False,
    options: Mapping[str, Any] | None = None,
    max_nodes: int | None = None,
) -> LowerBoundResult:
    """Compute a certified lower bound on P_R: the hard-selection bound LB, or with ``R``
    the finite-R bound.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, n_features)
    y : array-like of shape (n_samples,)
        Any two labels (read by :func:`margin_solver.core.validation.encode_labels`).
    method : {"auto", "enumerate", "bnb"}, default="auto"
        How LB is computed (with ``R``: LB is the finite-R bound's first stage):
        ``"auto"`` enumerates when ``T**n <= 256`` and runs branch-and-bound otherwise.
    R : float, optional
        Radius of the ball ``||p|| <= R``. Without it (the default) the bound is LB, valid
        for every R (``bound_kind="hard-selection"``). With it the bound is for P_R at this
        R (``bound_kind="finite-R"``): LB, then the alternating descent's best point as
        incumbent (from p = 0, the first GD step's selection, the hard-selection
        alternation's and LB's), then the linearised bound
        (:func:`margin_solver.bounds.linbound.linearised_bound`, tight at small R), then the
        soft-selection bound (:func:`soft_selection_bound`, tight at large R), then (T = 2) the
        Lagrangian bound (:func:`margin_solver.bounds.sdpbound.lagrangian_bound`), then
        branch-and-bound over the attention the ball can reach
        (:func:`margin_solver.bounds.rbounds.finite_r_bound`) run until one is within ``gap_tol``
        of it (docs/theory.md, "Finite-R lower bound"). Each stage has a budget of work
        (SVMs, ascent steps, solver iterations), never of seconds, so that the same call
        gives the same bound on any machine.
        With T = 1 attention plays no role and LB is P_R itself, so LB is returned.
    time_limit : float, default=inf
        A guard, in seconds: once it has passed, branch-and-bound stops between nodes (and a
        finite-R stage between steps), with status ``"time_limit"`` and the best bound proven
        so far. It changes nothing while it does not act. Enumeration ignores it (use it only
        where T^n is small). Under a limit, cvxpy is imported at the start when the
        Lagrangian stage may run (so its import counts within the limit), and that
        stage is not solved when the limit passes during its compilation or its solver's
        set-up is predicted to end past it (the message says so; the later stages still
        run): the compilation (about 1 s at n = 40) cannot be cut short, so the limit can
        be overrun by one compilation (docs/statuses.md, "The time limit's margin").
    gap_tol : float, default=1e-4
        Finite-R bound only: stop, with status ``"optimal"``, once the relative gap between
        the incumbent and the proven bound is at most this; in (0, 1). (LB is solved to
        1e-9.)
    gram : TokenGram, optional
        Precomputed token Gram matrix of ``X`` (saves the O((nT)^2 d) product).
    progress : bool, default=False
        Show a progress bar on stderr (selections enumerated; or branch-and-bound's SVMs
        against ``max_nodes``, with proven bound and best selection, and for the finite-R
        bound the box searches' SVMs and the proven gap).
    max_nodes : int, optional
        SVMs after which LB's branch-and-bound stops with status ``"max_iter"`` and the best
        bound proven so far (with ``R``: its first stage; the other stages have budgets of
        their own); :func:`lb_nodes` of n by default.
    options : mapping, optional
        Fields of the strategy table (:class:`margin_solver.core.strategy.Strategy`), as
        :func:`margin_solver.minnorm.solve.solve_min_norm`'s ``options``: the bound's budgets
        of SVMs (``lb_nodes``, ``lb_full_samples``, ``score_box_nodes``,
        ``score_box_full_samples``, ``p_box_nodes``, ``bound_stall_nodes``), the Lagrangian
        SDP's size rule and iterations (``lagrangian_max_samples``,
        ``lagrangian_scs_iters``) and the finite-R bound's incumbent descents (the descent's
        keys); unknown keys and bad values raise.

    Returns
    -------
    LowerBoundResult

    Raises
    ------
    InvalidInputError
        On malformed X or y, an unknown method, a non-positive R or time limit, a
        ``max_nodes`` below 1, a gap tolerance outside (0, 1), or bad ``options``.

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
    strategy = strategy_from(options)
    if max_nodes is not None:
        check_int(max_nodes, "max_nodes", 1)
    if R is not None:
        R = check_radius(R)
        gap_tol = check_gap_tol(gap_tol)
        import_sdp_solver_first(n, T, strategy, time_limit)
    try:
        H = (gram if gram is not None else TokenGram(X, Guard(deadline=start + time_limit))).H
    except TimeLimitReached as stop:
        return _stopped_in_setup(stop, time_limit, start, R)
    result = trusted_lower_bound(
        H,
        y,
        T,
        method,
        time_limit,
        progress,
        start,
        R=R,
        X=X,
        gap_tol=gap_tol,
        strategy=strategy,
        max_nodes=max_nodes,
    )
    if not result.success:
        warnings.warn(
            f"global_lower_bound returned status {result.status!r}: {result.message}",
            ConvergenceWarning,
            stacklevel=3,
        )  # 3: past the verbose_switch wrapper
    return result


def trusted_lower_bound(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    method: str,
    time_limit: float,
    progress: bool,
    start: float,
    *,
    R: float | None = None,
    X: np.ndarray | None = None,
    gap_tol: float = 1e-4,
    max_nodes: int | None = None,
    incumbents: list | None = None,
    first: SelectionSVM | None = None,
    hard_bound: LowerBoundResult | None = None,
    incumbent: tuple[float, np.ndarray | None] | None = None,
    strategy: Strategy = DEFAULT_STRATEGY,
    root: bool = False,
) -> LowerBoundResult:
    """:func:`global_lower_bound` on checked inputs (the worker behind that door).

    ``H`` is the exactly symmetric (nT, nT) token Gram matrix
    (:attr:`margin_solver.core.kernel.TokenGram.H`), ``y`` float64 labels in {-1, +1}, ``method``
    one of :data:`BOUND_METHODS`; ``time_limit`` (positive, may be inf) the caller's guard
    in seconds from ``start``, the :func:`time.perf_counter` reading the solve time counts
    from. ``max_nodes`` is the budget of LB's branch-and-bound (status ``"max_iter"`` when it
    stops it; a count, so that the answer is the same on a loaded and an idle machine; with
    ``R`` its first stage; :func:`lb_nodes` when None). With ``R`` (positive) the
    finite-R bound, which also needs ``gap_tol`` (in (0, 1)) and, unless ``incumbent`` is
    given, the tokens ``X`` (for the alternating solver's incumbent). Nothing is validated:
    for callers that validated the data already
    (:func:`margin_solver.minnorm.solve.solve_min_norm`).

    ``first``: :func:`first_selection` when the caller has it (LB's first incumbent; a start
    of the finite-R bound's descents); computed here when None. Without ``R`` a list
    ``incumbents`` receives every selection (ndarray of shape (n,)) that became the best
    found, in order (the search for P_R's starts realises them all).

    With ``R``, a caller that ran its own starts passes what it has, so nothing is done
    twice: ``hard_bound``, LB as this function returned it without ``R`` (its first stage;
    its SVMs count in ``nodes``; a ``"time_limit"`` status makes the finite-R bound's
    ``"time_limit"`` unless it closes the gap), and ``incumbent``, ``(norm, selection)`` of
    the best feasible point of P_R found (``(inf, None)`` when none), which replaces the
    descents.
    ``strategy``: the knobs of those descents. ``root``: with ``R``, only the finite-R
    stages whose work is bounded by LB's (linearised and soft-selection), for a caller that
    tries to certify a first point before its search (:func:`_finite_r_stages`).
    """
    if max_nodes is None:
        max_nodes = lb_nodes(len(y), strategy)
    if R is not None and T > 1:
        with single_threaded_blas():
            return _finite_r(
                X,
                y,
                H,
                R,
                method,
                time_limit,
                gap_tol,
                start,
                progress,
                max_nodes=max_nodes,
                first=first,
                hard_bound=hard_bound,
                incumbent=incumbent,
                strategy=strategy,
                root=root,
            )
    if hard_bound is not None:  # T = 1: LB is P_R itself
        return hard_bound
    with single_threaded_blas():
        result = _hard_selection_bound(
            H,
            y,
            T,
            method,
            time_limit,
            progress,
            start,
            max_nodes=max_nodes,
            lift_iterations=strategy.lb_lift_iterations,
            incumbents=incumbents,
            first=first,
            X=X,
        )
    if result.status in (NO_FEASIBLE_POINT_FOUND, INACCURATE) and X is not None:
        # Unresolved selections: samples with exactly the same tokens may still prove it.
        try:
            clash = conflicting_pairs(X, y, H, Guard(deadline=start + time_limit))
        except TimeLimitReached as stop:  # LB's own answer stands, saying what was cut
            return replace(result, message=f"{result.message}; the time limit stopped {stop.stage}")
        if clash:
            return _conflict_result(clash[0], result.nodes, start, R)
    return result


def _stopped_in_setup(
    stop: TimeLimitReached, time_limit: float, start: float, R: float | None
) -> LowerBoundResult:
    """``time_limit`` before any bound: the caller's guard stopped a stage of the set-up
    (``stop.stage``); only the trivial bound 0 is claimed."""
    return LowerBoundResult(
        0.0,
        math.inf,
        None,
        TIME_LIMIT,
        f"the time limit (time_limit={time_limit:g} s) stopped the bound during its set-up, "
        f"in {stop.stage}; only the trivial bound 0 is proven",
        HARD_SELECTION,
        0,
        time.perf_counter() - start,
        **({} if R is None else {"bound_kind": FINITE_R, "R": R}),
    )


def _conflict_result(
    pair: tuple[int, int], nodes: int, start: float, R: float | None
) -> LowerBoundResult:
    """``infeasible``: samples ``pair`` have the same tokens and opposite labels."""
    i, j = pair
    return LowerBoundResult(
        math.inf,
        math.inf,
        None,
        INFEASIBLE,
        f"infeasible: samples {i} and {j} have the same tokens (in some order) and "
        "opposite labels, so every p gives them the same feature",
        HARD_SELECTION,
        nodes,
        time.perf_counter() - start,
        certified=True,
        **({} if R is None else {"bound_kind": FINITE_R, "R": R}),
    )


def _hard_selection_bound(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    method: str,
    time_limit: float,
    progress: bool,
    start: float,
    *,
    max_nodes: int,
    lift_iterations: int,
    incumbents: list | None = None,
    first: SelectionSVM | None = None,
    X: np.ndarray | None = None,
) -> LowerBoundResult:
    """LB by enumeration or branch-and-bound (``method``, ``"auto"`` by the size of T^n; at
    most ``max_nodes`` SVMs, ``lift_iterations`` steps of each node's aggregated lift);
    ``X``, the tokens behind H, lets exactly equal tokens prove a selection infeasible
    (:func:`margin_solver.svm.selection.selection_svm`)."""
    if method == "auto":
        method = "enumerate" if T ** len(y) <= ENUMERATION_LIMIT else "bnb"
    if method == "enumerate":
        with ProgressBar(
            progress, total=T ** len(y), desc="lower bound (enumeration)", unit="SVM"
        ) as bar:
            best, nodes, failed, floor = _enumerate(H, y, T, bar, incumbents, X)
        return _finish(best, floor, OPTIMAL, "enumerate", nodes, start, failed, floor)
    with ProgressBar(
        progress,
        total=max_nodes,
        desc="lower bound (branch-and-bound)",
        unit="SVM",
        bar_format=_BNB_BAR,
    ) as bar:
        return _branch_and_bound(
            H,
            y,
            T,
            time_limit,
            start,
            bar,
            max_nodes=max_nodes,
            lift_iterations=lift_iterations,
            incumbents=incumbents,
            first=first,
            X=X,
        )


def lagrangian_stage_may_run(n: int, T: int, strategy: Strategy) -> bool:
    """Whether the finite-R bound's size rule admits the Lagrangian stage (T = 2 and n at
    most ``lagrangian_max_samples``)."""
    return T == 2 and n <= min(strategy.lagrangian_max_samples, LAGRANGIAN_MAX_SAMPLES)


def import_sdp_solver_first(n: int, T: int, strategy: Strategy, time_limit: float) -> None:
    """Under a caller's time limit, import cvxpy at the start of a call whose finite-R bound
    may run the Lagrangian stage: its first import in a process (1.5-2.3 s) cannot be
    interrupted, and done at the start it counts within the limit, not past it. Without a
    limit nothing is imported before it is needed."""
    if math.isfinite(time_limit) and lagrangian_stage_may_run(n, T, strategy):
        import cvxpy  # noqa: F401


def lb_nodes(n: int, strategy: Strategy = DEFAULT_STRATEGY) -> int:
    """The budget of SVMs of LB's branch-and-bound for n samples (the strategy's
    ``lb_nodes`` up to ``lb_full_samples`` samples, in proportion to 1 / n above)."""
    return nodes_for_samples(n, strategy.lb_nodes, strategy.lb_full_samples)


def first_selection(H: np.ndarray, y: np.ndarray, T: int) -> SelectionSVM:
    """The hard-selection alternation from the first GD step's selection
    (:func:`first_step_margins`): LB's first incumbent and a start of P_R's solver."""
    return hard_selection_alternation(H, y, T, first_step_margins(H, y, T))


# SVMs against the budget, then proven bound and best selection
_BNB_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} SVMs{postfix}"
# the finite-R box searches' SVMs (their budgets stop them, or their stall rule), bound, gap
_STAGES_BAR = "{desc}: {n:.0f} SVMs [{elapsed}]{postfix}"


def _finite_r(
    X: np.ndarray | None,
    y: np.ndarray,
    H: np.ndarray,
    R: float,
    method: str,
    time_limit: float,
    gap_tol: float,
    start: float,
    progress: bool,
    *,
    max_nodes: int,
    first: SelectionSVM | None = None,
    hard_bound: LowerBoundResult | None = None,
    incumbent: tuple[float, np.ndarray | None] | None = None,
    strategy: Strategy = DEFAULT_STRATEGY,
    root: bool = False,
) -> LowerBoundResult:
    """The finite-R bound: LB (valid for every R, tight at large R; at most ``max_nodes``
    SVMs), the alternating solver's best point as incumbent, then the bounds in order of
    cost until one is within ``gap_tol`` of it (:func:`_finite_r_stages`). ``hard_bound``
    and ``incumbent`` given (:func:`trusted_lower_bound`) skip the first two steps."""
    n = len(y)
    T = H.shape[0] // n
    if hard_bound is None:
        # Confirmed exactly on X (the Gram matrix only screens): it cannot tell tokens 1e-9
        # apart (its squared distances carry rounding of eps ||x||^2), and such samples can
        # be interpolated.
        try:
            clash = conflicting_pairs(X, y, H, Guard(deadline=start + time_limit))
        except TimeLimitReached as stop:
            return _stopped_in_setup(stop, time_limit, start, R)
        if clash:
            return _conflict_result(clash[0], 0, start, R)
        if first is None:
            first = first_selection(H, y, T)
        hard_bound = _hard_selection_bound(
            H,
            y,
            T,
            method,
            time_limit,
            False,
            start,
            max_nodes=max_nodes,
            lift_iterations=strategy.lb_lift_iterations,
            first=first,
            X=X,
        )
    if incumbent is None:
        # solve_min_norm's deterministic starts: without the first step's selection the
        # incumbent of a cancer-feature instance (T = 3, R sqrt(d) = 1e4) stayed 8 % above the
        # point that start reaches, which equals LB, and the box search ran to its time limit;
        # LB's selection realised at norm R is its 'lb_selection' start: when it reaches LB
        # the bound is closed at once (else the box search ran to its stall limit, 18 s on an
        # n = 8 instance whose optimum is this start's point)
        if first is None:
            first = first_selection(H, y, T)
        selections = [
            best_tokens(first_step_margins(H, y, T)),
            first.tokens if first.feasible else None,
            None if hard_bound.status == FAILED else hard_bound.selection,
        ]
        incumbent = _descent_incumbent(X, H, y, R, selections, strategy)
    return _finite_r_stages(
        H, y, T, R, hard_bound, incumbent, time_limit, gap_tol, start, progress, strategy, root
    )


def _finite_r_stages(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    R: float,
    hard_bound: LowerBoundResult,
    incumbent: tuple[float, np.ndarray | None],
    time_limit: float,
    gap_tol: float,
    start: float,
    progress: bool,
    strategy: Strategy,
    root: bool = False,
) -> LowerBoundResult:
    """The finite-R bound's stages after LB (``hard_bound``) against the best point
    ``incumbent = (norm, selection)``, in order of cost until one is within ``gap_tol`` of
    it: the linearised bound (tight at small R; at most ``linbound``'s ascent steps), the
    Lagrangian bound (T = 2 and n at most its ``MAX_SAMPLES``; at most the SDP solver's
    iterations), branch-and-bound over boxes of p when the reachable scores span at most
    ``p_box_max_rank`` dimensions (the strategy's ``p_box_nodes`` SVMs), then over score boxes
    (:func:`~margin_solver.bounds.rbounds.score_box_nodes` SVMs); each box search also stops
    after ``bound_stall_nodes`` SVMs without progress. Budgets of work,
    not shares of seconds, so that the bound is the same on any machine. ``time_limit``
    (seconds from ``start``) is the caller's guard: past it, the running stage stops between
    steps or nodes and no further stage begins (status ``"time_limit"``, as when it stopped
    LB). The largest bound proven is kept; ``point`` is set when a search found a better
    point. ``root``: the linearised and soft-selection stages only (their work is bounded by
    LB's), for the solve's first point before its search, the latter only when its first
    leaf could certify (a bound short of that is not kept)."""
    n = len(y)
    incumbent, selection = incumbent
    nodes = hard_bound.nodes
    if hard_bound.status == FAILED:  # the v-step engines broke down: report it as LB does
        return LowerBoundResult(
            0.0,
            incumbent,
            None,
            FAILED,
            "every v-step engine broke down on some selection SVM; nothing beyond the "
            "trivial bound 0 is proven",
            HARD_SELECTION,
            nodes,
            time.perf_counter() - start,
            bound_kind=FINITE_R,
            R=R,
        )
    if hard_bound.value == math.inf:
        return LowerBoundResult(
            math.inf,
            math.inf,
            None,
            INFEASIBLE,
            "infeasible: no token selection can be separated, so no (v, p) interpolates "
            "the data for any R",
            HARD_SELECTION,
            nodes,
            time.perf_counter() - start,
            certified=True,
            bound_kind=FINITE_R,
            R=R,
        )
    if hard_bound.selection is not None:
        selection = hard_bound.selection
    methods = [HARD_SELECTION]
    notes = []  # what the guard left undone, for the message
    deadline = start + time_limit
    lagrangian = lagrangian_stage_may_run(n, T, strategy) and not root
    # the guard stopped a stage (LB's included), or left one unrun
    cut = hard_bound.status == TIME_LIMIT
    proven = min(hard_bound.value, incumbent)
    found, point = None, None

    def next_stage() -> bool:
        """True while the gap is open and the guard has not passed (``cut`` then)."""
        nonlocal cut
        if proven >= incumbent * (1 - gap_tol):
            return False
        cut |= time.perf_counter() > deadline
        return not cut

    with ProgressBar(
        progress, desc="lower bound (finite R)", unit="SVM", bar_format=_STAGES_BAR
    ) as bar:

        def show(bound: float, stage: str | None = None, work: str = "") -> None:
            """The bar's bound, best point and gap; with ``stage``, a log line that it
            begins (verbose output: which stage, what it may cost, the gap left)."""
            gap = (incumbent - bound) / incumbent if math.isfinite(incumbent) else math.nan
            fields = {"bound": f"{bound:.6g}", "best": f"{incumbent:.6g}", "gap": f"{gap:.2e}"}
            if stage is not None:
                fields = {"stage": stage, **fields}
                logger.info(
                    "lower bound (finite R): stage %s begun%s; bound %s, best %s, gap %s "
                    "(to close to %.2g)",
                    stage,
                    work,
                    fields["bound"],
                    fields["best"],
                    fields["gap"],
                    gap_tol,
                )
            bar.update(0, **fields)

        show(proven)
        if n * T <= strategy.linearised_max_tokens and next_stage():
            show(proven, "linearised", " (an ascent of a few hundred steps at most)")
            value = _linearised(H, y, T, R, incumbent * (1 - gap_tol), proven, deadline)
            proven = max(proven, min(value, incumbent))
            methods.append("linearised")
            show(proven)
        if (
            n * (T - 1) <= strategy.soft_leaf_max_differences
            and selection is not None
            and hard_bound.status == OPTIMAL
            and math.isfinite(incumbent)  # its target is a point's norm
            and next_stage()
        ):
            show(proven, "soft-selection", " (LB's search at the target, a cone program a leaf)")
            with heartbeat("lower bound (finite R): stage soft-selection"):
                soft = soft_selection_bound(
                    H,
                    y,
                    R,
                    incumbent * (1 - gap_tol),
                    # at the root only a certificate counts: no search for less than one
                    incumbent * (1 - gap_tol) if root else proven,
                    selection,
                    strategy,
                    time_limit,
                    start,
                )
            nodes += soft.nodes
            proven = max(proven, min(soft.value, incumbent))
            methods.append("soft-selection")
            logger.info("lower bound (finite R): soft-selection: %s", soft.reason)
            show(proven)
        if lagrangian and selection is not None and next_stage():
            # what the SDP could prove at most (a few SVMs): not run when that raises nothing
            cap, used = lagrangian_cap(
                H,
                y,
                R,
                selection,
                tangents=strategy.lagrangian_tangents,
                svms=strategy.lagrangian_cap_svms,
            )
            nodes += used
            if cap <= proven:
                lagrangian = False
                logger.info(
                    "lower bound (finite R): the Lagrangian stage can prove at most %.9g, not "
                    "above the bound %.9g: not run",
                    cap,
                    proven,
                )
        if lagrangian and next_stage():
            clarabel = n <= strategy.lagrangian_clarabel_max_samples
            iterations = CLARABEL_MAX_ITER if clarabel else strategy.lagrangian_scs_iters
            solver = "Clarabel" if clarabel else "SCS"
            sdp_size = f"one SDP, at most {iterations} {solver} iterations"
            show(proven, "lagrangian", f" ({sdp_size})")
            with heartbeat(f"lower bound (finite R): stage lagrangian ({sdp_size})"):
                sdp = lagrangian_bound(
                    H,
                    y,
                    R,
                    tangents=strategy.lagrangian_tangents,
                    max_iter=None if clarabel else strategy.lagrangian_scs_iters,
                    solver="CLARABEL" if clarabel else "SCS",
                    time_limit=deadline - time.perf_counter(),
                    setup_ratio=strategy.lagrangian_setup_ratio,
                )
            proven = max(proven, min(sdp.value, incumbent))
            methods.append("lagrangian")
            if sdp.solver_status.startswith("not solved"):  # the guard acted; go on
                notes.append(f"the Lagrangian stage was {sdp.solver_status}")
            show(proven)

        def box_search(search: Callable[..., Any], **budget: Any) -> Any:
            """``search`` (a box branch-and-bound of rbounds) against the incumbent and the
            bound proven when it starts."""
            return search(
                H,
                y,
                T,
                R,
                incumbent=incumbent,
                gap_tol=gap_tol,
                start=start,
                bar=bar,
                floor=proven,
                time_limit=time_limit,
                stall_nodes=strategy.bound_stall_nodes,
                **budget,
            )

        searches = []
        if not root:  # at the root the box searches wait for the solve's search
            if next_stage() and score_rank(H, n, T) <= strategy.p_box_max_rank:
                searches.append(
                    ("p-boxes", lambda: box_search(low_rank_bound, max_nodes=strategy.p_box_nodes))
                )
            searches.append(
                ("bnb", lambda: box_search(finite_r_bound, max_nodes=score_box_nodes(n, strategy)))
            )
        for name, search in searches:
            if not next_stage():
                break
            show(proven, name, " (a box search of SVMs)")
            methods.append(name)
            found = search()
            nodes += found.nodes
            cut |= found.status == TIME_LIMIT
            if found.status == INFEASIBLE:
                return LowerBoundResult(
                    math.inf,
                    math.inf,
                    None,
                    INFEASIBLE,
                    f"proven infeasible at R = {R:.6g}: every node of the finite-R "
                    f"branch-and-bound ({name}) was certified infeasible",
                    "+".join(methods),
                    nodes,
                    time.perf_counter() - start,
                    certified=True,
                    bound_kind=FINITE_R,
                    R=R,
                )
            if found.incumbent < incumbent and found.scores is not None:
                point = realising_coefficients(H, n, T, found.scores)
            incumbent = min(incumbent, found.incumbent)
            proven = max(proven, min(found.value, incumbent))
    method = "+".join(methods)
    gap = (incumbent - proven) / incumbent if math.isfinite(incumbent) else math.inf
    if gap <= gap_tol:
        status = OPTIMAL
        message = (
            f"finite-R bound ({method}) within relative gap {gap:.3g} <= {gap_tol:.3g} "
            f"of the best point found: bound {proven:.6g}, best {incumbent:.6g}"
        )
    else:
        # the box search runs whenever the gap is open and the guard allows: the guard, or
        # the box search's own stop, says why it stayed open
        status = TIME_LIMIT if cut or notes else MAX_ITER
        why = (
            "by the caller's time limit"
            if cut or notes
            else "at its budgets of work (SVMs of the box searches, or "
            f"{strategy.bound_stall_nodes} SVMs without progress, or no node left to refine)"
        )
        message = (
            f"stopped ({method}, {nodes} SVMs) {why}; proven finite-R bound "
            f"{proven:.6g}, best point {incumbent:.6g} (relative gap {gap:.3g})"
            + "".join(f"; {note}" for note in notes)
        )
    return LowerBoundResult(
        proven,
        incumbent,
        selection,
        status,
        message,
        method,
        nodes,
        time.perf_counter() - start,
        certified=status == OPTIMAL,
        bound_kind=FINITE_R,
        R=R,
        point=point,
    )


def _linearised(
    H: np.ndarray, y: np.ndarray, T: int, R: float, target: float, floor: float, deadline: float
) -> float:
    """The linearised bound (:func:`margin_solver.bounds.linbound.linearised_bound`, with its
    ``target``, ``floor`` and ``deadline``, the caller's guard) from the v-step's
    duals at uniform attention (p = 0, where the attention is linearised); 0 when that SVM
    has no duals."""
    n = len(y)
    means = np.full((n, T), 1.0 / T)
    K = np.einsum("it,itju,ju->ij", means, H.reshape(n, T, n, T), means)
    # formed from validated tokens: the public door's checks would reject a rounding-level
    # negative diagonal (a sample whose mean token is zero gave K_ii = -1.1e-16)
    uniform = solve_trusted_vstep((K + K.T) / 2, y)
    if uniform.alpha is None:
        return 0.0
    return linearised_bound(
        H, y, T, R, uniform.alpha, target=target, floor=floor, deadline=deadline
    )


def _descent_incumbent(
    X: np.ndarray,
    H: np.ndarray,
    y: np.ndarray,
    R: float,
    selections: Sequence[np.ndarray | None],
    strategy: Strategy,
) -> tuple[float, np.ndarray | None]:
    """The smallest ``||v||`` the alternating descent reaches from p = 0 and from each token
    selection of ``selections`` (shape (n,); None and repeats skipped) realised with norm R
    (starts of :func:`margin_solver.minnorm.solve.solve_min_norm`), with each sample's most
    attended token there; ``(inf, None)`` when no start is feasible."""
    n, T, d = X.shape
    form = KernelForm(X, TokenGram.from_gram(H, n, T, d))
    starts = [form.zeros()]
    for k, tokens in enumerate(selections):
        if tokens is None or any(np.array_equal(tokens, other) for other in selections[:k]):
            continue
        coefficients = attention_svm(H, T, tokens, R)
        if coefficients is not None:
            starts.append(form.from_coefficients(coefficients))
    best, selection = math.inf, None
    for p0 in starts:
        run = descend(form, y, p0, R, strategy=strategy)
        if run.point.feasible and run.norm < best:
            best, selection = run.norm, np.argmax(run.point.attention, axis=1)
    return best, selection


def _enumerate(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    bar: ProgressBar,
    incumbents: list | None = None,
    X: np.ndarray | None = None,
) -> tuple[SelectionSVM, int, bool, float]:
    """Every selection's SVM: the best one, the count, whether an engine broke down, and LB
    (the smallest proven bound, below the best norm when some SVM could not be resolved).
    ``X`` are the tokens behind H (see :func:`selection_svm`)."""
    best = None
    nodes = 0
    failed = False
    floor = math.inf
    for tokens in itertools.product(range(T), repeat=len(y)):
        svm = selection_svm(H, y, T, np.array(tokens), X=X)
        nodes += 1
        failed |= svm.failed
        floor = min(floor, svm.bound)
        if best is None or svm.norm < best.norm:
            best = svm
            if incumbents is not None and svm.feasible:
                incumbents.append(svm.tokens)
        if bar.throttle():
            bar.set_to(nodes, best=f"{best.norm:.6g}")
    bar.set_to(nodes)
    return best, nodes, failed, floor


@dataclass(order=True)
class _Node:
    bound: float
    order: int
    svm: SelectionSVM = field(compare=False)
    allowed: np.ndarray = field(compare=False)  # (n, T): tokens each sample may still take
    branch: int = field(compare=False)  # the free sample to branch on
    lifted: np.ndarray = field(compare=False)  # (T,): its tokens' lifted bounds


class _SelectionSearch:
    """Best-first branch-and-bound over token sets (docs/theory.md, "Hard-selection
    branch-and-bound"): a node restricts each sample to a set of allowed tokens and fixes
    the samples left with one; its bound combines the SVM over the fixed samples with the
    lifted and aggregated bounds of the free ones."""

    def __init__(
        self,
        H: np.ndarray,
        y: np.ndarray,
        T: int,
        lift_iterations: int,
        incumbents: list | None = None,
        first: SelectionSVM | None = None,
        X: np.ndarray | None = None,
        prune_at: float | None = None,
    ) -> None:
        self.H, self.y, self.T, self.X = H, y, T, X
        # a fixed pruning threshold instead of the incumbent's norm (the soft-selection
        # stage's target), and the nodes closed below it with their completions
        self.prune_at = prune_at
        self.closed: list[tuple[float, SelectionSVM, np.ndarray, SelectionSVM]] = []
        self.lift_iterations = lift_iterations
        self.n = len(y)
        check_memory(
            8.0 * H.size,
            f"the labelled token Gram matrix of the bound ({H.shape[0]} x {H.shape[1]})",
            "use fewer samples or tokens",
        )
        self.signed = signed_token_gram(H, y, T)
        self.sq_norms = np.diag(H).reshape(self.n, T)
        # every selection that becomes the incumbent is appended here (search starts)
        self.incumbents = incumbents
        self.incumbent = first if first is not None else first_selection(H, y, T)
        if incumbents is not None and self.incumbent.feasible:
            incumbents.append(self.incumbent.tokens)
        self.heap: list[_Node] = []
        self.counter = itertools.count()
        self.nodes = 0
        # Smallest bound among nodes closed by a completed selection; those bounds can sit a
        # rounding error below the completed SVM's norm, and the proven bound must include them.
        self.closed_floor = math.inf
        self.failed = False  # an engine breakdown drops a node without proof
        # Smallest bound among nodes closed because their SVM could not be resolved (tokens
        # of opposite labels equal to within rounding): only that bound is proven there.
        self.unresolved_floor = math.inf

    def solve(
        self,
        tokens: np.ndarray,
        samples: np.ndarray | None = None,
        guess: np.ndarray | None = None,
    ) -> SelectionSVM:
        svm = selection_svm(self.H, self.y, self.T, tokens, samples, X=self.X, guess=guess)
        self.nodes += 1
        self.failed |= svm.failed
        return svm

    def limit(self) -> float:
        """The norm a node's bound must reach to be pruned."""
        return self.incumbent.norm if self.prune_at is None else self.prune_at

    def prunes(self, bound: float) -> bool:
        return bound >= self.limit() * (1 - PRUNE_RTOL)

    def evaluate(self, svm: SelectionSVM, allowed: np.ndarray, parent_bound: float) -> None:
        """Bound a node and queue it, or close it (completion, pruning, infeasibility)."""
        if not svm.feasible:
            # closed: infeasible (bound inf), or unresolved with its proven bound
            self.unresolved_floor = min(self.unresolved_floor, max(parent_bound, svm.norm_bound))
            return
        n, T = self.n, self.T
        margins = token_margins(self.H, self.y, T, svm)
        fixed = np.zeros(n, dtype=bool)
        fixed[svm.samples] = True
        free = np.flatnonzero(~fixed)  # sorted, as setdiff1d's (which sorts: 7 % of LB)
        reachable = np.where(allowed, margins, -np.inf)
        if free.size == 0 or reachable[free].max(axis=1).min() >= 1 - _SATISFIED_TOL:
            tokens = np.argmax(reachable, axis=1)
            tokens[svm.samples] = svm.tokens
            completed = self.solve(tokens)
            self.closed_floor = min(self.closed_floor, max(parent_bound, svm.norm))
            self.closed.append((max(parent_bound, svm.norm), svm, allowed, completed))
            if completed.norm < self.incumbent.norm:
                self.incumbent = completed
                if self.incumbents is not None:
                    self.incumbents.append(completed.tokens)
            return
        lifted = np.where(
            allowed[free], lifted_bounds(svm.norm, margins[free], self.sq_norms[free]), math.inf
        )
        per_sample = lifted.min(axis=1)
        hardest = int(np.argmax(per_sample))
        bound = max(parent_bound, svm.norm, float(per_sample[hardest]))
        if self.prunes(bound):
            return
        needed = math.sqrt(max(self.limit() ** 2 - svm.norm**2, 0.0))
        shared = aggregated_lift(
            self.signed, T, margins, allowed, free, needed, self.lift_iterations
        )
        bound = max(bound, math.sqrt(svm.norm**2 + shared**2))
        if self.prunes(bound):
            return
        heapq.heappush(
            self.heap,
            _Node(bound, next(self.counter), svm, allowed, int(free[hardest]), lifted[hardest]),
        )

    def branch(self, node: _Node) -> None:
        """Two children: the free sample's most promising token fixed, and its other tokens."""
        i = node.branch
        options = np.flatnonzero(node.lifted < self.limit() * (1 + PRUNE_RTOL))
        options = options[np.argsort(node.lifted[options], kind="stable")]
        for group in (options[:1], options[1:]):
            if group.size == 0:
                continue
            allowed = node.allowed.copy()
            allowed[i] = False
            allowed[i, group] = True
            child = node.svm
            if group.size == 1:
                # warm: the parent's duals (|coef|), the new sample's guessed in (violated)
                duals = np.abs(node.svm.coef)
                child = self.solve(
                    np.append(node.svm.tokens, group[0]),
                    np.append(node.svm.samples, i),
                    np.append(duals, duals.max() if duals.size else 1.0),
                )
            self.evaluate(child, allowed, node.bound)

    def proven(self) -> float:
        return min(
            [self.incumbent.norm, self.closed_floor, self.unresolved_floor]
            + [node.bound for node in self.heap]
        )


def _branch_and_bound(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    time_limit: float,
    start: float,
    bar: ProgressBar,
    *,
    max_nodes: int,
    lift_iterations: int,
    incumbents: list | None = None,
    first: SelectionSVM | None = None,
    X: np.ndarray | None = None,
) -> LowerBoundResult:
    """Best-first search until no node is open, ``max_nodes`` SVMs (``"max_iter"``) or the
    caller's guard, ``time_limit`` seconds from ``start`` (``"time_limit"``)."""
    search = _SelectionSearch(H, y, T, lift_iterations, incumbents, first, X)
    status = _search_tree(search, max_nodes, time_limit, start, bar)
    return _finish(
        search.incumbent,
        search.proven(),
        status,
        "bnb",
        search.nodes,
        start,
        search.failed,
        search.unresolved_floor,
    )


def _search_tree(
    search: _SelectionSearch, max_nodes: int, time_limit: float, start: float, bar: ProgressBar
) -> str:
    """Run ``search`` best-first from its root: ``"optimal"`` when no node is left open, else
    ``"max_iter"`` (``max_nodes`` SVMs) or ``"time_limit"`` (``time_limit`` seconds from
    ``start``)."""
    n, T = search.n, search.T
    root = search.solve(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    search.evaluate(root, np.ones((n, T), dtype=bool), 0.0)
    heap = search.heap
    stopped_by = MAX_ITER
    while heap:
        if search.prunes(heap[0].bound):
            heap.clear()
            break
        if search.nodes >= max_nodes:
            break
        if time.perf_counter() - start > time_limit:
            stopped_by = TIME_LIMIT
            break
        if bar.throttle():
            _show_gap(bar, search)
        search.branch(heapq.heappop(heap))
    _show_gap(bar, search)
    return OPTIMAL if not heap else stopped_by


def soft_selection_bound(
    H: np.ndarray,
    y: np.ndarray,
    R: float,
    needed: float,
    floor: float,
    selection: np.ndarray,
    strategy: Strategy,
    time_limit: float,
    start: float,
) -> SoftSelectionBound:
    """A lower bound on P_R that reaches ``needed`` where P_R has no point below it
    (:mod:`margin_solver.bounds.softleaf`, docs/theory.md, "The soft-selection bound").

    LB's best ``selection`` is bounded first as a leaf against the target ``U = needed (1 +
    2 PRUNE_RTOL)`` (above ``needed`` by the pruning's rounding slack, so that a certificate
    is not left short by it). When that leaf bound is no more than ``floor`` (the bound
    proven already), nothing more is tried (value 0). Otherwise LB's branch-and-bound runs
    again with ``P = min(U, that leaf bound)`` as its pruning threshold (:func:`lb_nodes`
    SVMs); each node it closes below P is resolved to its completion (each other allowed
    token of every free sample shown, by one SVM, to cost at least P) and bounded as a leaf, at most
    ``strategy.soft_leaf_max_leaves`` of them. The value is then ``min(P, the leaves'
    bounds)``, valid for P_R whatever the leaves' cone programs returned; 0 when the search
    did not close, a node could not be resolved, or the caller's guard (``time_limit`` seconds
    from ``start``) passed.
    """
    n = len(y)
    T = H.shape[0] // n
    target = needed * (1 + 2 * PRUNE_RTOL)
    leaf = partial(
        leaf_bound,
        H,
        y,
        R,
        target=target,
        tangents=strategy.soft_leaf_tangents,
        inner_steps=strategy.soft_leaf_inner_steps,
    )
    first = selection_svm(H, y, T, selection)
    nodes = 1
    if not first.feasible:
        return SoftSelectionBound(0.0, nodes, "LB's selection has no SVM")
    bounds = {selection_key(selection): leaf(selection, svm_coef=first.coef)}
    threshold = min(target, bounds[selection_key(selection)])
    if threshold <= floor:
        return SoftSelectionBound(
            0.0, nodes, f"LB's selection's leaf bound {threshold:.9g} is not above {floor:.9g}"
        )
    search = _SelectionSearch(H, y, T, strategy.lb_lift_iterations, first=first, prune_at=threshold)
    with ProgressBar(False) as bar:
        status = _search_tree(search, lb_nodes(n, strategy), time_limit, start, bar)
    nodes += search.nodes
    if status != OPTIMAL or search.failed or search.unresolved_floor < threshold:
        return SoftSelectionBound(
            0.0, nodes, f"LB's search at {threshold:.6g} did not close ({status})"
        )
    # a node closed with a bound at the threshold needs no leaf (its completion is its best)
    closed = [entry for entry in search.closed if not search.prunes(entry[0])]
    for _, node, allowed, completed in closed:
        if not completed.feasible:  # a completion its SVM could not solve: no leaf to bound
            return SoftSelectionBound(0.0, nodes, "a completion has no SVM")
        tokens = completed.tokens
        free = np.flatnonzero(~np.isin(np.arange(n), node.samples))
        for i, other in zip(*np.nonzero(allowed[free])):
            i = free[i]
            if other == tokens[i]:
                continue
            flip = selection_svm(H, y, T, np.append(node.tokens, other), np.append(node.samples, i))
            nodes += 1
            # its proven bound: 0 after a breakdown, finite where H cannot tell tokens apart
            if not search.prunes(flip.bound):
                return SoftSelectionBound(0.0, nodes, f"sample {i}'s token {other} is not excluded")
        if selection_key(tokens) not in bounds:
            if len(bounds) >= strategy.soft_leaf_max_leaves:
                return SoftSelectionBound(0.0, nodes, "more leaves than its budget")
            if time.perf_counter() - start > time_limit:
                return SoftSelectionBound(0.0, nodes, "the time limit passed")
            bounds[selection_key(tokens)] = leaf(tokens, svm_coef=completed.coef)
    leaves = [bounds[selection_key(completed.tokens)] for *_, completed in closed]
    value = min([threshold * (1 - PRUNE_RTOL), *leaves])
    return SoftSelectionBound(value, nodes, f"{len(leaves)} leaves bounded")


def _show_gap(bar: ProgressBar, search: _SelectionSearch) -> None:
    """SVMs solved, proven bound, best selection and the relative gap between them."""
    bound, best = search.proven(), search.incumbent.norm
    gap = (best - bound) / best if 0 < best < math.inf else math.nan
    bar.set_to(
        search.nodes,
        bound=f"{bound:.6g}",
        best=f"{best:.6g}",
        gap=f"{gap:.2e}",
    )


def _selection(best: SelectionSVM) -> np.ndarray | None:
    """The best selection as one token per sample; None when its SVM has no solution."""
    if not best.feasible:
        return None
    selection = np.empty(len(best.samples), dtype=np.int64)
    selection[best.samples] = best.tokens
    return selection


def _finish(
    best: SelectionSVM,
    bound: float,
    status: str,
    method: str,
    nodes: int,
    start: float,
    engine_failed: bool = False,
    unresolved: float = math.inf,
) -> LowerBoundResult:
    """The LB result from the search's best selection and proven ``bound``; ``unresolved``
    is the smallest bound of the selections whose SVM could not be resolved."""
    elapsed = time.perf_counter() - start
    if engine_failed:  # a selection or node was dropped without proof: only 0 is proven
        return LowerBoundResult(
            0.0,
            best.norm,
            _selection(best),
            FAILED,
            "every v-step engine broke down on some selection SVM; nothing beyond the trivial "
            "bound 0 is proven",
            method,
            nodes,
            elapsed,
        )
    if status == OPTIMAL and unresolved < best.norm:
        # some selection's SVM was closed unresolved, with only a proven bound on its norm
        return LowerBoundResult(
            bound,
            best.norm,
            _selection(best),
            NO_FEASIBLE_POINT_FOUND if not best.feasible else INACCURATE,
            f"cannot tell LB: some selections put opposite labels on tokens equal to within "
            f"the rounding of the Gram matrix; proven bound {bound:.6g}, best selection "
            f"{best.norm:.6g}",
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
    selection = _selection(best)
    if status == OPTIMAL:
        message = f"LB solved exactly by {method} ({nodes} SVMs)"
    else:
        why = "the caller's time limit reached" if status == TIME_LIMIT else "node budget reached"
        message = (
            f"{why} after {nodes} SVMs; proven bound {bound:.6g}, best selection "
            f"{best.norm:.6g} (relative gap {(best.norm - bound) / best.norm:.3g})"
        )
    return LowerBoundResult(
        bound,
        best.norm,
        selection,
        status,
        message,
        method,
        nodes,
        elapsed,
        certified=status == OPTIMAL,
    )
