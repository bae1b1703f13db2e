"""The min-norm interpolator P_R of single-head attention, from several starts, with a certificate.

    (P_R)  minimize ||v||  s.t.  y_i f(X_i; v, p) >= 1 for all i,  ||p|| <= R,

with f(X; v, p) = v^T X^T softmax(X p) (docs/theory.md, min-norm section). P_R is non-convex
in p, so :func:`solve_min_norm` runs the alternating solver
(:func:`margin_solver.alternating.descend`) from several starts and keeps the smallest
feasible norm:

``"zero"``
    p = 0 (uniform attention).
``"first_step"``
    The token selection induced by the first GD step's v, ``v_1 ∝ sum_i y_i xbar_i`` (each
    sample's token with the largest ``y_i <v_1, x_it>``), realised by the attention-SVM p of
    norm R (:func:`margin_solver.selection.attention_svm`).
``"hard_selection"``
    The hard-selection alternation from that selection (best token for v, SVM on those
    tokens, repeat), realised the same way.
``"lb_selection"``
    With ``certify=True``: the selection of the lower bound LB, realised the same way; as R
    grows P_R approaches LB through it whenever the selection is linearly separable.
``"random_k"``
    ``n_random_starts`` seeded random p of norm R in the span of the tokens.

Starts whose selection repeats an earlier one are not re-run. With ``certify=True`` the
hard-selection bound LB (:func:`margin_solver.bounds.global_lower_bound`) gives a lower bound
valid for every R and the relative ``gap = (norm - lower_bound) / norm``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collections.abc import Mapping

from margin_solver.alternating import (
    DenseForm,
    DescentRun,
    KernelForm,
    check_descent_options,
    descend,
    norm,
)
from margin_solver.blas import single_threaded_blas
from margin_solver.bounds import (
    BOUND_METHODS,
    LowerBoundResult,
    first_step_margins,
    trusted_lower_bound,
)
from margin_solver.data import Dataset, as_dataset
from margin_solver.kernel import TokenGram, margins
from margin_solver.progress import ProgressBar
from margin_solver.ooc import is_on_disk
from margin_solver.results import FAILED, INFEASIBLE, ResultMixin
from margin_solver.selection import attention_svm, best_tokens, hard_selection_alternation
from margin_solver.validation import (
    InvalidInputError,
    check_int,
    check_labels,
    check_magnitude,
    check_positive,
    check_seed,
    check_tokens,
)

__all__ = ["FORMS", "MinNormResult", "solve_min_norm"]

logger = logging.getLogger("margin_solver")

FORMS = ("auto", "kernel", "dense")


@dataclass(repr=False)
class MinNormResult(ResultMixin):
    """Approximate solution of P_R with its certificate.

    Attributes
    ----------
    v, p : ndarray of shape (n_features,) or None
        The value head and attention vector (dense); None when infeasible.
    norm : float
        ``||v||`` (an upper bound on the optimal value of P_R); inf when infeasible.
    margin : float
        ``1 / norm``, the margin of the equivalent max-margin problem (``||v|| <= 1``).
    lower_bound : float or None
        The certified global lower bound LB on the optimal value (``certify=True``), else None.
    gap : float
        ``(norm - lower_bound) / norm``; NaN without certification.
    status : str
        ``"optimal"`` (the best start met a stopping test: a stationary point, globally within
        ``gap`` when certified), ``"max_iter"``, ``"infeasible"``, or ``"failed"`` when every
        v-step engine broke down at the starts (no statement about feasibility).
    message : str
    R : float
        The radius of the ball on p.
    p_norm : float
        ``||p||`` (at most R).
    min_margin : float
        ``min_i y_i f(X_i; v, p)`` recomputed in dense form (1 up to rounding).
    attention : ndarray of shape (n_samples, n_tokens) or None
        ``softmax(X_i p)``.
    selected_token : ndarray of int, shape (n_samples,) or None
        Argmax of each sample's attention.
    start : str or None
        Name of the winning start.
    start_norms : dict
        Final ``||v||`` of every start (inf when infeasible there).
    n_iter : int
        Accepted p-steps of the winning start.
    history : dict
        Per iteration of the winning start: ``"norm"`` (``||v*(p)||``) and ``"pg_norm"``
        (projected gradient norm of phi).
    form : str
        ``"kernel"`` or ``"dense"``.
    solve_time : float
        Wall-clock seconds, including certification.
    bound : LowerBoundResult or None
        The full lower-bound result when certified.
    vstep_fallbacks : int
        v-step solves of the descent where the LDP engine raised or was inaccurate and another
        engine (ECOS, then Clarabel) stood in; the message then names the last failure.
    """

    v: np.ndarray | None
    p: np.ndarray | None
    norm: float
    margin: float
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
    n_iter: int
    history: dict[str, list[float]] = field(default_factory=dict)
    form: str = "kernel"
    solve_time: float = 0.0
    bound: LowerBoundResult | None = None
    vstep_fallbacks: int = 0


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
    bound_time_limit: float = 30.0,
    progress: bool = False,
    options: Mapping[str, Any] | None = None,
) -> MinNormResult:
    """Approximately solve P_R by alternating v-steps with projected quasi-Newton p-steps.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, n_features) or Dataset
        Training tokens; a :class:`~margin_solver.data.Dataset` supplies its own ``y``
        (then leave ``y`` as None). A Dataset with tokens on disk (a dataset directory,
        :mod:`margin_solver.ondisk`) runs in the kernel form with the passes over X in blocks
        (:mod:`margin_solver.ooc`; on Dask inside ``ooc.execution(scheduler=...)``).
    y : array-like of shape (n_samples,), optional
        Labels in {-1, +1}; required unless ``X`` is a Dataset.
    R : float
        Radius of the ball ``||p|| <= R`` (positive, finite). Scores ``X_i p`` are of order
        ``R * ||x||``; for the paper's data (noise tokens of norm about ``sigma sqrt(d)``)
        ``R = 1 / sqrt(d)`` gives soft attention and ``R = 100 / sqrt(d)`` nearly hard
        selection.
    certify : bool, default=False
        Also compute the global lower bound LB and the relative gap.
    form : {"auto", "kernel", "dense"}, default="auto"
        ``"kernel"`` works on the token Gram matrix (per-iteration cost independent of d),
        ``"dense"`` on vectors of R^d; ``"auto"`` picks kernel when ``d > n T``. Both build
        the (nT, nT) token Gram matrix once, for the selection starts and the bound.
    n_random_starts : int, default=2
        Random starts in addition to the deterministic ones.
    seed : int or None, default=0
        Seed of the random starts (numpy Generator).
    max_iter : int, default=500
        Cap on accepted p-steps per start.
    gtol, rtol : float, default=1e-6, 1e-7
        Stopping tolerances of :func:`margin_solver.alternating.descend`: relative projected
        gradient norm, and relative decrease of phi = ||v||^2 / 2 over 10 steps.
    bound_method : {"auto", "enumerate", "bnb"}, default="auto"
        Method of the lower bound (with ``certify``).
    bound_time_limit : float, default=30.0
        Seconds for the branch-and-bound (with ``certify``); on time-out the bound proven so
        far is used.
    progress : bool, default=False
        Show progress bars on stderr: the lower bound's, then one over the starts (with the
        best norm so far).
    options : mapping, optional
        Knobs of the descent from each start (:func:`margin_solver.alternating.descend`),
        for benchmarks and experts; unknown keys raise. Keys and defaults:

        ``"memory"`` : int >= 0, default 30
            L-BFGS curvature pairs kept; 0 takes projected-gradient directions only.
        ``"use_bb"`` : bool, default True
            Barzilai-Borwein trial lengths for projected-gradient steps; False uses the
            doubling schedule alone.
        ``"window"`` : int >= 1, default 10
            Accepted steps over which the ``rtol`` test measures the decrease of phi.
        ``"vstep_solver"`` : {"ldp", "ecos", "clarabel"}, default "ldp"
            v-step engine tried first (the others stand in when it fails).

        ``{"memory": 0, "use_bb": False}`` is the plain projected-gradient method that the
        quasi-Newton descent replaced (docs/benchmarks.md, "Convergence on digits").

    Returns
    -------
    MinNormResult

    Raises
    ------
    InvalidInputError
        On malformed X or y, a missing, non-positive or non-finite R, or bad options
        (including unknown ``options`` keys).

    Examples
    --------
    >>> from margin_solver.data import PaperDistribution
    >>> ds = PaperDistribution(d=100, snr=0.5, eta=0.0).sample(8, seed=0)
    >>> res = solve_min_norm(ds, R=10.0, certify=True)
    >>> res.status, res.min_margin >= 1 - 1e-7, res.gap < 1e-3
    ('optimal', True, True)
    """
    start_time = time.perf_counter()
    X, y = _inputs(X, y)
    if R is None:
        raise InvalidInputError("R (the radius of the ball ||p|| <= R) is required.")
    R = check_positive(R, "R")
    _check_choices(form, n_random_starts, max_iter)
    seed = check_seed(seed)
    gtol, rtol = check_positive(gtol, "gtol"), check_positive(rtol, "rtol")
    descent = {"max_iter": max_iter, "gtol": gtol, "rtol": rtol, **check_descent_options(options)}
    if certify:
        if bound_method not in BOUND_METHODS:
            raise InvalidInputError(
                f"Unknown bound_method {bound_method!r}; expected one of {list(BOUND_METHODS)}."
            )
        bound_time_limit = check_positive(bound_time_limit, "bound_time_limit", allow_inf=True)
    n, T, d = X.shape
    if is_on_disk(X) and form == "dense":
        raise InvalidInputError(
            "form='dense' needs the tokens in memory; tokens on disk run in the kernel form "
            "(form='auto' or 'kernel')."
        )
    use_kernel = form == "kernel" or (form == "auto" and (d > n * T or is_on_disk(X)))
    gram = TokenGram(X)
    solver_form = KernelForm(X, gram) if use_kernel else DenseForm(X)
    with single_threaded_blas():
        bound = None
        if certify:
            bound = trusted_lower_bound(
                gram.H, y, T, bound_method, bound_time_limit, progress, time.perf_counter()
            )
            if bound.status == INFEASIBLE:
                return _infeasible(R, solver_form.name, bound.message, bound, start_time)
        starts = list(_starts(solver_form, gram.H, y, T, R, n_random_starts, seed, bound))
        with ProgressBar(progress, total=len(starts), desc="P_R starts", unit="start") as bar:
            runs, start_norms = _run_starts(solver_form, gram.H, y, T, R, starts, descent, bar)
    feasible = {k: r for k, r in runs.items() if r.point.feasible}
    if feasible:
        name = min(feasible, key=lambda k: feasible[k].norm)
        result = _result(X, y, R, solver_form, name, feasible[name], start_norms, bound, start_time)
    else:
        failed = [r for r in runs.values() if r.point.vstep.status == FAILED]
        if failed:  # every v-step engine broke down: that says nothing about feasibility
            status, why = FAILED, f"the v-step failed at a start point; {failed[0].reason}"
        else:
            why = next(iter(runs.values())).reason if runs else "no start could be built"
            status, why = INFEASIBLE, f"infeasible: the v-step fails at every start; {why}"
        result = _infeasible(R, solver_form.name, why, bound, start_time, start_norms, status)
    result.vstep_fallbacks, note = _fallback_note(runs)
    result.message += note
    return result


def _fallback_note(runs: dict[str, DescentRun]) -> tuple[int, str]:
    """Number of v-step solves that fell back from the LDP engine, and a message suffix."""
    count = sum(run.fallbacks for run in runs.values())
    if not count:
        return 0, ""
    last = next(r.last_fallback for r in reversed(runs.values()) if r.fallbacks)
    return count, f"; {count} v-step solve(s) fell back to another engine (last: {last})"


def _run_starts(
    form, H, y, T, R, starts, descent, bar
) -> tuple[dict[str, DescentRun], dict[str, float]]:
    """Descend from every start; a start repeating an earlier selection reuses its norm.

    Selections are realised here, after that check, since each realisation is an SVM with
    n (T - 1) constraints (a third of the whole solve's time at n = 100, T = 4).
    """
    runs: dict[str, DescentRun] = {}
    start_norms: dict[str, float] = {}
    seen: dict[tuple[int, ...], str] = {}
    for name, p0, selection in starts:
        key = None if selection is None else tuple(int(t) for t in selection)
        if key in seen:
            start_norms[name] = start_norms[seen[key]]
        else:
            if key is not None:
                seen[key] = name
                p0 = _realise(form, H, T, selection, R)
            if p0 is None:
                start_norms[name] = math.inf
            else:
                run = runs[name] = descend(form, y, p0, R, **descent)
                start_norms[name] = run.norm
                logger.info("start %s: ||v|| = %.6g (%s, %d steps)", name, run.norm,
                            run.reason, run.n_iter)
        bar.update(1, start=name, best=f"{min(start_norms.values()):.6g}")
    return runs, start_norms


def _inputs(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(X, Dataset) or y is None:
        data = as_dataset(X, y)
        if is_on_disk(data.X):  # checked block by block in the Gram pass (TokenGram)
            return data.X, data.y.astype(np.float64)
        return check_magnitude(data.X, "X"), data.y.astype(np.float64)
    # plain arrays skip Dataset, whose n >= 2 rule P_R does not need
    X = check_magnitude(check_tokens(X), "X")
    return X, check_labels(y, X.shape[0])


def _check_choices(form: str, n_random_starts: Any, max_iter: Any) -> None:
    if form not in FORMS:
        raise InvalidInputError(f"Unknown form {form!r}; expected one of {list(FORMS)}.")
    check_int(n_random_starts, "n_random_starts", 0)
    check_int(max_iter, "max_iter", 1)


def _starts(form, H, y, T, R, n_random, seed, bound):
    """Yield ``(name, p0, selection)``: a selection start has p0 None (realised by
    :func:`_run_starts`), a random start p0 None when it is the zero vector."""
    yield "zero", form.zeros(), None
    margins0 = first_step_margins(H, y, T)
    first = best_tokens(margins0)
    yield "first_step", None, first
    hard = hard_selection_alternation(H, y, T, margins0)
    if hard.feasible:
        yield "hard_selection", None, hard.tokens
    if bound is not None and bound.selection is not None:
        yield "lb_selection", None, bound.selection
    n = len(y)
    rng = np.random.default_rng(seed)
    for k in range(n_random):
        p = form.from_coefficients(rng.standard_normal((n, T)))
        length = norm(form, p)
        yield f"random_{k}", (p * (R / length) if length > 0 else None), None


def _realise(form, H, T, selection, R):
    c = attention_svm(H, T, selection, R)
    return None if c is None else form.from_coefficients(c)


def _result(X, y, R, form, name, run, start_norms, bound, start_time) -> MinNormResult:
    point = run.point
    if isinstance(form, KernelForm):  # v and p in one pass over X
        v, p = TokenGram.materialize(X, np.stack([point.value_coefficients, point.p]))
    else:
        v, p = TokenGram.materialize(X, point.value_coefficients), point.p
    norm = run.norm
    lower = None if bound is None else bound.value
    gap = math.nan if lower is None else (norm - lower) / norm
    message = f"best of {len(start_norms)} starts: {name!r}, ||v|| = {norm:.6g} ({run.reason})"
    if bound is not None:
        message += f"; lower bound {lower:.6g} ({bound.status}), gap {gap:.3g}"
    return MinNormResult(
        v=v,
        p=p,
        norm=norm,
        margin=1.0 / norm,
        lower_bound=lower,
        gap=gap,
        status=run.status,
        message=message,
        R=R,
        p_norm=float(np.linalg.norm(p)),
        min_margin=float(np.min(margins(X, y, v, p))),
        attention=point.attention,
        selected_token=np.argmax(point.attention, axis=1),
        start=name,
        start_norms=start_norms,
        n_iter=run.n_iter,
        history={"norm": run.norm_history, "pg_norm": run.pg_history},
        form=form.name,
        solve_time=time.perf_counter() - start_time,
        bound=bound,
    )


def _infeasible(
    R, form_name, message, bound, start_time, start_norms=None, status=INFEASIBLE
) -> MinNormResult:
    return MinNormResult(
        v=None,
        p=None,
        norm=math.inf,
        margin=0.0,
        lower_bound=None if bound is None else bound.value,
        gap=math.nan,
        status=status,
        message=message,
        R=R,
        p_norm=math.nan,
        min_margin=math.nan,
        attention=None,
        selected_token=None,
        start=None,
        start_norms=start_norms or {},
        n_iter=0,
        form=form_name,
        solve_time=time.perf_counter() - start_time,
        bound=bound,
    )
