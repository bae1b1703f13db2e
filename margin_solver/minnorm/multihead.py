"""Multi-head attention: f(X) = sum_h v_h^T X^T softmax(X p_h), h = 1..H, and its min-norm problem.

The min-norm problem with H heads (docs/theory.md, "Multi-head attention"):

    (P_R^H)  minimize ||(v_1, ..., v_H)||  s.t.  y_i f(X_i) >= 1 for all i,
             ||(p_1, ..., p_H)|| <= R,

norms of the concatenations. For fixed p_1..p_H the v-step is the single-head SVM on the
concatenated attended features ``(z_i^1, ..., z_i^H)``, ``z_i^h = X_i^T softmax(X_i p_h)``, whose
Gram matrix is the sum over heads of the per-head feature Grams; the envelope gradient of
``phi = ||v*||^2 / 2`` has one block per head (each head's softmax sees only its own scores).
:class:`MultiHeadForm` gives :func:`margin_solver.descent.alternating.descend` exactly that, so the
descent runs unchanged on H heads.

P_R^H contains P_R: the point ``p = (p*, 0, ..., 0)``, ``v = (v*, 0, ..., 0)`` built from any
single-head solution is feasible with the same norm, so the H-head optimum never exceeds the
single-head one at the same R. :func:`solve_min_norm_heads` starts from that point (after
solving the single-head problem with :func:`margin_solver.minnorm.solve.solve_min_norm`) and the
descent only lowers the norm, so its answer never exceeds the single-head answer either.
The lower bound and certificate of the single-head solver do not extend to H > 1 heads (the
hard-selection bound assumes one attention per sample), so multi-head answers are never
``"optimal"``: at best ``"local_optimal"``, with the message saying "not certified".
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from margin_solver.core.data import as_dataset
from margin_solver.core.guard import Guard, TimeLimitReached
from margin_solver.core.kernel import TokenGram, multihead_outputs
from margin_solver.core.results import (
    INACCURATE,
    INFEASIBLE,
    LOCAL_OPTIMAL,
    MAX_ITER,
    NO_FEASIBLE_POINT_FOUND,
    SOLUTION_PRESENT,
    TIME_LIMIT,
    ConvergenceWarning,
)
from margin_solver.core.validation import (
    InvalidInputError,
    check_int,
    check_memory,
    check_radius,
    check_seed,
)
from margin_solver.descent.alternating import (
    DenseForm,
    KernelForm,
    check_descent_options,
    descend,
    norm,
)
from margin_solver.minnorm.solve import FEAS_TOL, MinNormResult, solve_min_norm

__all__ = [
    "MultiHeadForm",
    "MultiHeadMinNormResult",
    "solve_min_norm_heads",
]


class MultiHeadForm:
    """H heads' attention vectors in a single-head form's representation, stacked on axis 0.

    Implements the form protocol of :func:`margin_solver.descent.alternating.descend` (``zeros``,
    ``from_coefficients``, ``scores``, ``inner``, ``metric``, ``feature_gram``,
    ``token_values``, ``dense``) for ``p = (p_1, ..., p_H)``: scores, attention and token
    coefficients have shape (H, n, T); the inner product is the sum of the heads'; the feature
    Gram matrix is the sum of the heads' (the Gram matrix of the concatenated features).
    Every operation is one batched product over all heads (a Python loop over the heads made
    one descent step of 10**5 heads take seconds: issue 43), costing H times the single-head
    one.

    Parameters
    ----------
    base : DenseForm or KernelForm
        The single-head form of the same tokens.
    heads : int
    """

    def __init__(self, base: DenseForm | KernelForm, heads: int):
        self.base = base
        self.heads = heads
        self.name = base.name
        self.X = base.X
        self.n, self.T, self.d = base.n, base.T, base.d
        # the token Gram matrix: the kernel form's own; the dense form's (d <= nT there)
        self._H = base.token_gram_matrix()

    def _apply(self, a: np.ndarray) -> np.ndarray:
        """``H a_h`` for every head (H is symmetric); shape (H, n, T)."""
        m = self.n * self.T
        return (a.reshape(-1, m) @ self._H).reshape(-1, self.n, self.T)

    def zeros(self) -> np.ndarray:
        """All heads' attention vectors zero."""
        return np.zeros((self.heads, *self.base.zeros().shape))

    def from_coefficients(self, coef: np.ndarray) -> np.ndarray:
        """Per head ``sum_it coef_hit x_it`` for coefficients of shape (H, n, T)."""
        return self.base.from_coefficients(coef)  # both forms take a stack of coefficients

    def scores(self, p: np.ndarray) -> np.ndarray:
        """Scores ``X_i p_h``; shape (H, n, T)."""
        if self.name == "kernel":
            return self._apply(p)
        flat = self.X.reshape(self.n * self.T, self.d)
        return (p @ flat.T).reshape(-1, self.n, self.T)

    def inner(self, a: np.ndarray, b: np.ndarray) -> float:
        """``sum_h <a_h, b_h>``, the inner product of the concatenations."""
        return float(np.sum(self.metric(a) * b))

    def metric(self, a: np.ndarray) -> np.ndarray:
        """The base form's metric per head."""
        return self._apply(a) if self.name == "kernel" else a

    def feature_gram(self, s: np.ndarray) -> np.ndarray:
        """``K = sum_h K_h``, ``K_h`` the feature Gram of head h's attention ``s[h]``:
        ``K_ij = sum_tr H_{it,jr} M_{it,jr}`` with ``M = sum_h s_h s_h^T`` (one product for
        all heads)."""
        n, T = self.n, self.T
        W = s.reshape(-1, n * T)
        K = (self._H * (W.T @ W)).reshape(n, T, n, T).sum(axis=(1, 3))
        return (K + K.T) / 2

    def token_values(self, a: np.ndarray) -> np.ndarray:
        """``<x_it, v_h>`` for token coefficients ``a`` of shape (H, n, T); shape (H, n, T)."""
        return self._apply(a)

    def dense(self, p: np.ndarray) -> np.ndarray:
        """The heads' attention vectors as rows of shape (H, d)."""
        return self.base.dense(p)  # both forms take a stack


