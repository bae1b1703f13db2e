"""A scikit-learn classifier around the min-norm solver and gradient descent.

:class:`SingleHeadAttentionClassifier` subclasses scikit-learn's ``BaseEstimator`` and
``ClassifierMixin``, so parameters, cloning, ``Pipeline``, ``GridSearchCV``, tags and the
HTML repr are scikit-learn's own rather than a copy of them. scikit-learn is therefore needed
by this module only (the extra ``margin-solver[sklearn]``); ``import margin_solver`` and the
solvers do not load it (the package resolves this class on first use).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.exceptions import ConvergenceWarning, NotFittedError
    from sklearn.utils.multiclass import check_classification_targets, type_of_target
    from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data
except ImportError as exc:  # pragma: no cover -- the test extra installs scikit-learn
    raise ImportError(
        "SingleHeadAttentionClassifier needs scikit-learn >= 1.6: "
        "pip install 'margin-solver[sklearn]'. The solvers (solve_min_norm, "
        "gradient_descent) work without it."
    ) from exc

from margin_solver.core.kernel import multihead_outputs, outputs
from margin_solver.core.results import ConvergenceWarning as SolverConvergenceWarning
from margin_solver.core.validation import (
    InvalidInputError,
    check_magnitude,
    check_memory,
    check_tokens,
)
from margin_solver.gd.endpoints import gradient_descent, token_scale
from margin_solver.minnorm.multihead import solve_min_norm_heads
from margin_solver.minnorm.solve import solve_min_norm

__all__ = ["FIT_METHODS", "NotFittedError", "SingleHeadAttentionClassifier", "position_tokens"]

#: Solvers :class:`SingleHeadAttentionClassifier` fits with (its ``method``).
FIT_METHODS = ("min-norm", "gd")
#: Default radii of min-norm, tried in order: ``R = c / nu`` (``nu^2`` the mean squared training
#: token norm, so attention scores reach about ``c``); the first ``R`` at which min-norm finds an
#: interpolator is kept. Soft attention first: on digits 3 vs 8 (block positions, 3-fold)
#: ``c = 1`` scored 0.985, ``c = 3`` 0.965 and ``c = 10`` (the single default before) 0.925
#: (docs/decisions.md, "The classifier's default R").
DEFAULT_SCORE_RANGES = (1.0, 10.0)
#: Options of min-norm in the classifier (``solver_options`` overrides them): the descents
#: from the deterministic starts only, no random starts and no further search. A classifier
#: needs an interpolator in seconds, not the best one the search can find: 3 s instead of
#: 27 s per fold on digits 3 vs 8 (docs/decisions.md, "The classifier's default R").
MIN_NORM_OPTIONS = {"search_starts": 0, "n_random_starts": 0}
#: At the default radii up to this score range the solve runs the zero start only, not the
#: selection starts, each an attention SVM with n (T - 1) constraints: at c = 1 the zero start
#: reached the norm of all three starts (to 1e-11 relative) in every fold of the real sets and
#: on 12 draws of the paper's data, and an MNIST fit at n = 200 took 3.7 s instead of 53 s
#: (docs/decisions.md, "The classifier's first starts"). Harder attention (c = 10, an ``R``
#: given) keeps them: there the zero start's local optimum was worse (test accuracy 0.71
#: against 0.83 on the paper's data).
ZERO_START_SCORE_RANGE = 1.0
#: The gradient-descent fit that stands in when min-norm finds no interpolator at any default
#: radius (or at the ``R`` given): normalised steps, which cannot diverge where the constant
#: schedule's default step does, with weight decay, the soft-margin fit that needs no
#: interpolator (docs/decisions.md, "The classifier's stand-in fit").
FALLBACK_GD_SCHEDULE = "normalized"
FALLBACK_GD_STEPS = 500
FALLBACK_WEIGHT_DECAY = 1e-2
#: How 2-D rows become tokens (``positions``): see :func:`position_tokens`.
POSITIONS = ("auto", "block", "none")

#: Keyword arguments each solver receives from the classifier's own parameters (parameter
#: name -> solver keyword); every other solver keyword goes through ``solver_options``.
#: A new constructor parameter that a solver takes is one entry here.
_SOLVER_KEYWORDS = {
    "gd": {
        "schedule": "schedule",
        "steps": "steps",
        "step_size": "step_size",
        "weight_decay": "weight_decay",
        "R": "R",
        "heads": "heads",
    },
    "min-norm": {"heads": "heads"},
}
# The signatures solver_options are checked against; min-norm is fitted by
# solve_min_norm_heads, which is solve_min_norm itself for one head and takes its options.
_SOLVERS = {"gd": gradient_descent, "min-norm": solve_min_norm}


class _Fit(NamedTuple):
    """What :meth:`SingleHeadAttentionClassifier._solve` fitted (see the fitted attributes)."""

    result: Any
    solution: str
    R: float | None
    note: str | None = None


class SingleHeadAttentionClassifier(ClassifierMixin, BaseEstimator):
    """Binary classifier ``f(X) = v^T X^T softmax(X p)`` fitted by min-norm or by GD.

    Parameters
    ----------
    method : {"min-norm", "gd"}, default="min-norm"
        ``"min-norm"`` calls :func:`margin_solver.minnorm.solve.solve_min_norm` (the
        min-norm interpolator with ``||p|| <= R``); ``"gd"`` calls
        :func:`margin_solver.gd.endpoints.gradient_descent`.
    n_tokens : int, optional
        Tokens per sample of 2-D input: a row of ``T * d`` numbers is read as ``T`` tokens of
        ``d`` (``X.reshape(n, T, d)``), so that ``StandardScaler`` and other transformers
        can come first in a ``Pipeline``. Without it a 2-D row is one token (the model is then
        linear, ``v^T x``). 3-D input ``(n, T, d)`` is read as it is.
    positions : {"auto", "block", "none"}, default="auto"
        Where each token's position goes. The model is blind to token order and shares one
        ``v`` and one ``p`` across tokens, so cut from a fixed layout (the rows of an image,
        blocks of a feature vector) a token loses where it came from. ``"block"`` places token
        ``t`` in its own block of ``T * d`` coordinates (:func:`position_tokens`): ``v`` and
        ``p`` then hold one weight vector per position, uniform attention (``p = 0``) is the
        linear model on the whole row, and attention reweights the positions per sample.
        ``"none"`` uses the tokens as they are. ``"auto"``: ``"block"`` for 2-D input cut into
        ``n_tokens >= 2`` tokens, ``"none"`` for 3-D input (tokens given as tokens, as in the
        paper's model, whose signal token may stand anywhere) and for one-token rows.
    R : float, optional
        Norm cap on ``p``. For ``"min-norm"``, when not given, ``R = c / nu`` for ``c`` in
        :data:`DEFAULT_SCORE_RANGES` (1, then 10; ``nu^2`` the mean squared training token
        norm, so attention scores reach about ``c``), keeping the first at which min-norm
        finds an interpolator; at ``c = 1`` from the zero start (uniform attention) only
        (:data:`ZERO_START_SCORE_RANGE`). GD has no cap unless given.
    schedule : {"two-step", "constant", "normalized"}, default="two-step"
        GD schedule (``method="gd"`` only).
    steps : int, optional
        GD steps (schedules other than two-step).
    step_size : float, optional
        GD step of the ``"constant"``/``"normalized"`` schedules.
    weight_decay : float, default=0.0
        GD weight decay.
    random_state : int, numpy Generator, RandomState or SeedSequence, optional
        Seeds every random choice: min-norm's random starts and search, GD's random
        initialisation (``solver_options={"init": "random"}``), and the GD fit that stands in
        for a failed min-norm fit. None: fresh randomness at every fit (scikit-learn's
        convention).
    solver_options : dict, optional
        Extra keyword arguments of the solver (e.g. ``{"n_random_starts": 4}`` for
        min-norm, ``{"init": "random"}`` for GD).
    verbose : bool, default=False
        The solver's progress: bars when stderr is a terminal, else log lines.
    heads : int, default=1
        Attention heads H of ``f(X) = sum_h v_h^T X^T softmax(X p_h)``; for H > 1 the
        min-norm fit is :func:`margin_solver.minnorm.multihead.solve_min_norm_heads` (never
        certified) and GD runs with ``heads=H`` (from a random initialisation, pass
        ``solver_options={"init": "random"}``, else the heads stay identical); ``v_`` and
        ``p_`` then have shape (H, n_features).

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two labels seen in ``fit``, sorted; ``classes_[1]`` is the positive class
        (``f > 0``).
    v_, p_ : ndarray of shape (d,), or (T * d,) with block positions
        Fitted value head and attention vector.
    result_ : MinNormResult or GDResult
        The solver's full result (of the stand-in GD fit when min-norm failed); its
        ``classes`` are ``classes_``, so ``result_.predict`` agrees with :meth:`predict`.
    solution_ : {"min-norm", "gd", "weight-decayed gd"}
        What the fitted model is: the min-norm interpolator at ``R_``, the GD fit asked for,
        or the stand-in for a min-norm fit that found no interpolator (``FALLBACK_GD_STEPS``
        normalised steps with weight decay ``FALLBACK_WEIGHT_DECAY``).
    status_ : str
        ``result_.status`` (docs/statuses.md).
    R_ : float or None
        The radius of the min-norm interpolator (the first default radius that gave one, or
        the ``R`` given); the ``R`` given to GD; None for the stand-in fit and uncapped GD.
    fallback_ : str or None
        Why min-norm's interpolator was not kept at the first radius (the radii tried and
        their statuses); None when it was.
    positions_ : {"block", "none"}
        The token layout used (``positions`` resolved).
    n_features_in_ : int
        Columns of 2-D input (``T * d``), or the token dimension ``d`` of 3-D input.
    n_tokens_ : int
        Tokens per sample ``T``.
    feature_names_in_ : ndarray of str
        Column names of a DataFrame given to ``fit`` (only then).

    Notes
    -----
    ``predict_proba`` is the logistic link of the model output,
    ``P(classes_[1] | X) = 1 / (1 + exp(-f(X)))``: the link of the logistic loss gradient
    descent minimises. The min-norm interpolator is not fitted to probabilities, and any
    interpolator's outputs can be scaled up without changing a prediction, so read these
    as scores (they are not calibrated).

    A min-norm fit that finds no interpolator at the first radius tries the next default one;
    at none of them (or at the ``R`` given), it keeps the weight-decayed gradient-descent fit
    (``solution_ == "weight-decayed gd"``), which needs no interpolator, so that
    cross-validation goes on with a usable model. Either way it warns once with
    scikit-learn's ``ConvergenceWarning`` saying what happened (``fallback_`` keeps it).

    Examples
    --------
    >>> from margin_solver.core.data import PaperDistribution
    >>> train, test = PaperDistribution(d=2000, snr=0.35, eta=0.1).sample_train_test(
    ...     20, 200, seed=0
    ... )
    >>> clf = SingleHeadAttentionClassifier(method="gd").fit(train.X, train.y)
    >>> clf.score(train.X, train.y)
    1.0
    """

    def __init__(
        self,
        method: str = "min-norm",
        *,
        n_tokens: int | None = None,
        positions: str = "auto",
        R: float | None = None,
        schedule: str = "two-step",
        steps: int | None = None,
        step_size: float | None = None,
        weight_decay: float = 0.0,
        random_state: Any = None,
        solver_options: dict[str, Any] | None = None,
        verbose: bool = False,
        heads: int = 1,
    ):
        # scikit-learn's contract: store every argument unchanged, validate in fit.
        for name, value in locals().items():
            if name not in ("self", "__class__"):
                setattr(self, name, value)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X: Any, y: Any) -> SingleHeadAttentionClassifier:
        """Fit on ``X`` (2-D ``(n, T*d)`` with ``n_tokens=T``, or 3-D ``(n, T, d)``) and ``y``
        (any two labels).

        Raises
        ------
        InvalidInputError
            Bad shapes, non-finite values, an unknown ``method`` or solver option.
        ValueError
            ``y`` does not hold exactly two classes.

        Warns
        -----
        ConvergenceWarning
            scikit-learn's: the solver's status has ``success`` False (GD diverged or did not
            fit; the last finite iterate is kept), or min-norm found no interpolator and the
            GD fallback was used. The solvers' own warnings are not repeated.
        """
        if self.method not in FIT_METHODS:
            raise InvalidInputError(f"method must be one of {FIT_METHODS}, got {self.method!r}.")
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        Xc, yc = self._tokens(X, y, reset=True)
        _wrapped(check_classification_targets, yc)
        kind = _wrapped(type_of_target, yc)
        if kind != "binary":
            raise InvalidInputError(
                f"Only binary classification is supported. The type of the target is {kind}."
            )
        self.classes_, encoded = np.unique(yc, return_inverse=True)
        if len(self.classes_) != 2:
            raise InvalidInputError(
                f"{type(self).__name__} is a binary classifier: y must hold exactly 2 classes, "
                f"got {len(self.classes_)} class(es) {self.classes_[:5].tolist()}."
            )
        signs = np.where(encoded == 1, 1.0, -1.0)
        fit = self._solve(Xc, signs, _seed(self.random_state))
        self.fallback_ = fit.note
        if fit.note is not None:
            warnings.warn(fit.note, ConvergenceWarning, stacklevel=2)
        elif not fit.result.success:
            warnings.warn(
                f"{self.method} ended with status {fit.result.status!r}: {fit.result.message}",
                ConvergenceWarning,
                stacklevel=2,
            )
        fit.result.classes = self.classes_  # fitted on signs; the result speaks in y's labels
        self.result_, self.solution_, self.R_ = fit.result, fit.solution, fit.R
        self.status_ = fit.result.status
        self.v_ = np.asarray(fit.result.v, dtype=np.float64)
        self.p_ = np.asarray(fit.result.p, dtype=np.float64)
        return self

    def _solve(self, X: np.ndarray, y: np.ndarray, seed: Any) -> _Fit:
        """The solver's fit; for min-norm, the first radius with an interpolator, else the
        weight-decayed GD stand-in, with a note saying what happened."""
        solver = _SOLVERS[self.method]
        options = {
            name: getattr(self, param) for param, name in _SOLVER_KEYWORDS[self.method].items()
        }
        extra = _solver_options(solver, self.solver_options, set(options))
        if self.method == "min-norm":
            options.update(MIN_NORM_OPTIONS)
        options.update(extra)
        options["verbose"] = bool(self.verbose)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SolverConvergenceWarning)  # fit warns once
            if self.method == "gd":
                return _Fit(gradient_descent(X, y, seed=seed, **options), "gd", self.R)
            radii = [(self.R, None)] if self.R is not None else _default_radii(X)
            tried = []
            for R, score_range in radii:
                run = options
                if score_range is not None and score_range <= ZERO_START_SCORE_RANGE:
                    run = _zero_start_only(options)
                result = solve_min_norm_heads(X, y, R, seed=seed, **run)
                if result.solution_present:
                    note = None
                    if tried:
                        note = (
                            f"min-norm found no interpolator with {'; '.join(tried)}; kept "
                            f"the one with ||p|| <= {R:.4g} (status {result.status!r})"
                        )
                    return _Fit(result, "min-norm", R, note)
                tried.append(f"||p|| <= {R:.4g} ({result.status}: {result.message})")
            result = gradient_descent(
                X,
                y,
                schedule=FALLBACK_GD_SCHEDULE,
                steps=FALLBACK_GD_STEPS,
                weight_decay=FALLBACK_WEIGHT_DECAY,
                seed=seed,
                heads=self.heads,
                verbose=options["verbose"],
            )
        note = (
            f"min-norm found no interpolator with {'; '.join(tried)}; fitted "
            f"{FALLBACK_GD_STEPS} steps of gradient descent ({FALLBACK_GD_SCHEDULE} schedule, "
            f"weight decay {FALLBACK_WEIGHT_DECAY:g}) instead, which ended with status "
            f"{result.status!r}: {result.message}"
        )
        return _Fit(result, "weight-decayed gd", None, note)

    def _tokens(self, X: Any, y: Any = None, *, reset: bool) -> Any:
        """``X`` as float64 tokens (n, T, d) (and ``y`` as a 1-D array when given).

        2-D (and 1-D, sparse) input goes through scikit-learn's ``validate_data`` (feature
        names, ``n_features_in_``, its messages); anything else through the package's token
        check. Data errors are :class:`InvalidInputError` (a ValueError) either way.
        """
        n_y, n_x = _length(y), _length(X)
        if y is not None and None not in (n_y, n_x) and n_y != n_x:
            raise InvalidInputError(f"y has {n_y} labels but X has {n_x} samples.")
        if not _tabular(X):
            Xc = check_tokens(X)
            if y is not None:
                y = _finite_labels(_wrapped(column_or_1d, y, warn=True))
            if reset:
                self.n_features_in_, self.n_tokens_, self._two_d = Xc.shape[2], Xc.shape[1], False
                if hasattr(self, "feature_names_in_"):
                    del self.feature_names_in_
            elif Xc.shape[2] != self.n_features_in_ or self._two_d:
                raise InvalidInputError(
                    f"X has shape {Xc.shape} but {type(self).__name__} was fitted on "
                    f"{self._fitted_shape()}."
                )
        else:
            if y is None:
                X2 = _wrapped(validate_data, self, X, reset=reset, dtype=np.float64)
            else:
                X2, y = _wrapped(validate_data, self, X, y, reset=reset, dtype=np.float64)
            if reset:
                self.n_tokens_ = self._check_n_tokens(X2.shape[1])
                self._two_d = True
            elif not self._two_d:
                raise InvalidInputError(
                    f"X has shape {X2.shape} (2-D) but {type(self).__name__} was fitted on "
                    f"{self._fitted_shape()}."
                )
            Xc = X2.reshape(X2.shape[0], self.n_tokens_, -1)
        check_magnitude(Xc, "X")
        if reset:
            self.positions_ = self._resolve_positions(Xc.shape[1])
        if self.positions_ == "block":
            Xc = position_tokens(Xc)
        return (Xc, y) if y is not None else Xc

    def _resolve_positions(self, T: int) -> str:
        """``positions`` as "block" or "none" (see the class docstring)."""
        if self.positions not in POSITIONS:
            raise InvalidInputError(
                f"positions must be one of {POSITIONS}, got {self.positions!r}."
            )
        if self.positions == "auto":
            return "block" if self._two_d and T >= 2 else "none"
        return self.positions

    def _check_n_tokens(self, columns: int) -> int:
        T = 1 if self.n_tokens is None else self.n_tokens
        if not isinstance(T, (int, np.integer)) or isinstance(T, bool) or T < 1:
            raise InvalidInputError(f"n_tokens must be a positive integer, got {self.n_tokens!r}.")
        if columns % T:
            raise InvalidInputError(
                f"X has {columns} columns, not a multiple of n_tokens={T}: a 2-D row must hold "
                "n_tokens tokens of equal dimension."
            )
        return int(T)

    def _fitted_shape(self) -> str:
        if self._two_d:
            return f"2-D X of {self.n_features_in_} columns ({self.n_tokens_} tokens)"
        return f"3-D X of {self.n_tokens_}-token samples with {self.n_features_in_} features each"

    def decision_function(self, X: Any) -> np.ndarray:
        """Model outputs ``f(X_i; v_, p_)``, shape (n_samples,): positive for ``classes_[1]``."""
        check_is_fitted(self)
        X = self._tokens(X, reset=False)
        if self.v_.ndim == 2:  # H heads
            return multihead_outputs(X, self.v_, self.p_)
        return outputs(X, self.v_, self.p_)

    def predict(self, X: Any) -> np.ndarray:
        """``classes_[1]`` where ``f >= 0`` (an output of exactly 0 included), else
        ``classes_[0]``."""
        positive = self.decision_function(X) >= 0  # first: raises NotFittedError before fit
        return self.classes_[positive.astype(int)]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy of :meth:`predict` against ``y`` (scikit-learn's ``ClassifierMixin.score``;
        bad ``y`` raises :class:`InvalidInputError`)."""
        y = _finite_labels(_wrapped(column_or_1d, y))
        if None not in (_length(X), len(y)) and len(y) != _length(X):
            raise InvalidInputError(f"y has {len(y)} labels but X has {_length(X)} samples.")
        return float(_wrapped(super().score, X, y, sample_weight=sample_weight))

    def predict_proba(self, X: Any) -> np.ndarray:
        """``[1 - s, s]`` with ``s = 1 / (1 + exp(-f))`` per sample (columns as ``classes_``;
        see Notes: scores, not calibrated probabilities)."""
        from scipy.special import expit

        f = self.decision_function(X)
        return np.column_stack([expit(-f), expit(f)])  # 1 - s without cancellation

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, computed stably (``log_expit``)."""
        from scipy.special import log_expit

        f = self.decision_function(X)
        return np.column_stack([log_expit(-f), log_expit(f)])


def _tabular(X: Any) -> bool:
    """True for input scikit-learn validates: 1-D or 2-D arrays, sparse matrices, frames."""
    if hasattr(X, "tocsr") or hasattr(X, "columns"):
        return True
    try:
        return (X if isinstance(X, np.ndarray) else np.asarray(X)).ndim in (1, 2)
    except (TypeError, ValueError):  # ragged: the token check names the problem
        return False


def _finite_labels(y: np.ndarray) -> np.ndarray:
    """``y``, refused when float labels hold NaN or inf: scikit-learn's target checks refuse
    them too, but only after casting them to int with a RuntimeWarning (issue 43)."""
    if y.dtype.kind in "fc":
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise InvalidInputError(
                f"Input y contains NaN or infinity ({bad.size} label(s), the first at index "
                f"{bad[0]})."
            )
    return y


def _length(X: Any) -> int | None:
    """Samples in ``X`` (or labels in ``y``); None when it has no length."""
    try:
        return int(X.shape[0]) if hasattr(X, "shape") else len(X)
    except (TypeError, IndexError):
        return None


def _wrapped(func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` with scikit-learn's ValueErrors as InvalidInputError (same
    message)."""
    try:
        return func(*args, **kwargs)
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from None


