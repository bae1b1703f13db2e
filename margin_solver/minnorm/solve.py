"""The min-norm interpolator P_R of single-head attention, from several starts, with a certificate.

    (P_R)  minimize ||v||  s.t.  y_i f(X_i; v, p) >= 1 for all i,  ||p|| <= R,

with f(X; v, p) = v^T X^T softmax(X p). P_R is non-convex in p, so :func:`solve_min_norm` runs
the alternating solver (:func:`margin_solver.descent.alternating.descend`) from several
starts (``zero``, ``first_step``, ``hard_selection``, ``lb_selection``, ``random_k``, a
caller's ``p0``, after a certified bound its ``bound_point``), searches further
(:mod:`margin_solver.minnorm.search`) when they leave a gap, and keeps the smallest feasible
norm; with ``certify=True`` the finite-R bound
(:func:`margin_solver.bounds.lower.global_lower_bound`) proves how far it can be from the
optimum. docs/theory.md, "The solve: starts, search and certificate", says what each start
is and when the search runs; the numbers behind those rules are the fields of the strategy
table (:class:`margin_solver.core.strategy.Strategy`, docs/decisions.md). Statuses:
docs/statuses.md, "Min-norm specifics".
"""

from __future__ import annotations

import itertools
import logging
import math
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.linalg

from margin_solver.bounds.lower import (
    BOUND_METHODS,
    FINITE_R,
    LowerBoundResult,
    first_selection,
    first_step_margins,
    import_sdp_solver_first,
    trusted_lower_bound,
)
from margin_solver.core.blas import single_threaded_blas
from margin_solver.core.data import Dataset, as_dataset
from margin_solver.core.guard import Guard, TimeLimitReached, active, current
from margin_solver.core.kernel import ModelResultMixin, TokenGram, conflicting_pairs, margins
from margin_solver.core.ooc import is_on_disk
from margin_solver.core.progress import ProgressBar, verbose_switch
from margin_solver.core.results import (
    FAILED,
    INACCURATE,
    INFEASIBLE,
    LOCAL_OPTIMAL,
    MAX_ITER,
    NO_FEASIBLE_POINT_FOUND,
    OPTIMAL,
    TIME_LIMIT,
    ConvergenceWarning,
    Renamed,
    renamed,
    sign_classes,
)
from margin_solver.core.strategy import Strategy, deprecated_constants, strategy_from
from margin_solver.core.validation import (
    InvalidInputError,
    check_gap_tol,
    check_int,
    check_magnitude,
    check_positive,
    check_radius,
    check_seed,
    check_tokens,
    check_vector,
    encode_labels,
)
from margin_solver.descent.alternating import (
    DenseForm,
    DescentRun,
    KernelForm,
    descend,
    kernel_trials_cheaper,
    norm,
)
from margin_solver.minnorm.radius import RadiusHint, proven_none, radius_hint
from margin_solver.minnorm.search import (
    hard_descend,
    nearly_hard,
    settled_run,
    settled_value,
)
from margin_solver.minnorm.search import search_starts as _search_starts
from margin_solver.svm.selection import attention_svm, best_tokens, selection_key

__all__ = ["DEFAULT_GAP_TOL", "FEAS_TOL", "FORMS", "MinNormResult", "solve_min_norm"]

logger = logging.getLogger("margin_solver")

FORMS = ("auto", "kernel", "dense")

#: Default ``gap_tol`` of :func:`solve_min_norm`: the largest relative gap
#: ``(norm - lower_bound) / norm`` that certifies ``optimal`` (docs/statuses.md says how it
#: was chosen).
DEFAULT_GAP_TOL = 1e-4

#: The returned (v, p) counts as feasible when ``min_i y_i f(X_i; v, p) >= 1 - FEAS_TOL``,
#: recomputed in float64 from the dense v and p. The v-step rescales its v to smallest margin
#: 1 exactly in its own (Gram) arithmetic; the dense recomputation differs from it by rounding
#: of order ``eps ||v|| max ||x||``, about 1e-12 on well-scaled data, so 1e-6 leaves six orders
#: of magnitude for rounding and still flags any violation a user could notice.
FEAS_TOL = 1e-6

# The proof behind "infeasible" from the hard-selection bound (docs/statuses.md).
_LB_INFEASIBLE = (
    "proven infeasible: the hard-selection bound LB is infeasible (no token selection can be "
    "separated); since y_i f_i <= max_t y_i <v, x_it> for every p, no (v, p) interpolates the "
    "data for any R"
)

# The module constants before the strategy table, now its fields (docs/decisions.md).
__getattr__ = deprecated_constants(
    __name__,
    {
        "SPREAD_RTOL": "spread_rtol",
        "AUTO_SEARCH_STARTS": "auto_search_starts",
        "SEARCH_BOUND_NODES": "search_bound_nodes",
        "SEARCH_BOUND_NODES_PER_EVAL": "search_bound_nodes_per_eval",
        "SCREEN_MIN_SAMPLES": "screen_min_samples",
    },
)


@renamed(
    Renamed("margin", "normalized_margin", value=lambda r: 1.0 / r.norm),
    Renamed("n_iter", "nit"),
)
@dataclass(repr=False)
class MinNormResult(ModelResultMixin):
    """Approximate solution of P_R with its certificate.

    Attributes
    ----------
    v, p : ndarray of shape (n_features,) or None
        The value head and attention vector (dense). With ``"no_feasible_point_found"`` they
        are the best attempt (see ``min_margin``); None when ``"infeasible"`` or ``"failed"``.
    norm : float
        ``||v||`` (an upper bound on the optimal value of P_R when ``solution_present``); inf
        when no feasible point is attached.
    lower_bound : float or None
        The proven lower bound on the optimal value of P_R at this R (``bound.value``, the
        finite-R bound), else None.
    gap : float
        ``(norm - lower_bound) / norm``; NaN without a bound or a feasible point.
    status : str
        One of (docs/statuses.md):

        ``"optimal"``
            Certified: the point is feasible (``min_margin >= 1 - feas_tol``) and
            ``gap <= gap_tol`` against a proven lower bound (``certify=True``).
        ``"local_optimal"``
            The best start's descent met a stopping test at a feasible point, but no bound
            proves it within ``gap_tol`` (no ``certify``, or the gap is larger).
        ``"max_iter"``
            The best start's descent stopped at ``max_iter``; the point is feasible.
        ``"time_limit"``
            The whole-call ``time_limit`` stopped the solve; the best feasible point found.
        ``"inaccurate"``
            The point violates ``min_margin >= 1 - feas_tol`` even after rescaling v.
        ``"infeasible"``
            Proven for every p in the ball (and every R): two samples with the same tokens
            and opposite labels, or the hard-selection bound LB is infeasible.
        ``"no_feasible_point_found"``
            Every start failed (the v-step is infeasible at its p: a statement about that p
            only); infeasibility is not proven. ``v``, ``p`` and ``min_margin`` hold the
            best attempt.
        ``"failed"``
            Every v-step engine broke down at the starts; nothing is said about the problem.
    message : str
    R : float
        The radius of the ball on p.
    p_norm : float
        ``||p||`` (at most R).
    min_margin : float
        ``min_i y_i f(X_i; v, p)`` recomputed from the dense v and p in float64; at least
        ``1 - feas_tol`` when ``solution_present``.
    attention : ndarray of shape (n_samples, n_tokens) or None
        ``softmax(X_i p)``.
    selected_token : ndarray of int, shape (n_samples,) or None
        Argmax of each sample's attention.
    start : str or None
        Name of the winning start (of the best attempt with ``"no_feasible_point_found"``):
        the heuristic that found the point returned. With ``certify``, ``"lb_selection"``
        alone in ``start_norms`` is the root heuristic that closed the gap (LB's selection
        realised and polished; no other start ran).
    start_norms : dict
        Final ``||v||`` of every start run as its v-step computed it, ``sqrt(c^T K c)`` in the
        kernel form (inf when infeasible there); starts the time limit left unrun are
        missing. ``norm`` is the returned v's own norm, which agrees with the winning start's
        entry to rounding (to about 1e-5 relative on near-singular token Grams).
    nit : int
        Accepted p-steps of the winning start (scipy's name).
    history : dict
        Per iteration of the winning start: ``"norm"`` (``||v*(p)||``) and ``"pg_norm"``
        (projected gradient norm of phi).
    form : str
        ``"kernel"`` or ``"dense"``.
    solve_time : float
        Wall-clock seconds, including certification.
    bound : LowerBoundResult or None
        The full lower-bound result when one was computed (``certify=True``, or to try to
        prove infeasibility when no start found a feasible point).
    vstep_fallbacks : int
        v-step solves of the descent where the LDP engine raised or was inaccurate and another
        engine (ECOS, then Clarabel) stood in; the message then names the last failure.
    certified : bool
        True iff a proof backs the answer: ``"optimal"`` (gap within ``gap_tol``) or
        ``"infeasible"``.
    gap_tol, feas_tol : float
        The tolerances the status was decided with.
    nodes : int
        SVMs of the bound's branch-and-bounds (LB's over token sets and the finite-R box
        searches; ``bound.nodes``), 0 without a bound.
    work : int
        ``nodes`` plus the exact v-step solves of every descent and polish run (their
        ``n_eval``; the polish's linearised SVMs and the realisations' attention SVMs are
        not counted): a count of the solve's work, the same on any machine and load.
    radius_hint : RadiusHint or None
        When no interpolator was found at R (``"no_feasible_point_found"``, or ``"infeasible"``
        proven at this R only), what would help: the smallest R at which continuation in R
        found one, or that none was found within its budget
        (:func:`margin_solver.minnorm.radius.radius_hint`); with ``"infeasible"`` proven for
        every R, that proof (finding ``"none_exists"``). None when a feasible point is
        attached. The message ends with it.
    repaired : bool
        True when the descent's v fell short of ``min_margin >= 1 - feas_tol`` in the dense
        recomputation and was rescaled by ``1 / min_margin`` (a feasible point with a
        proportionally larger norm; the message gives both norms).
    normalized_margin : float
        ``min_margin / norm`` (property): the geometric margin of the max-margin problem
        (``||v|| <= 1``), ``1 / norm`` up to ``feas_tol`` when ``solution_present``.
    classes : ndarray of shape (2,)
        The user's two labels in sign order, as scikit-learn's ``classes_``: ``classes[0]``
        is -1 and ``classes[1]`` is +1 in the solve (e.g. ``['cat', 'dog']``; -1 and +1
        when the labels were signs). :meth:`predict` answers in these labels.

    Deprecated names (one release; docs/usage.md, "Result vocabulary"): ``margin`` (was
    ``1 / norm``; use ``normalized_margin``), ``n_iter`` (use ``nit``).
    """

    v: np.ndarray | None
    p: np.ndarray | None
    norm: float
    lower_bound: float | None
    gap: float
    status: str
    message: str
    R: float
    p_norm: float
    min_margin: float
    attention: np.ndarray | None
    selected_token: np.ndarray | None
    start: str | None
    start_norms: dict[str, float]
    nit: int
    history: dict[str, list[float]] = field(default_factory=dict)
    form: str = "kernel"
    solve_time: float = 0.0
    bound: LowerBoundResult | None = None
    vstep_fallbacks: int = 0
    certified: bool = False
    gap_tol: float = DEFAULT_GAP_TOL
    feas_tol: float = FEAS_TOL
    repaired: bool = False
    nodes: int = 0
    work: int = 0
    radius_hint: RadiusHint | None = None
    classes: np.ndarray = field(default_factory=sign_classes)

    @property
    def normalized_margin(self) -> float:
        """``min_margin / norm``, as :attr:`GDResult.normalized_margin`."""
        return self.min_margin / self.norm if self.norm > 0 else math.nan


