"""A scikit-learn-style classifier around the min-norm solver and gradient descent.

scikit-learn is not a dependency: :class:`SingleHeadAttentionClassifier` follows its
conventions by hand (``__init__`` stores arguments, ``fit`` validates and returns ``self``,
fitted attributes end in ``_``, ``get_params``/``set_params`` from the ``__init__``
signature) so :func:`sklearn.base.clone` and :func:`sklearn.model_selection.cross_val_score`
work when scikit-learn is installed.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from margin_solver.gd import gradient_descent, token_scale
from margin_solver.kernel import multihead_outputs, outputs
from margin_solver.minnorm import solve_min_norm
from margin_solver.multihead import solve_min_norm_heads
from margin_solver.results import NO_FEASIBLE_POINT_FOUND, ConvergenceWarning
from margin_solver.validation import InvalidInputError, check_labels, check_magnitude, check_tokens

__all__ = ["FIT_METHODS", "NotFittedError", "SingleHeadAttentionClassifier"]

#: Solvers :class:`SingleHeadAttentionClassifier` fits with (its ``method``).
FIT_METHODS = ("min-norm", "gd")
#: Default ``R`` of min-norm is this over ``nu`` (root mean squared token norm): scores
#: ``<x, p>`` then reach about 10, close to hard token selection.
DEFAULT_SCORE_RANGE = 10.0


class NotFittedError(ValueError, AttributeError):
    """Raised when ``predict``/``decision_function``/``score`` runs before ``fit``.

    Like scikit-learn's exception of the same name it subclasses both ValueError and
    AttributeError.
    """


class SingleHeadAttentionClassifier:
    """Binary classifier ``sign(v^T X^T softmax(X p))`` fitted by min-norm or by GD.

    Parameters
    ----------
    method : {"min-norm", "gd"}, default="min-norm"
        ``"min-norm"`` calls :func:`margin_solver.minnorm.solve_min_norm` (the
        min-norm interpolator with ``||p|| <= R``); ``"gd"`` calls
        :func:`margin_solver.gd.gradient_descent`.
    R : float, optional
        Norm cap on ``p``. For ``"min-norm"`` it defaults to ``10 / nu`` (``nu^2`` the mean
        squared training token norm), so attention scores reach about 10; GD has no cap
        unless given.
    schedule : {"two-step", "constant", "normalized"}, default="two-step"
        GD schedule (``method="gd"`` only).
    steps : int, optional
        GD steps (schedules other than two-step).
    step_size : float, optional
        GD step of the ``"constant"``/``"normalized"`` schedules.
    weight_decay : float, default=0.0
        GD weight decay.
    random_state : int, optional
        Seed of GD's random initialisation (with ``solver_options={"init": "random"}``).
    solver_options : dict, optional
        Extra keyword arguments passed through to the solver (for ``"min-norm"``, the
        options of ``solve_min_norm``, e.g. its restarts and seed).
    heads : int, default=1
        Attention heads H of ``f(X) = sum_h v_h^T X^T softmax(X p_h)``; for H > 1 the
        min-norm fit is :func:`margin_solver.multihead.solve_min_norm_heads` (never
        certified) and GD runs with ``heads=H`` (from a random initialisation, pass
        ``solver_options={"init": "random"}``, else the heads stay identical); ``v_`` and
        ``p_`` then have shape (H, n_features).

    Attributes
    ----------
    v_, p_ : ndarray of shape (n_features,)
        Fitted value head and attention vector.
    result_ : object
        The solver's full result (GDResult or the min-norm result).
    classes_ : ndarray, ``[-1, 1]``
    n_features_in_ : int
        Token dimension seen in ``fit``.

    Examples
    --------
    >>> from margin_solver.data import PaperDistribution
    >>> train, test = PaperDistribution(d=2000, snr=0.35, eta=0.1).sample_train_test(20, 200, seed=0)
    >>> clf = SingleHeadAttentionClassifier(method="gd").fit(train.X, train.y)
    >>> clf.score(train.X, train.y)
    1.0
    """

    def __init__(
        self,
        method: str = "min-norm",
        R: float | None = None,
        schedule: str = "two-step",
        steps: int | None = None,
        step_size: float | None = None,
        weight_decay: float = 0.0,
        random_state: int | None = None,
        solver_options: dict[str, Any] | None = None,
        heads: int = 1,
    ):
        self.method = method
        self.R = R
        self.schedule = schedule
        self.steps = steps
        self.step_size = step_size
        self.weight_decay = weight_decay
        self.random_state = random_state
        self.solver_options = solver_options
        self.heads = heads

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor arguments as a dict (``deep`` is accepted for scikit-learn; no nesting)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> SingleHeadAttentionClassifier:
        """Set constructor arguments; unknown names raise :class:`InvalidInputError`."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise InvalidInputError(
                    f"Invalid parameter {name!r} for {type(self).__name__}; valid: {sorted(valid)}."
                )
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self) -> Any:
        """Estimator tags for scikit-learn >= 1.6 (only scikit-learn calls this)."""
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        return Tags(
            estimator_type="classifier",
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags(multi_class=False),
            input_tags=InputTags(two_d_array=False, three_d_array=True),
        )

    def fit(self, X: Any, y: Any) -> SingleHeadAttentionClassifier:
        """Fit on tokens ``X`` of shape (n_samples, n_tokens, n_features) and labels in {-1, +1}.

        Raises
        ------
        InvalidInputError
            Bad shapes or labels, an unknown ``method``, or (min-norm) no interpolator
            exists with ``||p|| <= R``.

        Warns
        -----
        ConvergenceWarning
            The solver's status has ``success`` False (GD diverged, or its two steps did not
            fit the training set; the last finite iterate is kept). scikit-learn's
            ``sklearn.exceptions.ConvergenceWarning`` when scikit-learn is importable (so
            scikit-learn's tools filter it as usual), else
            :class:`margin_solver.results.ConvergenceWarning`; the solver's own warning is
            not repeated.
        """
        if self.method not in FIT_METHODS:
            raise InvalidInputError(f"method must be one of {FIT_METHODS}, got {self.method!r}.")
        Xc = check_magnitude(check_tokens(X), "X")
        yc = check_labels(y, Xc.shape[0])
        solver = gradient_descent if self.method == "gd" else solve_min_norm
        options = _solver_options(solver, self.solver_options)
        R = None if self.method == "gd" else (self.R if self.R is not None else _default_radius(Xc))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # re-emitted below, once
            if self.method == "gd":
                result = gradient_descent(
                    Xc, yc, schedule=self.schedule, steps=self.steps, step_size=self.step_size,
                    weight_decay=self.weight_decay, R=self.R, seed=self.random_state,
                    heads=self.heads, **options,
                )
            elif self.heads != 1:
                result = solve_min_norm_heads(Xc, yc, R, heads=self.heads, **options)
            else:
                result = solve_min_norm(Xc, yc, R, **options)
        if self.method != "gd" and (result.v is None or result.status == NO_FEASIBLE_POINT_FOUND):
            # v may be a best attempt that does not interpolate: no model to keep
            raise InvalidInputError(f"No interpolator with ||p|| <= {R:.4g}: {result.message}")
        if not result.success:
            warnings.warn(
                f"{self.method} ended with status {result.status!r}: {result.message}",
                _failure_warning(),
                stacklevel=2,
            )
        self.result_ = result
        self.v_ = np.asarray(result.v, dtype=np.float64)
        self.p_ = np.asarray(result.p, dtype=np.float64)
        self.classes_ = np.array([-1, 1])
        self.n_features_in_ = Xc.shape[2]
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Model outputs ``f(X_i; v_, p_)``, shape (n_samples,)."""
        if not hasattr(self, "v_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(X, y) first."
            )
        Xc = check_tokens(X)
        if Xc.shape[2] != self.n_features_in_:
            raise InvalidInputError(
                f"X has {Xc.shape[2]} features per token but the classifier was fitted with "
                f"{self.n_features_in_}."
            )
        if self.v_.ndim == 2:  # H heads
            return multihead_outputs(Xc, self.v_, self.p_)
        return outputs(Xc, self.v_, self.p_)

    def predict(self, X: Any) -> np.ndarray:
        """Labels in {-1, +1} (an output of exactly 0 maps to +1), shape (n_samples,)."""
        return np.where(self.decision_function(X) >= 0, 1, -1)

    def score(self, X: Any, y: Any) -> float:
        """Accuracy of :meth:`predict` against ``y``."""
        pred = self.predict(X)
        return float(np.mean(pred == check_labels(y, pred.shape[0])))

    def __repr__(self) -> str:
        defaults = {
            name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()
        }
        shown = [f"{k}={v!r}" for k, v in self.get_params().items() if v != defaults.get(k)]
        return f"{type(self).__name__}({', '.join(shown)})"


def _failure_warning() -> type[Warning]:
    """scikit-learn's ConvergenceWarning when scikit-learn is importable (not a dependency)."""
    try:
        from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
    except ImportError:
        return ConvergenceWarning
    return SklearnConvergenceWarning


def _default_radius(X: np.ndarray) -> float:
    """``DEFAULT_SCORE_RANGE / nu``; all-zero tokens have no scale (and no interpolator)."""
    nu2 = token_scale(X)
    if nu2 <= 0:
        raise InvalidInputError("All tokens are zero: every output is 0, so nothing interpolates.")
    return DEFAULT_SCORE_RANGE / math.sqrt(nu2)


def _solver_options(solver: Callable[..., Any], options: dict[str, Any] | None) -> dict[str, Any]:
    """``options`` as keyword arguments of ``solver``; unknown or fixed names raise."""
    options = dict(options or {})
    params = inspect.signature(solver).parameters
    fixed = {"X", "y", "R", "schedule", "steps", "step_size", "weight_decay", "seed", "heads"}
    unknown = sorted(k for k in options if k not in params or k in fixed)
    if unknown:
        allowed = sorted(k for k in params if k not in fixed)
        raise InvalidInputError(
            f"solver_options {unknown} are not options of {solver.__name__} (or are set by "
            f"the classifier's own parameters); allowed: {allowed}."
        )
    return options
