"""Hard token selections: one chosen token per sample (docs/theory.md, min-norm section).

Three small tools shared by the min-norm solver's starts (:mod:`margin_solver.minnorm.solve`) and
the global lower bound (:mod:`margin_solver.bounds.lower`), all in token-Gram form (they read only
``H[i, t, j, r] = <x_it, x_jr>``, flattened to shape (nT, nT)):

* :func:`selection_svm` -- the hard-margin SVM on the selected tokens, ``minimize ||v|| s.t.
  y_i <v, x_{i, sel_i}> >= 1`` over some or all samples (the node bound of branch-and-bound
  and, over all samples, the value of one selection in LB);
* :func:`hard_selection_alternation` -- select each sample's best token for the current v,
  solve the SVM on the selected tokens, repeat; the norm never increases;
* :func:`attention_svm` -- the attention vector ``p`` of norm ``R`` that singles a selection
  out: ``minimize ||p|| s.t. <p, x_{i, sel_i} - x_it> >= 1`` for every ``t != sel_i``, rescaled.

All SVMs go through :func:`margin_solver.svm.vstep.solve_trusted_vstep` (the v-step on a Gram
matrix built here from validated tokens, so not re-validated) with the exact LDP engine, falling
back to ECOS and Clarabel if LDP raises (so an engine failure is never taken for an infeasible
selection, which would make the lower bound invalid).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from margin_solver.core.guard import Guard, TimeLimitReached
from margin_solver.core.strategy import DEFAULT_STRATEGY
from margin_solver.core.tolerances import SAME_TOKEN_RTOL
from margin_solver.core.validation import InvalidInputError, check_radius, check_tokens
from margin_solver.svm.vstep import solve_trusted_vstep, solve_vstep_on_support

__all__ = [
    "SelectionSVM",
    "aggregated_lift",
    "attention_svm",
    "best_tokens",
    "hard_selection_alternation",
    "lifted_bounds",
    "selection_key",
    "selection_rows",
    "selection_svm",
    "signed_token_gram",
    "solve_attention_svm",
    "token_margins",
]


logger = logging.getLogger("margin_solver")

#: Attention SVMs with at least this many constraints are announced in verbose output (their
#: one factorisation takes seconds and shows no progress of its own).
_ANNOUNCE_CONSTRAINTS = 1000

# Margins within this (relative to max(|margin|, 1); an SVM's margins are of order 1) count as
# tied in best_tokens: far above the rounding of a margin, far below any real difference.
_TIE_RTOL = 1e-9

# The relative size below which aggregated_lift's quadratic form counts as zero (rounding,
# not a proof of infeasibility).
_AGGREGATE_RTOL = 1e-9
# at most this many runs of consecutive rows are copied as slices (_principal_block)
_SLICED_RUNS = 8


@dataclass(frozen=True)
class SelectionSVM:
    """The min-norm v for a fixed token selection on a set of samples.

    Attributes
    ----------
    samples : ndarray of int, shape (m,)
        Samples whose constraint is imposed.
    tokens : ndarray of int, shape (m,)
        Token selected for each of them.
    norm : float
        ``||v||``; ``inf`` when no v satisfying the constraints was found.
    coef : ndarray of shape (m,) or None
        ``v = sum_k coef_k x_{samples_k, tokens_k}``; None when no such v was found.
    failed : bool
        True when every v-step engine broke down: norm inf and coef None then say nothing
        about feasibility, and a bound built on this SVM proves nothing.
    norm_bound : float
        Without a solution, a proven lower bound on ``||v||`` for every v satisfying the
        constraints: ``inf`` when they are infeasible, finite when selected tokens of
        opposite labels are equal only to within the rounding of H (the v-step's
        ``norm_bound``), 0 after a breakdown. ``norm`` with a solution.
    """

    samples: np.ndarray
    tokens: np.ndarray
    norm: float
    coef: np.ndarray | None
    failed: bool = False
    norm_bound: float = math.inf

    @property
    def feasible(self) -> bool:
        """True when some v satisfies every selected constraint (and one was found)."""
        return self.coef is not None

    @property
    def bound(self) -> float:
        """A proven lower bound on ``||v||`` over the selection: ``norm`` or ``norm_bound``."""
        return self.norm if self.feasible else self.norm_bound


def selection_rows(samples: np.ndarray, tokens: np.ndarray, T: int) -> np.ndarray:
    """Rows of the flattened (nT, nT) token Gram matrix for tokens ``x_{samples_k, tokens_k}``."""
    return np.asarray(samples, dtype=np.int64) * T + np.asarray(tokens, dtype=np.int64)


def selection_svm(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    tokens: np.ndarray,
    samples: np.ndarray | None = None,
    X: np.ndarray | None = None,
    solver: str = "ldp",
    guess: np.ndarray | None = None,
) -> SelectionSVM:
    """Solve ``minimize ||v|| s.t. y_i <v, x_{i, tokens_i}> >= 1`` for ``i`` in ``samples``.

    Parameters
    ----------
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix (:attr:`margin_solver.core.kernel.TokenGram.H`).
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    T : int
        Tokens per sample.
    tokens : ndarray of int, shape (m,)
        Selected token of each sample in ``samples``.
    samples : ndarray of int, shape (m,), optional
        Samples to constrain; all ``n`` samples (in order) when omitted.
    X : ndarray of shape (n, T, d), optional
        The tokens behind H. Selected tokens of opposite labels that H cannot tell apart
        are then compared exactly: equal ones prove the selection infeasible, others give
        ``norm_bound`` (weaker without X, and never a proof).
    solver : {"ldp", "active", "ecos", "clarabel"}, default="ldp"
        The SVM's first engine (:func:`margin_solver.svm.vstep.solve_trusted_vstep`; the
        solve's search passes its strategy's ``vstep_solver``, LB keeps the default).
    guess : ndarray of shape (m,), optional
        Duals of a nearby SVM on the same samples (e.g. a parent node's, with a positive
        entry for a sample added since): the active-set engine is first run from them
        (:func:`margin_solver.svm.vstep.solve_vstep_on_support`), and ``solver`` solves
        from scratch only when that does not end certified optimal (infeasibility and
        near conflicts are always left to ``solver``).

    Returns
    -------
    SelectionSVM
    """
    samples = np.arange(len(y)) if samples is None else np.asarray(samples, dtype=np.int64)
    tokens = np.asarray(tokens, dtype=np.int64)
    if samples.size == 0:
        return SelectionSVM(samples, tokens, 0.0, np.zeros(0))
    rows = selection_rows(samples, tokens, T)
    K = _principal_block(H, rows)
    if guess is not None:
        warm = solve_vstep_on_support(K, y[samples], guess, engine="active")
        if warm is not None:
            return SelectionSVM(samples, tokens, warm.norm, warm.coef)
    row = None if X is None else (lambda k: X[samples[k], tokens[k]])
    result = solve_trusted_vstep(K, y[samples], solver, row=row)
    if not result.success:
        return SelectionSVM(samples, tokens, math.inf, None, result.broke_down, result.norm_bound)
    return SelectionSVM(samples, tokens, result.norm, result.coef)


def selection_key(tokens) -> tuple[int, ...]:
    """A token selection as a hashable key (one token per sample), for the dictionaries of
    selections realised or bounded."""
    return tuple(int(t) for t in tokens)


def token_margins(H: np.ndarray, y: np.ndarray, T: int, svm: SelectionSVM) -> np.ndarray:
    """``y_i <v, x_it>`` for every sample and token, where v is ``svm``'s; shape (n, T)."""
    rows = selection_rows(svm.samples, svm.tokens, T)
    values = svm.coef @ H[rows]  # H symmetric: rows, not columns (a contiguous gather)
    return y[:, None] * values.reshape(len(y), T)