@verbose_switch
def solve_min_norm(
    X: Any,
    y: Any = None,
    R: Any = None,
    *,
    certify: bool = False,
    form: str = "auto",
    n_random_starts: int = 2,
    seed: int | None = 0,
    max_iter: int = 500,
    gtol: float = 1e-6,
    rtol: float = 1e-7,
    bound_method: str = "auto",
    bound_time_limit: float = math.inf,
    progress: bool = False,
    options: Mapping[str, Any] | None = None,
    gap_tol: float = DEFAULT_GAP_TOL,
    time_limit: float = math.inf,
    p0: Any = None,
    search_starts: int | None = None,
) -> MinNormResult:
    """Approximately solve P_R by alternating v-steps with projected quasi-Newton p-steps.

    Check every input once (``options`` into the strategy table); prove infeasibility when two
    samples share their tokens with opposite labels; with ``certify``, compute the
    hard-selection bound LB first and realise and polish its best selection (the root
    heuristic: when that point meets LB within ``gap_tol`` it is returned certified and
    nothing below runs, neither the first starts, ``p0`` included, nor the search);
    descend from the first starts; search further when they
    leave a gap; with ``certify``, bound the best point at this R (and descend from a better
    point the bound finds); return the best feasible point with its status. docs/theory.md,
    "The solve: starts, search and certificate", describes the starts and the search's rules.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, n_features) or Dataset
        Training tokens; a :class:`~margin_solver.core.data.Dataset` supplies its own ``y``
        (then leave ``y`` as None). A Dataset with tokens on disk (a dataset directory,
        :mod:`margin_solver.core.ondisk`) runs in the kernel form with the passes over X in blocks
        (:mod:`margin_solver.core.ooc`; on Dask inside ``ooc.execution(scheduler=...)``).
    y : array-like of shape (n_samples,), optional
        Any two labels (numbers, booleans or strings; read once by
        :func:`margin_solver.core.validation.encode_labels`: the larger is +1);
        required unless ``X`` is a Dataset.
    R : float
        Radius of the ball ``||p|| <= R`` (positive, finite). Scores ``X_i p`` are of order
        ``R * ||x||``; for the paper's data (noise tokens of norm about ``sigma sqrt(d)``)
        ``R = 1 / sqrt(d)`` gives soft attention and ``R = 100 / sqrt(d)`` nearly hard
        selection.
    certify : bool, default=False
        Also compute a proven lower bound on P_R at this R (the finite-R bound of
        :func:`margin_solver.bounds.lower.global_lower_bound`) and the relative gap; only a
        certified result can have status ``"optimal"`` (without it the best status is
        ``"local_optimal"``).
    form : {"auto", "kernel", "dense"}, default="auto"
        ``"kernel"`` works on the token Gram matrix (per-iteration cost independent of d),
        ``"dense"`` on vectors of R^d; ``"auto"`` picks kernel when ``d > n T`` or when its
        trial points cost fewer multiply-adds
        (:func:`margin_solver.descent.alternating.kernel_trials_cheaper`: about when
        ``d > 4 T^2``). Both build the (nT, nT) token Gram matrix once, for the selection
        starts and the bound.
    n_random_starts : int, default=2
        Random starts in addition to the deterministic ones, drawn one at a time (any
        count: memory does not grow with it, and ``time_limit`` stops them).
    seed : int or None, default=0
        Seed of the random starts (numpy Generator).
    max_iter : int, default=500
        Cap on accepted p-steps per start.
    gtol, rtol : float, default=1e-6, 1e-7
        Stopping tolerances of :func:`margin_solver.descent.alternating.descend`: relative projected
        gradient norm, and relative decrease of phi = ||v||^2 / 2 over 10 steps.
    bound_method : {"auto", "enumerate", "bnb"}, default="auto"
        Method of the lower bound (with ``certify``).
    bound_time_limit : float, default=inf
        A guard on the lower bound (with ``certify``, or when it is run to try to prove
        infeasibility), in seconds of the bound's own stages: LB before the starts and the
        finite-R stages after the search (the starts' seconds do not count). The bound's
        stages have budgets of work (SVMs, ascent steps, solver iterations:
        :func:`margin_solver.bounds.lower.global_lower_bound`), so that the answer is the
        same on any machine; this guard only stops them early, between nodes or steps, and
        then the bound proven so far is used and the status is ``"time_limit"`` unless that
        bound certifies the point. It changes nothing while it does not act. The Lagrangian
        bound's set-up (cvxpy's compilation, about 1 s at n = 40) cannot be cut short and
        may overrun it.
    progress : bool, default=False
        Show progress bars on stderr: LB's, one over the starts (with the best norm so far),
        then the finite-R bound's.
    options : mapping, optional
        Fields of the strategy table (:class:`margin_solver.core.strategy.Strategy`: every
        gate, budget and tuning number of the solve; docs/decisions.md says how each default
        was chosen), for benchmarks and experts; unknown keys and bad values raise. E.g.
        ``{"search_ideas": ("selection", "screen")}`` keeps two families of the search,
        ``{"screen_top": 2}`` descends two screened starts. The descent's keys:

        ``"memory"`` (30: L-BFGS pairs kept; 0 takes projected-gradient directions only),
        ``"use_bb"`` (True: Barzilai-Borwein trial lengths), ``"window"`` (10: steps of the
        ``rtol`` test), ``"vstep_solver"`` ("active": the dual active set warm-started from
        the previous v-step's duals; "ldp", "ecos" or "clarabel": the engine tried first),
        ``"sqp"`` (True: support-aware SQP steps after ``"sqp_after"``, 250,
        quasi-Newton steps; docs/theory.md, "Support-aware SQP step").

        ``{"memory": 0, "use_bb": False, "sqp": False}`` is the plain projected-gradient
        method that the quasi-Newton descent replaced (docs/decisions.md, "Quasi-Newton
        direction for the P_R descent"). ``"newton"`` (Newton steps, removed) warns with a
        DeprecationWarning and is ignored.
    gap_tol : float, default=1e-4 (:data:`DEFAULT_GAP_TOL`)
        Largest relative gap ``(norm - lower_bound) / norm`` for which a feasible point is
        certified ``"optimal"`` (the default of mixed-integer solvers, e.g. Gurobi's
        MIPGap; docs/statuses.md says how it was chosen and when to raise it).
    time_limit : float, default=inf
        A guard on the whole call (set-up, lower bound, starts, descents), in seconds: the
        token Gram product is checked between its blocks, and an attention SVM that the
        guard predicts cannot finish in time is not started (the other starts still run;
        :mod:`margin_solver.core.guard`). Every stage
        has a budget of work, so that the answer is the same on any machine; this guard
        only stops the call early: on expiry the best feasible point so far is returned
        with status ``"time_limit"`` (unless it is certified ``"optimal"``), or
        ``"no_feasible_point_found"`` saying the time limit stopped the search; the message
        names the guard that acted. It changes nothing while it does not act. The bound's
        stages stop at it too (and at ``bound_time_limit``, whichever comes first).
    p0 : array-like of shape (n_features,), optional
        A warm start (e.g. a gradient-descent endpoint), run first (after the selection
        starts when attention is nearly hard) as the start ``"p0"``: its
        projection on the span of the tokens (same scores), rescaled onto the ball when
        longer than R.
    search_starts : int, optional
        Further starts of :func:`margin_solver.minnorm.search.search_starts` after the first ones;
        the search stops early once the norm meets the lower bound (``certify``). None
        (default): the table's ``auto_search_starts`` (8) when certified with an open gap,
        when d <= n T, or when the first starts disagree, else none (docs/theory.md, "The
        solve: starts, search and certificate"). 0 turns the search off. A larger number is
        a more patient search: more turns of the families, and a screen
        ``search_starts / auto_search_starts`` times larger
        (:func:`margin_solver.minnorm.search.search_starts`, ``screen_scale``).

    Returns
    -------
    MinNormResult
        Failure statuses (``success`` False) also warn with
        :class:`margin_solver.core.results.ConvergenceWarning`.

    Raises
    ------
    InvalidInputError
        On malformed X or y, a missing, non-positive or non-finite R, bad options
        (including unknown ``options`` keys), a ``gap_tol`` outside (0, 1), a non-positive
        ``time_limit``, or a ``p0`` that is not a finite vector of length n_features.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> ds = PaperDistribution(d=100, snr=0.5, eta=0.0).sample(8, seed=0)
    >>> res = solve_min_norm(ds, R=10.0, certify=True)
    >>> res.status, res.certified, res.min_margin >= 1 - 1e-7, res.gap < 1e-3
    ('optimal', True, True, True)
    >>> solve_min_norm(ds, R=10.0).status  # the same point, but nothing proves it
    'local_optimal'
    """
    solve = _Solve(
        X, y, R, certify, form, n_random_starts, seed, max_iter, gtol, rtol, bound_method,
        bound_time_limit, progress, options, gap_tol, time_limit, p0, search_starts,
    )  # fmt: skip
    with active(solve.guard):
        result = _drive(solve)
    result.classes = solve.classes  # the steps' results are in signs; the user sees labels
    return _warn(result)


