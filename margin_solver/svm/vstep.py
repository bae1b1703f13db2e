"""The v-step: the hard-margin SVM without bias on fixed features (docs/theory.md).

For a fixed attention vector p the min-norm interpolator's value vector solves

    minimize ||v||  subject to  y_i z_i^T v >= 1  (i = 1..n),

with features z_i = X_i^T softmax(X_i p). Its dual is

    maximize sum(alpha) - 1/2 ||sum_i alpha_i y_i z_i||^2  over alpha >= 0,

with v = sum_i alpha_i y_i z_i and ||v||^2 = sum(alpha) at the optimum.

Five engines solve it:

``"ecos"`` / ``"clarabel"``
    The Gram reduction. v lies in span{z_i}, so with K = Z Z^T = B B^T and w = B^T beta
    (v = Z^T beta) the problem becomes minimize ||w|| s.t. diag(y) B w >= 1: n variables
    instead of d (ECOS as an SOC, Clarabel with the equivalent objective 1/2 ||w||^2). The
    cvxpy model is built once per (n, solver) with ``G = diag(y) B`` as a DPP parameter and
    cached, so re-solves with new features skip canonicalisation (:mod:`margin_solver.svm.conic`,
    imported, and with it cvxpy, only when one of these engines runs).
``"ldp"``
    Least-distance programming (Lawson and Hanson 1974, ch. 23): the same reduced problem
    solved exactly by one non-negative least-squares problem (:func:`scipy.optimize.nnls`),
    with B the Cholesky factor of K when K is well conditioned.
``"active"``
    The dual, ``minimize 1/2 a^T Q a - sum(a)`` over ``a >= 0`` with Q = diag(y) K diag(y),
    by a primal active-set method (Lawson and Hanson's, on the quadratic form) that keeps the
    Cholesky factor of Q on its passive set and updates it by one row in or out per step
    (:func:`_kkt_on_support`), exact at its end like the LDP. It starts from a given support
    (the previous v-step's, along a descent: :func:`solve_vstep_from_support`) or, cold,
    from every sample; it never claims infeasibility, and when it ends without a KKT point
    on a well-conditioned support the LDP runs after it.
``"primal"``
    The plain SOCP over d variables, kept as a reference.

Every engine hands back a primal point, as coefficients v = Z^T coef, and a dual vector
alpha. The KKT system is then solved exactly on the support the engine found, and the
certificate (norm, smallest margin, duality gap of the primal-dual pair) is recomputed here in
numpy rather than taken from the solver.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from functools import cached_property, partial
from typing import Any, NamedTuple

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dtpsv
from scipy.linalg.lapack import dpocon, dpotrf, dpotrs, dppcon
from scipy.optimize import nnls

from margin_solver.core.kernel import gram_distance_rounding
from margin_solver.core.results import (
    FAILED,
    INFEASIBLE,
    OPTIMAL,
    OPTIMAL_INACCURATE,
    Renamed,
    ResultMixin,
    renamed,
)
from margin_solver.core.strategy import DEFAULT_STRATEGY, VSTEP_ACTIVE_PIVOTS_PER_SAMPLE
from margin_solver.core.validation import (
    InvalidInputError,
    check_labels,
    check_magnitude,
    check_matrix,
    check_positive,
)

logger = logging.getLogger("margin_solver")

#: Engine names accepted by :func:`solve_vstep`.
ENGINES = ("ecos", "clarabel", "ldp", "active", "primal")

# Order in which engines stand in for one another. "primal" is never a stand-in: it is the
# slow reference, and the Gram engines solve the same problem.
_FALLBACK_ORDER = ("ecos", "clarabel", "ldp")

# A solve counts as "optimal" only when the relative duality gap we recompute is below this
# multiple of ``tol``; interior-point solvers typically end a few times below their tolerance.
_GAP_FACTOR = 1e3

# Two rows "may be the same feature" when ||z_i - z_j||^2 <= _SAME_RTOL * (||z_i||^2 + ||z_j||^2).
# The squared distance is read off K, whose entries carry rounding of order eps * K_ii, so
# below about 100 eps it cannot be told from 0. Such rows are compared exactly when Z is
# given; otherwise (and when they differ) they only bound ||v|| from below
# (_near_conflicts). Rows farther apart are left to the engines.
_SAME_RTOL = 100 * np.finfo(np.float64).eps

# Margin violation tolerated in the exact KKT solve on the support (_solve_on_support);
# anything left is removed by the rescaling to smallest margin 1.
_KKT_RTOL = 1e-9

# K / scale is factored by Cholesky for the LDP engine when its reciprocal condition number
# estimate exceeds this times n: far above n * eps, the eigenvalue clipping threshold of
# _VStepData.factor, so that no eigenvalue would have been clipped.
_CHOLESKY_RCOND_PER_N = 100 * np.finfo(np.float64).eps

# Linear solves (Cholesky of the passive set, ~0.05 ms at n = 100) the active-set method of
# solve_vstep_on_support may spend before it leaves the problem to the full v-step (~1 ms).
# Measured (min-norm on digits, n = 40 / 80): 1 solve (the guess alone) 0.93 / 2.57 s,
# 4 solves 0.73 / 1.98 s, 12 solves 0.73 / 1.98 s; no difference on the paper's data.
_SUPPORT_SOLVES = 4

# Smallest reciprocal condition number of Q_PP that _kkt_on_support solves with. Its duals
# are then accurate to about eps / rcond <= 1e-6 relative, and every answer is certified
# afterwards (_certified). Nearly hard attention on the paper's data (n = 100, T = 4,
# kappa = 4, R sqrt(d) = 100) makes Q_PP condition numbers of 7e8 (samples attending to one
# shared signal token, told apart by the leak): 1e-8 left 38 of the polish's 74 v-steps to
# the general v-step there, 1e-10 15, same norm to 5e-15 (docs/decisions.md, "Nearly hard
# attention: the dominance test at every step").
_SUPPORT_RCOND = 1e-10

# A given K whose smallest eigenvalue is below -_NOT_PSD_RTOL times its largest is not a Gram
# matrix. Rounding in a computed Z Z^T moves eigenvalues by about n eps lambda_max, far less.
_NOT_PSD_RTOL = 1e-8

# LDP declares infeasibility when its NNLS residual norm falls below this. The residual is
# 1 / sqrt(1 + ||w||^2) on the normalised problem, so this means a margin below 1e-8 of the
# root-mean-square feature norm: beyond what float64 can certify.
_LDP_INFEASIBLE_RNORM = 1e-8


@renamed(Renamed("n_iter", "nit"))
@dataclasses.dataclass(repr=False)
class VStepResult(ResultMixin):
    """Outcome of :func:`solve_vstep`.

    Attributes
    ----------
    v : ndarray of shape (n_features,) or None
        The min-norm separator, ``Z.T @ coef``; None when only the Gram matrix was given or
        when no solution is present.
    alpha : ndarray of shape (n_samples,) or None
        Dual variables, non-negative; positive only on support vectors (up to solver
        accuracy when ``refined`` is False).
    coef : ndarray of shape (n_samples,) or None
        v as a combination of the features, v = sum_i coef_i z_i exactly: the form callers
        working with a Gram matrix (token-Gram form) need. It equals ``alpha * y`` at the
        optimum (to solver accuracy; exactly for ``"ldp"``). When K is singular the
        combination is not unique: it is ``alpha * y`` when the KKT system was solved on the
        support by Cholesky, else the minimum-norm one.
    norm : float
        ||v||, computed as sqrt(coef^T K coef).
    min_margin : float
        min_i y_i z_i^T v. Equals 1 up to rounding for a solution (see ``rescale``).
    gap : float
        Relative duality gap (P - D) / P with P = ||v||^2 / 2 and
        D = sum(alpha) - ||Z^T (alpha * y)||^2 / 2, both recomputed from the returned v and
        alpha. Since v is feasible, P - D >= 0 bounds how far ||v||^2 / 2 is above the
        optimum.
    status : str
        ``"optimal"``, ``"optimal_inaccurate"``, ``"infeasible"`` or ``"failed"``.
    message : str
        What happened, including why any engine was skipped.
    solver : str or None
        The engine that produced the answer.
    fallbacks : list of str
        ``"engine: reason"`` for every engine that was tried and failed before ``solver``.
    solve_time : float
        Wall-clock seconds for the whole call, including the Gram product when it was computed.
    nit : int or None
        Iterations reported by the engine (None when it does not report them; scipy's
        name, ``n_iter`` is a deprecated alias for one release).
    rescale : float
        The factor 1 / min_margin applied to the primal point so that the returned v is
        exactly feasible with smallest margin 1 (1.0 means no change; nan without a solution).
    refined : bool
        True when the KKT system was solved exactly on the engine's support vectors (see
        Notes of :func:`solve_vstep`).
    infeasible_samples : list of int
        When infeasible: the samples that together cannot be separated. Empty otherwise.
    norm_bound : float
        A proven lower bound on ``||v||`` for every separator when no solution is attached:
        ``inf`` when infeasible; when the status is ``"failed"`` because features are equal
        (or zero) only to within the rounding of K, ``2 / delta`` with ``delta`` an upper
        bound on their distance (``1 / ||z_i||`` for a near-zero feature; 0 when the
        rounding of K is unknown); else 0.
    unresolved : bool
        True when the status is ``"failed"`` because features of opposite labels are equal
        (or features zero) to within the rounding of K but not proven so: no engine is run,
        as none can resolve it, and no proof of infeasibility exists.
    """

    v: np.ndarray | None
    alpha: np.ndarray | None
    coef: np.ndarray | None
    norm: float
    min_margin: float
    gap: float
    status: str
    message: str
    solver: str | None
    fallbacks: list[str]
    solve_time: float
    nit: int | None = None
    rescale: float = float("nan")
    refined: bool = False
    infeasible_samples: list[int] = dataclasses.field(default_factory=list)
    norm_bound: float = 0.0
    unresolved: bool = False

    @property
    def broke_down(self) -> bool:
        """True when every engine failed: nothing is known about the problem (unlike a
        ``failed`` that is ``unresolved``)."""
        return self.status == FAILED and not self.unresolved


class _EngineOutput(NamedTuple):
    """What an engine hands back, in the original scale of the problem.

    ``coef`` is the primal point as v = Z^T coef and ``alpha`` the dual; both are None unless
    the status comes with a solution.
    """

    status: str
    coef: np.ndarray | None = None
    alpha: np.ndarray | None = None
    n_iter: int | None = None
    reason: str = ""  # why there is no solution, when the status does not say it


class _Factor(NamedTuple):
    """K / scale = U diag(root^2) U^T, clipped; G = diag(y) U diag(root) of shape (n, n)."""

    G: np.ndarray
    U: np.ndarray
    root: np.ndarray
    scale: float


class _VStepData:
    """Validated inputs with the Gram matrix and its factor computed lazily, once."""

    def __init__(self, Z: Any, y: Any, K: Any) -> None:
        if Z is None and K is None:
            raise InvalidInputError("Give the features Z or their Gram matrix K = Z @ Z.T.")
        self.Z = None if Z is None else check_magnitude(check_matrix(Z, "Z"), "Z")
        n = self.Z.shape[0] if self.Z is not None else None
        self._K_given = None if K is None else _check_gram(K, n)
        self.n = n if n is not None else self._K_given.shape[0]
        self.y = check_labels(y, self.n)
        # A given K is the data itself: only forming a distance from it rounds.
        self.depth: int | None = self.Z.shape[1] if self.Z is not None else 0
        self.row: Callable[[int], np.ndarray] | None = (
            None if self.Z is None else self.Z.__getitem__
        )
        # K is a Gram matrix by construction (computed here), not the caller's word for it.
        self.gram_known = self._K_given is None

    @classmethod
    def trusted(
        cls, K: np.ndarray, y: np.ndarray, row: Callable[[int], np.ndarray] | None = None
    ) -> _VStepData:
        """Wrap a Gram matrix and labels that the caller formed itself, without validation.

        ``row(i)`` gives feature i exactly (None: unknown; then so is the depth of K's dot
        products).
        """
        data = cls.__new__(cls)
        data.Z, data._K_given, data.n, data.y, data.row = None, K, len(y), y, row
        data.gram_known = True
        data.depth = None if row is None else len(row(0))
        return data

    def rounding(self, K_ii: float, K_jj: float) -> float | None:
        """An upper bound on how far ``||z_i - z_j||^2`` may exceed ``K_ii + K_jj - 2 K_ij``
        (and ``||z_i||^2`` exceed ``K_ii``), or None when unknown
        (:func:`margin_solver.core.kernel.gram_distance_rounding` for dot products of length d).
        With d unknown (a K formed from combinations of tokens, whose rounding scales with
        the tokens' norms, not the features'), nothing is sure.
        """
        if self.depth is None:
            return None
        return gram_distance_rounding(self.depth, K_ii + K_jj)

    @cached_property
    def K(self) -> np.ndarray:
        """Gram matrix K = Z Z^T of shape (n, n): the one n x n x d product."""
        return self._K_given if self._K_given is not None else self.Z @ self.Z.T

    @cached_property
    def scale(self) -> float:
        """Mean diagonal of K, the unit in which the engines see it (see :attr:`factor`)."""
        return float(np.mean(np.diag(self.K)))

    @cached_property
    def cholesky_G(self) -> np.ndarray | None:
        """G = diag(y) L with L the Cholesky factor of K / scale, or None.

        None unless K / scale is so well conditioned (reciprocal condition number estimate
        above ``_CHOLESKY_RCOND_PER_N * n``) that the clipping of :attr:`factor` would drop
        no eigenvalue: then both factors describe the same problem, and Cholesky costs a
        fraction of the eigendecomposition (the LDP engine's largest cost at n = 100).
        """
        lower = _conditioned_cholesky(self.K / self.scale, _CHOLESKY_RCOND_PER_N * self.n)
        return None if lower is None else self.y[:, None] * lower

    @cached_property
    def factor(self) -> _Factor:
        """Factor K / scale = B B^T with B = U diag(root) and G = diag(y) B.

        K is divided by its mean diagonal so that solver tolerances and the LDP infeasibility
        threshold mean the same for features of any magnitude. Eigenvalues below
        n * eps * lambda_max are rounding noise of the Gram product and are clipped to zero;
        their columns of B stay as zero columns so that G is always n x n and the cached
        cvxpy model for size n fits every rank.
        """
        scale = self.scale
        lam, U = symmetric_eigh(self.K / scale)
        if lam[0] < -_NOT_PSD_RTOL * lam[-1]:
            raise InvalidInputError(
                f"K must be positive semidefinite (a Gram matrix Z @ Z.T), but its smallest "
                f"eigenvalue is {lam[0] * scale:.3g} against a largest of {lam[-1] * scale:.3g}."
            )
        keep = lam > self.n * np.finfo(np.float64).eps * lam[-1]
        root = np.sqrt(np.where(keep, lam, 0.0))
        return _Factor(self.y[:, None] * U * root, U, root, scale)

    def coef_from_w(self, w: np.ndarray) -> np.ndarray:
        """Coefficients of v = Z^T coef from a solution w of the normalised reduced problem.

        With Z / sqrt(scale) = U diag(root) V^T, the reduced variable is w = V^T v sqrt(scale),
        so v = Z^T U diag(1 / root) w / scale on the kept eigenvalues.
        """
        U, root, scale = self.factor.U, self.factor.root, self.factor.scale
        inv_root = np.divide(1.0, root, out=np.zeros_like(root), where=root > 0)
        return U @ (inv_root * w) / scale

    def coef_from_v(self, v: np.ndarray) -> np.ndarray:
        """Coefficients of the projection of v onto span{z_i}: coef = K^+ Z v.

        The projection keeps every margin Z v and cannot increase ||v||.
        """
        U, root, scale = self.factor.U, self.factor.root, self.factor.scale
        inv_lam = np.divide(1.0, root**2, out=np.zeros_like(root), where=root > 0)
        return U @ (inv_lam * (U.T @ (self.Z @ v))) / scale


def symmetric_eigh(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of a finite symmetric matrix.

    LAPACK's divide and conquer (``numpy.linalg.eigh``) first; when it does not converge,
    the implicit QL/QR algorithm (``dsyev`` through ``scipy.linalg.eigh(driver="ev")``),
    slower but more robust. Divide and conquer can fail on Gram matrices with many nearly
    equal eigenvalues: saturated attention gives such a K (samples selecting the same signal
    token get equal features); an n = 120 v-step of a sweep cell raised "Eigenvalues did
    not converge" (docs/decisions.md, "The checker measures a data point once").
    """
    try:
        return np.linalg.eigh(A)
    except np.linalg.LinAlgError:
        from scipy.linalg import eigh

        logger.info("numpy's eigh did not converge on a %d x %d matrix; using dsyev", *A.shape)
        return eigh(A, driver="ev")


def solve_vstep(
    Z: Any,
    y: Any,
    solver: str = DEFAULT_STRATEGY.vstep_solver,
    *,
    tol: float = 1e-9,
    fallback: bool = True,
    K: Any = None,
) -> VStepResult:
    """Solve the hard-margin SVM without bias: minimize ||v|| s.t. y_i z_i^T v >= 1.

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_features) or None
        Fixed features z_i (for attention, z_i = X_i^T softmax(X_i p)). May be None when
        ``K`` is given; then ``v`` is not materialised and ``coef`` carries the solution.
    y : array-like of shape (n_samples,)
        Any two labels (read by :func:`margin_solver.core.validation.encode_labels`).
    solver : {"ecos", "clarabel", "ldp", "active", "primal"}, default="active"
        Engine to try first (default: the strategy table's ``vstep_solver``, as in the
        min-norm solve). ``"ecos"`` and ``"clarabel"`` solve the Gram-reduced SOCP in n
        variables, ``"ldp"`` solves it exactly by one NNLS, ``"active"`` exactly by the dual
        active-set method (fast at large n; the LDP first among its fallbacks), ``"primal"``
        solves the SOCP in d variables with ECOS (a slow reference; it needs ``Z``).
    tol : float, default=1e-9
        Tolerance passed to ECOS / Clarabel (absolute and relative gap, feasibility). A
        solution is reported ``"optimal"`` when the recomputed relative duality gap is at
        most ``1000 * tol``; otherwise ``"optimal_inaccurate"``.
    fallback : bool, default=True
        When the engine raises, fails, or is inaccurate, try the others in the order
        ecos -> clarabel -> ldp (after ``"active"``: ldp -> ecos -> clarabel) and record
        each failure in ``fallbacks``.
    K : array-like of shape (n_samples, n_samples), optional
        Precomputed Gram matrix ``Z @ Z.T`` (for callers in token-Gram form). When given it is
        trusted and the product is skipped; ``Z`` is then only used to form ``v``.

    Returns
    -------
    VStepResult
        ``v``, ``alpha``, ``coef`` (v = Z^T coef), the certificate (``norm``, ``min_margin``,
        ``gap``), ``status``, ``message``, the engine used and any ``fallbacks``. An
        infeasible problem is a status with ``infeasible_samples``, not an exception.

    Raises
    ------
    InvalidInputError
        On an unknown ``solver``, malformed ``Z``, ``y`` or ``K`` (including a K that is
        not positive semidefinite), ``Z`` of a scale float64 cannot carry
        (:func:`~margin_solver.core.validation.check_magnitude`), or ``"primal"`` without ``Z``.

    Notes
    -----
    Every engine produces a primal point v (the Gram engines through w, v = Z^T U
    diag(lambda^-1/2) w; the primal engine's v projected onto span{z_i}, which keeps the
    margins and cannot increase the norm) and a dual alpha (clipped at 0). Primal points of
    interior-point solvers are more accurate than their duals, which is why v is not formed
    as Z^T (alpha * y).

    Interior-point answers (ECOS, Clarabel, primal) are still accurate in v only to about the
    square root of their tolerance (about 1e-5 relative for ECOS at the default ``tol``). So
    the support vectors S are read off the engine's answer and the KKT system is solved
    exactly on them, ``(G_S G_S^T) a = 1``; when the result satisfies every KKT condition it
    replaces the engine's answer (``refined=True``) and agrees with the exact LDP answer to
    rounding. Otherwise the engine's answer stands.

    Finally v is scaled by ``rescale`` = 1 / min_i y_i z_i^T v so that its smallest margin is
    exactly 1. At the optimum the smallest margin is 1, so this only removes rounding; it
    makes v feasible, hence ``gap`` (weak duality) a valid bound on its suboptimality.

    References
    ----------
    C. L. Lawson and R. J. Hanson, *Solving Least Squares Problems*, 1974, ch. 23 (LDP).
    Magen et al., *Benign Overfitting in Single-Head Attention*, arXiv:2410.07746.

    Examples
    --------
    >>> from margin_solver.svm.vstep import solve_vstep
    >>> res = solve_vstep([[1.0, 0.0], [0.0, 2.0], [2.0, 0.0]], [1, -1, 1])
    >>> res.status
    'optimal'
    >>> np.round(res.v, 6).tolist(), np.round(res.alpha, 6).tolist()
    ([1.0, -0.5], [1.0, 0.25, 0.0])
    >>> solve_vstep([[1.0, 0.0], [1.0, 0.0]], [1, -1]).infeasible_samples
    [0, 1]
    """
    start = time.perf_counter()
    if solver not in ENGINES:
        raise InvalidInputError(f"Unknown solver {solver!r}; expected one of {list(ENGINES)}.")
    data = _VStepData(Z, y, K)
    tol = check_positive(tol, "tol")
    if solver == "primal" and data.Z is None:
        raise InvalidInputError("solver='primal' needs the features Z, not only K.")
    return _solve(data, solver, tol, fallback, start)


def solve_trusted_vstep(
    K: np.ndarray,
    y: np.ndarray,
    solver: str = "ldp",
    *,
    tol: float = 1e-9,
    fallback: bool = True,
    row: Callable[[int], np.ndarray] | None = None,
) -> VStepResult:
    """:func:`solve_vstep` on a Gram matrix the caller formed itself, without validation.

    The inner loops (branch-and-bound nodes, the descent's trial points, the attention SVMs)
    solve thousands of v-steps on Gram matrices built from already validated tokens;
    re-validating each one (symmetry, finiteness, labels) cost about 15 % of the lower
    bound's time. User input goes through :func:`solve_vstep`.

    Parameters
    ----------
    K : ndarray of shape (n_samples, n_samples), float64
        Exactly symmetric Gram matrix of the features (**not validated**; symmetrise a
        computed product that may differ from its transpose by rounding first).
    y : ndarray of shape (n_samples,), float64
        Labels in {-1, +1} (not validated).
    solver : {"ecos", "clarabel", "ldp", "active"}, default="ldp"
        Engine to try first.
    tol, fallback
        As in :func:`solve_vstep`.
    row : callable, optional
        ``row(i)`` returns feature i exactly (e.g. a selected token). Features K cannot tell
        apart are then compared exactly (equal ones with opposite labels prove
        infeasibility), and its length bounds the rounding of K (``norm_bound``). Without
        it no such proof is possible, and the bound is weaker.

    Returns
    -------
    VStepResult
        As :func:`solve_vstep`, with ``v`` None (only ``coef`` describes v).
    """
    return _solve(_VStepData.trusted(K, y, row), solver, tol, fallback, time.perf_counter())


def _solve(
    data: _VStepData,
    solver: str,
    tol: float,
    fallback: bool,
    start: float,
    guess: np.ndarray | None = None,
) -> VStepResult:
    """The v-step on checked inputs: conflicts, then the engines in turn (see solve_vstep).

    ``guess`` (a support) is where the ``"active"`` engine starts.
    """
    zero, pairs = _conflict_candidates(data.K, data.y)
    if zero or pairs:
        conflict = _obvious_conflicts(data, zero, pairs)
        if conflict is not None:
            return _infeasible(*conflict, None, [], start)
        # A separator, if any, has ||v|| >= 2 / (rounding of K): no engine resolves that
        # (their infeasibility test stops at margins of 1e-8), and no proof says none exists.
        return _warn_unsolved(_cannot_tell(*_near_conflicts(data, zero, pairs), start))

    # Every engine but "active" needs a factor of K; a K that is not a Gram matrix raises
    # here, not in one (a successful Cholesky factorisation, enough for LDP, proves positive
    # definiteness). The active set factors only Q_PP, so a K the caller gave is checked
    # first; one computed here (Z Z^T) or formed by the library is a Gram matrix.
    if solver == "active":
        if not data.gram_known:
            _ = data.factor
    elif solver != "ldp" or data.cholesky_G is None:
        _ = data.factor
    fallbacks: list[str] = []
    inaccurate: VStepResult | None = None
    for name in _engine_chain(solver, fallback):
        try:
            engine = partial(_solve_active, guess=guess) if name == "active" else _ENGINES[name]
            out = engine(data, tol)
        except _SOLVER_EXCEPTIONS as exc:
            _record(fallbacks, name, f"raised {type(exc).__name__}: {exc}")
            continue
        if out.status == INFEASIBLE:
            samples = _ldp_certificate(data.factor.G)
            if samples:
                why = "no v separates these samples (LDP certificate u >= 0 with G^T u = 0)"
                return _warn_unsolved(_infeasible(samples, why, name, fallbacks, start))
            _record(fallbacks, name, "reported infeasible but LDP found no certificate")
            continue
        if out.coef is None:
            if name == "active":
                # By design, not a breakdown: the active set leaves ill-conditioned supports
                # and infeasible samples to the LDP, next in its chain (_solve_active).
                logger.debug("v-step: the active set left the problem to the LDP: %s", out.reason)
                continue
            _record(fallbacks, name, out.reason or f"returned status {out.status!r}")
            continue
        # The active set's answer already passed the KKT test on a fresh factorisation.
        refined = True if name == "active" else None
        result = _certified(data, out, name, tol, fallbacks, start, refined)
        if result is None:
            _record(fallbacks, name, "its answer does not separate the samples")
            continue
        if result.status == OPTIMAL:
            return result
        floor = _gap_rounding(data, result)
        if result.gap <= floor and floor > _GAP_FACTOR * tol:
            # Nearly infeasible (opposite labels on almost equal features, ||v|| huge): the
            # factor of K every engine solves on fixes the optimum only to `floor`, so no
            # engine can certify it, and the interior-point ones do worse (even report
            # "infeasible"): return this answer, as inaccurate, instead of falling back.
            result.message += (
                f", below what float64 resolves for this nearly infeasible problem "
                f"({floor:.2g}): no engine can certify it"
            )
            logger.info("v-step not certifiable: %s", result.message)
            return result
        _record(fallbacks, name, result.message)
        if result.status == OPTIMAL_INACCURATE and inaccurate is None:
            inaccurate = result
    if inaccurate is not None:
        inaccurate.message = (
            f"only an inaccurate solution was found (engine {inaccurate.solver}); "
            + "; ".join(fallbacks)
        )
        inaccurate.fallbacks = fallbacks
        inaccurate.solve_time = time.perf_counter() - start
        return _warn_unsolved(inaccurate)
    return _warn_unsolved(_failed(fallbacks, start))


def solve_vstep_on_support(
    K: np.ndarray,
    y: np.ndarray,
    support: np.ndarray,
    *,
    tol: float = 1e-9,
    engine: str = "support",
) -> VStepResult | None:
    """The v-step from a guessed set of support vectors, or None when that does not pay.

    The inner loop of the min-norm descent solves hundreds of v-steps at nearby attention
    vectors, whose support vectors change little. Given the support S, the optimum solves
    ``Q_SS a = 1`` with ``Q = diag(y) K diag(y)`` (one Cholesky factorisation of size |S|,
    no eigendecomposition and no NNLS); when ``a >= 0`` and every margin is at least 1 (to
    the KKT tolerance of :func:`solve_vstep`), all KKT conditions hold and ``alpha = a`` on
    S (zero elsewhere) is the exact optimum. When the guess is wrong, an active-set method
    (Lawson-Hanson on the dual) corrects it, one sample in or out per linear solve, for at
    most ``_SUPPORT_SOLVES`` solves. The answer is certified as in :func:`solve_vstep`
    (``solver="support"``, ``refined=True``). ``engine="active"`` runs the active-set engine
    from the guess instead: the same method with the budget of ``solver="active"``
    (:func:`_solve_active`), restarted from the empty set when the guess's Q_SS is singular
    (``solver="active"``).

    Parameters
    ----------
    K : ndarray of shape (n_samples, n_samples)
        Gram matrix of the features. **Not validated**: this is for callers that formed K
        themselves (use :func:`solve_vstep` on user input).
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}, float64 (not validated).
    support : ndarray of shape (n_samples,)
        The guessed support vectors: a boolean mask, or a previous dual vector such as
        ``previous.alpha``, whose positive entries are the guess (``engine="active"`` then
        takes them largest first, so that the samples likely to leave the support are
        factored last, where dropping them costs least).
    tol : float, default=1e-9
        As in :func:`solve_vstep`: the relative duality gap must be at most ``1000 * tol``.
    engine : {"support", "active"}, default="support"
        A few solves from the guess, or the active-set engine from it.

    Returns
    -------
    VStepResult or None
        The optimal solution, or None when the active set did not reach the KKT conditions
        within its budget, a ``Q_SS`` was singular, or the problem is infeasible: then call
        :func:`solve_vstep`.
    """
    start = time.perf_counter()
    data = _VStepData.trusted(K, y)
    if engine == "active":
        try:
            out = _solve_active(data, tol, support)
        except _SOLVER_EXCEPTIONS:  # the general v-step tries it again, then the others
            return None
    else:
        alpha = _kkt_on_support(K, y, support, max_solves=_SUPPORT_SOLVES)
        out = _EngineOutput(FAILED) if alpha is None else _EngineOutput(OPTIMAL, alpha * y, alpha)
    if out.coef is None:
        return None
    result = _certified(data, out, engine, tol, [], start, refined=True)
    return result if result is not None and result.status == OPTIMAL else None


def solve_vstep_from_support(
    K: np.ndarray, y: np.ndarray, support: np.ndarray | None, solver: str = "ldp"
) -> VStepResult:
    """:func:`solve_vstep_on_support` from ``support`` when one is guessed, else, or when that
    does not pay, :func:`solve_trusted_vstep` with ``solver`` on K symmetrised. With
    ``solver="active"`` the active-set engine itself starts from ``support`` with its whole
    budget (``engine="active"``); when that fails, the general v-step starts with the LDP.

    For the inner loops that solve many v-steps at nearby points (the descent's trial points,
    the polish's linearised SVMs). K is **not validated**; it may differ from its transpose by
    the rounding of its product.
    """
    if support is None:
        return solve_trusted_vstep((K + K.T) / 2, y, solver)
    engine = "active" if solver == "active" else "support"
    result = solve_vstep_on_support(K, y, support, engine=engine)
    if result is not None:
        return result
    # The active set failed from the guess: the general v-step, from the LDP.
    return solve_trusted_vstep((K + K.T) / 2, y, "ldp" if solver == "active" else solver)


def _kkt_on_support(
    K: np.ndarray,
    y: np.ndarray,
    support: np.ndarray,
    max_solves: int = 1,
    *,
    restart: bool = False,
    refactor: bool = True,
) -> np.ndarray | None:
    """The optimal dual alpha, found by an active-set method started from a guessed support;
    None when that takes more than ``max_solves`` linear solves or a solve fails.

    The dual of the v-step is ``minimize 1/2 a^T Q a - sum(a)`` over ``a >= 0`` with
    ``Q = diag(y) K diag(y)``. On a passive set P the unconstrained minimiser solves
    ``Q_PP a = 1``. The guess, less the samples this solve gives a non-positive dual, is the
    start (:meth:`_ActiveSet.start`; ``support`` is a boolean mask, or a previous dual
    vector whose positive entries are the guess, then taken largest first unless
    ``refactor``); then the method of Lawson and
    Hanson (1974, ch. 23, here on the quadratic form): add the sample with the largest margin
    violation ``1 - (Q a)_i`` (the negative gradient), and when a solve gives a non-positive
    dual, move towards it until the first dual reaches 0 and drop that sample; a sample that
    would make Q_PP singular is swapped in along the dual's ray (:func:`_swap`). Each add or
    drop updates the Cholesky factor of Q_PP (:class:`_ActiveSet`: O(|P|^2) instead of a new
    O(|P|^3) factorisation) and counts as one solve. It stops when no margin is below 1 and
    the passive set's margins are 1 (to ``_KKT_RTOL``): the KKT conditions. After any update
    the answer is made exact (``refactor``: by a fresh factorisation of the final Q_PP, so
    that it depends only on the final passive set in its order; else by a step of iterative
    refinement) and the KKT conditions are checked again on it. ``max_solves=1`` checks the
    guess alone.

    ``restart=True`` starts again from the empty set when the guess's Q_PP is not well
    conditioned (e.g. more guessed samples than the rank of K); else that returns None. None
    also when a Q_PP met later is not well conditioned (:func:`_solve_passive`): nearly
    dependent support vectors, left to the LDP.
    """
    state = _ActiveSet(K, y, max_solves, refactor)
    ordered = support.dtype != bool and not refactor
    guess = np.flatnonzero(support > 0)  # a mask's True entries, or a dual vector's positive ones
    if ordered:
        guess = guess[np.argsort(-support[guess], kind="stable")]
    z = state.start(guess, ordered)
    if z is None and restart and state.budget > 0:
        state = _ActiveSet(K, y, state.budget, refactor)
        z = state.start(np.zeros(0, dtype=np.intp), True)
    if z is None:
        return None
    a_P = z
    while True:
        if z.size == 0 or z.min() > 0:  # a dual feasible point: optimal, or add a sample
            margins = state.margins(z)
            slack = 1.0 - margins
            slack[state.P] = -np.inf
            j = int(np.argmax(slack))
            if slack[j] <= _KKT_RTOL:  # (P is not empty here: alpha = 0 has slack 1)
                return state.exact(z, margins)
            if not state.spend():
                return None
            dependence = state.add(j)
            if dependence is None:
                a_P = np.append(z, 0.0)
            else:
                a_P = _swap(state, z, dependence, j, slack[j])
                if a_P is None:
                    return None
        else:  # move towards z until the first dual reaches 0, and drop that sample
            nonpositive = np.flatnonzero(z <= 0)
            ratios = a_P[nonpositive] / (a_P[nonpositive] - z[nonpositive])
            first = int(np.argmin(ratios))
            a_P = a_P + ratios[first] * (z - a_P)
            a_P[nonpositive[first]] = 0.0
            keep = a_P > 0
            a_P = a_P[keep]
            if not state.drop(np.flatnonzero(~keep)):
                return None
            if a_P.size == 0:
                z = a_P
                continue
        z = state.solve()


def _swap(
    state: _ActiveSet, z: np.ndarray, dependence: np.ndarray, j: int, rate: float
) -> np.ndarray | None:
    """Sample j made Q_PP singular: ``Q_Pj = Q_PP c`` with ``c = dependence`` and
    ``Q_jj = Q_Pj^T c``. Moving the duals along ``(-c, 1)`` from ``z`` (j's dual t) leaves
    ``Q a`` unchanged and lowers the dual objective by ``rate * t`` (j's margin slack), so
    follow it until a dual on P reaches 0, and swap that sample for j (Q_PP stays regular).
    No dual to reach 0 is a ray along which the dual objective falls without bound: the
    samples cannot be separated; None (the LDP then proves it), as when the budget is out.
    Returns the duals on the new P.
    """
    positive = np.flatnonzero(dependence > 0)
    if positive.size == 0 or rate <= 0:
        return None
    ratios = z[positive] / dependence[positive]
    first = int(np.argmin(ratios))
    t = ratios[first]
    a_P = z - t * dependence
    a_P[positive[first]] = 0.0
    keep = a_P > 0
    if not state.drop(np.flatnonzero(~keep)) or state.add(j) is not None:
        return None
    return np.append(a_P[keep], t)


class _ActiveSet:
    """The passive set P of :func:`_kkt_on_support` with its linear algebra kept up to date.

    Holds P in order, the rows ``Q[P]`` of ``Q = diag(y) K diag(y)`` (so that the margins
    ``Q a`` are one product with the rows, and Q itself is never formed; row ``slot[k]`` of
    the buffer belongs to ``P[k]``, so that a drop moves one row, not all after it), the lower
    Cholesky factor L of ``Q_PP = L L^T`` and ``w = L^{-1} 1``; then
    ``Q_PP^{-1} 1 = L^{-T} w`` is one triangular solve. L is kept twice: square, where a
    drop updates it, and packed by rows, where BLAS ``dtpsv`` solves with it in place (a
    slice of the square buffer would be copied at every solve). Adding a sample appends a
    row (one triangular solve); dropping one deletes its row and column, and the trailing
    block ``T`` below it becomes the factor of ``T T^T + x x^T`` (x: the deleted column) by
    the closed form of :meth:`_update`. Buffers grow by doubling. ``budget`` counts the
    solves still allowed. ``refactor`` says how an updated factor's answer is made exact
    (:meth:`exact`).
    """

    def __init__(self, K: np.ndarray, y: np.ndarray, budget: int, refactor: bool) -> None:
        self.K, self.y, self.budget, self.refactor = K, y, budget, refactor
        self.P = np.zeros(0, dtype=np.intp)
        self.slot = np.zeros(0, dtype=np.intp)
        self.rows = np.empty((0, len(y)))
        self.L = np.empty((0, 0))
        self.packed = np.empty(0)  # row i of L is packed[i(i+1)/2 : (i+1)(i+2)/2]
        self.w = np.zeros(0)
        self.fresh = True  # L was factored from scratch (not updated) since the start

    def spend(self) -> bool:
        """Count one solve; False when the budget is out."""
        if self.budget == 0:
            return False
        self.budget -= 1
        return True

    def _reserve(self, m: int) -> None:
        """Room for m samples in the buffers (twice that, at most n, when they grow),
        keeping their contents."""
        if m <= self.rows.shape[0]:
            return
        cap = max(m, min(2 * m, len(self.y)), 8)
        rows, L = np.empty((cap, len(self.y))), np.zeros((cap, cap))
        packed = np.empty(cap * (cap + 1) // 2)
        size = self.P.size
        rows[:size], L[:size, :size] = self.rows[:size], self.L[:size, :size]
        packed[: size * (size + 1) // 2] = self.packed[: size * (size + 1) // 2]
        self.rows, self.L, self.packed = rows, L, packed

    def _block(self, P: np.ndarray) -> np.ndarray:
        """``Q_PP``, read off K (rows, then columns: a fifth of the time of ``np.ix_``)."""
        y_P = self.y[P]
        block = self.K[P][:, P]
        block *= y_P[:, None]
        block *= y_P
        return block

    def _repack(self, first: int) -> None:
        """Copy rows ``first`` onwards of the square L into the packed one."""
        m = self.P.size
        below = np.arange(first, m)[:, None] >= np.arange(m)
        self.packed[first * (first + 1) // 2 : m * (m + 1) // 2] = self.L[first:m, :m][below]

    def _lower(self) -> np.ndarray:
        """L (a copy)."""
        m = self.P.size
        return self.L[:m, :m].copy()

    # The rows of L packed one after another are L^T packed by columns: BLAS's upper packed
    # storage, so the solves with L are the transposed ones with that upper factor.
    def _forward(self, b: np.ndarray) -> np.ndarray:
        """``L^{-1} b``."""
        return dtpsv(b.size, self.packed, b, trans=1) if b.size else np.zeros(0)

    def _backward(self, b: np.ndarray) -> np.ndarray:
        """``L^{-T} b``."""
        return dtpsv(b.size, self.packed, b) if b.size else np.zeros(0)

    def start(self, P: np.ndarray, ordered: bool) -> np.ndarray | None:
        """Factor the guess P afresh and drop the samples its solve gives a non-positive dual
        until none is left; the duals on the start, or None.

        With ``refactor`` every round factors what is left afresh, in the guess's order (the
        answer then depends on the final set and that order alone). Without it, samples
        ordered by a dual, largest first (``ordered``: P by the caller's duals; else the
        second round, by the first round's), put the few that later rounds drop near the end
        (at n = 500, in the last quarter), where :meth:`drop_block` refactors only the
        trailing block instead of all of Q_PP.
        """
        z = np.zeros(0)
        lower = np.empty((0, 0))
        rows = self.K[P]
        rows *= self.y
        rows *= self.y[P, None]
        while P.size:
            if not self.spend():
                return None
            lower = _conditioned_cholesky(rows[:, P], _SUPPORT_RCOND)
            if lower is None:
                return None
            z, info = dpotrs(lower, np.ones(P.size), lower=1)
            if info != 0 or not np.isfinite(z).all():
                return None
            if z.min() > 0 or (ordered and not self.refactor):
                break
            order = np.flatnonzero(z > 0)
            if not self.refactor:
                order, ordered = order[np.argsort(-z[order], kind="stable")], True
            P, rows, z = P[order], rows[order], np.zeros(0)
        m = P.size
        self._reserve(m)
        self.P, self.slot = P, np.arange(m)
        if m:
            self.rows[:m] = rows
            self.L[:m, :m] = lower
            self._repack(0)
            self.w = self._forward(np.ones(m))
        while z.size and z.min() <= 0:
            if not self.drop_block(np.flatnonzero(z <= 0)):
                return None
            z = self.solve() if self.P.size else np.zeros(0)
        return z

    def margins(self, z: np.ndarray) -> np.ndarray:
        """``Q a`` for the duals ``a = z`` on P (zero elsewhere)."""
        by_slot = np.empty_like(z)
        by_slot[self.slot] = z
        return self.rows[: self.P.size].T @ by_slot

    def solve(self) -> np.ndarray:
        """``Q_PP^{-1} 1`` from the kept factor."""
        return self._backward(self.w)

    def add(self, j: int) -> np.ndarray | None:
        """Append sample j to P and return None; when Q_PP would not be well conditioned
        (its new pivot below ``_SUPPORT_RCOND`` of ``Q_jj``: q_j depends on the rows of P),
        leave P as it is and return ``c = Q_PP^{-1} Q_Pj``."""
        m = self.P.size
        q = self.y[j] * self.y * self.K[j]
        row = self._forward(q[self.P])
        pivot = q[j] - row @ row
        if not pivot > _SUPPORT_RCOND * q[j]:
            return self._backward(row)
        self._reserve(m + 1)
        self.rows[m] = q
        self.L[m, :m], self.L[m, m] = row, np.sqrt(pivot)
        at = m * (m + 1) // 2
        self.packed[at : at + m + 1] = self.L[m, : m + 1]
        self.w = np.append(self.w, (1.0 - row @ self.w) / self.L[m, m])
        self.P, self.slot = np.append(self.P, j), np.append(self.slot, m)
        self.fresh = False
        return None

    def drop(self, positions: np.ndarray) -> bool:
        """Remove the samples at ``positions`` of P, updating the factor by one rank-one
        update each; False when out of budget (when P stays non-empty, a solve follows)."""
        if self.P.size > positions.size and not self.spend():
            return False
        for k in sorted(positions.tolist(), reverse=True):
            self._delete(k)
        self._refresh(int(positions.min()))
        return True

    def drop_block(self, positions: np.ndarray) -> bool:
        """Remove the samples at ``positions`` of P at once: rows and columns of L before
        the first of them are those of the new factor, and the trailing block is factored
        afresh from its Schur complement, one BLAS-3 product and a Cholesky factorisation of
        the trailing size (cheaper than a rank-one update per sample when they sit near the
        end). False when out of budget or when that Schur complement is not well
        conditioned (then neither is Q_PP)."""
        if self.P.size > positions.size and not self.spend():
            return False
        first = int(positions.min())
        for k in sorted(positions.tolist(), reverse=True):
            self._forget(k)
            self._shift(k)
        m = self.P.size
        if first < m:
            lead = self.L[first:m, :first]
            schur = self._block(self.P[first:]) - lead @ lead.T
            lower = _conditioned_cholesky(schur, _SUPPORT_RCOND)
            if lower is None:
                return False
            self.L[first:m, first:m] = lower
        self._refresh(first)
        return True

    def _refresh(self, first: int) -> None:
        """After rows ``first`` onwards of L changed: repack them and recompute w."""
        self._repack(first)
        self.w = self._forward(np.ones(self.P.size))
        self.fresh = False

    def _forget(self, k: int) -> None:
        """Delete sample ``P[k]`` from P and its row of the buffer (the last one takes its
        slot)."""
        m = self.P.size
        last = int(np.flatnonzero(self.slot == m - 1)[0])
        self.rows[self.slot[k]] = self.rows[m - 1]
        self.slot[last] = self.slot[k]
        self.P, self.slot = np.delete(self.P, k), np.delete(self.slot, k)

    def _shift(self, k: int) -> np.ndarray:
        """Delete row and column k of L (of size |P| + 1) by moving the rest up and left;
        returns the deleted column below the diagonal."""
        m = self.P.size + 1
        L = self.L
        x = L[k + 1 : m, k].copy()
        L[k : m - 1, :m] = L[k + 1 : m, :m]
        L[: m - 1, k : m - 1] = L[: m - 1, k + 1 : m]
        L[m - 1, :m] = 0.0
        L[:m, m - 1] = 0.0
        return x

    def _delete(self, k: int) -> None:
        """Delete sample ``P[k]``: its row of the buffer, its row and column of L, and
        update the trailing block."""
        self._forget(k)
        x = self._shift(k)
        if x.size:
            self._update(self.L[k : self.P.size, k : self.P.size], x)

    @staticmethod
    def _update(T: np.ndarray, x: np.ndarray) -> None:
        """Overwrite the lower triangular T with the Cholesky factor of ``T T^T + x x^T``.

        With ``u = T^{-1} x``, ``T T^T + x x^T = T (I + u u^T) T^T`` and ``I + u u^T = M M^T``
        for the lower triangular ``M = diag(d) + strictly_lower(u beta^T)`` with
        ``t_j = 1 + sum_{i <= j} u_i^2``, ``d_j = sqrt(t_j / t_{j-1})`` and
        ``beta_j = u_j / sqrt(t_j t_{j-1})`` (Gill, Golub, Murray and Saunders, Math. Comp.
        28, 1974, "Methods for modifying matrix factorizations": the update of I). So the
        factor is ``T M``, whose column j is ``d_j T_j + beta_j sum_{i > j} u_i T_i``: one
        triangular solve and a reversed cumulative sum, O(m^2) in whole-array operations.
        """
        u = solve_triangular(T, x, lower=True, check_finite=False)
        t = 1.0 + np.cumsum(u * u)
        t_before = np.concatenate(([1.0], t[:-1]))
        d, beta = np.sqrt(t / t_before), u / np.sqrt(t * t_before)
        scaled = T * u
        after = np.cumsum(scaled[:, ::-1], axis=1)[:, ::-1]
        after -= scaled  # sum over i > j
        # in place, the same operations in the same order (the same bits) without m x m
        # temporaries: 13 against 17 ms at m = 900, 1.6 against 4.0 ms at m = 400
        after *= beta
        T *= d
        T += after

    def exact(self, z: np.ndarray, margins: np.ndarray) -> np.ndarray | None:
        """The full dual vector when ``z`` on P satisfies the KKT conditions, else None.

        After updates, the answer is first made as accurate as a fresh factorisation's:
        with ``refactor`` by one (the answer then depends only on P and its order), else by
        one step of iterative refinement on the kept factor, whose condition is then checked
        as :func:`_conditioned_cholesky` checks a fresh one; the KKT test is repeated on it.
        """
        P = self.P
        if not self.fresh:
            if self.refactor:
                z = _solve_passive(self._block(P))
            else:
                m = P.size
                anorm = np.abs(self.rows[:m][:, P]).sum(axis=1).max()  # Q_PP's, in slot order
                rcond, info = dppcon(m, self.packed[: m * (m + 1) // 2], anorm)
                well = info == 0 and rcond > _SUPPORT_RCOND
                # margins[P] = Q_PP z: the residual of Q_PP z = 1 is at hand
                z = self._backward(self._forward(1.0 - margins[P])) + z if well else None
            if z is None or z.min() <= 0:
                return None
            margins = self.margins(z)
            slack = 1.0 - margins
            slack[P] = -np.inf
            if slack.max() > _KKT_RTOL:
                return None
        if np.abs(margins[P] - 1.0).max() > _KKT_RTOL:
            return None
        alpha = np.zeros(len(self.y))
        alpha[P] = z
        return alpha


def _solve_passive(Q_PP: np.ndarray) -> np.ndarray | None:
    """``Q_PP^{-1} 1`` by Cholesky; None when Q_PP is not well conditioned.

    An ill-conditioned Q_PP means nearly dependent support vectors, hence many optimal
    duals; the solve would pick one by rounding, and the p-gradient built from it would be
    arbitrary. Such points go to the general v-step (a linearly independent NNLS support,
    least squares in the polish).
    """
    lower = _conditioned_cholesky(Q_PP, _SUPPORT_RCOND)
    if lower is None:
        return None
    z, info = dpotrs(lower, np.ones(len(Q_PP)), lower=1)
    return z if info == 0 and np.isfinite(z).all() else None


def _conditioned_cholesky(A: np.ndarray, min_rcond: float) -> np.ndarray | None:
    """Lower Cholesky factor of A, or None when A is not positive definite or LAPACK's
    estimate of its reciprocal condition number (1-norm) is not above ``min_rcond``."""
    lower, info = dpotrf(A, lower=1, clean=1)
    if info != 0:
        return None
    rcond, info = dpocon(lower, np.abs(A).sum(axis=0).max(), uplo="L")
    return lower if info == 0 and rcond > min_rcond else None


def _check_gram(K: Any, n: int | None) -> np.ndarray:
    """Validate a Gram matrix (square, n x n when Z is given, symmetric, diagonal >= 0).

    Returns it symmetrised. Beyond the diagonal, positive semidefiniteness is trusted: small
    negative eigenvalues from rounding are clipped when K is factored.
    """
    K = check_matrix(K, "K")
    expected = (n, n) if n is not None else (K.shape[0], K.shape[0])
    if K.shape != expected:
        raise InvalidInputError(
            f"Expected K of shape {expected} (the Gram matrix Z @ Z.T), got {K.shape}."
        )
    asym = float(np.max(np.abs(K - K.T)))
    if asym > 1e-8 * max(float(np.max(np.abs(K))), np.finfo(np.float64).tiny):
        raise InvalidInputError(
            f"K must be symmetric (a Gram matrix Z @ Z.T); max |K - K.T| = {asym:.3g}."
        )
    if np.diag(K).min() < 0:
        i = int(np.argmin(np.diag(K)))
        raise InvalidInputError(
            f"K must be positive semidefinite (a Gram matrix Z @ Z.T), but K[{i}, {i}] = "
            f"{K[i, i]:.3g} < 0."
        )
    return (K + K.T) / 2


def _obvious_conflicts(
    data: _VStepData, zero: list[int], pairs: list[tuple[int, int]]
) -> tuple[list[int], str] | None:
    """Find zero features and equal features with opposite labels: proofs of infeasibility.

    The candidates ``zero`` and ``pairs`` read off K (:func:`_conflict_candidates`) are
    confirmed exactly on the features (Z, or the caller's ``row``); with only K given nothing
    is confirmed (entries equal to within rounding do not prove equal
    features), and :func:`_near_conflicts` bounds ``||v||`` instead. These are the common
    infeasible inputs; naming them directly gives a clearer message than a general certificate.
    """
    if data.row is None:
        return None
    zero = [i for i in zero if not data.row(i).any()]
    if zero:
        return zero, f"samples {zero} have zero features, so y z^T v = 0 < 1"
    pairs = [(i, j) for i, j in pairs if np.array_equal(data.row(i), data.row(j))]
    if pairs:
        samples = sorted({i for pair in pairs for i in pair})
        return samples, f"equal features with opposite labels in sample pairs {pairs}"
    return None


def _conflict_candidates(K: np.ndarray, y: np.ndarray) -> tuple[list[int], list[tuple[int, int]]]:
    """Features K cannot tell from zero, and pairs with opposite labels it cannot tell apart."""
    diag = np.diag(K)
    zero = np.flatnonzero(diag <= np.finfo(np.float64).eps ** 2 * diag.max()).tolist()
    # Only pairs with opposite labels can clash: the block between the two classes (a
    # quarter of K, and no n x n temporaries; K is exactly symmetric, so each pair's test is
    # the one on the whole of K).
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y <= 0)
    both = diag[pos][:, None] + diag[neg]
    dist2 = both - 2 * K[pos][:, neg]
    i, j = np.nonzero(dist2 <= _SAME_RTOL * both)
    clash = sorted((min(a, b), max(a, b)) for a, b in zip(pos[i].tolist(), neg[j].tolist()))
    return zero, clash


def _near_conflicts(
    data: _VStepData, zero: list[int], pairs: list[tuple[int, int]]
) -> tuple[float, str]:
    """A lower bound on ``||v||`` from features equal (or zero) to within the rounding of K,
    the candidates of :func:`_conflict_candidates`, and why.

    ``y_i v.z_i >= 1`` and ``y_j v.z_j >= 1`` with opposite labels give ``v.(z_i - z_j) >= 2``,
    so ``||v|| >= 2 / ||z_i - z_j||``; a single constraint gives ``||v|| >= 1 / ||z_i||``. The
    distances are bounded from above by the computed ones plus the rounding K may carry
    (:meth:`_VStepData.rounding`).
    """
    diag = np.maximum(np.diag(data.K), 0.0)
    what = f"zero features {zero}" if zero else ""
    if pairs:
        what += (" and " if what else "") + f"opposite labels on sample pairs {pairs}"
    why = (
        f"cannot tell whether the samples can be separated: {what}, equal to within the "
        "rounding of the Gram matrix"
    )
    if data.depth is None:
        return 0.0, why + " (how far it rounds is unknown, so no bound on ||v|| either)"
    bounds = [1.0 / np.sqrt(diag[i] + data.rounding(diag[i], diag[i])) for i in zero]
    for i, j in pairs:
        dist2 = max(diag[i] + diag[j] - 2 * data.K[i, j], 0.0)
        bounds.append(2.0 / np.sqrt(dist2 + data.rounding(diag[i], diag[j])))
    bound = float(max(bounds))
    return bound, f"{why}; any separator has ||v|| >= {bound:.6g}"


def _engine_chain(solver: str, fallback: bool) -> list[str]:
    """The requested engine first, then (with fallback) the others in the standard order;
    after ``"active"`` the LDP first, which settles what the active set leaves (an
    ill-conditioned support, infeasibility) exactly as it would have alone."""
    if not fallback:
        return [solver]
    order = ("ldp", "ecos", "clarabel") if solver == "active" else _FALLBACK_ORDER
    return [solver] + [name for name in order if name != solver]


def _record(fallbacks: list[str], name: str, reason: str) -> None:
    fallbacks.append(f"{name}: {reason}")
    # Only informative while another engine may still succeed (the min-norm solve runs
    # hundreds of v-steps); _warn_unsolved warns when none does.
    logger.info("v-step engine %r did not give an optimal solution: %s", name, reason)


def _warn_unsolved(result: VStepResult) -> VStepResult:
    """Log a warning for a final answer that is not optimal after engine failures."""
    if result.fallbacks:
        logger.warning("v-step ended %s: %s", result.status, result.message)
    return result


def _solve_gram_socp(data: _VStepData, tol: float, *, engine: str) -> _EngineOutput:
    """Gram-reduced SOCP (ECOS or Clarabel): minimize ||w|| s.t. G w >= 1."""
    from margin_solver.svm import conic  # imports cvxpy (half a second): only when it is needed

    status, w, alpha, n_iter = conic.solve_reduced(data.factor.G, engine, tol)
    if w is None:
        return _EngineOutput(status, n_iter=n_iter)
    # The normalised problem has Gram K / scale, so its dual is scale times the true one.
    return _EngineOutput(status, data.coef_from_w(w), alpha / data.factor.scale, n_iter)


def _solve_primal(data: _VStepData, tol: float) -> _EngineOutput:
    """Reference SOCP in d variables: minimize ||v|| s.t. y_i z_i^T v >= 1, with ECOS."""
    from margin_solver.svm import conic

    status, v, alpha, n_iter = conic.solve_primal(data.y[:, None] * data.Z, tol)
    if v is None:
        return _EngineOutput(status, n_iter=n_iter)
    return _EngineOutput(status, data.coef_from_v(v), alpha, n_iter)


def _solve_ldp(data: _VStepData, tol: float) -> _EngineOutput:
    """Lawson-Hanson LDP on the Gram-reduced problem; exact, so ``tol`` is not used.

    On the Cholesky factor when K is well conditioned (then v = sum_i alpha_i y_i z_i gives
    the coefficients directly), else on the clipped eigen-factor, through which w maps back:
    on a (nearly) singular K the sum can carry a large component in K's null space.
    """
    on_eigen_factor = data.cholesky_G is None
    G = data.factor.G if on_eigen_factor else data.cholesky_G
    _, alpha = _ldp(G)
    if alpha is None:
        return _EngineOutput(INFEASIBLE)
    coef = data.coef_from_w(G.T @ alpha) if on_eigen_factor else alpha * data.y / data.scale
    # The normalised problem's dual is scale times the true one.
    return _EngineOutput(OPTIMAL, coef, alpha / data.scale)


def _solve_active(data: _VStepData, tol: float, guess: np.ndarray | None = None) -> _EngineOutput:
    """The dual active-set method (:func:`_kkt_on_support`) from ``guess`` (a support, e.g.
    the previous v-step's; default: every sample), restarted from the empty set when the
    guess's Q_SS is not well conditioned, with a budget of
    ``VSTEP_ACTIVE_PIVOTS_PER_SAMPLE * n`` solves; exact, so ``tol`` is not used.

    It never reports infeasibility: on infeasible data (no dual optimum) it ends on an
    ill-conditioned support or out of budget, ``"failed"``, and the next engine (the LDP)
    gives the proof.
    """
    n = data.n
    # Cold, from every sample: one factorisation of Q (BLAS-3) and a few rounds dropping the
    # samples with non-positive duals cost less than building the support one sample at a
    # time when most samples are support vectors (n <= d; docs/decisions.md, "The active-set
    # v-step"); a rank-deficient Q (n > d) is refused by its condition estimate and the
    # method restarts from the empty set.
    start = np.ones(n, dtype=bool) if guess is None else guess
    # refactor=False: iterative refinement makes the answer exact at O(|P|^2), not O(|P|^3).
    alpha = _kkt_on_support(
        data.K, data.y, start, VSTEP_ACTIVE_PIVOTS_PER_SAMPLE * n, restart=True, refactor=False
    )
    if alpha is None:
        why = "no KKT point on a well-conditioned support within its budget (left to the LDP)"
        return _EngineOutput(FAILED, reason=why)
    return _EngineOutput(OPTIMAL, alpha * data.y, alpha)


_ENGINES: dict[str, Callable[[_VStepData, float], _EngineOutput]] = {
    "ecos": partial(_solve_gram_socp, engine="ecos"),
    "clarabel": partial(_solve_gram_socp, engine="clarabel"),
    "ldp": _solve_ldp,
    "active": _solve_active,
    "primal": _solve_primal,
}

# What an engine may raise that means "this engine failed", not "the caller erred".
# (conic.SolverFailure, cvxpy's SolverError re-raised, is a RuntimeError.)
_SOLVER_EXCEPTIONS = (
    RuntimeError,
    ArithmeticError,
    np.linalg.LinAlgError,
    ValueError,
)


def _ldp(G: np.ndarray, h: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Least-distance programming: minimize ||w|| s.t. G w >= h (default h = 1), by one NNLS.

    Lawson and Hanson (1974, ch. 23): with E = [G^T; h^T] and f = (0, ..., 0, 1), solve
    minimize ||E u - f|| over u >= 0 and let r = E u - f. If r = 0 then u >= 0, G^T u = 0,
    h^T u = 1: a certificate that G w >= h is infeasible. Otherwise w = -r[:-1] / r[-1] =
    G^T u / (1 - h^T u), so the dual (w = G^T alpha) is alpha = u / (1 - h^T u).

    At the NNLS optimum r is orthogonal to E u (complementary slackness), so
    ||r||^2 = -r^T f = 1 - h^T u, and alpha = u / ||r||^2 is computed that way: near
    infeasibility (||r|| of order 1e-8, ||w|| of order 1e8) 1 - h^T u cancels to a few
    rounding errors or to exactly 0, while ||r|| = ||E u - f|| keeps its accuracy.

    Returns
    -------
    u : ndarray of shape (n,)
        The NNLS solution (the certificate when infeasible).
    alpha : ndarray of shape (n,) or None
        The dual of 1/2 ||w||^2, None when infeasible.
    """
    n = G.shape[0]
    E = np.vstack([G.T, np.ones((1, n)) if h is None else h[None, :]])
    f = np.zeros(E.shape[0])
    f[-1] = 1.0
    # Lawson-Hanson needs about one outer iteration per active constraint; 3 n (scipy's
    # default) can be too few on degenerate inputs.
    u, rnorm = nnls(E, f, maxiter=50 * n)
    if rnorm <= _LDP_INFEASIBLE_RNORM:
        return u, None
    return u, u / rnorm**2  # rnorm**2 >= 1e-16 here: no division by zero


def _ldp_certificate(G: np.ndarray) -> list[int]:
    """Samples in the support of the LDP infeasibility certificate; empty when feasible."""
    u, alpha = _ldp(G)
    if alpha is not None:
        return []
    return np.flatnonzero(u > 1e-12 * u.max()).tolist()


def _certified(
    data: _VStepData,
    out: _EngineOutput,
    name: str,
    tol: float,
    fallbacks: list[str],
    start: float,
    refined: bool | None = None,
) -> VStepResult | None:
    """Rescale to exact feasibility and recompute the certificate of a primal-dual pair.

    ``refined=None`` first solves the KKT system exactly on the engine's support
    (:func:`_solve_on_support`) and keeps that answer when it is exact; True or False say
    whether ``out`` already is such an answer. Returns None when v = Z^T coef does not
    separate the samples at all.
    """
    if refined is None:
        exact = _solve_on_support(data, out)
        refined = exact is not None
        out = exact if refined else out
    margins = data.y * (data.K @ out.coef)
    raw_min = float(margins.min())
    if not np.isfinite(raw_min) or raw_min <= 0:
        return None
    rescale = 1.0 / raw_min
    coef, margins = out.coef * rescale, margins * rescale
    sq_norm = float(coef @ data.K @ coef)
    alpha = np.maximum(out.alpha, 0.0)  # interior-point duals can be -1e-12 on inactive rows
    gap = _relative_gap(data, sq_norm, alpha)
    if out.status == OPTIMAL and gap <= _GAP_FACTOR * tol:
        status, message = OPTIMAL, f"optimal (engine {name})"
        if refined:
            message += (
                f", KKT system solved exactly on its {np.count_nonzero(alpha)} support vectors"
            )
    else:
        status = OPTIMAL_INACCURATE
        message = f"engine status {out.status!r}, relative duality gap {gap:.3g}"
    if fallbacks and status == OPTIMAL:
        message += f" after fallbacks: {'; '.join(fallbacks)}"
    return VStepResult(
        v=None if data.Z is None else data.Z.T @ coef,
        alpha=alpha,
        coef=coef,
        norm=float(np.sqrt(sq_norm)),
        min_margin=float(margins.min()),
        gap=gap,
        status=status,
        message=message,
        solver=name,
        fallbacks=list(fallbacks),
        solve_time=time.perf_counter() - start,
        n_iter=out.n_iter,
        rescale=rescale,
        refined=refined,
    )


def _solve_on_support(data: _VStepData, out: _EngineOutput) -> _EngineOutput | None:
    """Solve the KKT conditions exactly on the support vectors the engine identified.

    Interior-point answers are accurate to about the square root of their tolerance in v
    (1e-5 at tol = 1e-9, worse on ill-conditioned K). Given the support S, the optimum solves
    a linear system, ``Q_SS a = 1``, solved by Cholesky (:func:`_kkt_on_support`); when
    Q_SS is singular to working precision, by least squares in the normalised reduced
    coordinates: w = G_S^T a with G_S w = 1, i.e. (G_S G_S^T) a = 1. If a >= 0, the support's
    margins are 1 and all others at least 1 (to _KKT_RTOL), all KKT conditions hold and this
    is the optimum; otherwise (a wrong support, or one too ill-conditioned to solve
    accurately) None, and the engine's answer stands.

    S holds the samples whose dual, relative to the largest, exceeds their margin slack: an
    interior-point dual on a sample just off the margin is of order gap / slack, far below
    the slack, while one on the margin is of order 1 against a slack of order tol.
    """
    margins = data.y * (data.K @ out.coef)
    alpha = np.maximum(out.alpha, 0.0)
    if alpha.max() <= 0 or margins.min() <= 0:
        return None
    support = alpha / alpha.max() > margins / margins.min() - 1.0
    if not support.any():
        return None
    exact = _kkt_on_support(data.K, data.y, support)
    if exact is not None:
        return out._replace(coef=exact * data.y, alpha=exact)
    # Q_SS singular to working precision (e.g. more support vectors than the rank of K):
    # least squares on the clipped factor.
    G_S = data.factor.G[support]
    a, *_ = np.linalg.lstsq(G_S @ G_S.T, np.ones(G_S.shape[0]), rcond=None)
    w = G_S.T @ a
    margins = data.factor.G @ w  # the margins y_i z_i^T v of the candidate
    on_margin = np.abs(margins[support] - 1.0).max() <= _KKT_RTOL
    if a.min() < 0 or not on_margin or margins.min() < 1.0 - _KKT_RTOL:
        return None
    full = np.zeros(data.n)
    full[support] = a / data.factor.scale
    return out._replace(coef=data.coef_from_w(w), alpha=full)


def _gap_rounding(data: _VStepData, result: VStepResult) -> float:
    """How well float64 can know the relative duality gap of ``result``.

    Every engine works on a factor of K (Cholesky or eigen-decomposition) whose backward
    error is of order ``n eps ||K||``, and the optimal value ``||v||^2 = sum(alpha)`` moves
    by ``alpha^T E alpha`` when K moves by E: relative to ``||v||^2 / 2`` that is at most
    ``2 n eps trace(K) ||alpha||^2 / ||v||^2``. Negligible unless the problem is nearly
    infeasible (opposite labels on nearly equal features make ``alpha`` huge).
    """
    n = len(result.alpha)
    trace = float(np.trace(data.K))
    return (
        2
        * n
        * np.finfo(np.float64).eps
        * trace
        * float(result.alpha @ result.alpha)
        / result.norm**2
    )


def _relative_gap(data: _VStepData, sq_norm: float, alpha: np.ndarray) -> float:
    """(P - D) / P with P = ||v||^2 / 2 and D(alpha) = sum(alpha) - ||Z^T (alpha y)||^2 / 2."""
    alpha_y = alpha * data.y
    dual = float(alpha.sum()) - float(alpha_y @ data.K @ alpha_y) / 2
    return (sq_norm / 2 - dual) / (sq_norm / 2)


def _no_solution(
    status: str, message: str, solver: str | None, fallbacks: list[str], start: float
) -> VStepResult:
    nan = float("nan")
    return VStepResult(
        v=None,
        alpha=None,
        coef=None,
        norm=nan,
        min_margin=nan,
        gap=nan,
        status=status,
        message=message,
        solver=solver,
        fallbacks=list(fallbacks),
        solve_time=time.perf_counter() - start,
    )


def _infeasible(
    samples: list[int], why: str, solver: str | None, fallbacks: list[str], start: float
) -> VStepResult:
    result = _no_solution(INFEASIBLE, f"infeasible: {why}", solver, fallbacks, start)
    result.infeasible_samples = samples
    result.norm_bound = float("inf")
    return result


def _cannot_tell(bound: float, why: str, start: float) -> VStepResult:
    result = _no_solution(FAILED, why, None, [], start)
    result.norm_bound, result.unresolved = bound, True
    return result


def _failed(fallbacks: list[str], start: float) -> VStepResult:
    message = f"every engine failed: {'; '.join(fallbacks)}"
    return _no_solution(FAILED, message, None, fallbacks, start)