def best_tokens(margins: np.ndarray, current: np.ndarray | None = None) -> np.ndarray:
    """Each sample's token with the largest margin ``y_i <v, x_it>``; shape (n,).

    With ``current`` (a selection), ties are broken without rounding error: margins within
    ``_TIE_RTOL`` of the largest count as tied, and a sample whose current token is tied
    with another moves to the first such other token. Ties are common (a sample's tokens can
    sit exactly on the SVM's margin together), and a plain argmax would decide them by the
    last bits of the margins, so that the hard-selection alternation, and the start it gives
    the min-norm solver, changed with the order of floating-point operations. Moving on a
    tie keeps the alternation's norm non-increasing and lets it explore; keeping the current
    token instead stopped it early and gave larger norms (4 of 40 paper instances, up to
    6.6%, in our comparison).
    """
    best = np.argmax(margins, axis=1)
    if current is None:
        return best
    rows = np.arange(len(margins))
    top = margins[rows, best]
    tied = margins >= (top - _TIE_RTOL * np.maximum(np.abs(top), 1.0))[:, None]
    tied[rows, current] = False
    return np.where(tied.any(axis=1), np.argmax(tied, axis=1), current)


def hard_selection_alternation(
    H: np.ndarray,
    y: np.ndarray,
    T: int,
    margins: np.ndarray,
    max_iter: int = 100,
    solver: str = "ldp",
) -> SelectionSVM:
    """Improve a token selection by alternating "best token for v" and "SVM on those tokens".

    Parameters
    ----------
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    T : int
        Tokens per sample.
    margins : ndarray of shape (n, T)
        ``y_i <v0, x_it>`` for the starting v0 (e.g. the first GD step's v).
    max_iter : int, default=100
        Cap on SVM solves.
    solver : str, default="ldp"
        The SVMs' first engine (:func:`selection_svm`).

    Returns
    -------
    SelectionSVM
        The last selection's SVM over all samples (the norm is non-increasing: the current v
        satisfies the next selection's constraints, since each sample's new token has at
        least the margin of its old one). Infeasible when the first selection is.
    """
    selection = best_tokens(margins)
    svm = selection_svm(H, y, T, selection, solver=solver)
    seen = {selection.tobytes()}
    for _ in range(max_iter - 1):
        if not svm.feasible:
            break
        new = best_tokens(token_margins(H, y, T, svm), current=selection)
        if new.tobytes() in seen:  # a repeat (moves on ties can cycle)
            break
        seen.add(new.tobytes())
        selection = new
        svm = selection_svm(H, y, T, selection, solver=solver)
    return svm