def _drive(solve: _Solve) -> MinNormResult:
    """The steps of :func:`solve_min_norm` in order, until one proves infeasibility."""
    # the set-up's token Gram product, stopped by the time limit, or a proof
    proof = solve.setup() or solve.conflicting_samples()
    if proof is not None:
        return proof
    with single_threaded_blas():
        for step in (
            solve.hard_bound,
            solve.root_heuristic,
            solve.first_starts,
            solve.search,
            solve.finite_r_bound,
        ):
            proof = step()  # a proof of infeasibility ends the solve
            if proof is not None:
                return proof
    return solve.best()


class _Solve:
    """One call of :func:`solve_min_norm`: its checked inputs and the runs so far, with one
    method per step of the driver (each returns a result only when it proves infeasibility).
    """

    def __init__(
        self,
        X,
        y,
        R,
        certify,
        form,
        n_random_starts,
        seed,
        max_iter,
        gtol,
        rtol,
        bound_method,
        bound_time_limit,
        progress,
        options,
        gap_tol,
        time_limit,
        p0,
        search_starts,
    ):
        self.start_time = time.perf_counter()
        X, y, self.classes = _inputs(X, y)
        if R is None:
            raise InvalidInputError("R (the radius of the ball ||p|| <= R) is required.")
        self.R = check_radius(R)
        _check_choices(form, n_random_starts, max_iter)
        if search_starts is not None:
            check_int(search_starts, "search_starts", 0)
        self.seed = check_seed(seed)
        gtol, rtol = check_positive(gtol, "gtol"), check_positive(rtol, "rtol")
        self.gap_tol = check_gap_tol(gap_tol)
        self.time_limit = check_positive(time_limit, "time_limit", allow_inf=True)
        self.deadline = self.start_time + self.time_limit
        self.strategy = strategy_from(options)
        # every descent's keywords (the strategy carries its knobs)
        self.descent = {
            "max_iter": max_iter,
            "gtol": gtol,
            "rtol": rtol,
            "strategy": self.strategy,
            "deadline": self.deadline,
        }
        if bound_method not in BOUND_METHODS:
            raise InvalidInputError(
                f"Unknown bound_method {bound_method!r}; expected one of {list(BOUND_METHODS)}."
            )
        self.bound_method = bound_method
        self.bound_time_limit = check_positive(bound_time_limit, "bound_time_limit", allow_inf=True)
        n, T, d = X.shape
        self.p0 = None if p0 is None else check_vector(p0, d, "p0")
        if is_on_disk(X) and form == "dense":
            raise InvalidInputError(
                "form='dense' needs the tokens in memory; tokens on disk run in the kernel form "
                "(form='auto' or 'kernel')."
            )
        self.X, self.y, self.T = X, y, T
        self.certify, self.progress = certify, progress
        self.n_random_starts, self.search_starts = n_random_starts, search_starts
        self.dependent = d <= n * T  # linearly dependent tokens: the search always runs
        self.tol = (self.gap_tol, FEAS_TOL)
        self.use_kernel = form == "kernel" or (
            form == "auto" and (d > n * T or is_on_disk(X) or kernel_trials_cheaper(n, T, d))
        )
        self.guard = Guard(self.deadline, clock=lambda: time.perf_counter())
        self.gram: TokenGram | None = None  # set up by setup()
        self.bound: LowerBoundResult | None = None
        self.starts: list = []
        self.runs: dict[str, DescentRun] = {}
        self.start_norms: dict[str, float] = {}
        self.feasible: dict[str, DescentRun] = {}
        self.failed: list[DescentRun] = []
        self.search_cut = False
        self.guide_cut = False
        # selection -> (its realisation, its polish or None), shared by the root heuristic
        # and the first starts
        self.realised: dict[tuple[int, ...], tuple] = {}
        # the root heuristic's point meets LB within gap_tol: no first start, no search
        self.closed = False
        # SVMs of a root certificate that did not close (counted in the work, not the bound)
        self.root_nodes = 0
        # the finite-R stages that certified the root heuristic's point (None: LB did)
        self.closed_by: str | None = None

    @cached_property
    def first(self) -> Any:
        """The hard-selection alternation from the first GD step's selection
        (:func:`margin_solver.bounds.lower.first_selection`: the ``hard_selection`` start, LB's
        first incumbent, the search's guide), computed when a step first needs it: a solve
        from the zero start alone without search or bound does not (1.0 of 12.5 s of an MNIST
        classifier fit at n = 500, cProfile)."""
        return first_selection(self.H, self.y, self.T)

    def setup(self) -> MinNormResult | None:
        """The token Gram product (in blocks, under the time limit) and the form; when the
        time limit stops the product, the result that says so (no start was run)."""
        if self.certify:  # the finite-R bound's SDP solver, before anything else
            n, T, _ = self.X.shape
            limit = min(self.time_limit, self.bound_time_limit)
            import_sdp_solver_first(n, T, self.strategy, limit)
        try:
            self.gram = TokenGram(self.X, self.guard)
        except TimeLimitReached as stop:
            return self._stopped_in_setup(stop)
        self.H = self.gram.H
        self.form = KernelForm(self.X, self.gram) if self.use_kernel else DenseForm(self.X)
        return None

    def _stopped_in_setup(self, stop: TimeLimitReached) -> MinNormResult:
        """The result when the time limit stopped a stage of the set-up (the token Gram
        product, its symmetry check, the conflict screen): no start was run."""
        name = "kernel" if self.use_kernel else "dense"
        why = (
            f"no feasible point found: the time limit (time_limit={self.time_limit:g} s) "
            f"stopped the solve during its set-up, in {stop.stage}; no start was run"
        )
        return _no_point(
            self.R, name, NO_FEASIBLE_POINT_FOUND, why, None, self.start_time, self.tol
        )

    def conflicting_samples(self) -> MinNormResult | None:
        """``infeasible`` when two samples have the same tokens and opposite labels."""
        # after the Gram product, which screens the samples to compare (none on most data)
        try:
            conflicts = conflicting_pairs(self.X, self.y, self.H, self.guard)
        except TimeLimitReached as stop:
            return self._stopped_in_setup(stop)
        if not conflicts:
            return None
        i, j = conflicts[0]
        why = (
            f"proven infeasible: samples {i} and {j} have the same tokens (in some order) and "
            f"opposite labels, so f(X_{i}; v, p) = f(X_{j}; v, p) for every (v, p) and R"
            + (f" ({len(conflicts)} such pairs)" if len(conflicts) > 1 else "")
        )
        result = _no_point(self.R, "dense", INFEASIBLE, why, None, self.start_time, self.tol)
        result.radius_hint = proven_none(self.R, why)
        return result

    def _bound_seconds(self, spent: float = 0.0) -> float:
        """The bound's guard: what is left of ``bound_time_limit`` after ``spent`` seconds of
        the bound, and no more than the time left (inf unless the caller set a limit)."""
        return max(min(self.bound_time_limit - spent, self.deadline - time.perf_counter()), 0.0)

    def _lower_bound(self) -> LowerBoundResult:
        """LB (its budget of SVMs) under the bound's guard."""
        limit = self._bound_seconds()
        return trusted_lower_bound(
            self.H,
            self.y,
            self.T,
            self.bound_method,
            limit,
            self.progress,
            time.perf_counter(),
            first=self.first,
            X=self.X,
            strategy=self.strategy,
        )

    def _infeasible(self, why: str, every_R: bool = True) -> MinNormResult:
        """``infeasible`` with its proof ``why``: for every R (``every_R``), else at this R
        only, and then what a larger R gives (:meth:`_hint`)."""
        result = _no_point(
            self.R, self.form.name, INFEASIBLE, why, self.bound, self.start_time, self.tol
        )
        if every_R:
            result.radius_hint = proven_none(self.R, why)
        else:
            self._hint(result)
        return result

    def _hint(self, result: MinNormResult) -> None:
        """Attach to ``result`` what would help at a larger R (continuation in R)."""
        hint = radius_hint(
            self.form, self.y, self.R, self.runs, self.strategy, deadline=self.deadline
        )
        result.radius_hint = hint
        result.message += f"; what would help: {hint.message}"

    def hard_bound(self) -> MinNormResult | None:
        """With ``certify``, LB before the starts: its proof of infeasibility, its selection
        as a start, its value to stop the search (the finite-R stages come after it). Not
        begun when the time limit passed during the set-up (no stage begins after it)."""
        if time.perf_counter() > self.deadline:
            return None
        if not self.certify:
            return None
        self.bound = self._lower_bound()
        if self.bound.status == INFEASIBLE:
            return self._infeasible(_infeasibility_proof(self.bound))
        return None

    def root_heuristic(self) -> None:
        """With ``certify``, LB's best selection realised and, when its attention is nearly
        hard, polished (the ``lb_selection`` start, run before the others): when that point,
        recomputed in float64 as it will be returned, is feasible and within ``gap_tol`` of
        LB, it is certified, and neither the first starts nor the search run (they could
        win no more than the certificate allows). When LB leaves the gap open, the finite-R
        stages whose work LB's bounds (linearised, soft-selection; ``root=True``) are tried
        against the point, and certify it the same way when they close the gap. The bound's
        search and the point come from one branch-and-bound: LB's incumbent selection is the
        point's selection.

        A soft realisation is left to the first starts (its descent there depends on the
        norms of the starts before it)."""
        bound = self.bound
        if bound is None or bound.selection is None or time.perf_counter() > self.deadline:
            return None
        key = selection_key(bound.selection)
        with ProgressBar(self.progress, total=1, desc="P_R root heuristic", unit="start") as bar:
            if key not in self.realised:
                try:
                    self.realised[key] = _settle(
                        self.form, self.H, self.y, self.T, bound.selection, self.R, self.descent
                    )
                except TimeLimitReached as stop:  # the first starts say so in the message
                    logger.info("time limit: %s", stop.stage)
                    return None
            run = self.realised[key][1]
            if run is None or not run.point.feasible:
                bar.update(1, best="not nearly hard" if run is None else "infeasible")
                return None
            *_, norm, min_margin, repair = _dense_point(
                self.X, self.y, self.form, run.point, FEAS_TOL
            )
            gap = (norm - bound.value) / norm
            bar.update(1, bound=f"{bound.value:.6g}", best=f"{norm:.6g}", gap=f"{gap:.2e}")
        if repair or min_margin < 1 - FEAS_TOL:
            return None
        if gap > self.gap_tol:
            # the finite-R stages whose work LB's bounds (linearised, soft-selection) against
            # this point: at nearly hard attention they can close what LB leaves open
            root = _finite_r_bound(
                self.H,
                self.y,
                self.T,
                self.R,
                bound,
                {"lb_selection": run},
                self.bound_method,
                self._bound_seconds(bound.solve_time),
                self.gap_tol,
                False,
                self.strategy,
                root=True,
            )
            if (norm - root.value) / norm > self.gap_tol:
                self.root_nodes = root.nodes - bound.nodes
                return None
            self.bound, self.closed_by = root, root.method
        self.closed = True
        self.runs = {"lb_selection": run}
        self.start_norms = {"lb_selection": run.norm}
        self.feasible = dict(self.runs)
        logger.info(
            "root heuristic lb_selection: ||v|| = %.6g, within gap_tol of the bound (%s)",
            run.norm,
            self.bound.method,
        )
        return None

    def _run(self, more: list) -> None:
        """Run the starts ``more`` after the others (no progress bar)."""
        with ProgressBar(False) as bar:
            extra, extra_norms = _run_starts(
                self.form, self.H, self.y, self.T, self.R, more, self.descent, bar
            )
        self.runs.update(extra)
        self.start_norms.update(extra_norms)
        self.feasible = {k: r for k, r in self.runs.items() if r.point.feasible}

    def first_starts(self) -> MinNormResult | None:
        """Descend from the first starts; when none is feasible, LB's proof of infeasibility
        or its selection as one more start. Not run when the root heuristic closed the gap."""
        if self.closed:
            return None
        names = self.strategy.first_starts
        # the hard-selection alternation is not begun once the time limit has passed
        late = time.perf_counter() > self.deadline
        first = self.first if "hard_selection" in names and not late else None
        self.starts = _starts(self.form, self.H, self.y, self.T, first, self.bound, names)
        if self.p0 is not None:
            self.starts.insert(
                0, ("p0", _warm_start(self.form, self.gram, self.X, self.p0, self.R), None)
            )
        # drawn one at a time: n_random_starts may be any count (time_limit stops them)
        randoms = _random_starts(self.form, self.y, self.T, self.R, self.n_random_starts, self.seed)
        total = len(self.starts) + self.n_random_starts
        with ProgressBar(self.progress, total=total, desc="P_R starts", unit="start") as bar:
            self.runs, self.start_norms = _run_starts(
                self.form,
                self.H,
                self.y,
                self.T,
                self.R,
                self.starts,
                self.descent,
                bar,
                randoms,
                self.realised,
            )
        self.feasible = {k: r for k, r in self.runs.items() if r.point.feasible}
        self.failed = [r for r in self.runs.values() if r.point.vstep.broke_down]
        if self.feasible or self.failed or self.bound is not None:
            return None
        if time.perf_counter() > self.deadline:  # LB would first evaluate its root node
            return None
        self.bound = self._lower_bound()
        if self.bound.status == INFEASIBLE:
            return self._infeasible(_LB_INFEASIBLE)
        if self.bound.selection is not None and time.perf_counter() <= self.deadline:
            self._run([("lb_selection", None, self.bound.selection)])
        return None

    def search(self) -> None:
        """Further starts when the first ones leave a gap (:func:`_search_budget`); when they
        agree on a small instance, LB's selection when it is better (the ``lb_selection``
        start of :func:`_agreeing_starts_selection`). Not run when the root heuristic closed
        the gap."""
        if self.closed:
            return None
        strategy, n = self.strategy, len(self.y)
        budget = _search_budget(
            self.search_starts, self.start_norms, self.bound, self.dependent, strategy
        )
        if (
            not budget
            and self.search_starts is None
            and self.bound is None
            and self.feasible
            and n <= strategy.screen_min_samples
            and time.perf_counter() <= self.deadline
        ):
            selection, self.guide_cut = _agreeing_starts_selection(
                self.H,
                self.y,
                self.T,
                self.runs,
                self.feasible,
                self.first,
                self.deadline,
                strategy,
            )
            if selection is not None:
                self._run([("lb_selection", None, selection)])
        # a search with turns to run that the deadline left out, or stopped
        self.search_cut = bool(budget) and time.perf_counter() > self.deadline
        if not budget or self.search_cut:
            return None
        # run, or ended where an earlier start's polish ended (not its nearest realisable)
        realised = [
            s
            for name, _, s in self.starts
            if s is not None and math.isfinite(self.start_norms.get(name, math.inf))
        ]
        hard = _hard_spread(
            self.search_starts,
            self.start_norms,
            self.bound,
            self.dependent,
            self.H,
            self.y,
            self.T,
            self.feasible,
            strategy,
        )
        self.search_cut = _search(
            self.form,
            self.H,
            self.y,
            self.T,
            self.R,
            self.runs,
            self.start_norms,
            self.bound,
            realised,
            self.descent,
            budget,
            self.seed,
            self.deadline,
            self.first,
            hard,
            self.gap_tol,
        )
        self.feasible = {k: r for k, r in self.runs.items() if r.point.feasible}
        return None

    def finite_r_bound(self) -> MinNormResult | None:
        """With ``certify``, the finite-R stages against the best point; a better point the
        bound's branch-and-bound found is descended (its norm can only fall). Not run again
        when the root heuristic's point was certified by them."""
        if not self.certify or self.bound is None:  # None: the time limit passed first
            return None
        if self.bound.bound_kind == FINITE_R:
            return None
        self.bound = _finite_r_bound(
            self.H,
            self.y,
            self.T,
            self.R,
            self.bound,
            self.feasible,
            self.bound_method,
            self._bound_seconds(self.bound.solve_time),
            self.gap_tol,
            self.progress,
            self.strategy,
        )
        if self.bound.status == INFEASIBLE:
            proof = _infeasibility_proof(self.bound)
            return self._infeasible(proof, every_R=proof == _LB_INFEASIBLE)
        if self.bound.point is not None:
            more = [("bound_point", _bound_point(self.form, self.X, self.bound.point), None)]
            self._run(more)
            self.starts += more
        return None

    def best(self) -> MinNormResult:
        """The best feasible point with its status, or the result that says why none."""
        runs, start_norms, feasible = self.runs, self.start_norms, self.feasible
        skipped = [name for name, *_ in self.starts if name not in start_norms]
        random_run = sum(name.startswith("random_") for name in start_norms)
        # when the root heuristic closed the gap, the random starts were left out by design,
        # not by a time limit
        n_random = 0 if self.closed else self.n_random_starts
        n_first = len(self.starts) + n_random
        not_run = len(skipped) + n_random - random_run
        if random_run < n_random:
            skipped.append(_random_names(random_run, n_random))
        guard = _guard_that_acted(
            bool(skipped)
            or self.search_cut
            or self.guide_cut
            or any(r.status == TIME_LIMIT for r in runs.values()),
            self.bound is not None and self.bound.status == TIME_LIMIT,
            time.perf_counter() > self.deadline,
            self.time_limit,
            self.bound_time_limit,
        )
        if feasible:
            name = min(feasible, key=lambda k: feasible[k].norm)
            result = _result(
                self.X,
                self.y,
                self.R,
                self.form,
                name,
                feasible[name],
                start_norms,
                self.bound,
                self.start_time,
                self.tol,
                guard,
            )
        elif self.failed:  # every v-step engine broke down: that says nothing about feasibility
            why = f"the v-step failed at a start point; {self.failed[0].reason}"
            result = _no_point(
                self.R, self.form.name, FAILED, why, self.bound, self.start_time, self.tol
            )
            result.start_norms = start_norms
        else:
            result = _no_feasible_point(
                self.X, self.y, self.R, self.form, runs, self.bound, self.start_time, self.tol
            )
            if guard is not None:
                what = []
                if skipped:
                    what.append(f"{not_run} of {n_first} first starts not run")
                if self.search_cut:
                    what.append("the search for further starts cut short")
                result.message += f"; {guard} stopped the search"
                if what:
                    result.message += f": {', '.join(what)}"
            result.start_norms = start_norms
            self._hint(result)
        if skipped and feasible:
            result.message += f"; starts not run (time limit): {', '.join(skipped)}"
        if self.search_cut and feasible:
            result.message += "; the time limit stopped the search for further starts"
        if self.closed:
            met = "LB" if self.closed_by is None else f"the finite-R bound ({self.closed_by})"
            result.message += (
                f"; the root heuristic (LB's selection realised and polished) met {met} within "
                "gap_tol: no further start or search was run"
            )
        result.vstep_fallbacks, note = _fallback_note(runs)
        result.message += note
        result.nodes = 0 if self.bound is None else self.bound.nodes
        result.work = result.nodes + self.root_nodes + sum(run.n_eval for run in runs.values())
        result.solve_time = time.perf_counter() - self.start_time
        return result