@dataclass(repr=False)
class MultiHeadMinNormResult(MinNormResult):
    """:class:`~margin_solver.minnorm.solve.MinNormResult` of P_R^H.

    For ``heads > 1``: ``v`` and ``p`` have shape (H, d), ``attention`` shape (H, n, T),
    ``selected_token`` is the argmax of the heads' mean attention; ``norm`` and ``p_norm`` are
    norms of the concatenations; ``lower_bound`` is None and ``certified`` False (no bound
    for H > 1 heads). Extra attributes:

    heads : int
    single_head_norm : float
        ``||v||`` of the single-head solve the H-head descent started from (the H-head
        ``norm`` is at most this, up to the feasibility repair).
    """

    heads: int = 1
    single_head_norm: float = math.nan


def _random_starts(form: MultiHeadForm, R: float, count: int, seed) -> Iterator[tuple[str, Any]]:
    """Yield the random starts one at a time: ``count`` may be any number (the time limit
    stops them), and memory does not grow with it."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        p = form.from_coefficients(rng.standard_normal((form.heads, form.n, form.T)))
        length = norm(form, p)
        if length > 0:
            yield f"random_{k}", p * (R / length)


def _starts(
    form: MultiHeadForm, gram: TokenGram, single: MinNormResult, R: float, count: int, seed
) -> Iterator[tuple[str, Any]]:
    """The starts of the H heads, drawn one at a time: from the single-head point (when
    there is one) ``(p*, 0, ..., 0)`` and ``(p*, ..., p*) / sqrt(H)``, then the random ones."""
    if single.p is not None and single.status in SOLUTION_PRESENT:
        p1 = _in_form(form, gram, single.p)
        yield "single_head", np.concatenate([p1[None], form.zeros()[1:]])
        yield "split", np.broadcast_to(p1 / math.sqrt(form.heads), (form.heads, *p1.shape)).copy()
    yield from _random_starts(form, R, count, seed)


def _in_form(form: MultiHeadForm, gram: TokenGram, p: np.ndarray) -> np.ndarray:
    """A dense single-head vector in the base form's representation (its projection on the
    token span, which has the same scores)."""
    if form.name == "dense":
        return p
    n, T, d = form.X.shape
    scores = form.X.reshape(n * T, d) @ p
    c = np.linalg.lstsq(gram.H, scores, rcond=None)[0]
    return c.reshape(n, T)


def solve_min_norm_heads(
    X: Any,
    y: Any = None,
    R: Any = None,
    *,
    heads: int = 1,
    form: str = "auto",
    n_random_starts: int = 2,
    seed: int | None = 0,
    max_iter: int = 500,
    gtol: float = 1e-6,
    rtol: float = 1e-7,
    time_limit: float = math.inf,
    options: dict[str, Any] | None = None,
    **single_head: Any,
) -> MinNormResult:
    """Approximately solve P_R^H (H heads; module docstring).

    ``heads=1`` is :func:`margin_solver.minnorm.solve.solve_min_norm` itself (every keyword passes
    through). For ``heads > 1``: the single-head problem is solved first (same keywords), then
    the alternating descent runs on the H heads from ``(p*, 0, ..., 0)`` (start
    ``"single_head"``), from ``(p*, ..., p*) / sqrt(H)`` (``"split"``) and from
    ``n_random_starts`` random points of norm R in the token span; the smallest feasible norm
    wins. Never certified for ``heads > 1`` (no lower bound extends; docs/theory.md).
    ``time_limit`` covers the whole call: when it passes before any start of the H heads ran,
    the answer is the single-head point in head 1 (the other heads zero), status
    ``"time_limit"``.

    Parameters
    ----------
    X, y, R, form, n_random_starts, seed, max_iter, gtol, rtol, time_limit, options
        As in :func:`margin_solver.minnorm.solve.solve_min_norm`; ``R`` bounds the norm of the
        concatenation ``(p_1, ..., p_H)``.
    heads : int, default=1
    **single_head
        Further keywords of :func:`~margin_solver.minnorm.solve.solve_min_norm` (``certify``,
        ``search_starts``, ...) for the single-head solve.

    Returns
    -------
    MinNormResult
        A :class:`MultiHeadMinNormResult` when ``heads > 1``.

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> ds = PaperDistribution(d=60, snr=0.5, eta=0.0).sample(8, seed=0)
    >>> one = solve_min_norm_heads(ds, R=3.0)
    >>> two = solve_min_norm_heads(ds, R=3.0, heads=2)
    >>> two.v.shape, two.status, bool(two.norm <= one.norm)
    ((2, 60), 'local_optimal', True)
    """
    heads = check_int(heads, "heads", 1)
    common = {
        "form": form,
        "n_random_starts": n_random_starts,
        "seed": seed,
        "max_iter": max_iter,
        "gtol": gtol,
        "rtol": rtol,
        "time_limit": time_limit,
        "options": options,
    }
    if heads == 1:
        return solve_min_norm(X, y, R, **common, **single_head)
    start_time = time.perf_counter()
    data = as_dataset(X, y)
    if R is None:
        raise InvalidInputError("R (the radius of the ball ||(p_1, ..., p_H)|| <= R) is required.")
    R = check_radius(R)
    seed = check_seed(seed)
    descent = {"max_iter": max_iter, "gtol": gtol, "rtol": rtol, **check_descent_options(options)}
    _check_heads_memory(data.X.shape, form, heads, descent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # judged below, as H heads
        single = solve_min_norm(data, None, R, **common, **single_head)
    Xd, yf = data.X, data.y.astype(np.float64)
    n, T, d = Xd.shape
    if single.status == INFEASIBLE and "same tokens" in single.message:
        # order-blind outputs: the proof covers any number of heads
        single.message += f" (holds for any number of heads, here {heads})"
        warnings.warn(
            f"solve_min_norm_heads returned status {single.status!r}: {single.message}",
            ConvergenceWarning,
            stacklevel=2,
        )
        return _as_heads(single, heads)
    # one guard for the whole call: the single-head solve counted from its own start, a
    # moment later, so nothing of the H heads runs past this deadline
    guard = Guard(deadline=start_time + time_limit)
    runs = {}
    stopped = False  # by the time limit, before every start had run
    try:
        # the same product as the single-head set-up's, under the same limit
        gram = TokenGram(Xd, guard)
    except TimeLimitReached:
        stopped = True
    if not stopped:
        base = KernelForm(Xd, gram) if single.form == "kernel" else DenseForm(Xd)
        mform = MultiHeadForm(base, heads)
        starts = _starts(mform, gram, single, R, n_random_starts, seed)
        while not (stopped := guard.passed()):  # checked before a start is drawn
            try:
                name, p0 = next(starts)
            except StopIteration:
                break
            runs[name] = descend(mform, yf, p0, R, **descent, deadline=guard.deadline)
    if not runs and stopped and single.p is not None and single.status in SOLUTION_PRESENT:
        return _single_head_point(single, heads, data, time_limit, start_time)
    start_norms = {k: r.norm for k, r in runs.items()}
    feasible = {k: r for k, r in runs.items() if r.point.feasible}
    if not feasible:
        result = _as_heads(single, heads)
        result.status = NO_FEASIBLE_POINT_FOUND
        result.v = result.p = result.attention = result.selected_token = None
        result.norm, result.lower_bound, result.certified = math.inf, None, False
        result.message = f"no feasible point found for {heads} heads: " + (
            f"the time limit (time_limit={time_limit:g} s) passed before any start of the "
            f"{heads} heads ran, and the single-head solve found none ({single.status})"
            if not runs
            else f"the v-step is infeasible at the final p of every start ({len(runs)} run); "
            "infeasibility is not proven"
        )
        result.start_norms = start_norms
        result.solve_time = time.perf_counter() - start_time
        warnings.warn(
            f"solve_min_norm_heads returned status {result.status!r}: {result.message}",
            ConvergenceWarning,
            stacklevel=2,
        )
        return result
    name = min(feasible, key=lambda k: feasible[k].norm)
    run = feasible[name]
    point = run.point
    V = TokenGram.materialize(Xd, point.value_coefficients)  # (H, d): one pass for all heads
    P = mform.dense(point.p)
    result_norm = run.norm
    min_margin = float(np.min(yf * multihead_outputs(Xd, V, P)))
    message = (
        f"{heads} heads: best of {len(runs)} starts: {name!r}, ||v|| = {result_norm:.6g} "
        f"({run.reason}); single-head ||v|| = {single.norm:.6g}"
    )
    repaired = False
    if 0 < min_margin < 1 - FEAS_TOL:
        V, repaired = V / min_margin, True
        result_norm = float(np.linalg.norm(V))
        message += f"; v rescaled by 1/min_margin = {1 / min_margin:.9g} to restore feasibility"
        min_margin = float(np.min(yf * multihead_outputs(Xd, V, P)))
    timed_out = stopped or any(r.status == TIME_LIMIT for r in runs.values())
    if stopped:
        message += (
            f"; stopped by the time limit (time_limit={time_limit:g} s) after {len(runs)} "
            f"starts of the {heads} heads, the others not run"
        )
    if min_margin < 1 - FEAS_TOL:
        status = INACCURATE
        message += f"; the point violates the constraints: min margin {min_margin:.9g}"
    else:
        status = TIME_LIMIT if timed_out else MAX_ITER if run.status == MAX_ITER else LOCAL_OPTIMAL
        message += (
            "; not certified: no lower bound covers H > 1 heads (docs/theory.md, "
            "'Multi-head attention')"
        )
    result = MultiHeadMinNormResult(
        v=V,
        p=P,
        norm=result_norm,
        lower_bound=None,
        gap=math.nan,
        status=status,
        message=message,
        R=R,
        p_norm=float(np.linalg.norm(P)),
        min_margin=min_margin,
        attention=point.attention,
        selected_token=np.argmax(point.attention.mean(axis=0), axis=1),
        start=name,
        start_norms=start_norms,
        nit=run.n_iter,
        history={"norm": run.norm_history, "pg_norm": run.pg_history},
        form=base.name,
        solve_time=time.perf_counter() - start_time,
        vstep_fallbacks=sum(r.fallbacks for r in runs.values()),
        certified=False,
        repaired=repaired,
        heads=heads,
        single_head_norm=single.norm,
        classes=data.classes,
    )
    if not result.success:
        warnings.warn(
            f"solve_min_norm_heads returned status {result.status!r}: {message}",
            ConvergenceWarning,
            stacklevel=2,
        )
    return result


def _check_heads_memory(shape: tuple[int, int, int], form: str, heads: int, descent) -> None:
    """Refuse, before the single-head solve, heads whose descent cannot fit: its iterate,
    trial point, gradient and working copies and the quasi-Newton pairs (``memory`` of the
    strategy table), each H vectors of the form's width (min(d, nT) in the automatic form)."""
    n, T, d = shape
    width = {"dense": d, "kernel": n * T}.get(form, min(d, n * T))
    arrays = 2 * descent["memory"] + 10
    check_memory(
        8 * arrays * heads * width,
        f"the descent of {heads} heads ({arrays} arrays of {heads} x {width} floats: iterates, "
        "gradients and the quasi-Newton pairs)",
        "use fewer heads",
    )


