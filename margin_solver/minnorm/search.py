"""More starts for P_R when the first ones leave a gap: selections, continuation, a screen.

:func:`margin_solver.minnorm.solve.solve_min_norm` first descends from a few cheap starts. P_R is
non-convex in p (design section 4.4) and, off the paper's model (n > d, shared tokens, tied
integer tokens, very different token scales), those starts can all end far above the optimum
or at points where no v interpolates (phi = inf), where the descent cannot even begin. This
module runs further starts, cheapest first, until the gap to the hard-selection bound LB is
closed or its budget is spent:

``selection_k``
    Token selections with a small selection-SVM norm (from the hard-selection alternation
    started at several value vectors: the first GD step's, random ones, and the v of the
    best point found so far; first the selections given, e.g. every incumbent of LB's
    branch-and-bound, best first), each realised by the
    attention SVM of :func:`margin_solver.svm.selection.attention_svm` when some p singles it out.
    When none does (common when n > d), the *nearest realisable selection* is used instead:
    the p of the same attention SVM with a ridge on its Gram matrix (a squared-hinge soft
    margin, always solvable) picks, in each sample, the token its scores favour, and that
    p is where the descent starts.
``realisable_k``
    The improving selections (best first) of a best-first branch-and-bound over
    *realisable* selections (:func:`margin_solver.bounds.realisable.realisable_selections`:
    selection-SVM node bounds as in LB's, partial selections that no p realises pruned,
    realisability decided by least distance with an LP fallback), each realised and
    descended. At large R, P_R tends to the best realisable selection's SVM norm, which can
    be far above LB when n > d. The family is skipped when the tokens are linearly
    independent (then every selection is realisable) and above ``realisable_max_samples``
    samples. Its budget counts realisability problems and SVMs (``realisable_work``), not
    seconds.
``continuation_k``
    Continuation in R with a penalised v-step. phi_eps(p) = min ||v||^2 / 2 + sum_i xi_i^2
    / (2 eps) over ``y_i z_i^T v >= 1 - xi_i`` is the hard-margin SVM on the features
    augmented by ``sqrt(eps) e_i``, i.e. the v-step with ``K + eps I``: finite at every p
    (so an infeasible start is no dead end), with the same envelope gradient, at most phi
    and tending to it as eps -> 0 (the slacks are ``xi_i = eps alpha_i``). The descent runs
    at radii growing geometrically from ``1 / rms token norm`` (soft attention, where phi is
    smooth) to R, with eps shrinking, and ends with the exact descent at R.
``random_extra_k``
    More random starts in the span of the tokens, alternately on the sphere of radius R and
    at a uniform radius inside the ball.
``screen_k``
    A screen, run after the other families' turns when the gap is still open: the
    realisations of the ``screen_selections`` realisable selections of smallest SVM norm
    (the same branch-and-bound as ``realisable``, keeping that many best instead of one, with
    a budget of its own, ``screen_work``) and ``screen_random`` random starts (as
    ``random_extra``) each descend ``screen_iter`` p-steps; the ``screen_top`` lowest are
    descended to the end. At
    finite R attention stays soft and a selection's SVM norm ranks badly what its
    realisation descends to (a selection of SVM norm 4.14 wins where the best realisable one
    has 1.77, the ``search_quality`` benchmark), while the norm after a few steps ranks it
    well: a cheap way to try many starts. Skipped above ``screen_max_samples`` samples. A
    more patient caller makes it larger (``screen_scale``).

The numbers in ``code`` quotes are fields of the strategy table
(:class:`margin_solver.core.strategy.Strategy`, passed down as ``strategy``); docs/decisions.md
says how each was chosen.

A start whose exact descent cannot begin (phi = inf at its p) first descends on phi_eps for a
few decreasing eps and then on phi.

Nearly hard attention (:func:`hard_value`). When every sample puts all but at most
``hard_leak`` of its attention on one token, ``||v*(p)||`` is close to that selection's
SVM norm, the value of P_R in the limit R -> infinity, and the gradient of phi is of the
order of the leak; nearly every margin sits at 1 while few samples carry a positive dual, so
the quasi-Newton descent changes the v-step's support at almost every trial point and
crawls. Such a point is finished instead by :func:`hard_polish`, whose steps solve an SVM
with every margin linearised in p (:func:`settled_run` for a realised selection,
:func:`hard_descend` once a start becomes nearly hard), and with ``hard=True`` the
``selection`` family realises only selections whose SVM norm beats the best norm so far.

Every start ends with :func:`margin_solver.descent.alternating.descend` (or :func:`hard_polish`) on
the exact phi, so every returned norm is that of an exact v-step at a p with
``||p|| <= R``. The search stops as soon as the best norm is within ``gap_rtol`` of a given
lower bound (LB is valid for every R).

Spending in proportion to what a family can win: a family (other than ``selection`` and
``random``, whose starts are each another selection or an independent draw) whose start ends
feasible more than ``retire_rtol`` above the best norm so far is *retired*, and so is,
from the start, a family the caller names (``retired``;
:func:`margin_solver.minnorm.solve.solve_min_norm` names ``random`` when its first random starts all
ended that far above). A retired family's turns are not run and not given to the others, so
the search ends sooner: on the digits study's cells
(ReLU-lifted patch tokens, n = 240) random starts end 20 times above the selection starts and
continuation 1.7 times, and 4 of the 8 search starts are left out, each a 500-step descent.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from margin_solver.bounds.realisable import Realiser, realisable_selections
from margin_solver.core.guard import Progress, current
from margin_solver.core.kernel import softmax
from margin_solver.core.results import LOCAL_OPTIMAL, MAX_ITER
from margin_solver.core.strategy import (
    DEFAULT_STRATEGY,
    FAMILIES,
    Strategy,
    deprecated_constants,
)
from margin_solver.descent.alternating import (
    STOPPED,
    DescentRun,
    PhiPoint,
    descend,
    evaluate_phi,
    norm,
    project,
    projected_gradient,
    with_gradient,
)
from margin_solver.svm.selection import (
    attention_svm,
    hard_selection_alternation,
    selection_rows,
    selection_svm,
)
from margin_solver.svm.vstep import solve_vstep_from_support

logger = logging.getLogger("margin_solver")

__all__ = [
    "FAMILIES",
    "PenalisedForm",
    "hard_descend",
    "hard_polish",
    "hard_samples",
    "hard_value",
    "nearly_hard",
    "search_starts",
    "settled_run",
    "settled_value",
]

# The module constants before the strategy table, now its fields (docs/decisions.md).
__getattr__ = deprecated_constants(
    __name__,
    {
        "IDEAS": "search_ideas",
        "SCREEN_SELECTIONS": "screen_selections",
        "SCREEN_RANDOM": "screen_random",
        "SCREEN_ITER": "screen_iter",
        "SCREEN_TOP": "screen_top",
        "SCREEN_WORK": "screen_work",
        "SCREEN_MAX_SAMPLES": "screen_max_samples",
        "REALISABLE_WORK": "realisable_work",
        "REALISABLE_MAX_SAMPLES": "realisable_max_samples",
        "RETIRE_RTOL": "retire_rtol",
        "NEVER_RETIRED": "never_retired",
        "HARD_LEAK": "hard_leak",
        "HARD_RTOL": "hard_rtol",
        "POLISH_MAX_FAILS": "polish_max_fails",
    },
)


def hard_samples(attention: np.ndarray, strategy: Strategy = DEFAULT_STRATEGY) -> np.ndarray:
    """Per sample (rows of ``attention``, shape (n, T)): whether it leaves at most
    ``strategy.hard_leak`` of its attention off its most attended token."""
    return np.max(attention, axis=1) >= 1 - strategy.hard_leak


def nearly_hard(attention: np.ndarray, strategy: Strategy = DEFAULT_STRATEGY) -> bool:
    """Whether every sample is nearly hard (:func:`hard_samples`)."""
    return bool(hard_samples(attention, strategy).all())


def hard_value(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    attention: np.ndarray,
    strategy: Strategy = DEFAULT_STRATEGY,
) -> float | None:
    """SVM norm of the selection that ``attention`` nearly hard-selects, else None.

    Parameters
    ----------
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    T : int
        Tokens per sample.
    attention : ndarray of shape (n, T)
        ``softmax(X_i p)`` at some p.
    strategy : Strategy, optional
        Its ``hard_leak`` says what nearly hard is.

    Returns
    -------
    float or None
        The selection SVM norm of ``argmax_t attention_it`` when every sample leaves at most
        ``strategy.hard_leak`` of its attention off that token; None when some sample leaves
        more, or when no v separates that selection.
    """
    if not nearly_hard(attention, strategy):
        return None
    svm = selection_svm(H, y, T, np.argmax(attention, axis=1), solver=strategy.vstep_solver)
    return svm.norm if svm.feasible else None


def settled_value(
    H: np.ndarray, y: np.ndarray, T: int, point: PhiPoint, strategy: Strategy = DEFAULT_STRATEGY
) -> float | None:
    """:func:`hard_value` of a feasible point when ``||v*||`` is within ``strategy.hard_rtol``
    (relative) of it, else None."""
    value = hard_value(H, y, T, point.attention, strategy) if point.feasible else None
    if value is None or abs(math.sqrt(2 * point.phi) - value) > strategy.hard_rtol * value:
        return None
    return value


def settled_run(
    form,
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    p0: np.ndarray,
    R: float,
    vstep_solver: str | None = None,
    *,
    strategy: Strategy = DEFAULT_STRATEGY,
    **options,
) -> DescentRun | None:
    """The start p0 finished without the descent when its attention is nearly hard, else None.

    Nearly hard (every sample leaves at most ``strategy.hard_leak`` of its attention off one
    token) and feasible: the descent would keep that selection and polish the last digits
    at one general v-step per trial point; :func:`hard_polish` gets there in a few
    linearised steps instead. Soft attention is decided before any v-step. ``options`` are
    :func:`hard_polish`'s (``gtol``, ``rtol``, ``window``, ``max_iter``, ``deadline``;
    others ignored); ``vstep_solver`` overrides the strategy's.
    """
    vstep_solver = strategy.vstep_solver if vstep_solver is None else vstep_solver
    p0 = project(form, p0, R)
    if not nearly_hard(softmax(form.scores(p0)), strategy):
        return None  # soft attention: decided before any v-step
    point = evaluate_phi(form, y, p0, vstep_solver)
    if not point.feasible:
        return None
    run = hard_polish(form, y, point, R, vstep_solver=vstep_solver, strategy=strategy, **options)
    value = hard_value(H, y, T, run.point.attention, strategy)
    if value is not None:
        run.reason += f" (its selection's SVM norm: {value:.9g})"
    return run


def hard_polish(
    form,
    y: np.ndarray,
    point: PhiPoint,
    R: float,
    *,
    max_iter: int = 500,
    gtol: float = 1e-6,
    rtol: float = 1e-7,
    window: int | None = None,
    vstep_solver: str | None = None,
    deadline: float = math.inf,
    strategy: Strategy = DEFAULT_STRATEGY,
    **_,
) -> DescentRun:
    """Descent on phi by linearised-attention SVM steps, for nearly hard attention.

    Each step linearises every margin in p at the current (v, p),
    ``y_i f_i(v', p + dp) ~ y_i z_i^T v' + <J_i, dp>`` with ``J_i = X_i^T [y_i s_i * (u_i -
    f_i)]`` (the gradient of sample i's margin at fixed v, restricted to the sphere's
    tangent space when p is on it), and solves

        minimize ||v'||^2 / 2 + lam ||dp||^2 / 2  s.t.  the linearised margins >= 1,

    a hard-margin SVM on the features ``(z_i, J_i / sqrt(lam))`` whose dual beta gives
    ``dp = sum_i beta_i J_i / lam`` (docs/theory.md, "linearised-attention SVM step"). ``p + dp`` is
    put back on the ball (rescaled onto the sphere when p was on it) and its exact v-step
    decides: rejected unless phi decreased (then ``lam`` grows 10-fold); ``lam`` shrinks or
    grows 3-fold when the decrease is above 3/4 or below 1/4 of the model's (a trust
    region). Why: at nearly hard attention every margin sits within the leak (~1e-4) of 1
    while few samples carry a positive dual, so a gradient step of phi (which sees only the
    support) pushes other samples under the margin and the support changes at every trial
    point (139-221 quasi-Newton steps at n = 100, T = 4); the linearised SVM sees every
    sample's margin at once (16-31 steps there; docs/decisions.md, "A linearised-SVM polish at
    nearly hard attention, with the descent's window").

    Stops as :func:`margin_solver.descent.alternating.descend` does, with the same ``gtol``,
    ``rtol`` and ``window`` (status ``"local_optimal"``; a window of 3 steps ended up to
    2.6e-9 above the descent's norm on the paper's model, the same entry); when ``lam``
    grew ``strategy.polish_max_fails`` times in a row without an accepted step
    (``"local_optimal"``: no step of the model decreases phi); after ``max_iter`` accepted
    steps (``"max_iter"``); once ``deadline`` (a :func:`time.perf_counter` reading) has
    passed (``"time_limit"``). ``point`` must be feasible. ``window`` and ``vstep_solver``
    override the strategy's; other keywords (the quasi-Newton descent's knobs) are ignored.
    """
    window = strategy.window if window is None else window
    vstep_solver = strategy.vstep_solver if vstep_solver is None else vstep_solver
    max_fails = strategy.polish_max_fails
    point = with_gradient(form, point)
    run = DescentRun(point, MAX_ITER, f"reached max_iter={max_iter}", 0)
    run.count_fallbacks(point)
    lam = strategy.polish_lam0 * 2 * point.phi / R**2  # ||v||^2 / R^2: the two terms' scales
    phis = [point.phi]
    guess = None
    while True:
        pg_norm = run.record(
            point, norm(form, projected_gradient(form, point.p, point.gradient, R))
        )
        if (
            run.stops_at(point, pg_norm, R, gtol, deadline)
            or run.stalls(phis, rtol, window)
            or run.n_iter >= max_iter
        ):
            break
        trial, lam, guess = _polish_step(
            form, y, point, R, lam, run, vstep_solver, guess, max_fails
        )
        if trial is None:
            run.status = LOCAL_OPTIMAL
            run.reason = (
                f"no linearised step decreases phi ({max_fails} trust-region contractions in a row)"
            )
            break
        point = with_gradient(form, trial)
        run.point, run.n_iter = point, run.n_iter + 1
        phis.append(point.phi)
    run.reason = f"nearly hard attention, linearised SVM steps: {run.reason}"
    return run


def _polish_step(
    form,
    y: np.ndarray,
    point: PhiPoint,
    R: float,
    lam: float,
    run: DescentRun,
    vstep_solver: str,
    guess: np.ndarray | None,
    max_fails: int,
) -> tuple[PhiPoint | None, float, np.ndarray | None]:
    """The next accepted point of :func:`hard_polish` (None after ``max_fails`` rejections in
    a row), the updated ``lam`` and the duals of the last linearised SVM (``guess``: the
    previous one's, None when unknown); every v-step is counted in ``run``."""
    for _ in range(max_fails):
        q, predicted, guess = _linearised_step(form, y, point, R, lam, vstep_solver, guess)
        if q is not None:
            trial = evaluate_phi(form, y, q, vstep_solver, support=point.vstep.alpha)
            run.count_solve(trial)
            if trial.phi < point.phi:
                ratio = (point.phi - trial.phi) / max(point.phi - predicted, 1e-300)
                lam = lam / 3 if ratio > 0.75 else lam * 3 if ratio < 0.25 else lam
                return trial, lam, guess
        lam *= 10
    return None, lam, guess


def _linearised_step(
    form,
    y: np.ndarray,
    point: PhiPoint,
    R: float,
    lam: float,
    vstep_solver: str,
    guess: np.ndarray | None = None,
) -> tuple[np.ndarray | None, float, np.ndarray | None]:
    """The p of one step of :func:`hard_polish` with weight ``lam``, the model's phi there
    and its SVM's duals; ``(None, nan, None)`` when the SVM has no solution.

    The SVM is first solved from ``guess`` (the previous step's duals, whose support changes
    little from step to step: :func:`margin_solver.svm.vstep.solve_vstep_from_support`), then,
    when that fails, by the general v-step.
    """
    s, p = point.attention, point.p
    u = form.token_values(point.value_coefficients)
    f = np.sum(s * u, axis=1, keepdims=True)
    g = y[:, None] * s * (u - f)  # J_i = X_i^T g_i: sample i's margin gradient at fixed v
    J_p = np.sum(g * form.scores(p), axis=1)  # <J_i, p>
    pp = form.inner(p, p)
    on_sphere = pp >= (R * (1 - 1e-9)) ** 2
    KJ = form.feature_gram(g)
    if on_sphere:  # tangent parts: J_i - <J_i, p> p / ||p||^2
        KJ = KJ - np.outer(J_p, J_p) / pp
    K = form.feature_gram(s) + np.outer(y, y) * KJ / lam
    svm = solve_vstep_from_support((K + K.T) / 2, y, guess, vstep_solver)
    if not svm.success:
        return None, math.nan, None
    beta = svm.alpha
    dp = form.from_coefficients(beta[:, None] * g) / lam
    if on_sphere:
        dp = dp - (float(beta @ J_p) / (lam * pp)) * p
    # the model's phi at p + dp: ||v'||^2 / 2, the SVM's value less lam ||dp||^2 / 2
    predicted = 0.5 * svm.norm**2 - 0.5 * lam * form.inner(dp, dp)
    q = p + dp
    if on_sphere:
        length = norm(form, q)
        return (q * (R / length) if length > 0 else None), predicted, svm.alpha
    return project(form, q, R), predicted, svm.alpha


def hard_descend(
    form,
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    p0: np.ndarray,
    R: float,
    best_norm: float = math.inf,
    **options,
) -> DescentRun:
    """:func:`descend` with a test at every accepted step, for nearly hard regimes.

    The test (:class:`_HardTest`): the run stops if the SVM norm of the selection its nearly
    hard samples make (every sample's when all are nearly hard, :func:`hard_value`) and its
    own norm are both at least ``best_norm`` (another start's): a descent would end near or
    above that SVM norm, so this start cannot win (its norm is then not where a full descent
    would end, which only matters for a start that is not the best); otherwise, once every
    sample is nearly hard, it is finished by :func:`hard_polish`.
    ``options`` are :func:`descend`'s (``max_iter`` caps the p-steps of the descent and of
    the polish together).

    Returns
    -------
    DescentRun
        As :func:`descend`, or the polish's run joined to it; status ``"stopped"`` (not
        ``"local_optimal"``: the point is no local optimum) with a reason beginning
        "stopped:" when the test proved the start dominated.
    """
    max_iter = options.pop("max_iter", 500)
    test = _HardTest(H, y, T, best_norm, options.get("strategy", DEFAULT_STRATEGY))
    run = descend(form, y, p0, R, **options, max_iter=max_iter, until=test)
    if run.status == STOPPED and test.polish:
        return _joined(
            run, hard_polish(form, y, run.point, R, **options, max_iter=max_iter - run.n_iter)
        )
    return run


class _HardTest:
    """:func:`hard_descend`'s test of an accepted iterate (``until`` of :func:`descend`).

    Returns a reason to stop or None; ``polish`` says whether the reason is "polish now"
    rather than "dominated". The nearly hard samples' selection is first bounded from below
    by the iterate's own v-step dual (:func:`_dual_norm_bound`: one product, no solve),
    which proves most dominated starts; the selection's SVM is solved only when every
    sample is nearly hard (the polish needs it) or when that bound is within
    ``strategy.hard_svm_ratio`` of the best norm (the exact norm may then reach it).
    """

    def __init__(self, H: np.ndarray, y: np.ndarray, T: int, best_norm: float, strategy):
        self.H, self.y, self.T, self.best_norm = H, y, T, best_norm
        self.strategy = strategy
        self.polish = False

    def __call__(self, point: PhiPoint) -> str | None:
        attention = point.attention
        hard = hard_samples(attention, self.strategy)
        every = bool(hard.all())
        own = math.sqrt(2 * point.phi)
        if not hard.any() or (own < self.best_norm and not every):
            return None
        samples = np.flatnonzero(hard)
        tokens = np.argmax(attention[samples], axis=1)
        which = "" if every else " of its nearly hard samples"
        bound = _dual_norm_bound(
            self.H, self.y, self.T, samples, tokens, point.vstep.alpha[samples]
        )
        if min(bound, own) >= self.best_norm:
            return self._dominated(which, f"at least {bound:.9g}")
        if not every and bound < self.strategy.hard_svm_ratio * self.best_norm:
            return None
        engine = self.strategy.vstep_solver
        svm = selection_svm(self.H, self.y, self.T, tokens, samples, solver=engine)
        if not svm.feasible:
            return None
        if min(svm.norm, own) >= self.best_norm:
            return self._dominated(which, f"{svm.norm:.9g}")
        self.polish = every
        return "every sample nearly hard" if every else None

    def _dominated(self, which: str, norm: str) -> str:
        return (
            f"stopped: nearly hard attention on a selection{which} of SVM norm {norm}, "
            f"no better than another start's {self.best_norm:.9g}"
        )


def _dual_norm_bound(
    H: np.ndarray, y: np.ndarray, T: int, samples: np.ndarray, tokens: np.ndarray, alpha: np.ndarray
) -> float:
    """A lower bound on the SVM norm of a selection from any dual ``alpha >= 0``.

    Weak duality: for every v meeting the selection's constraints and every ``t >= 0``,
    ``||v||^2 / 2 >= t sum(alpha) - t^2 alpha^T Q alpha / 2`` with ``Q = diag(y) H_sel
    diag(y)``; the best t gives ``||v|| >= sum(alpha) / sqrt(alpha^T Q alpha)``. With the
    duals of a nearly hard iterate's v-step (features within the leak of the selected
    tokens) it was within 0.05 % of the exact norm in 19 of 24 tests on the paper's model at
    R sqrt(d) = 100, and 18-59 % below it in the other 5 (docs/decisions.md, "Nearly hard
    attention: the dominance test at every step").
    """
    rows = selection_rows(samples, tokens, T)
    a = alpha * y[samples]
    quadratic = float(a @ H[np.ix_(rows, rows)] @ a)
    total = float(alpha.sum())
    return total / math.sqrt(quadratic) if total > 0 and quadratic > 0 else 0.0


def _joined(first: DescentRun, second: DescentRun) -> DescentRun:
    """One run of two consecutive descents (``second`` starts at ``first``'s last point)."""
    return DescentRun(
        second.point,
        second.status,
        second.reason,
        first.n_iter + second.n_iter,
        n_eval=first.n_eval + second.n_eval - 1,  # the joint point is solved twice
        n_on_support=first.n_on_support + second.n_on_support,
        norm_history=first.norm_history + second.norm_history[1:],
        pg_history=first.pg_history + second.pg_history[1:],
        fallbacks=first.fallbacks + second.fallbacks,
        last_fallback=second.last_fallback or first.last_fallback,
    )


class PenalisedForm:
    """A form whose v-step is the squared-hinge SVM: the feature Gram matrix gets ``+ eps I``.

    Delegates everything else to the wrapped form, so :func:`descend` runs on phi_eps
    unchanged (its gradient formula holds with the penalised problem's multipliers).
    """

    def __init__(self, form, eps: float):
        self.form = form
        self.eps = eps
        self.name = form.name

    def __getattr__(self, attribute):
        return getattr(self.form, attribute)

    def feature_gram(self, s: np.ndarray) -> np.ndarray:
        """``K + eps I`` for attention ``s``."""
        K = self.form.feature_gram(s)
        K[np.diag_indices_from(K)] += self.eps
        return K


def search_starts(
    form,
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    R: float,
    best: DescentRun | None,
    *,
    lower_bound: float | None = None,
    selections: Sequence[np.ndarray] = (),
    realised: Sequence[np.ndarray] = (),
    max_starts: int = 8,
    time_limit: float = math.inf,
    gap_rtol: float = 1e-9,
    screen_gap_rtol: float | None = None,
    rng: np.random.Generator | None = None,
    ideas: tuple[str, ...] | None = None,
    options: dict | None = None,
    hard: bool = False,
    retired: Collection[str] = (),
    screen_scale: float = 1.0,
    strategy: Strategy = DEFAULT_STRATEGY,
) -> Iterator[tuple[str, DescentRun]]:
    """Yield ``(name, run)`` for further starts of P_R until the gap closes or the budget ends.

    Parameters
    ----------
    form : DenseForm or KernelForm
        The solver's representation of p.
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    T : int
        Tokens per sample.
    R : float
        Radius of the ball on p.
    best : DescentRun or None
        The best feasible run so far (None when there is none); updated as starts improve it.
    lower_bound : float, optional
        A valid lower bound on P_R (LB); the search stops once the best norm is within
        ``gap_rtol`` (relative) of it.
    selections : sequence of ndarray of int, optional
        Token selections to realise first, in order (e.g. the incumbents of LB's
        branch-and-bound, best first).
    realised : sequence of ndarray of int, optional
        Selections whose realisations were descended already (the first starts'): no family
        runs them again.
    max_starts : int, default=8
        Turns of the families at most: starts run, plus turns of retired families. The
        screen (``"screen"`` in ``ideas``) comes after them, with ``strategy.screen_top``
        starts of its own.
    time_limit : float, default=inf
        Seconds; no new start begins after it.
    gap_rtol : float, default=1e-9
        Relative gap at which the search stops.
    screen_gap_rtol : float, optional
        Relative gap ``(norm - lower_bound) / norm`` at which the screen is not begun
        (``gap_rtol`` when omitted): e.g. the gap that certifies the answer.
    rng : numpy.random.Generator, optional
        Randomness of the random value vectors and directions.
    ideas : tuple of str, optional
        Families of starts (of :data:`FAMILIES`), taken in turn (``"screen"`` last, once the
        turns are spent); ``strategy.search_ideas`` by default.
    options : dict, optional
        Keyword options of :func:`descend` (``max_iter``, ``gtol``, ``rtol``, ``deadline``);
        its other knobs come from ``strategy``.
    hard : bool, default=False
        The attention is nearly hard at this R (the best point is, and sits at its
        selection's SVM norm): the ``selection`` family realises only selections whose SVM
        norm is below the best norm so far, since a nearly hard realisation ends near its SVM
        norm; the others count as misses.
    retired : collection of str, optional
        Families retired from the start (e.g. ``"random"`` when the first random starts
        ended far above the best). A family not in ``strategy.never_retired`` is also retired
        once one of its starts ends feasible more than ``strategy.retire_rtol`` above the best
        norm so far. A retired
        family's turns count against ``max_starts`` without running: the search ends sooner.
        Once every family is retired the turns end, but the screen is still tried: its
        starts are not the families'.
    screen_scale : float, default=1.0
        Size of the screen relative to the default (at least 1): the screen realises
        ``screen_scale`` times ``strategy.screen_selections`` selections (found with as many
        times ``strategy.screen_work``) and draws that many times ``strategy.screen_random``
        random starts, and descends ``sqrt(screen_scale)`` times ``strategy.screen_top`` of
        them (rounded) to the
        end. :func:`margin_solver.minnorm.solve.solve_min_norm` scales it with ``search_starts``.
    strategy : Strategy, optional
        The strategy table (:class:`margin_solver.core.strategy.Strategy`): the families'
        budgets and gates, and the knobs of every descent.

    Yields
    ------
    (str, DescentRun)
        Every run, feasible or not.

    Returns
    -------
    bool
        (the generator's return value, ``StopIteration.value``) True when ``time_limit``
        stopped the search before it ended on its own: turns left, the screen not finished,
        or a branch-and-bound over selections still running at the deadline.
    """
    rng = np.random.default_rng() if rng is None else rng
    options = {**(options or {}), "strategy": strategy}
    scale = float(np.mean(np.diag(H))) or 1.0
    context = _Context(form, H, y, T, R, options, strategy, scale, rng, hard)
    context.seen.update(np.asarray(tokens, dtype=np.int64).tobytes() for tokens in realised)
    context.best = lambda: best
    deadline = time.perf_counter() + time_limit
    families = {
        "selection": _selection_starts(context, selections, lambda: best),
        "realisable": _realisable_starts(context, deadline),
        "continuation": _continuation_starts(context),
        "random": _random_starts(context),
    }
    ideas = strategy.search_ideas if ideas is None else ideas
    active = [name for name in ideas if name != "screen"]
    retired = set(retired)
    done = 0

    def closed(rtol: float = gap_rtol) -> bool:
        return (
            best is not None
            and lower_bound is not None
            and best.norm - lower_bound <= rtol * best.norm
        )

    while active and done < max_starts:
        if closed():
            return False
        if time.perf_counter() >= deadline:
            return True
        family = active.pop(0)
        if family in retired:
            active.append(family)
            done += 1
            continue
        item = next(families[family], None)
        if item is None:
            continue
        active.append(family)
        name, run = item
        done += 1
        if run.point.feasible:
            if best is None or run.norm < best.norm:
                best = run
            elif (
                run.norm > best.norm * (1 + strategy.retire_rtol)
                and family not in strategy.never_retired
            ):
                retired.add(family)
        yield name, run
        if all(name in retired for name in active):
            break
    if "screen" not in ideas or closed(gap_rtol if screen_gap_rtol is None else screen_gap_rtol):
        return context.timed_out
    for name, run in _screen_starts(context, deadline, max(1.0, screen_scale)):
        if run.point.feasible and (best is None or run.norm < best.norm):
            best = run
        yield name, run
        if closed():
            return False
    return context.timed_out


@dataclass
class _Context:
    form: object
    H: np.ndarray
    y: np.ndarray
    T: int
    R: float
    options: dict
    strategy: Strategy
    scale: float
    rng: np.random.Generator
    hard: bool = False
    # the best feasible run so far (set by search_starts)
    best: Callable[[], DescentRun | None] = lambda: None
    # selections realised so far, by any family
    seen: set[bytes] = field(default_factory=set)
    # a family or the screen stopped at the deadline
    timed_out: bool = False

    @property
    def n(self) -> int:
        return len(self.y)

    def past(self, deadline: float) -> bool:
        """True when the :func:`time.perf_counter` time ``deadline`` has passed, which
        ``timed_out`` then remembers."""
        passed = time.perf_counter() > deadline
        self.timed_out |= passed
        return passed

    def best_norm(self) -> float:
        """The best feasible norm so far (inf when none)."""
        run = self.best()
        return math.inf if run is None else run.norm

    def random_direction(self) -> np.ndarray | None:
        """A random p of norm 1 in the span of the tokens (None if the tokens are all zero)."""
        p = self.form.from_coefficients(self.rng.standard_normal((self.n, self.T)))
        length = norm(self.form, p)
        return p / length if length > 0 else None

    def descend(self, p0: np.ndarray) -> DescentRun:
        """The exact descent from p0 (none when :func:`settled_run` says it needs none);
        when phi = inf there, first penalised descents."""
        settled = settled_run(self.form, self.H, self.y, self.T, p0, self.R, strategy=self.strategy)
        if settled is not None:
            return settled
        if self.hard:
            run = hard_descend(
                self.form, self.H, self.y, self.T, p0, self.R, self.best_norm(), **self.options
            )
        else:
            run = descend(self.form, self.y, p0, self.R, **self.options)
        p = run.point.p
        for eps in self.strategy.rescue_eps:
            if run.point.feasible:
                break
            p = self._penalised(p, self.R, eps, self.options.get("max_iter", 500))
            run = descend(self.form, self.y, p, self.R, **self.options)
        return run

    def _penalised(self, p0: np.ndarray, radius: float, eps: float, max_iter: int) -> np.ndarray:
        options = {**self.options, "max_iter": max_iter}
        penalised = PenalisedForm(self.form, eps * self.scale)
        return descend(penalised, self.y, p0, radius, **options).point.p

    def continuation(self, p0: np.ndarray) -> DescentRun:
        """Penalised descents at radii growing from ``1 / rms token norm`` to R, then exact."""
        radius = min(self.R, 1.0 / math.sqrt(self.scale))
        factor = self.strategy.continuation_radius_factor
        stages = max(1, math.ceil(math.log(self.R / radius, factor)) + 1)
        eps_list = np.geomspace(*self.strategy.continuation_eps, stages)
        p = project(self.form, p0 * radius, radius)
        for eps in eps_list:
            p = self._penalised(p, radius, float(eps), self.strategy.continuation_stage_iter)
            if radius >= self.R:
                break
            new_radius = min(self.R, radius * factor)
            length = norm(self.form, p)
            if length > 0:  # sharpen the attention found so far
                p = p * (new_radius / max(length, radius))
            radius = new_radius
        return self.descend(p)


def _selection_starts(context: _Context, first: Sequence[np.ndarray], best) -> Iterator:
    """Realisations of good token selections; the nearest realisable one when none exists."""
    H, y, T, n = context.H, context.y, context.T, context.n
    seen = context.seen
    k = 0

    def value_vectors():
        for tokens in first:
            yield np.asarray(tokens, dtype=np.int64), None
        while True:
            run = best()
            if run is not None:  # the v of the best point so far
                values = context.form.token_values(run.point.value_coefficients)
                yield None, y[:, None] * np.asarray(values).reshape(n, T)
            g = context.rng.standard_normal(n * T)
            yield None, y[:, None] * (H @ g).reshape(n, T)

    strategy = context.strategy
    misses = 0
    limit = strategy.hard_selection_misses if context.hard else strategy.selection_misses
    for tokens, margins in value_vectors():
        if misses > limit:  # value vectors keep giving nothing new
            return
        misses += 1
        if tokens is None:
            svm = hard_selection_alternation(H, y, T, margins, solver=strategy.vstep_solver)
            if not svm.feasible:
                continue
            tokens = np.empty(n, dtype=np.int64)
            tokens[svm.samples] = svm.tokens
        elif context.hard:
            svm = selection_svm(H, y, T, tokens, solver=strategy.vstep_solver)
        key = tokens.tobytes()
        if key in seen:
            continue
        seen.add(key)
        if context.hard and best() is not None and svm.norm >= best().norm:
            continue  # its nearly hard realisation would end near svm.norm: no better
        misses = 0
        c, nearest = _realise_or_nearest(context, tokens)
        if c is None:
            continue
        label = "nearest_selection" if nearest else "selection"
        yield f"{label}_{k}", context.descend(context.form.from_coefficients(c))
        k += 1


def _realise_or_nearest(context: _Context, tokens: np.ndarray) -> tuple[np.ndarray | None, bool]:
    """Token coefficients of the attention that realises ``tokens``, or, when none does
    (or only within the attention SVM's tolerance), of the nearest realisable selection's
    (the squared-hinge SVM, ``strategy.nearest_ridge``); and whether it is the nearest. Both
    SVMs run on the strategy's v-step engine."""
    strategy = context.strategy
    engine = strategy.vstep_solver
    H, T, R = context.H, context.T, context.R
    c = attention_svm(H, T, tokens, R, guard=current(), solver=engine)
    if c is not None:
        return c, False
    ridge = strategy.nearest_ridge
    return attention_svm(H, T, tokens, R, ridge=ridge, guard=current(), solver=engine), True


def _realisable_starts(context: _Context, deadline: float) -> Iterator:
    """Realisations of the improving selections of the realisable-selection search, best
    first; the search spends its budget of work (:data:`REALISABLE_WORK`) unless
    ``deadline``, the caller's guard, stops it."""
    if context.n > context.strategy.realisable_max_samples:
        return
    realiser = Realiser(context.H, context.T)
    if realiser.Z.shape[1] == context.n * context.T:  # every selection is realisable
        return
    # the whole (budgeted) search first: its early incumbents are far from its last
    found = list(
        realisable_selections(
            context.H,
            context.y,
            context.T,
            max_work=context.strategy.realisable_work,
            realiser=realiser,
            deadline=deadline,
        )
    )
    # it checks the clock before each node: past the deadline now, it was (or may have
    # been) stopped by it
    if context.past(deadline):
        return
    k = 0
    for tokens, _ in reversed(found):
        key = tokens.tobytes()
        if key in context.seen:
            continue
        context.seen.add(key)
        c, _ = _realise_or_nearest(context, tokens)
        if c is None:
            continue
        yield f"realisable_{k}", context.descend(context.form.from_coefficients(c))
        k += 1


def _continuation_starts(context: _Context) -> Iterator:
    k = 0
    direction = context.form.zeros()
    while True:
        yield f"continuation_{k}", context.continuation(direction)
        k += 1
        direction = context.random_direction()
        if direction is None:
            return


def _random_points(context: _Context) -> Iterator[np.ndarray]:
    """Random directions, alternately on the sphere and at a uniform radius in the ball."""
    k = 0
    while True:
        direction = context.random_direction()
        if direction is None:
            return
        yield direction * (context.R if k % 2 == 0 else context.R * context.rng.uniform())
        k += 1


def _random_starts(context: _Context) -> Iterator:
    for k, p0 in enumerate(_random_points(context)):
        yield f"random_extra_{k}", context.descend(p0)


def _screen_starts(context: _Context, deadline: float, scale: float) -> Iterator:
    """The screen's descents (module docstring), ``scale`` times its default size
    (:func:`search_starts`, ``screen_scale``); no start after ``deadline``
    (:meth:`_Context.past`)."""
    strategy = context.strategy
    if context.n > strategy.screen_max_samples:
        return
    H, T, R, form = context.H, context.T, context.R, context.form
    keep = round(strategy.screen_selections * scale)
    logger.info(
        "search: the screen begun (realisable selections, then short descents of %d steps)",
        strategy.screen_iter,
    )
    found = list(
        realisable_selections(
            H,
            context.y,
            T,
            max_work=round(strategy.screen_work * scale),
            keep=keep,
            deadline=deadline,
        )
    )
    if context.past(deadline):
        return
    pool = []
    chosen = sorted(found, key=lambda item: item[1])[:keep]
    progress = Progress("search screen: realising selections", len(chosen), "selections")
    for k, (tokens, _) in enumerate(chosen):
        progress.update(k)
        if tokens.tobytes() in context.seen:  # descended already by another family
            continue
        c = attention_svm(H, T, tokens, R, solver=strategy.vstep_solver)
        if c is not None:
            pool.append(form.from_coefficients(c))
    pool.extend(itertools.islice(_random_points(context), round(strategy.screen_random * scale)))
    short = {**context.options, "max_iter": strategy.screen_iter}
    screened = []
    progress = Progress("search screen: short descents", len(pool), "descents")
    for k, p0 in enumerate(pool):
        if context.past(deadline):
            return
        progress.update(k)
        run = descend(form, context.y, p0, R, **short)
        if run.point.feasible:
            screened.append((run.norm, len(screened), run.point.p))
    for k, (_, _, p) in enumerate(
        sorted(screened)[: round(strategy.screen_top * math.sqrt(scale))]
    ):
        if context.past(deadline):
            return
        yield f"screen_{k}", context.descend(p)