def _finite_r_bound(
    H, y, T, R, hard_bound, feasible, method, seconds, gap_tol, progress, strategy, root=False
) -> LowerBoundResult:
    """The finite-R bound's stages after LB (``hard_bound``, computed before the starts)
    against the best of the ``feasible`` runs, each stage with its budget of work, under the
    guard of ``seconds`` from now; LB itself when T = 1. Its ``solve_time`` includes LB's.
    ``root``: only the stages whose work LB's bounds (the root heuristic's certificate)."""
    if feasible:
        best = min(feasible.values(), key=lambda run: run.norm)
        incumbent = best.norm, np.argmax(best.point.attention, axis=1)
    else:
        incumbent = math.inf, None
    bound = trusted_lower_bound(
        H,
        y,
        T,
        method,
        seconds,
        progress,
        time.perf_counter(),
        R=R,
        gap_tol=gap_tol,
        hard_bound=hard_bound,
        incumbent=incumbent,
        strategy=strategy,
        root=root,
    )
    if bound is not hard_bound:
        bound.solve_time += hard_bound.solve_time
    return bound


def _guard_that_acted(
    call_cut: bool,
    bound_cut: bool,
    past_deadline: bool,
    time_limit: float,
    bound_time_limit: float,
) -> str | None:
    """The caller's guard that stopped something (for the status ``"time_limit"`` and the
    message), else None: ``time_limit`` when it cut the starts, the search or the bound
    (the bound's clock passed the call's deadline), ``bound_time_limit`` when only the bound
    was cut before that deadline."""
    if call_cut or (bound_cut and past_deadline):
        return f"the time limit (time_limit={time_limit:g} s)"
    if bound_cut:
        return f"the bound's time limit (bound_time_limit={bound_time_limit:g} s)"
    return None


