"""Gradient-descent endpoints of the single-head attention model (docs/theory.md).

Full-batch GD on the mean logistic loss ``L(v, p) = mean_i log(1 + exp(-y_i f(X_i; v, p)))``
over both the value head ``v`` and the attention vector ``p``, optionally with weight decay
``(lam / 2)(||v||^2 + ||p||^2)`` and a norm cap ``||p|| <= R`` (projection after each step).

Schedules
---------
``"two-step"``
    Two full-batch steps of sizes ``beta0`` then ``beta1`` from zero initialisation, the
    setting of Theorem 3.3 of Magen et al. (arXiv:2410.07746). It is meant to interpolate:
    a run that leaves training errors has status ``"not_fitted"``. Step 1 moves only ``v``
    (``df/dp = 0`` at ``v = 0``): ``v_1 = (beta0 / (2n)) sum_i y_i xbar_i`` with ``xbar_i``
    the token mean of sample ``i``, and ``p_1 = 0``; ``p`` moves at step 2.
``"constant"``
    ``steps`` steps of one fixed size.
``"normalized"``
    ``steps`` steps of fixed length along the normalised gradient of the objective.

The paper's exact step sizes are not in the text available to this project; the defaults
of :func:`default_step_sizes` are our own scaling (derived in ``docs/theory.md`` and
checked by ``python -m margin_solver.bench.measure.gd_defaults``), not the authors' constants. The
scaling assumes nearly orthogonal tokens; on correlated tokens with label imbalance the first step
aligns with the mean token and the scaled steps raise the loss, so a default step is halved while
it would raise the objective. Steps the caller gives are taken as given; a run whose
objective ends above its start has status ``"diverged"``.

Two numerical forms give the same iterates: the dense form keeps ``v, p`` in R^d; the
kernel form keeps coefficients on the training tokens and works with their Gram matrix
only (docs/theory.md, "Token-Gram (kernel) form"). Gradients always lie in the token span,
so from zero
initialisation the iterates stay there. A random initialisation is not in the token span:
the kernel form then appends the two initial vectors ``v0`` and ``p0`` to the basis (their
inner products with the tokens and each other extend the Gram matrix), which keeps the two
forms exactly equivalent.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

from margin_solver.analysis.heads import head_metrics
from margin_solver.analysis.metrics import output_metrics
from margin_solver.core.data import Dataset, as_dataset, check_same_classes
from margin_solver.core.kernel import (
    LossGrads,
    ModelResultMixin,
    conflicting_pairs,
    multihead_token_loss_and_grads,
    token_loss_and_grads,
)
from margin_solver.core.progress import verbose_switch
from margin_solver.core.results import (
    COMPLETED,
    CONVERGED,
    DIVERGED,
    NOT_FITTED,
    STATUS_TABLE,
    ConvergenceWarning,
    Renamed,
    renamed,
    sign_classes,
)
from margin_solver.core.validation import (
    InvalidInputError,
    check_int,
    check_magnitude,
    check_memory,
    check_nonnegative,
    check_positive,
    check_radius,
    check_seed,
)

__all__ = [
    "FIRST_STEP_SCALE",
    "MAX_HALVINGS",
    "SCORE_GAP_PER_LOG_N",
    "TRAJECTORY_COLUMNS",
    "GDResult",
    "default_step_sizes",
    "gradient_descent",
    "token_scale",
]

logger = logging.getLogger("margin_solver")

SCHEDULES = ("two-step", "constant", "normalized")
INITS = ("zero", "random")
FORMS = ("auto", "dense", "kernel")

#: Target own-token value ``c0 = beta0 nu^2 / (2 n T)`` after the first step (docs/theory.md).
FIRST_STEP_SCALE = 0.1
#: The second step targets an own-token score gap of ``SCORE_GAP_PER_LOG_N * log(n)``.
SCORE_GAP_PER_LOG_N = 0.5
#: The kernel form stores an (nT)^2 Gram matrix; above this many tokens "auto" stays dense.
MAX_KERNEL_TOKENS = 6000

#: Token values or scores beyond this count as overflow: the loss and softmax are saturated
#: far before, and squared norms of such iterates overflow float64.
OVERFLOW = 1e100

#: Dense form: above this size X is streamed in blocks of about _BLOCK_BYTES (measured on a
#: 32 MiB L3 / 1 MiB L2 machine; below it the whole X stays in cache and one block is best).
_CACHE_BYTES = 32 * 2**20
_BLOCK_BYTES = 4 * 2**20

#: Quantities recorded along the trajectory (NaN where not available, e.g. no test set).
TRAJECTORY_COLUMNS = (
    "step",
    "loss",
    "objective",
    "train_error",
    "train_error_clean",
    "test_error",
    "test_error_clean",
    "attn_signal_clean",
    "attn_signal_noisy",
    "norm_v",
    "norm_p",
    "min_margin",
    "normalized_margin",
)


@renamed(Renamed("margin", "min_margin"), Renamed("norm_p", "p_norm"), Renamed("steps", "nit"))
@dataclass(repr=False)
class GDResult(ModelResultMixin):
    """Endpoint and trajectory of :func:`gradient_descent`.

    Attributes
    ----------
    v, p : ndarray of shape (n_features,)
        Final iterate (the last finite one when the run diverged).
    trajectory : dict of str to ndarray
        One array per name in :data:`TRAJECTORY_COLUMNS`, one entry per recorded step.
        ``loss`` is the mean logistic loss, ``objective`` adds the weight decay term;
        errors and attention come from :func:`margin_solver.analysis.metrics.output_metrics` on the
        step's own evaluation (training set) and
        :func:`~margin_solver.analysis.metrics.trusted_metrics` (test set);
        ``normalized_margin = min_i y_i f_i / ||v||`` (f is 1-homogeneous in ``v``; ``p``
        enters only through the attention, bounded by ``R`` when a cap is set).
    status : str
        ``"completed"`` (all requested steps done), ``"converged"`` (objective gradient norm
        fell below ``tol``), ``"diverged"`` (a non-finite value appeared, or the objective
        ended above its value at the start) or ``"not_fitted"`` (the two-step schedule, meant
        to interpolate, left training errors); see docs/statuses.md. The last two have
        ``success`` False and warn with :class:`margin_solver.core.results.ConvergenceWarning`.
    message : str
    schedule : str
    step_sizes : list of float
        ``[beta0, beta1]`` for ``"two-step"``, ``[step]`` otherwise: the sizes taken, after
        any halving of a default step (passing them back reproduces the run).
    nit : int
        Steps taken (scipy's name).
    weight_decay : float
    R : float or None
    init : str
    form : {"dense", "kernel"}
    loss : float
        Final mean logistic loss on the training set.
    min_margin : float
        Final ``min_i y_i f_i``.
    norm : float
        Final ``||v||``.
    p_norm : float
        Final ``||p||``.
    normalized_margin : float
        ``min_margin / norm``.
    attention : ndarray of shape (n_samples, n_tokens)
        Final training attention.
    selected_token : ndarray of shape (n_samples,)
        Argmax of each training sample's attention.
    solve_time : float
        Seconds spent in the loop (setup, e.g. the Gram matrix, included).
    heads : int
        Number of attention heads H. For H > 1, ``v`` and ``p`` have shape (H, d) (one row
        per head), ``attention`` shape (H, n, T), ``norm`` and ``p_norm`` are the norms of the
        concatenations ``(v_1, ..., v_H)`` and ``(p_1, ..., p_H)``, ``selected_token`` and the
        attention metrics use the heads' mean attention.
    classes : ndarray of shape (2,)
        The user's two labels in sign order, as scikit-learn's ``classes_``: ``classes[0]``
        is -1 and ``classes[1]`` is +1 in the run (-1 and +1 when the labels were signs).
        :meth:`predict` answers in these labels.

    Deprecated names (one release; docs/usage.md, "Result vocabulary"): ``margin`` (use
    ``min_margin``), ``norm_p`` (use ``p_norm``), ``steps`` (use ``nit``).
    """

    v: np.ndarray
    p: np.ndarray
    trajectory: dict[str, np.ndarray]
    status: str
    message: str
    schedule: str
    step_sizes: list[float]
    nit: int
    weight_decay: float
    R: float | None
    init: str
    form: str
    loss: float
    min_margin: float
    norm: float
    p_norm: float
    normalized_margin: float
    attention: np.ndarray
    selected_token: np.ndarray
    solve_time: float = field(default=0.0)
    heads: int = 1
    classes: np.ndarray = field(default_factory=sign_classes)

    @property
    def interpolates(self) -> bool:
        """True when every training sample has a positive margin."""
        return self.min_margin > 0


def token_scale(X: np.ndarray) -> float:
    """Mean squared token norm ``nu^2 = mean_{i,t} ||x_it||^2`` (about ``sigma^2 d``)."""
    return float(np.mean(np.einsum("ntd,ntd->nt", X, X)))


def default_step_sizes(
    X: np.ndarray,
    first_step_scale: float = FIRST_STEP_SCALE,
    gap_per_log_n: float = SCORE_GAP_PER_LOG_N,
) -> tuple[float, float]:
    """Default ``(beta0, beta1)`` of the two-step schedule, scaled by n, T and the tokens.

    With ``nu^2`` the mean squared token norm (:func:`token_scale`):

    * ``beta0 = c0 * 2 n T / nu^2`` makes the first step's own-token value
      ``<x_it, v_1> ~ (beta0 / (2 n T)) y_i ||x_it||^2`` equal to ``c0 y_i``;
    * ``beta1 = G * 2 n T / (c0 nu^2)`` with ``G = gap_per_log_n * log(n)`` makes the
      own-token score after step 2, ``(beta1 / (n T)) (-l'(m_i)) y_i (u_it - f_i) ||x_it||^2``
      with ``-l' ~ 1/2`` and ``y_i (u_it - f_i) ~ c0``, of order ``G``: attention gaps of
      order ``log n`` concentrate the softmax on one token per sample.

    These are this package's choices, not the paper's constants (unknown here); see
    ``docs/theory.md`` and ``python -m margin_solver.bench.measure.gd_defaults``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_tokens, n_features)
    first_step_scale : float, default=FIRST_STEP_SCALE
        ``c0``.
    gap_per_log_n : float, default=SCORE_GAP_PER_LOG_N
        ``G / log(n)``.

    Returns
    -------
    (beta0, beta1) : tuple of float
    """
    n, T, _ = X.shape
    nu2 = token_scale(X)
    if nu2 <= 0:
        raise InvalidInputError("All tokens are zero; GD has nothing to learn from.")
    c0 = check_positive(first_step_scale, "first_step_scale")
    gap = check_positive(gap_per_log_n, "gap_per_log_n") * math.log(max(n, 2))
    beta0 = c0 * 2 * n * T / nu2
    beta1 = gap * 2 * n * T / (c0 * nu2)
    return beta0, beta1


def _row_products(
    W: np.ndarray, M: np.ndarray, live: np.ndarray, acc: np.ndarray | None = None
) -> np.ndarray:
    """``W @ M`` for the two rows of ``W``, as matrix-vector products: with OpenBLAS,
    single-threaded, these measured 1.5-1.8x faster than one thin (2 x m) @ (m x k)
    product at m = k = 1000 and equal at (400 x 50 000) (python -m
    margin_solver.bench.measure.gd_speed).

    Only the rows where ``live`` is True are multiplied; the others are zero rows of ``W``
    (``v`` and ``p`` at zero initialisation, ``p`` after the first step from it, the
    attention coefficients while ``v`` is zero), whose products with the finite ``M`` are 0.
    With ``acc`` the products are added to it in place (the backward pass sums its blocks
    there, without a temporary the size of the gradient per block).
    """
    acc = np.zeros((len(W), M.shape[1])) if acc is None else acc
    for k in np.flatnonzero(live):
        acc[k] += W[k] @ M
    return acc


class _Evaluation(NamedTuple):
    """Loss and gradients at one iterate, in the form's coordinates."""

    lg: LossGrads
    grads: np.ndarray  # (2, dim): gradients of the mean loss w.r.t. v and p
    peak: float  # largest |token value| or |score|, for overflow detection


class _DenseGDState:
    """GD's iterate as a (2, d) array: row 0 is ``v``, row 1 is ``p``.

    (The P_R descent's :class:`margin_solver.descent.alternating.DenseForm` is another job: it holds
    the attention vector alone and solves v-steps; the two share no operation.)

    When ``X`` is larger than the last-level cache, a step streams it in blocks of a few
    samples and does the backward product on each block while it is still in cache: one
    pass over memory per step instead of two (1.6x faster at n=100, T=4, d=50 000 here).
    The coefficients of a sample depend on that sample's tokens only, so blocking is exact.
    An evaluation with one product (from a zero iterate, or without gradients) reads X whole.
    """

    name = "dense"

    def __init__(self, X: np.ndarray, W0: np.ndarray):
        n, T, d = X.shape
        self.n, self.T = n, T
        self.flat = X.reshape(n * T, d)
        self.W0 = W0
        in_cache = X.nbytes <= _CACHE_BYTES
        self.block = n if in_cache else max(1, _BLOCK_BYTES // (T * d * X.itemsize))

    def evaluate(self, W: np.ndarray, y: np.ndarray, with_grads: bool = True) -> _Evaluation:
        T, parts, grads, peak = self.T, [], np.zeros_like(W), 0.0
        live = W.any(axis=1)
        # Blocks keep X in cache from a block's forward product to its backward one. With one
        # of the two (a zero iterate, or no gradients) X is read once anyway, and a product
        # over the whole of it measured up to 2x faster than block by block (backward: 9
        # against 17 ms at n=100, T=4, d=50 000; rounding then differs in the last bits).
        block = self.block if live.any() and with_grads else self.n
        for i0 in range(0, self.n, block):
            B = self.flat[i0 * T : (i0 + block) * T]
            values, scores = _row_products(W, B.T, live).reshape(2, -1, T)
            lg = token_loss_and_grads(y[i0 : i0 + block], scores, values)
            share = len(lg.margins) / self.n  # block means -> mean over all samples
            gv, gp = share * lg.grad_v, share * lg.grad_p
            if with_grads:  # the backward product: half the cost of an evaluation
                coef = np.stack([gv.reshape(-1), gp.reshape(-1)])
                _row_products(coef, B, coef.any(axis=1), acc=grads)
            peak = float(np.maximum(peak, _peak(values, scores)))  # NaN propagates
            parts.append(LossGrads(share * lg.loss, gv, gp, lg.margins, lg.attention))
        lg = LossGrads(
            sum(part.loss for part in parts),
            *(
                np.concatenate([getattr(part, f) for part in parts])
                for f in ("grad_v", "grad_p", "margins", "attention")
            ),
        )
        return _Evaluation(lg, grads, peak)

    def sq_norms(self, W: np.ndarray) -> np.ndarray:
        return np.einsum("kd,kd->k", W, W)

    def dense(self, W: np.ndarray) -> np.ndarray:
        return W


class _KernelGDState:
    """GD's iterate as coefficients on a basis of the training tokens (plus the initial vectors).

    ``B`` stacks the nT training tokens and, for a random initialisation, ``v0`` and ``p0``;
    ``G = B B^T``. Row ``k`` of ``W`` holds coefficients ``w`` with vector ``B^T w``.
    """

    name = "kernel"

    def __init__(self, X: np.ndarray, W0: np.ndarray):
        n, T, d = X.shape
        self.shape = (n, T)
        self.nT = n * T
        flat = X.reshape(self.nT, d)
        extra = W0 if np.any(W0) else np.zeros((0, d))
        self.basis = np.concatenate([flat, extra]) if len(extra) else flat
        self.G = self.basis @ self.basis.T
        self.W0 = np.zeros((2, len(self.basis)))
        if len(extra):
            self.W0[0, self.nT] = self.W0[1, self.nT + 1] = 1.0
        self._token_cols = np.ascontiguousarray(self.G[:, : self.nT])

    def evaluate(self, W: np.ndarray, y: np.ndarray, with_grads: bool = True) -> _Evaluation:
        live = W.any(axis=1)
        values, scores = _row_products(W, self._token_cols, live).reshape(2, *self.shape)
        lg = token_loss_and_grads(y, scores, values)
        grads = np.zeros((2, len(self.basis)))
        grads[0, : self.nT] = lg.grad_v.reshape(-1)
        grads[1, : self.nT] = lg.grad_p.reshape(-1)
        return _Evaluation(lg, grads, _peak(values, scores))

    def sq_norms(self, W: np.ndarray) -> np.ndarray:
        return np.maximum(np.einsum("km,km->k", W @ self.G, W), 0.0)

    def dense(self, W: np.ndarray) -> np.ndarray:
        return W @ self.basis


class _MultiHeadDenseGDState(_DenseGDState):
    """:class:`_DenseGDState` for H > 1 heads: ``W`` of shape (2H, d), rows ``v_1..v_H`` then
    ``p_1..p_H``; X is read whole (no blocking: the multi-head model is for moderate sizes)."""

    def __init__(self, X: np.ndarray, W0: np.ndarray, heads: int):
        super().__init__(X, W0)
        self.heads = heads

    def evaluate(self, W: np.ndarray, y: np.ndarray, with_grads: bool = True) -> _Evaluation:
        h = self.heads
        products = (W @ self.flat.T).reshape(2, h, self.n, self.T)
        lg = multihead_token_loss_and_grads(y, products[1], products[0])
        grads = np.zeros_like(W)
        if with_grads:
            coef = np.concatenate([lg.grad_v, lg.grad_p]).reshape(2 * h, -1)
            grads = coef @ self.flat
        return _Evaluation(lg, grads, _peak(products[0], products[1]))


class _MultiHeadKernelGDState(_KernelGDState):
    """:class:`_KernelGDState` for H > 1 heads: ``W`` of shape (2H, nT [+ 2H]), rows ``v_1..v_H``
    then ``p_1..p_H`` as coefficients; a random initialisation adds its 2H vectors to the basis."""

    def __init__(self, X: np.ndarray, W0: np.ndarray, heads: int):
        n, T, d = X.shape
        self.heads = heads
        self.shape = (n, T)
        self.nT = n * T
        flat = X.reshape(self.nT, d)
        self.basis = np.concatenate([flat, W0]) if np.any(W0) else flat
        self.G = self.basis @ self.basis.T
        self.W0 = np.zeros((2 * heads, len(self.basis)))
        if len(self.basis) > self.nT:
            self.W0[:, self.nT :] = np.eye(2 * heads)
        self._token_cols = np.ascontiguousarray(self.G[:, : self.nT])

    def evaluate(self, W: np.ndarray, y: np.ndarray, with_grads: bool = True) -> _Evaluation:
        h = self.heads
        products = (W @ self._token_cols).reshape(2, h, *self.shape)
        lg = multihead_token_loss_and_grads(y, products[1], products[0])
        grads = np.zeros((2 * h, len(self.basis)))
        grads[:h, : self.nT] = lg.grad_v.reshape(h, -1)
        grads[h:, : self.nT] = lg.grad_p.reshape(h, -1)
        return _Evaluation(lg, grads, _peak(products[0], products[1]))


def _gd_state(form: str, X: np.ndarray, W0: np.ndarray, heads: int) -> Any:
    """The iterate's state for ``form`` and the number of heads (one head: the original
    classes, so that H = 1 runs exactly as before heads existed)."""
    if heads == 1:
        return (_KernelGDState if form == "kernel" else _DenseGDState)(X, W0)
    return (_MultiHeadKernelGDState if form == "kernel" else _MultiHeadDenseGDState)(X, W0, heads)


def _split_heads(W: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """``(v, p)`` from stacked rows: vectors of shape (d,) for one head, (H, d) for H."""
    return (W[0], W[1]) if heads == 1 else (W[:heads], W[heads:])


@verbose_switch
def gradient_descent(
    X: Any,
    y: Any = None,
    *,
    schedule: Literal["two-step", "constant", "normalized"] = "two-step",
    steps: int | None = None,
    step_size: float | None = None,
    beta0: float | None = None,
    beta1: float | None = None,
    weight_decay: float = 0.0,
    R: float | None = None,
    init: Literal["zero", "random"] = "zero",
    init_scale: float = 1e-2,
    seed: int | np.random.SeedSequence | None = None,
    form: Literal["auto", "dense", "kernel"] = "auto",
    test: Dataset | None = None,
    record_steps: Iterable[int] | None = None,
    record_every: int | None = None,
    tol: float = 0.0,
    callback: Callable[[dict[str, float]], None] | None = None,
    train: tuple[str, ...] = ("v", "p"),
    v0: Any = None,
    heads: int = 1,
) -> GDResult:
    """Full-batch gradient descent on the mean logistic loss over ``(v, p)``.

    Parameters
    ----------
    X : Dataset or array-like of shape (n_samples, n_tokens, n_features)
        Training tokens; a :class:`~margin_solver.core.data.Dataset` also supplies ``y``
        and the clean labels / signal index used for the trajectory's metrics.
    y : array-like of shape (n_samples,), optional
        Any two labels (numbers, booleans or strings; read once by
        :func:`margin_solver.core.validation.encode_labels`: the larger is +1);
        required unless ``X`` is a Dataset.
    schedule : {"two-step", "constant", "normalized"}, default="two-step"
    steps : int, optional
        Number of steps; fixed at 2 for ``"two-step"``, default 1000 otherwise.
    step_size : float, optional
        Step of ``"constant"`` (default: the default ``beta0``, halved at the first step while
        it would raise the objective, then kept for every step) or the length of each
        ``"normalized"`` step in the joint (v, p) norm (default ``1 / nu``, so token
        values move by O(1) per step; ``nu^2`` is the mean squared token norm).
    beta0, beta1 : float, optional
        Steps of ``"two-step"``, taken exactly as given (the paper's schedule). Each one left
        out defaults to :func:`default_step_sizes`, safeguarded: halved while it would raise
        the objective (at most :data:`MAX_HALVINGS` times). On the paper's distribution the
        default steps lower the loss wherever two steps interpolate, so the safeguard does
        not act there; on real tokens (correlated, with label imbalance) the scaled steps
        raise the loss and are halved (docs/decisions.md, "Safeguarded default GD steps").
    weight_decay : float, default=0.0
        ``lam`` in the objective ``L + (lam / 2)(||v||^2 + ||p||^2)``. The authors relate
        the min-norm interpolator to GD with small weight decay (authors' reply, W2 and Q1).
    R : float, optional
        Norm cap: after each step ``p <- p * min(1, R / ||p||)``.
    init : {"zero", "random"}, default="zero"
        ``"random"`` draws ``v0, p0`` with i.i.d. ``N(0, (init_scale / nu)^2)``
        coordinates, so initial token values and scores are O(init_scale).
    init_scale : float, default=1e-2
    seed : int or SeedSequence, optional
        Seed of the random initialisation.
    form : {"auto", "dense", "kernel"}, default="auto"
        ``"auto"`` takes the kernel form when its steps are cheaper (``nT < 2 d``), the run
        is long enough to repay the one-off Gram product (``steps > nT d / (4 d - 2 nT)``,
        about ``nT / 4`` when ``d >> nT``) and ``nT <= MAX_KERNEL_TOKENS``.
    test : Dataset, optional
        Held-out data for the trajectory's test errors.
    record_steps : iterable of int, optional
        Steps (0 = initialisation) at which to record the trajectory.
    record_every : int, optional
        Record every so many steps (and the last step). Default: every step for
        ``"two-step"``, about 100 points otherwise.
    tol : float, default=0.0
        Stop with status ``"converged"`` when the objective's gradient norm is <= tol.
    callback : callable, optional
        Called with each recorded row (a dict) as soon as it is recorded, e.g. to
        write progress to disk.
    heads : int, default=1
        Number of attention heads H of ``f(X) = sum_h v_h^T X^T softmax(X p_h)``
        (docs/theory.md, "Multi-head attention"); 1 is the single-head model, run exactly as
        before. The cap ``R`` and the weight decay act on the concatenations
        ``(v_1, ..., v_H)`` and ``(p_1, ..., p_H)``. From ``init="zero"`` every head gets the
        same gradient, so the heads stay identical (the model is then one head with ``H``
        times its value head); ``init="random"`` breaks that symmetry.
    train : tuple of {"v", "p"}, default=("v", "p")
        The blocks GD moves; the others keep their initial value exactly (their gradient,
        weight decay included, is zeroed). ``("p",)`` with a fixed ``v0`` is the setting of
        Sakamoto et al. (ICML 2025) and Tarzanagh et al. (max-margin token selection);
        ``("v",)`` keeps the attention fixed (uniform from zero initialisation).
    v0 : array-like of shape (n_features,), or (heads, n_features) for several heads, optional
        Initial value head(s), replacing the initialisation's ``v`` (``p`` still starts
        from ``init``).

    Returns
    -------
    GDResult

    Raises
    ------
    InvalidInputError
        Bad shapes or labels, unknown options, non-positive step sizes, record steps
        outside ``[0, steps]``, a test set of another dimension.

    Warns
    -----
    margin_solver.core.results.ConvergenceWarning
        The status is ``"diverged"`` or ``"not_fitted"`` (``success`` False).

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> train = PaperDistribution(d=2000, snr=0.35, eta=0.1).sample(20, seed=0)
    >>> res = gradient_descent(train)
    >>> res.status, res.nit, bool(res.interpolates)
    ('completed', 2, True)
    """
    start = time.perf_counter()
    heads = check_int(heads, "heads", 1)
    mask = _train_mask(train, heads)  # before ``train`` names the training set below
    train = as_dataset(X, y)
    check_magnitude(train.X, "X")
    n, T, d = train.X.shape
    Xtr = train.X
    yf = train.y.astype(np.float64)
    if schedule not in SCHEDULES:
        raise InvalidInputError(f"schedule must be one of {SCHEDULES}, got {schedule!r}.")
    if init not in INITS:
        raise InvalidInputError(f"init must be one of {INITS}, got {init!r}.")
    if form not in FORMS:
        raise InvalidInputError(f"form must be one of {FORMS}, got {form!r}.")
    if test is not None:
        test = as_dataset(test, None, name="test")
        if test.d != d:
            raise InvalidInputError(f"test has d={test.d} features but the training set has d={d}.")
        check_same_classes(test, train)
    steps = _check_steps(schedule, steps)
    sizes = _step_sizes(Xtr, schedule, steps, step_size, beta0, beta1)
    lam = check_nonnegative(weight_decay, "weight_decay")
    if R is not None:
        R = check_radius(R)
    tol = check_nonnegative(tol, "tol")
    seed = check_seed(seed)
    recorded = _record_set(schedule, steps, record_steps, record_every)

    chosen = _choose_form(form, n * T, d, steps)
    if heads > 1:
        _check_heads_memory(chosen, n * T, d, heads, init == "random")
    W0 = np.zeros((2 * heads, d))
    if init == "random":
        scale = check_positive(init_scale, "init_scale") / math.sqrt(token_scale(Xtr))
        W0 = np.random.default_rng(seed).normal(0.0, scale, size=(2 * heads, d))
    if v0 is not None:
        W0[:heads] = _check_v0(v0, d, heads)
    state = _gd_state(chosen, Xtr, W0, heads)
    W = state.W0.copy()
    if R is not None:
        _cap(state, W, R, heads)

    rows: list[dict[str, float]] = []

    def record(t: int, W: np.ndarray, lg: LossGrads) -> None:
        rows.append(_record(t, state.dense(W), lg, state.sq_norms(W), lam, train, test, heads))
        if callback is not None:
            callback(rows[-1])

    status, message = COMPLETED, ""
    guarded = _guarded_steps(schedule, beta0, beta1, step_size)
    ev = state.evaluate(W, yf)
    last_good: tuple[np.ndarray, LossGrads | None] = (W, None)
    start_objective = math.nan
    halvings = [0] * len(sizes)
    taken = list(sizes)
    t = 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(steps + 1):
            lg, grads, _ = ev
            if not _finite(ev, W):
                status = DIVERGED
                message = (
                    f"diverged at step {t}: non-finite parameters or loss, or token values / "
                    f"scores beyond {OVERFLOW:g}; the step sizes "
                    f"{sizes} are too large for this data. Returned the last finite iterate "
                    f"(step {t - 1})."
                )
                break
            if t == 0:
                start_objective = _objective(state, W, lg, lam)
            last_good = (W, lg)
            if t in recorded:
                record(t, W, lg)
            if t == steps:
                break
            if lam:
                grads = grads + lam * W
            if mask is not None:
                grads = grads * mask
            if tol and math.sqrt(float(state.sq_norms(grads).sum())) <= tol:
                status = CONVERGED
                message = f"objective gradient norm <= tol={tol:g} at step {t}."
                if t not in recorded:
                    record(t, W, lg)
                break
            k = t if schedule == "two-step" else 0  # a constant step is settled at step 0
            W, ev, size, halved = _step(
                state,
                W,
                ev,
                grads,
                yf,
                schedule,
                taken[k],
                lam,
                R,
                guard=guarded[k] and k == t,
                last=t + 1 == steps,
                heads=heads,
            )
            if halved:
                halvings[k] += halved
                taken[k] = size

    W, lg = last_good
    if lg is None:  # diverged at step 0: only possible with a non-finite random init
        raise InvalidInputError("The initial point is not finite; lower init_scale.")
    steps_done = t if status != DIVERGED else max(t - 1, 0)
    v, p = _split_heads(state.dense(W), heads)
    sq = state.sq_norms(W)
    margin = float(np.min(lg.margins))
    norm_v, norm_p = math.sqrt(sq[:heads].sum()), math.sqrt(sq[heads:].sum())
    final_objective = _objective(state, W, lg, lam)
    backtracked = _backtrack_note(schedule, halvings, sizes, taken)
    if status != DIVERGED and final_objective > start_objective:
        status = DIVERGED
        message = (
            f"the {'loss' if not lam else 'objective'} rose from "
            f"{start_objective:.4g} to {final_objective:.4g} over {steps_done} steps "
            f"({schedule}, step sizes {_fmt(taken)}); the steps are too large for this data."
        )
    elif status != DIVERGED and schedule == "two-step" and not margin > 0:
        status = NOT_FITTED
        message = _not_fitted_message(train, lg.margins, lg.loss)
    elif status == COMPLETED:
        message = (
            f"ran all {steps} steps ({schedule}); final loss {lg.loss:.4g}, "
            f"{'interpolates' if margin > 0 else 'does not interpolate'} the training set."
            + ("" if margin > 0 else _unfittable_note(train))
        )
    message += backtracked
    if STATUS_TABLE[status][0]:
        logger.info("gradient_descent: %s", message)
    else:
        warnings.warn(
            f"gradient_descent ended with status {status!r}: {message}",
            ConvergenceWarning,
            stacklevel=3,  # 3: past verbose_switch
        )
    return GDResult(
        v=v,
        p=p,
        trajectory=_columns(rows),
        status=status,
        message=message,
        schedule=schedule,
        step_sizes=taken,
        steps=steps_done,
        weight_decay=lam,
        R=R,
        init=init,
        form=state.name,
        loss=lg.loss,
        margin=margin,
        norm=norm_v,
        norm_p=norm_p,
        normalized_margin=margin / norm_v if norm_v > 0 else float("nan"),
        attention=lg.attention,
        selected_token=np.argmax(_head_mean(lg.attention, heads), axis=1),
        solve_time=time.perf_counter() - start,
        heads=heads,
        classes=train.classes,
    )


def _update(state: Any, W: np.ndarray, grads: np.ndarray, schedule: str, size: float) -> np.ndarray:
    if schedule != "normalized":
        return W - size * grads
    norm = math.sqrt(float(state.sq_norms(grads).sum()))
    return W if norm == 0 else W - (size / norm) * grads


#: A step the package chose is halved at most this often (2^-60 ~ 1e-18 of its size).
MAX_HALVINGS = 60


def _step(
    state: Any,
    W: np.ndarray,
    ev: _Evaluation,
    grads: np.ndarray,
    y: np.ndarray,
    schedule: str,
    size: float,
    lam: float,
    R: float | None,
    *,
    guard: bool,
    last: bool = False,
    heads: int = 1,
) -> tuple[np.ndarray, _Evaluation, float, int]:
    """One step from ``W``; a guarded step is halved while it raises the objective.

    Returns the new iterate, its evaluation, the size taken and the number of halvings.
    Only step sizes the package chose are guarded: a step the caller gave is taken as given.
    After the ``last`` step no gradient is needed, so its evaluation skips the backward
    product (half its cost).
    """
    # The objective is computed only for a guarded step: with weight decay in the kernel
    # form its norm term costs as much as the step itself.
    before = _objective(state, W, ev.lg, lam) if guard else math.nan
    for halved in range(MAX_HALVINGS + 1):
        W_new = _update(state, W, grads, schedule, size)
        if R is not None:
            _cap(state, W_new, R, heads)
        ev_new = state.evaluate(W_new, y, with_grads=not last)
        if not guard or (
            _finite(ev_new, W_new) and _objective(state, W_new, ev_new.lg, lam) <= before
        ):
            return W_new, ev_new, size, halved
        size /= 2
    return W_new, ev_new, size * 2, MAX_HALVINGS


def _guarded_steps(
    schedule: str, beta0: float | None, beta1: float | None, step_size: float | None
) -> tuple[bool, ...]:
    """Which step sizes are safeguarded: those the package chose, of the two-step schedule
    and of the constant one (whose size is settled at its first step, then kept)."""
    if schedule == "two-step":
        return (beta0 is None, beta1 is None)
    return (schedule == "constant" and step_size is None,)


def _finite(ev: _Evaluation, W: np.ndarray) -> bool:
    return bool(math.isfinite(ev.lg.loss) and np.isfinite(W).all() and ev.peak <= OVERFLOW)


def _objective(state: Any, W: np.ndarray, lg: LossGrads, lam: float) -> float:
    return lg.loss + 0.5 * lam * float(state.sq_norms(W).sum()) if lam else lg.loss


def _fmt(sizes: Iterable[float]) -> str:
    return "[" + ", ".join(f"{s:.4g}" for s in sizes) + "]"


def _backtrack_note(
    schedule: str, halvings: list[int], planned: tuple[float, ...], taken: list[float]
) -> str:
    """Message tail naming the default steps that were halved because they raised the loss."""
    if schedule != "two-step":
        if not halvings[0]:
            return ""
        return (
            f" The default step size raised the loss at the first step on this data, so it was "
            f"halved {halvings[0]} times ({planned[0]:.4g} -> {taken[0]:.4g}) and kept for "
            "every step (pass step_size to take an exact step)."
        )
    parts = [
        f"step {k + 1} halved {h} times ({planned[k]:.4g} -> {taken[k]:.4g})"
        for k, h in enumerate(halvings)
        if h
    ]
    if not parts:
        return ""
    return (
        f" Default step sizes raised the loss on this data, so {'; '.join(parts)} until it "
        "did not (pass beta0/beta1 to take exact steps)."
    )


def _not_fitted_message(train: Dataset, margins: np.ndarray, loss: float) -> str:
    """Why a two-step run did not interpolate, with what the theorem does and does not promise."""
    wrong = margins <= 0
    what = f"two steps did not fit {int(wrong.sum())} of {len(margins)} training labels"
    if train.clean_y is not None:
        flipped = int(np.sum(wrong & (train.y != train.clean_y)))
        what += f" ({flipped} of them flipped)"
    unfittable = _unfittable_note(train)
    if unfittable:  # no model fits these data: neither the optimiser nor the theorem is at fault
        return f"{what}; final loss {loss:.4g}.{unfittable}"
    at = f" (here kappa = n SNR^2 = {train.kappa:.3g})" if train.kappa is not None else ""
    return (
        f"{what}; final loss {loss:.4g}. Theorem 3.3 of Magen et al. (arXiv 2410.07746) "
        "promises two-step interpolation only for nearly orthogonal noise tokens, an SNR below "
        f"its upper limit{at} and the authors' step sizes (the defaults here are this "
        "package's own): a failure of the optimiser, not evidence against the theorem. "
        "Longer GD (schedule='constant') or the min-norm solver may fit."
    )


def _unfittable_note(train: Dataset) -> str:
    """A sentence when no (v, p) can fit every label, else the empty string.

    Samples with the same tokens and opposite labels get the same output for every (v, p)
    (:func:`margin_solver.core.kernel.conflicting_pairs`), so a run that leaves them unfitted has
    not failed as an optimiser.
    """
    pairs = conflicting_pairs(train.X, train.y)
    if not pairs:
        return ""
    i, j = pairs[0]
    return (
        f" No model interpolates these data: samples {i} and {j} have the same tokens and "
        f"opposite labels ({len(pairs)} such pair{'s' if len(pairs) > 1 else ''}), so at least "
        "one of each pair stays misfitted whatever the steps."
    )


def _peak(values: np.ndarray, scores: np.ndarray) -> float:
    """Largest |token value| or |score|; NaN propagates (and fails ``<= OVERFLOW``)."""
    return float(np.maximum(np.abs(values).max(), np.abs(scores).max()))


def _cap(state: Any, W: np.ndarray, R: float, heads: int = 1) -> None:
    """Project ``p`` (the last ``heads`` rows of ``W``; H heads: the concatenation
    ``(p_1, ..., p_H)``) on the ball ``||p|| <= R`` in place."""
    norm_p = math.sqrt(float(state.sq_norms(W[heads:]).sum()))
    if norm_p > R:
        W[heads:] *= R / norm_p


def _record(
    t: int,
    dense: np.ndarray,
    lg: LossGrads,
    sq: np.ndarray,
    lam: float,
    train: Dataset,
    test: Dataset | None,
    heads: int = 1,
) -> dict[str, float]:
    v, p = _split_heads(dense, heads)  # finite: the loop stops at the first non-finite iterate
    # The training outputs are those of the step's own evaluation: no second pass over X.
    tr = output_metrics(train.y * lg.margins, _head_mean(lg.attention, heads), train)
    te = head_metrics(v, p, test) if test is not None else None
    norm_v = math.sqrt(sq[:heads].sum())
    return {
        "step": t,
        "loss": lg.loss,
        "objective": lg.loss + 0.5 * lam * float(sq.sum()),
        "train_error": tr.error,
        "train_error_clean": _nan(tr.error_clean),
        "test_error": _nan(te.error if te else None),
        "test_error_clean": _nan(te.error_clean if te else None),
        "attn_signal_clean": _nan(tr.attn_signal_clean),
        "attn_signal_noisy": _nan(tr.attn_signal_noisy),
        "norm_v": norm_v,
        "norm_p": math.sqrt(sq[heads:].sum()),
        "min_margin": tr.min_margin,
        "normalized_margin": tr.min_margin / norm_v if norm_v > 0 else float("nan"),
    }


def _train_mask(train: Any, heads: int) -> np.ndarray | None:
    """Rows of W that move (a (2 H, 1) 0/1 column: the H value rows, then the H
    attention rows), or None when both blocks do."""
    blocks = (train,) if isinstance(train, str) else tuple(train)
    if not blocks or not set(blocks) <= {"v", "p"}:
        raise InvalidInputError(f"train must name some of 'v' and 'p', got {train!r}.")
    if set(blocks) == {"v", "p"}:
        return None
    return np.repeat(np.array([["v" in blocks], ["p" in blocks]], dtype=np.float64), heads, axis=0)


def _check_v0(v0: Any, d: int, heads: int) -> np.ndarray:
    v0 = np.asarray(v0, dtype=np.float64)
    shape = (d,) if heads == 1 else (heads, d)
    if v0.shape != shape or not np.all(np.isfinite(v0)):
        raise InvalidInputError(
            f"v0 must be a finite array of shape {shape}, got shape {v0.shape}."
        )
    return v0.reshape(heads, d)


def _head_mean(attention: np.ndarray, heads: int) -> np.ndarray:
    """Attention (n, T) for the metrics: the heads' mean for H > 1 heads."""
    return attention if heads == 1 else attention.mean(axis=0)


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _columns(rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    out = {k: np.array([r[k] for r in rows], dtype=np.float64) for k in TRAJECTORY_COLUMNS}
    out["step"] = out["step"].astype(np.int64)
    return out


def _check_steps(schedule: str, steps: int | None) -> int:
    if schedule == "two-step":
        if steps not in (None, 2):
            raise InvalidInputError(
                f"The two-step schedule takes exactly 2 steps, got steps={steps!r}; "
                "use schedule='constant' for longer runs."
            )
        return 2
    if steps is None:
        return 1000
    return check_int(steps, "steps", 1)


def _step_sizes(
    X: np.ndarray,
    schedule: str,
    steps: int,
    step_size: float | None,
    beta0: float | None,
    beta1: float | None,
) -> tuple[float, ...]:
    if schedule == "two-step":
        if step_size is not None:
            raise InvalidInputError("The two-step schedule takes beta0 and beta1, not step_size.")
        d0, d1 = default_step_sizes(X) if beta0 is None or beta1 is None else (beta0, beta1)
        b0 = d0 if beta0 is None else check_positive(beta0, "beta0")
        b1 = d1 if beta1 is None else check_positive(beta1, "beta1")
        return (b0, b1)
    if beta0 is not None or beta1 is not None:
        raise InvalidInputError(
            f"beta0/beta1 belong to the two-step schedule; use step_size for {schedule!r}."
        )
    if step_size is not None:
        return (check_positive(step_size, "step_size"),)
    if schedule == "constant":
        return (default_step_sizes(X)[0],)
    return (1.0 / math.sqrt(token_scale(X)),)


def _record_set(
    schedule: str, steps: int, record_steps: Iterable[int] | None, record_every: int | None
) -> set[int]:
    if record_steps is not None and record_every is not None:
        raise InvalidInputError("Give record_steps or record_every, not both.")
    if record_steps is not None:
        out = {int(s) for s in record_steps}
        bad = sorted(s for s in out if not 0 <= s <= steps)
        if bad:
            raise InvalidInputError(f"record_steps must lie in [0, {steps}], got {bad[:5]}.")
        return out
    if record_every is None:
        record_every = 1 if schedule == "two-step" else max(1, steps // 100)
    record_every = check_int(record_every, "record_every", 1)
    return set(range(0, steps + 1, record_every)) | {steps}


#: Arrays of 2H rows that a multi-head GD step holds at once (iterate, start, gradient, the
#: previous iterate and the products' working copies), counted for its memory check.
_HEAD_ARRAYS = 6


def _check_heads_memory(form: str, nT: int, d: int, heads: int, random_init: bool) -> None:
    """Refuse, before anything of their size is allocated, heads whose GD state cannot fit:
    ``_HEAD_ARRAYS`` arrays of 2H rows of the form's width (d, or the kernel basis of nT
    tokens plus the 2H random initial vectors) and, in the kernel form, the basis's Gram
    matrix, plus the per-token scores and values of every head."""
    width = d if form == "dense" else nT + (2 * heads if random_init else 0)
    floats = _HEAD_ARRAYS * 2 * heads * width + 8 * 2 * heads * nT
    if form == "kernel":
        floats += width * width
    check_memory(
        8 * floats,
        f"gradient descent with {heads} heads ({form} form, {2 * heads} rows of {width} floats "
        "per array)",
        "use fewer heads",
    )


def _choose_form(form: str, nT: int, d: int, steps: int) -> str:
    """Flop count: a dense step does two (2 x nT x d) products, ``4 nT d``; a kernel step one
    (2 x nT x nT) product, ``2 (nT)^2``, after the ``(nT)^2 d`` Gram product. The kernel
    form wins when its steps are cheaper (``nT < 2d``) and the run repays the Gram product:
    ``steps > (nT)^2 d / (4 nT d - 2 (nT)^2)``."""
    if form != "auto":
        return form
    if nT > MAX_KERNEL_TOKENS or nT >= 2 * d:
        return "dense"
    return "kernel" if steps > nT * d / (4 * d - 2 * nT) else "dense"