def _seed(random_state: Any) -> Any:
    """``random_state`` as a seed the solvers accept: a RandomState gives an integer drawn from
    it (scikit-learn's habit); None, integers, SeedSequences and Generators pass through."""
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    return random_state


def _default_radii(X: np.ndarray) -> list[tuple[float, float]]:
    """``(c / nu, c)`` for ``c`` in :data:`DEFAULT_SCORE_RANGES`; all-zero tokens have no scale
    (and no interpolator)."""
    nu2 = token_scale(X)
    if nu2 <= 0:
        raise InvalidInputError("All tokens are zero: every output is 0, so nothing interpolates.")
    return [(c / math.sqrt(nu2), c) for c in DEFAULT_SCORE_RANGES]


def _zero_start_only(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the strategy field ``first_starts`` set to the zero start, unless the
    caller's ``solver_options`` chose the first starts (see :data:`ZERO_START_SCORE_RANGE`)."""
    strategy = options.get("options") or {}
    if not isinstance(strategy, Mapping) or "first_starts" in strategy:  # the solver refuses
        return options  # a bad value itself
    return {**options, "options": {**strategy, "first_starts": ("zero",)}}


def position_tokens(X: np.ndarray) -> np.ndarray:
    """Each token in its own block: ``out[i, t] = e_t (x) x_it``, shape (n, T, T * d).

    Token ``t`` fills coordinates ``t * d`` to ``(t + 1) * d`` and the rest are zero, so
    ``<v, out[i, t]> = <v_t, x_it>`` with ``v_t`` the ``t``-th block of ``v``: one weight vector
    per position, for ``v`` and ``p`` alike. With uniform attention the model is the linear
    model ``(1 / T) v^T x_i`` on the whole row.

    Examples
    --------
    >>> position_tokens(np.array([[[1.0, 2.0], [3.0, 4.0]]]))
    array([[[1., 2., 0., 0.],
            [0., 0., 3., 4.]]])
    """
    n, T, d = X.shape
    check_memory(
        8.0 * n * T * T * d, f"block positions ({n} x {T} x {T * d})", "use positions='none'"
    )
    out = np.zeros((n, T, T * d))
    for t in range(T):
        out[:, t, t * d : (t + 1) * d] = X[:, t]
    return out


def _solver_options(solver: Any, options: dict[str, Any] | None, fixed: set[str]) -> dict[str, Any]:
    """``options`` as keyword arguments of ``solver``; unknown names, and names the
    classifier's own parameters set, raise."""
    import inspect

    options = dict(options or {})
    params = inspect.signature(solver).parameters
    fixed = fixed | {"X", "y", "R", "seed", "verbose"}
    unknown = sorted(k for k in options if k not in params or k in fixed)
    if unknown:
        allowed = sorted(k for k in params if k not in fixed)
        raise InvalidInputError(
            f"solver_options {unknown} are not options of {solver.__name__} (or are set by "
            f"the classifier's own parameters); allowed: {allowed}."
        )
    return options