#: Multiply-adds of the v-step of an attention SVM with k constraints, in units of k**3, as
#: the caller's time limit predicts it (:meth:`margin_solver.core.guard.Guard.affords`): its
#: eigendecomposition and NNLS took 21 k**3 at the speed of the same call's token Gram
#: product (k = 2250, MNIST tokens; docs/decisions.md, "The time limit during the set-up").
REALISE_WORK = 25


def attention_svm(
    H: np.ndarray,
    T: int,
    selection: np.ndarray,
    R: float,
    ridge: float = 0.0,
    guard: Guard | None = None,
    solver: str = "ldp",
) -> np.ndarray | None:
    """Token coefficients of the norm-``R`` attention vector that best singles out ``selection``.

    Solves ``minimize ||p|| s.t. <p, x_{i, sel_i} - x_it> >= 1`` for all ``i`` and ``t != sel_i``
    (the p maximising the smallest score gap between each selected token and the other tokens of
    its sample), then rescales p to norm R. p lies in the span of the token differences, so it is
    returned as coefficients c of shape (n, T) with ``p = sum_it c_it x_it``.

    Parameters
    ----------
    H : ndarray of shape (n*T, n*T)
        Token Gram matrix.
    T : int
        Tokens per sample.
    selection : ndarray of int, shape (n,)
        Selected token per sample.
    R : float
        Norm of the returned p.
    ridge : float, default=0.0
        When positive, the squared-hinge soft-margin version: the SVM's Gram matrix gets
        ``ridge * mean(diag) * I`` (the features augmented by orthogonal slack directions),
        so it is always solvable, and where no p realises the selection its p still favours
        the selected tokens as much as it can (the nearest realisable selection).
    guard : Guard, optional
        The caller's time limit: the SVM (one eigendecomposition and one NNLS of size k,
        which nothing can interrupt) is not started when its predicted time,
        ``REALISE_WORK * k**3`` multiply-adds at the speed the guard measured, would end past
        the deadline.
    solver : {"ldp", "active", "ecos", "clarabel"}, default="ldp"
        The SVM's first engine (:func:`margin_solver.svm.vstep.solve_trusted_vstep`; the
        solve passes its strategy's ``vstep_solver``).

    Returns
    -------
    ndarray of shape (n, T) or None
        None when no p realises the selection (its SVM is infeasible; with a ridge, only when
        the soft-margin p is zero). With T = 1, or when every sample's tokens coincide, every
        p realises it and the zero vector is returned.
    """
    n = H.shape[0] // T
    selection = np.asarray(selection, dtype=np.int64)
    # One row of the difference operator E per (sample, other token): +1 on the selected
    # token, -1 on the other; the differences' Gram matrix is E H E^T.
    samples, others = np.nonzero(np.arange(T)[None, :] != selection[:, None])
    if samples.size == 0:
        return np.zeros((n, T))
    if guard is not None and not guard.affords(REALISE_WORK * samples.size**3):
        raise TimeLimitReached(f"an attention SVM with {samples.size} constraints (not started)")
    chosen_rows, other_rows = samples * T + selection[samples], samples * T + others
    E = np.zeros((samples.size, n * T))
    E[np.arange(samples.size), chosen_rows] = 1.0
    E[np.arange(samples.size), other_rows] = -1.0
    K = _difference_gram(H, chosen_rows, other_rows)
    scale = max(float(np.mean(np.diag(H))), np.finfo(np.float64).tiny)
    keep = np.diag(K) > SAME_TOKEN_RTOL * scale
    if not keep.any():
        return np.zeros((n, T))
    E, K = E[keep], K[np.ix_(keep, keep)]
    K = (K + K.T) / 2  # E H E^T is symmetric up to rounding
    if ridge > 0:
        K[np.diag_indices_from(K)] += ridge * float(np.mean(np.diag(K)))
    if len(K) >= _ANNOUNCE_CONSTRAINTS:
        logger.info("attention SVM with %d constraints (one factorisation of that size)", len(K))
    result = solve_trusted_vstep(K, np.ones(len(K)), solver)
    if not result.success:
        return None
    c = (E.T @ result.coef).reshape(n, T)
    length = result.norm
    if ridge > 0:  # the norm of p alone, without the slack directions
        length = float(np.sqrt(max(c.reshape(-1) @ H @ c.reshape(-1), 0.0)))
        if length == 0:
            return None
    return c * (R / length)


