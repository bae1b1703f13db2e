"""Vectorised numerics of the single-head attention model f(X; v, p) = v^T X^T softmax(X p).

Everything is batched over samples: ``X`` has shape (n, T, d). Two forms exist:

* the **dense** form works with vectors ``v`` and ``p`` in R^d;
* the **token-Gram** form (:class:`TokenGram`) writes ``v = sum_it a_it x_it`` and
  ``p = sum_it c_it x_it`` with coefficient arrays of shape (n, T) and works with the
  token Gram matrix ``H`` only, so each evaluation costs O((nT)^2) whatever d is
  (docs/theory.md, "Token-Gram (kernel) form").

Formulas (docs/theory.md, "Model"): scores ``a = X p``, attention ``s = softmax(a)``,
attended feature ``z = X^T s``, token values ``u = X v``, output ``f = s^T u``,
``df/dv = z`` and ``df/dp = X^T [s * (u - f)]``; the logistic loss
``l(m) = log(1 + exp(-m))`` is computed with :func:`numpy.logaddexp`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit

from margin_solver.core.guard import Guard, Progress
from margin_solver.core.ooc import is_on_disk, materialize, project, token_gram
from margin_solver.core.results import ResultMixin
from margin_solver.core.validation import (
    InvalidInputError,
    check_magnitude,
    check_memory,
    check_tokens,
)

__all__ = [
    "LossGrads",
    "ModelResultMixin",
    "TokenGram",
    "attended_features",
    "attention",
    "conflicting_pairs",
    "gram_distance_rounding",
    "logistic_loss",
    "logistic_loss_derivative",
    "loss_and_grads",
    "margins",
    "multihead_outputs",
    "multihead_token_loss_and_grads",
    "output_grad_p",
    "outputs",
    "scores",
    "scores_and_values",
    "softmax",
    "token_loss_and_grads",
    "token_values",
]


def softmax(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    The maximum is subtracted before exponentiating, so scores of any magnitude
    (1e300 included) give finite probabilities that sum to one.

    Examples
    --------
    >>> softmax(np.array([1e6, 0.0, -1e6])).round(6).tolist()
    [1.0, 0.0, 0.0]
    """
    a = np.asarray(a)
    top = a.max(axis=axis, keepdims=True)
    # Array methods and one finiteness test instead of np.max, np.errstate and a NaN mask on
    # every call: the same operations on finite maxima, about half the time on the (n, T)
    # scores of a GD step (long GD's 1000 steps are mostly such small calls, issue 42).
    if np.isfinite(top).all():  # no inf - inf: the shifted scores hold no NaN
        e = np.exp(a - top)
    else:
        with np.errstate(invalid="ignore"):
            shifted = a - top
        # inf - inf gives NaN; a score of +inf is full attention on that token.
        e = np.exp(np.where(np.isnan(shifted), 0.0, shifted))
    return e / e.sum(axis=axis, keepdims=True)