def _infeasibility_proof(bound: LowerBoundResult) -> str:
    """The proof behind an ``infeasible`` bound, naming the bound that gave it: LB (valid for
    every R) or the finite-R branch-and-bound (valid at this R only)."""
    if bound.bound_kind == FINITE_R and "bnb" in bound.method.split("+"):
        return (
            f"proven infeasible at R = {bound.R:.6g}: the finite-R bound's branch-and-bound "
            "certified every node infeasible (no attention reachable with ||p|| <= R lets a v "
            "interpolate the data); the hard-selection bound LB did not prove infeasibility, "
            "so a larger R may interpolate"
        )
    return _LB_INFEASIBLE


def _warn(result: MinNormResult) -> MinNormResult:
    """Warn (at solve_min_norm's caller) when the status is a failure."""
    if not result.success:
        warnings.warn(
            f"solve_min_norm returned status {result.status!r}: {result.message}",
            ConvergenceWarning,
            stacklevel=4,
        )  # 4: past the verbose_switch wrapper
    return result


def _bound_point(form, X: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """The p of a bound's token coefficients (``p = sum_it c_it x_it``) in ``form``."""
    if isinstance(form, KernelForm):
        return form.from_coefficients(coefficients)
    return TokenGram.materialize(X, coefficients)


def _warm_start(form, gram: TokenGram, X: np.ndarray, p0: np.ndarray, R: float) -> np.ndarray:
    """``p0`` projected on the span of the tokens, rescaled onto the ball when longer than R.

    Scores ``X_i p`` see only the projection, so it is found from them: coefficients c with
    ``H c = X p0`` (least squares on the token Gram matrix; exact since ``X p0`` lies in the
    range of H) give ``p = X^T c``, the projection, in either form.
    """
    n, T, d = X.shape
    scores = X.reshape(n * T, d) @ p0
    c = scipy.linalg.lstsq(gram.H, scores, lapack_driver="gelsy")[0]
    p = form.from_coefficients(c.reshape(n, T))
    length = norm(form, p)
    return p * (R / length) if length > R else p


def _fallback_note(runs: dict[str, DescentRun]) -> tuple[int, str]:
    """Number of v-step solves that fell back from the LDP engine, and a message suffix."""
    count = sum(run.fallbacks for run in runs.values())
    if not count:
        return 0, ""
    last = next(r.last_fallback for r in reversed(runs.values()) if r.fallbacks)
    return count, f"; {count} v-step solve(s) fell back to another engine (last: {last})"


def _run_starts(
    form, H, y, T, R, starts, descent, bar, randoms=(), realised=None
) -> tuple[dict[str, DescentRun], dict[str, float]]:
    """Descend from every start of ``starts``, then of the iterable ``randoms``; a start
    repeating an earlier selection reuses its norm.

    Selections are realised here, after that check, since each realisation is an SVM with
    n (T - 1) constraints (a third of the whole solve's time at n = 100, T = 4). Once
    ``descent["deadline"]`` has passed the remaining starts are not run (not in the norms),
    and a selection start whose attention SVM the time limit predicts it cannot finish
    (:func:`margin_solver.svm.selection.attention_svm`) is not run either, while the others
    still are.

    The first selection start is realised before any descent: when its realisation is
    nearly hard (:func:`margin_solver.minnorm.search.settled_run` polishes it by linearised SVM
    steps instead of descending), the attention is nearly hard at this R: the selection
    starts run first, a selection start on the selection an earlier polish ended on reuses
    that start's norm, and every other start descends by
    :func:`margin_solver.minnorm.search.hard_descend`, which stops once its nearly hard samples'
    selection cannot beat the best norm so far, or switches to the polish (docs/theory.md,
    "Nearly hard attention"). ``realised`` caches :func:`_settle` by selection (the root
    heuristic's realisation of LB's selection is not computed twice).
    """
    runs: dict[str, DescentRun] = {}
    start_norms: dict[str, float] = {}
    seen: dict[tuple[int, ...], str] = {}
    realised = {} if realised is None else realised

    def realise(key, selection):
        """The realised start and its polish, or None when the time limit stops it."""
        if key not in realised:
            try:
                realised[key] = _settle(form, H, y, T, selection, R, descent)
            except TimeLimitReached as stop:
                logger.info("time limit: %s", stop.stage)
                return None
        return realised[key]

    first = next((s for _, _, s in starts if s is not None), None)
    hard = (
        first is not None
        and time.perf_counter() <= descent["deadline"]
        and (realise(selection_key(first), first) or (None, None))[1] is not None
    )
    if hard:  # their polished norms let the other starts stop early (hard_descend)
        starts = sorted(starts, key=lambda start: start[2] is None)
    for name, p0, selection in itertools.chain(starts, randoms):
        if time.perf_counter() > descent["deadline"]:
            break
        key = None if selection is None else selection_key(selection)
        if key in seen:
            start_norms[name] = start_norms[seen[key]]
        else:
            settled = None
            if key is not None:
                made = realise(key, selection)
                if made is None:  # not run (named in the message)
                    continue
                seen[key] = name
                p0, settled = made
            if p0 is None:
                start_norms[name] = math.inf
            else:
                best = min(start_norms.values(), default=math.inf)
                run = runs[name] = settled or (
                    hard_descend(form, H, y, T, p0, R, best, **descent)
                    if hard
                    else descend(form, y, p0, R, **descent)
                )
                start_norms[name] = run.norm
                if settled is not None and nearly_hard(run.point.attention, descent["strategy"]):
                    # a later start on the selection this polish ended on ends here too
                    seen.setdefault(selection_key(np.argmax(run.point.attention, axis=1)), name)
                logger.info(
                    "start %s: ||v|| = %.6g (%s, %d steps)", name, run.norm, run.reason, run.n_iter
                )
        bar.update(1, start=name, best=f"{min(start_norms.values(), default=math.inf):.6g}")
    return runs, start_norms


def _search_budget(
    search_starts, start_norms: dict[str, float], bound, dependent: bool, strategy: Strategy
) -> int:
    """Further starts to run: ``search_starts``, or the automatic rule when it is None."""
    if search_starts is not None:
        return search_starts
    if bound is not None or dependent:
        return strategy.auto_search_starts
    finite = [v for v in start_norms.values() if math.isfinite(v)]
    if (
        not finite  # no start ran (the time limit passed first) or none was feasible
        or len(finite) < len(start_norms)
        or max(finite) > min(finite) * (1 + strategy.spread_rtol)
    ):
        return strategy.auto_search_starts
    return 0


def _hard_spread(search_starts, start_norms, bound, dependent, H, y, T, feasible, strategy) -> bool:
    """True when the automatic search runs only because the first starts' norms spread, there
    are more than ``strategy.screen_min_samples`` samples, and the best start is nearly hard at
    its selection's SVM norm (:func:`margin_solver.minnorm.search.settled_value`).

    The spread then says which selections the starts ended in, and a nearly hard start ends
    near its selection's SVM norm, so the search screens selections by that norm alone
    (``hard=True``, selection family only) instead of computing LB's branch-and-bound and
    descending continuation and random starts.
    """
    if (
        search_starts is not None
        or bound is not None
        or dependent
        or len(y) <= strategy.screen_min_samples
        or not all(math.isfinite(v) for v in start_norms.values())
        or not feasible
    ):
        return False
    best = min(feasible.values(), key=lambda r: r.norm)
    return settled_value(H, y, T, best.point, strategy) is not None


def _search(
    form,
    H,
    y,
    T,
    R,
    runs,
    start_norms,
    bound,
    realised,
    options,
    budget,
    seed,
    deadline,
    first,
    hard=False,
    gap_tol=DEFAULT_GAP_TOL,
) -> bool:
    """Add the runs of :func:`margin_solver.minnorm.search.search_starts` to
    ``runs``/``start_norms`` (no new start after ``deadline``, a :func:`time.perf_counter` reading);
    True when the deadline stopped the search.

    ``bound``: the lower bound computed already (``certify``, or LB when no first start was
    feasible), else None and the search's guide is computed here (:func:`_search_guide`);
    its selection and incumbents are realised first. ``realised``: the selections the first
    starts realised and descended (not run again; a selection no p realises is not among
    them, so the search tries its nearest realisable one); ``hard``: only the selection
    family, screened by SVM norm (:func:`_hard_spread`). More random starts are left out when
    the first ones all ended far above the best (:func:`_retired_families`). The screen is
    skipped once the gap to the bound is at most ``gap_tol`` (certified: it could win no
    more than the certificate already allows)."""
    strategy = options["strategy"]
    feasible = [r for r in runs.values() if r.point.feasible]
    best = min(feasible, key=lambda r: r.norm) if feasible else None
    incumbents: list[np.ndarray] = []
    if bound is None and not hard:
        bound = _search_guide(H, y, T, runs, best, incumbents, deadline, first, gap_tol, strategy)
    if bound is not None and "lb_selection" in runs:
        realised = [*realised, bound.selection]
    lower = None if bound is None else bound.value
    selections = incumbents[::-1]
    if (
        bound is not None
        and bound.selection is not None
        and not any(np.array_equal(bound.selection, s) for s in selections)
    ):
        selections.insert(0, bound.selection)
    rng = np.random.default_rng(_search_seed(seed))
    search = _search_starts(
        form,
        H,
        y,
        T,
        R,
        best,
        lower_bound=lower,
        selections=selections,
        realised=realised,
        max_starts=budget,
        rng=rng,
        gap_rtol=strategy.search_gap_rtol,
        screen_gap_rtol=gap_tol,
        options={k: v for k, v in options.items() if k != "strategy"},
        hard=hard,
        ideas=("selection",) if hard else None,
        retired=_retired_families(runs, best, strategy),
        screen_scale=budget / strategy.auto_search_starts,
        strategy=strategy,
        time_limit=deadline - time.perf_counter(),
    )
    while True:
        try:
            name, run = next(search)
        except StopIteration as end:  # its value: stopped by the deadline
            return bool(end.value)
        except TimeLimitReached as stop:  # an attention SVM it could not finish in time
            logger.info("time limit: %s", stop.stage)
            return True
        runs[name] = run
        start_norms[name] = run.norm
        logger.info(
            "search start %s: ||v|| = %.6g (%s, %d steps)", name, run.norm, run.reason, run.n_iter
        )


def _agreeing_starts_selection(
    H, y, T, runs, feasible, first, deadline, strategy
) -> np.ndarray | None:
    """LB's best selection, for the ``lb_selection`` start, when the first starts agree (no
    search) on a small instance and its SVM norm is below their best point's, else None;
    and whether ``deadline`` (the caller's time limit) stopped that branch-and-bound.

    Agreeing starts can all end on one selection while a better one exists: on a generated
    instance (gaussian, n = 7, T = 3, d = 40, R sqrt(d) = 1e4) every first start ended at
    0.417-0.427 and LB's selection, realised, at 0.358 (the ``search_quality`` benchmark, two
    patient searches). Up to ``strategy.screen_min_samples`` samples
    LB's branch-and-bound (at most ``strategy.search_bound_nodes`` SVMs, counted) is cheap; its
    selection is realised only when its SVM norm is below the best norm by more than
    :data:`DEFAULT_GAP_TOL` (relative), since a realisation ends near or above it at large R,
    and not when some run ended on it already.
    """
    best = min(feasible.values(), key=lambda run: run.norm)
    guide = trusted_lower_bound(
        H,
        y,
        T,
        "auto",
        max(deadline - time.perf_counter(), 0.0),
        False,
        time.perf_counter(),
        max_nodes=strategy.search_bound_nodes,
        first=first,
    )
    cut = guide.status == TIME_LIMIT
    if (
        guide.selection is None
        or not guide.incumbent < best.norm * (1 - DEFAULT_GAP_TOL)
        or any(
            np.array_equal(guide.selection, np.argmax(r.point.attention, axis=1))
            for r in runs.values()
        )
    ):
        return None, cut
    return guide.selection, cut


def _search_guide(
    H, y, T, runs, best, incumbents, deadline, first, gap_tol, strategy
) -> LowerBoundResult:
    """LB's branch-and-bound for an uncertified search; ``incumbents`` receives every
    selection that became its best, in order.

    Its bound stops the search only if it comes within ``gap_tol`` of the best norm (the
    screen; the families need 1e-9), and it is at most the SVM norm of the
    branch-and-bound's first incumbent (the hard-selection alternation from the first GD
    step's v, the ``hard_selection`` start's selection). When the best start is already
    more than ``gap_tol`` above that norm the bound cannot stop the search, and the
    branch-and-bound only offers further selections. Above ``strategy.screen_min_samples``
    samples it then gets ``strategy.search_bound_nodes_per_eval`` SVMs per v-step solve the
    first starts spent (at most ``strategy.search_bound_nodes``), a budget in proportion to
    their cost: there its ``search_bound_nodes`` do not settle LB (paper's model, n = 100,
    T = 4: relative gap 0.3 % after 3000 SVMs) and found no selection beyond the first. Up
    to that size the branch-and-bound settles LB within a few hundred SVMs, and its last
    incumbent, found just before, is what wins on 3 of the 200 search-quality instances
    (the ``search_quality`` benchmark), so it keeps ``search_bound_nodes``, as when no start is
    feasible. Counts, not seconds: the answer does not depend on the load.
    """
    max_nodes = strategy.search_bound_nodes
    if best is not None and len(y) > strategy.screen_min_samples:
        stop_rtol = max(gap_tol, strategy.search_gap_rtol)
        if not (first.feasible and best.norm <= first.norm * (1 + stop_rtol)):
            spent = sum(run.n_eval for run in runs.values())
            max_nodes = min(max_nodes, math.ceil(strategy.search_bound_nodes_per_eval * spent))
    return trusted_lower_bound(
        H,
        y,
        T,
        "auto",
        max(deadline - time.perf_counter(), 0.0),
        False,
        time.perf_counter(),
        max_nodes=max_nodes,
        incumbents=incumbents,
        first=first,
    )


def _retired_families(runs, best, strategy: Strategy) -> tuple[str, ...]:
    """``("random",)`` when every first random start is feasible and ended more than
    ``strategy.retire_rtol`` above the best start, else ``()``: on such
    landscapes (digits tokens: random starts 9 to 30 times above the selection starts) more
    random starts cost a full descent each and are unlikely to win (on the 33 search-quality
    instances where this holds, none won by more than 1e-9, relative; on the digits cells
    none won; docs/decisions.md, "Retire a family 30 % above the best")."""
    randoms = [run for name, run in runs.items() if name.startswith("random_")]
    if best is None or not randoms:
        return ()
    threshold = best.norm * (1 + strategy.retire_rtol)
    if all(run.point.feasible and run.norm > threshold for run in randoms):
        return ("random",)
    return ()


def _search_seed(seed) -> np.random.SeedSequence | None:
    """A stream of ``seed`` apart from the random starts' (which use ``seed`` itself)."""
    if seed is None:
        return None
    base = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return np.random.SeedSequence(base.entropy, spawn_key=(*base.spawn_key, 19))


def _inputs(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens, labels as float signs, and the user's two labels in sign order."""
    if isinstance(X, Dataset) or y is None:
        data = as_dataset(X, y)
        signs = data.y.astype(np.float64)
        if is_on_disk(data.X):  # checked block by block in the Gram pass (TokenGram)
            return data.X, signs, data.classes
        return check_magnitude(data.X, "X"), signs, data.classes
    # plain arrays skip Dataset, whose n >= 2 rule P_R does not need
    X = check_magnitude(check_tokens(X), "X")
    signs, classes = encode_labels(y, X.shape[0])
    return X, signs, classes


def _check_choices(form: str, n_random_starts: Any, max_iter: Any) -> None:
    if form not in FORMS:
        raise InvalidInputError(f"Unknown form {form!r}; expected one of {list(FORMS)}.")
    check_int(n_random_starts, "n_random_starts", 0)
    check_int(max_iter, "max_iter", 1)


def _starts(form, H, y, T, first, bound, names) -> list[tuple[str, Any, Any]]:
    """The deterministic first starts ``(name, p0, selection)`` of ``names`` (the strategy's
    ``first_starts``) and LB's selection: a selection start has p0 None (realised by
    :func:`_run_starts`). ``first``: :func:`margin_solver.bounds.lower.first_selection`
    (None when ``names`` leaves out ``hard_selection`` or the time limit passed before it)."""
    starts = []
    if "zero" in names:
        starts.append(("zero", form.zeros(), None))
    if "first_step" in names:
        starts.append(("first_step", None, best_tokens(first_step_margins(H, y, T))))
    if "hard_selection" in names and first is not None and first.feasible:
        starts.append(("hard_selection", None, first.tokens))
    if bound is not None and bound.selection is not None:
        starts.append(("lb_selection", None, bound.selection))
    return starts


def _random_starts(form, y, T, R, n_random, seed) -> Iterator[tuple[str, Any, None]]:
    """Yield the random starts ``(name, p0, None)`` one at a time (p0 None when it is the
    zero vector), so that memory does not grow with their count."""
    n = len(y)
    rng = np.random.default_rng(seed)
    for k in range(n_random):
        p = form.from_coefficients(rng.standard_normal((n, T)))
        length = norm(form, p)
        yield f"random_{k}", (p * (R / length) if length > 0 else None), None


def _random_names(first: int, count: int) -> str:
    """The names of the random starts ``first`` to ``count - 1`` (the last when many)."""
    if count - first <= 2:
        return ", ".join(f"random_{k}" for k in range(first, count))
    return f"random_{first}, ..., random_{count - 1}"


def _realise(form, H, T, selection, R, solver):
    c = attention_svm(H, T, selection, R, guard=current(), solver=solver)
    return None if c is None else form.from_coefficients(c)


def _settle(form, H, y, T, selection, R, descent) -> tuple:
    """``(p0, run)``: the realisation of ``selection`` (None when no p singles it out) and,
    when its attention is nearly hard, its polish
    (:func:`margin_solver.minnorm.search.settled_run`), else None."""
    p0 = _realise(form, H, T, selection, R, descent["strategy"].vstep_solver)
    return p0, None if p0 is None else settled_run(form, H, y, T, p0, R, **descent)


def _result(X, y, R, form, name, run, start_norms, bound, start_time, tol, guard) -> MinNormResult:
    """The winning start's point, checked for feasibility in float64 and given its status;
    ``guard`` names the caller's time limit that stopped something (None when none did)."""
    gap_tol, feas_tol = tol
    point = run.point
    v, p, first_norm, norm, min_margin, repair = _dense_point(X, y, form, point, feas_tol)
    message = (
        f"best of {len(start_norms)} start{'s' * (len(start_norms) != 1)}: {name!r}, "
        f"||v|| = {first_norm:.6g} ({run.reason})" + repair
    )
    repaired = bool(repair)
    lower = None if bound is None else bound.value
    gap = math.nan if lower is None else (norm - lower) / norm
    feasible = min_margin >= 1 - feas_tol
    certified = feasible and lower is not None and gap <= gap_tol
    if bound is not None:
        message += f"; lower bound {lower:.6g} ({bound.status}), gap {gap:.3g}"
    if not feasible:
        status = INACCURATE
        message += (
            f"; the point violates the constraints: min margin {min_margin:.9g} < "
            f"1 - feas_tol = {1 - feas_tol:.9g}"
        )
    elif certified:
        status = OPTIMAL
        message += f" <= gap_tol {gap_tol:g}: certified"
    else:
        status = (
            TIME_LIMIT
            if guard is not None
            else MAX_ITER
            if run.status == MAX_ITER
            else LOCAL_OPTIMAL
        )
        if bound is None:
            message += "; not certified (certify=False)"
        else:
            message += f" > gap_tol {gap_tol:g}: not certified"
        if guard is not None:
            message += f"; stopped by {guard}"
    return MinNormResult(
        v=v,
        p=p,
        norm=norm,
        margin=1.0 / norm,
        lower_bound=lower,
        gap=gap,
        status=status,
        message=message,
        R=R,
        p_norm=float(np.linalg.norm(p)),
        min_margin=min_margin,
        attention=point.attention,
        selected_token=np.argmax(point.attention, axis=1),
        start=name,
        start_norms=start_norms,
        n_iter=run.n_iter,
        history={"norm": run.norm_history, "pg_norm": run.pg_history},
        form=form.name,
        solve_time=time.perf_counter() - start_time,
        bound=bound,
        certified=certified,
        gap_tol=gap_tol,
        feas_tol=feas_tol,
        repaired=repaired,
    )


def _dense_point(X, y, form, point, feas_tol) -> tuple:
    """``(v, p, first_norm, norm, min_margin, repair)``: a descent's point as dense v and p,
    ``||v||`` of the v-step's v, and ``||v||`` and ``min_i y_i f_i`` recomputed in float64
    after the repair, if any: when ``0 < min_margin < 1 - feas_tol``, v is rescaled by
    ``1 / min_margin`` and ``repair`` is the message's note saying so (else "")."""
    if isinstance(form, KernelForm):  # v and p in one pass over X
        v, p = TokenGram.materialize(X, np.stack([point.value_coefficients, point.p]))
    else:
        v, p = TokenGram.materialize(X, point.value_coefficients), point.p
    # the norm of the v returned, which on ill-conditioned tokens can differ from the
    # v-step's coefficient form sqrt(c^T K c) in the fifth digit
    norm = first_norm = float(np.linalg.norm(v))
    min_margin = float(np.min(margins(X, y, v, p)))
    repair = ""
    if min_margin < 1 - feas_tol and min_margin > 0:
        # v / min_margin meets every constraint with a norm larger by 1 / min_margin
        v = v / min_margin
        norm = float(np.linalg.norm(v))
        repair = (
            f"; v rescaled by 1/min_margin = {1 / min_margin:.9g} to restore "
            f"feasibility (min margin was {min_margin:.9g}, ||v|| {first_norm:.6g} -> "
            f"{norm:.6g})"
        )
        min_margin = float(np.min(margins(X, y, v, p)))
    return v, p, first_norm, norm, min_margin, repair


def _no_point(R, form_name, status, message, bound, start_time, tol) -> MinNormResult:
    """A result without a usable point: ``infeasible`` (proven: certified), or ``failed``."""
    return MinNormResult(
        v=None,
        p=None,
        norm=math.inf,
        margin=0.0,
        lower_bound=None if bound is None else bound.value,
        gap=0.0 if status == INFEASIBLE else math.nan,
        status=status,
        message=message,
        R=R,
        p_norm=math.nan,
        min_margin=math.nan,
        attention=None,
        selected_token=None,
        start=None,
        start_norms={},
        n_iter=0,
        form=form_name,
        solve_time=time.perf_counter() - start_time,
        bound=bound,
        certified=status == INFEASIBLE,
        gap_tol=tol[0],
        feas_tol=tol[1],
    )


def _no_feasible_point(X, y, R, form, runs, bound, start_time, tol) -> MinNormResult:
    """``no_feasible_point_found`` with the best attempt: among the runs' final p, the one
    where the least-squares fit of the labels (v with ``<v, z_i> ~ y_i``) has the largest
    smallest margin, i.e. the smallest largest violation ``1 - y_i f_i``."""
    result = _no_point(R, form.name, NO_FEASIBLE_POINT_FOUND, "", bound, start_time, tol)
    best = None
    for name, run in runs.items():
        s = run.point.attention
        K = form.feature_gram(s)
        a = np.linalg.lstsq((K + K.T) / 2, y, rcond=None)[0]
        worst = float(np.min(y * (K @ a)))
        if best is None or worst > best[0]:
            best = (worst, name, run, a)
    why = (
        "no feasible point found: the v-step is infeasible (or cannot tell, features equal "
        "to within rounding) at the final p of every start"
        if runs
        else "no feasible point found: no start was run"
    )
    if best is not None:
        _, name, run, a = best
        point = run.point
        v, p = TokenGram.materialize(X, point.attention * a[:, None]), form.dense(point.p)
        result.v, result.p, result.start = v, p, name
        result.min_margin = float(np.min(margins(X, y, v, p)))
        result.p_norm = float(np.linalg.norm(p))
        result.attention = point.attention
        result.selected_token = np.argmax(point.attention, axis=1)
        why += (
            f" ({len(runs)} distinct starts run; a statement about those p only); best "
            f"attempt: start "
            f"{name!r}, least-squares v with min margin {result.min_margin:.6g}"
        )
    if bound is not None:
        # LB is "no_feasible_point_found" when its selections could not be resolved
        found = "is feasible" if bound.selection is not None else "did not prove it either"
        why += (
            f"; infeasibility is not proven: the hard-selection bound {found} "
            f"(LB >= {bound.value:.6g}, {bound.status})"
        )
    else:
        why += "; infeasibility is not proven"
    result.message = why
    return result