def _difference_gram(H: np.ndarray, plus: np.ndarray, minus: np.ndarray) -> np.ndarray:
    """``E H E^T`` for the rows ``E_k = e_{plus_k} - e_{minus_k}``, by row and column differences.

    Each entry of a product with E is one +-1 pair plus exact zeros, so these are the very
    floats of the dense products ``(E @ H) @ E.T``, about 9 times faster at n T = 400.
    """
    rows = H[plus] - H[minus]
    return rows[:, plus] - rows[:, minus]


def solve_attention_svm(X: Any, selection: Any, R: float = 1.0) -> np.ndarray | None:
    """The attention SVM: the max-margin attention vector that selects one token per sample.

    Solves ``minimize ||p|| s.t. <p, x_{i, sel_i} - x_it> >= 1`` for every sample ``i`` and
    token ``t != sel_i`` (the "Att-SVM" of Tarzanagh et al., *Max-margin token selection in
    the attention mechanism*, NeurIPS 2023), and returns the solution rescaled to norm ``R``.
    For a fixed value head, Tarzanagh et al. show that the direction of ``p`` under gradient
    descent tends to this solution for the tokens it ends up selecting. Public form of
    :func:`attention_svm` (which works on the token Gram matrix).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_tokens, n_features)
        Tokens.
    selection : array-like of int, shape (n_samples,)
        The token to select in each sample.
    R : float, default=1.0
        Norm of the returned vector.

    Returns
    -------
    ndarray of shape (n_features,) or None
        ``p`` of norm ``R`` (the zero vector when every sample's tokens coincide), or None
        when no ``p`` selects these tokens (the SVM is infeasible).

    Raises
    ------
    InvalidInputError
        Bad tokens, a selection of the wrong length or out of range, a bad ``R``.

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [-1.0, 0.0]]])
    >>> np.round(solve_attention_svm(X, [0, 0]), 6).tolist()
    [1.0, 0.0]
    """
    X = check_tokens(X)
    n, T, d = X.shape
    sel = np.asarray(selection)
    if (
        sel.shape != (n,)
        or not np.issubdtype(sel.dtype, np.integer)
        or np.any((sel < 0) | (sel >= T))
    ):
        raise InvalidInputError(
            f"selection must hold one token index in [0, {T}) per sample ({n}), got {selection!r}."
        )
    R = check_radius(R)
    flat = X.reshape(n * T, d)
    c = attention_svm(flat @ flat.T, T, sel, R)
    return None if c is None else c.reshape(-1) @ flat