def scores(X: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Attention scores ``a_i = X_i p``, shape (n, T)."""
    return project(X, [p])[0] if is_on_disk(X) else X @ p


def scores_and_values(X: np.ndarray, p: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scores ``X_i p`` and token values ``X_i v``, shape (n, T) each; one pass over tokens on disk.

    In memory they are the two matrix-vector products, as :func:`margin_solver.core.ooc.project`
    computes them per sample on disk, so the two agree bit for bit (one product by a
    two-column matrix, 11 ms against 17 ms at n = 100, T = 4, d = 50,000, differs from them
    by rounding and was dropped for that)."""
    if is_on_disk(X):
        a, u = project(X, [p, v])
        return a, u
    return X @ p, X @ v


def attention(X: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Attention weights ``s_i = softmax(X_i p)``, shape (n, T)."""
    return softmax(scores(X, p))


def attended_features(X: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Attended features ``z_i = X_i^T s_i`` for attention weights ``s`` (n, T); shape (n, d)."""
    return np.einsum("nt,ntd->nd", s, X)


def token_values(X: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Token values ``u_i = X_i v``, shape (n, T)."""
    return project(X, [v])[0] if is_on_disk(X) else X @ v


def outputs(X: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Model outputs ``f(X_i; v, p) = s_i^T X_i v``, shape (n,).

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> float(outputs(X, np.array([2.0, 4.0]), np.zeros(2))[0])
    3.0
    """
    a, u = scores_and_values(X, p, v)
    return np.sum(softmax(a) * u, axis=1)


def margins(X: np.ndarray, y: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Margins ``y_i f(X_i; v, p)``, shape (n,)."""
    return y * outputs(X, v, p)


def logistic_loss(m: np.ndarray) -> np.ndarray:
    """Stable logistic loss ``log(1 + exp(-m))`` of margins ``m``."""
    return np.logaddexp(0.0, -m)


def logistic_loss_derivative(m: np.ndarray) -> np.ndarray:
    """Derivative ``l'(m) = -1 / (1 + exp(m))`` of the logistic loss, stable for any ``m``."""
    return -expit(-m)


def output_grad_p(X: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-sample gradients ``df_i/dp = X_i^T [s_i * (u_i - f_i)]``, shape (n, d)."""
    s = attention(X, p)
    u = token_values(X, v)
    f = np.sum(s * u, axis=1, keepdims=True)
    return attended_features(X, s * (u - f))


@dataclass(frozen=True)
class LossGrads:
    """Mean logistic loss and its gradients (in whichever form produced them)."""

    loss: float
    grad_v: np.ndarray
    grad_p: np.ndarray
    margins: np.ndarray
    attention: np.ndarray


def _loss_weights(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    # d(mean loss)/d f_i = l'(m_i) y_i / n
    return logistic_loss_derivative(m) * y / y.shape[0]


def loss_and_grads(X: np.ndarray, y: np.ndarray, v: np.ndarray, p: np.ndarray) -> LossGrads:
    """Mean logistic loss over samples and its gradients with respect to ``v`` and ``p``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_tokens, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    v, p : ndarray of shape (n_features,)

    Returns
    -------
    LossGrads
        ``loss`` = mean_i log(1 + exp(-y_i f_i)); ``grad_v``, ``grad_p`` of shape (d,).
    """
    s = attention(X, p)
    u = token_values(X, v)
    f = np.sum(s * u, axis=1)
    m = y * f
    w = _loss_weights(y, m)
    grad_v = attended_features(X, s * w[:, None]).sum(axis=0)
    grad_p = attended_features(X, s * (u - f[:, None]) * w[:, None]).sum(axis=0)
    return LossGrads(float(np.mean(logistic_loss(m))), grad_v, grad_p, m, s)


def token_loss_and_grads(y: np.ndarray, token_scores: np.ndarray, values: np.ndarray) -> LossGrads:
    """Mean logistic loss and its gradients as token coefficients, from scores and values.

    Any representation of ``v`` and ``p`` (dense vectors, token coefficients, token
    coefficients plus extra basis vectors) reduces to the scores ``a_it = <x_it, p>``
    and token values ``u_it = <x_it, v>``; the gradients are then ``X^T grad_v`` and
    ``X^T grad_p`` with the (n, T) coefficients returned here.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
    token_scores, values : ndarray of shape (n_samples, n_tokens)

    Returns
    -------
    LossGrads
        ``grad_v`` and ``grad_p`` of shape (n_samples, n_tokens) are token coefficients.
    """
    s = softmax(token_scores)
    f = (s * values).sum(axis=1)
    m = y * f
    w = _loss_weights(y, m)[:, None]
    # sum / n is how mean computes it, without its bookkeeping (same float)
    loss = float(logistic_loss(m).sum() / len(m))
    return LossGrads(loss, s * w, s * (values - f[:, None]) * w, m, s)


def multihead_outputs(X: np.ndarray, V: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Outputs ``f(X_i) = sum_h v_h^T X_i^T softmax(X_i p_h)`` of H heads, shape (n,).

    ``V`` and ``P`` have shape (H, d), one row per head; one head is :func:`outputs` exactly
    (same operations, same rounding); several heads in memory are one product for all.

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> V = np.array([[2.0, 4.0], [1.0, 0.0]])
    >>> float(multihead_outputs(X, V, np.zeros((2, 2)))[0])
    3.5
    """
    if len(V) == 1 or is_on_disk(X):
        f = outputs(X, V[0], P[0])
        for h in range(1, len(V)):
            f = f + outputs(X, V[h], P[h])
        return f
    # in memory, all heads in one product (a loop over 10**5 heads took 5 s: issue 43)
    n, T, d = X.shape
    flat = np.asarray(X).reshape(n * T, d)
    a, u = (P @ flat.T).reshape(-1, n, T), (V @ flat.T).reshape(-1, n, T)
    return np.sum(softmax(a) * u, axis=2).sum(axis=0)


def multihead_token_loss_and_grads(
    y: np.ndarray, token_scores: np.ndarray, values: np.ndarray
) -> LossGrads:
    """:func:`token_loss_and_grads` for H heads: scores and values of shape (H, n, T).

    ``f_i = sum_h s_hi^T u_hi`` with ``s_hi = softmax(a_hi)``; the gradients are token
    coefficients per head, ``df_i/du_hit = s_hit`` and ``df_i/da_hit = s_hit (u_hit - s_hi^T
    u_hi)`` (each head's softmax sees only its own scores), weighted by ``l'(m_i) y_i / n``.

    Returns
    -------
    LossGrads
        ``grad_v``, ``grad_p`` and ``attention`` of shape (H, n, T); ``margins`` (n,).
    """
    s = softmax(token_scores)
    per_head = np.sum(s * values, axis=2, keepdims=True)  # (H, n, 1)
    f = per_head.sum(axis=0)[:, 0]
    m = y * f
    w = _loss_weights(y, m)[None, :, None]
    return LossGrads(float(np.mean(logistic_loss(m))), s * w, s * (values - per_head) * w, m, s)


def _exactly_symmetric(H: np.ndarray) -> np.ndarray:
    """H, or ``(H + H^T) / 2`` when rounding left the two triangles different.

    The selection SVMs hand sub-matrices of H to the v-step without validation
    (:func:`margin_solver.svm.vstep.solve_trusted_vstep`), which needs them exactly symmetric.
    ``X X^T`` is computed symmetric by BLAS (syrk), so this is normally a no-op check.
    """
    return H if np.array_equal(H, H.T) else (H + H.T) / 2


def _symmetrise_in_place(H: np.ndarray, guard: Guard) -> np.ndarray:
    """:func:`_exactly_symmetric` for a matrix this package owns, in place and in blocks of
    rows of about :data:`_SCREEN_BYTES`, ``guard`` checked before each: a block whose two
    triangles differ gets ``(H + H^T) / 2`` in both (the same floats as the whole sum), and
    no second (m, m) matrix is made."""
    m = len(H)
    rows = max(1, _SCREEN_BYTES // (8 * m))
    spans = range(0, m, rows)
    progress = Progress("symmetry check of the token Gram matrix", len(spans))
    for k, lo in enumerate(spans):
        guard.check(
            f"the symmetry check of the token Gram matrix ({k} of {len(spans)} blocks of rows done)"
        )
        progress.update(k)
        hi = min(lo + rows, m)
        lower, upper = H[lo:hi, :hi], H[:hi, lo:hi].T
        if not np.array_equal(lower, upper):
            mean = (lower + upper) / 2
            H[lo:hi, :hi] = mean
            H[:hi, lo:hi] = mean.T
    return H


#: Multiply-adds of one block of the in-memory token Gram product (about 0.1 s at a few
#: GFLOP/s): a product of at most this much work is one BLAS call, bitwise as before; a
#: larger one is computed in blocks of rows, between which the caller's time limit is
#: checked and progress is logged (docs/decisions.md, "The time limit during the set-up").
GRAM_BLOCK_WORK = 2**28

#: Fewest rows of a block of the token Gram product: a block of fewer rows is a
#: memory-bound pass over all the rows above it (one BLAS thread: 2 rows at 10^4 tokens of
#: 10^4 and 1 row at 2,000 tokens of 10^5 made the product 4.7x and 17x slower than one
#: call); from 256 rows the blocks took 0.86-1.15x one call at 4,000-10,000 tokens of
#: 10^4-10^5 (docs/decisions.md, "The time limit during the set-up").
GRAM_BLOCK_MIN_ROWS = 256


def _blocked_gram(flat: np.ndarray, guard: Guard) -> np.ndarray:
    """``flat @ flat.T`` (m, m), exactly symmetric: one product when its work is at most
    :data:`GRAM_BLOCK_WORK` or m at most :data:`GRAM_BLOCK_MIN_ROWS` (symmetrised if rounding
    left its triangles different), else its lower triangle in blocks of rows (that work, but
    at least :data:`GRAM_BLOCK_MIN_ROWS` rows), mirrored (half the work of the full
    product), checking ``guard`` before each block. Each diagonal block is symmetrised as it
    is computed, which gives the floats of symmetrising the whole of H afterwards without
    comparing and copying it (3.8 s and 512 MB of an MNIST classifier fit at m = 8,000)."""
    m, d = flat.shape
    rows = max(GRAM_BLOCK_MIN_ROWS, GRAM_BLOCK_WORK // (m * d))
    start = guard.clock()
    if rows >= m:
        H = flat @ flat.T
        guard.measured(m * m * d, guard.clock() - start)
        return _exactly_symmetric(H)
    H = np.empty((m, m))
    spans = range(0, m, rows)
    progress = Progress("token Gram product", len(spans))
    for k, lo in enumerate(spans):
        hi = min(lo + rows, m)
        guard.check(f"the token Gram product ({k} of {len(spans)} blocks of rows done)")
        start = guard.clock()
        np.matmul(flat[lo:hi], flat[:hi].T, out=H[lo:hi, :hi])
        # the diagonal block is a product of rows with themselves, which BLAS need not
        # return symmetric; the upper triangle is copied from the lower one
        block = H[lo:hi, lo:hi]
        block[...] = (block + block.T) / 2
        H[:lo, lo:hi] = H[lo:hi, :lo].T
        guard.measured((hi - lo) * hi * d, guard.clock() - start)
        progress.update(k + 1)
    return H


class TokenGram:
    """Token-Gram (kernel) form of the model for vectors in the span of given tokens.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_tokens, n_features)
        The training tokens spanning ``v`` and ``p``. Tokens on disk (a
        :class:`numpy.memmap`) are read in blocks over d (:func:`margin_solver.core.ooc.token_gram`,
        locally or on Dask) and checked for NaN, inf and magnitude on the way.
    guard : Guard, optional
        The caller's time limit, checked between blocks of the product (a large product in
        memory is computed in blocks of rows, :data:`GRAM_BLOCK_WORK`); raises
        :class:`~margin_solver.core.guard.TimeLimitReached` once it has passed. It records
        the speed of the blocks (:meth:`~margin_solver.core.guard.Guard.measured`).

    Notes
    -----
    With ``H[i, t, j, r] = <x_it, x_jr>`` and coefficients ``a, c`` of shape (n, T)
    for ``v = X^T a`` and ``p = X^T c`` (summing over samples and tokens):
    scores are ``H c``, token values ``H a``, ``||p||^2 = c^T H c`` and the
    feature Gram matrix is ``K_ij = s_i^T H_ij s_j``. The one O((nT)^2 d) product
    is done at construction; every other method costs O((nT)^2).
    """

    def __init__(self, X: np.ndarray, guard: Guard | None = None):
        guard = Guard() if guard is None else guard
        if is_on_disk(X):
            self.n, self.T, self.d = X.shape
            H, peak = token_gram(X, guard)
            check_magnitude(np.array([peak]), "X")
            self.H = _symmetrise_in_place(H, guard)
            return
        X = np.asarray(X, dtype=np.float64)
        self.n, self.T, self.d = X.shape
        m = self.n * self.T
        # H and, at worst, one symmetrised copy live at once.
        check_memory(
            2 * 8 * m * m,
            f"the token Gram matrix (n T x n T = {m} x {m}, float64) with one working copy",
            "the min-norm solvers and the bound work on every pair of tokens, so use fewer "
            "samples or fewer tokens per sample",
        )
        self.H = _blocked_gram(X.reshape(m, self.d), guard)

    @classmethod
    def from_gram(cls, H: np.ndarray, n: int, T: int, d: int | None = None) -> TokenGram:
        """Build from a precomputed (nT, nT) token Gram matrix."""
        obj = cls.__new__(cls)
        obj.n, obj.T, obj.d = n, T, d
        obj.H = _exactly_symmetric(np.asarray(H, dtype=np.float64))
        return obj

    def apply(self, coef: np.ndarray) -> np.ndarray:
        """Inner products of every training token with ``X^T coef``; shape (n, T)."""
        return (self.H @ coef.reshape(-1)).reshape(self.n, self.T)

    def sq_norm(self, coef: np.ndarray) -> float:
        """``||X^T coef||^2 = coef^T H coef``, clipped at 0 against round-off."""
        flat = coef.reshape(-1)
        return max(float(flat @ (self.H @ flat)), 0.0)

    def attention(self, c: np.ndarray) -> np.ndarray:
        """Attention weights for ``p = X^T c``; shape (n, T)."""
        return softmax(self.apply(c))

    def outputs(self, a: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Outputs ``f_i`` for ``v = X^T a`` and ``p = X^T c``; shape (n,)."""
        return np.sum(self.attention(c) * self.apply(a), axis=1)

    def feature_gram(self, s: np.ndarray) -> np.ndarray:
        """Gram matrix ``K_ij = <z_i, z_j>`` of attended features for attention ``s`` (n, T)."""
        n, T = self.n, self.T
        column = s.reshape(n, T, 1)
        # s with H first, then with s: O((nT)^2) for any shapes. The two batched products are
        # the ones np.einsum("it,itjr,jr->ij", ..., optimize=[(0, 1), (0, 1)]) runs, on the
        # same strided views (so the same rounding), without its per-call planning, which
        # cost as much as the products at n T = 400. SH[i, j, r] = s_i^T H_{i., jr}:
        SH = np.matmul(self.H.reshape(n, T, n * T).transpose(0, 2, 1), column).reshape(n, n, T)
        return np.matmul(SH.transpose(1, 0, 2), column).reshape(n, n).T

    def feature_coefficients(self, s: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """Token coefficients of ``sum_i beta_i z_i`` where ``z_i = X_i^T s_i``; shape (n, T)."""
        return s * beta[:, None]

    def loss_and_grads(self, y: np.ndarray, a: np.ndarray, c: np.ndarray) -> LossGrads:
        """Mean logistic loss and its gradients as token coefficients.

        The returned ``grad_v`` and ``grad_p`` (shape (n, T)) are coefficients: the
        dense gradients are ``X^T grad_v`` and ``X^T grad_p``.
        """
        return token_loss_and_grads(y, self.apply(c), self.apply(a))

    @staticmethod
    def materialize(X: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """Dense vector ``X^T coef = sum_it coef_it x_it``; shape (d,).

        ``coef`` of shape (k, n, T) gives k vectors, shape (k, d), in one pass over X
        (in blocks over d for tokens on disk).
        """
        return materialize(X, coef) if is_on_disk(X) else np.tensordot(coef, X, axes=2)


def conflicting_pairs(
    X: np.ndarray, y: np.ndarray, H: np.ndarray | None = None, guard: Guard | None = None
) -> list[tuple[int, int]]:
    """Pairs (i, j), i < j, of samples with the same multiset of tokens and opposite labels,
    naming every sample that has such a twin.

    Attention without positions is blind to token order, so such samples get the same output
    ``f(X; v, p)`` for every (v, p) and no interpolator exists. Tokens are compared exactly,
    by the bytes of their float64 values. Samples are first grouped by the sorted keys of
    their tokens (:func:`_token_keys`: equal tokens have equal keys); only groups holding
    both labels are then compared byte by byte, so the answer is exact and the cost is about
    one integer pass over the tokens. In each group of samples with the same tokens and both
    labels, every sample is paired with the group's first sample of the other label: at most
    n - 1 pairs, so memory stays linear in n (listing every pair would be quadratic: 25,000
    copies of one token with 10% flipped labels make 56 million pairs).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_tokens, n_features)
    y : ndarray of shape (n_samples,)
    H : ndarray of shape (n_samples * n_tokens, n_samples * n_tokens), optional
        The token Gram matrix ``X X^T`` as computed in float64 (:class:`TokenGram`). When
        given, only the samples it cannot tell apart from a sample of the other label
        (:func:`_twin_candidates`) are read: the answer is the same, and on data without
        such samples no token is read again.
    guard : Guard, optional
        The caller's time limit, checked between the screen's blocks of samples (each of
        about :data:`_SCREEN_BYTES`); raises
        :class:`~margin_solver.core.guard.TimeLimitReached` once it has passed.

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[2.0, 0.0], [0.0, 1.0]]])
    >>> conflicting_pairs(X, np.array([1, -1, -1]))
    [(0, 1)]
    """
    y = np.asarray(y)
    guard = Guard() if guard is None else guard
    screened = None if H is None else np.array(_twin_candidates(H, y, X.shape, guard), dtype=int)
    if screened is not None and len(screened) < 2:
        return []
    # Samples with the same multiset have the same sum of all their bit patterns: a sample
    # whose sum no sample of the other label shares has no twin (one cheap pass).
    sums = np.concatenate(
        [bits.reshape(len(bits), -1).sum(axis=1) for bits in _bit_blocks(X, screened, guard)]
    )
    samples = np.arange(len(y)) if screened is None else screened
    samples = samples[_shared_across_labels(sums, y[samples])]
    if len(samples) < 2:
        return []
    mult = _key_multipliers(X.shape[2])
    keys = np.concatenate([bits @ mult for bits in _bit_blocks(X, samples, guard)])
    keys.sort(axis=1)  # a multiset's keys, in an order that does not depend on the tokens'
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    pairs: list[tuple[int, int]] = []
    for g in np.flatnonzero(np.bincount(group) > 1):
        members = samples[group == g]  # ascending, as ``samples``
        if len(set(y[members].tolist())) < 2:
            continue  # one label: no pair, whatever the bytes say
        for same in _same_multisets(X, members):
            first: dict[Any, int] = {}
            for i in same:
                first.setdefault(y[i], i)
            if len(first) < 2:
                continue
            for i in same:
                j = next(first[label] for label in first if label != y[i])
                pairs.append((min(i, j), max(i, j)))
    return sorted(set(pairs))  # the two firsts were paired from both sides


#: Seed of the odd 64-bit multipliers of the token keys (any seed would do: the keys only
#: group candidates, which are then compared byte by byte).
_KEY_SEED = 20261207


def _key_multipliers(d: int) -> np.ndarray:
    """Fixed odd multipliers ``m_k``, k < d: a token's key is ``sum_k u_k m_k mod 2^64`` over
    the float64 bit patterns ``u_k`` of its features, exact integer arithmetic, so tokens
    with the same bytes have the same key (and tokens that differ, almost always not)."""
    mult = np.random.default_rng(_KEY_SEED).integers(0, 2**63, size=d, dtype=np.uint64)
    return mult * np.uint64(2) + np.uint64(1)


def _bit_blocks(X: np.ndarray, samples: np.ndarray | None, guard: Guard) -> Iterator[np.ndarray]:
    """The float64 bit patterns (uint64, shape (b, n_tokens, n_features)) of ``X[samples]``
    (all samples when None) in consecutive blocks of about :data:`_SCREEN_BYTES`, ``guard``
    checked before each. The tokens may be a memory-mapped file; a block of a float64 array
    in memory is read in place, not copied."""
    n, T, d = X.shape
    count = n if samples is None else len(samples)
    block = max(1, _SCREEN_BYTES // (8 * T * d))
    for lo in range(0, count, block):
        guard.check(f"the conflict screen's pass over the tokens ({lo} of {count} samples done)")
        rows = slice(lo, lo + block) if samples is None else samples[lo : lo + block]
        yield np.ascontiguousarray(X[rows], dtype=np.float64).view(np.uint64)


def _shared_across_labels(keys: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mask of the positions whose key is also the key of a position with another label."""
    _, group, count = np.unique(keys, return_inverse=True, return_counts=True)
    if len(keys) < 2 or count.max() < 2:  # all keys differ: the common case, decided here
        return np.zeros(len(keys), dtype=bool)
    _, label = np.unique(y, return_inverse=True)
    group, label = group.reshape(-1), label.reshape(-1)
    low = np.full(group.max() + 1, label.max())
    high = np.zeros(group.max() + 1, dtype=label.dtype)
    np.minimum.at(low, group, label)
    np.maximum.at(high, group, label)
    return low[group] != high[group]


def _same_multisets(X: np.ndarray, members: np.ndarray) -> list[list[int]]:
    """``members`` split into groups with the same multiset of token bytes (each group in
    the order of ``members``), comparing each sample with one representative per group."""
    groups: list[tuple[bytes, list[int]]] = []
    for i in members.tolist():
        sample = np.ascontiguousarray(X[i], dtype=np.float64)
        canon = b"".join(sorted(token.tobytes() for token in sample))
        for rep, same in groups:
            if rep == canon:
                same.append(i)
                break
        else:
            groups.append((canon, [i]))
    return [same for _, same in groups]


#: Bytes of float64 distances :func:`_twin_candidates` holds at once.
_SCREEN_BYTES = 1 << 23


def gram_distance_rounding(depth: int, total):
    """How far a squared distance read off a computed Gram matrix,
    ``G_aa + G_bb - 2 G_ab``, may be below ``||a - b||^2`` (or ``G_aa`` below ``||a||^2``),
    given ``total = G_aa + G_bb`` (float or array) and the length ``depth`` of the dot
    products.

    Each entry of a float64 Gram matrix is off by at most ``gamma_d ||a|| ||b||`` with
    ``gamma_d = d eps / (1 - d eps)`` whatever the summation order (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., eq. 3.5; blocked and FMA sums included),
    plus ``d`` times the smallest subnormal when products underflow. So the computed
    distance is off by at most ``4 (d + 2) eps total`` (the extra covers gamma's denominator,
    the sums and a symmetrised matrix) plus ``8 d`` subnormals. Shared by the conflict
    screen (:func:`conflicting_pairs`) and the v-step's bound for features it cannot tell
    apart (:mod:`margin_solver.svm.vstep`).
    """
    eps = np.finfo(np.float64).eps
    return 4.0 * (depth + 2) * eps * total + 8.0 * depth * np.finfo(np.float64).smallest_subnormal


def _twin_candidates(
    H: np.ndarray, y: np.ndarray, shape: tuple[int, int, int], guard: Guard | None = None
) -> list[int]:
    """Samples that may share their token multiset with a sample of the other label, judged
    from the token Gram matrix ``H`` alone; a superset of the samples in conflicting pairs.

    Equal tokens a, b have ``||x_a - x_b||^2 = H_aa + H_bb - 2 H_ab = 0``, so a pair whose
    computed distance exceeds its rounding (:func:`gram_distance_rounding`, dot products of
    length d) is proven unequal. Two samples with the same multiset have every
    token of each near some token of the other; samples without such a partner of the other
    label cannot be in a conflicting pair. A non-finite distance counts as near. ``guard``
    is checked before each block of samples, and progress is logged between them.
    """
    n, T, d = shape
    guard = Guard() if guard is None else guard
    diag = np.diag(H)
    y = np.asarray(y)
    block = max(1, _SCREEN_BYTES // (8 * T * T * n))
    found: list[int] = []
    spans = range(0, n, block)
    progress = Progress("conflict screen", len(spans))
    for k, lo in enumerate(spans):
        guard.check(f"the conflict screen ({k} of {len(spans)} blocks of samples done)")
        progress.update(k)
        hi = min(lo + block, n)
        rows = slice(lo * T, hi * T)
        total = diag[rows, None] + diag[None, :]
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(total - 2.0 * H[rows])
            near = ~(np.isfinite(gap) & (gap > gram_distance_rounding(d, total)))
        near = near.reshape(hi - lo, T, n, T)
        covers = near.any(axis=3).all(axis=1) & near.any(axis=1).all(axis=2)
        twin = (covers & (y[lo:hi, None] != y[None, :])).any(axis=1)
        found.extend(lo + np.flatnonzero(twin))
    return [int(i) for i in found]


class ModelResultMixin(ResultMixin):
    """Mixin for results that carry a fitted model ``(v, p)`` and ``classes``, the user's two
    labels in sign order (``classes[0]`` is -1, ``classes[1]`` is +1, as scikit-learn's
    ``classes_``): the solvers work with signs, and :meth:`predict` answers in the user's
    labels."""

    v: np.ndarray | None
    p: np.ndarray | None
    classes: np.ndarray

    def decision_function(self, X: Any) -> np.ndarray:
        """Model outputs ``f(X_i; v, p)`` (summed over heads), shape (n_samples,): positive
        for ``classes[1]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, n_features)
            Tokens (of a Dataset ``data``: ``data.X``).

        Raises
        ------
        InvalidInputError
            No model attached (``v`` is None), or tokens of the wrong shape or dimension.
        """
        if self.v is None or self.p is None:
            raise InvalidInputError(
                f"This result (status {self.status!r}) has no model (v is None) to predict with."
            )
        X = check_tokens(X)
        d = self.v.shape[-1]
        if X.shape[2] != d:
            raise InvalidInputError(f"X has {X.shape[2]} features per token; the model has {d}.")
        if self.v.ndim == 2:  # H heads
            return multihead_outputs(X, self.v, self.p)
        return outputs(X, self.v, self.p)

    def predict(self, X: Any) -> np.ndarray:
        """The user's labels: ``classes[1]`` where ``f >= 0`` (an output of exactly 0
        included, as :meth:`margin_solver.core.data.Dataset.decode`), else ``classes[0]``."""
        return self.classes[(self.decision_function(X) >= 0).astype(int)]