def _single_head_point(
    single: MinNormResult, heads: int, data: Any, time_limit: float, start_time: float
) -> MultiHeadMinNormResult:
    """The single-head answer as a point of the H heads (head 1 its ``(v, p)``, the other
    heads' ``v`` and ``p`` zero: the same outputs and norm), status ``time_limit``: the best
    answer so far when the time limit passed before any start of the H heads ran."""
    n, T, d = data.X.shape
    V, P = np.zeros((heads, d)), np.zeros((heads, d))
    V[0], P[0] = single.v, single.p
    attention = np.full((heads, n, T), 1.0 / T)  # softmax of the zero scores
    attention[0] = single.attention
    message = (
        f"{heads} heads: the single-head point ({single.start!r}, ||v|| = {single.norm:.6g}) "
        f"in head 1, the other heads zero; stopped by the time limit (time_limit="
        f"{time_limit:g} s) before any start of the {heads} heads ran; not certified: no "
        "lower bound covers H > 1 heads"
    )
    result = MultiHeadMinNormResult(
        v=V,
        p=P,
        norm=single.norm,  # ||V|| with zero rows: single.norm, not a 2-d sum's rounding of it
        lower_bound=None,
        gap=math.nan,
        status=TIME_LIMIT,
        message=message,
        R=single.R,
        p_norm=float(np.linalg.norm(P)),
        min_margin=single.min_margin,  # the zero heads add exactly 0 to every output
        attention=attention,
        selected_token=np.argmax(attention.mean(axis=0), axis=1),
        start="single_head",
        start_norms={},
        nit=0,
        history={"norm": [], "pg_norm": []},
        form=single.form,
        solve_time=time.perf_counter() - start_time,
        vstep_fallbacks=single.vstep_fallbacks,
        certified=False,
        repaired=False,
        heads=heads,
        single_head_norm=single.norm,
        classes=single.classes,
    )
    warnings.warn(
        f"solve_min_norm_heads returned status {result.status!r}: {message}",
        ConvergenceWarning,
        stacklevel=3,
    )
    return result


def _as_heads(single: MinNormResult, heads: int) -> MultiHeadMinNormResult:
    fields = {k: getattr(single, k) for k in single.__dataclass_fields__}
    return MultiHeadMinNormResult(**fields, heads=heads, single_head_norm=single.norm)