def lifted_bounds(norm: float, margins: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
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


def signed_token_gram(H: np.ndarray, y: np.ndarray, T: int) -> np.ndarray:
    """``y_i y_j <x_it, x_ju>``: the token Gram matrix with its samples' labels, shape
    (n*T, n*T), a new array (:func:`aggregated_lift` reads it at every node)."""
    signs = np.repeat(y, T)
    signed = H * signs[:, None]
    signed *= signs
    return signed


def aggregated_lift(
    signed: np.ndarray,
    T: int,
    margins: np.ndarray,
    allowed: np.ndarray,
    samples: np.ndarray,
    target: float = math.inf,
    iterations: int = DEFAULT_STRATEGY.lb_lift_iterations,
) -> float:
    """A lower bound on ``||v - v_F||`` shared by several free samples (docs/theory.md).

    :func:`lifted_bounds` charges one free sample at a time. Here every free sample ``i`` in
    ``samples`` whose allowed tokens all have a deficit ``c_it = 1 - m_it > 0`` at the node's
    ``v_F`` must be served by some allowed token ``t_i``, so ``w = v - v_F`` satisfies
    ``<w, a_{i t_i}> >= 1`` with ``a_it = y_i x_it / c_it``. For weights ``beta >= 0`` on the
    simplex, ``<w, sum_i beta_i a_{i t_i}> >= 1``; by Cauchy-Schwarz
    ``||w|| >= 1 / sqrt(Q(beta))`` for any
    ``Q(beta) >= max_selection ||sum_i beta_i a_{i t_i}||^2``.
    Expanding the square row by row, with each row's own token chosen once,

        Q(beta) = sum_i beta_i max_t [beta_i ||a_it||^2 + sum_{j != i} beta_j max_u <a_it, a_ju>]

    (t, u over allowed tokens). With ``beta = e_i`` this is the lifted bound of sample i;
    nearly orthogonal tokens (the paper's noise tokens) add up: k of them give about
    ``sqrt(k)`` times one. ``beta`` comes from projected (sub)gradient steps on the simplex
    started at ``beta_i ∝ 1 / max_t ||a_it||^2``; any ``beta`` gives a valid bound, the
    largest seen is returned (0 when no sample qualifies).

    Parameters
    ----------
    signed : ndarray of shape (n*T, n*T)
        The token Gram matrix with labels, ``y_i y_j <x_it, x_ju>``
        (:func:`signed_token_gram`), so that ``<a_it, a_ju>`` is an entry over
        ``c_it c_ju > 0``: the maximum over u is taken before dividing by ``c_it``.
    T : int
        Tokens per sample.
    margins : ndarray of shape (n, T)
        ``y_i <v_F, x_it>`` (:func:`token_margins`).
    allowed : ndarray of bool, shape (n, T)
        Tokens each sample may still select.
    samples : ndarray of int
        The free samples.
    target : float, default=inf
        Stop as soon as the bound reaches this (the caller prunes there).
    iterations : int, default=5
        Projected-gradient steps on ``beta`` (the strategy table's ``lb_lift_iterations``,
        which the branch-and-bound passes).

    Returns
    -------
    float
    """
    samples = np.asarray(samples, dtype=np.int64)
    deficit = 1.0 - margins[samples]
    ok = np.where(allowed[samples], deficit > 0, True).all(axis=1)
    samples, deficit = samples[ok], deficit[ok]
    m = samples.size
    if m == 0:
        return 0.0
    mask = allowed[samples]
    rows = selection_rows(np.repeat(samples, T), np.tile(np.arange(T), m), T)
    inverse = np.where(mask, 1.0 / np.where(mask, deficit, 1.0), 0.0)  # 1 / c_it, 0 if barred
    # B[it, ju] = <a_it, a_ju> c_it: the block read once, with the columns' divisions
    B = _principal_block(signed, rows, inverse.reshape(-1))
    own = np.diagonal(B).reshape(m, T) * inverse
    # P[i, t, j] = max_u <a_it, a_ju> over j's allowed u (barred columns set to -inf first),
    # own sample's block zeroed; own norms kept apart (a maximum per token slice: numpy
    # reduces a short last axis slowly); the rows' division by c_it > 0 after the maximum
    B[:, ~mask.reshape(-1)] = -np.inf
    B4 = B.reshape(m, T, m, T)
    P = B4[:, :, :, 0].copy()
    for u in range(1, T):
        np.maximum(P, B4[:, :, :, u], out=P)
    P[~mask] = 0.0
    P *= np.where(mask, inverse, 1.0)[:, :, None]
    P[np.arange(m), :, np.arange(m)] = 0.0
    if not (
        own.max(axis=1) > 0
    ).all():  # a sample whose allowed tokens are all zero: left to the lift
        return 0.0
    beta = 1.0 / own.max(axis=1)
    beta /= beta.sum()
    step = 1.0 / (2.0 * float(np.abs(P).sum(axis=2).max() + own.max()))
    best = 0.0
    floor = _AGGREGATE_RTOL * float(own.max())
    # per-iteration work on flat (m T)-vectors: one matrix-vector product, row gathers by flat
    # index, and barred tokens pushed to -inf by adding -inf (adding 0.0 elsewhere is exact)
    flat_P = P.reshape(m * T, m)
    flat_own = own.reshape(-1)
    barred = np.where(mask, 0.0, -np.inf).reshape(-1)
    first_token = np.arange(m) * T
    for _ in range(iterations):
        cross = flat_P @ beta
        value = (beta[:, None] * own).reshape(-1)  # row i's value for each own token
        value += cross
        value += barred
        picked = first_token + np.argmax(value.reshape(m, T), axis=1)
        quad = float(beta @ value[picked])
        if quad > floor * float(beta @ beta):
            best = max(best, 1.0 / math.sqrt(quad))
            if best >= target:
                break
        # the picked rows' products with beta are in `cross` already
        gradient = 2.0 * beta * flat_own[picked] + cross[picked] + beta @ flat_P[picked]
        beta = _simplex_projection(beta - step * gradient)
    return best


def _principal_block(
    H: np.ndarray, rows: np.ndarray, column_scale: np.ndarray | None = None
) -> np.ndarray:
    """``H[np.ix_(rows, rows)]`` (a new array), times ``column_scale`` per column when given,
    copied block by block when ``rows`` is a few runs of consecutive indices (the product
    then made as the blocks are copied).

    The branch-and-bound's free samples are most of the samples, in order, so their token
    rows form a few runs; copying the blocks between runs as slices into one new array is
    about four times as fast at n T = 400 as fancy indexing of every entry.
    """
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    if breaks.size >= _SLICED_RUNS or rows.size == 0:
        # rows, then columns: 2.2 ms against np.ix_'s 6.2 ms at 970 of 1000 rows
        block = H.take(rows, axis=0).take(rows, axis=1)
        if column_scale is not None:
            block *= column_scale
        return block
    starts = [0, *breaks.tolist()]
    runs = [
        (start, stop, int(rows[start])) for start, stop in zip(starts, [*starts[1:], rows.size])
    ]
    out = np.empty((rows.size, rows.size))
    for start, stop, first in runs:
        for start_c, stop_c, first_c in runs:
            part = H[first : first + stop - start, first_c : first_c + stop_c - start_c]
            if column_scale is None:
                out[start:stop, start_c:stop_c] = part
            else:
                np.multiply(part, column_scale[start_c:stop_c], out=out[start:stop, start_c:stop_c])
    return out


def _simplex_projection(x: np.ndarray) -> np.ndarray:
    """Euclidean projection onto ``{beta >= 0, sum beta = 1}`` (sort-based)."""
    u = np.sort(x)[::-1]
    cumulative = np.cumsum(u) - 1.0
    k = np.arange(1, len(x) + 1)
    rho = np.flatnonzero(u - cumulative / k > 0)[-1]
    return np.maximum(x - cumulative[rho] / (rho + 1), 0.0)
